"""The refactoring guard: `estimate().to_dict()` of a few hundred plans, frozen in tests/data/golden_estimates.json.

    python scripts/golden.py            # (re)write the golden file from the current engine
    python scripts/golden.py --check    # compare the current engine with it (what tests/test_golden.py does)

Plans: the public validation set, the tracer grid, both probe grids, examples/, and 300 seeded random plans
over every plan-v1 value (invalid combinations skipped). A change that is meant to move figures rewrites the
file in the same commit and says why; a refactor must leave it untouched.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "py"), str(ROOT)]

from zerocalc import Plan, PlanError, estimate  # noqa: E402
from zerocalc import plan as P  # noqa: E402
from zerocalc.presets import GPUS  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden_estimates.json"
PUBLIC = (ROOT / "validation" / "public.json", ROOT.parent / "shared" / "validation" / "public.json")
N_RANDOM = 300
# The random plans draw from the reference's presets (data/reference/models.json), not the repository's own
# additions (data/presets/checkpoints.json), so adding a preset leaves the frozen plans as they are.
REF_MODELS = sorted(m["id"] for m in json.loads((ROOT / "data" / "reference" / "models.json").read_text())["models"])


def _random_plan(rng: random.Random) -> dict:
    method = rng.choice(P.METHODS)
    framework = rng.choice(P.FRAMEWORKS)
    gpn = 1 if framework == "single" else rng.choice((1, 2, 4, 8))
    nodes = 1 if framework == "single" else rng.choice((1, 1, 2, 16))
    stage = rng.choice((2, 3)) if framework == "fsdp" else rng.choice((0, 1, 2, 3))
    d = {"model": rng.choice(REF_MODELS), "gpu": rng.choice(sorted(GPUS)), "gpus_per_node": gpn,
         "nodes": nodes, "framework": framework, "zero_stage": stage, "precision": rng.choice(P.PRECISIONS),
         "optimizer": rng.choice(P.OPTIMIZERS), "micro_batch_size": rng.choice((1, 2, 4, 8)),
         "gradient_accumulation_steps": rng.choice((1, 4)), "seq_len": rng.choice((512, 2048, 4096, 8192)),
         "activation_checkpointing": rng.choice(P.CHECKPOINTING), "attention": rng.choice(P.ATTENTIONS),
         "loss": rng.choice(P.LOSSES), "method": method,
         "activation_offloading": rng.random() < 0.1, "optimizer_in_backward": rng.random() < 0.05}
    if framework in ("deepspeed", "fsdp") and rng.random() < 0.3:
        d["offload_optimizer"] = "cpu" if framework == "fsdp" else rng.choice(("cpu", "nvme"))
        if stage == 3 and rng.random() < 0.5:
            d["offload_params"] = d["offload_optimizer"] if framework == "fsdp" else rng.choice(("cpu", "nvme"))
        if framework == "fsdp":
            d["offload_params"] = "cpu"
    if framework == "deepspeed" and rng.random() < 0.4:
        d["deepspeed"] = {"reduce_bucket_size": rng.choice((5_000_000, 200_000_000, "auto")),
                          "overlap_comm": rng.random() < 0.5,
                          "stage3_prefetch_bucket_size": rng.choice((0, 50_000_000, "auto")),
                          "stage3_max_live_parameters": rng.choice((100_000_000, 1_000_000_000)),
                          "sub_group_size": rng.choice((100_000_000, 1_000_000_000)),
                          "zero_init": rng.random() < 0.8}
    if method != "full":
        d["lora"] = {"rank": rng.choice((8, 16, 64)), "alpha": 16, "dropout": rng.choice((0.0, 0.05)),
                     "targets": rng.choice((["q_proj", "v_proj"], list(P.LLAMA_TARGETS),
                                            list(P.LLAMA_TARGETS) + ["lm_head"]))}
    if method == "qlora":
        d["quantization"] = {"type": rng.choice(P.QUANT_TYPES), "double_quant": rng.random() < 0.5,
                             "compute_dtype": rng.choice(P.COMPUTE_DTYPES)}
    return d


def plans() -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    public = next((p for p in PUBLIC if p.exists()), None)
    if public is not None:
        out += [(f"public:{r['id']}", r["plan"]) for r in json.loads(public.read_text())]
    from tools.memtrace.grid import GRID
    out += [(f"trace:{g['id']}", {k: v for k, v in g.items() if k not in ("id", "quick")}) for g in GRID]
    from tools.dsprobe.grid import plans as ds_plans
    out += [(f"dsprobe:{n}", p) for n, p in ds_plans()]
    from tools.fsdpprobe.check import plans as fsdp_plans
    out += [(f"fsdpprobe:{n}", p) for n, p in fsdp_plans()]
    out += [(f"example:{f.stem}", json.loads(f.read_text())) for f in sorted((ROOT / "examples").glob("*.json"))]
    rng = random.Random(20261201)
    while sum(1 for k, _ in out if k.startswith("random:")) < N_RANDOM:
        d = _random_plan(rng)
        try:
            Plan.from_dict(d)
        except PlanError:
            continue
        out.append((f"random:{sum(1 for k, _ in out if k.startswith('random:'))}", d))
    return out


def subset_diff(want, got, path="") -> list[str]:
    """Where `got` differs from `want` on the keys `want` has (new keys in `got` are allowed)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for k, v in want.items():
            if k not in got:
                out.append(f"{path}{k}: missing")
            else:
                out += subset_diff(v, got[k], f"{path}{k}.")
        return out
    return [] if want == got else [f"{path.rstrip('.')}: {want!r} -> {got!r}"]


def compute(items) -> list[dict]:
    return [{"id": pid, "plan": p, "estimate": estimate(Plan.from_dict(p)).to_dict()} for pid, p in items]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        golden = json.loads(GOLDEN.read_text())
        bad = 0
        for g in golden:
            diff = subset_diff(g["estimate"], estimate(Plan.from_dict(g["plan"])).to_dict())
            if diff:
                bad += 1
                print(g["id"], "; ".join(diff[:4]))
        print(f"golden: {len(golden) - bad}/{len(golden)} plans identical")
        return 1 if bad else 0
    rows = compute(plans())
    GOLDEN.write_text(json.dumps(rows, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"golden: {len(rows)} plans -> {GOLDEN.relative_to(ROOT)} ({GOLDEN.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
