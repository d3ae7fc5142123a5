"""LLaMA-Factory YAML (the ``llamafactory-cli train FILE`` arguments) -> plan.

Defaults and semantics from LLaMA-Factory (github.com/hiyouga/LLaMA-Factory) ``src/llamafactory/hparams``:
finetuning_type ``lora`` by default; lora_rank 8, lora_alpha = 2 x rank, lora_dropout 0, lora_target ``all``
(every linear layer but the output head, ``model/model_utils/misc.py find_all_linear_modules``);
quantization_bit 4 -> bitsandbytes nf4 (quantization_type) with double_quantization true, 8 -> int8;
cutoff_len 2048; gradient checkpointing ON unless ``disable_gradient_checkpointing``; flash_attn ``auto``
(transformers chooses: sdpa), ``fa2`` flash, ``sdpa``, ``disabled`` eager; ``model/adapter.py``: trainable
parameters are cast to fp32 unless ``pure_bf16`` (bf16 -> bf16-mixed, pure_bf16 -> bf16-pure);
``enable_liger_kernel`` patches the fused linear cross-entropy (loss chunked). Batch keys, optim and
``fsdp`` / ``fsdp_config`` are the HF TrainingArguments ones (per_device_train_batch_size 8,
gradient_accumulation_steps 1, adamw_torch_fused). A ``-GPTQ`` checkpoint with LoRA is QLoRA on GPTQ;
layer-wise GaLore / APOLLO run in one process. The newer layout (``model:`` with ``peft_config`` /
``dist_config`` sections) is read by llamafactory_v1.py.
"""
from __future__ import annotations

from . import bundled_ds
from .builder import (NOT_MODELLED, Builder, all_linear, as_bool, as_int, as_list, as_number, as_obj,
                     import_deepspeed_ref, not_deepspeed_or_fsdp, set_fsdp, set_model, set_optimizer)
from .builder import gptq_checkpoint
from .trainer_rules import fsdp_upcast_precision, set_gptq, single_process_only
from .data_keys import alloc_env, llamafactory_lengths
from .lf_post import llamafactory_post_keys

ATTN = {"auto": "sdpa", "fa2": "flash", "fa3": "flash", "sdpa": "sdpa", "disabled": "eager", "eager": "eager"}
NOT_MODELLED_FLAGS = ("use_galore", "use_badam", "use_apollo", "use_dora", "use_unsloth", "use_unsloth_gc",
                      "pissa_init", "use_rslora", "loraplus_lr_ratio", "shift_attn", "mixture_of_depths",
                      "use_llama_pro", "freeze_trainable_layers", "use_adam_mini", "use_muon", "fp8",
                      "sequence_parallel_size", "upcast_layernorm", "upcast_lmhead_output")


# layer-wise optimizers LLaMA-Factory refuses in distributed training (hparams/parser.py: "Distributed training
# does not support layer-wise GaLore / APOLLO")
LAYERWISE = (("use_galore", "galore_layerwise"), ("use_apollo", "apollo_layerwise"))


def import_llamafactory(cfg: dict, plan, loader=None):
    from .llamafactory_v1 import import_llamafactory_v1, is_v1
    if is_v1(cfg):
        return import_llamafactory_v1(cfg, plan, loader=loader)
    b = Builder("llamafactory", plan)
    seen = set()

    def take(k):
        seen.add(k)
        return cfg.get(k)

    if "model_name_or_path" in cfg:
        set_model(b, "model_name_or_path", take("model_name_or_path"))
    # stage dpo / kto / rm / ppo -> post_training (imports/lf_post.py), after the method is known (below)

    # --- method
    ft = take("finetuning_type")
    ft_default = ft is None
    ft = ft or "lora"
    qbit = take("quantization_bit")
    if ft == "full":
        b.set("finetuning_type", "method", "full", default=ft_default)
    elif ft == "lora" and qbit is None and gptq_checkpoint(cfg.get("model_name_or_path")):
        # a GPTQ checkpoint: LoRA on its GPTQ QuantLinear layers (LLaMA-Factory loads its quantization_config)
        set_gptq(b, "model_name_or_path", why=f"{cfg['model_name_or_path']} is a GPTQ checkpoint")
        _lora(b, cfg, take)
    elif ft == "lora":
        if qbit is not None:
            bits = as_int("quantization_bit", qbit)
            qmethod = take("quantization_method") or "bnb"
            if qmethod not in ("bnb", "bitsandbytes"):
                b.skip("quantization_method", qmethod, NOT_MODELLED + " (only bitsandbytes quantization is)")
            b.set("finetuning_type", "method", "qlora", default=ft_default)
            if bits == 4:
                qt = take("quantization_type") or "nf4"
                b.set("quantization_bit", "quantization.type", qt)
                dq = take("double_quantization")
                b.set("double_quantization", "quantization.double_quant",
                      True if dq is None else as_bool("double_quantization", dq), default=dq is None)
            elif bits == 8:
                b.set("quantization_bit", "quantization.type", "int8")
            else:
                b.skip("quantization_bit", qbit, NOT_MODELLED + f" ({bits}-bit bitsandbytes); the plan keeps "
                                                                  f"quantization {b.plan['quantization']['type']}")
        else:
            b.set("finetuning_type", "method", "lora", default=ft_default)
        _lora(b, cfg, take)
    else:
        b.skip("finetuning_type", ft, f"{ft!r} fine-tuning is not modelled; the plan keeps method {b.plan['method']}")

    # --- precision
    bf16, fp16, pure = take("bf16"), take("fp16"), take("pure_bf16")
    if pure:
        b.set("pure_bf16", "precision", "bf16-pure")
    elif bf16:
        b.set("bf16", "precision", "bf16-mixed")
    elif fp16:
        b.set("fp16", "precision", "fp16-mixed")
    else:
        b.set("bf16", "precision", "fp32", default=True)

    # --- batch, sequence, activations, attention, loss, optimizer
    mb = take("per_device_train_batch_size")
    b.set("per_device_train_batch_size", "micro_batch_size", 8 if mb is None else as_int("per_device_train_batch_size", mb),
          default=mb is None)
    ga = take("gradient_accumulation_steps")
    b.set("gradient_accumulation_steps", "gradient_accumulation_steps",
          1 if ga is None else as_int("gradient_accumulation_steps", ga), default=ga is None)
    cl = take("cutoff_len")
    b.set("cutoff_len", "seq_len", 2048 if cl is None else as_int("cutoff_len", cl), default=cl is None)
    llamafactory_post_keys(b, cfg, take)
    llamafactory_lengths(b, cfg, take)
    alloc_env(b, cfg, seen)
    dgc = take("disable_gradient_checkpointing")
    off = dgc is not None and as_bool("disable_gradient_checkpointing", dgc)
    b.set("disable_gradient_checkpointing", "activation_checkpointing", "none" if off else "full", default=dgc is None)
    fa = take("flash_attn")
    fa_s = "auto" if fa is None else str(fa).lower()
    if fa_s in ATTN:
        b.set("flash_attn", "attention", ATTN[fa_s], default=fa is None)
    else:
        b.skip("flash_attn", fa, NOT_MODELLED + "; the plan keeps attention " + b.plan["attention"])
    liger = take("enable_liger_kernel")
    b.set("enable_liger_kernel", "loss", "chunked" if liger else "standard", default=liger is None)
    opt = take("optim")
    set_optimizer(b, "optim", opt or "adamw_torch_fused", default=not opt)

    # --- sharding
    # LLaMA-Factory's training arguments are HF Seq2SeqTrainingArguments: fsdp / fsdp_config as the HF Trainer
    # reads them (``fsdp: [full_shard, auto_wrap]``); an accelerate config launching it can say the same
    ds, fsdp, fcfg = take("deepspeed"), take("fsdp"), take("fsdp_config")
    if ds:
        import_deepspeed_ref(b, "deepspeed", ds, loader, bundled_ds.LLAMA_FACTORY)
    elif fsdp:
        set_fsdp(b, "fsdp", fsdp, fcfg, "fsdp_config")
    else:
        not_deepspeed_or_fsdp(b, "deepspeed")
        if fcfg:
            b.skip("fsdp_config", fcfg, "fsdp is off: no effect")
    fsdp_upcast_precision(b, "bf16", b.plan["precision"])
    for use, layerwise in LAYERWISE:
        if cfg.get(use) and cfg.get(layerwise):
            seen.add(layerwise)
            single_process_only(b, layerwise, True, f"layer-wise {use[4:]} runs only in one process "
                                                    "(LLaMA-Factory hparams/parser.py refuses it distributed)")
    opt_name = cfg.get("optim")
    if isinstance(opt_name, str) and opt_name.lower().endswith("layerwise"):
        single_process_only(b, "optim", opt_name, "transformers' layer-wise optimizers refuse distributed training")

    for k in NOT_MODELLED_FLAGS:
        if cfg.get(k) not in (None, False):
            b.skip(k, take(k), NOT_MODELLED)
    for k in ("torch_compile",):
        if cfg.get(k):
            b.set_compile(k, take(k))
    as_obj("config", cfg)
    b.rest(cfg, seen)
    return b.result()


def _lora(b: Builder, cfg: dict, take):
    """LoRA keys and LLaMA-Factory's defaults (rank 8, alpha 2 x rank, dropout 0, target all)."""
    r = take("lora_rank")
    rank = 8 if r is None else as_int("lora_rank", r)
    b.set("lora_rank", "lora.rank", rank, default=r is None)
    a = take("lora_alpha")
    b.set("lora_alpha", "lora.alpha", rank * 2 if a is None else as_number("lora_alpha", a), default=a is None)
    d = take("lora_dropout")
    b.set("lora_dropout", "lora.dropout", 0.0 if d is None else as_number("lora_dropout", d), default=d is None)
    t = take("lora_target")
    names = as_list("lora_target", t) if t is not None else ["all"]
    targets = all_linear(b, "lora_target") if names == ["all"] else names
    b.set("lora_target", "lora.targets", targets, default=t is None)
    if cfg.get("additional_target"):
        b.skip("additional_target", take("additional_target"), NOT_MODELLED + " (modules_to_save)")
