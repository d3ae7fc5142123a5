"""python -m tools.dsprobe.steptrace RESULT.json [--phase step2] [--min-mib 1]

Block-level view of a DSPROBE_ALLOCATOR=1 DSPROBE_EVENTS=1 probe result (tools/dsprobe/worker.py event_log):
each rank's storage log replayed through the caching allocator's rules (tools/memtrace/allocator.py), printing
per phase the allocated / reserved peaks and, for the chosen phase, every request that found no cached block and
opened a segment of its own: its size, label and source site, and the largest free cached block of its pool at
that moment (why best fit could not serve it). `summary(result)` returns the same as a dict (the fixture of
tests/data/dsprobe_step_reserve.json).
"""
from __future__ import annotations

import argparse
import json
import sys

from tools.memtrace.allocator import CachingAllocator

MiB = 2**20


def replay_rank(ev: dict, watch: str | None = None, min_bytes: int = MiB) -> dict:
    """One rank's log: {"phases": {name: {peak_allocated, peak_reserved, end_allocated, end_reserved}},
    "fresh": [{phase, nbytes, segment, label, site, largest_cached, allocated_before, reserved_before}]} for
    requests of at least min_bytes that opened a segment in phase `watch` (every phase if None)."""
    a = CachingAllocator()
    empties = set(ev.get("empty_cache", ()))
    marks: dict = {}
    for i, name in ev["marks"]:
        marks.setdefault(i, []).append(name)
    live: dict = {}
    phases: dict = {}
    fresh: list = []
    cur = None
    name = None
    events = ev["events"]
    for i in range(len(events) + 1):
        for nm in marks.get(i, ()):
            name = nm
            cur = phases.setdefault(nm, {"peak_allocated": a.allocated, "peak_reserved": a.reserved})
        if i in empties:
            a.empty_cache()
        if i == len(events):
            break
        sign, key, nbytes, label, site = events[i]
        if sign > 0:
            small = nbytes <= MiB
            pool = a._free[small]
            largest = pool[-1][0] if pool else 0
            before_r, before_a = a.reserved, a.allocated
            live[key] = a.malloc(nbytes)
            if a.reserved > before_r and nbytes >= min_bytes and (watch is None or name == watch):
                fresh.append({"phase": name, "nbytes": nbytes, "segment": a.reserved - before_r, "label": label,
                              "site": site, "largest_cached": largest, "allocated_before": before_a,
                              "reserved_before": before_r})
        else:
            h = live.pop(key, None)
            if h is not None:
                a.free(h)
        if cur is not None:
            cur["peak_allocated"] = max(cur["peak_allocated"], a.allocated)
            cur["peak_reserved"] = max(cur["peak_reserved"], a.reserved)
            cur["end_allocated"], cur["end_reserved"] = a.allocated, a.reserved
    return {"phases": phases, "fresh": fresh}


def summary(result: dict, watch: str = "step2") -> dict:
    out = []
    for r in result["ranks"]:
        rr = replay_rank(r["events"], watch)
        out.append({"rank": r["rank"], **rr})
    return {"ranks": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.dsprobe.steptrace")
    ap.add_argument("result")
    ap.add_argument("--phase", default="step2")
    ap.add_argument("--min-mib", type=float, default=1.0)
    a = ap.parse_args(argv)
    res = json.load(open(a.result))
    for r in res["ranks"]:
        rr = replay_rank(r["events"], a.phase, int(a.min_mib * MiB))
        print(f"rank {r['rank']}:")
        for ph, p in rr["phases"].items():
            print(f"  {ph:6} alloc {p['peak_allocated'] / MiB:9.1f}  reserved {p['peak_reserved'] / MiB:9.1f}  "
                  f"end {p.get('end_allocated', 0) / MiB:9.1f} / {p.get('end_reserved', 0) / MiB:9.1f} MiB")
        for f in rr["fresh"]:
            print(f"    fresh {f['nbytes'] / MiB:9.1f} MiB seg {f['segment'] / MiB:8.1f}  largest cached "
                  f"{f['largest_cached'] / MiB:8.1f}  at alloc {f['allocated_before'] / MiB:8.1f} / res "
                  f"{f['reserved_before'] / MiB:8.1f}  {f['label']}  {f['site']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
