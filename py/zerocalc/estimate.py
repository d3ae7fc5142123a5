"""estimate(plan) -> Estimate: gather the memory terms, sum the live ones per phase, take the peak, give
the verdicts (fits, primary driver, min_gpus, the ZeRO-2 counterfactual) and the checklist.

The peak is the largest of the phases of a steady-state step (memory/terms.py), never the sum of
every term: gradients and activations, for instance, are never both at full size (docs/tracer.md
§3). Everything is computed for the busiest rank. The aggregator knows no term by name: each term
declares the phases it lives in and where its bytes are (allocator, managed, stream cache, driver, host).
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from . import advice
from .datasettings import expandable
from .hardware import GpuSpec
from .memory import deepspeed as ds
from .memory.inputs import StepInputs, activation_terms, model_state_terms, recompute_terms, step_inputs
from .memory.fp8 import fp8_terms
from .memory.fragmentation import over_steps
from .memory.vision import plan_support
from .memory.runtime import (PINNED_PER_TRANSIENT, allocator_cache_bytes, allocator_reserve, lazy_state_cache,
                             runtime_terms, stream_cache)
from .memory.terms import (ALL, ALLOCATOR, COMPONENTS, COUNTED, DRIVER, HOST_PINNED, MANAGED, ON_GPU, RESERVE, STREAM_CACHE,
                           Term, phases_of)
from .plan import Plan
from .post import post_phases, post_step_terms, update_inputs, update_plan
from .post import resolve as resolve_post
from .result import Estimate, PerGpu
from .run import PhasePeak, run_fits, run_fix, run_peaks, run_view
from .step import step_estimate
from .units import next_pow2


def terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Every term of the busiest rank, in a stable order (the detail lists follow it)."""
    return (model_state_terms(plan, si) + activation_terms(plan, si) + recompute_terms(plan, si)
            + fp8_terms(plan, si.arch)
            + runtime_terms(plan.gpu_spec.compute_capability, plan.world_size, si.stack.cuda_context_eager))


def step_terms(plan: Plan, si: StepInputs) -> tuple[Plan, object, list[Term]]:
    """The step plan (post-training: the update step's rows and length, post/step.py), the resolved
    post-training settings (None without them) and every term of the step."""
    post = resolve_post(plan)
    sp = update_plan(plan, post)
    ts = terms(sp, si)
    return sp, post, ts + post_step_terms(plan, sp, si, post, ts)


def step_inputs_for(plan: Plan) -> StepInputs:
    """The step's inputs (post-training: on the update step's plan, with the trainer's log-prob buffers)."""
    post = resolve_post(plan)
    sp = update_plan(plan, post)
    return update_inputs(sp, step_inputs(sp), post)


def _sums(plan: Plan, ts: list[Term], spec: GpuSpec, largest_param: int = 0, ranks: tuple = ()) -> tuple:
    """One pass over the terms: the allocated bytes of each phase, the peak phase, the allocator's reserve
    terms, reserved, the bytes outside the allocator and the managed bytes alive at the peak. Terms that share
    a lifetime are summed together first (a plan has a few distinct lifetimes and dozens of terms)."""
    phases = phases_of(plan, ts)
    by_life: dict = {}          # lifetime -> [allocated, of which activations and logits, stream-cached]
    outside = 0
    for t in ts:
        w = t.where
        if w == ALLOCATOR:
            s = by_life.get(t.phases)
            if s is None:
                s = by_life[t.phases] = [0, 0, 0]
            s[0] += t.nbytes
            if t.component in ("activations", "logits"):
                s[1] += t.nbytes
        elif w == STREAM_CACHE:
            s = by_life.get(t.phases)
            if s is None:
                s = by_life[t.phases] = [0, 0, 0]
            s[2] += t.nbytes
        elif w == DRIVER:
            outside += t.nbytes
    alloc = dict.fromkeys(phases, 0)
    moving = dict.fromkeys(phases, 0)
    cached = dict.fromkeys(phases, 0)
    for life, (a, m, c) in by_life.items():
        for ph in phases:
            if ph in life:
                alloc[ph] += a
                moving[ph] += m
                cached[ph] += c
    peak_phase = max(phases, key=lambda ph: alloc[ph])
    peak_alloc = alloc[peak_phase]
    # blocks another stream keeps cached (FSDP's all-gather stream) raise reserved in the phases where
    # no tensor occupies them
    held = max(alloc[ph] + cached[ph] for ph in phases)
    streams = [stream_cache(held - peak_alloc)] if held > peak_alloc else []
    # the cache the allocator keeps scales with what the step allocates and frees: activations and logits
    held_streams = held - peak_alloc if streams else 0
    checkpointed = plan.activation_checkpointing != "none"
    room = spec.capacity_bytes - outside - held_streams
    cache_at = {ph: allocator_cache_bytes(moving[ph], checkpointed, room - alloc[ph]) for ph in phases}
    # segments are kept (no empty_cache inside a step): reserved is the most that any moment's blocks and the
    # cache they leave ever took, which a moment with more activations than the allocated peak's can set
    cache_phase = max(phases, key=lambda ph: alloc[ph] + cache_at[ph])
    cache = allocator_reserve(moving[cache_phase], checkpointed, room - alloc[cache_phase])
    extra = alloc[cache_phase] + cache.nbytes - peak_alloc
    if _lazy_states(plan):
        # states created in the first optimizer.step strand the segments the step's transients freed
        states = sum(t.nbytes for t in ts if t.component == "optimizer_states" and t.where == ALLOCATOR)
        # what the transients freed before the optimizer step runs (a loop's kept logits are still live there)
        lazy = lazy_state_cache(states, max(moving.values()) - moving.get("step", 0))
        extra = max(extra, min(lazy, max(int(moving[peak_phase] * PINNED_PER_TRANSIENT["saved"]), room - peak_alloc)))
    reserve = [Term(cache.name, cache.component, extra, cache.phases, cache.where)] + streams
    reserved = peak_alloc + sum(t.nbytes for t in reserve)
    if plan.framework == "deepspeed" and plan.zero_stage in (1, 2) and plan.offload_optimizer == "none":
        # the step's own segments beside what the forward / backward keep (memory/deepspeed.py)
        fb = max((alloc[ph] + cache_at[ph] for ph in phases if not ph.startswith("step")), default=0)
        buffers = 2 if ds.knobs(plan).overlap_comm else 1
        seg = min(ds.zero12_step_reserved(ts, fb, largest_param, buffers, ranks), room)
        if seg > reserved:
            reserve.append(Term("zero_step_segments", "runtime", seg - reserved, ALL, RESERVE))
            reserved = seg
    managed = sum(t.nbytes for t in ts if t.where == MANAGED and peak_phase in t.phases)
    return alloc, peak_phase, peak_alloc, reserve, reserved, outside, managed


def _largest_param(plan: Plan, si: StepInputs) -> int:
    """Bytes of the largest trainable tensor in the 16-bit dtype: the largest block ZeRO-1/2's flatten frees."""
    return 2 * si.trainable.largest


def _zero12_ranks(plan: Plan, si: StepInputs) -> tuple:
    """ZeRO-1/2: (grads_in_partition, fp64 norm copy) bytes of each distinct rank (memory/deepspeed.py)."""
    if plan.framework != "deepspeed" or plan.zero_stage not in (1, 2):
        return ()
    wbytes = si.dt.weight if plan.method == "full" else si.dt.adapter   # as inputs.framework_state_terms
    return ds.zero12_rank_bytes(tuple(si.trainable.sizes), plan.world_size, wbytes)


def _lazy_states(plan: Plan) -> bool:
    """Full fine-tuning whose optimizer states torch.optim creates on the GPU in the first step (one GPU, DDP):
    not DeepSpeed (its ZeRO optimizers create them at init), not FSDP (sharded states beside its own stream's
    buffers, not replayed), not LoRA / QLoRA (the adapters' states are under 1 % of the peak), not an optimizer in
    the backward (torchtune's hooks create each parameter's states inside the backward, among live activations:
    not replayed)."""
    return plan.method == "full" and plan.framework in ("single", "ddp") and not plan.optimizer_in_backward


def per_gpu(plan: Plan, si: StepInputs, spec: GpuSpec, ts: list[Term] | None = None) -> PerGpu:
    ts = terms(plan, si) if ts is None else ts
    alloc, peak_phase, peak_alloc, reserve, reserved, outside, _ = _sums(plan, ts, spec, _largest_param(plan, si),
                                                                         _zero12_ranks(plan, si))
    # Paged (CUDA managed) memory sits on the GPU only as far as the rest leaves room; the driver
    # evicts the remainder to host RAM instead of failing, so it never causes an out-of-memory.
    room = max(0, spec.capacity_bytes - reserved - outside)
    comps = {c: 0 for c in COMPONENTS}     # post-training adds "generator" (a colocated vLLM) where it has one
    detail: dict[str, int] = {}
    host_detail: dict[str, int] = {}
    paged = evicted = counted = 0
    driver = []
    for t in ts:
        w = t.where
        if w == COUNTED:
            counted += t.nbytes
            detail[t.name] = detail.get(t.name, 0) + t.nbytes
        elif w == ALLOCATOR or w == MANAGED:
            b = t.nbytes if peak_phase in t.phases else 0
            if b and w == MANAGED:
                resident = min(b, room)
                room -= resident
                paged += resident
                evicted += b - resident
                b = resident
            if b:
                comps[t.component] = comps.get(t.component, 0) + b
                detail[t.name] = detail.get(t.name, 0) + b
        elif w == DRIVER:
            driver.append(t)
        elif w not in ON_GPU:
            host_detail[t.name] = host_detail.get(t.name, 0) + (next_pow2(t.nbytes) if w == HOST_PINNED
                                                                else t.nbytes)
    for t in reserve + driver:
        comps[t.component] = comps.get(t.component, 0) + t.nbytes
        detail[t.name] = t.nbytes
    if evicted:
        host_detail["paged_evicted"] = evicted
    ds_buffers = {}
    if plan.framework == "deepspeed":
        ds_buffers = {t.name if t.on_gpu else f"host.{t.name}": t.nbytes for t in ts
                      if t.component not in ("activations", "logits", "runtime") and t.nbytes}
    # the logits alive at once at any moment of the step (the fragmentation rules scale with them)
    logit_terms = [t for t in ts if t.where == ALLOCATOR and t.component == "logits"]
    logits_step = max((sum(t.nbytes for t in logit_terms if ph in t.phases) for ph in phases_of(plan, ts)), default=0)
    return PerGpu(phase=peak_phase, phase_allocated=MappingProxyType(alloc), components=MappingProxyType(comps),
                  detail=MappingProxyType(detail), peak_allocated=peak_alloc + counted, peak_reserved=reserved + counted,
                  device_used=reserved + outside + paged, counted=counted, host_per_rank=sum(host_detail.values()),
                  host_detail=MappingProxyType(host_detail), deepspeed_buffers=MappingProxyType(ds_buffers),
                  logits_step=logits_step)


def whole_run(plan: Plan, si: StepInputs, spec: GpuSpec) -> tuple[PerGpu, object, object]:
    """The steady step (per_gpu) and every phase of the run (run/), from one set of terms: (per_gpu, view, run)."""
    sp, post, ts = step_terms(plan, si)
    return _run_of(sp, si, spec, post, ts, per_gpu(sp, si, spec, ts))


def _run_of(sp: Plan, si: StepInputs, spec: GpuSpec, post, ts: list[Term], pg: PerGpu) -> tuple[PerGpu, object, object]:
    """whole_run from the step plan, its terms and their per_gpu."""
    step = PhasePeak("step", pg.peak_allocated, pg.peak_reserved, pg.device_used, pg.components, pg.host_per_rank,
                     "the steady training step" if post is None else f"the {post.method} update step", pg.counted)
    view = run_view(sp, si, ts, spec.capacity_bytes, pg.peak_reserved - pg.counted)
    return pg, view, run_peaks(view, step, post_phases(view, post, ts))


def _step_device_used(plan: Plan, si: StepInputs, spec: GpuSpec) -> tuple:
    """(step plan, post-training settings, terms, reserved, device_used) of the steady step of ``plan``."""
    sp, post, ts = step_terms(plan, si)
    _, _, _, _, reserved, outside, managed = _sums(sp, ts, spec, _largest_param(sp, si), _zero12_ranks(sp, si))
    return sp, post, ts, reserved, reserved + outside + min(managed, max(0, spec.capacity_bytes - reserved - outside))


def _run_fits(plan: Plan, si: StepInputs, spec: GpuSpec) -> bool:
    """``whole_run(...)[2].fits`` without the run's figures (run/run_fits), and without its other phases when
    the steady step alone is over the capacity (it is one of the run's phases, so the run cannot fit then)."""
    sp, post, ts, reserved, used = _step_device_used(plan, si, spec)
    if used > spec.capacity_bytes:
        return False
    view = run_view(sp, si, ts, spec.capacity_bytes, reserved)
    return run_fits(view, used, post_phases(view, post, ts))


def _over_steps(plan: Plan, pg: PerGpu, spec: GpuSpec, beside: int = 0) -> dict:
    """Extension 6: reserved over 10-10000 steps of the plan's length distribution (memory/fragmentation.py),
    plus `beside`: segments the load left that the steps cannot use (run/__init__.py RunPeaks.beside_steps)."""
    d, a = plan.data, plan.allocator
    out = _steps_of(plan, pg, spec, d, a)
    if beside:
        cap = spec.capacity_bytes - (pg.device_used - pg.peak_reserved + pg.counted) + pg.counted
        out["reserved_after_steps"] = {n: max(r, min(r + beside, cap)) for n, r in out["reserved_after_steps"].items()}
    return out


def _steps_of(plan: Plan, pg: PerGpu, spec: GpuSpec, d, a) -> dict:
    """The steps over the device's own bytes; torch's counters add what they count off the device (pg.counted)."""
    alloc, reserved = pg.peak_allocated - pg.counted, pg.peak_reserved - pg.counted
    out = over_steps(d.lengths, d.mean_len, d.p99_len, d.histogram, plan.micro_batch_size, plan.seq_len,
                     alloc, reserved, pg.components["activations"] + pg.components["logits"],
                     pg.logits_step, spec.capacity_bytes - (pg.device_used - reserved), expandable(a, plan.stack.trainer),
                     a.max_split_size_mb, a.empty_cache_every)
    if pg.counted:
        out["reserved_after_steps"] = {n: r + pg.counted for n, r in out["reserved_after_steps"].items()}
    return out


def _host_per_node(plan: Plan, si: StepInputs, pg: PerGpu) -> int:
    """Host RAM of one node: every rank's offload buffers (pinned ones rounded to a power of two)
    or, if larger, what loading the model takes (each rank holds its own copy without zero.Init)."""
    loading = ds.host_loading_bytes(plan, si.arch) if plan.framework == "deepspeed" else 2 * si.arch.total_params
    return plan.gpus_per_node * max(pg.host_per_rank, loading)


MAX_NODES_SEARCHED = 4096


def _layout(plan: Plan, i: int) -> tuple[int, int]:
    """The i-th layout in increasing GPU count: 1..gpus_per_node GPUs on one node, then whole nodes."""
    per = plan.gpus_per_node
    return (i + 1, 1) if i < per else (per, i - per + 2)


# the components a sharding stage divides among the ranks (ZeRO 1/2/3; FSDP SHARD_GRAD_OP = 2, FULL_SHARD = 3)
SHARDED = {0: (), 1: ("optimizer_states",), 2: ("gradients", "optimizer_states"),
           3: ("weights", "gradients", "optimizer_states", "lora_adapters")}


def _min_gpus(plan: Plan, si: StepInputs, spec: GpuSpec, fits_here: bool, pg: PerGpu) -> int | None:
    """Fewest GPUs of this kind that fit the plan at its stage. Per-GPU memory never grows with
    the world size at a fixed stage, so the first fitting layout is the answer. ``fits_here``: whether the
    plan's own layout fits, ``pg`` its steady step (the estimate has just run both).
    The probes that settle most plans at once come first: one GPU when the plan's own layout fits; when it
    does not, the next layout if the step would fit there with its sharded components (SHARDED) shrunk in
    proportion to the GPUs, else the largest layout's steady step alone (no other phase). The order changes
    the number of probes, never the answer."""
    if plan.framework in ("single", "ddp"):
        return 1 if fits_here else None
    last = plan.gpus_per_node + MAX_NODES_SEARCHED - 2
    here = plan.gpus_per_node - 1 + (plan.nodes - 1)
    memo = {here: fits_here}

    def other(i: int) -> Plan:
        g, n = _layout(plan, i)
        return replace(plan, gpus_per_node=g, nodes=n)   # same plan, another world: no re-validation

    def fits(i: int) -> bool:
        if i not in memo:
            memo[i] = _run_fits(other(i), si, spec)     # every phase of the run fits, not only the step
        return memo[i]

    if fits_here:
        if here == 0 or fits(0):
            return 1
        # bracket by doubling down from the plan's own layout, then bisect (per-GPU memory falls with the count)
        hi, step = here, 1
        while hi - step > 0 and fits(hi - step):
            hi, step = hi - step, step * 2
        lo = max(0, hi - step)
    else:
        if here >= last:
            return None
        g, n = _layout(plan, here + 1)
        shrinks = sum(pg.components.get(c, 0) for c in SHARDED[plan.zero_stage])
        if (pg.device_used - shrinks) * g * n + shrinks * plan.world_size <= spec.capacity_bytes * g * n \
                and fits(here + 1):
            return g * n
        # not even the largest layout's steady step fits: no layout does
        if _step_device_used(other(last), si, spec)[4] > spec.capacity_bytes:
            return None
        lo, hi, step = here, here + 1, 1
        while hi < last and not fits(hi):
            lo, hi, step = hi, hi + step * 2, step * 2
        if hi >= last:
            hi = last
            if not fits(last):
                return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    g, n = _layout(plan, hi)
    return g * n


def _zero2_device_used(plan: Plan, si: StepInputs, spec: GpuSpec) -> int | None:
    """ZeRO-3 plans: nvidia-smi bytes of the same plan at ZeRO-2 (for the zero3-costs-more verdict)."""
    if plan.framework != "deepspeed" or plan.zero_stage != 3:
        return None
    # no re-validation: no consistency rule reads zero_stage 2 or offload_params none (plan.py
    # _check_consistency; stack, post-training and vision checks read neither), so a valid plan stays valid
    p2 = replace(plan, zero_stage=2, offload_params="none")
    return _step_device_used(p2, si, spec)[4]


def estimate(plan: Plan, *, search_min_gpus: bool = True) -> Estimate:
    """The estimate of one plan. ``search_min_gpus=False`` skips the min_gpus search (min_gpus is then
    None): the planner, which asks it once per stage, uses that for its many other candidates."""
    arch, spec = plan.arch, plan.gpu_spec
    si = step_inputs_for(plan)
    sp = update_plan(plan, resolve_post(plan))          # the update step's rows and length (post-training)
    # the whole run (Extension 5): every phase from one view of the plan; the step's figures are per_gpu's
    pg, view, run = whole_run(plan, si, spec)
    comps = {k: v for k, v in pg.components.items() if k != "runtime"}
    est = Estimate(
        plan=plan, arch=arch, gpu=spec, per_gpu=pg, capacity_bytes=spec.capacity_bytes,
        fits=run.fits, primary_driver=max(comps, key=lambda k: comps[k]), run=run, run_fix=run_fix(view, run),
        run_steps=_over_steps(sp, pg, spec, run.beside_steps),
        host_per_node_bytes=_host_per_node(plan, si, pg),
        tokens_per_step=sp.seq_len * sp.micro_batch_size * plan.gradient_accumulation_steps * plan.world_size,
        global_batch_size=plan.micro_batch_size * plan.gradient_accumulation_steps * plan.world_size,
        trainable_params=si.trainable.numel,
        total_params=arch.total_params + (si.trainable.numel if plan.method != "full" else 0),
        min_gpus=_min_gpus(plan, si, spec, run.fits, pg) if search_min_gpus else None,
        zero2_device_used=_zero2_device_used(plan, si, spec), model_support=plan_support(arch, plan),
        step=step_estimate(sp, sp.arch, plan.gpu,
                           offloaded_activation_bytes=pg.host_detail.get("offloaded_activations", 0)))
    return replace(est, warnings=tuple(advice.warnings(est)))


__all__ = ["estimate", "per_gpu", "terms", "whole_run"]
