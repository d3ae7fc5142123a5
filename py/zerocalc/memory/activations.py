"""Activations of the whole model: every block's saved set (memory/blocks.py), checkpointing, the head,
autocast's weight copies and activation offloading.

Traced on the real HF/PEFT training step on fake tensors (docs/tracer.md §3): per block within 0.1 % for
Llama 3.2 1B and Llama 3.1 8B, and within 3 % per component over the whole CI grid (tools/memtrace).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Linear, ModelArch
from ..plan import Plan
from .blocks import MASK, Ctx, SavedSet, linear, rmsnorm
from .blocks_bart import checkpointed_inputs as bart_checkpointed_inputs
from .blocks_bart import layer_saved_bytes, never_run, outside_blocks
from .blocks_families import LAYERNORM_HEADS, final_norm
from .blocks_moe import RULES as FAMILY_RULES
from .blocks_seq2seq import encoder_decoder
from .ssm_blocks import checkpointed_inputs, ssm_final_norm
from .logits import LITGPT_CHUNK
from .blocks_gemma4 import GEMMA4, checkpointed_kv, gemma4_outside
from .blocks_minimax_m3 import MODEL_TYPES as MINIMAX_M3       # MiniMaxM3VLRMSNorm: Gemma's fp32 product
from .blocks_mistral_large4 import checkpointed_topk
from .ernie_vl import rope_cos_sin
from .blocks_cross import cross_layer, cross_layer_bytes, cross_layers_run, cross_shared_bytes, idle_tensors, skipped_layers
from .lora import Adapter, adapter_params, adapters_per_layer, block_linears_per_layer, layer_adapters
from .precision import Dtypes
from .stack import Stack, effective_stack


@dataclass(frozen=True)
class Activations:
    layers: tuple[int, ...]      # saved bytes per layer without checkpointing
    stack_saved: int             # what the stack keeps until backward (checkpointing applied)
    head_saved: int              # final norm + rotary cos/sin (logits are separate: memory/logits.py)
    recompute_layer: int         # one layer's saved set rebuilt during backward (checkpointing)
    layer_backward_temp: int     # the gradient flowing between layers (2·s·b·h in the compute dtype)
    autocast_weight_copies: int  # 16-bit weight copies autocast caches and the matmuls keep for backward
    autocast_cache_forward: int  # copies cached during forward but not kept (checkpointed layers)
    host_offloaded: int          # bytes moved to host by activation offloading
    quant_inputs: int = 0        # bitsandbytes < 0.43.2: every 4-bit layer's input held as a ctx attribute
    expert_grad_top: int = 0     # the top layer's gate_up weight-gradient moment over the saved stack (MoE)

    @property
    def saved_total(self) -> int:
        return self.stack_saved + self.head_saved + self.autocast_weight_copies


QUANT_COMPUTE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def context(plan: Plan, arch: ModelArch, dt: Dtypes, first: bool, stack: Stack) -> Ctx:
    s, b = plan.seq_len, plan.micro_batch_size
    # FSDP1 with LoRA inside the layer units: the frozen weights are views of a flat parameter that requires
    # grad, so autograd saves what full fine-tuning saves (tools/fsdpprobe lit_s3w2_lora)
    train_base = plan.method == "full" or stack.fsdp_adapters_in_units
    return Ctx(tokens=s * b, seq=s, batch=b, e=dt.compute, res=dt.weight if plan.method == "full" else dt.frozen,
               autocast=dt.autocast, train_base=train_base, adapter_bytes=dt.adapter,
               dropout=plan.lora.dropout if plan.method != "full" else 0.0, attention=plan.attention,
               first_layer=first,
               quant_input=QUANT_COMPUTE_BYTES[plan.quantization.compute_dtype] if stack.bnb_keeps_inputs else 0,
               quant_out_as_input=plan.method == "qlora" and plan.quantization.type in ("nf4", "fp4"),
               compiled=stack.compile != "none", fused_gelu=stack.trainer in ("litgpt", "torchtune"),
               kv_expanded=(plan.attention == "sdpa" and stack.loss_path in ("hf445", "hf446"))
               or stack.trainer in ("litgpt", "torchtune"),
               fp32_norm_out=stack.trainer == "torchtune", fused_norm=stack.trainer == "torchtitan",
               own_model=stack.trainer in ("litgpt", "torchtune", "torchtitan"),
               # compiled, SDPA's output and o_proj's contiguous input are two tensors (tools/memtrace/compiled.py)
               attn_out_copied=(plan.attention == "sdpa" and (stack.loss_path == "hf446" or stack.compile != "none"))
               or stack.trainer == "litgpt")


def _head_saved(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack) -> int:
    """Outside the blocks: the final norm, lm_head's input (when lm_head trains), the rotary cos/sin
    (two (1, s, head_dim) tensors in the residual dtype; none under torchtune) and input ids / labels (int64)."""
    if not arch.causal_lm:
        return 0
    c = context(plan, arch, dt, False, stack)
    t, h = c.tokens, arch.hidden_size
    ss = SavedSet()
    ss.save("ids_labels", 16 * t)
    y_bytes = 4 if c.autocast and arch.family not in ("llama", "gemma", "t5") else c.res
    if arch.ssm is not None:
        y, y_bytes = ssm_final_norm(ss, c, h, arch.ssm)
    elif arch.bart is not None:
        # memory/blocks_bart.py: BART-lineage causal decoders; PEFT with checkpointing makes the embedding output
        # require grad (enable_input_require_grads)
        y, y_bytes = outside_blocks(ss, c, arch, plan.method != "full" and plan.activation_checkpointing == "full")
    elif arch.family in ("llama", "gemma", "t5"):
        y = (final_norm(ss, c, arch, "resid_final") if arch.model_type in LAYERNORM_HEADS
             else rmsnorm(ss, c, "final_norm", "resid_final", h,
                          # Qwen3NextRMSNorm / Qwen3_5RMSNorm: Gemma's `output * (1.0 + self.weight.float())`
                          arch.family == "gemma" or arch.deltanet is not None or arch.model_type in MINIMAX_M3))
        if stack.trainer != "torchtune":
            # torchtune's RoPE multiplies by slices of its fp32 cache buffer, which is all it saves
            # (models/llama3_1/_position_embeddings.py:181-184 Llama3ScaledRoPE.forward; traced)
            # LlamaRotaryEmbedding returns cos/sin .to(x.dtype), x the embedding output: bf16 after TRL's cast
            emb = 2 if stack.kbit_bf16_ends else c.res
            ss.save("rope_cos_sin", rope_cos_sin(arch, plan.seq_len, plan.micro_batch_size, emb))
            if arch.model_type in GEMMA4:
                gemma4_outside(ss, c, arch, plan.seq_len, emb,    # memory/blocks_gemma4.py
                               plan.activation_checkpointing == "full")
    else:
        ss.save("ln_f.in", (4 if c.autocast else c.res) * t * h)
        ss.save("ln_f.stats", 4 * t)
        y = "ln_f.out"
        if arch.dropout > 0:
            ss.save("embed_drop_mask", MASK * t * h)
    head_adapter = _lm_head_adapter(plan, arch)
    linear(ss, c, y, y_bytes, Linear("lm_head", h, arch.vocab_size), head_adapter)
    if plan.method != "full" and "lm_head" in plan.lora.modules_to_save:
        ss.save(y, y_bytes * t * h)              # the trainable lm_head copy keeps its input for its gradient
    return ss.total


def _lm_head_adapter(plan: Plan, arch: ModelArch) -> Adapter | None:
    if plan.method != "full" and "lm_head" in plan.lora.targets:
        return Adapter("lm_head", arch.hidden_size, arch.vocab_size, plan.lora.rank)
    return None


def selective_op_layer(plan: Plan, arch: ModelArch, dt: Dtypes) -> int:
    """torchtitan's op-level selective checkpointing (torchtitan 0.3.0 distributed/activation_checkpoint.py
    `SelectiveAC._wrap_block`: the outputs of the save set, `compute_intensive_ops` (aten.mm among them) and
    the attention op, are kept, except every second mm of the block, counted per block forward). 0.3.0's
    Llama 3 fuses wq/wk/wv into one `wqkv` (models/llama3/__init__.py `_build_llama3_layers(fuse_qkv=True)`),
    so the block's mms run wqkv, wo, w1, w3, w2 and wqkv (h + 2kv), w1 (I) and w2 (h) are kept; with the
    attention output (h) and its fp32 logsumexp, and the block input the checkpoint wrapper keeps (h):
    2·t·(4h + 2kv + I) + 4·a·t bytes in 16 bits. Traced on fake tensors (tools/memtrace/titan.py,
    titan-l1b-full-selop: 68 MiB per 1B layer at s 2048)."""
    t, e = plan.seq_len * plan.micro_batch_size, dt.compute
    return e * t * (4 * arch.hidden_size + 2 * arch.kv_dim + arch.intermediate_size) + 4 * arch.num_heads * t


def _selective(plan: Plan) -> Plan:
    """Selective recomputation (Korthikanti et al. 2022 §4): the attention core is recomputed, so the
    s² tensors are never kept; the rest of the block is kept as without checkpointing."""
    return plan.with_changes(attention="flash") if plan.attention == "eager" else plan


def activations(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack | None = None) -> Activations:
    """The step's activations; ``stack`` is the plan's resolved stack (memory/inputs.py resolves it once)."""
    st = stack or effective_stack(plan)
    base = _selective(plan) if plan.activation_checkpointing == "selective" else plan
    per_layer_linears = block_linears_per_layer(arch)
    layers = []
    cache: dict = {}
    per_layer_adapters = adapters_per_layer(arch, plan) if plan.method != "full" else [()] * len(per_layer_linears)
    skipped = skipped_layers(arch, plan)         # memory/blocks_cross.py: Mllama's cross-attention, text only
    cross, cross_ss = cross_layers_run(arch, plan), None     # ... or fed image tokens
    frozen = frozen_layers(arch) if plan.method == "full" else frozenset()
    for i, (lins, adapters) in enumerate(zip(per_layer_linears, per_layer_adapters)):
        if i in skipped:
            layers.append(0)
            continue
        if i in frozen:
            # a block the modelling code froze (IDEFICS' freeze_text_layers) under full fine-tuning: its weights
            # take no gradient, its input does (a trained gated cross-attention layer runs before it)
            c = replace(context(base, arch, dt, False, st), train_base=False)
            layers.append(layer_saved_bytes(arch, c, lins, adapters))
            continue
        if i in cross:
            cross_ss = cross_layer(arch, context(base, arch, dt, i == 0, st), lins, adapters,
                                   plan.vision.tokens_per_sample)
            layers.append(cross_layer_bytes(cross_ss))
            continue
        k = (id(lins), i == 0)
        if k not in cache:
            cache[k] = layer_saved_bytes(arch, context(base, arch, dt, i == 0, st), lins, adapters)
        layers.append(cache[k])
    t = plan.seq_len * plan.micro_batch_size
    h = arch.hidden_size
    res = dt.weight if plan.method == "full" else dt.frozen
    # T5 / BART-layer encoder-decoders: both stacks' blocks and the tensors between them (memory/blocks_seq2seq.py)
    ed = encoder_decoder(arch, context(base, arch, dt, True, st), context(base, arch, dt, False, st),
                         per_layer_linears[0], per_layer_adapters[0], _lm_head_adapter(plan, arch),
                         plan.method != "full" and plan.activation_checkpointing == "full")
    if ed is not None:
        layers = list(ed.layers)
        cache = {(id(lins), False): max(layers) for lins in per_layer_linears}
    # a layer's whole saved set (the recompute's); the loop above computed it unless selective changed the plan
    full_layer = max(cache[(id(lins), False)] if base is plan and (id(lins), False) in cache
                     else layer_saved_bytes(arch, context(plan, arch, dt, False, st), lins,
                                            layer_adapters(arch, plan, lins) if plan.method != "full" else ())
                     for lins in {id(x): x for x in per_layer_linears}.values())
    shared = 0
    if cross_ss is not None:
        shared = cross_shared_bytes(cross_ss, context(base, arch, dt, False, st), plan.vision.tokens_per_sample, h,
                                    plan.activation_checkpointing == "full")
        full_layer = max(full_layer, max(layers[i] for i in cross))
    if plan.activation_checkpointing == "full":
        # HF gradient_checkpointing (non-reentrant): each decoder layer keeps only its input.
        stack = (arch.num_layers - len(skipped)) * res * t * h + (ed.ckpt_extra if ed else 0) + shared
        if arch.model_type in GEMMA4:
            stack += checkpointed_kv(arch, 2 if dt.autocast else dt.compute, t)
        stack += checkpointed_topk(arch, plan.micro_batch_size, plan.seq_len)     # Mistral Large 4's DSA indices
        if st.kbit_bf16_ends:
            # layer 0's input is the bf16 embedding output (TRL's cast); the fp32 stream starts at layer 0's MLP
            stack -= (res - 2) * t * h
        recompute = full_layer
        if plan.attention == "eager":
            # The recompute's peak is the softmax backward: the fp32 softmax output, its fp32 gradient
            # and the softmax-backward output (12·a·s²·b) - the MLP's tensors are already gone (traced).
            flash = layer_saved_bytes(arch, context(plan.with_changes(attention="flash"), arch, dt, False, st),
                                      per_layer_linears[-1], layer_adapters(arch, plan, per_layer_linears[-1])
                                      if plan.method != "full" else ())
            scores = arch.num_heads * plan.seq_len * plan.seq_len * plan.micro_batch_size
            recompute = max(flash, 12 * scores + 8 * (2 if dt.autocast else dt.compute) * t * h)
        if arch.moe:
            # the peak of a recomputed MoE layer is inside the experts' backward: the weighted outputs
            # and the down-projection input are consumed, and the gradients of gate/up/product are in
            # flight (3 x the expert width per routed token; traced, mixtral)
            e_m = 2 if dt.autocast else dt.compute
            routed = routed_rows(arch, t)
            # frozen experts keep no product (memory/blocks.py sparse_moe): none to subtract. Under eager attention the
            # recompute is the softmax backward's (above), not traced with MoE: kept as it was
            trained = plan.attention == "eager" or _experts_trained(plan, arch, st, per_layer_linears)
            prod = arch.moe.expert_intermediate if trained else 0
            if arch.model_type in EVERY_EXPERT:
                # Llama 4: the non-reentrant checkpoint recomputes at the layer backward's first unpack, after
                # `sum(dim=0)`'s backward has expanded the MoE output's gradient to every expert's rows (a copy,
                # e·E·t·h); the peak is the recomputed down bmm: its output beside it and, with frozen experts,
                # its input (the product) and the scores-weighted input, not saved but alive as Llama4TextMoe's
                # locals (traced: llama4-text-4l-lora-attn-s512-ckpt, 0.297 GiB at the recompute's bmm)
                no_saved = 0 if trained else e_m * routed * (h + arch.moe.expert_intermediate)
                recompute = max(recompute, full_layer + 2 * e_m * routed * h + no_saved)
            else:
                recompute = recompute - e_m * routed * (h + prod) + 3 * e_m * routed * arch.moe.expert_intermediate
        if plan.attention == "eager" and ed is None:
            # the 4-D (b, 1, s, s) mask is a checkpoint input of every layer (one tensor): bool in the
            # Llama lineage (masking_utils), additive 16-bit in GPT-2/BERT
            mask_bytes = 1 if arch.family in ("llama", "gemma", "t5") else 2
            masks = 2 if arch.family == "gemma" else 1          # Gemma: a sliding-window and a global mask
            stack += masks * mask_bytes * plan.seq_len * plan.seq_len * plan.micro_batch_size
        if (arch.family not in ("llama", "gemma", "t5") and arch.model_type not in FAMILY_RULES and ed is None
                and arch.bart is None):
            # GPT-2 lineage: the dropped-out embedding output is kept besides the block inputs (traced); not in
            # OPT, GPT-NeoX, GPT-J, Phi (tools/memtrace/golden/families/*-gc-*: the block inputs and the head only)
            stack += res * t * h
        if arch.ssm is not None:
            # ssm_blocks.py: residual_in_fp32 keeps fp32 inputs
            stack = checkpointed_inputs(arch, res, t, 2 if dt.autocast else dt.compute)
        elif arch.bart is not None and ed is None:
            # the layer inputs, fp32 after a LayerNorm under autocast (blocks_bart.py), beside the mask above
            stack += bart_checkpointed_inputs(arch, res, dt.autocast, t) - arch.num_layers * res * t * h
    elif plan.activation_checkpointing == "selective-op":
        stack = arch.num_layers * selective_op_layer(plan, arch, dt)
        recompute = 0
    else:
        stack = sum(layers) + (ed.extra if ed else 0) + shared
        recompute = 0
    head = ed.head if ed else _head_saved(plan, arch, dt, st)
    e = 2 if dt.autocast else dt.compute
    temp = e * t * h
    top_sparse = any(lin.count > 1 for lin in per_layer_linears[-1])
    expert_grad, expert_top = _expert_grad_temp(plan, arch, dt, st, t, top_sparse), 0
    if expert_grad:
        # a moment of its own in a layer's backward, at its gate_up grouped matmul: the layer's gate_up output,
        # activation, product and weighted outputs are consumed by then. With checkpointing, inside the
        # recomputed layer (traced: 58 MiB of mixtral-2l-full-s512-ckpt's activations at its peak = two layer
        # inputs + 170 - 120); without, in the top layer with every other layer's saved set alive (220 MiB of
        # mixtral-2l-full-s512's = 2 x 170 - 120)
        moe, e_m = arch.moe, 2 if dt.autocast else dt.compute
        acts = 4 if arch.model_type == "gpt_oss" else 1          # memory/blocks.py sparse_moe
        # Llama 4's experts weight their input, not their output: no weighted outputs (memory/blocks_families.py
        # _llama4_moe)
        out_w = 0 if arch.model_type in EVERY_EXPERT else h
        tail = e_m * routed_rows(arch, t) * ((3 + acts) * moe.expert_intermediate + out_w)
        if arch.model_type == "dbrx":
            # DBRX's moment comes at the second expert its backward visits: one expert's share of the top layer's
            # expert tensors is consumed (memory/blocks_moe.py dbrx_block: 3h + 4I per routed row)
            tail = e_m * routed_rows(arch, t) // moe.num_experts * (4 * moe.expert_intermediate + 3 * h)
        elif arch.model_type == "jetmoe":
            # JetMoE's, in the MLP's input_linear backward: its output_linear's loop, silu and the product are done
            # (memory/blocks_moe.py jetmoe_block: gate/up, silu, product, output, gated output per routed row)
            tail = e_m * routed_rows(arch, t) * (4 * moe.expert_intermediate + 2 * h)
        if plan.activation_checkpointing == "full":
            recompute = max(recompute, full_layer - tail + expert_grad)
        elif plan.activation_checkpointing == "none":
            expert_top = max(0, expert_grad - tail)
        else:
            temp += expert_grad                                  # selective: not traced with MoE
    # Autocast caches a 16-bit copy of every fp32 weight a matmul reads (cache_enabled, until forward
    # ends) and the matmul keeps it for the backward: the whole linear stack under AMP (the tied
    # embedding too, as lm_head), or the fp32 LoRA adapters under HF Trainer bf16=True. Checkpointed
    # layers keep nothing: their copies die at forward end and are cast again in the recompute; only
    # lm_head's copy (outside the checkpointed layers) stays saved (traced).
    copies = 0
    idle = {id(tt) for tt in idle_tensors(arch, plan)}
    if dt.autocast and plan.method == "full" and dt.weight == 4:
        copies = 2 * sum(tt.numel for tt in arch.tensors if tt.linear and not never_run(arch, tt.module)
                         and id(tt) not in idle)
        if arch.tied_embeddings and arch.causal_lm:
            copies += 2 * arch.vocab_size * h
    elif dt.autocast and plan.method != "full" and dt.adapter == 4:
        copies = 2 * (adapter_params(arch, plan) - skipped_adapter_params(per_layer_adapters, skipped))
        if dt.frozen == 4 and plan.method == "lora":
            # fp32 frozen weights (Fabric bf16-mixed): autocast caches only leaves that require grad, so each
            # call casts a new 16-bit copy and the matmul keeps it for its input's gradient; LitGPT's LoRA loop
            # runs lm_head once per 128-position chunk, each chunk with its own copy (traced: lit-l1b-lora-mixed;
            # layer 0's q/k/v input needs no gradient and keeps none, counted anyway: 2·h·(h + 2·kv) bytes)
            calls = -(-plan.seq_len // LITGPT_CHUNK) if st.trainer == "litgpt" else 1
            copies += 2 * sum(tt.numel for tt in arch.tensors if tt.linear and not never_run(arch, tt.module))
            copies += 2 * arch.vocab_size * h * calls if arch.causal_lm else 0
    cache_forward = 0
    if copies and plan.activation_checkpointing == "full":
        kept = 2 * arch.vocab_size * h if plan.method == "full" and arch.causal_lm else 0
        cache_forward, copies = copies - kept, kept
    quant_inputs = _quant_inputs(plan, arch) if st.bnb_keeps_inputs else 0
    if quant_inputs and plan.activation_checkpointing == "full":
        if st.reentrant_checkpointing:
            # reentrant checkpointing runs the layers' forward under no_grad: MatMul4Bit sees no input needing a
            # gradient and keeps nothing (ctx.tensors = (None, None)); the recompute's graph dies with its backward
            quant_inputs = 0
        else:
            # MatMul4Bit keeps A as ctx.tensors, an attribute the non-reentrant checkpoint's saved-tensor hooks
            # never see: the layers keep every 4-bit input (traced: tools/memtrace/golden/stacks, bnb042 rows)
            stack += quant_inputs
    if plan.method == "qlora" and dt.autocast and dt.frozen == 4 and arch.causal_lm and not st.kbit_bf16_ends:
        # kbit_prepare makes lm_head's weight fp32: autocast caches its 16-bit copy and the matmul keeps it (TRL's
        # bf16 cast gives the head back its 16-bit weight, which autocast reads as is)
        copies += 2 * arch.vocab_size * h
    offloaded = 0
    if plan.activation_offloading:
        # torchtune OffloadActivations: saved tensors stream to host; about two layers stay resident.
        keep = min(stack, 2 * max(layers) if plan.activation_checkpointing != "full" else 2 * res * t * h)
        offloaded, stack = stack - keep, keep
    return Activations(layers=tuple(layers), stack_saved=stack, head_saved=head, recompute_layer=recompute,
                       layer_backward_temp=temp, autocast_weight_copies=copies, expert_grad_top=expert_top,
                       autocast_cache_forward=cache_forward, host_offloaded=offloaded, quant_inputs=quant_inputs)


def frozen_layers(arch: ModelArch) -> frozenset:
    """The decoder layers whose own block (``ModelArch.config_frozen``) the modelling code froze."""
    if not arch.config_frozen:
        return frozenset()
    names = set(arch.config_frozen)
    return frozenset(t.layer for t in arch.tensors if t.name in names and t.layer is not None)


def skipped_adapter_params(per_layer_adapters, skipped: frozenset) -> int:
    """The adapters of the layers a step skips (memory/blocks_cross.py): never run, so never cast or trained."""
    return sum(a.numel for i in skipped for a in per_layer_adapters[i])


def _quant_inputs(plan: Plan, arch: ModelArch) -> int:
    """The distinct inputs of one block's 4-bit linears, in the quantization compute dtype, over all layers:
    the Llama lineage's q/k/v input, o_proj's input, gate/up's input and down_proj's input (6·s·b·h + 2·s·b·I
    per layer in bf16 for a multi-head-width attention); other blocks: every linear's input."""
    t = plan.seq_len * plan.micro_batch_size
    e = QUANT_COMPUTE_BYTES[plan.quantization.compute_dtype]
    total = 0
    for lins in block_linears_per_layer(arch):
        names = {lin.name: lin for lin in lins if lin.count == 1}
        if arch.family in ("llama", "gemma") and "down_proj" in names:
            widths = [arch.hidden_size, names["o_proj"].d_in if "o_proj" in names else arch.q_dim,
                      arch.hidden_size, names["down_proj"].d_in]
        else:
            widths = [lin.d_in for lin in names.values()]
        total += e * t * sum(widths)
    return total


EVERY_EXPERT = ("llama4_text", "llama4")         # Llama 4 text, and the composite whose text model it is


def routed_rows(arch: ModelArch, t: int) -> int:
    """The rows the experts' matmuls run on: t·k routed tokens (transformers' MoE experts), or every token through
    every expert (modeling_llama4.py Llama4TextMoe: `hidden_states.repeat(E, 1)` times the router's scores)."""
    return t * (arch.moe.num_experts if arch.model_type in EVERY_EXPERT else arch.moe.experts_per_token)


def _expert_grad_temp(plan: Plan, arch: ModelArch, dt: Dtypes, st: Stack, t: int, top_sparse: bool = True) -> int:
    """Full fine-tuning of fused 3-D experts, layer 0 sparse: the backward of layer 0's gate_up grouped matmul
    (transformers 5.24 integrations/moe.py _grouped_linear: torch._grouped_mm(x, weight.transpose(-2, -1)))
    holds a second gate_up-sized gradient (E·2I·h in the gradient dtype) beside the stored gradients, with the
    gradient of its output (t·k·2I) and of its gathered input (t·k·h) in the compute dtype. Traced (tests/data/
    moe_families_trace.json): one such copy in Mixtral, OLMoE, GraniteMoE (input_linear) and gpt-oss. A dense
    layer 0 (DeepSeek first_k_dense_replace) runs last: the sparse layers' transient passes before the
    embedding's and layer 0's gradients exist, and is not counted. Only where the gradients exist before the
    backward (accumulation steps > 1, or torch 1.x's zero_grad keeping them): the new gradient is then added
    into .grad; on the first micro-step AccumulateGrad steals it (traced, gradient_accumulation_steps 1: no such
    temporary, mixtral-2l-full-s512-ga1). Single process and DDP only: DeepSpeed's and FSDP's gradient hooks
    were not traced with MoE. Llama 4 (interleaved dense layers, its own bmm experts: every expert on every
    token) has the moment in its top sparse layer (traced: llama4-text-4l-full-s512, layers 1 and 3 sparse: the
    16·2048·4096 bf16 gradient, the gate_up output's and the input's gradients, 0.348 GiB of temporaries)."""
    moe = arch.moe
    if moe is None or plan.method != "full" or plan.framework not in ("single", "ddp"):
        return 0
    ie, h = moe.expert_intermediate, arch.hidden_size
    if arch.model_type == "dbrx":
        # modeling_dbrx.py DbrxExperts: `self.mlp.w1.view(-1, I, h)[expert_idx]` is a select, whose backward
        # (select_backward) writes each expert's (I, h) gradient into a zero tensor of the whole (E·I, h) weight;
        # autograd sums those per parameter before AccumulateGrad, so w1, v1 and w2 each hold a full-size buffer
        # while the next expert's adds a fourth, beside that expert's three (I, h) slice gradients, on every
        # micro-step (traced: dbrx-2l-full-s512, 896 + 42 MiB of temporaries at select_backward)
        return dt.grad * (4 * moe.num_experts + 3) * ie * h
    if arch.model_type == "jetmoe":
        # modeling_jetmoe.py JetMoeParallelExperts: `F.linear(input_list[i], self.weight[i])`, the same
        # select_backward per expert (above); the top layer's MLP input_linear (E, 2I, h) holds its summed buffer
        # and the next expert's, with that expert's (2I, h) slice and the gradients of its output and gathered input
        # (output_linear's loop is summed into .grad before; traced: jetmoe-2l-full-s512, 0.879 GiB of temporaries
        # with lm_head's pending tied gradient)
        return (dt.grad * (2 * moe.num_experts + 1) * 2 * ie * h
                + (2 if dt.autocast else dt.compute) * routed_rows(arch, t) * (2 * ie + h))
    if moe.dense_layers and not (arch.model_type in EVERY_EXPERT and top_sparse):
        return 0
    if plan.gradient_accumulation_steps == 1 and not st.grads_kept:
        return 0
    e = 2 if dt.autocast else dt.compute
    return dt.grad * moe.num_experts * 2 * ie * h + e * routed_rows(arch, t) * (2 * ie + h)


def _experts_trained(plan: Plan, arch: ModelArch, st: Stack, per_layer_linears) -> bool:
    """Whether the routed experts' fused weights get a gradient (full fine-tuning or adapters on them): only
    then do the grouped matmuls keep the product (memory/blocks.py sparse_moe)."""
    return plan.method == "full" or st.fsdp_adapters_in_units or any(ad.name.startswith("experts.") for lins in per_layer_linears
                                        for ad in layer_adapters(arch, plan, lins))
