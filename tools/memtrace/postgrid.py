"""The post-training grid: TRL's real DPO and KTO steps and GRPO update step on fake tensors
(tools/memtrace/post.py), one fixture each in golden/post/<id>.json, which tests/test_post_trace.py holds
(docs/tracer.md §11).

  .venv-trl/bin/python -m tools.memtrace.postgrid [--only ID,...]        (make trace-post; about a minute a trace)

TRL is not in the shared venv: .venv-trl is made by `make .venv-trl/.ok` (tools/memtrace/requirements-trl.txt).
Each id carries the TRL version that wrote it (`trl116`, `trl114`; `trl017`, `trl018`, `trl019` from the 0.x
wheels unpacked first on the path, tools/memtrace/trl0.py): the fixture keeps the plan with its
Extension 7 `post_training` block, per phase (`step`, `score`) the traced peak of live storages, the allocator
replay's `peak_allocated_bytes` / `peak_reserved_bytes`, the components at the peak, what is resident before the
step (`resident`), the versions and the command.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "post")

_BASE = {"schema": 1, "model": "llama-3.2-1b", "gpu": "h100-sxm-80gb", "gpus_per_node": 1, "nodes": 1,
         "framework": "single", "optimizer": "adamw", "gradient_accumulation_steps": 1, "attention": "flash",
         "precision": "bf16-mixed", "activation_checkpointing": "none"}


def _p(rid, post, **kw):
    """run.load.dtype says what the trace built: full fine-tuning in TRL's default fp32 (model_init_kwargs without
    dtype), LoRA on a base loaded in bf16 (a model passed with dtype=bfloat16)."""
    load = {"dtype": "fp32" if kw["method"] == "full" else "bf16"}
    return {"id": rid, "plan": {**_BASE, **kw, "run": {"load": load},
                                "post_training": {"trainer": "trl", "reference": "auto", **post}}}


# DPO: B = 1 pair -> 2 rows of 256 prompt + 256 completion tokens; full FT keeps TRL's default fp32 weights
# (model_init_kwargs dtype float32) with bf16 autocast, and an fp32 reference replica; LoRA disables the adapter
DPO = {"method": "dpo", "prompt_len": 256, "completion_len": 256, "num_generations": 1}
# GRPO: 4 completions of one prompt per device (num_generations 4 = per_device_train_batch_size) with a reference
# (the trainer runs beta 0.04; TRL's default beta 0.0 loads none): a full-model replica, or the adapter disabled
# KTO: B = 2 unpaired examples, one desirable, one not (KTOTrainer refuses B = 1 when it estimates the KL term)
# -> 2 trained rows and 2 mismatched KL rows of 32 + 480 tokens; the same models as DPO (fp32 full policy + fp32
# reference, or LoRA). A fake batch's completion_mask has no values, so boolean indexing by it selects all s - 1
# positions (PostTracker): a short prompt keeps that near the C positions a real mask selects (TRL < 1.15's
# `chosen_logits[chosen_mask.bool()]`)
KTO = {"method": "kto", "prompt_len": 32, "completion_len": 480, "num_generations": 1}
GRPO = {"method": "grpo", "prompt_len": 128, "completion_len": 384, "num_generations": 4}
RUNS = [
    _p("dpo-l1b-full-s512", DPO, method="full", micro_batch_size=1, seq_len=512),
    _p("dpo-l1b-lora-s512", DPO, method="lora", micro_batch_size=1, seq_len=512),
    _p("kto-l1b-full-b2-s512", KTO, method="full", micro_batch_size=2, seq_len=512),
    _p("kto-l1b-lora-b2-s512", KTO, method="lora", micro_batch_size=2, seq_len=512),
    # KTOConfig's own default (1.16 base_config.py: gradient_checkpointing True): checkpointed layers
    _p("kto-l1b-full-b2-s512-ckpt", KTO, method="full", micro_batch_size=2, seq_len=512,
       activation_checkpointing="full"),
    _p("kto-l1b-lora-b2-s512-ckpt", KTO, method="lora", micro_batch_size=2, seq_len=512,
       activation_checkpointing="full"),
    _p("grpo-l1b-full-g4-s512", {**GRPO, "reference": "model"}, method="full", micro_batch_size=4, seq_len=512),
    _p("grpo-l1b-lora-g4-s512", {**GRPO, "reference": "adapter-disabled"}, method="lora", micro_batch_size=4,
       seq_len=512),
    # two micro-steps per generation (GRPOConfig steps_per_generation defaults to GA from 0.18): 8 completions
    # scored, 4 per update (traced for TRL 0.x only: 0.19's reference pass takes no batch_size; post.py gives
    # 1.x's GRPOConfig generation_batch_size = B, one micro-step per generation)
    {**_p("grpo-l1b-full-g4-ga2-s512", {**GRPO, "reference": "model"}, method="full", micro_batch_size=4,
          seq_len=512, gradient_accumulation_steps=2), "trl": "0."},
]


def _tag() -> str:
    import trl  # noqa: PLC0415
    major, minor = trl.__version__.split(".")[:2]
    return f"trl{major}{minor}"


def main(argv=None) -> int:
    import warnings  # noqa: PLC0415
    warnings.filterwarnings("ignore")
    argv = list(sys.argv[1:] if argv is None else argv)
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None
    os.makedirs(OUT, exist_ok=True)
    from .post import trace_post  # noqa: PLC0415
    tag = _tag()
    for e in RUNS:
        rid = f"{e['id']}-{tag}"
        if only and e["id"] not in only and rid not in only:
            continue
        import trl  # noqa: PLC0415
        if not trl.__version__.startswith(e.get("trl", "")):
            continue
        import trl  # noqa: PLC0415
        e = {**e, "plan": {**e["plan"], "post_training": {**e["plan"]["post_training"], "trainer_version": trl.__version__}}}
        res = trace_post(e)
        res["id"] = rid
        res["command"] = f"python -m tools.memtrace.postgrid --only {e['id']}  (from a venv with trl=={res['versions']['trl']})"
        with open(os.path.join(OUT, rid + ".json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
        pk = {k: round(v["peak_bytes"] / 2**30, 3) for k, v in res["phases"].items()}
        print(rid, pk, res["seconds"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
