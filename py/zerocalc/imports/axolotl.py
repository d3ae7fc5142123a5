"""axolotl YAML -> plan.

Semantics from axolotl (github.com/axolotl-ai-cloud/axolotl): ``utils/config/__init__.py``
``normalize_config`` (torch_dtype is bf16 with ``bf16``/``bfloat16``, fp16 with ``fp16``/``float16``/8-bit,
else fp32: the model is *loaded* in that dtype, so a full fine-tune without DeepSpeed keeps no fp32 master
weights), ``loaders/model.py`` (QLoRA: BitsAndBytesConfig nf4, double quant, compute dtype = torch_dtype),
``loaders/adapter.py`` (``lora_target_linear``: every Linear but lm_head, added to ``lora_target_modules``;
``gptq: true`` or a ``-GPTQ`` base: LoRA on a GPTQ base, plan quantization gptq), accelerate's FSDP (a full
fine-tune in bf16 keeps fp32 trainable weights: bf16-mixed, trainer_rules.fsdp_upcast_precision),
``utils/schemas`` (defaults: micro_batch_size 1, gradient_accumulation_steps 1, sequence_len 512), the liger
and cut_cross_entropy integrations (fused linear cross-entropy: the full logits never exist -> loss chunked).
Attention: ``attn_implementation`` or the older ``flash_attention`` / ``sdp_attention`` / ``eager_attention``
flags; none given -> transformers' default, sdpa. Optimizer: the HF Trainer's ``optim`` names (default
adamw_torch_fused).
"""
from __future__ import annotations

from . import bundled_ds
from .builder import (EMPTY, NO_EFFECT, NOT_MODELLED, Builder, all_linear, as_bool, as_int, as_list,
                     as_number, as_obj, attention_from_impl, import_deepspeed_ref, not_deepspeed_or_fsdp,
                     set_fsdp, set_model, set_optimizer)
from .builder import gptq_checkpoint
from .data_keys import alloc_env, axolotl_lengths
from .trainer_rules import fsdp_upcast_precision, set_gptq

DEFAULTS = {"micro_batch_size": 1, "gradient_accumulation_steps": 1, "sequence_len": 512}
ATTN_FLAGS = {"flash_attention": "flash", "sdp_attention": "sdpa", "eager_attention": "eager"}
NOT_MODELLED_FLAGS = ("xformers_attention", "flex_attention", "s2_attention", "liger_rms_norm", "liger_glu_activation",
                      "liger_rope", "liger_layer_norm", "liger_swiglu", "tiled_mlp", "sequence_parallel_degree",
                      "context_parallel_size", "tensor_parallel_size", "lora_mlp_kernel", "lora_qkv_kernel",
                      "lora_o_kernel", "unsloth_cross_entropy_loss", "peft_use_dora", "use_kernels",
                      "experimental_skip_move_to_device", "expert_parallel_size")


def import_axolotl(cfg: dict, plan, loader=None):
    b = Builder("axolotl", plan)
    seen = set()

    def take(k):
        seen.add(k)
        return cfg.get(k)

    # --- model
    if "base_model" in cfg:
        set_model(b, "base_model", take("base_model"))

    # --- precision (normalize_config): the load dtype; AMP only matters where fp32 masters exist
    bf16, fp16 = take("bf16"), take("fp16")
    bfloat16, float16 = take("bfloat16"), take("float16")
    if bf16 == "auto":
        b.warn("axolotl-bf16-auto", "bf16: auto is read as bf16 (the GPU supports it: Ampere or newer)")
    use_bf16 = bf16 in (True, "auto", "true") or bfloat16 is True
    use_fp16 = not use_bf16 and (fp16 is True or float16 is True)
    dtype = "bf16" if use_bf16 else "fp16" if use_fp16 else "fp32"

    # --- method
    adapter = take("adapter")
    l4, l8 = bool(take("load_in_4bit")), bool(take("load_in_8bit"))
    if adapter in (None, ""):
        b.set("adapter", "method", "full", default=True)
        if l4 or l8:
            b.skip("load_in_4bit" if l4 else "load_in_8bit", True, "quantized loading without an adapter is "
                   "not a trainable setup zerocalc models; the plan trains in full")
    elif adapter in ("lora", "qlora") and (cfg.get("gptq") or gptq_checkpoint(cfg.get("base_model"))):
        # gptq: true (or a -GPTQ checkpoint): the base's linears are GPTQ QuantLinear, LoRA on top
        # (axolotl loaders/model.py: the model's own quantization_config, no BitsAndBytesConfig)
        set_gptq(b, "gptq" if cfg.get("gptq") else "base_model", why="a GPTQ base (axolotl gptq: true)")
        seen.add("gptq")
    elif adapter in ("lora", "qlora"):
        if adapter == "qlora" or l4:
            b.set("adapter", "method", "qlora")
            b.set("load_in_4bit", "quantization.type", "nf4")
            b.set("load_in_4bit", "quantization.double_quant", True)
            b.set("load_in_4bit", "quantization.compute_dtype", dtype)
        elif l8:
            b.set("adapter", "method", "qlora")
            b.set("load_in_8bit", "quantization.type", "int8")
        else:
            b.set("adapter", "method", "lora")
    else:
        b.skip("adapter", adapter, f"adapter {adapter!r} is not modelled; the plan keeps method {b.plan['method']}")
    bnb = as_obj("bnb_config_kwargs", take("bnb_config_kwargs"))
    for k, v in bnb.items():
        kp = f"bnb_config_kwargs.{k}"
        if k == "bnb_4bit_quant_type" and b.plan["method"] == "qlora" and v in ("nf4", "fp4"):
            b.set(kp, "quantization.type", v)
        elif k == "bnb_4bit_use_double_quant" and b.plan["method"] == "qlora":
            b.set(kp, "quantization.double_quant", as_bool(kp, v))
        else:
            b.skip(kp, v, NO_EFFECT if k in ("llm_int8_threshold", "llm_int8_has_fp16_weight") else NOT_MODELLED)
    for k in ("gptq", "model_quantization_config"):
        if cfg.get(k) and k not in seen:
            b.skip(k, take(k), NOT_MODELLED + " (pre-quantized base weights)")
    if "gptq_disable_exllama" in cfg:
        b.skip("gptq_disable_exllama", take("gptq_disable_exllama"), NO_EFFECT + " (which GPTQ kernel runs)")

    # --- LoRA
    for k, pk, fn in (("lora_r", "lora.rank", as_int), ("lora_alpha", "lora.alpha", as_number),
                      ("lora_dropout", "lora.dropout", as_number)):
        v = take(k)
        if v is not None:
            b.set(k, pk, fn(k, v))
    targets = take("lora_target_modules")
    tlist = []
    if isinstance(targets, str) and not targets.replace("_", "").isalnum():
        b.skip("lora_target_modules", targets, "a regular expression over module paths is not expanded")
    elif targets:
        tlist = as_list("lora_target_modules", targets)
    if take("lora_target_linear"):
        tlist = list(dict.fromkeys(tlist + all_linear(b, "lora_target_linear")))
        b.set("lora_target_linear", "lora.targets", tlist)
    elif tlist:
        b.set("lora_target_modules", "lora.targets", tlist)
    if cfg.get("lora_modules_to_save"):
        b.skip("lora_modules_to_save", take("lora_modules_to_save"), NOT_MODELLED + " (modules_to_save)")

    # --- batch and sequence
    mb = take("micro_batch_size")
    b.set("micro_batch_size", "micro_batch_size", as_int("micro_batch_size", mb) if mb is not None
          else DEFAULTS["micro_batch_size"], default=mb is None)
    ga, bs = take("gradient_accumulation_steps"), take("batch_size")
    if ga is not None:
        b.set("gradient_accumulation_steps", "gradient_accumulation_steps", as_int("gradient_accumulation_steps", ga))
        if bs is not None:
            b.skip("batch_size", bs, "gradient_accumulation_steps is given; axolotl derives batch_size from it")
    elif bs is not None:
        # normalize_config: gradient_accumulation_steps = batch_size // micro_batch_size
        b.set("batch_size", "gradient_accumulation_steps",
              max(1, as_int("batch_size", bs) // b.plan["micro_batch_size"]))
    else:
        b.set("gradient_accumulation_steps", "gradient_accumulation_steps", 1, default=True)
    sl = take("sequence_len")
    b.set("sequence_len", "seq_len", as_int("sequence_len", sl) if sl is not None else DEFAULTS["sequence_len"],
          default=sl is None)
    axolotl_lengths(b, cfg, take)
    alloc_env(b, cfg, seen)

    # --- activations
    gc = take("gradient_checkpointing")
    if gc in ("offload", "offload_disk"):
        b.set("gradient_checkpointing", "activation_checkpointing", "full")
        if gc == "offload":
            b.set("gradient_checkpointing", "activation_offloading", True)
        else:
            b.skip("gradient_checkpointing", gc, NOT_MODELLED + " (checkpoints offloaded to disk)")
    else:
        on = gc is not None and as_bool("gradient_checkpointing", gc)
        b.set("gradient_checkpointing", "activation_checkpointing", "full" if on else "none", default=gc is None)
    if "activation_offloading" in cfg:
        b.set("activation_offloading", "activation_offloading", as_bool("activation_offloading",
                                                                        take("activation_offloading")))
    elif gc not in ("offload",):
        b.set("activation_offloading", "activation_offloading", False, default=True)

    # --- attention
    attn = None
    if cfg.get("attn_implementation"):
        impl = take("attn_implementation")
        attn = attention_from_impl(impl)
        if attn is None:
            b.skip("attn_implementation", impl, NOT_MODELLED + "; the plan keeps attention " + b.plan["attention"])
        else:
            b.set("attn_implementation", "attention", attn)
    for k, a in ATTN_FLAGS.items():
        v = take(k)
        if v is not None and as_bool(k, v) and attn is None:
            attn = a
            b.set(k, "attention", a)
    if attn is None and "attn_implementation" not in cfg:
        b.set("attn_implementation", "attention", "sdpa", default=True)

    # --- loss: liger fused linear CE, cut cross-entropy, axolotl's chunked CE
    plugins = as_list("plugins", take("plugins")) if cfg.get("plugins") else []
    chunked = None
    for p in plugins:
        if p.endswith("CutCrossEntropyPlugin") and cfg.get("cut_cross_entropy", True) is not False:
            chunked = "plugins"
    seen.add("cut_cross_entropy")
    if cfg.get("liger_fused_linear_cross_entropy"):
        chunked = "liger_fused_linear_cross_entropy"
    seen.add("liger_fused_linear_cross_entropy")
    if cfg.get("chunked_cross_entropy"):
        chunked = "chunked_cross_entropy"
    seen.add("chunked_cross_entropy")
    b.set(chunked or "plugins", "loss", "chunked" if chunked else "standard", default=chunked is None)
    if plugins and chunked != "plugins":
        b.skip("plugins", plugins, "none of these plugins changes memory zerocalc models (liger's fused "
                                   "cross-entropy needs liger_fused_linear_cross_entropy: true)")

    # --- optimizer
    opt = take("optimizer")
    set_optimizer(b, "optimizer", opt if opt else "adamw_torch_fused", default=not opt)

    # --- precision into the plan (after the method: LoRA adapters and DeepSpeed keep fp32 masters)
    prec = {"bf16": "bf16-mixed", "fp16": "fp16-mixed", "fp32": "fp32"}[dtype]
    src = "bf16" if bf16 is not None else "bfloat16" if use_bf16 else "fp16" if fp16 is not None else "float16"
    if prec != "fp32" and b.plan["method"] == "full" and not cfg.get("deepspeed"):
        # the model is loaded in 16 bits and the HF Trainer's optimizer steps those tensors: no fp32 master
        prec = "bf16-pure" if dtype == "bf16" else prec
        if dtype == "fp16":
            b.warn("axolotl-fp16-full", "a full fine-tune loaded in fp16 cannot be stepped by the HF Trainer "
                                        "(it refuses fp16 gradients); read as fp16-mixed")
    b.set(src, "precision", prec, default=bf16 is None and fp16 is None and bfloat16 is None and float16 is None)

    # --- sharding
    fsdp, fsdp_cfg = take("fsdp"), take("fsdp_config")
    ds = take("deepspeed")
    if ds:
        import_deepspeed_ref(b, "deepspeed", ds, loader, bundled_ds.AXOLOTL)
    elif fsdp or fsdp_cfg:
        set_fsdp(b, "fsdp", fsdp or ["full_shard"], fsdp_cfg, "fsdp_config")
        if "fsdp_version" in cfg:
            b.set_fsdp_version("fsdp_version", take("fsdp_version"))
    else:
        not_deepspeed_or_fsdp(b, "deepspeed")
        if ds is not None:
            b.skip("deepspeed", ds, EMPTY)

    # accelerate's FSDP (1 and 2) keeps fp32 trainable weights under bf16 mixed precision
    fsdp_upcast_precision(b, src, b.plan["precision"])

    for k in NOT_MODELLED_FLAGS:
        if k in cfg and cfg[k] not in (None, False):
            b.skip(k, take(k), NOT_MODELLED)
    if cfg.get("torch_compile"):
        b.set_compile("torch_compile", take("torch_compile"))
    b.rest(cfg, seen)
    return b.result()

