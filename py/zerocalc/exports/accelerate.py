"""accelerate config YAML (accelerate 1.15 ``accelerate launch --config_file``) for a plan.

DeepSpeed plans point at the ds_config file (``deepspeed_config_file``; the other ZeRO fields then live in the
ds_config only, as accelerate's DeepSpeedPlugin._deepspeed_config_checks requires). FSDP plans use FSDP2
(``fsdp_version: 2``): stage 3 = reshard after forward (FULL_SHARD), stage 2 = keep gathered (SHARD_GRAD_OP);
CPU offload moves parameters, gradients and the optimizer step together. The YAML is written by hand (the
engine runs in Pyodide with the standard library only); tests parse it with PyYAML and accelerate.
"""
from __future__ import annotations

import json
import re

from ..runplan import DEFAULT
from ..plan import as_plan
from .ds_config import check_expressible
from .hf import fsdp_option_string

MIXED_PRECISION = {"bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp32": "no", "bf16-pure": "no"}


def accelerate_config(plan, ds_config_path: str = "ds_config.json") -> dict:
    plan = as_plan(plan)
    fw, stage = plan.framework, plan.zero_stage
    n = plan.world_size
    mp = MIXED_PRECISION[plan.precision]
    cfg = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if fw == "deepspeed":
        check_expressible(plan)
        ds = {"deepspeed_config_file": ds_config_path}
        if stage == 3:
            ds["zero3_init_flag"] = bool(plan.deepspeed.get("zero_init", True))
        if plan.nodes > 1:
            ds["deepspeed_multinode_launcher"] = "standard"
        cfg["deepspeed_config"] = ds
        cfg["distributed_type"] = "DEEPSPEED"
        if plan.precision == "bf16-pure":
            mp = "bf16"  # DeepSpeed's bf16 block (with bf16 master weights) carries pure bf16
    elif fw == "fsdp":
        fsdp_option_string(plan)  # raises for what FSDP cannot express
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_reshard_after_forward": stage == 3,
            "fsdp_offload_params": plan.offload_params == "cpu",
            "fsdp_cpu_ram_efficient_loading": True,
            # accelerate's FULL_STATE_DICT always offloads to rank 0's CPU; SHARDED gathers nothing (FSDP2)
            "fsdp_state_dict_type": "FULL_STATE_DICT" if plan.run.save not in (None, DEFAULT)
            and plan.run.save.weights in ("fsdp-full", "fsdp-full-no-offload") else "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": plan.activation_checkpointing == "full",
        }
    elif fw == "ddp":
        cfg["distributed_type"] = "MULTI_GPU" if n > 1 else "NO"
    else:
        cfg["distributed_type"] = "NO"
    cfg["downcast_bf16"] = "no"
    cfg["machine_rank"] = 0
    cfg["main_training_function"] = "main"
    cfg["mixed_precision"] = mp
    cfg["num_machines"] = plan.nodes
    cfg["num_processes"] = n if fw != "single" else 1
    cfg["rdzv_backend"] = "static"
    cfg["same_network"] = True
    cfg["use_cpu"] = False
    return cfg


def accelerate_yaml(plan, ds_config_path: str = "ds_config.json") -> str:
    plan = as_plan(plan)
    cfg = accelerate_config(plan, ds_config_path)
    head = ["# accelerate launch --config_file accelerate.yaml train.py   (zerocalc export --to accelerate)"]
    if plan.nodes > 1:
        head.append("# multi-node: on each node set machine_rank (0..%d) and main_process_ip/main_process_port"
                    % (plan.nodes - 1))
    if plan.precision == "bf16-pure" and plan.framework != "deepspeed":
        head.append("# pure bf16: load the model with dtype=torch.bfloat16 (mixed_precision: 'no')")
    if plan.framework == "fsdp" and plan.activation_checkpointing == "selective":
        head.append("# selective activation checkpointing is not an accelerate option")
    return "\n".join(head) + "\n" + to_yaml(cfg)


_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "~"}


def _scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    s = str(v)
    if _BARE.match(s) and s.lower() not in _YAML_WORDS:
        return s
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(d: dict, indent: int = 0) -> str:
    """Block-style YAML for nested dicts of scalars and flat lists (no PyYAML needed)."""
    out = []
    pad = " " * indent
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:" + (" {}" if not v else ""))
            if v:
                out.append(to_yaml(v, indent + 2).rstrip("\n"))
        elif isinstance(v, (list, tuple)):
            out.append(f"{pad}{k}: [" + ", ".join(_scalar(x) for x in v) + "]")
        else:
            out.append(f"{pad}{k}: {_scalar(v)}")
    return "\n".join(out) + "\n"
