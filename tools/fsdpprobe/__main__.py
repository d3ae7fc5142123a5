"""python -m tools.fsdpprobe PLAN.json [--json OUT] [--steps 3]

Runs the plan on gpus_per_node*nodes CPU ranks with real FSDP (as accelerate wraps it) and prints, per
rank, the peak bytes during forward, backward and the optimizer step of a steady step, next to
zerocalc's allocated bytes per phase for the same plan. The model must be a small HF config object.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fsdpprobe", description=__doc__.split("\n\n")[1])
    ap.add_argument("plan", help="plan-v1 JSON file ('-' for stdin)")
    ap.add_argument("--json", help="also write the full result to this file")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps (the last but one is reported)")
    a = ap.parse_args(argv)
    from .check import compare
    from .runner import run_spec
    from .spec import SpecError, build_spec

    plan = json.load(sys.stdin if a.plan == "-" else open(a.plan))
    try:
        spec = build_spec(plan, steps=a.steps)
    except SpecError as e:
        print(f"fsdpprobe: {e}", file=sys.stderr)
        return 2
    res = run_spec(spec)
    mb = 1e6
    for r in res["ranks"]:
        print(f"rank {r['rank']}: " + "  ".join(f"{ph} peak {v['peak'] / mb:.2f} MB" for ph, v in r["phases"].items()))
    c = compare(plan, res)
    print("zerocalc (allocated, minus the cuBLAS workspace): "
          + "  ".join(f"{k} {v / mb:.2f} MB" for k, v in c["engine"].items()))
    print(f"step {c['step_dev']:+.2%}  peak {c['peak_dev']:+.2%}  ({'within' if c['ok'] else 'outside'} tolerance)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**res, "compare": {k: v for k, v in c.items() if k != "engine"}}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
