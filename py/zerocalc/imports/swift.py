"""ms-swift RLHF (``swift rlhf --rlhf_type dpo ...`` command lines, or the same keys as a YAML ``--config``) ->
plan with ``post_training`` (plan-v1 Extension 7).

ms-swift's RLHF arguments subclass TRL's configs (swift/rlhf_trainers/arguments.py: ``from trl import DPOConfig
as HfDPOConfig``), so the post-training keys are TRL's (``beta``, ``num_generations``, ``use_vllm``,
``vllm_mode``, ``vllm_gpu_memory_utilization``, ``max_completion_length``) with ms-swift's own around them:
``rlhf_type`` (dpo default; orpo, simpo, kto, cpo, rm, ppo, grpo), ``model`` (``model_id_or_path`` in 2.x),
``train_type`` lora by default (``sft_type`` in 2.x; full), LoRA ``lora_rank`` 8 / ``lora_alpha`` 32 /
``lora_dropout`` 0.05 / ``target_modules all-linear`` (swift TunerArguments), ``torch_dtype`` (the load dtype;
the checkpoint's when unset), ``per_device_train_batch_size`` 1 (``batch_size`` in 2.x),
``gradient_checkpointing`` true, ``deepspeed`` zero0/zero1/zero2/zero2_offload/zero3/zero3_offload,
``sleep_level`` 0/1/2 (vLLM's sleep mode), ``vllm_gpu_memory_utilization`` 0.9, ``max_length`` (DPO/KTO/RM:
prompt and response together, two halves), GRPO ``max_completion_length`` 512 and ``num_generations`` 8 (TRL's).
"""
from __future__ import annotations

from .builder import NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, as_bool, as_int, as_number, \
    attention_from_impl, not_deepspeed_or_fsdp, set_model
from .post_common import not_modelled_flags, set_deepspeed, set_launcher_gpus, set_lora, split_total

RLHF_TYPES = {"dpo": "dpo", "orpo": "orpo", "simpo": "simpo", "kto": "kto", "cpo": "cpo", "rm": "rm",
              "ppo": "ppo", "grpo": "grpo", "rloo": "rloo"}
DEEPSPEED = {"zero0": (0, False, False), "zero1": (1, False, False), "zero2": (2, False, False),
             "zero2_offload": (2, True, False), "zero3": (3, False, False), "zero3_offload": (3, True, True)}
DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "float32": "fp32", "fp32": "fp32"}
NOT_MODELLED_KEYS = ("padding_free", "packing", "offload_model", "offload_optimizer", "move_model_batches",
                     "sequence_parallel_size", "async_generate", "vllm_enable_prefix_caching")


def is_swift(cfg: dict) -> bool:
    return "rlhf_type" in cfg


def import_swift(opt: dict, plan, cmd=None, loader=None):
    b = Builder("ms-swift", plan)
    seen = set()

    def take(k):
        seen.add(k)
        return opt.get(k)

    set_launcher_gpus(b, cmd)
    rt = take("rlhf_type")
    rt_s = "dpo" if rt is None else str(rt)
    if rt_s not in RLHF_TYPES:
        raise ConfigImportError("rlhf_type", f"{rt_s!r} is not modelled (zerocalc reads {', '.join(RLHF_TYPES)})")
    method = RLHF_TYPES[rt_s]
    loss = opt.get("loss_type")
    if method == "dpo" and (loss == "ipo" or loss == ["ipo"]):
        method = "ipo"
        b.skip("loss_type", take("loss_type"), "read: the IPO loss (post_training.method ipo)")
    b.set("rlhf_type", "post_training.method", method, default=rt is None)
    b.set("(program)", "post_training.trainer", "ms-swift")
    for k in ("model", "model_id_or_path"):
        if isinstance(opt.get(k), str):
            set_model(b, k, take(k))
            break
    # --- method
    tk = "train_type" if "train_type" in opt else "sft_type"
    tt = take(tk)
    tt = "lora" if tt is None else str(tt).lower()
    qb = take("quant_bits")
    if tt == "full":
        b.set(tk, "method", "full")
    elif tt in ("lora", "qlora"):
        if qb is not None and as_int("quant_bits", qb) in (4, 8):
            b.set("quant_bits", "method", "qlora")
            b.set("quant_bits", "quantization.type", "nf4" if int(qb) == 4 else "int8")
        else:
            b.set(tk, "method", "lora", default=tk not in opt)
        alt = "lora_target_modules" if "lora_target_modules" in opt else "target_modules"
        if opt.get(alt) == "ALL":
            opt = {**opt, alt: "all-linear"}
        set_lora(b, opt, take, "lora_rank", 8, "lora_alpha", 32,
                 "lora_dropout_p" if "lora_dropout_p" in opt else "lora_dropout", 0.05, alt,
                 "ms-swift TunerArguments target_modules all-linear")
    else:
        b.skip(tk, tt, NOT_MODELLED + f" ({tt}); the plan keeps method {b.plan['method']}")
    # --- batch
    mk = "per_device_train_batch_size" if "per_device_train_batch_size" in opt else "batch_size"
    mb = take(mk)
    b.set(mk, "micro_batch_size", 1 if mb is None else as_int(mk, mb), default=mb is None)
    ga = take("gradient_accumulation_steps")
    if ga is not None:
        b.set("gradient_accumulation_steps", "gradient_accumulation_steps", as_int("gradient_accumulation_steps", ga))
    # --- lengths, generations, generator
    ml = take("max_length")
    if method in ("grpo", "rloo", "ppo"):
        c = take("max_completion_length")
        b.set("max_completion_length", "post_training.completion_len",
              512 if c is None else as_int("max_completion_length", c), default=c is None)
        if ml is not None:
            b.skip("max_length", ml, "read: the model's context limit; the completion length above and the "
                                     "prompt's default decide the rows")
        if method != "ppo":
            g = take("num_generations")
            b.set("num_generations", "post_training.num_generations", 8 if g is None else as_int("num_generations", g),
                  default=g is None)
        _generator(b, opt, take)
        beta = take("beta")
        if beta is not None and as_number("beta", beta) == 0:
            b.set("beta", "post_training.reference", "none")
        elif beta is not None:
            b.skip("beta", beta, "read: KL weight > 0, a reference (the trainer's default placement)")
    elif ml is not None:
        split_total(b, "max_length", as_int("max_length", ml), default=False)
    else:
        b.skip("max_length", None, "empty: ms-swift then truncates to the model's context; the plan keeps the "
                                   "contract's default lengths (512 + 512)")
    # --- precision, checkpointing, attention, loss
    dt = take("torch_dtype")
    if dt is not None:
        if not isinstance(dt, str) or dt not in DTYPES:
            raise ConfigImportError("torch_dtype", f"unknown dtype {dt!r}")
        b.set("torch_dtype", "run.load.dtype", DTYPES[dt])
        b.set("torch_dtype", "precision", {"bf16": "bf16-mixed", "fp16": "fp16-mixed", "fp32": "fp32"}[DTYPES[dt]])
    gc = take("gradient_checkpointing")
    on = True if gc is None else as_bool("gradient_checkpointing", gc)
    b.set("gradient_checkpointing", "activation_checkpointing", "full" if on else "none", default=gc is None)
    ai = take("attn_impl")
    if ai is not None:
        a = attention_from_impl("flash" if ai == "flash_attn" else ai)
        if a:
            b.set("attn_impl", "attention", a)
        else:
            b.skip("attn_impl", ai, NOT_MODELLED)
    lig = take("use_liger_kernel")
    if lig is not None and as_bool("use_liger_kernel", lig):
        b.set("use_liger_kernel", "loss", "chunked")
    ds = take("deepspeed")
    if ds is None:
        not_deepspeed_or_fsdp(b, "deepspeed")
    elif isinstance(ds, str) and ds in DEEPSPEED:
        stage, oo, op = DEEPSPEED[ds]
        set_deepspeed(b, "deepspeed", stage, offload_optimizer=oo, offload_params=op)
    else:
        b.skip("deepspeed", ds, "not mapped: a DeepSpeed JSON path; import it with --ds to set the ZeRO settings")
        b.set("deepspeed", "framework", "deepspeed")
    not_modelled_flags(b, opt, take, NOT_MODELLED_KEYS)
    for k in ("rpo_alpha", "cpo_alpha", "simpo_gamma", "desirable_weight", "undesirable_weight", "loss_type",
              "reward_funcs", "temperature", "log_completions", "system", "label_smoothing", "beta"):
        if k in opt and k not in seen:
            b.skip(k, take(k), NO_EFFECT)
    b.rest(opt, seen)
    return b.result()


def _generator(b: Builder, opt: dict, take) -> None:
    use = take("use_vllm")
    g = "post_training.generator."
    if use is None or not as_bool("use_vllm", use):
        for k in ("vllm_mode", "vllm_gpu_memory_utilization", "sleep_level", "vllm_tensor_parallel_size"):
            if k in opt:
                b.skip(k, take(k), NO_EFFECT + " (use_vllm is off: HF generate)")
        return
    b.set("use_vllm", g + "engine", "vllm")
    mode = take("vllm_mode") or "colocate"
    b.set("vllm_mode", g + "mode", mode, default="vllm_mode" not in opt)
    if mode == "server":
        b.set("vllm_mode", g + "gpus", 1, default=True)
        b.warn("generator-gpus", "a swift rollout server's GPU count is not in the command: 1 assumed "
                                 "(post_training.generator.gpus)")
        return
    u = take("vllm_gpu_memory_utilization")
    b.set("vllm_gpu_memory_utilization", g + "gpu_memory_utilization",
          0.9 if u is None else as_number("vllm_gpu_memory_utilization", u), default=u is None)
    s = take("sleep_level")
    b.set("sleep_level", g + "sleep", 0 if s is None else as_int("sleep_level", s, minimum=0), default=s is None)
    tp = take("vllm_tensor_parallel_size")
    if tp is not None:
        b.set("vllm_tensor_parallel_size", g + "tensor_parallel_size", as_int("vllm_tensor_parallel_size", tp))
