"""The page's "What fits" panel: view data for assets/fit.js, from the engine's fit() and estimates.

``fit_call({"plan": plan-v1 dict}) -> dict`` (registered as CALLS["fit"] in app/worker.py):
- ``rows``: the options as table rows (GiB = 2^30 at the edge, fits, tokens/s per GPU, its change as text,
  the share fragment that applies it: ``app.view.share_fragment`` of the changed plan);
- ``charts``: series drawn as inline SVG by fit.js: memory by component against sequence length, micro-batch
  and GPU count; the step split into compute / exposed communication / offload for the plan and the top
  options; the ZeRO (or FSDP) stages side by side (memory and tokens/s).
No DOM here; it imports under CPython (tests/test_fit_view in tests/test_page_fit.py).

Sliced (issue 25): ``fit_start({"plan": ...})`` / ``fit_step({})`` (CALLS["fit_start"], CALLS["fit_step"]) compute
the same view a slice of about ``SLICE_MS`` at a time, so the page (assets/fit.js) sends the next slice only while
no edit is in flight: an edit pre-empts the re-plan after at most one slice, and a new fit_start replaces the
unfinished one. The view is a generator of estimate requests (``view_steps``, built on zerocalc.fit.fit_steps);
the one re-plan in progress is this shell's state (``_job``), never the engine's.
"""
from __future__ import annotations

import time
from dataclasses import replace

from zerocalc import PlanError
from zerocalc.fit import answer, drain, fit_steps

from app.view import parse_with_recovery, share_fragment

GIB = 1 << 30
COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters", "buffers",
              "runtime")
SEQ_POINTS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
MBS_POINTS = (1, 2, 4, 8, 16)


def _gib(n: int) -> float:
    return round(n / GIB, 2)


def _change_text(changes: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in changes.items())


def _components(e) -> dict:
    return {c: _gib(e.per_gpu.components.get(c, 0)) for c in COMPONENTS}


def _estimate(plan):
    """One estimate the view needs (without the min_gpus search): a request to the generator's driver."""
    return (yield (plan, False))


def _memory_series(plan, key: str, values, capacity_bytes: int):
    pts = []
    for v in values:
        try:
            p = plan.with_changes(**{key: v})
        except PlanError:
            continue
        e = yield from _estimate(p)
        pts.append({"x": v, "components": _components(e), "total_gib": _gib(e.per_gpu.device_used), "fits": e.fits})
    return {"x_label": key, "capacity_gib": _gib(capacity_bytes), "points": pts}


def _gpu_series(plan, capacity_bytes: int):
    """Per-GPU memory as the world grows (one node up to its size, then whole nodes), same stage."""
    per = plan.gpus_per_node
    layouts = [(g, 1) for g in (1, 2, 4, 8) if g <= per] + [(per, n) for n in (2, 4, 8)]
    pts = []
    for g, n in layouts:
        if plan.framework == "single" and g * n > 1:
            continue
        e = yield from _estimate(replace(plan, gpus_per_node=g, nodes=n))
        pts.append({"x": g * n, "components": _components(e), "total_gib": _gib(e.per_gpu.device_used),
                    "fits": e.fits})
    return {"x_label": "GPUs", "capacity_gib": _gib(capacity_bytes), "points": pts}


def _split(label: str, e) -> dict:
    s = e.step
    return {"label": label, "compute_s": s.compute_s, "exposed_communication_s": s.exposed_communication_s,
            "offload_s": s.offload_s, "time_s": s.time_s, "tokens_per_s_per_gpu": s.tokens_per_s_per_gpu}


def _stages(plan):
    stages = (2, 3) if plan.framework == "fsdp" else (0, 1, 2, 3) if plan.framework == "deepspeed" else ()
    out = []
    for s in stages:
        ch = {"zero_stage": s}
        if s < 3:
            ch["offload_params"] = "none"
        if s == 0:
            ch["offload_optimizer"] = "none"
        e = yield from _estimate(plan.with_changes(**ch))
        name = ("SHARD_GRAD_OP" if s == 2 else "FULL_SHARD") if plan.framework == "fsdp" else f"ZeRO-{s}"
        out.append({"label": name, "stage": s, "components": _components(e), "total_gib": _gib(e.per_gpu.device_used),
                    "fits": e.fits, "tokens_per_s_per_gpu": e.step.tokens_per_s_per_gpu})
    return out


def view_steps(plan):
    """The panel's view as a generator of estimate requests (zerocalc.fit.drain runs it); returns the view."""
    f = yield from fit_steps(plan)
    base = yield from _estimate(plan)
    rows = []
    for o in f.options:
        changed = plan.with_changes(**o.changes)
        rows.append({"label": o.label, "changes": o.changes, "change_text": _change_text(o.changes),
                     "gib": _gib(o.device_used_bytes), "device_used_bytes": o.device_used_bytes, "fits": o.fits,
                     "tokens_per_s_per_gpu": round(o.tokens_per_s_per_gpu, 1),
                     "delta_pct": round(100 * (o.tokens_per_s_per_gpu / base.step.tokens_per_s_per_gpu - 1), 1),
                     "step_time_s": o.step_time_s, "fragment": share_fragment(changed)})
    # the checklist's advice, quantified from the same options ("full activation checkpointing: 60.30 GiB,
    # fits, -23.3 % tokens/s")
    advice = [f"{r['label']}: {r['gib']:.2f} GiB, {'fits' if r['fits'] else 'does not fit'}, "
              f"{'+' if r['delta_pct'] > 0 else '−' if r['delta_pct'] < 0 else '±'}{abs(r['delta_pct']):.1f} % tokens/s"
              for r in rows if r["fits"]][:5]
    splits = [_split("this plan", base)]
    for o in f.options[:4]:
        splits.append(_split(o.label, (yield from _estimate(plan.with_changes(**o.changes)))))
    cap = base.capacity_bytes
    return {
        "fits": f.fits, "gib": _gib(f.device_used_bytes), "capacity_gib": _gib(cap),
        "tokens_per_s_per_gpu": round(f.tokens_per_s_per_gpu, 1), "mfu": base.step.mfu,
        "max_micro_batch_size": f.max_micro_batch_size, "max_seq_len": f.max_seq_len,
        "min_gpus": f.min_gpus, "rows": rows, "advice": advice,
        "charts": {"seq_len": (yield from _memory_series(plan, "seq_len", SEQ_POINTS, cap)),
                   "micro_batch_size": (yield from _memory_series(plan, "micro_batch_size", MBS_POINTS, cap)),
                   "gpus": (yield from _gpu_series(plan, cap)), "step_split": splits, "stages": (yield from _stages(plan))},
        "share": share_fragment(plan),
    }


def fit_view(plan) -> dict:
    return drain(view_steps(plan))


def fit_call(request: dict) -> dict:
    """{"plan": plan-v1 dict (the keys of the URL's #plan=, or {})} -> the panel's view, in one call."""
    plan, errors = parse_with_recovery(request.get("plan") or {})
    out = fit_view(plan)
    out["errors"] = errors
    return out


SLICE_MS = 4.0   # Python per slice: an edit that arrives meanwhile waits for at most this much of the planner's CPU
_job = None      # the re-plan in progress: {"steps", "need", "errors", "slices", "ms", "estimates"}


def fit_start(request: dict) -> dict:
    """{"plan": ..., "slice_ms"?: ms} -> a new re-plan (any unfinished one is dropped), run for one slice: the view
    (as fit_call, plus "slices", "estimates" and "fit_py_ms", Python over all slices) if it is done, else
    {"pending": true, "slices", "estimates"}: send fit_step for the next slice."""
    global _job
    plan, errors = parse_with_recovery(request.get("plan") or {})
    _job = {"steps": view_steps(plan), "need": None, "errors": errors, "slices": 0, "ms": 0.0, "estimates": 0}
    return fit_step(request)


def fit_step(request: dict) -> dict:
    """{"slice_ms"?: ms} -> the re-plan begun by fit_start, continued for about one slice (answer as fit_start)."""
    global _job
    job = _job
    if job is None:
        return {"fatal": "fit_step: no re-plan in progress (fit_start first)"}
    budget = float(request.get("slice_ms", SLICE_MS)) / 1000
    t0 = time.perf_counter()
    steps, need = job["steps"], job["need"]
    job["slices"] += 1
    try:
        if need is None:
            need = next(steps)
        while True:
            job["estimates"] += 1
            need = answer(steps, need)
            if time.perf_counter() - t0 >= budget:
                break
    except StopIteration as done:
        _job = None
        out = done.value
        out.update(errors=job["errors"], slices=job["slices"], estimates=job["estimates"],
                   fit_py_ms=round(job["ms"] + (time.perf_counter() - t0) * 1000, 2))
        return out
    except Exception:
        _job = None
        raise
    job["need"] = need
    job["ms"] += (time.perf_counter() - t0) * 1000
    return {"pending": True, "slices": job["slices"], "estimates": job["estimates"]}


__all__ = ["fit_call", "fit_view", "view_steps", "fit_start", "fit_step"]
