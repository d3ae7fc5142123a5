"""Step time of one optimizer step (plan-v1 Extension 2: ``step`` and ``communication``).

    step_estimate(plan, arch, gpu) -> Step;  Step.to_dict() -> {"step": {...}, "communication": {...}}

time_s = compute_s + exposed_communication_s + offload_s, on the busiest (any) rank:
- compute_s: micro-steps x (forward + backward) from the operations they run (ops.py over kernels.py:
  GEMMs at the shape's rate, the attention kernel, memory-bound ops by bytes, launches beyond the GPU time,
  recompute), plus the optimizer step on the GPU (memory-bound: each implementation's passes over HBM);
  ``breakdown`` splits time_s into gemm, attention, memory_bound, launch, optimizer, exposed_comm, offload;
- communication (comm.py): every collective's bytes and time; the exposed part is what compute cannot hide;
- offload_s (offload.py): PCIe copies, the CPU optimizer, NVMe.
Pure functions of the plan and the model's dimensions; no memory figures are needed here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..memory.stack import effective_stack
from .comm import Collective, collectives, exposed_time
from .flops import Flops, adapter_matmul_params, flops_per_token
from .kernels import (ADAMW_KERNELS_PER_TENSOR, ADAMW_PASSES, ATTENTION_SOURCE, COMPILE_SOURCE, FP8_SOURCE, LAUNCH_S,
                      MEMORY_EFFICIENCY, NCCL_CHANNELS)
from .offload import Offload, offload_time
from .ops import MicroStep, micro_step, model_assumptions
from .rates import HOST_MEMORY_GB_S, NVME_GB_S, Rates, gpu_rates


@dataclass(frozen=True)
class Step:
    plan: object
    rates: Rates
    flops: Flops
    tokens_per_step: int                 # whole cluster
    compute_s: float
    optimizer_s: float                   # part of compute_s
    forward_s: float                     # one micro-step
    backward_s: float                    # one micro-step (recompute included)
    collectives: tuple = ()
    communication_s: float = 0.0
    exposed_communication_s: float = 0.0
    offload: Offload | None = None
    train_tokens: float | None = None
    price_per_gpu_hour: float | None = None
    notes: tuple = field(default=())
    micro: MicroStep | None = None
    warnings: tuple = field(default=())   # assumptions the estimate's warnings name (no silent fallbacks)
    model_warnings: tuple = field(default=())   # the model's layers priced as a traced family's (ops.py)

    @property
    def offload_s(self) -> float:
        return self.offload.total_s if self.offload else 0.0

    @property
    def time_s(self) -> float:
        return self.compute_s + self.exposed_communication_s + self.offload_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / self.plan.world_size / self.time_s if self.time_s else 0.0

    @property
    def hfu(self) -> float:
        """Hardware FLOPs (recompute included) per second of compute time over the peak."""
        per_gpu_tokens = self.tokens_per_step / self.plan.world_size
        return per_gpu_tokens * self.flops.hardware / (self.compute_s * self.rates.peak_flops) if self.compute_s else 0.0

    @property
    def mfu(self) -> float:
        """Model FLOPs (no recompute) per second of compute time over the peak."""
        per_gpu_tokens = self.tokens_per_step / self.plan.world_size
        return per_gpu_tokens * self.flops.model / (self.compute_s * self.rates.peak_flops) if self.compute_s else 0.0

    def breakdown(self) -> dict:
        """time_s split by what takes it (seconds per optimizer step; the parts sum to time_s)."""
        gas = self.plan.gradient_accumulation_steps
        m = self.micro
        f, b = (m.forward, m.backward) if m else (None, None)

        def both(attr):
            return gas * (getattr(f, attr) + getattr(b, attr)) if m else 0.0
        return {"gemm_s": both("gemm_s"), "attention_s": both("attention_s"), "memory_bound_s": both("memory_s"),
                "launch_s": both("launch_s"), "optimizer_s": self.optimizer_s,
                "exposed_comm_s": self.exposed_communication_s, "offload_s": self.offload_s}

    def train(self) -> dict | None:
        if self.train_tokens is None:
            return None
        steps = self.train_tokens / self.tokens_per_step
        seconds = steps * self.time_s
        hours = seconds * self.plan.world_size / 3600
        return {"tokens": self.train_tokens, "steps": steps, "time_s": seconds, "gpu_hours": hours,
                "price_per_gpu_hour": self.price_per_gpu_hour,
                "cost": None if self.price_per_gpu_hour is None else hours * self.price_per_gpu_hour}

    def to_dict(self) -> dict:
        r = self.rates
        comm: dict = {}
        for c in self.collectives:
            e = comm.setdefault(c.name, {"bytes": 0, "bus_bytes": 0, "link": c.link, "time_s": 0.0, "calls": 0,
                                         "purposes": {}})
            e["bytes"] += int(c.nbytes * c.calls)
            e["bus_bytes"] += int(c.nbytes * c.calls * c.ring_factor)
            e["time_s"] += c.time_s * c.calls
            e["calls"] += c.calls
            e["purposes"][c.purpose] = e["purposes"].get(c.purpose, 0) + int(c.nbytes * c.calls)
        off = self.offload
        step = {
            "time_s": self.time_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "compute_s": self.compute_s,
            "communication_s": self.communication_s,
            "exposed_communication_s": self.exposed_communication_s,
            "offload_s": self.offload_s,
            "mfu": self.mfu,
            "mfu_basis": "model FLOPs (no recompute) / (compute_s x peak)",
            "hardware_efficiency": self.hfu,
            "efficiency_source": f"from the operations (GEMM: {r.gemm_source}; {ATTENTION_SOURCE})",
            "breakdown": self.breakdown(),
            "kernels_per_micro_step": int(round(self.micro.forward.kernels + self.micro.backward.kernels))
            if self.micro else 0,
            "peak_tflops": r.peak_flops / 1e12,
            "optimizer_s": self.optimizer_s,
            "model_flops_per_token": self.flops.model,
            "hardware_flops_per_token": self.flops.hardware,
            "offload": None if off is None else {
                "pcie_bytes": int(off.pcie_bytes), "pcie_s": off.pcie_s, "cpu_optimizer_s": off.cpu_optimizer_s,
                "nvme_bytes": int(off.nvme_bytes), "nvme_s": off.nvme_s,
                "activation_exposed_s": off.activation_exposed_s},
            "network": {"gbps_per_gpu": r.network_bytes_s * 8 / 1e9, "kind": r.network_kind,
                        "defaulted": r.network_defaulted},
            "train": self.train(),
            "notes": list(self.notes),
        }
        return {"step": step, "communication": comm}


def trainable_params(arch, plan) -> int:
    """Parameters that get gradients: every tensor (full) or the LoRA adapters."""
    return arch.total_params if plan.method == "full" else adapter_matmul_params(arch, plan)


def optimizer_step_time(plan, trainable: int, rates: Rates, tensors: int = 0) -> float:
    """GPU optimizer step, memory-bound: per parameter of the rank's partition, AdamW's passes by implementation
    (kernels.ADAMW_PASSES: fused 7, foreach and single-tensor 20 element reads + writes; DeepSpeed's FusedAdam
    and torchtune's/torchtitan's fused one pass) over the states' dtype, plus the 16-bit copy under mixed
    precision; other optimizers read and write their states once. Over HBM bandwidth at MEMORY_EFFICIENCY;
    a foreach or single-tensor step is launch-bound when its kernels are shorter than LAUNCH_S each. With
    ``optimizer_in_backward`` the same bytes move inside backward; they are counted here all the same."""
    if plan.offload_optimizer != "none" or (plan.framework == "fsdp" and plan.offload_params != "none"):
        return 0.0
    mixed = plan.precision.endswith("mixed")
    w = 4 if (mixed or plan.precision == "fp32") else 2
    sharded = plan.framework == "fsdp" or (plan.framework == "deepspeed" and plan.zero_stage >= 1)
    part = trainable / plan.world_size if sharded else trainable
    kernels = 0.0
    if plan.optimizer in ("adamw", "paged-adamw-32bit"):
        impl = effective_stack(plan).optimizer_impl
        impl = impl if impl in ADAMW_PASSES else "fused"
        per_param = ADAMW_PASSES[impl] * w + (2 if mixed else 0)
        kernels = ADAMW_KERNELS_PER_TENSOR[impl] * tensors
    else:
        states = {"adamw-8bit": 2, "paged-adamw-8bit": 2, "adafactor": 0.1, "sgd": 0, "lion": w}[plan.optimizer]
        per_param = 2 * (w + states) + (4 if plan.precision == "fp32" else 2) + (2 if mixed else 0)
        kernels = tensors
    return max(part * per_param / (rates.hbm_bytes_s * MEMORY_EFFICIENCY), kernels * LAUNCH_S)


def trainable_tensors(arch, plan) -> int:
    """Parameter tensors the optimizer steps: every tensor (full) or two adapter matrices per targeted linear."""
    if plan.method == "full":
        return len(arch.tensors)
    targets = set(plan.lora.targets)
    return 2 * sum(1 for t in arch.tensors if t.linear in targets and len(t.shape) == 2)


def step_estimate(plan, arch, gpu=None, *, train_tokens: float | None = None,
                  price_per_gpu_hour: float | None = None, offloaded_activation_bytes: int = 0,
                  host_memory_gb_s: float = HOST_MEMORY_GB_S, nvme_gb_s: float = NVME_GB_S) -> Step:
    """Step time of ``plan`` for model ``arch`` (plan.arch) on ``gpu`` (default plan.gpu)."""
    rates = gpu_rates(plan, gpu)
    fl = flops_per_token(arch, plan)
    tokens_micro = plan.micro_batch_size * plan.seq_len
    micro = micro_step(arch, plan, rates)
    fwd, bwd = micro.forward.time_s, micro.backward.time_s
    gas = plan.gradient_accumulation_steps
    trainable = trainable_params(arch, plan)
    opt = optimizer_step_time(plan, trainable, rates, trainable_tensors(arch, plan))
    compute = gas * (fwd + bwd) + opt
    colls = collectives(plan, arch, trainable, rates)
    comm_total = sum(c.time_s * c.calls for c in colls)
    exposed = exposed_time(colls, fwd, bwd, gas)
    # the hidden part still takes NCCL_CHANNELS SMs from the compute it overlaps (kernels.NCCL_CHANNELS)
    exposed += max(0.0, comm_total - exposed) * min(1.0, NCCL_CHANNELS / rates.sms)
    off = None
    if (plan.offload_optimizer != "none" or plan.offload_params != "none"
            or (plan.activation_offloading and offloaded_activation_bytes)):
        off = offload_time(plan, arch, trainable, rates, fwd + bwd, offloaded_activation_bytes,
                           host_memory_gb_s, nvme_gb_s)
    notes = list(rates.assumed)
    if micro.compiled:
        notes.append(COMPILE_SOURCE)
    if plan.fp8 != "none":
        notes.append(f"{FP8_SOURCE}; {plan.fp8} scaling, {rates.fp8_flops / 1e12:g} TFLOP/s fp8 peak")
    if rates.network_defaulted and plan.nodes > 1:
        notes.append("network: the default 400 Gb/s per GPU (8 x 400 Gb/s InfiniBand-class node) assumed")
    return Step(plan=plan, rates=rates, flops=fl, tokens_per_step=tokens_micro * gas * plan.world_size,
                compute_s=compute, optimizer_s=opt, forward_s=fwd, backward_s=bwd, collectives=colls,
                communication_s=comm_total, exposed_communication_s=exposed, offload=off,
                train_tokens=train_tokens, price_per_gpu_hour=price_per_gpu_hour, notes=tuple(notes),
                micro=micro, warnings=rates.warn, model_warnings=model_assumptions(arch))


__all__ = ["Step", "step_estimate", "trainable_params", "trainable_tensors", "optimizer_step_time", "Collective", "Flops", "Offload",
           "Rates", "gpu_rates", "flops_per_token"]
