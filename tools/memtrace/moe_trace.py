"""Traced steps of a MoE model with a shared expert beside the routed ones (Qwen2-MoE's default shapes, two
layers), for the CI check that the engine keeps both (memory/blocks.py llama_block; tests/test_moe_shared_blocks.py).

  python -m tools.memtrace.moe_trace > tests/data/moe_shared_trace.json     (about 1 min on 2 cores)

Each case keeps what tools/memtrace/compare.py compares (the peak's components, phase peaks, saved activations
at forward end) and the plan; the test re-runs the engine on the plan and requires every component and the
peak within compare.REL_TOL (3 %).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]


def plans() -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == "default:qwen2_moe")["config"]
    cfg = {k: v for k, v in cfg.items() if k != "layer_types"} | {"num_hidden_layers": 2}
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    return [("qwen2-moe-2l-full-s512", base),
            ("qwen2-moe-2l-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            ("qwen2-moe-2l-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256})]


def main() -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    cases = []
    for cid, plan in plans():
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op", "phase_peaks",
                                                                    "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.moe_trace", "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
