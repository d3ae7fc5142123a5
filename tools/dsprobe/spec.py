"""Plan-v1 dict -> what the probe runs: DeepSpeed config, model config, world size, LoRA settings.

Pure functions, no torch import (tested without the heavy stack). Contract: docs/plan-v1.md.
Knob defaults are DeepSpeed 0.19.8's (runtime/zero/config.py); a knob missing from the plan is not written
into the ds_config, so DeepSpeed applies its own default.
"""
from __future__ import annotations

import copy

# The small Llama of docs/deepspeed-cpu.md §1: P = 6,965,504 parameters, largest tensor L = 2,097,152.
SMALL_LLAMA = {
    "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 8192, "tie_word_embeddings": False,
    "max_position_embeddings": 2048,
}

# plan["deepspeed"] keys that go into "zero_optimization" under the same name.
ZERO_KNOBS = ("reduce_bucket_size", "overlap_comm", "contiguous_gradients", "stage3_prefetch_bucket_size",
              "stage3_max_live_parameters", "stage3_max_reuse_distance", "stage3_param_persistence_threshold",
              "stage3_model_persistence_threshold", "sub_group_size", "zero_hpz_partition_size",
              "allgather_bucket_size", "reduce_scatter", "round_robin_gradients")
OTHER_KNOBS = ("gradient_clipping", "zero_init")
LORA_DEFAULT = {"rank": 16, "alpha": 32, "dropout": 0.05,
                "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


class SpecError(ValueError):
    """A plan the probe cannot run on CPU ranks; the message names the key."""


def _int(v):
    # ds_config accepts floats like 5e5 in JSON; the probe passes integers.
    return int(v) if isinstance(v, float) and float(v).is_integer() else v


def model_config(plan: dict) -> tuple[dict, str]:
    """(HF config fields, note). A plan.model object is used as is; a preset id is replaced by SMALL_LLAMA."""
    m = plan.get("model")
    if isinstance(m, dict):
        cfg = {k: v for k, v in m.items() if k != "name"}
        cfg.setdefault("model_type", "llama")
        return cfg, ""
    note = (f"model {m!r} is a preset too large for CPU ranks; probing the small Llama instead" if m else "")
    return dict(SMALL_LLAMA), note


def build_spec(plan: dict, *, steps: int = 3, seq_len: int = 128, micro_batch: int = 1) -> dict:
    """Everything a rank needs, as a JSON-able dict. Raises SpecError for what the CPU probe cannot run."""
    plan = copy.deepcopy(plan)
    fw = plan.get("framework", "deepspeed")
    if fw != "deepspeed":
        raise SpecError(f"framework: the probe runs DeepSpeed only, got {fw!r}")
    world = int(plan.get("gpus_per_node", 4)) * int(plan.get("nodes", 1))
    if not 1 <= world <= 8:
        raise SpecError(f"gpus_per_node*nodes: CPU ranks 1..8 only, got {world}")
    stage = int(plan.get("zero_stage", 2))
    precision = plan.get("precision", "bf16-mixed")
    if precision not in ("bf16-mixed", "fp16-mixed"):
        raise SpecError(f"precision: probe supports bf16-mixed and fp16-mixed, got {precision!r}")
    method = plan.get("method", "full")
    if method not in ("full", "lora"):
        raise SpecError(f"method: probe supports full and lora (qlora needs bitsandbytes on a GPU), got {method!r}")
    optimizer = plan.get("optimizer", "adamw")
    if optimizer != "adamw":
        raise SpecError(f"optimizer: probe runs torch AdamW(fused=True) only, got {optimizer!r}")
    off_opt = plan.get("offload_optimizer", "none")
    off_par = plan.get("offload_params", "none")
    for key, v in (("offload_optimizer", off_opt), ("offload_params", off_par)):
        if v not in ("none", "cpu"):
            raise SpecError(f"{key}: probe supports none and cpu (nvme needs a swap path and the aio op), got {v!r}")
    ds = dict(plan.get("deepspeed") or {})
    for k, v in ds.items():
        if v == "auto":
            raise SpecError(f"deepspeed.{k}: resolve 'auto' before probing (give the number)")
        if k not in ZERO_KNOBS and k not in OTHER_KNOBS:
            raise SpecError(f"deepspeed.{k}: unknown knob")
    gas = int(plan.get("gradient_accumulation_steps", 1))

    zero: dict = {"stage": stage}
    for k in ZERO_KNOBS:
        if k in ds:
            zero[k] = _int(ds[k])
    if off_opt == "cpu" and stage >= 1:
        zero["offload_optimizer"] = {"device": "cpu"}
    if off_par == "cpu" and stage == 3:
        zero["offload_param"] = {"device": "cpu"}
    cfg = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": gas,
        "gradient_clipping": float(ds.get("gradient_clipping", 0.0)),
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
        "zero_optimization": zero,
    }
    if precision == "bf16-mixed":
        cfg["bf16"] = {"enabled": True}
    else:
        # Dynamic scaling from 2**8: a random-init model must not overflow, or the step is skipped and no
        # Adam state is made (the probe checks engine.skipped_steps == 0).
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 8}
    if off_opt == "cpu":
        cfg["zero_force_ds_cpu_optimizer"] = False  # keep torch AdamW: no DeepSpeedCPUAdam build

    run = _run(plan, stage, ds)
    if run and run.get("save") == "zero3-16bit" and stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    zero_init = bool(ds.get("zero_init", False))
    if run and isinstance(run.get("zero_init"), bool):
        zero_init = run["zero_init"]

    lora = None
    if method == "lora":
        lora = {**LORA_DEFAULT, **(plan.get("lora") or {})}
    mcfg, note = model_config(plan)
    return {
        "world": world, "stage": stage, "precision": precision, "method": method, "lora": lora,
        "offload_optimizer": off_opt, "offload_params": off_par, "zero_init": zero_init, "run": run,
        "gas": gas, "steps": steps, "seq_len": seq_len, "micro_batch": micro_batch,
        "ds_config": cfg, "model": mcfg, "checkpointing": plan.get("activation_checkpointing", "none") == "full", "notes": [note] if note else [],
    }


def _run(plan: dict, stage: int, ds: dict) -> dict | None:
    """plan-v1 Extension 5 `run` -> what the probe runs besides the steps: {"save": writer or None,
    "zero_init": bool or None (auto: the plan's deepspeed.zero_init)}. None without a `run` block."""
    r = plan.get("run")
    if r is None:
        return None
    save = r.get("save", {})
    weights = None
    if save is not None:
        weights = (save or {}).get("weights", "auto")
        if weights == "auto":
            weights = "zero3-16bit"      # HF + ZeRO-3: stage3_gather_16bit_weights_on_model_save (HF's default)
        if weights not in ("zero3-16bit", "zero3-partitions"):
            raise SpecError(f"run.save.weights: the DeepSpeed probe saves zero3-16bit or zero3-partitions, got {weights!r}")
    zi = (r.get("load") or {}).get("zero_init", "auto")
    if zi not in ("auto", True, False):
        raise SpecError(f"run.load.zero_init: auto, true or false, got {zi!r}")
    return {"save": weights, "zero_init": None if zi == "auto" else zi}
