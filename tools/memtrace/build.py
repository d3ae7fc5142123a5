"""Build the Hugging Face model of a plan on `meta`, then swap in CPU FakeTensors.

docs/tracer.md §1a: building inside FakeTensorMode breaks on peft's Module.to() (swap_tensors refuses
tensors with weakrefs), so the model is built on meta and every parameter/buffer is replaced by a
FakeTensor of the same shape/stride/dtype; a memo keeps tied weights tied.
"""
from __future__ import annotations

import contextlib

import re

import torch
from torch import nn

from .hfconfig import hf_config_dict
from .plan import TracePlan
from .qlora import quantize_targets

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def precision_dtypes(plan: TracePlan) -> dict:
    """Weight / adapter / autocast dtypes per precision regime (what HF Trainer + peft do).

    full:   bf16-mixed / fp16-mixed: fp32 weights (master) + autocast; bf16-pure: bf16, no autocast;
            fp32: fp32, no autocast.
    lora/qlora: the frozen base is loaded in the half dtype (bf16 for bf16-*, fp16 for fp16-mixed,
            fp32 for fp32); adapters are fp32 under *-mixed (peft autocast_adapter_dtype=True) and
            run under autocast, bf16 under bf16-pure (no autocast).
    stack.peft_adapter_dtype overrides the adapter dtype: fp32 (PEFT >= 0.12 autocast_adapter_dtype=True)
    or base (the base layer's dtype: PEFT < 0.12, or a framework that casts the whole module); auto keeps
    the rule above.
    """
    p, peft = plan.precision, plan.method in ("lora", "qlora")
    half = torch.float16 if p == "fp16-mixed" else torch.bfloat16
    if p == "fp32":
        d = {"base": torch.float32, "adapter": torch.float32, "autocast": None}
    elif p == "bf16-pure":
        d = {"base": torch.bfloat16, "adapter": torch.bfloat16, "autocast": None}
    else:
        d = {"base": half if peft else torch.float32, "adapter": torch.float32, "autocast": half}
    ad = getattr(plan, "peft_adapter_dtype", "auto")
    if ad == "fp32":
        d["adapter"] = torch.float32
    elif ad == "base":
        d["adapter"] = d["base"]
    return d


def hf_config(plan: TracePlan, attn: str):
    from transformers import AutoConfig  # noqa: PLC0415
    d = hf_config_dict(plan.model)
    mt = d.pop("model_type")
    cfg = AutoConfig.for_model(mt, **d)
    cfg.use_cache = False
    return cfg


FLASH = "memtrace_fa"


def flash_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                            is_causal=None, **kwargs):
    """FlashAttention-2's memory profile on CPU FakeTensors (docs/tracer.md §1c).

    CPU SDPA with is_causal, enable_gqa and no mask runs _scaled_dot_product_flash_attention_for_cpu,
    which saves q, k and v (kv heads), the output and an fp32 logsumexp (b,a,s): FA2's saved set.
    Like FA2 it ignores the dense mask (causal and sliding windows are kernel arguments), keeps no
    dropout mask (FA2 regenerates it from the RNG state) and applies softcap in-kernel. Plain "sdpa"
    would instead materialise masks for sliding-window layers and fall back to the s^2 math kernel
    when dropout > 0 on CPU, neither of which happens on a GPU with FA2.
    """
    # transformers 5.x integrations/flash_attention.py flash_attention_forward: FA2 needs one head dim for q and
    # v, so a narrower value (MLA: v_head_dim < qk_head_dim) is padded to the query's and the output cropped
    # (CPU SDPA would otherwise fall back to the math kernel and keep the fp32 (b, a, s, s) probabilities)
    head_dim, v_head_dim = query.shape[-1], value.shape[-1]
    if v_head_dim != head_dim:
        value = torch.nn.functional.pad(value, [0, head_dim - v_head_dim])
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=query.shape[2] > 1, scale=scaling,
        enable_gqa=key.shape[1] != query.shape[1]).transpose(1, 2)
    if v_head_dim != head_dim:
        return out[..., :v_head_dim], None
    return out.contiguous(), None


def has_attention_interface() -> bool:
    """transformers >= 4.48 has AttentionInterface; older releases pick the attention class by name."""
    try:
        from transformers import AttentionInterface  # noqa: PLC0415, F401
    except ImportError:
        return False
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS  # noqa: PLC0415, F401
    except ImportError:
        return False
    return True


def register_flash() -> None:
    from transformers import AttentionInterface  # noqa: PLC0415
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS  # noqa: PLC0415
    AttentionInterface.register(FLASH, flash_attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(FLASH, unpadded_flash_mask)


def register_falcon_flash() -> None:
    """Falcon keeps its own attention classes (modeling_falcon.py FALCON_ATTENTION_CLASSES, picked by
    `config._attn_implementation`, not AttentionInterface): our kernel's name gets FalconFlashAttention2, the class a
    user with flash_attention_2 trains, and its `_flash_attention_forward` (inputs (b, s, a, d), output (b, s, a, d))
    our FA2 profile. FA2's mha_fwd allocates `empty_like(q)`, q being a (b, s, a, d) view of the rotary's
    (b, a, s, d) tensor, so the output keeps that layout and FalconFlashAttention2's `reshape` copies it for
    dense, as flash_attention_forward's `transpose(1, 2).contiguous()` does here."""
    from transformers.models.falcon import modeling_falcon as mf  # noqa: PLC0415

    def falcon_fa(query, key, value, attention_mask, query_length, dropout=0.0, **kwargs):
        return flash_attention_forward(None, query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                       None, dropout=dropout)[0]
    mf.FALCON_ATTENTION_CLASSES[FLASH] = mf.FalconFlashAttention2
    mf._flash_attention_forward = falcon_fa


def register_gpt_neo_flash() -> None:
    """GPT-Neo keeps its own attention classes too (modeling_gpt_neo.py GPT_NEO_ATTENTION_CLASSES: eager and
    flash_attention_2, no AttentionInterface, no SDPA): our kernel's name gets GPTNeoFlashAttention2, the class a
    user with flash-attn trains, and its `_flash_attention_forward` (inputs (b, s, a, d): views of q/k/v_proj's
    outputs; `softmax_scale=1.0`, GPT-Neo's unscaled scores; no window: the local layers run FA2 over the whole
    causal range as the class calls it) our FA2 profile. FA2's output is `empty_like(q)`, (b, s, a, d), so
    `reshape` is a view for out_proj, as the transpose of our (b, a, s, d) output is."""
    from transformers.models.gpt_neo import modeling_gpt_neo as mg  # noqa: PLC0415

    def gpt_neo_fa(query, key, value, attention_mask, query_length, dropout=0.0, softmax_scale=None, **kwargs):
        return flash_attention_forward(None, query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                       None, dropout=dropout, scaling=softmax_scale)[0]
    mg.GPT_NEO_ATTENTION_CLASSES[FLASH] = mg.GPTNeoFlashAttention2
    mg._flash_attention_forward = gpt_neo_fa


# the model_types whose attention classes are picked by name, not by AttentionInterface
OWN_FLASH = {"falcon": register_falcon_flash, "gpt_neo": register_gpt_neo_flash}


def unpadded_flash_mask(batch_size, q_length, kv_length, *args, attention_mask=None, **kwargs):
    """masking_utils.flash_attention_mask on the traced (never padded) batch: None, as FA2 gets for an all-ones 2-D
    mask. The real function decides with `attention_mask.all()`, which a FakeTensor cannot answer; BART's decoder
    makes such a mask itself (modeling_bart.py BartDecoder.forward `attention_mask = torch.ones(...)`)."""
    return None


def attn_impl(plan: TracePlan) -> str:
    """flash/sdpa -> FA2 profile (our registered kernel); eager -> HF eager.

    Without AttentionInterface (transformers < 4.48, or 4.48-4.5x without masking_utils) flash/sdpa run HF's
    own "sdpa" class of that release, as a user of that release gets without flash-attn installed.
    """
    if plan.attention == "eager":
        return "eager"
    if plan.attention == "sdpa" and getattr(plan, "vision_tokens", 0):
        # Mllama fed images: its cross-attention passes a 4-D mask, so a GPU runs SDPA's memory-efficient kernel
        # with it (modeling_mllama.py: _supports_flash_attn False); HF's own sdpa runs, CPU SDPA with the mask
        return "sdpa"
    if plan.attention == "sdpa" and isinstance(plan.model, dict) and plan.model.get("model_type") in SDPA_ONLY:
        # modeling_mistral_large4.py: _supports_flash_attn False; its sparse attention hands SDPA the indexer's
        # top-k as a boolean mask (b, 1, s, s) it builds per layer, so HF's own sdpa runs, CPU SDPA with the mask
        return "sdpa"
    return FLASH if has_attention_interface() else "sdpa"


SDPA_ONLY = ("mistral_large4", "minimax_m3_vl_text", "qwen4_exp_text")

# composites traced whole, as the engine counts them (model/composite.py): Mllama built as
# MllamaForConditionalGeneration, its vision tower and projector frozen (vision.trainable's default), fed text only
WHOLE_COMPOSITES = {"mllama": ("vision_model", "multi_modal_projector"),
                    # IdeficsForVisionText2Text fed its tower's output (trace.py image_inputs): the tower frozen
                    # (IdeficsConfig freeze_vision_layers, vision.trainable's default) and never run
                    "idefics": ("vision_model",),
                    "mistral_large4": ("vision_tower", "multi_modal_projector"),
                    "ernie4_5_vl_moe": ("vision_tower", "resampler_model"),
                    # tools/memtrace/more_moe_trace.py: their language models (towers frozen, never run)
                    "unlimited_ocr": ("vision_tower", "multi_modal_projector"),
                    "step3p7": ("vision_model", "multi_modal_projector"),
                    "hy_v4_vl": ("vision_tower",),              # tools/memtrace/hy_v4_trace.py: fed text only
                    "muse_spark": ("vision_tower", "vision_adapter", "vision_projection", "audio_tower")}
# IDEFICS' perceiver resampler, frozen with the tower where the config has one (the engine's "projector")
OPTIONAL_FROZEN = {"idefics": ("perceiver_resampler",)}


def lora_targets(plan: TracePlan, cfg):
    """PEFT's target_modules: the plan's names, or for a composite traced whole a regex over its language model's
    modules only (the plan's frozen tower has no adapters: zerocalc's memory/vision.py tower_adapters)."""
    names = "(" + "|".join(map(re.escape, plan.lora_targets)) + ")"
    if cfg.model_type == "idefics":     # no language_model: the decoder layers and the gated cross-attention layers
        return r"model\.(?:layers|gated_cross_attn_layers)\.\d+\..*\." + names
    if cfg.model_type in WHOLE_COMPOSITES:
        return r".*language_model\..*\." + names
    return list(plan.lora_targets)


def model_class(plan: TracePlan):
    """The auto class a plan trains: a causal LM, an encoder-decoder's seq2seq LM (those the engine counts whole:
    T5, M2M100 ... plan.py is_encoder_decoder; AutoModelForSeq2SeqLM, as run_summarization / Seq2SeqTrainer train
    them), or,
    for an encoder the engine costs without an LM head (BERT: zerocalc's ModelArch.causal_lm is false), a sequence
    classifier (pooler + num_labels head), as the HF guide's bert-large runs (AutoModelForSequenceClassification)
    train it."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification  # noqa: PLC0415
    if isinstance(plan.model, dict) and plan.model.get("model_type") in WHOLE_COMPOSITES:
        from transformers import AutoModelForImageTextToText  # noqa: PLC0415
        return AutoModelForImageTextToText
    if plan.encoder_decoder:
        from transformers import AutoModelForSeq2SeqLM  # noqa: PLC0415
        return AutoModelForSeq2SeqLM
    return AutoModelForCausalLM if plan.causal_lm else AutoModelForSequenceClassification



def step_labels(plan: TracePlan, ids):
    """Labels of the traced batch: the input ids (causal LM), one class per sequence (a classifier).

    An encoder-decoder gets the same (b, s) labels: its forward makes decoder_input_ids = shift_tokens_right(labels)
    (modeling_t5.py T5ForConditionalGeneration.forward `_shift_right`, modeling_bart.py BartForConditionalGeneration
    .forward), so the encoder and the decoder both run at the plan's seq_len, the engine's convention (model/
    classic.py t5: num_layers = encoder + decoder blocks, every block at seq_len · micro_batch tokens)."""
    return ids if plan.causal_lm else torch.zeros(ids.shape[0], dtype=torch.long)


def build_meta_model(plan: TracePlan, gc_context_fn=None):
    """-> (model on meta with GC/LoRA/QLoRA applied, hf config, dtypes)."""
    dt = precision_dtypes(plan)
    attn = attn_impl(plan)
    if attn == FLASH:
        register_flash()
    cfg = hf_config(plan, attn)
    if attn == FLASH and cfg.model_type in OWN_FLASH:
        OWN_FLASH[cfg.model_type]()
    kw = {"attn_implementation": attn}
    if getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None):
        kw["experts_implementation"] = "grouped_mm"    # the default on CUDA sm80+
    import transformers  # noqa: PLC0415
    dkw = {"dtype": dt["base"]} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": dt["base"]}
    auto = model_class(plan)
    if "experts_implementation" in kw and not auto._model_mapping[type(cfg)]._can_set_experts_implementation():
        # Llama 4 and JetMoE run their own expert code (modeling_llama4.py Llama4TextExperts: bmm over every
        # expert; modeling_jetmoe.py JetMoeParallelExperts): "... does not support setting experts implementation"
        kw.pop("experts_implementation")
    with torch.device("meta"):
        model = auto.from_config(cfg, **dkw, **kw)
    model.train()
    for part in WHOLE_COMPOSITES.get(cfg.model_type, ()):
        getattr(model.model, part).requires_grad_(False)
    for part in OPTIONAL_FROZEN.get(cfg.model_type, ()):
        if getattr(model.model, part, None) is not None:
            getattr(model.model, part).requires_grad_(False)
    gk = {"use_reentrant": False}
    if gc_context_fn is not None:
        gk["context_fn"] = gc_context_fn
    ckpt = plan.activation_checkpointing in ("full", "selective")
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gk)
    if plan.method == "qlora":
        with torch.device("meta"):
            quantize_targets(model, plan.lora_targets, plan.quant_type, plan.double_quant,
                             DTYPES.get(plan.compute_dtype, torch.bfloat16), dt["base"],
                             keep_input=getattr(plan, "bitsandbytes", "current") == "0.42")
    kbit = getattr(plan, "kbit_prepare", "auto")
    if plan.method in ("lora", "qlora") and kbit in (True, "trl-bf16"):
        # peft.prepare_model_for_kbit_training (peft/utils/other.py): freezes the base, casts every 16-bit
        # parameter that is not a bnb Params4bit to fp32, and (for a k-bit model) enables checkpointing
        from peft import prepare_model_for_kbit_training  # noqa: PLC0415
        model.is_loaded_in_4bit = plan.method == "qlora"
        with torch.device("meta"):
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=ckpt,
                                                    gradient_checkpointing_kwargs=gk)
    if plan.method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model  # noqa: PLC0415
        lc = LoraConfig(r=plan.lora_rank, lora_alpha=plan.lora_alpha, lora_dropout=plan.lora_dropout,
                        target_modules=lora_targets(plan, cfg),
                        task_type="SEQ_2_SEQ_LM" if plan.encoder_decoder else "CAUSAL_LM")
        with torch.device("meta"):
            import inspect  # noqa: PLC0415
            # PEFT < 0.12 has no autocast_adapter_dtype (its adapters take the base dtype; fakeify sets them anyway)
            akw = ({"autocast_adapter_dtype": False}
                   if "autocast_adapter_dtype" in inspect.signature(get_peft_model).parameters else {})
            model = get_peft_model(model, lc, **akw)
        if kbit == "trl-bf16":
            with torch.device("meta"):
                trl_casting_to_bf16(model)
    return model, cfg, dt


def trl_casting_to_bf16(model: nn.Module) -> None:
    """TRL 0.9-0.24 ``peft_module_casting_to_bf16`` (trl/trainer/utils.py), which SFTTrainer runs after
    prepare_model_for_kbit_training and get_peft_model under ``args.bf16``: every module whose name holds "norm"
    to fp32, and the fp32 lm_head / embed_tokens / wte / wpe back to bf16 (copied: TRL is not in the tools venv)."""
    for name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm) or "norm" in name:
            module.to(torch.float32)
        elif any(x in name for x in ["lm_head", "embed_tokens", "wte", "wpe"]):
            if hasattr(module, "weight") and module.weight.dtype == torch.float32:
                module.to(torch.bfloat16)


def fakeify(model: nn.Module, fake_mode, adapter_dtype) -> dict:
    """Replace params/buffers by CPU FakeTensors (ties kept); LoRA params get `adapter_dtype`.

    Returns {"lora": [params], "buffers": [tensors]} for labelling.
    """
    memo: dict[int, torch.Tensor] = {}
    lora, buffers = [], []
    with fake_mode:
        for mname, mod in model.named_modules():
            is_lora = ".lora_" in f".{mname}" or mname.startswith("lora_")
            for n, p in list(mod._parameters.items()):
                if p is None:
                    continue
                if id(p) not in memo:
                    dtype = adapter_dtype if is_lora else p.dtype
                    memo[id(p)] = nn.Parameter(torch.empty_strided(p.shape, p.stride(), dtype=dtype, device="cpu"),
                                               requires_grad=p.requires_grad)
                    if is_lora:
                        lora.append(memo[id(p)])
                mod._parameters[n] = memo[id(p)]
            for n, b in list(mod._buffers.items()):
                if b is None:
                    continue
                if id(b) not in memo:
                    memo[id(b)] = torch.empty_strided(b.shape, b.stride(), dtype=b.dtype, device="cpu")
                    buffers.append(memo[id(b)])
                mod._buffers[n] = memo[id(b)]
    return {"lora": lora, "buffers": buffers}


@contextlib.contextmanager
def hf_patches():
    """Undo HF's "FakeTensor means tracing" packed-sequence guess (docs/tracer.md §1b).

    transformers.masking_utils.find_packed_sequence_indices cannot prove a fake batch unpacked and
    returns a packed mask, which materialises a (b,1,s,s) mask per layer and disables GQA in SDPA.
    A real unpacked batch returns None, so we return None.
    """
    try:
        import transformers.masking_utils as mu  # noqa: PLC0415
        orig = mu.find_packed_sequence_indices
    except (ImportError, AttributeError):        # transformers < 4.53: no packed-sequence detection
        yield
        return
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = orig


@contextlib.contextmanager
def no_global_attention(enabled: bool):
    """LEDEncoder.forward (modeling_led.py) asks `is_index_global_attn.flatten().any().item()`, which a FakeTensor
    cannot answer. The traced batch carries no global_attention_mask (as run_summarization trains LED), so the
    real answer is False: every token attends its sliding window only. While enabled (an LED plan), `.item()` of a
    one-element fake bool tensor returns False; any other `.item()` is left as it is."""
    from torch._subclasses.fake_tensor import FakeTensor  # noqa: PLC0415
    orig = torch.Tensor.item

    def item(self):
        if isinstance(self, FakeTensor) and self.dtype == torch.bool and self.numel() == 1:
            return False
        return orig(self)

    if enabled:
        torch.Tensor.item = item
    try:
        yield
    finally:
        torch.Tensor.item = orig


@contextlib.contextmanager
def unpadded_lengths(enabled: bool, seq_len: int):
    """XLMModel.forward (modeling_xlm.py) checks `assert lengths.max().item() <= slen`, lengths counting the non-pad
    ids of each row, which a FakeTensor cannot answer. The traced batch has no padding (its ids are not pad_index),
    so the real answer is slen: while enabled (an XLM plan), `.item()` of a one-element fake integer tensor returns
    seq_len; any other `.item()` is left as it is."""
    from torch._subclasses.fake_tensor import FakeTensor  # noqa: PLC0415
    orig = torch.Tensor.item

    def item(self):
        if isinstance(self, FakeTensor) and not self.dtype.is_floating_point and self.dtype != torch.bool \
                and self.numel() == 1:
            return seq_len
        return orig(self)

    if enabled:
        torch.Tensor.item = item
    try:
        yield
    finally:
        torch.Tensor.item = orig


@contextlib.contextmanager
def fsmt_no_padding(enabled: bool):
    """modeling_fsmt.py make_padding_mask asks `if not padding_mask.any()`, which a FakeTensor cannot answer. The
    traced batch is torch.zeros and FSMT's pad_token_id is 1 (facebook/wmt19-*), so no token is padding and the real
    answer is None (no decoder padding mask). While enabled (an FSMT plan), make_padding_mask returns None."""
    if not enabled:
        yield
        return
    import transformers.models.fsmt.modeling_fsmt as fsmt  # noqa: PLC0415
    orig = fsmt.make_padding_mask
    fsmt.make_padding_mask = lambda input_ids, padding_idx=1: None
    try:
        yield
    finally:
        fsmt.make_padding_mask = orig


@contextlib.contextmanager
def cuda_like_dropout():
    """CPU F.dropout saves a mask in the input dtype; CUDA calls native_dropout and saves a bool mask.

    Route F.dropout to aten.native_dropout for the CUDA profile (docs/tracer.md §1i).
    """
    F = torch.nn.functional
    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        return torch.ops.aten.native_dropout(input, p, True)[0]

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = orig


class _GroupedMMEmulated(torch.autograd.Function):
    """Shape/storage-faithful stand-in for torch grouped_mm on non-bf16 inputs.

    The CPU/meta grouped_mm accepts bf16 only; with fp32 master weights (bf16-mixed full FT of a MoE,
    where transformers casts the input to the weight dtype) we keep grouped_mm's allocations: forward
    output (S, N), saved input and weight; backward grad_input (S, K) and grad_weight (E, K, N).
    """

    @staticmethod
    def forward(ctx, x, w, offs):
        ctx.save_for_backward(x, w)
        return x.new_empty(x.shape[0], w.shape[-1])

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = x.new_empty(x.shape) if ctx.needs_input_grad[0] else None
        gw = w.new_empty(w.shape) if ctx.needs_input_grad[1] else None
        return gx, gw, None


@contextlib.contextmanager
def grouped_mm_any_dtype():
    try:
        from transformers.integrations import moe  # noqa: PLC0415
        orig = moe._grouped_mm
    except (ImportError, AttributeError):        # transformers 4.x: experts are one nn.Linear each
        yield
        return

    def gmm(input, weight, offs):
        if weight.dtype == torch.bfloat16:
            return orig(input, weight, offs)
        return _GroupedMMEmulated.apply(input.to(weight.dtype), weight, offs)

    moe._grouped_mm = gmm
    try:
        yield
    finally:
        moe._grouped_mm = orig
