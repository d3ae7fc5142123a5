"""The rates the step time is computed at: the GPU's peak, the compute efficiency, the links.

Peak rates come from the GPU presets (``presets/gpus.json``: vendor datasheet dense tensor-core
figures, no sparsity); a custom GPU object may carry ``bf16_dense_tflops``, ``fp16_dense_tflops``,
``memory_bandwidth_gb_s``, ``link_gb_s``, ``pcie_gb_s`` (else the A100's figures are assumed and said so).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..presets import GPUS

# Hardware FLOPs utilisation (recompute included) of a tuned PyTorch training step, per GPU generation,
# from published measurements. The same figure serves every framework: what differs between DeepSpeed,
# FSDP and DDP (communication, offload) is modelled separately, on top of the compute time.
EFFICIENCY = {
    "sm70": (0.30, "Megatron-LM (Shoeybi et al. 2019, arXiv 1909.08053 §5): one V100 sustains 39 TFLOP/s, "
                   "30 % of peak"),
    "sm80": (0.60, "torchtitan performance.md (pytorch/torchtitan, docs folder): Llama 2 13B, FSDP2, no activation checkpointing, 64 A100: "
                   "61.1 % MFU (= HFU, nothing recomputed); Llama 3 8B selective AC 56.8-58.2 %"),
    "sm8x": (0.60, "Ampere/Ada workstation and consumer GPUs: the sm80 figure (torchtitan, A100) applied to "
                   "the datasheet dense bf16 rate with fp32 accumulation"),
    "sm90": (0.40, "torchtitan benchmarks/llama3_h100_202412_torchtitan.md: Llama 3.1 8B, FSDP, 8-128 H100, "
                   "bf16: 33 % to 39 % MFU; llm-foundry H100 BF16 table: 7B at 2048, no AC, 46.44 % MFU"),
    "other": (0.40, "no published figure for this GPU here: the H100 figure (torchtitan) is assumed"),
}

# torch.compile (inductor) speeds the step's compute by about 16 %: torchtitan
# benchmarks/llama3_h100_202412_torchtitan.md, Llama 3.1 8B, FSDP, selective activation checkpointing, H100,
# Table 1 (8 GPUs) 5,762 -> 6,667 TPS/GPU (+15.7 %) and Table 3 (128 GPUs) 5,605 -> 6,514 (+16.2 %). A stated
# assumption for every compiled plan (`stack.compile` model or model+loss): measured on one model and GPU.
COMPILE_SPEEDUP = 1.16
COMPILE_SOURCE = ("torch.compile: compute rate x 1.16 (torchtitan benchmarks/llama3_h100_202412_torchtitan.md "
                  "Tables 1 and 3: +15.7 % and +16.2 % TPS/GPU, Llama 3.1 8B, H100)")

# Network default: an 8 x 400 Gb/s-class fabric (one 400 Gb/s NIC per GPU, ConnectX-7 NDR InfiniBand, as in
# DGX H100 / HGX nodes and the torchtitan H100 benchmark: "400 Gb/s per GPU").
DEFAULT_NETWORK = {"gbps_per_gpu": 400.0, "kind": "infiniband"}

# NCCL's ring reaches about 80 % of a link's unidirectional rate as bus bandwidth on large messages
# (nccl-tests busbw on NVLink and InfiniBand nodes); a stated assumption applied to every link.
LINK_EFFICIENCY = 0.8
# PCIe host<->device copies: pinned-memory cudaMemcpyAsync reaches about 80 % of the per-direction rate
# (PCIe 4 x16: ~25 of 31.5 GB/s); a stated assumption.
PCIE_EFFICIENCY = 0.8
# The optimizer step streams its arrays at about 80 % of HBM bandwidth (a stated assumption).
HBM_EFFICIENCY = 0.8
# Host memory bandwidth a node's CPU Adam shares (DeepSpeed csrc/adam cpu_adam: AVX, memory-bound):
# a stated assumption of 100 GB/s usable on a two-socket server.
HOST_MEMORY_GB_S = 100.0
# NVMe read/write bandwidth per node for ZeRO-Infinity (a PCIe 4 NVMe array): a stated assumption.
NVME_GB_S = 6.0


@dataclass(frozen=True)
class Rates:
    name: str
    peak_flops: float               # dense FLOP/s at the plan's compute dtype
    efficiency: float               # hardware FLOPs utilisation assumed
    efficiency_source: str
    hbm_bytes_s: float
    nvlink_bytes_s: float | None    # per GPU, unidirectional; None: no all-to-all NVLink in the node
    pcie_bytes_s: float
    network_bytes_s: float
    network_kind: str
    network_defaulted: bool
    assumed: tuple = ()             # notes on values that had to be assumed


def _generation(cc: str | None) -> str:
    if not cc:
        return "other"
    major = cc.split(".")[0]
    if cc == "8.0":
        return "sm80"
    return {"7": "sm70", "8": "sm8x", "9": "sm90"}.get(major, "other")


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
    else:
        name, cc = str(gpu.get("name", "custom GPU")), gpu.get("compute_capability")
        inter = str(gpu.get("interconnect", "PCIe"))
        bf16, fp16 = gpu.get("bf16_dense_tflops"), gpu.get("fp16_dense_tflops")
        hbm, link, pcie = gpu.get("memory_bandwidth_gb_s"), gpu.get("link_gb_s"), gpu.get("pcie_gb_s")
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
    if not peak:
        peak = 312.0
        assumed.append(f"{name}: no dense 16-bit rate known; 312 TFLOP/s (A100) assumed")
    if not hbm:
        hbm = 2039.0
        assumed.append(f"{name}: memory bandwidth unknown; 2039 GB/s (A100 80GB) assumed")
    if not pcie:
        pcie = 31.5
        assumed.append(f"{name}: PCIe rate unknown; PCIe 4 x16 (31.5 GB/s) assumed")
    gen = _generation(cc) if cc or isinstance(gpu, str) else "other"
    eff, src = EFFICIENCY[gen]
    net = dict(DEFAULT_NETWORK)
    net.update(plan.network)
    nvlink = link * 1e9 if link and _nvlink_all_to_all(inter, plan.gpus_per_node) else None
    return Rates(name=name, peak_flops=float(peak) * 1e12, efficiency=eff, efficiency_source=src,
                 hbm_bytes_s=float(hbm) * 1e9, nvlink_bytes_s=nvlink, pcie_bytes_s=float(pcie) * 1e9,
                 network_bytes_s=float(net["gbps_per_gpu"]) * 1e9 / 8, network_kind=str(net["kind"]),
                 network_defaulted="gbps_per_gpu" not in plan.network, assumed=tuple(assumed))


__all__ = ["Rates", "gpu_rates", "EFFICIENCY", "COMPILE_SPEEDUP", "COMPILE_SOURCE", "DEFAULT_NETWORK", "LINK_EFFICIENCY", "PCIE_EFFICIENCY",
           "HOST_MEMORY_GB_S", "NVME_GB_S", "HBM_EFFICIENCY"]
