"""TRL's config for a post-training plan (plan-v1 Extension 7): `DPOConfig`, `KTOConfig`, `RewardConfig`,
`GRPOConfig`, `RLOOConfig` and the experimental `ORPOConfig`, `CPOConfig`, `PPOConfig`, with the settings the
estimate assumed (field names read at trl@f2cd577: trl/trainer/*_config.py, trl/experimental/*/*_config.py).

The TrainingArguments part is the HF export's (exports/hf.py), except checkpointing: TRL's `_BaseConfig`
declares its own `gradient_checkpointing` defaulting to True (trl/trainer/base_config.py), so it is always
written. TRL builds the model in fp32 unless `model_init_kwargs={"dtype": ...}` (trl/trainer/utils.py
`create_model_from_path`): the plan's `run.load.dtype` is written there, and its absence is said.
"""
from __future__ import annotations

from ..plan import Plan, as_plan
from ..post.defaults import lengths
from .ds_config import ExportError
from .hf import training_arguments_kwargs
from .pyfmt import py_literal

CONFIGS = {"dpo": ("trl", "DPOConfig"), "ipo": ("trl", "DPOConfig"), "kto": ("trl", "KTOConfig"),
           "rm": ("trl", "RewardConfig"), "grpo": ("trl", "GRPOConfig"), "rloo": ("trl", "RLOOConfig"),
           "orpo": ("trl.experimental.orpo", "ORPOConfig"), "cpo": ("trl.experimental.cpo", "CPOConfig"),
           "simpo": ("trl.experimental.cpo", "CPOConfig"), "ppo": ("trl.experimental.ppo", "PPOConfig")}
GRPO_REFERENCE_BETA = 0.04          # any beta > 0 makes GRPOConfig / RLOOConfig load the reference
LOAD_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _reference_kwargs(plan: Plan, kw: dict) -> None:
    pt = plan.post_training
    ref = pt.reference
    if ref == "cpu":
        raise ExportError("post_training.reference", "TRL keeps no CPU reference; use model, adapter-disabled or "
                                                     "precomputed")
    if ref == "model" and plan.method != "full":
        raise ExportError("post_training.reference", "TRL disables the adapter for a PEFT model (ref_model=None); "
                                                     "a separate reference copy needs a ref_model passed in code")
    if ref == "precomputed":
        kw["precompute_ref_log_probs"] = True
    if pt.method in ("grpo", "rloo"):
        kw["beta"] = GRPO_REFERENCE_BETA if ref in ("model", "adapter-disabled") else 0.0


def _generator_kwargs(plan: Plan, kw: dict) -> None:
    g = plan.post_training.generator
    if g is None or g.engine == "hf":
        kw["use_vllm"] = False
        return
    kw["use_vllm"] = True
    kw["vllm_mode"] = g.mode
    if g.mode == "colocate":
        if g.gpu_memory_utilization is not None:
            kw["vllm_gpu_memory_utilization"] = g.gpu_memory_utilization
        kw["vllm_tensor_parallel_size"] = g.tensor_parallel_size
        if g.sleep == 1:
            raise ExportError("post_training.generator.sleep", "TRL sleeps vLLM at level 2 only "
                                                               "(vllm_enable_sleep_mode)")
        kw["vllm_enable_sleep_mode"] = g.sleep == 2
    if g.enforce_eager:
        raise ExportError("post_training.generator.enforce_eager", "TRL's GRPOConfig does not expose enforce_eager")


def trl_config_kwargs(plan) -> tuple[str, str, dict]:
    """(module, class name, keyword arguments) of the TRL config that runs the plan."""
    plan = as_plan(plan)
    pt = plan.post_training
    if pt is None:
        raise ExportError("post_training", "the plan has no post_training block; export --to hf for SFT")
    if pt.trainer != "trl":
        raise ExportError("post_training.trainer", f"{pt.trainer} is configured in its own format, not TRL's")
    module, cls = CONFIGS[pt.method]
    kw = training_arguments_kwargs(plan)
    kw.pop("activation_checkpointing", None)
    kw["gradient_checkpointing"] = plan.activation_checkpointing == "full"
    if plan.loss == "chunked":
        kw["use_liger_kernel"] = True      # Liger's fused linear DPO / GRPO losses (post/logprobs.py)
    if plan.run.load.dtype != "auto":
        kw["model_init_kwargs"] = {"dtype": LOAD_DTYPES[plan.run.load.dtype]}
    prompt, completion = lengths(pt)   # the defaults the estimate used
    if pt.method in ("grpo", "rloo"):
        kw["max_completion_length"] = completion
        kw["num_generations"] = pt.num_generations or 8
        if pt.steps_per_generation:
            kw["steps_per_generation"] = pt.steps_per_generation
        _generator_kwargs(plan, kw)
    elif pt.method == "ppo":
        kw["response_length"] = completion
    else:
        kw["max_length"] = prompt + completion
        if pt.method in ("orpo", "cpo", "simpo"):
            kw["max_completion_length"] = completion
    # each config's own key, written even at its default, so that the file says which trainer it is for
    # (imports/trl_post.py reads the method back from it)
    if pt.method in ("dpo", "ipo"):
        kw["loss_type"] = [pt.method if pt.method == "ipo" else "sigmoid"]
        if pt.rpo_alpha is not None:
            kw["rpo_alpha"] = pt.rpo_alpha     # DPOConfig up to 0.28 (the plan is refused with it for later TRL)
    elif pt.method == "kto":
        kw["desirable_weight"] = 1.0
    elif pt.method == "rm":
        kw["center_rewards_coefficient"] = None
    elif pt.method == "cpo":
        kw["cpo_alpha"] = 1.0
    elif pt.method == "simpo":
        kw["loss_type"], kw["cpo_alpha"] = "simpo", 0.0
    _reference_kwargs(plan, kw)
    return module, cls, kw


def trl_snippet(plan) -> str:
    """Python source: the TRL config call, with what the estimate assumed about loading."""
    plan = as_plan(plan)
    module, cls, kw = trl_config_kwargs(plan)
    lines = [f"from {module} import {cls}", ""]
    if "model_init_kwargs" not in kw:
        lines.append("# TRL builds the model (and its reference) in fp32 when given a model id: the estimate "
                     "assumed so; set run.load.dtype bf16 for model_init_kwargs={'dtype': 'bfloat16'}")
    if plan.post_training.method in ("grpo", "rloo"):
        lines.append(f"# prompts up to {lengths(plan.post_training)[0]} tokens were assumed: GRPOConfig truncates "
                     "none, filter the data set")
    g = plan.post_training.generator
    if g is not None and g.engine == "vllm" and g.mode == "server":
        util = f" --gpu_memory_utilization {g.gpu_memory_utilization}" if g.gpu_memory_utilization else ""
        lines.append(f"# vLLM server on {g.gpus} GPU(s) outside training: trl vllm-serve --model <model> "
                     f"--tensor_parallel_size {g.tensor_parallel_size}{util}")
    body = ",\n".join(f"    {k}={py_literal(v)}" for k, v in kw.items())
    lines.append(f"args = {cls}(\n{body},\n)")
    return "\n".join(lines) + "\n"
