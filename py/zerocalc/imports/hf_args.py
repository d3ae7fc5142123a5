"""Hugging Face TrainingArguments JSON (``TrainingArguments.to_json_string()``, ``HfArgumentParser``
``parse_json_file`` inputs) and TRL configs (SFTConfig / DPOConfig / GRPOConfig, plus TRL's ModelConfig
keys: model_name_or_path, attn_implementation, dtype, use_peft, lora_*, load_in_4bit/8bit) -> plan; a
post-training config also gives the plan's ``post_training`` block (imports/trl_post.py).

Defaults of transformers 5 ``training_args.py`` (per_device_train_batch_size 8, gradient_accumulation_steps 1,
optim adamw_torch_fused, bf16/fp16 off: fp32) and TRL ``SFTConfig`` (max_length 1024; ``max_seq_length`` in
TRL < 0.20), with TRL's own overrides in every config (SFT, DPO, GRPO, KTO, Reward, RLOO, experimental CPO /
ORPO; the newest release read): gradient_checkpointing defaults to True (from v0.22.0, a222aeb46 "New defaults:
gradient_checkpointing=True" #3510; trl/trainer/base_config.py `_BaseConfig` from v0.29.0) and bf16 to True
unless fp16 (from v0.19.0, 4c92de000, `self.bf16 = not (self.fp16) if self.bf16 is None`).
``deepspeed`` is a path or an inline ds_config; ``fsdp`` a string or list (full_shard,
shard_grad_op, offload, ...) with ``fsdp_config``; ``use_liger_kernel`` patches the fused linear
cross-entropy (loss chunked). bf16 is AMP over the model's load dtype: bf16-mixed, unless TRL's ``dtype`` /
``torch_dtype`` loads a full fine-tune in bfloat16 without DeepSpeed (bf16-pure: no fp32 master weights).
"""
from __future__ import annotations

from .builder import (EMPTY, NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, all_linear, as_bool,
                      as_int, as_list, as_number, attention_from_impl, import_deepspeed_ref, not_deepspeed_or_fsdp,
                      set_fsdp, set_model, set_optimizer)
from .data_keys import alloc_env, hf_data_keys, trl_collator
from .run_args import hf_run_settings
from .builder import gptq_checkpoint
from .trainer_rules import fsdp_upcast_precision, set_gptq, single_process_only, trl_kbit_prepare
from .trl_post import trl_post_keys

TRL_KEYS = ("max_length", "max_seq_length", "packing", "dataset_text_field", "completion_only_loss",
            "assistant_only_loss", "num_generations", "beta", "max_prompt_length", "max_completion_length",
            "use_vllm", "loss_type", "use_peft", "precompute_ref_log_probs", "vllm_mode", "steps_per_generation",
            "desirable_weight", "undesirable_weight", "center_rewards_coefficient", "cpo_alpha", "simpo_gamma")


def is_trl(cfg: dict) -> bool:
    """TRL config keys, or a TRL CLI config (``trl sft --config``: ScriptArguments' dataset_name + ModelConfig's
    model_name_or_path, without the ``do_train`` / ``do_eval`` switches of transformers' example scripts)."""
    return any(k in cfg for k in TRL_KEYS) or ("dataset_name" in cfg and "model_name_or_path" in cfg
                                               and "do_train" not in cfg and "do_eval" not in cfg)


def is_trl_sft(cfg: dict) -> bool:
    """An SFT config: TRL and none of GRPO's / DPO's own keys."""
    return is_trl(cfg) and not any(k in cfg for k in ("num_generations", "beta", "max_prompt_length"))


def import_hf_args(cfg: dict, plan, loader=None):
    fmt = "trl" if is_trl(cfg) else "hf-training-args"
    sft = is_trl_sft(cfg)
    b = Builder(fmt, plan)
    seen = set()

    def take(k):
        seen.add(k)
        return cfg.get(k)

    for k in ("model_name_or_path", "model_id", "model"):
        if isinstance(cfg.get(k), str):
            set_model(b, k, take(k))
            break
    # --- method (TRL ModelConfig)
    peft = take("use_peft")
    l4, l8 = take("load_in_4bit"), take("load_in_8bit")
    if peft is not None and as_bool("use_peft", peft):
        name = cfg.get("model_name_or_path")
        if gptq_checkpoint(name):
            set_gptq(b, "model_name_or_path", why=f"{name} is a GPTQ checkpoint")
        elif l4:
            b.set("load_in_4bit", "method", "qlora")
            qt = take("bnb_4bit_quant_type") or "nf4"
            b.set("bnb_4bit_quant_type", "quantization.type", qt, default="bnb_4bit_quant_type" not in cfg)
            nq = take("use_bnb_nested_quant")
            b.set("use_bnb_nested_quant", "quantization.double_quant", bool(nq), default=nq is None)
        elif l8:
            b.set("load_in_8bit", "method", "qlora")
            b.set("load_in_8bit", "quantization.type", "int8")
        else:
            b.set("use_peft", "method", "lora")
        for k, pk, fn, dflt in (("lora_r", "lora.rank", as_int, 16), ("lora_alpha", "lora.alpha", as_number, 32),
                                ("lora_dropout", "lora.dropout", as_number, 0.05)):
            v = take(k)
            b.set(k, pk, dflt if v is None else fn(k, v), default=v is None)  # trl/trainer/model_config.py
        t = take("lora_target_modules")
        if t == "all-linear":
            b.set("lora_target_modules", "lora.targets", all_linear(b, "lora_target_modules"))
        elif t:
            b.set("lora_target_modules", "lora.targets", as_list("lora_target_modules", t))
    elif peft is not None:
        b.set("use_peft", "method", "full")
    # --- batch and sequence
    mb = take("per_device_train_batch_size")
    b.set("per_device_train_batch_size", "micro_batch_size",
          8 if mb is None else as_int("per_device_train_batch_size", mb), default=mb is None)
    ga = take("gradient_accumulation_steps")
    b.set("gradient_accumulation_steps", "gradient_accumulation_steps",
          1 if ga is None else as_int("gradient_accumulation_steps", ga), default=ga is None)
    for k in ("max_length", "max_seq_length"):
        if cfg.get(k) is not None:
            b.set(k, "seq_len", as_int(k, take(k)))
            break
    else:
        if sft:
            b.set("max_length", "seq_len", 1024, default=True)
    trl_collator(b, cfg, take)
    hf_data_keys(b, cfg, take)
    alloc_env(b, cfg, seen)
    # --- activations, attention, loss, optimizer
    # transformers 5: activation_checkpointing (+ _kwargs {"offload": true}); gradient_checkpointing is its old name.
    # TRL's configs (trl/trainer/base_config.py, v1.9.0): gradient_checkpointing defaults to True, bf16 unless fp16
    gkey = "activation_checkpointing" if cfg.get("activation_checkpointing") is not None else "gradient_checkpointing"
    gc = cfg.get(gkey)
    seen.update(("activation_checkpointing", "gradient_checkpointing"))
    on = as_bool(gkey, gc) if gc is not None else fmt == "trl"
    other = "gradient_checkpointing" if gkey == "activation_checkpointing" else "activation_checkpointing"
    if cfg.get(other) is not None and as_bool(other, cfg[other]) != on:
        raise ConfigImportError(other, f"says {cfg[other]!r} while {gkey} says {gc!r}")
    b.set(gkey, "activation_checkpointing", "full" if on else "none", default=gc is None)
    akw = take("activation_checkpointing_kwargs")
    if isinstance(akw, dict) and "offload" in akw:
        b.set("activation_checkpointing_kwargs.offload", "activation_offloading",
              as_bool("activation_checkpointing_kwargs.offload", akw["offload"]) and on)
    impl = take("attn_implementation")
    if impl:
        a = attention_from_impl(impl)
        if a:
            b.set("attn_implementation", "attention", a)
        else:
            b.skip("attn_implementation", impl, NOT_MODELLED)
    lig = take("use_liger_kernel")
    b.set("use_liger_kernel", "loss", "chunked" if lig else "standard", default=lig is None)
    opt = take("optim")
    set_optimizer(b, "optim", opt or "adamw_torch_fused", default=not opt)
    if take("adafactor"):
        b.set("adafactor", "optimizer", "adafactor")
    # --- precision
    bf16, fp16 = take("bf16"), take("fp16")
    bf16_default = bf16 is None and fmt == "trl" and not fp16
    if bf16_default:
        bf16 = True
    dtype = take("dtype") or take("torch_dtype")
    if bf16 and bf16_default:
        b.set("bf16", "precision", "bf16-mixed", default=True)
    elif bf16:
        pure = dtype in ("bfloat16", "bf16") and b.plan["method"] == "full" and not cfg.get("deepspeed")
        b.set("bf16", "precision", "bf16-pure" if pure else "bf16-mixed")
        seen.update(("dtype", "torch_dtype"))
    elif fp16:
        b.set("fp16", "precision", "fp16-mixed")
    else:
        b.set("bf16", "precision", "fp32", default=True)
    # --- sharding
    ds, fsdp, fcfg = take("deepspeed"), take("fsdp"), take("fsdp_config")
    if ds:
        import_deepspeed_ref(b, "deepspeed", ds, loader, {})
    elif fsdp:
        set_fsdp(b, "fsdp", fsdp, fcfg, "fsdp_config")
    else:
        not_deepspeed_or_fsdp(b, "deepspeed")
        if fcfg:
            b.skip("fsdp_config", fcfg, "fsdp is off: no effect")
    # accelerate's FSDP (1 and 2) keeps fp32 trainable weights under bf16 mixed precision
    fsdp_upcast_precision(b, "bf16", b.plan["precision"])
    if sft:
        trl_kbit_prepare(b, cfg)
    if isinstance(opt, str) and opt.lower().endswith("layerwise"):
        single_process_only(b, "optim", opt, "transformers' layer-wise optimizers (trainer_optimizer.py "
                                             "_setup_low_rank_optimizer) refuse distributed training")
    for k in ("torch_compile",):
        if cfg.get(k):
            b.set_compile(k, take(k))
    for k in ("gradient_checkpointing_kwargs", "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap",
              "accelerator_config", "half_precision_backend", "fp16_opt_level", "ddp_find_unused_parameters",
              "optim_args", "tp_size"):
        if k in cfg:
            b.skip(k, take(k), EMPTY if cfg[k] in (None, [], {}, "") else NO_EFFECT)
    if fmt == "trl":
        trl_post_keys(b, cfg, take)          # DPO / KTO / RM / CPO / GRPO configs -> post_training (Extension 7)
    hf_run_settings(b, cfg, take)
    b.rest(cfg, seen)
    return b.result()
