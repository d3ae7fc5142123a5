"""Replay the tracker's event log with final labels: per-buffer peaks, per-phase model-state peaks.

Definitions (what the probe reports, per rank):
  buffers[name].bytes      the largest live bytes of that name at any instant of the steady window
                           (optimizer steps >= steady_from; step 1 creates Adam state and is warm-up)
  buffers[name].at_end     live bytes after the last step (the resident part)
  phases[p].model_state    the largest sum over model-state names at any instant of phase kind p
                           (init; fwd/bwd/step over the steady window), with the breakdown at that instant
  phases[p].total          the largest tracked total (activations included) in that phase kind
  at_marks[m]              live bytes per name at phase boundary m (fwd->bwd turn = mark "bwdK")
Names outside labels.MODEL_STATE and not "ds_other:*"/"ds:*" (activations, inputs, rotary buffers) are "other".
"""
from __future__ import annotations

import re

from .labels import MODEL_STATE, SMALL, classify_site


def final_label(rec) -> str:
    if rec.label is not None:
        return rec.label
    return classify_site(rec) or "other"


def is_model_state(name: str) -> bool:
    return name in MODEL_STATE or name.startswith(("ds_other:", "ds:"))


def _label(rec) -> str:
    lab = final_label(rec)
    if lab.startswith("ds:") and rec.nbytes < SMALL:
        return "other"  # scalars held by the optimizer (_global_grad_norm, loss scale)
    return lab


def _kind(phase: str) -> tuple[str, int]:
    m = re.match(r"([a-z]+)(\d*)$", phase)
    return m.group(1), int(m.group(2) or 0)


def analyse(tr, steady_from: int = 2) -> dict:
    marks = dict(tr.marks)  # event index -> phase (later mark at the same index wins)
    live: dict[str, int] = {}
    ms_total = 0
    total = 0
    buf_peak: dict[str, int] = {}
    phases: dict[str, dict] = {}
    at_marks: dict[str, dict] = {}
    labels = {}
    phase = "init"
    kind, idx = "init", 0
    sites: dict[str, dict] = {}

    def steady():
        return kind == "init" or idx >= steady_from

    def observe(lab):
        if kind != "init" and live[lab] > buf_peak.get(lab, 0):
            buf_peak[lab] = live[lab]
        ph = phases.setdefault(kind, {"model_state": 0, "breakdown": {}, "total": 0})
        if total > ph["total"]:
            ph["total"] = total
        if ms_total > ph["model_state"] or not ph["breakdown"]:
            ph["model_state"] = ms_total
            ph["breakdown"] = {k: v for k, v in live.items() if v and is_model_state(k)}

    def snapshot_mark(name):
        if name == "end" or _kind(name)[1] >= steady_from or name == "fwd1":
            at_marks[name] = {k: v for k, v in live.items() if v}

    for i, (sign, rec) in enumerate(tr.events + [(0, None)]):
        if i in marks:
            phase = marks[i]
            snapshot_mark(phase)
            kind, idx = _kind(phase)
            if steady() and kind != "end":
                for lab in list(live):
                    observe(lab)
        if rec is None:
            break
        lab = labels.get(id(rec))
        if lab is None:
            lab = labels[id(rec)] = _label(rec)
            if lab == "other" or lab.startswith("ds_other:"):
                s = sites.setdefault(lab + " @" + rec.site, {"bytes_max": 0, "count": 0, "dtype": str(rec.dtype)})
                s["bytes_max"] = max(s["bytes_max"], rec.nbytes)
                s["count"] += 1
        d = sign * rec.nbytes
        live[lab] = live.get(lab, 0) + d
        total += d
        if is_model_state(lab):
            ms_total += d
        if sign > 0 and steady():
            observe(lab)
    end = at_marks.get("end", {})
    buffers = {k: {"bytes": v, "at_end": end.get(k, 0)} for k, v in sorted(buf_peak.items()) if is_model_state(k)}
    big_sites = sorted(sites.items(), key=lambda kv: -kv[1]["bytes_max"])[:25]
    return {"buffers": buffers, "phases": phases, "at_marks": at_marks,
            "unlabelled_sites": [{"site": k, **v} for k, v in big_sites]}
