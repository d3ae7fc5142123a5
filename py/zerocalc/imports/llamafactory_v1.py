"""LLaMA-Factory's newer (v1) config layout -> plan.

The v1 layout (``llamafactory/v1``, examples/v1/) names the model in ``model:`` and puts each concern in a
section whose ``name`` picks a plugin: ``peft_config`` (lora: ``r`` 8, ``lora_alpha`` 16, ``lora_dropout``
0.05, ``target_modules`` all = every linear but the head, plugins/model_plugins/peft.py LoraParams),
``quant_config`` (bnb / auto: ``quantization_bit`` 4 (the default when unset) -> nf4 with double quantization,
compute dtype float16 by default; 8 -> int8: plugins/model_plugins/quantization.py BnbParams), ``kernel_config``
(``liger_kernel``: liger's defaults, the fused linear cross-entropy among them -> loss chunked; ``auto``: NPU
kernels only), ``dist_config`` (``fsdp2``: FSDP2Engine with reshard_after_forward true, offload_params false;
``deepspeed``: its ``config_file``), ``optim_config`` (none: torch.optim.AdamW; core/base_trainer.py).
config/training_args.py: micro_batch_size 1, global_batch_size = DP size x micro (no accumulation),
cutoff_len 2048, bf16 true, enable_activation_checkpointing true; config/model_args.py: flash_attn sdpa.
The model is loaded in its checkpoint's dtype (``dtype="auto"``, core/model_engine.py) and FSDP2Engine's
MixedPrecisionPolicy computes in bf16 without an fp32 copy: a full fine-tune is bf16-pure. The trainer is
v1's own loop over the HF model (stack.trainer custom-loop), not the HF Trainer.
"""
from __future__ import annotations

from . import bundled_ds
from .builder import (NO_EFFECT, NOT_MODELLED, Builder, all_linear, as_bool, as_int, as_list, as_number, as_obj,
                      attention_from_impl, import_deepspeed_ref, set_model)

SECTIONS = ("peft_config", "dist_config", "kernel_config", "quant_config", "optim_config", "lr_scheduler_config",
            "init_config")


def is_v1(cfg: dict) -> bool:
    """``model:`` is a name and at least one v1 section is a mapping with ``name`` (or the file has
    ``model_class``): LLaMA-Factory's v1 layout (the v0 layout has model_name_or_path and flat keys)."""
    return isinstance(cfg.get("model"), str) and (
        any(isinstance(cfg.get(k), dict) and "name" in cfg[k] for k in SECTIONS) or "model_class" in cfg)


def import_llamafactory_v1(cfg: dict, plan, loader=None):
    b = Builder("llamafactory", plan)
    b.set("(format: LLaMA-Factory v1)", "stack.trainer", "custom-loop", default=True)
    seen = set()

    def take(k):
        seen.add(k)
        return cfg.get(k)

    set_model(b, "model", take("model"))
    mc = take("model_class")
    if mc is not None and str(mc).lower() != "llm":
        b.skip("model_class", mc, NOT_MODELLED + " (zerocalc plans causal language models)")
    elif mc is not None:
        b.skip("model_class", mc, NO_EFFECT + " (a causal LM, as the plan is)")

    # --- method: peft_config + quant_config
    peft = as_obj("peft_config", take("peft_config"))
    quant = as_obj("quant_config", take("quant_config"))
    pname = str(peft.get("name", "")).lower() if peft else ""
    if not peft:
        b.set("peft_config", "method", "full", default="peft_config" not in cfg)
    elif pname == "lora":
        if quant:
            _quant(b, quant)
        else:
            b.set("peft_config.name", "method", "lora")
        r = peft.get("r")
        rank = 8 if r is None else as_int("peft_config.r", r)
        b.set("peft_config.r", "lora.rank", rank, default=r is None)
        a = peft.get("lora_alpha")
        b.set("peft_config.lora_alpha", "lora.alpha", 16 if a is None else as_number("peft_config.lora_alpha", a),
              default=a is None)
        d = peft.get("lora_dropout")
        b.set("peft_config.lora_dropout", "lora.dropout", 0.05 if d is None else as_number("peft_config.lora_dropout", d),
              default=d is None)
        t = peft.get("target_modules", "all")
        targets = all_linear(b, "peft_config.target_modules") if t == "all" else as_list("peft_config.target_modules", t)
        b.set("peft_config.target_modules", "lora.targets", targets, default="target_modules" not in peft)
        mts = peft.get("modules_to_save")
        if mts:
            b.set("peft_config.modules_to_save", "lora.modules_to_save", as_list("peft_config.modules_to_save", mts))
        for k, v in peft.items():
            if k in ("name", "r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save"):
                continue
            if k in ("use_dora",) and v:
                b.skip(f"peft_config.{k}", v, NOT_MODELLED + " (DoRA magnitude vectors)")
            else:
                b.skip(f"peft_config.{k}", v, NO_EFFECT if k in ("use_rslora", "adapter_name_or_path", "export_dir",
                                                                 "export_size", "export_hub_model_id", "infer_dtype")
                       else "not read: zerocalc knows no memory effect of this option")
    else:
        b.skip("peft_config.name", peft.get("name"), f"PEFT method {peft.get('name')!r} is not modelled; the plan "
                                                     f"keeps method {b.plan['method']}")
    if quant and pname != "lora":
        b.skip("quant_config", quant, "quantization without a LoRA adapter is not a trainable setup zerocalc models")

    # --- precision
    dist = as_obj("dist_config", take("dist_config"))
    dname = str(dist.get("name", "")).lower() if dist else ""
    bf16 = take("bf16")
    on = True if bf16 is None else as_bool("bf16", bf16)
    if not on:
        b.set("bf16", "precision", "fp32")
    elif b.plan["method"] == "full" and dname != "deepspeed":
        b.set("bf16", "precision", "bf16-pure", default=bf16 is None)  # checkpoint dtype, bf16 policy, no fp32 copy
    else:  # fp32 adapters on a bf16 base; DeepSpeed's bf16 keeps fp32 masters
        b.set("bf16", "precision", "bf16-mixed", default=bf16 is None)

    # --- batch, sequence, activations, attention
    mb = take("micro_batch_size")
    micro = 1 if mb is None else as_int("micro_batch_size", mb)
    b.set("micro_batch_size", "micro_batch_size", micro, default=mb is None)
    cl = take("cutoff_len")
    b.set("cutoff_len", "seq_len", 2048 if cl is None else as_int("cutoff_len", cl), default=cl is None)
    ac = take("enable_activation_checkpointing")
    b.set("enable_activation_checkpointing", "activation_checkpointing",
          "full" if ac is None or as_bool("enable_activation_checkpointing", ac) else "none", default=ac is None)
    fa = take("flash_attn")
    attn = attention_from_impl(fa if fa is not None else "sdpa")
    if attn:
        b.set("flash_attn", "attention", attn, default=fa is None)
    else:
        b.skip("flash_attn", fa, NOT_MODELLED + "; the plan keeps attention " + b.plan["attention"])
    kern = as_obj("kernel_config", take("kernel_config"))
    names = [n.strip() for n in str(kern.get("name", "")).split(",") if n.strip()] if kern else []
    liger = "liger_kernel" in names
    b.set("kernel_config.name" if kern else "kernel_config", "loss", "chunked" if liger else "standard",
          default=not kern)
    for n in names:
        if n not in ("liger_kernel", "auto"):
            b.skip("kernel_config.name", n, NOT_MODELLED + f" (kernel {n})")
    for k, v in kern.items():
        if k != "name":
            b.skip(f"kernel_config.{k}", v, "not read: zerocalc knows no memory effect of this option")

    # --- distribution
    world = b.plan["gpus_per_node"] * b.plan["nodes"]
    if dname == "fsdp2":
        b.set("dist_config.name", "framework", "fsdp")
        b.set("dist_config.name", "stack.fsdp_version", 2)
        raf = dist.get("reshard_after_forward")
        b.set("dist_config.reshard_after_forward", "zero_stage",
              3 if raf is None or as_bool("dist_config.reshard_after_forward", raf) else 2, default=raf is None)
        off = dist.get("offload_params")
        dev = "cpu" if off is not None and as_bool("dist_config.offload_params", off) else "none"
        b.set("dist_config.offload_params", "offload_params", dev if b.plan["zero_stage"] == 3 else "none",
              default=off is None)
        b.set("dist_config.offload_params", "offload_optimizer", dev, default=off is None)
        for k, v in dist.items():
            if k not in ("name", "reshard_after_forward", "offload_params"):
                b.skip(f"dist_config.{k}", v, NO_EFFECT if k in ("dcp_path", "pin_memory") else
                       "not read: zerocalc knows no memory effect of this option")
    elif dname == "deepspeed":
        import_deepspeed_ref(b, "dist_config.config_file", dist.get("config_file"), loader, bundled_ds.LLAMA_FACTORY)
        for k, v in dist.items():
            if k not in ("name", "config_file"):
                b.skip(f"dist_config.{k}", v, "not read: zerocalc knows no memory effect of this option")
    elif dist:
        b.skip("dist_config.name", dist.get("name"), NOT_MODELLED + "; the plan keeps framework " + b.plan["framework"])
    else:
        fw = "ddp" if world > 1 else "single"  # no dist_config: one model copy per process (torch DDP)
        b.set("dist_config", "framework", fw, default=True)
        b.set("dist_config", "offload_optimizer", "none", default=True)
        b.set("dist_config", "offload_params", "none", default=True)
    gbs = take("global_batch_size")
    dp = b.plan["gpus_per_node"] * b.plan["nodes"]
    if gbs is None:
        b.set("global_batch_size", "gradient_accumulation_steps", 1, default=True)
    else:
        g = as_int("global_batch_size", gbs)
        if g % (micro * dp):
            b.warn("lf-v1-global-batch", f"global_batch_size {g} is not a multiple of micro_batch_size {micro} x "
                                         f"{dp} GPUs; read as {max(1, g // (micro * dp))} accumulation steps")
        b.set("global_batch_size", "gradient_accumulation_steps", max(1, g // (micro * dp)))
    for k in ("cp_size", "mp_replicate_size", "mp_shard_size", "dp_size"):
        if k in cfg and cfg[k] not in (None, 1):
            b.skip(k, take(k), NOT_MODELLED + " (context / model parallel sizes)")
    opt = as_obj("optim_config", take("optim_config"))
    if opt:
        b.skip("optim_config", opt, f"optimizer plugin {opt.get('name')!r} is not modelled; the plan keeps "
                                    f"{b.plan['optimizer']}")
    else:
        b.set("optim_config", "optimizer", "adamw", default=True)
    b.rest(cfg, seen)
    return b.result()


def _quant(b: Builder, quant: dict):
    """quant_config (bnb / auto) -> QLoRA: 4 bit nf4 with double quantization, compute dtype float16 unless
    given (BnbParams defaults); 8 bit -> int8."""
    name = str(quant.get("name", "bnb")).lower()
    if name not in ("bnb", "auto"):
        b.skip("quant_config.name", quant.get("name"), NOT_MODELLED + " (only bitsandbytes quantization is)")
        b.set("peft_config.name", "method", "lora")
        return
    bits = quant.get("quantization_bit")
    bits = 4 if bits is None else as_int("quant_config.quantization_bit", bits)
    b.set("quant_config.name", "method", "qlora")
    if bits == 8:
        b.set("quant_config.quantization_bit", "quantization.type", "int8")
    else:
        qt = quant.get("quantization_type", "nf4")
        b.set("quant_config.quantization_type", "quantization.type", qt, default="quantization_type" not in quant)
        dq = quant.get("double_quantization", True)
        b.set("quant_config.double_quantization", "quantization.double_quant",
              as_bool("quant_config.double_quantization", dq), default="double_quantization" not in quant)
        cd = str(quant.get("compute_dtype", "float16")).lower()
        b.set("quant_config.compute_dtype", "quantization.compute_dtype",
              {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(cd, cd),
              default="compute_dtype" not in quant)
    for k, v in quant.items():
        if k not in ("name", "quantization_bit", "quantization_type", "double_quantization", "compute_dtype"):
            b.skip(f"quant_config.{k}", v, "not read: zerocalc knows no memory effect of this option")
