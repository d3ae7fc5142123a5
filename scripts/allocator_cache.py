"""python scripts/allocator_cache.py [--quick | --stacks] [--json OUT]

What the caching allocator adds on top of the tensors, measured by replaying each traced step of the tracer
grid (tools/memtrace) through PyTorch's allocator rules (tools/memtrace/allocator.py): per plan, the
tensors' peak (what the tracker counts), `max_memory_allocated` (whole blocks: 512 B rounding and unsplit
remainders), `max_memory_reserved` (whole segments) and the pinned peak (segments holding a live block), then
the engine's reserved beside the replayed one. Ends with the shares memory/runtime.py uses: the cache per byte
of activations and logits at the peak (median) and its pinned part (upper decile, for the fit verdict), for
plans with and without activation checkpointing. Needs the tools venv (torch, transformers, peft).
`--stacks` replays the stack grid's entries of the running venv instead (tools/memtrace/stacks.py: run it with
`.venv-torchtune/bin/python`, `.venv-litgpt/bin/python` ... for the other trainers), a check out of the shares'
sample.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

GIB = 2**30


def rows(results: list) -> list[dict]:
    from zerocalc import Plan, estimate  # noqa: PLC0415

    out = []
    for r in results:
        if "error" in r or "allocator" not in r:
            out.append({"id": r.get("id"), "error": r.get("error", "no allocator replay")})
            continue
        a = r["allocator"]
        plan = Plan.from_dict(r["plan"])
        pg = estimate(plan).per_gpu
        out.append({"id": r["id"], "tensors": r["peak_bytes"], "allocated": a["peak_allocated"],
                    "reserved": a["peak_reserved"], "pinned": a["peak_pinned"], "segments": a["segments"],
                    "checkpointed": plan.activation_checkpointing != "none",
                    "engine_transient": pg.components["activations"] + pg.components["logits"],
                    "engine_allocated": pg.peak_allocated, "engine_reserved": pg.peak_reserved})
    return out


MIN_TRANSIENT = 0.05   # below this share of the peak, the cache is the gradients' and states' blocks


def shares(table: list[dict]) -> dict:
    """Per regime: the cache and its pinned part per byte of the engine's activations + logits at the peak."""
    out = {}
    for kind, ck in (("checkpointed", True), ("saved", False)):
        rs = [t for t in table if "error" not in t and t["checkpointed"] == ck
              and t["engine_transient"] >= MIN_TRANSIENT * t["engine_allocated"]]
        cache = [(t["reserved"] - t["allocated"]) / t["engine_transient"] for t in rs]
        pinned = [(t["pinned"] - t["allocated"]) / t["engine_transient"] for t in rs]
        if len(rs) > 1:
            out[kind] = {"plans": len(rs), "cache_median": round(statistics.median(cache), 3),
                         "pinned_p90": round(statistics.quantiles(pinned, n=10)[-1], 3)}
    return out


def pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the tracer's quick subset only")
    ap.add_argument("--stacks", action="store_true", help="the stack grid's entries of this venv instead")
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args(argv)
    from tools.memtrace.grid import GRID, run_grid  # noqa: PLC0415

    if a.stacks:
        from tools.memtrace.stacks import STACKS, era, venv_era  # noqa: PLC0415
        plans = [e for e in STACKS if era(e) == venv_era()]
    else:
        plans = [g for g in GRID if g.get("quick") or not a.quick]
    table = rows(run_grid(plans))
    print("| plan | tensors GiB | allocated: blocks | reserved: segments | reserved over allocated | engine reserved |")
    print("|---|---|---|---|---|---|")
    over = []
    for t in table:
        if "error" in t:
            print(f"| {t['id']} | - | - | - | failed: {t['error'][:60]} |")
            continue
        ro = t["reserved"] / t["allocated"] - 1
        over.append(ro)
        print(f"| {t['id']} | {t['tensors'] / GIB:.3f} | {pct(t['allocated'] / t['tensors'] - 1)} | "
              f"{t['reserved'] / GIB:.3f} GiB | {pct(ro)} | {pct(t['engine_reserved'] / t['reserved'] - 1)} |")
    if over:
        q = statistics.quantiles(over, n=10) if len(over) > 1 else over * 9
        print(f"\nreserved over allocated, {len(over)} plans: median {pct(statistics.median(over))}, "
              f"p10 {pct(q[0])}, p90 {pct(q[-1])}, min {pct(min(over))}, max {pct(max(over))}")
    from zerocalc.memory.runtime import CACHE_PER_TRANSIENT, PINNED_PER_TRANSIENT  # noqa: PLC0415
    print("\nper byte of activations and logits at the peak (plans where they are >= 5 % of it):")
    for kind, v in shares(table).items():
        print(f"- {kind}: {v['plans']} plans, cache median {v['cache_median']} (engine {CACHE_PER_TRANSIENT[kind]}),"
              f" pinned p90 {v['pinned_p90']} (engine {PINNED_PER_TRANSIENT[kind]})")
    errs = [abs(t["engine_reserved"] / t["reserved"] - 1) for t in table if "error" not in t]
    if errs:
        print(f"engine reserved vs replayed: median |error| {100 * statistics.median(errs):.2f}%, "
              f"max {100 * max(errs):.2f}%")
    if a.json:
        a.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
