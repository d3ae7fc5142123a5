"""TRL's post-training configs -> the plan's ``post_training`` block (plan-v1 Extension 7): DPOConfig (and its
IPO loss), KTOConfig, RewardConfig, CPOConfig (SimPO), GRPOConfig / RLOOConfig, as JSON dumps, YAML or the CLI
flags people paste. Field names and defaults read at trl@f2cd577 (trl/trainer/*_config.py) and in older dumps
(TRL 0.14-0.18: `max_prompt_length`, `vllm_device`, `beta` 0.04).

Which config it is comes from the keys only that config has: GRPO/RLOO `num_generations`, `use_vllm`,
`steps_per_generation`, `reward_weights`; KTO `desirable_weight` / `undesirable_weight`; Reward
`center_rewards_coefficient`; CPO `cpo_alpha` / `simpo_gamma`; DPO `precompute_ref_log_probs`, `loss_type`,
`rpo_alpha` (post_training.rpo_alpha; a number means TRL <= 0.28, whose DPOConfig alone has it). An ORPOConfig has no key of its own and reads as DPO (say ``post_training.method`` in the plan).
"""
from __future__ import annotations

from .builder import NO_EFFECT, NOT_MODELLED, Builder, as_bool, as_int, as_number

GRPO_KEYS = ("num_generations", "use_vllm", "steps_per_generation", "reward_weights", "num_iterations",
             "vllm_mode", "vllm_enable_sleep_mode", "generation_batch_size")
LOAD_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "float32": "fp32",
               "fp32": "fp32", "auto": "bf16"}      # "auto": the checkpoint's dtype, 16-bit for the presets


def trl_post_method(cfg: dict) -> str | None:
    """The post-training method a TRL config describes, or None (an SFT or plain TrainingArguments config)."""
    if any(k in cfg for k in GRPO_KEYS):
        return "grpo"
    if "desirable_weight" in cfg or "undesirable_weight" in cfg:
        return "kto"
    if "center_rewards_coefficient" in cfg:
        return "rm"
    if "cpo_alpha" in cfg or "simpo_gamma" in cfg:
        return "simpo" if cfg.get("loss_type") == "simpo" else "cpo"
    if any(k in cfg for k in ("precompute_ref_log_probs", "loss_type", "rpo_alpha", "ref_model_sync_steps", "beta")):
        loss = cfg.get("loss_type")
        loss = loss[0] if isinstance(loss, list) and len(loss) == 1 else loss
        return "ipo" if loss == "ipo" else "dpo"
    return None


def _lengths(b: Builder, cfg: dict, take, grouped: bool) -> None:
    p, c, total = take("max_prompt_length"), take("max_completion_length"), take("max_length")
    if grouped:
        if p is not None:
            b.set("max_prompt_length", "post_training.prompt_len", as_int("max_prompt_length", p))
        b.set("max_completion_length", "post_training.completion_len",
              512 if c is None else as_int("max_completion_length", c), default=c is None)
        if total is not None:
            b.skip("max_length", total, NO_EFFECT + " for GRPO (its lengths are the prompt's and the completion's)")
        return
    total = 1024 if total is None else as_int("max_length", total)      # DPOConfig / KTOConfig max_length
    if p is not None:
        p = as_int("max_prompt_length", p)
    if c is not None:
        c = as_int("max_completion_length", c)
    if p is None and c is None:
        p = total // 2
    prompt = p if p is not None else total - c
    completion = c if c is not None else total - prompt
    if prompt < 1 or completion < 1:
        prompt, completion = total // 2, total - total // 2
    b.set("max_length", "post_training.prompt_len", prompt, default="max_length" not in cfg and p is None)
    b.set("max_length", "post_training.completion_len", completion, default="max_length" not in cfg and c is None)


def _generator(b: Builder, cfg: dict, take) -> None:
    use = take("use_vllm")
    keys = ("vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_enable_sleep_mode",
            "vllm_device")
    if use is None or not as_bool("use_vllm", use):
        for k in keys:
            if k in cfg:
                b.skip(k, take(k), NO_EFFECT + " (use_vllm is off: HF generate)")
        return
    b.set("use_vllm", "post_training.generator.engine", "vllm")
    mode = take("vllm_mode")
    device = take("vllm_device")
    if mode is None:
        # TRL < 0.17 ran vLLM on a GPU of its own (`vllm_device`); 1.x defaults to colocate
        mode = "server" if device is not None else "colocate"
    b.set("vllm_mode", "post_training.generator.mode", mode, default="vllm_mode" not in cfg)
    if mode == "server":
        b.set("vllm_mode", "post_training.generator.gpus", 1, default=True)
        b.warn("generator-gpus", "a vLLM server's GPU count is not in a TRL config: 1 assumed "
                                 "(post_training.generator.gpus)")
        for k in ("vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"):
            if k in cfg:
                b.skip(k, take(k), NO_EFFECT + " on the training GPUs (the server's own)")
    else:
        u = take("vllm_gpu_memory_utilization")
        b.set("vllm_gpu_memory_utilization", "post_training.generator.gpu_memory_utilization",
              0.3 if u is None else as_number("vllm_gpu_memory_utilization", u), default=u is None)
        sleep = take("vllm_enable_sleep_mode")
        b.set("vllm_enable_sleep_mode", "post_training.generator.sleep",
              2 if sleep is not None and as_bool("vllm_enable_sleep_mode", sleep) else 0, default=sleep is None)
    tp = take("vllm_tensor_parallel_size")
    if tp is not None:
        b.set("vllm_tensor_parallel_size", "post_training.generator.tensor_parallel_size",
              as_int("vllm_tensor_parallel_size", tp))


def group_keys(b: Builder, take) -> None:
    """TRL's (and ms-swift's, which subclasses it) `num_generations` (default 8) and `steps_per_generation`."""
    g = take("num_generations")
    b.set("num_generations", "post_training.num_generations", 8 if g is None else as_int("num_generations", g),
          default=g is None)
    s = take("steps_per_generation")
    if s is not None:
        b.set("steps_per_generation", "post_training.steps_per_generation", as_int("steps_per_generation", s))


def trl_post_keys(b: Builder, cfg: dict, take) -> None:
    """Set ``post_training`` from a TRL post-training config (nothing for SFT)."""
    method = trl_post_method(cfg)
    if method is None:
        return
    b.set("(config class)", "post_training.method", method)
    b.set("(config class)", "post_training.trainer", "trl", default=True)
    grouped = method == "grpo"
    _lengths(b, cfg, take, grouped)
    beta = take("beta")
    peft = b.plan.get("method") in ("lora", "qlora")
    if grouped:
        group_keys(b, take)
        if "generation_batch_size" in cfg:
            b.skip("generation_batch_size", take("generation_batch_size"),
                   NOT_MODELLED + " (give steps_per_generation)")
        _generator(b, cfg, take)
        if beta is not None:
            ref = ("adapter-disabled" if peft else "model") if as_number("beta", beta) > 0 else "none"
            b.set("beta", "post_training.reference", ref)      # grpo_trainer.py: beta 0.0 loads no reference
        gather = take("ds3_gather_for_generation")
        if gather is not None and not as_bool("ds3_gather_for_generation", gather):
            b.skip("ds3_gather_for_generation", gather, NOT_MODELLED + " (the whole-model gather is assumed)")
    else:
        if beta is not None:
            b.skip("beta", beta, NO_EFFECT)
        pre = take("precompute_ref_log_probs")
        if pre is not None and as_bool("precompute_ref_log_probs", pre):
            b.set("precompute_ref_log_probs", "post_training.reference", "precomputed")
        rpo = take("rpo_alpha")
        if rpo is not None and method in ("dpo", "ipo"):
            b.set("rpo_alpha", "post_training.rpo_alpha", as_number("rpo_alpha", rpo))
            # DPOConfig has rpo_alpha up to 0.28 only (dpo_config.py v0.28.0; gone in v0.29.0)
            b.set("rpo_alpha", "post_training.trainer_version", "0.28", default=True)
            b.warn("trl-version", "rpo_alpha is a TRL <= 0.28 DPOConfig key: trainer_version 0.28 assumed "
                                  "(post_training.trainer_version)")
        elif "rpo_alpha" in cfg:
            b.skip("rpo_alpha", rpo, NO_EFFECT)
        for k in ("loss_type", "precompute_ref_batch_size", "desirable_weight", "undesirable_weight",
                  "center_rewards_coefficient", "cpo_alpha", "simpo_gamma", "label_smoothing"):
            if k in cfg:
                b.skip(k, take(k), NO_EFFECT)
    for k in ("sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps"):
        if k in cfg:
            b.skip(k, take(k), NO_EFFECT)
    mik = take("model_init_kwargs")
    if isinstance(mik, dict) and isinstance(mik.get("dtype", mik.get("torch_dtype")), str):
        dt = mik.get("dtype", mik.get("torch_dtype"))
        if dt in LOAD_DTYPES:
            b.set("model_init_kwargs.dtype", "run.load.dtype", LOAD_DTYPES[dt])
        else:
            b.skip("model_init_kwargs", mik, NOT_MODELLED)
    elif mik:
        b.skip("model_init_kwargs", mik, NO_EFFECT)
