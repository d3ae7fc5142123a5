"""Configs in: a pasted ds_config.json -> plan updates.

Imports never mutate: they return a new plan dict (or raise ConfigImportError naming the key, the current
plan untouched). Every key of a pasted ds_config is accounted for: applied to the plan, or listed in
``not_represented`` with the reason (no memory effect, not modelled, unknown to DeepSpeed 0.19.8).

DeepSpeed semantics followed: runtime/config.py ``_set_batch_related_parameters`` / ``_batch_assertion``
(batch triple), runtime/zero/config.py (keys, aliases, stage-dependent overlap_comm default),
runtime/precision_config.py; a leftover "auto" is dropped by DeepSpeed's pydantic base (docs/deepspeed.md §5).
"""
from __future__ import annotations

import copy

from ..knobs import HF_HIDDEN_SIZE_KEYS, NVME_PLACEHOLDER, ds_default, fills_auto, resolve_knob
from ..model import resolve_model
from .common import (NO_EFFECT, NOT_MODELLED, ConfigImportError, ImportResult, base_plan_dict, parse_json,
                     read_bool, read_int, read_obj, validate_plan_dict)

TOP_NO_EFFECT = {
    "steps_per_print", "wall_clock_breakdown", "dump_state", "prescale_gradients", "gradient_predivide_factor",
    "gradient_allreduce_op", "scheduler", "tensorboard", "wandb", "csv_monitor", "comet", "comms_logger",
    "flops_profiler", "monitor_config", "checkpoint", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "disable_allgather", "dataloader_drop_last", "log_level", "autotuning",
    "elasticity", "timers", "vocabulary_size", "disable_python_gc", "managed_gradient_accumulation",
    "memory_breakdown", "datastates",
}
# Top-level keys DeepSpeed knows that can change memory in ways zerocalc does not model.
TOP_NOT_MODELLED = {
    "communication_data_type", "seq_parallel_communication_data_type", "data_types", "compile", "pipeline",
    "torch_autocast", "sparse_attention", "aio", "tensor_parallel", "expert_parallel", "hybrid_engine",
    "weight_quantization", "sequence_parallel_size", "data_efficiency", "curriculum_learning", "amp",
    "quantize_training", "compression_training", "sparse_gradients", "nebula", "use_data_before_expert_parallelism",
}

# zero_optimization keys of DeepSpeed 0.19.8 (DeepSpeedZeroConfig fields; stage-3 ones by alias and name).
ZERO_ALIASES = {  # field name -> the ds_config (alias) name the plan uses
    "prefetch_bucket_size": "stage3_prefetch_bucket_size",
    "param_persistence_threshold": "stage3_param_persistence_threshold",
    "max_live_parameters": "stage3_max_live_parameters",
    "max_reuse_distance": "stage3_max_reuse_distance",
    "model_persistence_threshold": "stage3_model_persistence_threshold",
    "gather_16bit_weights_on_model_save": "stage3_gather_16bit_weights_on_model_save",
    "module_granularity_threshold": "stage3_module_granularity_threshold",
    "use_all_reduce_for_fetch_params": "stage3_use_all_reduce_for_fetch_params",
    "allgather_sequential": "stage3_allgather_sequential",
}
ZERO_INT_KNOBS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                  "stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size",
                  "zero_hpz_partition_size")
ZERO_BOOL_KNOBS = ("overlap_comm", "contiguous_gradients")
ZERO_NO_EFFECT = {"load_from_fp32_weights", "elastic_checkpoint", "ignore_unused_parameters", "log_trace_cache_warnings",
                  "enable_sanity_checks", "override_module_apply", "pipeline_loading_checkpoint",
                  "use_multi_rank_bucket_allreduce", "allgather_partitions", "compute_grad_norm", "legacy_stage1",
                  "stage3_use_all_reduce_for_fetch_params", "stage3_allgather_sequential", "leaf_module",
                  "stage3_module_granularity_threshold", "stage3_gather_fp16_weights_on_model_save",
                  "save_muon_momentum_buffer_in_memory", "cpu_offload_use_pin_memory"}
ZERO_NOT_MODELLED = {"allgather_bucket_size", "reduce_scatter", "round_robin_gradients", "parameter_alignment",
                     "stage3_model_persistence_threshold",
                     "zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients",
                     "memory_efficient_linear", "zenflow", "mics_shard_size", "mics_hierarchical_params_gather",
                     "cpu_offload", "cpu_offload_param"}
OFFLOAD_OPT_KEYS = {"device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write",
                    "fast_init", "ratio", "super_offload", "cpuadam_cores_perc"}
OFFLOAD_PARAM_KEYS = {"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"}
OFFLOAD_DEFAULTS = {"pin_memory": True, "buffer_count": None, "buffer_size": 100_000_000, "max_in_cpu": 1_000_000_000,
                    "pipeline_read": False, "pipeline_write": False, "fast_init": False, "ratio": 1.0,
                    "super_offload": False, "cpuadam_cores_perc": 0.8}
FP16_KEYS = {"enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
             "consecutive_hysteresis", "min_loss_scale", "fp16_master_weights_and_grads"}
BF16_KEYS = {"enabled", "immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads",
             "bf16_optimizer_states"}
ACT_KEYS = {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization", "number_checkpoints",
            "synchronize_checkpoint_boundary", "profile"}


def import_ds_config(config, plan) -> ImportResult:
    """Read a ds_config (JSON text or dict; explicit numbers or HF "auto") into a copy of ``plan``.

    Sets framework deepspeed, zero_stage, offloads, precision, optimizer (DeepSpeed's AdamW/Adam/Lion),
    micro batch and accumulation (train_batch_size checked against the plan's gpus_per_node x nodes),
    activation checkpointing, and the deepspeed knobs (only those whose value differs from what the plan
    already runs with, so plan -> ds_config -> plan is the identity)."""
    cfg = parse_json(config, "ds_config")
    base = base_plan_dict(plan)
    new = copy.deepcopy(base)
    res = ImportResult(plan=new)
    seen = set()

    def apply(key, plan_key, value):
        res.applied.append({"key": key, "plan_key": plan_key, "value": value})

    def skip(key, value, reason):
        res.not_represented.append({"key": key, "value": value, "reason": reason})

    new["framework"] = "deepspeed"
    # --- zero_optimization: stage first (knob defaults depend on it)
    zero = read_obj("zero_optimization", cfg.get("zero_optimization"))
    seen.add("zero_optimization")
    zero = {ZERO_ALIASES.get(k, k): v for k, v in zero.items()}
    stage = read_int("zero_optimization.stage", zero.get("stage", 0))
    if stage > 3:
        raise ConfigImportError("zero_optimization.stage", f"must be 0, 1, 2 or 3, got {stage}")
    new["zero_stage"] = stage
    apply("zero_optimization.stage", "zero_stage", stage)

    # --- offloads
    for ds_key, plan_key, allowed in (("offload_optimizer", "offload_optimizer", OFFLOAD_OPT_KEYS),
                                      ("offload_param", "offload_params", OFFLOAD_PARAM_KEYS)):
        path = f"zero_optimization.{ds_key}"
        block = read_obj(path, zero.get(ds_key))
        device = block.get("device", "none")
        if device not in ("none", "cpu", "nvme"):
            raise ConfigImportError(f"{path}.device", f"must be none, cpu or nvme, got {device!r}")
        ignored = device != "none" and (stage == 0 if ds_key == "offload_optimizer" else stage != 3)
        if ignored:
            need = "1-3" if ds_key == "offload_optimizer" else "3"
            res.warnings.append({"id": f"ds-{ds_key.replace('_', '-')}-ignored", "severity": "warning",
                                 "message": f"{path} at ZeRO stage {stage} is accepted by DeepSpeed and ignored "
                                            f"(it needs stage {need}); the plan keeps it on the GPU"})
            skip(f"{path}.device", device, f"ignored by DeepSpeed at stage {stage}")
            device = "none"
        else:
            apply(f"{path}.device", plan_key, device)
        new[plan_key] = device
        for k, v in block.items():
            kp = f"{path}.{k}"
            if k == "device":
                continue
            if k not in allowed:
                skip(kp, v, "unknown to DeepSpeed 0.19.8 (it rejects this key)")
                res.warnings.append(_unknown_warning(kp))
            elif k == "nvme_path":
                if device == "nvme" and (not v or v == NVME_PLACEHOLDER):
                    res.warnings.append(_nvme_warning(path))
                skip(kp, v, NO_EFFECT)
            elif k == "pin_memory":
                read_bool(kp, v)
                skip(kp, v, NO_EFFECT if v else NOT_MODELLED + " (zerocalc assumes pinned host buffers)")
            else:
                skip(kp, v, NOT_MODELLED if v != OFFLOAD_DEFAULTS.get(k) else "DeepSpeed's default")
        if device == "nvme" and "nvme_path" not in block:
            res.warnings.append(_nvme_warning(path))

    # --- zero knobs: set only where the value differs from what the new plan runs with
    knobs = new["deepspeed"]

    def hidden():
        return resolve_model(new["model"]).hidden_size
    for k, v in zero.items():
        kp = f"zero_optimization.{k}"
        if k in ("stage", "offload_optimizer", "offload_param"):
            continue
        if k in ZERO_INT_KNOBS or k in ZERO_BOOL_KNOBS:
            if v is None and k == "overlap_comm":
                v = ds_default(k, stage)  # Optional in DeepSpeed: null = the stage's default
            if k in ZERO_INT_KNOBS:
                v = read_int(kp, v, minimum=1 if k == "reduce_bucket_size" else 0, allow_auto=True)
            else:
                v = read_bool(kp, v, allow_auto=True)
            if v == "auto" and not (k in HF_HIDDEN_SIZE_KEYS and fills_auto(k, stage)):
                v = ds_default(k, stage)  # DeepSpeed drops an "auto" nobody fills: its default applies
            if v == "auto":
                if knobs.get(k) != "auto":
                    knobs[k] = "auto"
            elif resolve_knob(knobs, k, stage, hidden) != v:
                knobs[k] = v
            apply(kp, f"deepspeed.{k}", v)
        elif k == "stage3_gather_16bit_weights_on_model_save":
            writer, why = ds_gather_16bit(kp, v, stage, new.get("method", "full"))
            if writer:
                run = new.setdefault("run", {})
                run["save"] = {**(run.get("save") or {}), "weights": writer}
                apply(kp, "run.save.weights", writer)
            else:
                skip(kp, v, why)
        elif k in ZERO_NO_EFFECT:
            skip(kp, v, NO_EFFECT)
        elif k in ZERO_NOT_MODELLED:
            skip(kp, v, NOT_MODELLED)
        else:
            skip(kp, v, "unknown to DeepSpeed 0.19.8 (it rejects this key)")
            res.warnings.append(_unknown_warning(kp))

    # --- precision
    _import_precision(cfg, base, new, stage, apply, skip, res)
    seen.update(("fp16", "bf16", "bfloat16"))

    # --- optimizer
    opt = cfg.get("optimizer")
    seen.add("optimizer")
    if opt is not None:
        opt = read_obj("optimizer", opt)
        typ = opt.get("type")
        if not isinstance(typ, str):
            raise ConfigImportError("optimizer.type", f"expected a name, got {typ!r}")
        name = typ.lower()
        mapped = {"adamw": "adamw", "adam": "adamw", "lion": "lion"}.get(name)
        if mapped:
            new["optimizer"] = mapped
            apply("optimizer.type", "optimizer", mapped)
        else:
            skip("optimizer.type", typ, f"DeepSpeed optimizer {typ!r} is not modelled; the plan keeps "
                                        f"{new['optimizer']}")
        for k, v in read_obj("optimizer.params", opt.get("params")).items():
            skip(f"optimizer.params.{k}", v, NO_EFFECT)
        for k, v in opt.items():
            if k not in ("type", "params"):
                skip(f"optimizer.{k}", v, NO_EFFECT)

    # --- batch
    _import_batch(cfg, base, new, apply, res)
    seen.update(("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))

    # --- gradient clipping
    seen.add("gradient_clipping")
    if "gradient_clipping" in cfg:
        v = cfg["gradient_clipping"]
        if v != "auto":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigImportError("gradient_clipping", f"expected a number >= 0 or \"auto\", got {v!r}")
            if float(resolve_knob(knobs, "gradient_clipping", stage, hidden)) != float(v):
                knobs["gradient_clipping"] = float(v)
            apply("gradient_clipping", "deepspeed.gradient_clipping", v)
        elif knobs.get("gradient_clipping") not in (None, "auto"):
            skip("gradient_clipping", v, "filled by the HF Trainer from max_grad_norm; the plan keeps "
                                         f"{knobs['gradient_clipping']}")

    # --- activation checkpointing
    seen.add("activation_checkpointing")
    if "activation_checkpointing" in cfg:
        act = read_obj("activation_checkpointing", cfg["activation_checkpointing"])
        new["activation_checkpointing"] = "full"
        apply("activation_checkpointing", "activation_checkpointing", "full")
        off = read_bool("activation_checkpointing.cpu_checkpointing", act.get("cpu_checkpointing", False))
        new["activation_offloading"] = off
        apply("activation_checkpointing.cpu_checkpointing", "activation_offloading", off)
        for k, v in act.items():
            kp = f"activation_checkpointing.{k}"
            if k == "cpu_checkpointing":
                continue
            if k not in ACT_KEYS:
                skip(kp, v, "unknown to DeepSpeed 0.19.8")
            elif k in ("partition_activations", "contiguous_memory_optimization") and v:
                skip(kp, v, NOT_MODELLED)
            else:
                skip(kp, v, NO_EFFECT)

    # --- everything else at the top level
    for k, v in cfg.items():
        if k in seen:
            continue
        if k in TOP_NO_EFFECT:
            skip(k, v, NO_EFFECT)
        elif k in TOP_NOT_MODELLED:
            skip(k, v, NOT_MODELLED)
        else:
            skip(k, v, "unknown to DeepSpeed 0.19.8: it accepts and ignores unknown top-level keys (a typo?)")
            res.warnings.append(_unknown_warning(k))

    validate_plan_dict(new)
    return res


def _unknown_warning(key):
    return {"id": "ds-unknown-key", "severity": "warning",
            "message": f"{key} is not a DeepSpeed 0.19.8 key; zerocalc ignored it"}


def _nvme_warning(path):
    return {"id": "ds-nvme-path", "severity": "warning",
            "message": f"{path}: device nvme without a real nvme_path; DeepSpeed accepts the config and fails "
                       "only in deepspeed.initialize"}


def _import_precision(cfg, base, new, stage, apply, skip, res):
    fp16 = read_obj("fp16", cfg.get("fp16"))
    bf16_key = "bf16" if "bf16" in cfg or "bfloat16" not in cfg else "bfloat16"
    bf16 = read_obj(bf16_key, cfg.get(bf16_key))
    fe = read_bool("fp16.enabled", fp16.get("enabled", False), allow_auto=True)
    be = read_bool(f"{bf16_key}.enabled", bf16.get("enabled", False), allow_auto=True)
    master = read_bool(f"{bf16_key}.bf16_master_weights_and_grads", bf16.get("bf16_master_weights_and_grads", False))
    states = read_bool(f"{bf16_key}.bf16_optimizer_states", bf16.get("bf16_optimizer_states", False))
    if states and not master:
        raise ConfigImportError(f"{bf16_key}.bf16_optimizer_states",
                                "requires bf16_master_weights_and_grads (DeepSpeedConfig asserts it)")
    if fe is True and be is True:
        raise ConfigImportError(f"{bf16_key}.enabled", "fp16 and bf16 cannot both be enabled")
    bf16_kind = "bf16-pure" if master and states else "bf16-mixed"
    if master and stage == 0:
        raise ConfigImportError(f"{bf16_key}.bf16_master_weights_and_grads", "is only supported with ZeRO stage 1-3")
    if master and not states:
        skip(f"{bf16_key}.bf16_master_weights_and_grads", True,
             NOT_MODELLED + " (bf16 master weights with fp32 optimizer states)")
    if fe is True:
        prec = "fp16-mixed"
    elif be is True:
        prec = bf16_kind
    elif "auto" in (fe, be):
        # the HF Trainer fills enabled from TrainingArguments: keep the plan's precision if the config allows it
        allowed = {"fp32"} | ({"fp16-mixed"} if fe == "auto" else set()) | ({bf16_kind} if be == "auto" else set())
        prec = base["precision"]
        if prec not in allowed:
            res.warnings.append({"id": "ds-precision-auto", "severity": "warning",
                                 "message": f"precision {prec} cannot come from this config's \"auto\" blocks "
                                            f"(possible: {', '.join(sorted(allowed))}); the plan keeps {prec}"})
    else:
        prec = "fp32"
    new["precision"] = prec
    apply("fp16.enabled/bf16.enabled", "precision", prec)
    for blk, name, keys in ((fp16, "fp16", FP16_KEYS), (bf16, bf16_key, BF16_KEYS)):
        for k, v in blk.items():
            if k in ("enabled", "bf16_master_weights_and_grads", "bf16_optimizer_states"):
                continue
            kp = f"{name}.{k}"
            if k not in keys:
                skip(kp, v, "unknown to DeepSpeed 0.19.8 (it rejects this key)")
                res.warnings.append(_unknown_warning(kp))
            elif k in ("fp16_master_weights_and_grads", "immediate_grad_update") and v:
                skip(kp, v, NOT_MODELLED)
            else:
                skip(kp, v, NO_EFFECT)


def _import_batch(cfg, base, new, apply, res):
    world = int(base["gpus_per_node"]) * int(base["nodes"])
    t = read_int("train_batch_size", cfg["train_batch_size"], 1, True) if "train_batch_size" in cfg else None
    m = (read_int("train_micro_batch_size_per_gpu", cfg["train_micro_batch_size_per_gpu"], 1, True)
         if "train_micro_batch_size_per_gpu" in cfg else None)
    g = (read_int("gradient_accumulation_steps", cfg["gradient_accumulation_steps"], 1, True)
         if "gradient_accumulation_steps" in cfg else None)
    mv = base["micro_batch_size"] if m == "auto" else m
    gv = base["gradient_accumulation_steps"] if g == "auto" else g
    where = f"the plan's data-parallel world is {world} (gpus_per_node x nodes)"
    if isinstance(t, int):
        # DeepSpeed derives the missing member of the triple (runtime/config.py _set_batch_related_parameters)
        if m is None and g is None:
            gv, mv = 1, _divide("train_batch_size", t, world, f"{t} samples over {world} GPUs; {where}")
        elif m is None:
            mv = _divide("train_batch_size", t, gv * world,
                         f"{t} / (gradient_accumulation_steps {gv} x world {world}); {where}")
        elif g is None:
            gv = _divide("train_batch_size", t, mv * world,
                         f"{t} / (train_micro_batch_size_per_gpu {mv} x world {world}); {where}")
        elif t != mv * gv * world:
            raise ConfigImportError("train_batch_size",
                                    f"{t} != train_micro_batch_size_per_gpu {mv} x gradient_accumulation_steps {gv} "
                                    f"x world {world} = {mv * gv * world}; {where}")
    elif m is None and t is None:
        raise ConfigImportError("train_micro_batch_size_per_gpu",
                                "DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu")
    elif g is None and isinstance(m, int):
        gv = 1  # only the micro batch given: DeepSpeed sets accumulation to 1
    if mv is None:
        mv = base["micro_batch_size"]
    if gv is None:
        gv = base["gradient_accumulation_steps"]
    new["micro_batch_size"], new["gradient_accumulation_steps"] = mv, gv
    apply("train_micro_batch_size_per_gpu", "micro_batch_size", m if m is not None else mv)
    apply("gradient_accumulation_steps", "gradient_accumulation_steps", g if g is not None else gv)
    if t is not None:
        apply("train_batch_size", None, t)


def _divide(key, a, b, what):
    if b <= 0 or a % b or a // b < 1:
        raise ConfigImportError(key, f"does not divide into whole micro-batches: {what}")
    return a // b


RUN_DEFAULT = "the plan's default run does this already (run/defaults.py)"


def ds_gather_16bit(key: str, value, stage: int, method: str) -> tuple[str | None, str]:
    """zero_optimization.stage3_gather_16bit_weights_on_model_save: true -> the 16-bit gather at each save (ZeRO-3
    with HF's save_model), false -> the Trainer saves the partitions instead (trainer.py save_model: "Saving the
    full checkpoint instead"). Returns (the run.save.weights to set or None, the reason when None)."""
    if stage != 3:
        return None, "no effect below ZeRO-3 (the module's weights are whole already)"
    if method != "full" or read_bool(key, value):
        return None, RUN_DEFAULT               # PEFT saves adapters; gathering is the default at ZeRO-3
    return "zero3-partitions", ""
