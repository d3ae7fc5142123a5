"""Collectives of one training step, per GPU: what is sent, over which link, how long, how much is hidden.

Volumes (Rajbhandari et al. 2020, "ZeRO", §7): DDP all-reduces the gradients once per optimizer step
(2Ψ on a ring); ZeRO-1/2 reduce-scatter the gradients and all-gather the updated 16-bit parameters
(Ψ + Ψ = 2Ψ, as DDP); ZeRO-3 / FSDP FULL_SHARD all-gather the parameters in forward and again in
backward and reduce-scatter the gradients (3Ψ). FSDP SHARD_GRAD_OP keeps the gathered parameters from
forward to the end of backward (one all-gather + reduce-scatter).
When they run: DDP reduces in the last micro-step only (`no_sync` for the others: accelerate /
HF Trainer); ZeRO-1 reduces at the accumulation boundary; ZeRO-2 and ZeRO-3 reduce every micro-step
(`stage_1_and_2.py` reduce_ipg_grads in each backward; `stage3.py`); FSDP reduce-scatters every micro-step.

Time (NCCL `doc/PERFORMANCE.md` bus-bandwidth conventions): a ring all-reduce of S bytes over n ranks
moves S·2(n−1)/n per rank (algbw = busbw·n/(2(n−1))), reduce-scatter and all-gather S·(n−1)/n; the bus
bandwidth is the slowest link the ring crosses (NVLink inside an NVSwitch node, PCIe in a PCIe-only node or
one whose NVLink bridges join pairs only; between nodes NCCL runs one ring per NIC rail, each crossing a node
boundary once, so the inter-node bus bandwidth is the node's NICs together: per-GPU network x GPUs per
node, capped by the intra-node link) at ``LINK_EFFICIENCY``.
Overlap: DDP's buckets and DeepSpeed's with ``overlap_comm`` (default on at stage 3 only, DeepSpeed
`zero/config.py` overlap_comm validator) run behind backward, ZeRO-3/FSDP prefetch the next module's
all-gather behind the current one's compute; what exceeds the compute window, plus the one bucket (or
module) that cannot overlap, is exposed. DeepSpeed stage 1/2 without ``overlap_comm`` and the post-step
all-gather are exposed in full.
Latency (NCCL src/graph/tuning.cc, ncclTopoTuneModel, Ring / Simple protocol, the large-message choice):
each NCCL call costs baseLat 8.4 us plus hwLat per ring step, 3.4 us over NVLink, 5.7 us over PCIe, 9.6 us
per step that crosses the network; a ring all-reduce makes 2(n-1) steps (2(nodes-1) of them between
nodes), reduce-scatter and all-gather n-1 (nodes-1). Calls per collective: FSDP one per wrapped unit (each
decoder layer, plus the root), DeepSpeed ZeRO-3 one fetch per parameterised submodule (a layer's linears and
norms) and one reduce per bucket, DDP one all-reduce per 25 MiB bucket, ZeRO-1/2 one reduce per bucket.
"""
from __future__ import annotations

from dataclasses import dataclass

from .rates import LINK_EFFICIENCY, Rates

DDP_BUCKET_BYTES = 25 * 2 ** 20          # torch DDP bucket_cap_mb=25
DS_REDUCE_BUCKET = 500_000_000           # DeepSpeed 0.19 reduce_bucket_size default (elements)
# NCCL tuning.cc (NVIDIA/nccl, commit 01afd20), Ring / Simple: baseLat and hwLat per ring step, seconds
NCCL_BASE_LAT = 8.4e-6
NCCL_HW_LAT = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "network": 9.6e-6}


@dataclass(frozen=True)
class Collective:
    name: str                # all_reduce, reduce_scatter, all_gather
    purpose: str             # gradients, parameters_forward, parameters_backward, parameters_update
    nbytes: float            # buffer bytes per GPU per call (NCCL's "size")
    calls: int               # per optimizer step
    ring_factor: float       # bus bytes / size
    link: str                # nvlink, pcie, network
    bus_bytes_s: float
    window: str              # fwd, bwd (overlappable with that compute) or none (exposed)
    tail_bytes: float        # the part that can never overlap (first fetch / last bucket)
    messages: int = 1        # NCCL calls the collective is made of (units, submodules, buckets)
    latency_s: float = 0.0   # per NCCL call (alpha: base + per ring step)

    @property
    def time_s(self) -> float:
        """Per call: bandwidth term plus the latency of its NCCL calls."""
        bw = self.nbytes * self.ring_factor / self.bus_bytes_s if self.bus_bytes_s else 0.0
        return bw + self.messages * self.latency_s

    @property
    def tail_s(self) -> float:
        bw = min(self.nbytes, self.tail_bytes) * self.ring_factor / self.bus_bytes_s if self.bus_bytes_s else 0.0
        return bw + self.latency_s


def link_for(plan, rates: Rates) -> tuple[str, float]:
    """(link name, usable bus bandwidth in bytes/s) of a ring over all the plan's GPUs."""
    intra = ("nvlink", rates.nvlink_bytes_s) if rates.nvlink_bytes_s else ("pcie", rates.pcie_bytes_s)
    if plan.nodes > 1:
        rails = rates.network_bytes_s * plan.gpus_per_node
        return "network", min(rails, intra[1]) * LINK_EFFICIENCY
    return intra[0], intra[1] * LINK_EFFICIENCY


def nccl_latency(plan, intra: str, all_reduce: bool) -> float:
    """Latency of one ring call over the plan's GPUs (NCCL tuning.cc: baseLat + intra-node steps x hwLat of
    the node's link, ``intra`` nvlink or pcie, + inter-node steps x the network's)."""
    n, nodes = plan.world_size, plan.nodes
    steps = (2 if all_reduce else 1) * (n - 1)
    inter = (2 if all_reduce else 1) * (nodes - 1)
    return NCCL_BASE_LAT + (steps - inter) * NCCL_HW_LAT[intra] + inter * NCCL_HW_LAT["network"]


def grad_bytes(plan) -> int:
    """Bytes per gradient element on the wire: DDP under bf16/fp16-mixed reduces the fp32 gradients of fp32
    parameters (HF Trainer keeps fp32 weights under autocast); DeepSpeed and FSDP (accelerate sets
    MixedPrecision reduce_dtype to the 16-bit dtype) reduce 16-bit gradients; fp32 plans 4 bytes."""
    if plan.precision == "fp32":
        return 4
    if plan.framework == "ddp" and plan.precision.endswith("mixed"):
        return 4
    return 2


def param_bytes_frozen(plan) -> float:
    """Bytes per frozen-base element gathered by ZeRO-3/FSDP: QLoRA's packed 4-bit storage (0.5 B plus
    ~3 % absmax) or 8-bit, else the 16-bit (fp32 for fp32 plans) weights."""
    if plan.method == "qlora":
        return 1.0 if plan.quantization.type == "int8" else 0.5 * 1.03
    return 4 if plan.precision == "fp32" else 2


def collectives(plan, arch, trainable: int, rates: Rates) -> tuple[Collective, ...]:
    """Every collective of one optimizer step on one GPU."""
    n = plan.world_size
    if plan.framework == "single" or n == 1:
        return ()
    link, bw = link_for(plan, rates)
    gas = plan.gradient_accumulation_steps
    ar, rs = 2 * (n - 1) / n, (n - 1) / n
    gb = grad_bytes(plan)
    pb = 4 if plan.precision == "fp32" else 2
    g = trainable * gb
    total = arch.total_params
    frozen = 0 if plan.method == "full" else total
    gathered = trainable * pb + frozen * param_bytes_frozen(plan)
    layer = gathered / max(1, arch.num_layers)
    ds = plan.deepspeed
    out: list[Collective] = []

    intra = "nvlink" if rates.nvlink_bytes_s else "pcie"
    lat_rs, lat_ar = nccl_latency(plan, intra, False), nccl_latency(plan, intra, True)
    units = arch.num_layers + 1
    submodules = arch.num_layers * (len(arch.block_linears) + max(1, arch.norms_per_layer)) + 3

    def add(name, purpose, nbytes, calls, factor, window, tail, messages=1):
        lat = lat_ar if name == "all_reduce" else lat_rs
        out.append(Collective(name, purpose, float(nbytes), calls, factor, link, bw, window, float(tail),
                              max(1, int(messages)), lat))

    def buckets(nbytes, size):
        return -(-int(nbytes) // max(1, int(size)))

    if plan.framework == "ddp":
        add("all_reduce", "gradients", g, 1, ar, "bwd", DDP_BUCKET_BYTES, buckets(g, DDP_BUCKET_BYTES))
        return tuple(out)
    if plan.framework == "fsdp":
        add("all_gather", "parameters_forward", gathered, gas, rs, "fwd", layer, units)
        if plan.zero_stage == 3:
            add("all_gather", "parameters_backward", gathered, gas, rs, "bwd", 0, units)
        add("reduce_scatter", "gradients", g, gas, rs, "bwd", trainable * gb / max(1, arch.num_layers), units)
        return tuple(out)
    # DeepSpeed
    stage = plan.zero_stage
    overlap = ds.get("overlap_comm", stage == 3)
    bucket = ds.get("reduce_bucket_size", DS_REDUCE_BUCKET)
    bucket = DS_REDUCE_BUCKET if bucket == "auto" else bucket
    window = "bwd" if overlap else "none"
    nb = buckets(g, bucket * gb)
    if stage == 0:
        add("all_reduce", "gradients", g, 1, ar, window, bucket * gb, nb)
    elif stage in (1, 2):
        calls = 1 if stage == 1 else gas
        add("reduce_scatter", "gradients", g, calls, rs, window, bucket * gb, nb)
        add("all_gather", "parameters_update", trainable * pb, 1, rs, "none", 0)
    else:
        add("all_gather", "parameters_forward", gathered, gas, rs, "fwd", layer, submodules)
        add("all_gather", "parameters_backward", gathered, gas, rs, "bwd", 0, submodules)
        add("reduce_scatter", "gradients", g, gas, rs, window, min(bucket * gb, g), nb)
    return tuple(out)


def exposed_time(colls, fwd_s: float, bwd_s: float, gas: int) -> float:
    """Communication not hidden behind compute in one optimizer step. Per micro-step, the collectives of
    a window overlap that window's compute; the excess and each collective's tail are exposed. A
    collective made once per step (DDP's all-reduce, ZeRO-1's reduce) overlaps one backward only."""
    total = 0.0
    for window, compute in (("fwd", fwd_s), ("bwd", bwd_s)):
        per_micro = [c for c in colls if c.window == window and c.calls == gas]
        once = [c for c in colls if c.window == window and c.calls != gas]
        t = sum(c.time_s for c in per_micro)
        tail = sum(c.tail_s for c in per_micro)
        total += gas * min(t, max(0.0, t - compute) + tail)
        for c in once:
            room = max(0.0, compute - t)          # the last micro-step's window, after its own collectives
            total += c.calls * min(c.time_s, max(0.0, c.time_s - room) + c.tail_s)
    total += sum(c.calls * c.time_s for c in colls if c.window == "none")
    return total


__all__ = ["Collective", "collectives", "exposed_time", "link_for", "grad_bytes", "nccl_latency"]
