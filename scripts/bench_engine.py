"""Benchmark: how long estimate() takes in this Python (a script, not a timed test).

    python scripts/bench_engine.py [--repeat 200]

Prints the median and p90 per plan and over all plans. Budget: median <= 1 ms in CPython.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "py"))

from zerocalc import Plan, estimate  # noqa: E402

PLANS = {
    "default (8B ZeRO-2, 4 GPUs)": {},
    "8B ZeRO-3 + offload": {"zero_stage": 3, "offload_optimizer": "cpu", "offload_params": "cpu"},
    "70B ZeRO-3, 2x8 GPUs": {"model": "llama-3.1-70b", "zero_stage": 3, "gpus_per_node": 8, "nodes": 2,
                             "activation_checkpointing": "full"},
    "8B QLoRA single": {"framework": "single", "gpus_per_node": 1, "method": "qlora",
                        "activation_checkpointing": "full"},
    "Mixtral FSDP LoRA": {"model": "mixtral-8x7b", "framework": "fsdp", "zero_stage": 3, "gpus_per_node": 8,
                          "method": "lora"},
    "DeepSeek-V3 ZeRO-3, 32x8": {"model": "deepseek-v3", "zero_stage": 3, "gpus_per_node": 8, "nodes": 32},
}


def bench(plan: Plan, repeat: int) -> list[float]:
    estimate(plan)                                    # warm the preset cache
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        estimate(plan)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, {args.repeat} runs per plan; times in ms")
    print(f"{'plan':<30}{'median':>9}{'p90':>9}")
    every = []
    for name, d in PLANS.items():
        ts = bench(Plan.from_dict(d), args.repeat)
        every += ts
        ts.sort()
        print(f"{name:<30}{statistics.median(ts):9.3f}{ts[int(0.9 * (len(ts) - 1))]:9.3f}")
    every.sort()
    print(f"{'all plans':<30}{statistics.median(every):9.3f}{every[int(0.9 * (len(every) - 1))]:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
