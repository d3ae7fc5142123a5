"""The accelerator as the engine uses it: a GPU preset (presets/gpus.json) or a custom {name, memory_gib, ...}."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .presets import GPUS
from .units import GIB


@dataclass(frozen=True)
class GpuSpec:
    name: str
    capacity_bytes: int          # what the device offers (nvidia-smi total)
    bf16_supported: bool
    compute_capability: str | None
    interconnect: str
    link_gb_s: float | None      # per-GPU unidirectional scale-up bandwidth, decimal GB/s


def gpu_spec(gpu: Any) -> GpuSpec:
    """plan.gpu (preset id or a validated custom mapping) -> GpuSpec."""
    if isinstance(gpu, str):
        g = GPUS[gpu]
        return GpuSpec(g.name, g.memory_bytes, g.bf16_supported, g.compute_capability, g.interconnect, g.link_gb_s)
    return GpuSpec(str(gpu.get("name", "custom GPU")), int(float(gpu["memory_gib"]) * GIB),
                   bool(gpu.get("bf16_supported", True)), gpu.get("compute_capability"),
                   str(gpu.get("interconnect", "unknown")), gpu.get("link_gb_s"))
