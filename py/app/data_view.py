"""The page's "data" box (plan-v1 Extension 6): what a user pastes as the length distribution, turned into the
plan's `data.histogram`, and the chart of reserved memory over the run (`run.reserved_after_steps` against what
the allocator can reserve on the device). Plain text and numbers only: py/app/render.py writes the chart into the
pre-rendered page (escaped), assets/app.js rebuilds it with createElementNS / textContent on every answer.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from zerocalc import PlanError
from zerocalc.datasettings import histogram_from_lengths
from zerocalc.memory.fragmentation import longest_fraction, sample_quantile, typical_fraction
from zerocalc.units import GIB

W, H = 360, 200                  # the chart's SVG user units (viewBox)
LEFT, RIGHT, TOP, BOTTOM = 40, 10, 36, 34
FIX = "set expandable_segments or pack"


@lru_cache(maxsize=8)
def _from_text(text: str, seq_len: int) -> tuple:
    """A pasted text, parsed once per (text, seq_len): every later edit of another field sends it again."""
    return tuple(tuple(r) for r in histogram_from_lengths(text, seq_len) or ())


def _seq_len(work: Mapping, good: Mapping) -> int:
    s = work.get("seq_len", good.get("seq_len"))
    ok = isinstance(s, int) and not isinstance(s, bool) and s >= 1
    return s if ok else int(good.get("seq_len") or 1)


def normalise_lengths(work: dict, good: Mapping) -> dict:
    """In the form's plan dict (changed in place), `data.histogram` as pasted -> a plan-v1 histogram; -> the
    messages by key. A bad paste takes the last good plan's histogram back (or none), so the other settings still
    apply and the box keeps what was typed."""
    d = work.get("data")
    if not isinstance(d, dict) or "histogram" not in d:
        return {}
    raw, seq_len = d["histogram"], _seq_len(work, good)
    try:
        if isinstance(raw, str):
            rows = _from_text(raw, seq_len)
            hist = [list(r) for r in rows] if rows else None
        else:
            hist = histogram_from_lengths(raw, seq_len)
    except PlanError as e:
        back = (good.get("data") or {}).get("histogram")
        if back is None:
            del d["histogram"]
        else:
            d["histogram"] = back
        return {e.key or "data.histogram": str(e)}
    if hist is None:
        del d["histogram"]
    else:
        d["histogram"] = hist
    return {}


def _gib(n: float, digits: int = 1) -> str:
    return f"{n / GIB:,.{digits}f}"


def reserved_chart(est: Mapping, lengths: str) -> dict:
    """max_memory_reserved after 10 / 100 / 1000 / 10000 steps (run.reserved_after_steps) as a line over
    log-spaced steps, against the most the caching allocator can reserve (the device's capacity less what lies
    outside it: the CUDA context and NCCL, as estimate._over_steps reckons it). -> marks (SVG elements as
    {tag, attrs, text}), the hidden table and one sentence for the chart's accessible description."""
    run, pg = est["run"], est["per_gpu"]
    after = run.get("reserved_after_steps") or {}
    cap = est["capacity_bytes"]
    limit = cap - (pg["device_used_bytes"] - pg["peak_reserved_bytes"])
    oom = run.get("fragmentation_oom_step")
    top = max([limit, *after.values()]) * 1.1 or 1
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def y(b: float) -> float:
        return round(TOP + plot_h * (1 - b / top), 2)

    digits = 0 if top / GIB >= 20 else 1
    marks = [{"tag": "line", "attrs": {"class": "ax", "x1": LEFT, "x2": W - RIGHT, "y1": y(0), "y2": y(0)}},
             {"tag": "line", "attrs": {"class": "ax", "x1": LEFT, "x2": LEFT, "y1": TOP, "y2": y(0)}}]
    for b in (0, top / 2, top):
        marks.append({"tag": "text", "attrs": {"class": "tick", "x": LEFT - 4, "y": round(y(b) + 3, 2),
                                                "text-anchor": "end"}, "text": _gib(b, digits)})
    marks.append({"tag": "text", "attrs": {"class": "unit", "x": 2, "y": 10, "data-axis": "y"},
                  "text": "GiB per GPU (max_memory_reserved)"})
    marks.append({"tag": "text", "attrs": {"class": "unit", "x": LEFT + plot_w / 2, "y": H - 3,
                                           "text-anchor": "middle", "data-axis": "x"},
                  "text": "training steps (log scale)"})
    marks.append({"tag": "line", "attrs": {"class": "cap", "x1": LEFT, "x2": W - RIGHT, "y1": y(limit),
                                           "y2": y(limit)}})
    marks.append({"tag": "line", "attrs": {"class": "cap", "x1": W - RIGHT - 172, "x2": W - RIGHT - 152, "y1": 21,
                                           "y2": 21}})          # the legend: the dashed line is the limit
    marks.append({"tag": "text", "attrs": {"class": "cap-label", "x": W - RIGHT, "y": 24, "text-anchor": "end"},
                  "text": f"PyTorch can reserve {_gib(limit)} GiB"})
    pts, rows, said, at = [], [], [], len(marks)
    for i, (n, b) in enumerate(after.items()):
        x = round(LEFT + plot_w * (i + 0.5) / len(after), 2)
        pts.append(f"{x},{y(b)}")
        over = b > limit
        note = ("fragmentation runs out here" if oom is not None and int(n) == oom
                else "the step's tensors alone do not fit" if over else "")
        cls = "pt" + (" pt-oom" if note.startswith("fragmentation") else "") + (" pt-over" if over else "")
        marks.append({"tag": "circle", "attrs": {"class": cls, "cx": x, "cy": y(b), "r": 3.5, "data-steps": n,
                                                 "data-bytes": b}})
        marks.append({"tag": "text", "attrs": {"class": "val", "x": x, "y": round(y(b) - 7, 2),
                                               "text-anchor": "middle"}, "text": _gib(b)})
        marks.append({"tag": "text", "attrs": {"class": "tick", "x": x, "y": round(y(0) + 12, 2),
                                               "text-anchor": "middle"}, "text": f"{int(n):,}"})
        rows.append([f"{int(n):,}", _gib(b, 2), _gib(limit, 2), note])
        said.append(f"{int(n):,} steps {_gib(b, 2)} GiB")
    marks.insert(at, {"tag": "polyline", "attrs": {"class": "res", "points": " ".join(pts)}})
    shape = ("fixed lengths: one batch shape, so reserved stays flat" if lengths == "fixed"
             else f"data.lengths {lengths}: each batch longer than all before it opens new cache segments")
    end = (f" Fragmentation runs the device out by step {oom:,} although that step's tensors fit: {FIX}."
           if oom else "")
    summary = (f"max_memory_reserved per GPU over the run ({shape}): " + "; ".join(said)
               + f". PyTorch can reserve at most {_gib(limit, 2)} GiB of the GPU's {_gib(cap, 2)} GiB (the rest: "
                 f"the CUDA context and NCCL)." + end)
    return {"width": W, "height": H, "marks": marks, "summary": summary,
            "table": {"caption": "max_memory_reserved per GPU after each number of steps",
                      "header": ["steps", "max_memory_reserved, GiB", "PyTorch can reserve, GiB", "note"],
                      "rows": rows}}


def lengths_summary(plan) -> str:
    """One sentence under the data box: what the engine read from it (the pasted histogram's samples, mean, 99th
    percentile and longest), and the batches that follow (a typical one, the longest in 1,000 steps), from the
    engine's own rules (memory/fragmentation.py)."""
    d, s, b = plan.data, plan.seq_len, plan.micro_batch_size
    if d.lengths == "fixed":
        return f"Every batch is seq_len long ({s:,} tokens): packed, or padded to max_length."
    if d.histogram:
        n = sum(w for _, w in d.histogram)
        mean = sum(min(x, s) * w for x, w in d.histogram) / n
        said = (f"Lengths: {n:,.0f} samples, mean {mean:,.0f}, 99th percentile "
                f"{sample_quantile(0.99, s, None, None, d.histogram):,.0f}, longest "
                f"{min(max(x for x, _ in d.histogram), s):,} tokens.")
    else:
        p99 = f"{d.p99_len:,} tokens" if d.p99_len else f"{s:,} tokens (none given: seq_len)"
        said = f"Lengths: mean {d.mean_len:,}, 99th percentile {p99}, a log-normal through them."
    args = (b, s, d.mean_len, d.p99_len, d.histogram)
    typ = typical_fraction(d.lengths, *args) * b * s
    top = longest_fraction(d.lengths, 1000, *args) * b * s
    what = ("padded to their longest sample" if d.lengths == "padded-longest" else "concatenated")
    return (f"{said} Micro-batches of {b} samples {what}: typically {typ:,.0f} tokens, the longest in 1,000 "
            f"steps {top:,.0f} (of {b * s:,} at seq_len).")
