"""How far off is the engine? Errors against published measurements and the fake-tensor tracer.

    python scripts/fidelity.py [--public PATH] [--no-tracer] [--quick] [--records]

Public set (validation/public.json, the repository's copy made by scripts/build_validation.py; format
and sources in validation/README.md): each record's plan is estimated and compared with the prediction
that matches its metric (allocated/active/unknown -> peak_allocated_bytes, reserved ->
peak_reserved_bytes, device_used -> device_used_bytes). Records of quality `unsupported` are left out
of the statistics, as the data's README says. Per source group and overall: median and p90 of
|error|, bias (median signed error), and OOM recall (runs that ran out of memory predicted as not
fitting). Nothing is tuned per record.

Tracer grid (tools/memtrace): the engine's single-GPU components against real training steps traced
on fake tensors (needs the tools venv: torch, transformers, peft).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT))

from zerocalc import Plan, estimate  # noqa: E402

DEFAULT_PUBLIC = ROOT / "validation" / "public.json"
DEFAULT_TAGS = ROOT / "validation" / "public-stack.json"
DEFAULT_CORRECTIONS = ROOT / "validation" / "public-corrections.json"
DEFAULT_RUN_TAGS = ROOT / "validation" / "public-run.json"
DEFAULT_DATA_TAGS = ROOT / "validation" / "public-data.json"
# records the repository collects itself (same fields as public.json, plus the source's own line in `quote`)
DEFAULT_REPO_RECORDS = ROOT / "validation" / "repo-records.json"
METRIC_KEY = {"allocated": "peak_allocated_bytes", "active": "peak_allocated_bytes",
              "unknown": "peak_allocated_bytes", "reserved": "peak_reserved_bytes",
              "device_used": "device_used_bytes"}


def predict(record: dict, window: str = "per-log", count: str | None = None) -> tuple[int, bool]:
    """The prediction matching the record's metric, over the record's window: the whole run's (run.*, every phase)
    where the source's figure spans the whole process, the steady step's (per_gpu) where it spans training steps.
    `count` (validation/public-data.json, scripts/data_tags.py): for a reserved or nvidia-smi record of a run whose
    batches change shape, the steps come from run.reserved_after_steps[count] (nvidia-smi: plus what lies outside
    the allocator, device_used - peak_reserved), in place of the steady step; whole-process: the larger of that
    and the run's other phases. A per-log reserved or nvidia-smi figure of a fixed-length run adds what
    run.reserved_after_steps holds beside the steady step (the segments an on-device build left cached:
    run.load.on_device_build; zero for every other plan)."""
    est = estimate(Plan.from_dict(record["plan"]))
    d = est.to_dict()
    key = METRIC_KEY[record["metric"]]
    figures = d["run"] if window == "whole-process" else d["per_gpu"]
    pred = figures[key]
    lengths = (record["plan"].get("data") or {}).get("lengths", "fixed")
    if count is not None and lengths != "fixed" and record["metric"] in ("reserved", "device_used"):
        pg = d["per_gpu"]
        steps = d["run"]["reserved_after_steps"][count]
        if record["metric"] == "device_used":
            steps += pg["device_used_bytes"] - pg["peak_reserved_bytes"]
        others = [p[key] for k, p in d["run"]["phases"].items() if k != "step"]
        pred = max([steps, *others]) if window == "whole-process" else steps
    elif window == "per-log" and record["metric"] in ("reserved", "device_used"):
        # the steps beside the segments the load left stranded (run.load.on_device_build): reserved_after_steps
        # of a fixed-length plan is the steady step's reserve plus those; 0 for every other plan
        pred += max(0, d["run"]["reserved_after_steps"]["10"] - d["per_gpu"]["peak_reserved_bytes"])
    return pred, est.fits


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = 0.9 * (len(xs) - 1)
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(rows: list[dict]) -> dict:
    errs = [r["error"] for r in rows if r["error"] is not None]
    ooms = [r for r in rows if r["outcome"] == "oom"]
    ok = [r for r in rows if r["outcome"] == "ok"]
    return {
        "n": len(errs),
        "median_abs": statistics.median([abs(e) for e in errs]) if errs else float("nan"),
        "p90_abs": _p90([abs(e) for e in errs]),
        "bias": statistics.median(errs) if errs else float("nan"),
        "oom_recall": (sum(1 for r in ooms if not r["fits"]) / len(ooms)) if ooms else None,
        "n_oom": len(ooms),
        "false_oom": sum(1 for r in ok if not r["fits"]),
    }


def public_rows(path: pathlib.Path, stack_tags: dict | None = None, corrections: dict | None = None,
                run_tags: dict | None = None, data_tags: dict | None = None) -> list[dict]:
    rows = []
    for rec in json.loads(path.read_text()):
        if rec["quality"] == "unsupported":
            continue
        if corrections is not None:         # validation/public-corrections.json: keys the plans omit
            from scripts.plan_corrections import corrected_plan
            rec = {**rec, "plan": corrected_plan(rec, corrections)}
        if stack_tags is not None:          # validation/public-stack.json (validation/STACKS.md)
            from scripts.stack_tags import tagged_plan
            rec = {**rec, "plan": tagged_plan(rec, stack_tags)}
        win = "per-log"
        if run_tags is not None:            # validation/public-run.json: what the run did, the window it reports
            from scripts.run_tags import tagged_plan as run_plan, window
            rec, win = {**rec, "plan": run_plan(rec, run_tags)}, window(rec, run_tags)
        count = None
        if data_tags is not None:           # validation/public-data.json: lengths, allocator, steps (issue 21)
            from scripts.data_tags import steps_count, tagged_plan as data_plan
            rec, count = {**rec, "plan": data_plan(rec, data_tags)}, steps_count(rec, data_tags)
        pred, fits = predict(rec, win, count)
        meas = rec["measured_bytes"]
        err = (pred - meas) / meas if meas else None
        rows.append({"id": rec["id"], "group": rec["source_group"], "metric": rec["metric"], "pred": pred,
                     "measured": meas, "error": err, "fits": fits, "outcome": rec["outcome"],
                     "quality": rec["quality"]})
    return rows


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "nan" if x != x else f"{100 * x:+.1f}%"
    return str(x)


def print_table(title: str, groups: dict[str, dict]) -> None:
    print(f"\n## {title}\n")
    print("| source | n | median abs err | p90 abs err | bias | OOM recall | false OOM |")
    print("|---|---|---|---|---|---|---|")
    for name, s in groups.items():
        recall = "-" if s["oom_recall"] is None else f"{s['oom_recall'] * s['n_oom']:.0f}/{s['n_oom']}"
        med = _fmt(s["median_abs"]).lstrip("+")
        p90 = _fmt(s["p90_abs"]).lstrip("+")
        print(f"| {name} | {s['n']} | {med} | {p90} | {_fmt(s['bias'])} | {recall} | {s['false_oom']} |")


def run_public(path: pathlib.Path, show_records: bool, stack_tags: dict | None = None,
               corrections: dict | None = None, run_tags: dict | None = None, data_tags: dict | None = None) -> dict:
    rows = public_rows(path, stack_tags, corrections, run_tags, data_tags)
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    table = {g: summarize(rs) for g, rs in sorted(groups.items())}
    measured = [r for r in rows if r["quality"] == "measured"]
    table["**all measured**"] = summarize(measured)
    table["**all (measured + approximate)**"] = summarize(rows)
    tagged = ("; stack-tagged" if stack_tags is not None else "") + (
        "; plan corrections" if corrections is not None else "") + (
        "; run-tagged (whole-process records vs the run's peak)" if run_tags is not None else "") + (
        "; data-tagged (reserved / nvidia-smi over the run's steps)" if data_tags is not None else "")
    print_table(f"Engine vs published measurements ({path.name}{tagged}; `unsupported` records left out)", table)
    by_metric: dict[str, list[dict]] = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(r)
    print_table("By metric", {m: summarize(rs) for m, rs in sorted(by_metric.items())})
    if show_records:
        print("\n| record | metric | measured GiB | predicted GiB | error |")
        print("|---|---|---|---|---|")
        for r in rows:
            m = "OOM" if r["measured"] is None else f"{r['measured'] / 2**30:.2f}"
            print(f"| {r['id']} | {r['metric']} | {m} | {r['pred'] / 2**30:.2f} | {_fmt(r['error'])} |")
    return table


def _paired_table(title: str, tagged: list[dict], plain: list[dict], a_name: str, b_name: str) -> None:
    """One row per source group (and the totals): error statistics of two scorings of the same records."""
    def groups(rows):
        out: dict[str, list[dict]] = {}
        for r in rows:
            out.setdefault(r["group"], []).append(r)
        return out
    gt, gp = groups(tagged), groups(plain)
    print(f"\n## {title}\n")
    print(f"| source | n | median ({a_name}) | p90 ({a_name}) | bias ({a_name}) | median ({b_name}) | p90 ({b_name}) "
          f"| bias ({b_name}) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [(g, summarize(gt[g]), summarize(gp[g])) for g in sorted(gt)]
    rows.append(("**all measured**", summarize([r for r in tagged if r["quality"] == "measured"]),
                 summarize([r for r in plain if r["quality"] == "measured"])))
    rows.append(("**all (measured + approximate)**", summarize(tagged), summarize(plain)))
    for g, a, b in rows:
        print(f"| {g} | {a['n']} | {_fmt(a['median_abs']).lstrip('+')} | {_fmt(a['p90_abs']).lstrip('+')} | "
              f"{_fmt(a['bias'])} | {_fmt(b['median_abs']).lstrip('+')} | {_fmt(b['p90_abs']).lstrip('+')} | "
              f"{_fmt(b['bias'])} |")


def run_public_compare(path: pathlib.Path, stack_tags: dict, corrections: dict | None = None) -> None:
    """Per source group: the error with the stack tags (validation/public-stack.json) and without them (every
    plan run as today's default stack); the plan corrections, when given, apply to both."""
    _paired_table(f"With and without the stack tags ({path.name}, validation/public-stack.json)",
                  public_rows(path, stack_tags, corrections), public_rows(path, None, corrections), "tags", "no tags")


def run_public_run_compare(path: pathlib.Path, stack_tags, corrections, run_tags: dict) -> None:
    """Per source group: the error with the run tags (validation/public-run.json: each record's run and window)
    and without them (every record against the steady step, as before issue 19)."""
    _paired_table(f"With and without the run tags ({path.name}, validation/public-run.json)",
                  public_rows(path, stack_tags, corrections, run_tags),
                  public_rows(path, stack_tags, corrections, None), "run", "step only")


def run_public_data_compare(path: pathlib.Path, stack_tags, corrections, run_tags, data_tags: dict) -> None:
    """The records that read max_memory_reserved or nvidia-smi, per source group: the error with the data tags
    (validation/public-data.json: each source's collator, dataset lengths and steps, so reserved over the run's
    steps) and without them (every batch seq_len long, the steady step)."""
    def reserved(rows):
        return [r for r in rows if r["metric"] in ("reserved", "device_used")]
    _paired_table(f"With and without the data tags ({path.name}, validation/public-data.json; reserved and "
                  "nvidia-smi records)",
                  reserved(public_rows(path, stack_tags, corrections, run_tags, data_tags)),
                  reserved(public_rows(path, stack_tags, corrections, run_tags, None)), "data", "fixed lengths")


def run_tracer(quick: bool, show_tables: bool) -> None:
    """Per plan: the engine's peak and each component against the trace (tools/memtrace)."""
    try:
        from tools.memtrace.compare import compare_results
        from tools.memtrace.grid import GRID, run_grid
    except ImportError as e:  # the tracer needs torch/transformers/peft
        print(f"\n## Engine vs tracer grid\n\nskipped: {e}")
        return
    plans = [g for g in GRID if g.get("quick") or not quick]
    results = compare_results(run_grid(plans))
    print(f"\n## Engine vs the traced training step (tools/memtrace, {len(results)} plans, single GPU)\n")
    print("| plan | peak error | worst component | its error | within 3 % |")
    print("|---|---|---|---|---|")
    peak_errs, worst_all, ok = [], [], 0
    for r in results:
        if r["error"]:
            print(f"| {r['id']} | - | - | trace failed: {r['error'][:60]} | no |")
            continue
        rows = {row["name"]: row for row in r["rows"]}
        peak = rows.get("peak")
        comp = [row for row in r["rows"] if row["name"] != "peak"]
        worst = max(comp, key=lambda row: abs(row["diff"]))
        pe = peak["rel"] if peak else float("nan")
        peak_errs.append(abs(pe))
        worst_all.append(abs(worst["diff"]))
        ok += r["ok"]
        print(f"| {r['id']} | {100 * pe:+.2f}% | {worst['name']} | {worst['diff'] / 2**30:+.3f} GiB "
              f"({100 * worst['rel']:+.1f}%) | {'yes' if r['ok'] else 'no'} |")
    if peak_errs:
        print(f"\n{ok}/{len(results)} plans within 3 % on every component; peak |error| median "
              f"{100 * statistics.median(peak_errs):.2f}%, max {100 * max(peak_errs):.2f}%")
    if show_tables:
        for r in results:
            if r.get("table"):
                print("\n```\n" + r["table"] + "\n```")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--public", type=pathlib.Path, default=DEFAULT_PUBLIC)
    ap.add_argument("--no-tracer", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the tracer's quick subset only")
    ap.add_argument("--records", action="store_true", help="print every record")
    ap.add_argument("--stack-tags", type=pathlib.Path, default=DEFAULT_TAGS,
                    help="the stack tags applied to every plan (default validation/public-stack.json)")
    ap.add_argument("--no-stack-tags", action="store_true", help="score every plan as today's default stack")
    ap.add_argument("--no-run-tags", action="store_true",
                    help="score every record against the steady step, without validation/public-run.json")
    ap.add_argument("--no-data-tags", action="store_true",
                    help="score reserved / nvidia-smi records at fixed lengths, without validation/public-data.json")
    ap.add_argument("--no-corrections", action="store_true",
                    help="score the plans as published, without validation/public-corrections.json")
    args = ap.parse_args(argv)
    if args.public.exists():
        tags = None
        if not args.no_stack_tags and args.stack_tags.exists():
            from scripts.stack_tags import load_tags
            tags = load_tags(args.stack_tags)
        fixes = None
        if not args.no_corrections and DEFAULT_CORRECTIONS.exists():
            from scripts.plan_corrections import load_corrections
            fixes = load_corrections(DEFAULT_CORRECTIONS)
        runs = None
        if not args.no_run_tags and DEFAULT_RUN_TAGS.exists():
            from scripts.run_tags import load_tags as load_run_tags
            runs = load_run_tags(DEFAULT_RUN_TAGS)
        data = None
        if not args.no_data_tags and DEFAULT_DATA_TAGS.exists():
            from scripts.data_tags import load_tags as load_data_tags
            data = load_data_tags(DEFAULT_DATA_TAGS)
        run_public(args.public, args.records, tags, fixes, runs, data)
        if tags is not None:
            run_public_compare(args.public, tags, fixes)
        if runs is not None:
            run_public_run_compare(args.public, tags, fixes, runs)
        if data is not None:
            run_public_data_compare(args.public, tags, fixes, runs, data)
    else:
        print(f"no public validation set at {args.public}")
    if DEFAULT_REPO_RECORDS.exists():
        run_public(DEFAULT_REPO_RECORDS, args.records)
    from scripts.fidelity_throughput import run_throughput   # the step-time model against measured throughput
    run_throughput(records=args.records)
    if not args.no_tracer:
        run_tracer(args.quick, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
