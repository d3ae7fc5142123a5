"""DeepSpeed 0.19 ZeRO: the buffers each rank allocates, from the allocation sites.

Sources (deepspeed 0.19.8 as installed from PyPI; docs/deepspeed.md §2, measured byte-exact on CPU
ranks in docs/deepspeed-cpu.md §3-4):
- stage 0: runtime/fp16/fused_optimizer.py FP16_Optimizer (bf16 too since 0.17.6, PR #7515);
- stages 1/2: runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer;
- stage 3: runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3, partition_parameters.py,
  partitioned_param_coordinator.py;
- knobs and defaults: runtime/zero/config.py, offload_config.py.
P is the trainable element count (what the optimizer sees); frozen LoRA bases are handled apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..knobs import Knobs, knobs
from ..model import ModelArch
from ..plan import Plan
from ..units import ceil_div
from .optimizers import is_paged, sharded_states
from .terms import AFTER_BWD, ALL, ALLOCATOR, BWD, BWD_END, FWD_BWD, FWD_IN, MANAGED, STEP, STEP_NORM, Term, gpu, host

ALLREDUCE_BUCKET = 500_000_000      # engine.MEMORY_OPT_ALLREDUCE_SIZE, hard-coded (stage 0)
NORM_CHUNK = 250_000_000            # stage3 _constant_buffered_norm2 chunk (offload)
NVME_OPT_BUFFERS = 4                # offload_optimizer.buffer_count
NVME_PARAM_BUFFERS, NVME_PARAM_BUFFER_SIZE = 5, 100_000_000   # offload_param.buffer_count / buffer_size


# --- partition arithmetic (stage 1/2) ---------------------------------------------------------------


def padded_partition(total: int, world: int) -> int:
    """Stage 1/2 flatten each param group padded to a multiple of 2*world elements
    (stage_1_and_2.py: `align_dense_tensors(..., alignment)`), then split it into world partitions."""
    align = 2 * world
    padded = ceil_div(total, align) * align
    return padded // world


def partition_overlap(sizes: tuple[int, ...], world: int) -> tuple[int, int]:
    """(max over ranks of the numel of params that overlap the rank's partition, the largest slice of one
    param inside one partition), each the maximum over the ranks on its own (rank_partitions gives the
    pairs; the two maxima are seldom on the same rank)."""
    pairs = rank_partitions(sizes, world)
    return max(q[0] for q in pairs), max(q[1] for q in pairs)


@lru_cache(maxsize=512)
def rank_partitions(sizes: tuple[int, ...], world: int) -> tuple[tuple[int, int], ...]:
    """Every distinct (grads_in_partition numel, largest slice of one param) pair over the ranks, in rank order.

    stage_1_and_2.py (0.19.8) get_partition_info: a param is in rank r's partition [r*part, (r+1)*part) when it
    starts inside it or straddles its start; copy_grads_in_partition then sizes grads_in_partition as the whole
    numel of those params (`total_size += param_in_partition.numel()`), and get_grad_norm_direct casts each of
    the rank's slices to fp64 one at a time. The two belong to the same rank: the rank with the largest
    overlap (params straddling both its ends) is seldom the one with the largest slice (one inside a big
    embedding), so the busiest rank is one of these pairs, not the maximum of each. Ranks without a param
    boundary lie inside one param (numel n, slice part); the neighbours of each param's first and last rank
    cover every distinct pair, so O(T log T) whatever the world size (round_robin_gradients off, the
    default; parameter_alignment off, the default: no per-param padding)."""
    from bisect import bisect_right
    part = padded_partition(sum(sizes), world)
    starts, ends, acc = [], [], 0
    for n in sizes:
        starts.append(acc)
        acc += n
        ends.append(acc)
    cand = set()
    for a, b in zip(starts, ends):
        if b > a:
            for r in (a // part, a // part + 1, (b - 1) // part - 1, (b - 1) // part):
                if 0 <= r < world:
                    cand.add(r)
    out = []
    for r in sorted(cand):
        lo, hi = r * part, (r + 1) * part
        i = bisect_right(ends, lo)                 # first param ending after lo
        j = bisect_right(starts, hi - 1) - 1       # last param starting before hi
        over = sl = 0
        for k in range(i, j + 1):
            if ends[k] > starts[k]:
                over += ends[k] - starts[k]
                sl = max(sl, min(ends[k], hi) - max(starts[k], lo))
        if (over, sl) not in out:
            out.append((over, sl))
    return tuple(out) or ((0, 0),)


# --- terms per stage ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trainable:
    """What the ZeRO optimizer is given."""
    sizes: tuple[int, ...]      # numel of each trainable tensor, in parameter order
    component: str              # "weights" for full fine-tuning, "lora_adapters" for LoRA
    grad_component: str         # "gradients" or "lora_adapters"
    state_component: str        # "optimizer_states" or "lora_adapters"

    @property
    def numel(self) -> int:
        return sum(self.sizes)

    @property
    def largest(self) -> int:
        return max(self.sizes) if self.sizes else 0


def zero_terms(plan: Plan, arch: ModelArch, tr: Trainable, frozen_bytes: int, all_sizes: tuple[int, ...],
               wbytes: int, gas: int, master: int = 4, state: int = 4) -> list[Term]:
    """Model-state and buffer terms of one rank (the busiest) for DeepSpeed at plan.zero_stage.

    wbytes: bytes of the module's trainable weights (2 with bf16/fp16, 4 with fp32).
    master, state: bytes of the master copy and of one optimizer state element (4, or 2 with
    bf16_master_weights_and_grads + bf16_optimizer_states).
    frozen_bytes: the frozen base on this rank (whole at stage 0-2; stage 3 shards it here).
    all_sizes: numel of every module parameter (trainable and frozen) for stage 3 partitioning."""
    k = knobs(plan)
    n = plan.world_size
    stage = plan.zero_stage
    fp32 = wbytes == 4
    if stage == 0:
        return _stage0(plan, tr, frozen_bytes, wbytes, n, gas)
    if stage in (1, 2):
        return _stage12(plan, tr, frozen_bytes, wbytes, n, k, fp32, gas, master, state)
    return _stage3(plan, arch, tr, all_sizes, wbytes, n, k, fp32, master, state)


def _states_place(plan: Plan) -> str:
    """bitsandbytes paged optimizers keep their states in CUDA managed memory (memory/optimizers.py)."""
    return MANAGED if is_paged(plan.optimizer) else ALLOCATOR


def _grad_phases(gas: int) -> frozenset:
    """Gradients kept across micro-steps live through the next forward when accumulating."""
    return ALL if gas > 1 else AFTER_BWD


def _stage0(plan: Plan, tr: Trainable, frozen: int, wb: int, n: int, gas: int) -> list[Term]:
    p = tr.numel
    t = [gpu("frozen_params", "weights", frozen)] if frozen else []
    if wb == 4:
        # fp32 without a mixed-precision wrapper: the client optimizer as is.
        return t + [gpu("flat_16bit_params", tr.component, 4 * p),
                    gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, p, 4),
                        where=_states_place(plan)),
                    gpu("gradients", tr.grad_component, 4 * p, _grad_phases(gas))]
    # The exported config has no optimizer block at stage 0, so the Trainer's torch optimizer is wrapped
    # in FP16_UnfusedOptimizer (fp16/unfused_optimizer.py): per-parameter 16-bit weights and fp32 master
    # copies, and at the step each gradient cast to fp32 (4P). (DeepSpeed's own FusedAdam would get
    # FP16_Optimizer, which also flattens the fp32 grads: 8P.)
    t += [
        gpu("flat_16bit_params", tr.component, 2 * p),
        gpu("fp32_master", tr.state_component, 4 * p),                   # not partitioned
        gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, p, 4),
            where=_states_place(plan)),
        gpu("gradients", tr.grad_component, 2 * p, _grad_phases(gas)),
        gpu("step_transient", "buffers", 4 * p, {"step"}),
    ]
    if n > 1:
        # buffered_allreduce_fallback: buckets close after exceeding 5e8 elements
        t.append(gpu("allreduce_bucket", "buffers", 2 * min(p, ALLREDUCE_BUCKET + tr.largest), BWD_END))
    return t


def _stage12(plan: Plan, tr: Trainable, frozen: int, wb: int, n: int, k: Knobs, fp32: bool, gas: int,
             master: int = 4, state: int = 4) -> list[Term]:
    p = tr.numel
    part = padded_partition(p, n)
    gb = 4 if fp32 else 2
    ipg = gb * k.reduce_bucket_size * (2 if k.overlap_comm else 1) if k.contiguous_gradients else 0
    t: list[Term] = []
    if frozen:
        t.append(gpu("frozen_params", "weights", frozen))                # untouched by ZeRO 1/2
    t.append(gpu("flat_16bit_params", tr.component, wb * p))            # bit16_groups_flat
    offload = plan.offload_optimizer != "none"
    if not offload:
        t += [
            gpu("fp32_master", tr.state_component, master * part),       # single_partition_of_fp32_groups
            gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, part, state),
                where=_states_place(plan)),
            gpu("ipg_bucket", "buffers", ipg, BWD),                     # setup_buckets, freed after backward
        ]
        grad_live = _grad_phases(gas) if plan.zero_stage == 2 else AFTER_BWD
        # step: flat 16-bit copy of the partition grads (2P/N) then its fp32 copy (4P/N); before that,
        # the norm: an fp64 copy of each grad slice (get_grad_norm_direct, `g.to(float64)`, even with
        # gradient_clipping 0) - the two are never alive together
        step = (0 if fp32 else gb * part) + (0 if master == gb else master * part)
        # one real rank (rank_partitions): the one whose step holds the most, grads_in_partition beside the
        # larger of its fp64 norm copy and the step transient; a rank with a larger grads_in_partition (and a
        # smaller slice) is busier only outside the step: the difference is kept for those phases
        pairs = rank_partitions(tuple(tr.sizes), n)
        overlap, max_slice = max(pairs, key=lambda q: (gb * q[0] + max(8 * q[1], step), q[1], q[0]))
        t.append(gpu("grad_partition", tr.grad_component, gb * overlap, grad_live))
        other = gb * (max(q[0] for q in pairs) - overlap)
        if other and grad_live - STEP:
            t.append(gpu("grad_partition_other_rank", tr.grad_component, other, grad_live - STEP))
        if plan.zero_stage == 1:
            # stage 1 reduces only at the accumulation boundary: every 16-bit grad is kept until then
            t.append(gpu("bit16_grads", tr.grad_component, gb * p, (ALL - {"step"}) if gas > 1 else BWD_END))
        elif tr.largest > k.reduce_bucket_size:
            t.append(gpu("unbucketed_grad", "buffers", gb * tr.largest, BWD_END))
        t.append(gpu("step_transient", "buffers", step, {"step"}))
        t.append(gpu("fp64_norm_copy", "buffers", 8 * max_slice, {STEP_NORM}))
        return t
    # ZeRO-Offload (stage 1/2 keep nvme as cpu): the GPU keeps the 16-bit params, the bucket and a
    # staging buffer of the largest param; the host keeps master, grads and states.
    L = tr.largest
    max_slice = max(q[1] for q in rank_partitions(tuple(tr.sizes), n))   # backward-only: the max over ranks
    t += [
        gpu("ipg_bucket", "buffers", ipg, BWD),
        gpu("offload_temp_grad_buffers", "buffers", gb * L),            # temp_grad_buffer_for_gpu_offload
        # backward: fp64 copy of each param's slice for the norm (set_norm_for_param_grad_in_gpu), the
        # fp32 cast of a slice before its copy to the host (async_inplace_copy_grad_to_fp32_buffer_from_gpu)
        # and clones of grads larger than the bucket (_offload_gradient_safety_enabled)
        gpu("fp64_norm_copy", "buffers", 8 * max_slice, BWD_END),
        gpu("offload_fp32_grad_slice", "buffers", 4 * max_slice, BWD_END),
    ]
    if L > k.reduce_bucket_size:
        t.append(gpu("offload_grad_clone", "buffers", gb * L, BWD_END))
    pin = True                                                          # pin_memory default since 0.19.5
    t += [
        host("fp32_master", master * part, pin),
        host("fp32_grad_partition", master * part, pin),
        host("offload_16bit_staging", gb * part, pin),
        host("offload_temp_grad_buffers", gb * L, pin),                 # temp_grad_buffer_for_cpu_offload
        host("optimizer_states", sharded_states(plan.optimizer, part, state)),   # DeepSpeedCPUAdam, pageable
    ]
    if gas > 1:
        t.append(host("accumulated_grads", gb * part, pin))
    return t


def persistent_numel(all_sizes: tuple[int, ...], k: Knobs) -> int:
    """Tensors with numel <= stage3_param_persistence_threshold stay gathered on every rank
    (partition_parameters.py / parameter_offload.mark_persistent_parameters)."""
    return _persistent(all_sizes, k.persistence_threshold)


@lru_cache(maxsize=256)
def _persistent(sizes: tuple[int, ...], threshold: int) -> int:
    return sum(s for s in sizes if s <= threshold)


@lru_cache(maxsize=1024)
def stage3_partition(sizes: tuple[int, ...], world: int) -> int:
    """Elements of one rank's stage-3 partition: every tensor is padded to a multiple of the world
    (partition_parameters.py _partition_param: ceil(numel / world))."""
    return sum(ceil_div(s, world) for s in sizes)


def _stage3(plan: Plan, arch: ModelArch, tr: Trainable, all_sizes: tuple[int, ...], wb: int, n: int,
            k: Knobs, fp32: bool, master: int = 4, state: int = 4) -> list[Term]:
    part = stage3_partition(tuple(tr.sizes), n)                          # each tensor padded to N
    max_part = ceil_div(tr.largest, n)                                     # largest per-param partition
    part_all = stage3_partition(all_sizes, n)
    pers = persistent_numel(all_sizes, k)
    nonpers = sum(all_sizes) - pers
    gb = 4 if fp32 else 2
    M = arch.largest_module
    t: list[Term] = []
    offp = plan.offload_params != "none"
    offo = plan.offload_optimizer != "none"
    frozen_part = part_all - part
    if offp:
        pin = plan.offload_params == "cpu"
        t.append(host("param_partition_16bit", wb * part_all, pin))
        if plan.offload_params == "nvme":
            t.append(host("nvme_param_buffers", NVME_PARAM_BUFFERS * NVME_PARAM_BUFFER_SIZE * wb, False))
    else:
        t.append(gpu("param_partition_16bit", tr.component, wb * part))
        if frozen_part:
            t.append(gpu("frozen_partition_16bit", "weights", wb * frozen_part))
    # persistent params are released during step() and re-gathered after it
    t.append(gpu("persistent_params", "weights", wb * pers, FWD_BWD))
    if k.hpz > 1:
        t.append(gpu("hpz_secondary_partition", "weights", wb * sum(all_sizes) // k.hpz))
    # Gathered working set at the forward->backward turn (partitioned_param_coordinator.py):
    # - release skips every parameter used again within stage3_max_reuse_distance elements;
    # - with prefetching on, the prefetcher marks each parameter it fetches with the step of its last use
    #   (its backward), and __params_to_release keeps marked parameters: everything prefetched in forward
    #   stays gathered until its backward, until stage3_max_live_parameters stops the prefetching
    #   (measured: a release log on CPU ranks shows forward marks equal to the backward step ids);
    # - plus the module in use and one prefetch bucket.
    kept = max(k.max_reuse_distance, k.max_live_parameters if k.prefetch_bucket_size > 0 else 0)
    turn = min(nonpers, kept + min(k.prefetch_bucket_size, k.max_live_parameters) + M)
    working = min(nonpers, M + min(k.prefetch_bucket_size, k.max_live_parameters))
    t.append(gpu("gathered_params", "buffers", wb * turn, FWD_IN | {"loss_bwd"}))
    t.append(gpu("gathered_params_bwd", "buffers", wb * working, BWD_END))
    # backward: full-size 16-bit grads of the module being reduced
    t.append(gpu("module_grads", "buffers", gb * M, BWD_END))
    if not offo:
        t += [
            gpu("fp32_master", tr.state_component, 0 if fp32 else master * part),
            gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, part, state),
                where=_states_place(plan)),
            gpu("grad_partition", tr.grad_component, gb * part),      # grad_partitions_flat_buffer
            gpu("ipg_bucket", "buffers", gb * k.reduce_bucket_size),   # one buffer, from init
            # per sub-group: flat 16-bit copy of the grads then the fp32 grad
            gpu("step_transient", "buffers", (gb + (4 if master == 4 else 0)) * min(k.sub_group_size, part),
                {"step"}),
            # the norm before it: fp64 copy of each param's grad partition (get_grad_norm_direct)
            gpu("fp64_norm_copy", "buffers", 8 * max_part, {STEP_NORM}),
        ]
        return t
    t += [
        gpu("ipg_bucket", "buffers", gb * k.reduce_bucket_size),
        # backward, at the boundary: each param's grad partition cast to fp32 before the host copy
        # (_offload_grad_partition_at_boundary) and its fp64 norm in 250M-element chunks
        # (_constant_buffered_norm2)
        gpu("offload_fp32_grad_slice", "buffers", 4 * max_part, BWD_END),
        gpu("fp64_norm_copy", "buffers", 8 * min(NORM_CHUNK, max_part), BWD_END),
    ]
    if plan.offload_optimizer == "cpu":
        t += [
            host("fp32_master", master * part),                          # unpinned clone
            host("fp32_grad_partition", master * part, True),
            host("grad_partition", gb * part, True),
            host("optimizer_states", sharded_states(plan.optimizer, part, state)),
        ]
    else:
        sub = min(k.sub_group_size, part)
        t += [
            host("nvme_swap_buffers", NVME_OPT_BUFFERS * sub * 4),      # DeepNVMe locked, exact size
            host("fp32_grad_partition", 4 * part, True),
            host("grad_partition", gb * part, True),
        ]
    return t


def host_loading_bytes(plan: Plan, arch: ModelArch) -> int:
    """Host RAM one rank needs while the model loads: without zero.Init every process materialises
    the whole model in 16 bits (from_pretrained with torch_dtype; DeepSpeed issue #5290)."""
    k = knobs(plan)
    if plan.zero_stage == 3 and k.zero_init:
        return 2 * arch.largest_module
    return 2 * arch.total_params


__all__ = ["zero_terms", "Trainable", "host_loading_bytes", "partition_overlap", "padded_partition",
           "persistent_numel", "stage3_partition", "rank_partitions"]


def zero12_rank_bytes(sizes: tuple[int, ...], world: int, wbytes: int) -> tuple[tuple[int, int], ...]:
    """(grads_in_partition bytes, fp64 norm copy bytes) of each distinct rank (rank_partitions): the step
    segments below are counted for each, the busiest being the one with the most."""
    gb = 4 if wbytes == 4 else 2
    return tuple((gb * o, 8 * s) for o, s in rank_partitions(sizes, world))


def zero12_step_reserved(ts: list[Term], fb_reserved: int, largest_param: int = 0, buffers: int = 1,
                         ranks: tuple[tuple[int, int], ...] = ()) -> int:
    """The steady ZeRO-1/2 step's reserved bytes counted segment by segment (DeepSpeed 0.19.8,
    runtime/zero/stage_1_and_2.py, no optimizer offload, 16-bit weights with an fp32 master), or 0 where the
    terms are not those of that wrapper. ``fb_reserved``: the most the forward / backward moments take,
    allocated plus their cache. Each request over 10 MiB opens a segment of its own size and best fit never
    merges across segments (c10/cuda/CUDACachingAllocator.cpp get_allocation_size, get_free_block), and
    nothing calls empty_cache after __init__, so the steady step keeps:
    - the persistent tensors (16-bit flat params, fp32 master, Adam states, the cuBLAS workspace);
    - the module's own 16-bit params (``build`` = the flat buffer's bytes): __init__ flattens them on the
      device (flatten_dense_tensors_aligned) and frees the originals, per-parameter blocks;
    - the bf16 partition's `.detach().clone()` that __init__ casts to the fp32 master (``clone`` = gb x
      partition), a segment of its own unless the largest parameter's freed block holds it; the step's flat
      16-bit gradient (`flatten(averaged_gradients)`, the same size) reuses it;
    - two step segments: the fp64 norm copy of the largest slice (get_grad_norm_direct, ``F``) and the fp32
      cast of the flat gradient (`.to(fp32)`, ``C``) run one after the other in a segment of max(F, C), while
      the backward's grads_in_partition (``G``) takes the smallest free step segment that fits it: F's own
      segment where F >= G, otherwise a second C-sized one (traced: tools/dsprobe/steptrace.py,
      tests/data/dsprobe_step_reserve.json). torch AdamW makes its two states in the first step (`_init_group`;
      0.19.8's initialize_optimizer_states runs no step): the first takes the zero gradient's freed
      partition-sized block, the second, where F's segment has room for it beside C (and then for G), stays
      there, and that segment is not counted twice;
    - what the forward / backward needs beyond ``build`` + ``clone``, which they serve first (the first
      forward runs before any step segment exists); the ipg buckets (setup_buckets: ``buffers`` requests of
      reduce_bucket_size each, two with overlap_comm) only where each is at most ``largest_param`` (the largest
      per-parameter block, bytes): a larger bucket fits no such block and opens segments of its own.
    ``ranks``: (G, F) bytes of every distinct rank (zero12_rank_bytes); the result is the largest rank's
    (the terms' own G / F are one rank's, memory/deepspeed.py _stage12)."""
    by: dict = {}
    persistent = 0
    for t in ts:
        if t.where == ALLOCATOR:
            by[t.name] = by.get(t.name, 0) + t.nbytes
            if "fwd" in t.phases and "step" in t.phases:
                persistent += t.nbytes
    need = ("flat_16bit_params", "fp32_master", "step_transient", "fp64_norm_copy", "grad_partition")
    if any(not by.get(n) for n in need) or by["step_transient"] <= by["fp32_master"]:
        return 0
    ranks = ranks if len(ranks) > 1 else ((by["grad_partition"], by["fp64_norm_copy"]),)
    return _step_segments(by, persistent, fb_reserved, largest_param, buffers, ranks)


def _step_segments(by: dict, persistent: int, fb_reserved: int, largest_param: int, buffers: int,
                   ranks: tuple) -> int:
    """zero12_step_reserved at its largest over ``ranks``, (grads_in_partition ``g``, fp64 norm copy ``f``) each:
    only the two step segments differ by rank (min_gpus asks this for every world size, so the loop is kept to
    them)."""
    build, c = by["flat_16bit_params"], by["fp32_master"]
    clone = by["step_transient"] - c
    if clone <= largest_param:
        clone = 0            # the clone (and the step's flat 16-bit grad) fit a block the flatten just freed
    state = by.get("optimizer_states", 0) // 2
    own = by.get("ipg_bucket", 0)
    own = own if own > largest_param * max(1, buffers) else 0
    fb = max(0, fb_reserved - own - persistent - build - clone) + own
    steps = 0
    for g, f in ranks:
        second = f if f >= g else c
        if f >= g and f - c >= state and f - state >= g:
            second -= state  # the second lazily made Adam state sits in F's first segment beside C, then G
        steps = max(steps, max(f, c) + second)
    return persistent + build + clone + steps + fb
