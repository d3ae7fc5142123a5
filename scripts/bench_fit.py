"""How many estimate() calls' time one fit() costs (the budget is 100).

    python scripts/bench_fit.py [--plan FILE] [--runs 15]

Times the median of ``fit(plan)`` against the median of ``estimate(plan)`` (with its min_gpus search, as
`zerocalc estimate` runs it) in the same process, and prints both and the ratio.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from zerocalc import Plan, estimate, fit  # noqa: E402


def _median(fn, runs: int) -> float:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", default=str(ROOT / "examples" / "default-plan.json"))
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    plan = Plan.from_dict(json.loads(pathlib.Path(a.plan).read_text()))
    fit(plan)
    est = _median(lambda: estimate(plan), a.runs)
    f = _median(lambda: fit(plan), a.runs)
    calls = fit(plan).estimates
    ratio = f / est
    print(f"estimate(): {1000 * est:.2f} ms   fit(): {1000 * f:.2f} ms   = {ratio:.1f} estimate() calls' time "
          f"({calls} estimates made)   budget 100: {'ok' if ratio <= 100 else 'OVER'}")
    return 0 if ratio <= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
