"""Fragmentation over a run, read from a crash log: how far the run got, what the cache held, and the plan's
predicted growth (plan-v1 Extension 6: run.reserved_after_steps) beside it.

The mechanism (c10/cuda/CUDACachingAllocator.cpp; docs/tracer.md 8b replays it): a request no cached block can
serve opens a segment of its own; blocks of different segments never merge, and cached segments stay until
empty_cache() or a failed cudaMalloc frees the whole free ones. With batches that change shape (HF's collators pad
each batch to its own longest sample), every batch longer than all before opens segments beside the cache, and
shorter batches later split and pin them: reserved ratchets while the step's tensors still fit. So an OOM whose
message shows more reserved-but-unallocated memory than the request, after the run has done steps of the same
model before, is fragmentation, not a plan that does not fit. In the replays the native allocator ran out at step
15 on a device 2-6 % above the step's tensors; expandable segments never did.

The remedies, in the order of the replays' evidence: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`
(PyTorch >= 2.1, torchtune's default) grows one segment in place; packing (or padding to max_length) makes every
batch one shape; `max_split_size_mb` (the older message's hint) keeps large blocks whole, which on a full device
lets the retry free them, but without memory pressure it made reserved grow faster in the replays (every distinct
oversize length its own segments), so it comes last.
"""
from __future__ import annotations

import re

from .sizes import format_gib as g

LATE_STEPS = 10     # steps done before the OOM that make it a late one: the replays' first fragmentation OOM, step 15
# a tqdm bar "35%|███▌      | 350/1000 [12:01<22:19, 2.06s/it]" or a trainer's "step 350/1000", "global_step=350"
_TQDM = re.compile(r"(\d{1,3})%\|[^|\n]{0,400}\|\s*(\d+)/(\d+)\s*\[")
_TQDM_PCT = re.compile(r"(?<![\d.])(\d{1,3})%\|")
_STEP = re.compile(r"\b(?:global[_ ]step|step|iter(?:ation)?)\b\s*[:=]?\s*(\d+)(?:\s*/\s*(\d+))?", re.IGNORECASE)
# bars that count something other than training steps
_NOT_STEPS = re.compile(r"load|shard|token|map\b|download|filter|eval|example|generat|valid|predict|sampl|"
                        r"convert|prepar|process|extract", re.IGNORECASE)


def progress(text: str, stop: int | None = None) -> tuple | None:
    """(steps done, total steps or None, percent or None) from the last training progress before line `stop`
    (the OOM's), else the first after it: a tqdm bar's n/total (HF Trainer, TRL, Lightning, llama-recipes), a
    "step N" / "global_step N" / "iter N" counter, or a bar's percentage alone (a bar cut off by the excerpt).
    Bars of loading, tokenising, evaluation or generation are not training steps. None when the log shows no
    progress."""
    lines = text.splitlines()
    before, after = (lines[: stop + 1], lines[stop + 1:]) if stop is not None else (lines, [])
    return _last(before) or _last(after)     # a bar printed after the traceback (stderr interleaved): the crash's


def _last(lines: list) -> tuple | None:
    for line in reversed(lines):
        for seg in reversed(re.split(r"\r", line)):
            if _NOT_STEPS.search(seg.split("|", 1)[0]) or "examples/s" in seg:
                continue
            m = list(_TQDM.finditer(seg))
            if m:
                pct, n, total = (int(x) for x in m[-1].groups())
                return n, total, pct
            m = list(_STEP.finditer(seg))
            if m:
                n, total = m[-1].group(1), m[-1].group(2)
                return int(n), int(total) if total else None, None
            m = list(_TQDM_PCT.finditer(seg))
            if m:
                return None, None, int(m[-1].group(1))
    return None


def is_late(prog: tuple | None) -> bool:
    """The run had done steps before this one: at least LATE_STEPS, or some per cent of the run."""
    if prog is None:
        return False
    n, _, pct = prog
    return (n is not None and n >= LATE_STEPS) or (n is None and pct is not None and pct >= 1)


def _when(prog: tuple | None) -> str:
    if prog is None:
        return ""
    n, total, pct = prog
    if n is not None:
        return f"after {n:,} steps" + (f" of {total:,}" if total else "")
    return f"{pct} % into the run"


def message(o, prog: tuple | None) -> str:
    """The fragmentation finding, from the message's own figures: reserved-but-unallocated against the request
    and against what PyTorch reserved, and when the run got there."""
    u, t = o.reserved_unallocated_bytes, o.tried_to_allocate_bytes
    parts = [f"{g(u)} was cached by PyTorch but unallocated, {u / t:.1f}x the {g(t)} requested"]
    if o.allocated_bytes is not None:
        held = o.allocated_bytes + u
        parts.append(f" ({u / held:.0%} of the {g(held)} PyTorch reserved)" if held else "")
    parts.append(": the cache held the bytes in blocks too small for the request, fragmentation")
    if is_late(prog):
        parts.append(f", {_when(prog)}: the same step ran before, so its tensors fit; the cache grew as batches "
                     "changed shape (each batch longer than all before opens segments the shorter ones then pin)")
    parts.append(". Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch >= 2.1; torchtune's default): "
                 "segments grow in place and the cache stops ratcheting; or make every batch one shape: pack the "
                 "samples (TRL packing, axolotl sample_packing) or pad to max_length; max_split_size_mb:N keeps "
                 "large blocks whole, but in allocator replays of variable-length runs it made reserved grow "
                 "faster (docs/tracer.md 8b), so try it last")
    return "".join(parts)


def _count(prog: tuple | None, after: dict) -> str:
    """The step count of run.reserved_after_steps to compare with: the first at or past the log's steps."""
    keys = list(after)
    n = prog[0] if prog else None
    if n is None:
        return keys[-1]
    return next((k for k in keys if int(k) >= n), keys[-1])


def plan_findings(o, prog: tuple | None, est: dict, lengths: str, expandable_est: dict | None) -> list:
    """The log's reserved (allocated + unallocated) beside the plan's predicted reserve after as many steps.
    `expandable_est`: the same plan's estimate with allocator.expandable_segments true (None when it already is)."""
    if o.allocated_bytes is None or o.reserved_unallocated_bytes is None:
        return []
    run, pg = est.get("run") or {}, est["per_gpu"]
    after = run.get("reserved_after_steps")
    if not after:
        return []
    held = o.allocated_bytes + o.reserved_unallocated_bytes
    when = _when(prog) or "at the crash"
    if lengths == "fixed":
        msg = (f"the plan assumes every batch is seq_len long (data.lengths fixed), so it predicts "
               f"{g(pg['peak_reserved_bytes'])} reserved at every step and no growth; the log had {g(held)} reserved, "
               f"{g(o.reserved_unallocated_bytes)} of it unallocated, {when}: batches that change shape. Set "
               "data.lengths (padded-longest for HF's default collators, padding-free for TRL padding_free) with "
               "data.mean_len and data.p99_len, or a histogram, to see the growth over the run")
        return [{"id": "fragmentation_vs_plan", "severity": "info", "message": msg}]
    k = _count(prog, after)
    pred = after[k]
    growth = pred - pg["peak_reserved_bytes"]
    msg = (f"the plan (data.lengths {lengths}) predicts {g(pred)} reserved after {int(k):,} steps, "
           f"{g(growth)} {'more' if growth >= 0 else 'less'} than its steady step's {g(pg['peak_reserved_bytes'])}; "
           f"the log had {g(held)} reserved ({held / pred:.0%} of the prediction), {when}")
    oom = run.get("fragmentation_oom_step")
    if oom:
        msg += f"; the plan also runs the device out by step {oom:,} although that step's tensors fit"
    if expandable_est is not None:
        e_after = (expandable_est.get("run") or {}).get("reserved_after_steps") or {}
        if k in e_after:
            msg += (f"; with allocator.expandable_segments true it predicts {g(e_after[k])}"
                    + (" and no fragmentation out-of-memory" if not expandable_est["run"].get("fragmentation_oom_step")
                       else ""))
    return [{"id": "fragmentation_vs_plan", "severity": "warning" if oom else "info", "message": msg}]
