"""Step-time model vs measured training throughput (validation/throughput.json).

    python scripts/fidelity_throughput.py [--records] [PATH]

``run_throughput(path)`` prints a markdown table: per source the rows, median and p90 |error| and the
bias (median signed error) of predicted tokens/s per GPU against the measured figure, and the overall
figures with every source weighted equally (each row weighs 1 / rows of its source). Error =
predicted / measured - 1. Nothing is tuned per row: the efficiencies are the published ones in
py/zerocalc/step/rates.py.
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from zerocalc import Plan, estimate  # noqa: E402

DEFAULT = ROOT / "validation" / "throughput.json"


def _wquantile(pairs, q: float) -> float:
    """Weighted quantile of (value, weight) pairs (lower value at ties)."""
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return pairs[-1][0]


def predictions(path=DEFAULT) -> list[dict]:
    rows = json.loads(pathlib.Path(path).read_text())
    out = []
    for r in rows:
        est = estimate(Plan.from_dict(r["plan"]), search_min_gpus=False)
        pred = est.step.tokens_per_s_per_gpu
        meas = float(r["measured_tokens_per_s_per_gpu"])
        out.append({"id": r["id"], "source": r["source"], "measured": meas, "predicted": pred,
                    "error": pred / meas - 1, "mfu": est.step.mfu, "classes": classes(r["plan"])})
    return out


def classes(plan: dict) -> list[str]:
    """The classes issue 23 scores: LoRA / QLoRA, full activation checkpointing, steps under 4k tokens per GPU."""
    out = []
    if plan.get("method", "full") in ("lora", "qlora"):
        out.append("LoRA / QLoRA")
    if plan.get("activation_checkpointing") == "full":
        out.append("checkpointed (full)")
    if plan["micro_batch_size"] * plan["seq_len"] * plan.get("gradient_accumulation_steps", 1) < 4096:
        out.append("under 4k tokens per step")
    return out


def run_throughput(path=DEFAULT, records: bool = False) -> dict:
    """Print the accuracy table; return the overall figures."""
    preds = predictions(path)
    by: dict = {}
    for p in preds:
        by.setdefault(p["source"], []).append(p)
    print("### Step time vs measured throughput (validation/throughput.json)\n")
    print("| source | rows | median abs error | p90 abs error | bias (median error) |")
    print("|---|---:|---:|---:|---:|")
    weighted_abs, weighted = [], []
    for src, ps in by.items():
        w = 1 / len(ps)
        a = [(abs(p["error"]), 1) for p in ps]
        e = [(p["error"], 1) for p in ps]
        weighted_abs += [(abs(p["error"]), w) for p in ps]
        weighted += [(p["error"], w) for p in ps]
        print(f"| {src} | {len(ps)} | {100 * _wquantile(a, .5):.1f} % | {100 * _wquantile(a, .9):.1f} % | "
              f"{100 * _wquantile(e, .5):+.1f} % |")
    med, p90, bias = _wquantile(weighted_abs, .5), _wquantile(weighted_abs, .9), _wquantile(weighted, .5)
    print(f"| **all, sources weighted equally** | {len(preds)} | **{100 * med:.1f} %** | {100 * p90:.1f} % | "
          f"{100 * bias:+.1f} % |")
    print("\n| class | rows | median abs error (sources weighted equally) | bias |")
    print("|---|---:|---:|---:|")
    for cls in ("LoRA / QLoRA", "checkpointed (full)", "under 4k tokens per step"):
        ps = [p for p in preds if cls in p["classes"]]
        n_src: dict = {}
        for p in ps:
            n_src[p["source"]] = n_src.get(p["source"], 0) + 1
        if ps:
            wa = [(abs(p["error"]), 1 / n_src[p["source"]]) for p in ps]
            we = [(p["error"], 1 / n_src[p["source"]]) for p in ps]
            print(f"| {cls} | {len(ps)} | {100 * _wquantile(wa, .5):.1f} % | {100 * _wquantile(we, .5):+.1f} % |")
    if records:
        print("\n| id | measured tok/s/GPU | predicted | error |")
        print("|---|---:|---:|---:|")
        for p in preds:
            print(f"| {p['id']} | {p['measured']:,.0f} | {p['predicted']:,.0f} | {100 * p['error']:+.1f} % |")
    return {"median_abs_error": med, "p90_abs_error": p90, "bias": bias, "rows": len(preds), "sources": len(by)}


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    run_throughput(args[0] if args else DEFAULT, records="--records" in sys.argv)
