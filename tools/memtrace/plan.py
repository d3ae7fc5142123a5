"""The plan-v1 fields the tracer needs, with the contract's defaults (shared/contracts/plan-v1.md).

Uses the engine's `zerocalc.Plan` when it is importable (it validates and fills defaults); otherwise
reads the dict directly. Only single-GPU plans are traced: sharding is not modelled here.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TracePlan:
    model: object                 # preset id or HF config dict
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    micro_batch_size: int = 2
    gradient_accumulation_steps: int = 4
    seq_len: int = 4096
    activation_checkpointing: str = "none"
    attention: str = "flash"
    loss: str = "standard"
    method: str = "full"
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_targets: tuple = DEFAULT_TARGETS
    quant_type: str = "nf4"
    double_quant: bool = True
    compute_dtype: str = "bf16"


# plan features the tracer does not emulate: refuse instead of tracing something else
_UNSUPPORTED = {
    ("activation_checkpointing", "selective"): "HF has no selective checkpointing to trace",
    ("activation_offloading", True): "activation offloading is not emulated",
    ("loss", "chunked"): "chunked / fused cross-entropy is not emulated",
    ("optimizer_in_backward", True): "optimizer-in-backward is not emulated",
}


def from_dict(d: dict) -> TracePlan:
    """plan-v1 dict -> TracePlan (contract defaults for missing keys).

    Raises ValueError naming the key for features the tracer does not emulate. Sharding keys (framework,
    zero_stage, offload_*) are ignored: the trace is always one process, no wrapper (single-GPU view).
    """
    d = dict(d)
    try:  # the engine's parser validates keys and values when it is there
        from zerocalc import Plan  # noqa: PLC0415
        d = Plan.from_dict(d).to_dict()
    except ImportError:
        pass
    for (key, value), why in _UNSUPPORTED.items():
        if d.get(key) == value:
            raise ValueError(f"{key}={value!r}: {why}")
    lora = d.get("lora") or {}
    q = d.get("quantization") or {}
    return TracePlan(
        model=d.get("model", "llama-3.1-8b"),
        precision=d.get("precision", "bf16-mixed"),
        optimizer=d.get("optimizer", "adamw"),
        micro_batch_size=int(d.get("micro_batch_size", 2)),
        gradient_accumulation_steps=int(d.get("gradient_accumulation_steps", 4)),
        seq_len=int(d.get("seq_len", 4096)),
        activation_checkpointing=d.get("activation_checkpointing", "none"),
        attention=d.get("attention", "flash"),
        loss=d.get("loss", "standard"),
        method=d.get("method", "full"),
        lora_rank=int(lora.get("rank", 16)),
        lora_alpha=int(lora.get("alpha", 32)),
        lora_dropout=float(lora.get("dropout", 0.05)),
        lora_targets=tuple(lora.get("targets", DEFAULT_TARGETS)),
        quant_type=q.get("type", "nf4"),
        double_quant=bool(q.get("double_quant", True)),
        compute_dtype=q.get("compute_dtype", "bf16"),
    )
