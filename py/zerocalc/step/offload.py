"""Offload time of one optimizer step: PCIe copies, the CPU optimizer, NVMe swaps (ZeRO-Infinity).

What moves (DeepSpeed `stage_1_and_2.py` / `stage3.py` with `offload_optimizer`, `offload_param`; FSDP
`CPUOffload(offload_params=True)`, whose optimizer then steps on the CPU):
- optimizer offload: each micro-step's gradient partition goes device -> host (accumulated in the fp32
  host buffer), the CPU optimizer updates the partition, the 16-bit partition comes back host -> device;
- parameter offload (stage 3 / FSDP): the parameter shard is copied host -> device before each gather,
  in forward and again in backward, every micro-step;
- NVMe (ZeRO-Infinity): the fp32 master, m and v of the partition are read and written once per step
  (optimizer), the 16-bit shard read twice per micro-step (parameters), at ``NVME_GB_S`` per node;
- activation offloading (torchtune `OffloadActivations`): saved activations out in forward and back in
  backward on a side stream, hidden behind compute up to the compute time.
The CPU optimizer is memory-bound, at ``HOST_MEMORY_GB_S`` shared by the node's ranks, with its bytes per
parameter by implementation and precision (``cpu_optimizer_bytes``): DeepSpeed's own CPU Adam / Lion /
Adagrad (csrc/adam/cpu_adam_impl.cpp: fp32 param, grad, m, v read, param, m, v and the 16-bit copy written,
30 B for Adam), torch's optimizer on host tensors (FSDP CPUOffload: the single-tensor path, one pass per op
over the parameter dtype: kernels.ADAMW_PASSES) otherwise. Offload copies are not overlapped with compute
(DeepSpeed's one-step-delayed update is off by default), so offload time adds to the step.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..memory.stack import effective_stack
from .kernels import ADAMW_PASSES, DS_CPU_OPTIMIZER_BYTES
from .rates import HOST_MEMORY_GB_S, NVME_GB_S, PCIE_EFFICIENCY, Rates

CPU_ADAM_BYTES_PER_PARAM = DS_CPU_OPTIMIZER_BYTES["adamw"]
# torch's optimizers on host tensors: element passes per parameter (AdamW: kernels.ADAMW_PASSES; SGD with
# momentum: mul_, add_ (momentum), add_ (param): 2 + 3 + 3 = 8; Adafactor's row/column factors ~ 12; Lion 9)
TORCH_CPU_PASSES = {"adamw": ADAMW_PASSES["single-tensor"], "paged-adamw-32bit": ADAMW_PASSES["single-tensor"],
                    "adamw-8bit": ADAMW_PASSES["single-tensor"], "paged-adamw-8bit": ADAMW_PASSES["single-tensor"],
                    "sgd": 8, "lion": 9, "adafactor": 12}


def cpu_optimizer_bytes(plan) -> float:
    """Host bytes per parameter of one CPU optimizer step: DeepSpeed's CPU optimizers (ZeRO-Offload builds
    DeepSpeedCPUAdam / CPULion / CPUAdagrad, deepspeed/runtime/zero/stage_1_and_2.py and stage3.py
    zero_force_ds_cpu_optimizer) work on the fp32 master; torch's (FSDP CPUOffload) on the parameter dtype,
    fp32 under mixed precision and fp32 plans, 16-bit under bf16-pure."""
    if plan.framework == "deepspeed" and plan.optimizer in DS_CPU_OPTIMIZER_BYTES:
        return DS_CPU_OPTIMIZER_BYTES[plan.optimizer]
    w = 2 if plan.precision == "bf16-pure" else 4
    if plan.optimizer in ("adamw", "paged-adamw-32bit") and effective_stack(plan).optimizer_impl == "fused":
        # fused=True (torchtune's and torchtitan's configs) runs aten::_fused_adamw_'s CPU kernel (torch >= 2.4):
        # one pass; foreach is CUDA-only, so an unflagged AdamW on host tensors takes the single-tensor path
        return ADAMW_PASSES["fused"] * w
    return TORCH_CPU_PASSES.get(plan.optimizer, ADAMW_PASSES["single-tensor"]) * w


@dataclass(frozen=True)
class Offload:
    pcie_bytes: float            # per GPU per step, both directions
    pcie_s: float
    cpu_optimizer_s: float
    nvme_bytes: float            # per node per step
    nvme_s: float
    activation_exposed_s: float

    @property
    def total_s(self) -> float:
        return self.pcie_s + self.cpu_optimizer_s + self.nvme_s + self.activation_exposed_s


def offload_time(plan, arch, trainable: int, rates: Rates, compute_micro_s: float,
                 offloaded_activation_bytes: int = 0, host_memory_gb_s: float = HOST_MEMORY_GB_S,
                 nvme_gb_s: float = NVME_GB_S) -> Offload:
    """Offload time of one step of ``plan`` on one GPU (see the module docstring)."""
    n, gas, per_node = plan.world_size, plan.gradient_accumulation_steps, plan.gpus_per_node
    pcie = rates.pcie_bytes_s * PCIE_EFFICIENCY
    opt = plan.offload_optimizer != "none" or (plan.framework == "fsdp" and plan.offload_params != "none")
    par = plan.offload_params != "none"
    gb = 4 if plan.precision == "fp32" else 2
    part = trainable / n
    pcie_bytes = nvme_bytes = cpu_s = 0.0
    if opt:
        pcie_bytes += gas * part * gb + part * gb          # gradients down each micro-step, params up once
        cpu_s = per_node * part * cpu_optimizer_bytes(plan) / (host_memory_gb_s * 1e9)
    if par:
        frozen = 0 if plan.method == "full" else arch.total_params
        shard = (trainable * gb + frozen * (0.5 * 1.03 if plan.method == "qlora" else gb)) / n
        pcie_bytes += gas * 2 * shard
        if plan.offload_params == "nvme":
            nvme_bytes += per_node * gas * 2 * shard
    if plan.offload_optimizer == "nvme":
        nvme_bytes += per_node * part * 12 * 2                # fp32 master, m, v: read and written
    act = 0.0
    if plan.activation_offloading and offloaded_activation_bytes:
        act = gas * max(0.0, 2 * offloaded_activation_bytes / pcie - compute_micro_s)
    return Offload(pcie_bytes=pcie_bytes, pcie_s=pcie_bytes / pcie, cpu_optimizer_s=cpu_s,
                   nvme_bytes=nvme_bytes, nvme_s=nvme_bytes / (nvme_gb_s * 1e9), activation_exposed_s=act)


__all__ = ["Offload", "offload_time", "CPU_ADAM_BYTES_PER_PARAM", "cpu_optimizer_bytes"]
