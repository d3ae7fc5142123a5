"""python -m tools.memtrace PLAN.json [--json OUT.json] [--dump-saved] [--saved-table]
(torchtune plans: from .venv-torchtune; torchtitan plans: from .venv-torchtitan)

Traces one steady-state training step of a single-GPU plan-v1 on FakeTensors and prints the peak and
its breakdown; --json writes the full result (bytes), --dump-saved adds every saved tensor,
--saved-table prints them grouped by saving module (layers folded), op, dtype and shape.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.memtrace", description=__doc__.splitlines()[2])
    ap.add_argument("plan", help="plan-v1 JSON file ('-' for stdin)")
    ap.add_argument("--json", dest="json_out", help="write the result JSON here ('-' = stdout)")
    ap.add_argument("--dump-saved", action="store_true", help="include every saved tensor in the JSON")
    ap.add_argument("--saved-table", action="store_true",
                    help="print the saved tensors at forward end grouped by module, op, dtype and shape")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    plan = json.load(sys.stdin if a.plan == "-" else open(a.plan))
    from .report import table  # noqa: PLC0415
    if (plan.get("stack") or {}).get("trainer") == "torchtune":    # torchtune's own loop (.venv-torchtune)
        from .tune import trace_tune as trace  # noqa: PLC0415
    elif (plan.get("stack") or {}).get("trainer") == "torchtitan":  # torchtitan's own step (.venv-torchtitan)
        from .titan import trace_titan as trace  # noqa: PLC0415
    else:
        from .trace import trace  # noqa: PLC0415
    try:
        res = trace(plan, dump_saved=a.dump_saved or a.saved_table)
    except ValueError as e:      # unsupported plan feature or invalid plan: one line, no traceback
        print(f"memtrace: error: {e}", file=sys.stderr)
        return 2
    if a.json_out == "-":
        json.dump(res, sys.stdout, indent=1)
    else:
        print(table(res))
        if a.saved_table:
            from .dump import saved_summary  # noqa: PLC0415
            print(saved_summary(res["saved_tensors"]))
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
