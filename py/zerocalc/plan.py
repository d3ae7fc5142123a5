"""The plan (zerocalc's one input, contract plan-v1): parse, validate, serialise.

Every key is optional; a missing key takes the contract's default. Unknown keys, wrong types and
impossible values raise PlanError naming the key, e.g. ``micro_batch_size: must be an integer from 1
to 65536, got 0``. Nothing here knows about memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from .presets import GPUS, MODELS

SCHEMA = 1


class PlanError(ValueError):
    """A bad value in a plan. ``key`` is the dotted plan key (``lora.rank``)."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


# Allowed values, in the order the UI lists them.
FRAMEWORKS = ("deepspeed", "fsdp", "ddp", "single")
OFFLOAD_DEVICES = ("none", "cpu", "nvme")
PRECISIONS = ("bf16-mixed", "fp16-mixed", "bf16-pure", "fp32")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit", "adafactor", "sgd", "lion")
CHECKPOINTING = ("none", "full", "selective")
ATTENTIONS = ("flash", "sdpa", "eager")
LOSSES = ("standard", "chunked")
METHODS = ("full", "lora", "qlora")
QUANT_TYPES = ("nf4", "fp4", "int8")
COMPUTE_DTYPES = ("bf16", "fp16", "fp32")
LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Upper bounds: far beyond any real run, low enough that arithmetic stays meaningful.
MAX_GPUS_PER_NODE = 64
MAX_NODES = 8192
MAX_MICRO_BATCH = 65536
MAX_ACCUMULATION = 1 << 20
MAX_SEQ_LEN = 1 << 24
MAX_LORA_RANK = 65536
MAX_BUFFER_ELEMENTS = 1 << 40

# DeepSpeed `zero_optimization` knobs that change memory; value kinds for validation.
DEEPSPEED_INT_KNOBS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_max_live_parameters",
                       "stage3_max_reuse_distance", "stage3_param_persistence_threshold", "sub_group_size",
                       "zero_hpz_partition_size")
DEEPSPEED_BOOL_KNOBS = ("overlap_comm", "contiguous_gradients", "zero_init")
DEEPSPEED_AUTO_OK = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                     "gradient_clipping")
DEEPSPEED_KNOBS = DEEPSPEED_INT_KNOBS + DEEPSPEED_BOOL_KNOBS + ("gradient_clipping",)
NETWORK_KINDS = ("infiniband", "roce", "ethernet", "efa")    # plan-v1 Extension 2: `network`
GPU_RATES = ("bf16_dense_tflops", "fp16_dense_tflops", "memory_bandwidth_gb_s", "link_gb_s", "pcie_gb_s")


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 16
    alpha: float = 32
    dropout: float = 0.05
    targets: tuple[str, ...] = LLAMA_TARGETS


@dataclass(frozen=True)
class QuantSettings:
    type: str = "nf4"
    double_quant: bool = True
    compute_dtype: str = "bf16"


@dataclass(frozen=True)
class Plan:
    """One training setup. Attribute names are the plan-v1 keys."""
    model: Any = "llama-3.1-8b"                # preset id (str) or a read-only mapping of config.json fields
    gpu: Any = "a100-sxm4-80gb"                # preset id (str) or a read-only mapping {name, memory_gib, ...}
    gpus_per_node: int = 4
    nodes: int = 1
    framework: str = "deepspeed"
    zero_stage: int = 2
    offload_optimizer: str = "none"
    offload_params: str = "none"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    micro_batch_size: int = 2
    gradient_accumulation_steps: int = 4
    seq_len: int = 4096
    activation_checkpointing: str = "none"
    activation_offloading: bool = False
    attention: str = "flash"
    loss: str = "standard"
    optimizer_in_backward: bool = False
    method: str = "full"
    deepspeed: Mapping = field(default_factory=lambda: MappingProxyType({}))
    lora: LoraSettings = LoraSettings()
    quantization: QuantSettings = QuantSettings()
    network: Mapping = field(default_factory=lambda: MappingProxyType({}))   # Extension 2; {} = the stated default

    @property
    def world_size(self) -> int:
        """Data-parallel ranks: every GPU holds one (no tensor or pipeline parallelism in plan-v1)."""
        return self.gpus_per_node * self.nodes

    @classmethod
    def from_dict(cls, data: Mapping) -> "Plan":
        return parse_plan(data)

    def to_dict(self) -> dict:
        return plan_to_dict(self)

    def with_changes(self, **changes) -> "Plan":
        """A copy with some keys replaced, validated like a fresh plan."""
        merged = self.to_dict()
        merged.update(changes)
        return parse_plan(merged)


DEFAULT_PLAN = Plan()

# --- value checks ---------------------------------------------------------------------------------


def _int(key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(key, f"must be an integer from {lo} to {hi}, got {_show(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise PlanError(key, f"must be a whole number from {lo} to {hi}, got {_show(value)}")
        value = int(value)
    if not lo <= value <= hi:
        raise PlanError(key, f"must be an integer from {lo} to {hi}, got {_show(value)}")
    return value


def _number(key: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlanError(key, f"must be a number from {lo} to {hi}, got {_show(value)}")
    if not lo <= value <= hi:
        raise PlanError(key, f"must be a number from {lo} to {hi}, got {_show(value)}")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PlanError(key, f"must be true or false, got {_show(value)}")
    return value


def _choice(key: str, value: Any, allowed: tuple) -> Any:
    if isinstance(value, bool) or value not in allowed:
        raise PlanError(key, f"must be one of {', '.join(str(a) for a in allowed)}; got {_show(value)}")
    return value


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _mapping(key: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise PlanError(key, f"must be an object, got {_show(value)}")
    return value


def _reject_unknown(prefix: str, data: Mapping, known) -> None:
    for k in data:
        if k not in known:
            name = f"{prefix}.{k}" if prefix else str(k)
            raise PlanError(name, f"unknown key (allowed: {', '.join(known)})")


# --- sections ------------------------------------------------------------------------------------


def _parse_model(value: Any) -> Any:
    if isinstance(value, str):
        if value not in MODELS:
            raise PlanError("model", f"unknown preset {_show(value)}; see `zerocalc presets models`")
        return value
    obj = _mapping("model", value)
    # Deep validation of architecture fields happens in architecture.model_from_config, which
    # raises PlanError("model.<field>", ...); call it here so a bad model is caught at parse time.
    from .architecture import model_from_config
    model_from_config(obj)
    return _freeze(obj)


def _parse_gpu(value: Any) -> Any:
    if isinstance(value, str):
        if value not in GPUS:
            raise PlanError("gpu", f"unknown preset {_show(value)}; see `zerocalc presets gpus`")
        return value
    obj = _mapping("gpu", value)
    if "memory_gib" not in obj:
        raise PlanError("gpu.memory_gib", "a custom GPU needs memory_gib (its capacity in GiB)")
    _number("gpu.memory_gib", obj["memory_gib"], 1, 65536)
    if "name" in obj and not isinstance(obj["name"], str):
        raise PlanError("gpu.name", f"must be a string, got {_show(obj['name'])}")
    if "bf16_supported" in obj:
        _bool("gpu.bf16_supported", obj["bf16_supported"])
    for rate in GPU_RATES:                     # Extension 2: optional rates of a custom GPU
        if obj.get(rate) is not None:
            _number(f"gpu.{rate}", obj[rate], 1e-3, 1e7)
    return _freeze(obj)


def _parse_deepspeed(value: Any) -> Mapping:
    obj = _mapping("deepspeed", value)
    _reject_unknown("deepspeed", obj, DEEPSPEED_KNOBS)
    out = {}
    for k, v in obj.items():
        key = f"deepspeed.{k}"
        if v == "auto" and isinstance(v, str):
            if k not in DEEPSPEED_AUTO_OK:
                raise PlanError(key, "\"auto\" is filled by the Hugging Face integration only for "
                                     + ", ".join(DEEPSPEED_AUTO_OK))
            out[k] = "auto"
        elif k in DEEPSPEED_BOOL_KNOBS:
            out[k] = _bool(key, v)
        elif k == "gradient_clipping":
            out[k] = _number(key, v, 0, 1e9)
        elif k == "zero_hpz_partition_size":
            out[k] = _int(key, v, 1, MAX_GPUS_PER_NODE)
        else:
            lo = 1 if k in ("reduce_bucket_size", "sub_group_size") else 0
            out[k] = _int(key, v, lo, MAX_BUFFER_ELEMENTS)
    return MappingProxyType(out)


def _parse_network(value: Any) -> Mapping:
    """Extension 2: inter-node bandwidth per GPU, per direction (Gb/s), and the fabric's kind."""
    obj = _mapping("network", value)
    _reject_unknown("network", obj, ("gbps_per_gpu", "kind"))
    out = {}
    if "gbps_per_gpu" in obj:
        out["gbps_per_gpu"] = _number("network.gbps_per_gpu", obj["gbps_per_gpu"], 1e-3, 1e6)
    if "kind" in obj:
        out["kind"] = _choice("network.kind", obj["kind"], NETWORK_KINDS)
    return MappingProxyType(out)


def _parse_lora(value: Any) -> LoraSettings:
    obj = _mapping("lora", value)
    _reject_unknown("lora", obj, ("rank", "alpha", "dropout", "targets"))
    d = LoraSettings()
    rank = _int("lora.rank", obj.get("rank", d.rank), 1, MAX_LORA_RANK)
    alpha = _number("lora.alpha", obj.get("alpha", d.alpha), 0, 1e6)
    dropout = _number("lora.dropout", obj.get("dropout", d.dropout), 0, 0.999)
    targets = obj.get("targets", d.targets)
    if isinstance(targets, str) or not isinstance(targets, (list, tuple)) or not targets:
        raise PlanError("lora.targets", f"must be a non-empty list of module names, got {_show(targets)}")
    for t in targets:
        if not isinstance(t, str) or not t or not t.replace("_", "").replace(".", "").isalnum():
            raise PlanError("lora.targets", f"module names are words like q_proj, got {_show(t)}")
    return LoraSettings(rank=rank, alpha=alpha, dropout=dropout, targets=tuple(dict.fromkeys(targets)))


def _parse_quant(value: Any) -> QuantSettings:
    obj = _mapping("quantization", value)
    _reject_unknown("quantization", obj, ("type", "double_quant", "compute_dtype"))
    d = QuantSettings()
    return QuantSettings(
        type=_choice("quantization.type", obj.get("type", d.type), QUANT_TYPES),
        double_quant=_bool("quantization.double_quant", obj.get("double_quant", d.double_quant)),
        compute_dtype=_choice("quantization.compute_dtype", obj.get("compute_dtype", d.compute_dtype),
                              COMPUTE_DTYPES))


_TOP_KEYS = ("schema",) + tuple(f.name for f in fields(Plan))


def parse_plan(data: Any) -> Plan:
    """plan-v1 mapping -> Plan. Raises PlanError naming the first bad key."""
    if not isinstance(data, Mapping):
        raise PlanError("plan", f"must be a JSON object, got {_show(data)}")
    _reject_unknown("", data, _TOP_KEYS)
    if "schema" in data and (isinstance(data["schema"], bool) or data["schema"] != SCHEMA):
        raise PlanError("schema", f"this zerocalc reads plan schema {SCHEMA}, got {_show(data['schema'])}")
    d = DEFAULT_PLAN
    get = data.get
    plan = Plan(
        model=_parse_model(get("model", d.model)),
        gpu=_parse_gpu(get("gpu", d.gpu)),
        gpus_per_node=_int("gpus_per_node", get("gpus_per_node", d.gpus_per_node), 1, MAX_GPUS_PER_NODE),
        nodes=_int("nodes", get("nodes", d.nodes), 1, MAX_NODES),
        framework=_choice("framework", get("framework", d.framework), FRAMEWORKS),
        zero_stage=_choice("zero_stage", _int("zero_stage", get("zero_stage", d.zero_stage), 0, 3), (0, 1, 2, 3)),
        offload_optimizer=_choice("offload_optimizer", get("offload_optimizer", d.offload_optimizer),
                                  OFFLOAD_DEVICES),
        offload_params=_choice("offload_params", get("offload_params", d.offload_params), OFFLOAD_DEVICES),
        precision=_choice("precision", get("precision", d.precision), PRECISIONS),
        optimizer=_choice("optimizer", get("optimizer", d.optimizer), OPTIMIZERS),
        micro_batch_size=_int("micro_batch_size", get("micro_batch_size", d.micro_batch_size), 1, MAX_MICRO_BATCH),
        gradient_accumulation_steps=_int("gradient_accumulation_steps",
                                         get("gradient_accumulation_steps", d.gradient_accumulation_steps),
                                         1, MAX_ACCUMULATION),
        seq_len=_int("seq_len", get("seq_len", d.seq_len), 1, MAX_SEQ_LEN),
        activation_checkpointing=_choice("activation_checkpointing",
                                         get("activation_checkpointing", d.activation_checkpointing),
                                         CHECKPOINTING),
        activation_offloading=_bool("activation_offloading", get("activation_offloading", d.activation_offloading)),
        attention=_choice("attention", get("attention", d.attention), ATTENTIONS),
        loss=_choice("loss", get("loss", d.loss), LOSSES),
        optimizer_in_backward=_bool("optimizer_in_backward", get("optimizer_in_backward", d.optimizer_in_backward)),
        method=_choice("method", get("method", d.method), METHODS),
        deepspeed=_parse_deepspeed(get("deepspeed", {})),
        lora=_parse_lora(get("lora", {})),
        quantization=_parse_quant(get("quantization", {})),
        network=_parse_network(get("network", {})),
    )
    _check_consistency(plan)
    return plan


def _check_consistency(plan: Plan) -> None:
    """Combinations no real run can have (the ones that are merely unwise become warnings)."""
    if plan.framework == "single" and plan.world_size != 1:
        raise PlanError("framework", f"single means one process on one GPU, but the cluster has "
                                     f"{plan.world_size} GPUs; use ddp, fsdp or deepspeed")
    if plan.framework == "fsdp" and plan.zero_stage not in (2, 3):
        raise PlanError("zero_stage", "with fsdp, 2 means SHARD_GRAD_OP and 3 FULL_SHARD; got "
                                      f"{plan.zero_stage}")
    if plan.framework in ("ddp", "single") and (plan.offload_optimizer != "none" or plan.offload_params != "none"):
        key = "offload_optimizer" if plan.offload_optimizer != "none" else "offload_params"
        raise PlanError(key, f"offload needs deepspeed or fsdp, not {plan.framework}")
    if plan.framework == "fsdp" and "nvme" in (plan.offload_optimizer, plan.offload_params):
        key = "offload_optimizer" if plan.offload_optimizer == "nvme" else "offload_params"
        raise PlanError(key, "fsdp offloads to cpu only; nvme is DeepSpeed ZeRO-Infinity")
    if plan.framework == "deepspeed" and plan.zero_stage == 0 and plan.offload_optimizer != "none":
        raise PlanError("offload_optimizer", "DeepSpeed offloads the optimizer only at ZeRO stage 1-3")
    if plan.method == "qlora" and plan.precision == "fp32" and plan.quantization.compute_dtype != "fp32":
        pass  # legal: fp32 adapters with a 16-bit compute dtype


def _freeze(obj: Mapping) -> Mapping:
    def f(v):
        if isinstance(v, Mapping):
            return MappingProxyType({k: f(x) for k, x in v.items()})
        if isinstance(v, list):
            return tuple(f(x) for x in v)
        return v
    return f(obj)


def _thaw(v):
    if isinstance(v, Mapping):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def plan_to_dict(plan: Plan) -> dict:
    """Plan -> plan-v1 dict with every key present; ``parse_plan(plan_to_dict(p)) == p``."""
    out: dict = {"schema": SCHEMA}
    for f in fields(Plan):
        v = getattr(plan, f.name)
        if isinstance(v, LoraSettings):
            v = {"rank": v.rank, "alpha": v.alpha, "dropout": v.dropout, "targets": list(v.targets)}
        elif isinstance(v, QuantSettings):
            v = {"type": v.type, "double_quant": v.double_quant, "compute_dtype": v.compute_dtype}
        elif f.name == "network" and not v:
            continue                  # Extension 2 key: omitted while it takes the stated default
        else:
            v = _thaw(v)
        out[f.name] = v
    return out


__all__ = ["Plan", "PlanError", "parse_plan", "plan_to_dict", "DEFAULT_PLAN", "replace"]
