"""The rates the step time is computed at: the GPU's peak, the compute efficiency, the links.

Peak rates come from the GPU presets (``presets/gpus.json``: vendor datasheet dense tensor-core
figures, no sparsity); a custom GPU object may carry ``bf16_dense_tflops``, ``fp16_dense_tflops``,
``memory_bandwidth_gb_s``, ``link_gb_s``, ``pcie_gb_s`` (else the A100's figures are assumed and said so), and
``fp8_dense_tflops`` for a plan with fp8 linears (the presets' fp8 rate: the vendors' dense fp8 tensor-core peak).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..presets import GPUS
from .kernels import MAMF, MAMF_RATIO, sm_count

# The compute rates are per kernel now (kernels.py: GEMM best-shape rates per GPU, the FlashAttention papers'
# rates, memory-bound ops at a share of HBM bandwidth; ops.py evaluates them). Below: the links.

# Network default: an 8 x 400 Gb/s-class fabric (one 400 Gb/s NIC per GPU, ConnectX-7 NDR InfiniBand, as in
# DGX H100 / HGX nodes and the torchtitan H100 benchmark: "400 Gb/s per GPU").
DEFAULT_NETWORK = {"gbps_per_gpu": 400.0, "kind": "infiniband"}

# NCCL's ring reaches about 80 % of a link's unidirectional rate as bus bandwidth on large messages
# (nccl-tests busbw on NVLink and InfiniBand nodes); a stated assumption applied to every link.
LINK_EFFICIENCY = 0.8
# PCIe host<->device copies: pinned-memory cudaMemcpyAsync reaches about 80 % of the per-direction rate
# (PCIe 4 x16: ~25 of 31.5 GB/s); a stated assumption.
PCIE_EFFICIENCY = 0.8
# Host memory bandwidth a node's CPU Adam shares (DeepSpeed csrc/adam cpu_adam: AVX, memory-bound):
# a stated assumption of 100 GB/s usable on a two-socket server.
HOST_MEMORY_GB_S = 100.0
# NVMe read/write bandwidth per node for ZeRO-Infinity (a PCIe 4 NVMe array): a stated assumption.
NVME_GB_S = 6.0


@dataclass(frozen=True)
class Rates:
    name: str
    peak_flops: float               # dense FLOP/s at the plan's compute dtype
    gemm_best: float                # best-shape GEMM rate over peak (kernels.MAMF)
    gemm_source: str
    hbm_bytes_s: float
    nvlink_bytes_s: float | None    # per GPU, unidirectional; None: no all-to-all NVLink in the node
    pcie_bytes_s: float
    network_bytes_s: float
    network_kind: str
    network_defaulted: bool
    assumed: tuple = ()             # notes on values that had to be assumed
    generation: str = "other"       # sm70, sm80, sm8x, sm90, sm100, other (kernel tables)
    warn: tuple = ()                # assumptions the estimate's warnings name (custom GPU without rates)
    sms: int = 108                  # streaming multiprocessors (kernels.SMS; a custom GPU's "sm_count")
    fp8_flops: float = 0.0          # dense fp8 tensor-core FLOP/s (0: none; plan-v1 Extension 9 `fp8`)


def _generation(cc: str | None) -> str:
    if not cc:
        return "other"
    major = cc.split(".")[0]
    if cc == "8.0":
        return "sm80"
    return {"7": "sm70", "8": "sm8x", "9": "sm90", "10": "sm100", "12": "sm100"}.get(major, "other")


def _nvlink_all_to_all(interconnect: str, gpus_per_node: int) -> bool:
    """NVSwitch nodes connect every GPU; a bridge joins pairs only (a ring over more GPUs crosses PCIe)."""
    text = interconnect.lower()
    if "nvlink" not in text and "infinity fabric" not in text and "xgmi" not in text:
        return False
    if "bridge" in text or "pairs" in text:
        return gpus_per_node <= 2
    return True


def gpu_rates(plan, gpu=None) -> Rates:
    """The rates of the plan's GPU (``gpu``: a preset id or a custom object; default ``plan.gpu``)."""
    gpu = plan.gpu if gpu is None else gpu
    assumed = []
    if isinstance(gpu, str):
        g = GPUS[gpu]
        name, cc, inter = g.name, g.compute_capability, g.interconnect
        bf16, fp16, hbm, link, pcie = (g.bf16_dense_tflops, g.fp16_dense_tflops, g.memory_bandwidth_gb_s,
                                       g.link_gb_s, g.pcie_gb_s)
        fp8 = g.fp8_dense_tflops
    else:
        name, cc = str(gpu.get("name", "custom GPU")), gpu.get("compute_capability")
        inter = str(gpu.get("interconnect", "PCIe"))
        bf16, fp16 = gpu.get("bf16_dense_tflops"), gpu.get("fp16_dense_tflops")
        hbm, link, pcie = gpu.get("memory_bandwidth_gb_s"), gpu.get("link_gb_s"), gpu.get("pcie_gb_s")
        fp8 = gpu.get("fp8_dense_tflops")
        if link and "interconnect" not in gpu:
            inter = "NVLink"
    if plan.precision == "fp32":
        # TF32 tensor cores (PyTorch's default for matmuls is full fp32 unless allow_tf32): take 1/2 of the
        # 16-bit rate as an assumption
        peak = (bf16 or fp16 or 312) / 2
        assumed.append("fp32: half the 16-bit tensor-core rate (TF32) assumed")
    elif plan.precision.startswith("fp16"):
        peak = fp16 or bf16
    else:
        peak = bf16 or fp16
    warn = []
    if not peak:
        peak = 312.0
        warn.append(f"{name}: no dense 16-bit rate known; 312 TFLOP/s (A100) assumed")
    if not hbm:
        hbm = 2039.0
        warn.append(f"{name}: memory bandwidth unknown; 2039 GB/s (A100 80GB) assumed")
    if not pcie:
        pcie = 31.5
        assumed.append(f"{name}: PCIe rate unknown; PCIe 4 x16 (31.5 GB/s) assumed")
    gen = _generation(cc)
    if isinstance(gpu, str) and gpu in MAMF:
        best, src = MAMF[gpu][0] / float(peak), MAMF[gpu][1]
    else:
        best = MAMF_RATIO[gen]
        src = f"{name}: no best-shape GEMM measurement here; the {gen} ratio {best:.2f} of peak assumed"
        if gen == "other":
            warn.append(f"{name}: compute capability {cc or 'unknown'}: no kernel rates for it; GEMMs at {best:.0%} "
                        "of peak and FlashAttention-2 at Hopper's rates assumed")
        else:
            assumed.append(src)
    best = min(1.0, best)
    sms = sm_count(gpu) if isinstance(gpu, str) else gpu.get("sm_count")
    if not sms:
        sms = 108
        assumed.append(f"{name}: SM count unknown; 108 (A100) assumed for NCCL's share of the SMs")
    net = dict(DEFAULT_NETWORK)
    net.update(plan.network)
    nvlink = link * 1e9 if link and _nvlink_all_to_all(inter, plan.gpus_per_node) else None
    return Rates(name=name, peak_flops=float(peak) * 1e12, gemm_best=best, gemm_source=src,
                 hbm_bytes_s=float(hbm) * 1e9, nvlink_bytes_s=nvlink, pcie_bytes_s=float(pcie) * 1e9,
                 network_bytes_s=float(net["gbps_per_gpu"]) * 1e9 / 8, network_kind=str(net["kind"]),
                 network_defaulted="gbps_per_gpu" not in plan.network, assumed=tuple(assumed + warn),
                 generation=gen, warn=tuple(warn), sms=int(sms), fp8_flops=float(fp8 or 0) * 1e12)


__all__ = ["Rates", "gpu_rates", "DEFAULT_NETWORK", "LINK_EFFICIENCY", "PCIE_EFFICIENCY",
           "HOST_MEMORY_GB_S", "NVME_GB_S"]
