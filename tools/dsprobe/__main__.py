"""python -m tools.dsprobe PLAN.json [--json OUT] [--steps 3] [--seq-len 128] [--micro-batch 1]

Runs the plan on gpus_per_node*nodes CPU ranks with the real DeepSpeed engine and prints every named
buffer per rank, the busiest rank, and the model-state peak per phase. A plan whose model is a preset id
runs the small Llama of docs/deepspeed-cpu.md instead (say so in the output); give plan.model as an HF config
object to probe another small model.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.dsprobe", description=__doc__.split("\n\n")[1])
    ap.add_argument("plan", help="plan-v1 JSON file ('-' for stdin)")
    ap.add_argument("--json", help="also write the full result (every rank, every phase) to this file")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps (step 1 is warm-up)")
    ap.add_argument("--seq-len", type=int, default=128, help="tokens per sample (activations are not compared)")
    ap.add_argument("--micro-batch", type=int, default=1)
    a = ap.parse_args(argv)
    from .runner import run_spec
    from .report import text
    from .spec import SpecError, build_spec

    plan = json.load(sys.stdin if a.plan == "-" else open(a.plan))
    try:
        spec = build_spec(plan, steps=a.steps, seq_len=a.seq_len, micro_batch=a.micro_batch)
    except SpecError as e:
        print(f"dsprobe: {e}", file=sys.stderr)
        return 2
    res = run_spec(spec)
    print(text(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
