"""What keeps a phase inside the GPU: the setting a user changes, with the value that fits where it is a number
(found by re-running that one phase over the setting, on the same resolved view)."""
from __future__ import annotations

from dataclasses import replace

from .evaluate import eval_phase
from .view import RunView

LABELS = {"load": "loading the model", "init": "the engine's set-up", "step": "the training step",
          "eval": "the first evaluation", "generate": "generation", "save": "the first checkpoint save",
          "resume": "the optimizer-state reload", "merge": "the merge at the end",
          "sync": "the weight sync to the generator", "score": "the scoring forwards"}


def _eval_fits(v: RunView, fits, **changes) -> bool:
    ph = eval_phase(replace(v, run=replace(v.run, eval=replace(v.run.eval, **changes))))
    return fits(ph)


def _largest(lo: int, hi: int, ok) -> int:
    """The largest n in [lo, hi] with ok(n) (ok falls with n), or 0."""
    if not ok(lo):
        return 0
    while hi > lo:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def phase_fix(v: RunView, name: str, fits) -> str:
    """The fix for phase ``name``; ``fits(Phase) -> bool`` says whether a phase fits (run/__init__.py)."""
    plan, r = v.plan, v.run
    hf = v.si.stack.trainer == "hf-trainer"
    if name == "eval" and r.eval is not None:
        ev = r.eval
        key = "per_device_eval_batch_size" if hf else "the eval batch size"
        first = ""
        if ev.logits == "accumulate":
            a = _largest(1, max(1, ev.accumulation_steps or 1 << 16), lambda a: _eval_fits(v, fits, accumulation_steps=a))
            if a:
                return f"set eval_accumulation_steps ≤ {a} (or preprocess_logits_for_metrics to keep argmax ids)"
            v = replace(v, run=replace(r, eval=replace(ev, accumulation_steps=1)))
            first = "set eval_accumulation_steps 1 and "
        b = _largest(1, ev.batch, lambda b: _eval_fits(v, fits, batch=b))
        return f"{first}set {key} ≤ {b}" if b else "evaluation does not fit even at batch 1: shorten the eval sequences"
    if name == "load":
        if plan.framework == "deepspeed" and plan.zero_stage == 3 and not r.zero_init:
            return ("build the model under deepspeed.zero.Init (create TrainingArguments with the DeepSpeed config "
                    "before from_pretrained)")
        return "load in 16 bits (dtype=bfloat16) or shard the model at load"
    if name == "save":
        if r.save and r.save.writer == "fsdp-full-no-offload":
            return "save a FULL_STATE_DICT offloaded to rank 0's CPU (offload_to_cpu, rank0_only) or a SHARDED_STATE_DICT"
        if r.save and r.save.writer == "zero3-16bit":
            return "set stage3_gather_16bit_weights_on_model_save false and convert with zero_to_fp32.py offline"
        return "save a sharded checkpoint"
    pt = plan.post_training
    if name == "generate" and pt is not None and pt.generator is not None and pt.generator.engine == "vllm":
        return "lower the generator's gpu_memory_utilization, or let vLLM sleep (vllm_enable_sleep_mode)"
    if name == "sync":
        return ("sync per layer or in batches (verl layered_summon, ms-swift move_model_batches), or let vLLM "
                "sleep until the sync")
    if name == "score":
        return "score in smaller chunks (a smaller log-prob micro-batch), or offload the reference"
    if name == "generate":
        return "set ds3_gather_for_generation=False, or generate with a smaller batch"
    if name == "resume":
        return "reload the optimizer states with more headroom, or skip load_best_model_at_end"
    if name == "merge":
        return "merge on the CPU after training (a separate process)"
    return ""
