"""The whole-run grid: short real HF Trainer runs on fake tensors (tools/memtrace/run.py), one fixture each in
golden/run/<id>.json, which tests/test_run_trace_grid.py holds the engine's `run.phases` to (docs/tracer.md §9).

  python -m tools.memtrace.rungrid [--only ID,...]     (make trace-run; a few minutes per run on 2 cores)

Every plan is a plan-v1 dict with its Extension 5 `run` block; a fixture keeps the plan, per run phase the
traced peak of live storages (`peak_bytes`, = max_memory_allocated to 0.1 %), the allocator replay's
`peak_allocated_bytes` / `peak_reserved_bytes` / `end_reserved_bytes`, the host bytes and the components at
the phase's peak, plus the versions that ran.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "run")

_BASE = {"schema": 1, "model": "llama-3.2-1b", "gpu": "h100-sxm-80gb", "gpus_per_node": 1, "nodes": 1,
         "framework": "single", "optimizer": "adamw", "gradient_accumulation_steps": 1, "attention": "flash"}


def _p(rid, run, **kw):
    return {"id": rid, "plan": {**_BASE, **kw, "run": run}}


SAVE = {"every_steps": 500, "weights": "auto", "optimizer": True}
RUNS = [
    # full fine-tune, pure bf16: eval at HF's default batch 8, loss only (prediction_loss_only)
    _p("l1b-full-pure-s512-eval-loss",
       {"eval": {"every_steps": 500, "batch_size": "auto", "logits": "loss-only"}, "save": SAVE},
       precision="bf16-pure", micro_batch_size=1, seq_len=512, activation_checkpointing="none"),
    # the same with compute_metrics: evaluation_loop keeps and concatenates the logits of 16 samples
    _p("l1b-full-pure-s512-eval-accumulate",
       {"eval": {"every_steps": 500, "batch_size": "auto", "logits": "accumulate", "samples": 16}, "save": SAVE},
       precision="bf16-pure", micro_batch_size=1, seq_len=512, activation_checkpointing="none"),
    # LoRA (peft defaults, fp32 adapters) under bf16 autocast with checkpointing: the eval logits dwarf the step
    _p("l1b-lora-mixed-gc-s1024-eval-loss",
       {"eval": {"every_steps": 500, "batch_size": "auto", "logits": "loss-only"}, "save": SAVE},
       method="lora", precision="bf16-mixed", micro_batch_size=1, seq_len=1024, activation_checkpointing="full"),
]


def slim(res: dict) -> dict:
    keep = ("peak_bytes", "start_bytes", "end_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
            "end_reserved_bytes", "host_bytes", "host_copies")
    phases = {}
    for name, ph in res["phases"].items():
        d = {k: ph[k] for k in keep}
        d["components"] = ph["peak"]["components"]
        d["at"] = {"step_phase": ph["peak"]["phase"], "op": ph["peak"]["op"]}
        phases[name] = d
    return {"plan": res["plan"], "eval_batch_sizes": res["eval_batch_sizes"], "phases": phases,
            "peak_run_phase": res["peak_run_phase"], "trainable_params": res["trainable_params"],
            "allocator": res["allocator"], "versions": res["versions"], "seconds": res["seconds"]}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = None
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
    from .run import trace_run  # noqa: PLC0415
    os.makedirs(OUT, exist_ok=True)
    for e in RUNS:
        if only and e["id"] not in only:
            continue
        res = slim(trace_run(e["plan"]))
        with open(os.path.join(OUT, e["id"] + ".json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
        pk = {k: round(v["peak_bytes"] / 2**30, 3) for k, v in res["phases"].items()}
        print(e["id"], pk, res["seconds"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
