"""What an estimate says: the per-GPU figures at the peak, the verdicts, and typed warnings.

estimate.py builds these; advice, fit, exports, the doctor, the CLI and the page only read them.
``Estimate.to_dict()`` is the contract's JSON (plan-v1, "The estimate").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .hardware import GpuSpec
from .model import ModelArch
from .plan import Plan


@dataclass(frozen=True)
class Warning:
    """One checklist item. ``id`` is stable (the page, tests and users refer to it)."""
    id: str
    severity: str        # error | warning | info
    message: str
    fix: str = ""

    def to_dict(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message, "fix": self.fix}


@dataclass(frozen=True)
class PerGpu:
    phase: str
    phase_allocated: Mapping          # phase -> allocated bytes
    components: Mapping               # component -> bytes at the peak (sums to device_used)
    detail: Mapping                   # term -> bytes at the peak
    peak_allocated: int
    peak_reserved: int
    device_used: int
    host_per_rank: int                # steady-state host bytes of one rank (pinned rounded)
    host_detail: Mapping
    deepspeed_buffers: Mapping        # DeepSpeed buffer -> bytes on this rank (sizes, any phase)
    logits_step: int = 0              # the step's logits bytes at their largest moment (memory/fragmentation.py)
    counted: int = 0                  # in peak_allocated / peak_reserved but not on the device (memory/terms COUNTED)


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    arch: ModelArch
    gpu: GpuSpec
    per_gpu: PerGpu
    capacity_bytes: int
    fits: bool
    primary_driver: str
    host_per_node_bytes: int
    tokens_per_step: int
    global_batch_size: int
    trainable_params: int
    total_params: int
    min_gpus: int | None
    warnings: tuple = field(default=())            # of Warning
    # Counterfactuals the verdicts need, computed by estimate.py (advice never calls back):
    zero2_device_used: int | None = None            # ZeRO-3 plans: the same plan at ZeRO-2, nvidia-smi bytes
    step: object = field(default=None, repr=False, compare=False)     # step.Step (Extension 2)
    run: object = field(default=None, repr=False, compare=False)      # run.RunPeaks (Extension 5)
    run_fix: str = ""                               # the setting that keeps the first phase over capacity inside
    run_steps: object = field(default=None, repr=False, compare=False)  # memory/fragmentation.over_steps (Ext. 6)
    # the plan's model_support (memory/vision.plan_support): the model's, or what this plan leaves approximate
    model_support: str = ""

    def to_dict(self) -> dict:
        pg = self.per_gpu
        return {
            "schema": 1,
            "model": {"name": self.arch.name, "total_params": self.total_params, "layers": self.arch.num_layers,
                      "hidden_size": self.arch.hidden_size, "vocab_size": self.arch.vocab_size},
            "model_support": self.model_support or self.arch.support,
            "gpu": {"name": self.gpu.name, "capacity_bytes": self.capacity_bytes,
                    "interconnect": self.gpu.interconnect, "link_gb_s": self.gpu.link_gb_s},
            "per_gpu": {
                "components": dict(pg.components),
                "peak_allocated_bytes": pg.peak_allocated,
                "peak_reserved_bytes": pg.peak_reserved,
                "device_used_bytes": pg.device_used,
                "capacity_bytes": self.capacity_bytes,
                "peak_phase": pg.phase,
                "phases": dict(pg.phase_allocated),
                "detail": dict(pg.detail),
                "deepspeed_buffers": dict(pg.deepspeed_buffers),
                "host_bytes": pg.host_per_rank,
                "host_detail": dict(pg.host_detail),
            },
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            **({"run": {**self.run.to_dict(), "fix": self.run_fix, **(self.run_steps or {})}}
               if self.run is not None else {}),
            "headroom_bytes": self.capacity_bytes - pg.device_used,
            "primary_driver": self.primary_driver,
            "host_per_node_bytes": self.host_per_node_bytes,
            "tokens_per_step": self.tokens_per_step,
            "global_batch_size": self.global_batch_size,
            "trainable_params": self.trainable_params,
            "total_params": self.total_params,
            "min_gpus": self.min_gpus,
            "warnings": [w.to_dict() for w in self.warnings],
            **(self.step.to_dict() if self.step is not None else {}),
        }
