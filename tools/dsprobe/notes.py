"""python -m tools.dsprobe.notes GRID.json  -> markdown tables of measured buffers per config and rank,
with the allocation-site formula's value (formulas.py) next to each, for a results note (markdown)."""
from __future__ import annotations

import json
import sys

from .formulas import expected
from .report import busiest, phase_peaks


def config_md(name: str, res: dict) -> str:
    spec = res["spec"]
    ranks = res["ranks"]
    params = ranks[0]["params"]
    try:
        exp = expected(spec, [tuple(x) for x in params])
    except NotImplementedError:
        exp = None
    z = {k: v for k, v in spec["ds_config"]["zero_optimization"].items() if k != "stage"}
    lines = [f"### {name}", "",
             f"stage {spec['stage']}, N={spec['world']}, {spec['precision']}, {spec['method']}, "
             f"offload_optimizer={spec['offload_optimizer']}, offload_params={spec['offload_params']}, "
             f"zero_init={spec['zero_init']}; zero_optimization {json.dumps(z)}; wrapper `{ranks[0]['wrapper']}`; "
             f"wall {res['wall_s']} s", "",
             "| buffer | where | " + " | ".join(f"rank {r['rank']}" for r in ranks) + " | busiest | formula (busiest) | match |",
             "|---|---|" + "---|" * len(ranks) + "---|---|---|"]
    for n, b in busiest(res).items():
        f = None if exp is None else max((e.get(n) for e in exp if e.get(n) is not None), default=None)
        per_f = None if exp is None else [e.get(n) for e in exp]
        match = "" if f is None else ("exact" if per_f == b["per_rank"] else
                                      ("busiest" if f == b["bytes"] else f"{b['bytes'] - f:+,d}"))
        lines.append(f"| {n} | {b['placement']} | " + " | ".join(f"{v:,}" for v in b["per_rank"])
                     + f" | {b['bytes']:,} (r{b['rank']}) | {'' if f is None else format(f, ',')} | {match} |")
    lines += ["", "model-state peak per phase (busiest rank):", ""]
    for ph, p in phase_peaks(res).items():
        parts = ", ".join(f"{k} {v:,}" for k, v in sorted(p["breakdown"].items(), key=lambda kv: -kv[1]))
        lines.append(f"* {ph}: **{p['model_state']:,}** (rank {p['rank']}): {parts}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = argv or sys.argv[1:]
    grid = json.load(open(argv[0]))
    for name, o in grid.items():
        print(config_md(name, o["result"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
