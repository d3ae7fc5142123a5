"""The whole-run grid: short real HF Trainer runs on fake tensors (tools/memtrace/run.py), one fixture each in
golden/run/<id>.json, which tests/test_run_trace_grid.py holds the engine's `run.phases` to (docs/tracer.md §10).

  python -m tools.memtrace.rungrid [--only ID,...] [--hf | --probes]   (make trace-run; minutes per run)
  python -m tools.memtrace.rungrid --recipes      in .venv-torchtune / .venv-litgpt: that trainer's RECIPES

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


# torchtune 0.6.1 / litgpt 0.5.13 single-device recipes (tools/memtrace/recipe_run.py; run in .venv-torchtune /
# .venv-litgpt): bf16, b 2, s 1024, a validation of 2 batches at the training batch after step 2, then a save
_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _recipe(rid, trainer, method, loss, run, b=2, s=1024):
    kw = {"lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": list(_TARGETS)}} if method == "lora" else {}
    return _p(rid, run, method=method, precision="bf16-pure", micro_batch_size=b, seq_len=s,
              activation_checkpointing="none", zero_stage=0, loss=loss, stack={"trainer": trainer}, **kw)


_VAL = {"every_steps": 2, "batch_size": "auto", "logits": "loss-only", "generate": None}
_VAL_LIT = {**_VAL, "generate": {"max_new_tokens": 100, "batch_size": 1}}
RECIPES = [
    _recipe("tt-l1b-full-chunked-s1024-b2-val", "torchtune", "full", "chunked", {"eval": _VAL, "save": SAVE}),
    _recipe("tt-l1b-lora-chunked-s1024-b2-val", "torchtune", "lora", "chunked", {"eval": _VAL, "save": SAVE}),
    # LitGPT's default eval: generate_example (batch 1, eval.max_new_tokens 100) after each validation
    _recipe("lit-l1b-full-s1024-b2-val", "litgpt", "full", "standard", {"eval": _VAL_LIT, "save": SAVE}),
    _recipe("lit-l1b-lora-s1024-b2-val", "litgpt", "lora", "standard", {"eval": _VAL_LIT, "save": SAVE}),
    # the same LoRA run at other shapes (kept-logits chunks of 31.3 and 125.2 MiB): where the validation's fresh
    # segments come from (run/evaluate.py litgpt_fresh_segments)
    _recipe("lit-l1b-lora-s2048-b1-val", "litgpt", "lora", "standard", {"eval": _VAL_LIT, "save": SAVE}, b=1, s=2048),
    _recipe("lit-l1b-lora-s512-b4-val", "litgpt", "lora", "standard", {"eval": _VAL_LIT, "save": SAVE}, b=4, s=512),
]


def recipe_run(e: dict) -> dict:
    from .recipe_run import trace_lit_run, trace_tune_run  # noqa: PLC0415
    trainer = e["plan"]["stack"]["trainer"]
    return slim((trace_tune_run if trainer == "torchtune" else trace_lit_run)(e["plan"]))


def _venv_trainer() -> str | None:
    import importlib.util  # noqa: PLC0415
    return next((t for t in ("torchtune", "litgpt") if importlib.util.find_spec(t)), None)


# the probes' whole runs on 2 CPU ranks (tools/dsprobe, tools/fsdpprobe with a `run` block): the small Llama of
# docs/deepspeed-cpu.md (P = 6,965,504), given as an HF config so the engine estimates the same model
def _small():
    from tools.dsprobe.spec import SMALL_LLAMA  # noqa: PLC0415
    return {"name": "small-llama", **SMALL_LLAMA}


_PROBE = {"schema": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "nodes": 1, "precision": "bf16-mixed",
          "optimizer": "adamw", "micro_batch_size": 1, "gradient_accumulation_steps": 1, "seq_len": 64,
          "activation_checkpointing": "none", "attention": "flash"}


def _probe(rid, framework, run, **kw):
    return {"id": rid, "probe": framework, "plan": {**_PROBE, "model": None, "framework": framework, **kw,
                                                    "run": run}}


PROBES = [
    _probe("fsdp-small-full-offload", "fsdp", {"eval": None, "save": {"weights": "fsdp-full", "optimizer": False}},
           zero_stage=3),
    _probe("fsdp-small-full-no-offload", "fsdp",
           {"eval": None, "save": {"weights": "fsdp-full-no-offload", "optimizer": False}}, zero_stage=3),
    _probe("fsdp-small-sharded", "fsdp", {"eval": None, "save": {"weights": "fsdp-sharded", "optimizer": False}},
           zero_stage=3),
    _probe("ds-z3-small-no-zero-init", "deepspeed",
           {"eval": None, "save": {"weights": "zero3-16bit", "optimizer": True}, "load": {"zero_init": False}},
           zero_stage=3, deepspeed={"zero_init": False}),
    _probe("ds-z3-small-zero-init", "deepspeed",
           {"eval": None, "save": {"weights": "zero3-16bit", "optimizer": True}, "load": {"zero_init": True}},
           zero_stage=3, deepspeed={"zero_init": True}),
]


def probe_run(e: dict) -> dict:
    """Run a probe entry; the fixture keeps per run phase the busiest rank's live-storage peak (no allocator
    replay on real CPU storages: reserved is null) and host bytes, and every rank's figures."""
    plan = {**e["plan"], "model": _small()}
    if e["probe"] == "deepspeed":
        from tools.dsprobe.runner import run_spec  # noqa: PLC0415
        from tools.dsprobe.spec import build_spec  # noqa: PLC0415
        res = run_spec(build_spec(plan, steps=2, seq_len=plan["seq_len"], micro_batch=plan["micro_batch_size"]))
    else:
        from tools.fsdpprobe.runner import run_spec  # noqa: PLC0415
        from tools.fsdpprobe.spec import build_spec  # noqa: PLC0415
        res = run_spec(build_spec(plan, steps=2))
    ranks = [r["run_phases"] for r in res["ranks"]]
    phases = {}
    for name in ranks[0]:
        per = [r.get(name, {}) for r in ranks]
        phases[name] = {"peak_bytes": max(p.get("peak_bytes", 0) for p in per),
                        "peak_allocated_bytes": max(p.get("peak_bytes", 0) for p in per),
                        "peak_reserved_bytes": None, "end_reserved_bytes": None,
                        "start_bytes": max(p.get("start_bytes", 0) for p in per),
                        "end_bytes": max(p.get("end_bytes", 0) for p in per),
                        "host_bytes": max(p.get("host_bytes", 0) for p in per),
                        "ranks": per}
    import torch  # noqa: PLC0415
    return {"plan": plan, "probe": e["probe"], "phases": phases,
            "peak_run_phase": max(phases, key=lambda k: phases[k]["peak_bytes"]), "wall_s": res["wall_s"],
            "versions": {"torch": torch.__version__}}


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
    os.makedirs(OUT, exist_ok=True)
    if "--recipes" in argv:
        here = _venv_trainer()
        entries = [e for e in RECIPES if e["plan"]["stack"]["trainer"] == here]
    else:
        entries = RUNS + PROBES
    for e in entries:
        if only and e["id"] not in only:
            continue
        if "--probes" in argv and "probe" not in e or "--hf" in argv and "probe" in e:
            continue
        if "stack" in e["plan"]:
            res = recipe_run(e)
        elif "probe" in e:
            res = probe_run(e)
        else:
            from .run import trace_run  # noqa: PLC0415
            res = slim(trace_run(e["plan"]))
        with open(os.path.join(OUT, e["id"] + ".json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
        pk = {k: round(v["peak_bytes"] / 2**30, 3) for k, v in res["phases"].items()}
        print(e["id"], pk, res.get("seconds", res.get("wall_s")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
