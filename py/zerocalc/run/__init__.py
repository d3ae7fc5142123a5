"""The whole run (contract plan-v1, Extension 5): every moment besides the steady step, each from one resolved
view of the plan (run/view.py), and the run's peak.

Phases, in the order a run meets them: ``load``, ``init``, ``step`` (the steady step: memory/, estimate.py's
per_gpu, copied as is), ``eval``, ``generate``, ``save``, ``resume``, ``merge``. A new phase is one function
taking a RunView and returning a Phase (run/phase.py), listed in ``PHASES``.

Reserved: each phase's own peak plus the cache its transients leave (memory/runtime.py `allocator_reserve`,
the ratio of a forward that saves nothing, no checkpointing), and never below what an earlier phase left
reserved: PyTorch's caching allocator keeps its segments until `torch.cuda.empty_cache()`, which HF's eval
loop calls only with `eval_accumulation_steps` and `prepare_model_for_kbit_training` calls after loading.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from ..memory.runtime import allocator_cache_bytes
from .evaluate import eval_phase, generate_phase
from .fixes import LABELS, phase_fix
from .load import init_phase, load_phase
from .phase import Phase
from .save import merge_phase, resume_phase, save_phase
from .view import RunView, run_view

PHASES = (("load", load_phase), ("init", init_phase), ("step", None), ("eval", eval_phase),
          ("generate", generate_phase), ("save", save_phase), ("resume", resume_phase), ("merge", merge_phase))


@dataclass(frozen=True)
class PhasePeak:
    name: str
    allocated: int
    reserved: int
    device_used: int
    components: Mapping
    host: int
    note: str = ""
    counted: int = 0             # torch's counters less the device's own bytes (a sleeping vLLM's pool: +; another
                                 # process's vLLM on this GPU: -); allocated and reserved are the counters

    def to_dict(self) -> dict:
        return {"peak_allocated_bytes": self.allocated, "peak_reserved_bytes": self.reserved,
                "device_used_bytes": self.device_used, "components": dict(self.components),
                "host_bytes": self.host, "note": self.note}


@dataclass(frozen=True)
class RunPeaks:
    phases: Mapping              # name -> PhasePeak, in run order
    peak_phase: str
    peak_allocated: int
    peak_reserved: int
    device_used: int
    capacity: int
    beside_steps: int = 0        # reserved the load left that the steps cannot use (Phase.stranded), beside theirs

    @property
    def fits(self) -> bool:
        return all(p.device_used <= self.capacity for p in self.phases.values())

    def first_over(self) -> PhasePeak | None:
        """The first phase, in run order, that does not fit."""
        return next((p for p in self.phases.values() if p.device_used > self.capacity), None)

    def to_dict(self) -> dict:
        return {"phases": {k: p.to_dict() for k, p in self.phases.items()}, "peak_phase": self.peak_phase,
                "peak_allocated_bytes": self.peak_allocated, "peak_reserved_bytes": self.peak_reserved,
                "device_used_bytes": self.device_used, "fits": self.fits}


def _own_reserved(view: RunView, ph: Phase) -> int:
    alloc = ph.allocated
    return alloc + allocator_cache_bytes(ph.transient, False, view.capacity - view.driver - alloc)


def phase_fits(view: RunView, ph: Phase) -> bool:
    """Whether a phase fits on its own: the segments an earlier phase left cached are given back on demand
    (the allocator frees cached blocks and retries a failed cudaMalloc), so they never cause an OOM."""
    return _own_reserved(view, ph) + view.driver <= view.capacity


def _peak(view: RunView, ph: Phase, carried: int) -> PhasePeak:
    """A phase's figures. Reserved: its own need, or what earlier phases left reserved plus the requests those
    segments cannot serve: a tensor larger than the largest block the step frees finds no cached block that
    fits (CUDACachingAllocator best-fit within one segment, no merging across segments), so the phase's
    transient takes fresh segments beside the cached ones (traced: tools/memtrace/golden/run, HF eval at batch
    8 after a batch-1 step reserves the step's segments plus the eval's logits). Capped where the GPU is full:
    the allocator then frees cached segments and retries."""
    own = _own_reserved(view, ph)
    fresh = ph.transient if ph.largest > view.step_largest and carried else 0
    if ph.fresh is not None:
        fresh = ph.fresh if carried else 0
    reserved = max(own, min(carried + fresh, view.capacity - view.driver - ph.outside) + ph.outside)
    counted = counted_off_device(view, ph)
    return PhasePeak(ph.name, ph.allocated + counted, reserved + counted, reserved + view.driver, ph.components,
                     ph.host, ph.note, counted)


def counted_off_device(view: RunView, ph: Phase) -> int:
    """What torch's counters hold beyond (or short of) the phase's bytes on the device: a sleeping colocated vLLM's
    pool from the trainer's build on (post/generator.py `vllm_pool_bytes`; the load comes first), less what of it the
    phase has mapped (its `generator` component: the rollout's budget, the weights woken for the sync); minus the
    phase's bytes that another process holds (Phase.uncounted)."""
    pool = view.counted if ph.name != "load" else 0
    return max(0, pool - ph.components.get("generator", 0)) - ph.uncounted


def run_peaks(view: RunView, step: PhasePeak, before: tuple = ()) -> RunPeaks:
    """Every phase the run has, with the steady step's figures as ``step``; ``before``: (name, Phase) of the
    moments each step meets before its update (post-training's generate, sync, score: post/phases.py). A name
    two phases share (the rollout's and an evaluation's ``generate``) keeps the larger."""
    out: dict = {}
    carried = stranded = 0
    for name, fn in PHASES:
        if fn is None:
            # steady state: each step's moments before its update follow the previous update step's segments
            carried = max(carried, step.reserved - step.counted) if before else carried
            for bname, ph in before:
                carried = 0 if ph.empties_cache_before else carried
                pk = _peak(view, ph, carried)
                carried = 0 if ph.empties_cache else max(carried, pk.reserved - pk.counted - ph.outside)
                out[bname] = pk
            pk = _beside(view, step, stranded)
            carried = max(carried, pk.reserved - pk.counted)
        else:
            ph = fn(view)
            if ph is None:
                continue
            pk = _peak(view, ph, carried)
            carried = 0 if ph.empties_cache else max(carried, pk.reserved - pk.counted)
            stranded = 0 if ph.empties_cache else stranded + ph.stranded
        if name in out and out[name].device_used >= pk.device_used:
            continue
        out[name] = pk
    top = max(out.values(), key=lambda p: (p.device_used, p.allocated, p.name == "step"))
    return RunPeaks(MappingProxyType(out), top.name, max(p.allocated for p in out.values()),
                    max(p.reserved for p in out.values()), top.device_used, view.capacity,
                    out["step"].reserved - step.reserved)


def _beside(view: RunView, step: PhasePeak, stranded: int) -> PhasePeak:
    """The steps beside the segments an earlier phase left stranded (Phase.stranded): reserved is the step's own
    reserve, less its activations and logits (small enough to be served from the stranded segments), plus those
    segments; capped where the GPU is full (a failed cudaMalloc frees whole cached segments, so no OOM). Without
    stranded segments (every plan that does not set run.load.on_device_build) the steady step as it is."""
    if not stranded:
        return step
    reuse = min(stranded, step.components.get("activations", 0) + step.components.get("logits", 0))
    own = step.reserved - step.counted
    reserved = max(own, min(own + stranded - reuse, view.capacity - view.driver))
    return PhasePeak(step.name, step.allocated, reserved + step.counted, step.device_used + reserved - own,
                     step.components, step.host, step.note + ", beside the build's cached segments", step.counted)


def run_fits(view: RunView, step_device_used: int, before: tuple = ()) -> bool:
    """``run_peaks(view, step, before).fits`` without the figures (the min_gpus probes): the reserved a phase
    carries beyond its own need is capped at the capacity less the driver (``_peak``), so a phase fits exactly
    when it fits on its own (``phase_fits``), and the steady step when its device_used does. Stops at the
    first phase over the capacity."""
    if step_device_used > view.capacity or not all(phase_fits(view, ph) for _, ph in before):
        return False
    for _, fn in PHASES:
        ph = fn(view) if fn is not None else None
        if ph is not None and not phase_fits(view, ph):
            return False
    return True


def run_fix(view: RunView, peaks: RunPeaks) -> str:
    """The setting that keeps the first phase that does not fit inside the GPU ("" when all fit)."""
    over = peaks.first_over()
    if over is None or peaks.phases["step"].device_used > peaks.capacity:
        return ""
    return phase_fix(view, over.name, lambda ph: phase_fits(view, ph))


__all__ = ["run_fits", "run_fix", "LABELS", "run_view", "run_peaks", "RunView", "RunPeaks", "PhasePeak", "PHASES"]
