"""accelerate config YAML (``accelerate config`` / ``--config_file``) -> plan.

Keys as accelerate writes them (``accelerate/commands/config/config_args.py`` ClusterConfig):
``distributed_type`` (NO, MULTI_GPU, DEEPSPEED, FSDP; others not modelled), ``num_processes`` (all GPUs of all
machines) and ``num_machines`` (gpus_per_node = num_processes / num_machines), ``mixed_precision`` (no, fp16,
bf16: AMP over fp32 weights), ``deepspeed_config`` (zero_stage, offload_optimizer_device, offload_param_device,
zero3_init_flag, gradient_accumulation_steps, gradient_clipping, or a ``deepspeed_config_file``) and
``fsdp_config`` (fsdp_sharding_strategy, fsdp_offload_params, fsdp_reshard_after_forward, fsdp_version,
fsdp_activation_checkpointing). accelerate's own defaults: zero_stage 2, offload devices none, FULL_SHARD.
"""
from __future__ import annotations

from .builder import ConfigImportError
from .builder import (EMPTY, NO_EFFECT, NOT_MODELLED, Builder, as_bool, as_int, as_number, as_obj,
                     import_deepspeed_ref, set_fsdp)

DS_NO_EFFECT = ("zero3_save_16bit_model", "deepspeed_multinode_launcher", "deepspeed_hostfile",
                "deepspeed_exclusion_filter", "deepspeed_inclusion_filter")
TOP_NO_EFFECT = ("compute_environment", "debug", "machine_rank", "main_process_ip", "main_process_port",
                 "main_training_function", "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster",
                 "tpu_use_sudo", "use_cpu", "enable_cpu_affinity", "gpu_ids", "dynamo_config", "downcast_bf16",
                 "dynamo_backend", "megatron_lm_config", "ipex_config", "mpirun_config", "command_file",
                 "commands", "tpu_name", "tpu_zone", "num_cpu_threads_per_process")


def import_accelerate(cfg: dict, plan, loader=None):
    b = Builder("accelerate", plan)
    seen = {"distributed_type", "num_processes", "num_machines", "mixed_precision", "deepspeed_config",
            "fsdp_config"}
    dt = str(cfg.get("distributed_type", "NO")).upper()
    machines = as_int("num_machines", cfg.get("num_machines", 1))
    nproc = cfg.get("num_processes")
    if nproc is not None:
        nproc = as_int("num_processes", nproc)
        if nproc % machines:
            raise ConfigImportError("num_processes", f"{nproc} processes do not split evenly over "
                                                     f"num_machines {machines}")
        b.set("num_processes", "gpus_per_node", nproc // machines)
        b.set("num_machines", "nodes", machines, default="num_machines" not in cfg)
    mp = str(cfg.get("mixed_precision", "no")).lower()
    prec = {"no": "fp32", "fp16": "fp16-mixed", "bf16": "bf16-mixed"}.get(mp)
    if prec:
        b.set("mixed_precision", "precision", prec, default="mixed_precision" not in cfg)
    else:
        b.skip("mixed_precision", mp, NOT_MODELLED + "; the plan keeps precision " + b.plan["precision"])
    if dt == "DEEPSPEED":
        _deepspeed(b, as_obj("deepspeed_config", cfg.get("deepspeed_config")), loader)
    elif dt == "FSDP":
        set_fsdp(b, "distributed_type", ["full_shard"], cfg.get("fsdp_config"), "fsdp_config")
    elif dt in ("MULTI_GPU", "NO"):
        b.set("distributed_type", "framework", "ddp" if dt == "MULTI_GPU" else "single")
        if dt == "NO":  # one process on one device
            b.set("distributed_type", "gpus_per_node", 1)
            b.set("distributed_type", "nodes", 1)
        b.set("distributed_type", "offload_optimizer", "none", default=True)
        b.set("distributed_type", "offload_params", "none", default=True)
    else:
        b.skip("distributed_type", dt, NOT_MODELLED + "; the plan keeps framework " + b.plan["framework"])
    for blk in ("deepspeed_config", "fsdp_config"):
        if blk in cfg and not (dt == "DEEPSPEED" and blk == "deepspeed_config") and not (dt == "FSDP" and blk == "fsdp_config"):
            b.skip(blk, cfg[blk], EMPTY if not cfg[blk] else f"distributed_type is {dt}: not used")
    for k in TOP_NO_EFFECT:
        if k in cfg:
            seen.add(k)
            b.skip(k, cfg[k], NO_EFFECT)
    b.rest(cfg, seen)
    return b.result()


def _deepspeed(b: Builder, ds: dict, loader):
    b.set("distributed_type", "framework", "deepspeed")
    if ds.get("deepspeed_config_file"):
        import_deepspeed_ref(b, "deepspeed_config.deepspeed_config_file", ds["deepspeed_config_file"], loader, {})
        for k, v in ds.items():
            if k != "deepspeed_config_file":
                b.skip(f"deepspeed_config.{k}", v, "the deepspeed_config_file sets it")
        return
    stage = as_int("deepspeed_config.zero_stage", ds.get("zero_stage", 2), minimum=0)
    if stage > 3:
        raise ConfigImportError("deepspeed_config.zero_stage", f"must be 0, 1, 2 or 3, got {stage}")
    b.set("deepspeed_config.zero_stage", "zero_stage", stage, default="zero_stage" not in ds)
    for k, pk in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_params")):
        dev = str(ds.get(k, "none")).lower()
        if dev not in ("none", "cpu", "nvme"):
            raise ConfigImportError(f"deepspeed_config.{k}", f"must be none, cpu or nvme, got {dev!r}")
        if pk == "offload_params" and stage != 3 and dev != "none":
            b.skip(f"deepspeed_config.{k}", dev, f"ignored by DeepSpeed at stage {stage} (needs stage 3)")
            dev = "none"
        if pk == "offload_optimizer" and stage == 0 and dev != "none":
            b.skip(f"deepspeed_config.{k}", dev, "ignored by DeepSpeed at stage 0")
            dev = "none"
        b.set(f"deepspeed_config.{k}", pk, dev, default=k not in ds)
    if "zero3_init_flag" in ds:
        b.set("deepspeed_config.zero3_init_flag", "deepspeed.zero_init",
              as_bool("deepspeed_config.zero3_init_flag", ds["zero3_init_flag"]))
    if ds.get("gradient_accumulation_steps") is not None:
        b.set("deepspeed_config.gradient_accumulation_steps", "gradient_accumulation_steps",
              as_int("deepspeed_config.gradient_accumulation_steps", ds["gradient_accumulation_steps"]))
    if ds.get("gradient_clipping") is not None:
        b.set("deepspeed_config.gradient_clipping", "deepspeed.gradient_clipping",
              float(as_number("deepspeed_config.gradient_clipping", ds["gradient_clipping"])))
    for k, v in ds.items():
        if k in ("zero_stage", "offload_optimizer_device", "offload_param_device", "zero3_init_flag",
                 "gradient_accumulation_steps", "gradient_clipping"):
            continue
        b.skip(f"deepspeed_config.{k}", v, NO_EFFECT if k in DS_NO_EFFECT else "not read: zerocalc knows no "
                                                                               "memory effect of this option")
