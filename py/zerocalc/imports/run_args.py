"""The run's settings (plan-v1 Extension 5, ``run``) read from a trainer's own config: HF TrainingArguments / TRL
(eval_strategy, per_device_eval_batch_size, eval_accumulation_steps, eval_steps, save_strategy, save_steps,
save_only_model, load_best_model_at_end, resume_from_checkpoint, predict_with_generate,
generation_max_length), DeepSpeed's `stage3_gather_16bit_weights_on_model_save` and FSDP's `state_dict_type`.
A value that gives what the plan's trainer does by default is not written into the plan (run/defaults.py
resolves it the same way), so a config exported from a plan imports back to the same plan.
"""
from __future__ import annotations

from .builder import Builder, as_bool, as_int

NO_CHANGE = "the plan's default run does this already (run/defaults.py)"


def _strategy(v) -> str:
    return str(v).split(".")[-1].lower() if v is not None else "no"


def hf_run_settings(b: Builder, cfg: dict, take) -> None:
    """TrainingArguments' evaluation and save settings -> run.eval / run.save / run.load_best_at_end / run.resume."""
    key = "eval_strategy" if "eval_strategy" in cfg else "evaluation_strategy"
    strategy = take(key)
    bs, acc, steps = take("per_device_eval_batch_size"), take("eval_accumulation_steps"), take("eval_steps")
    gen, gen_len = take("predict_with_generate"), take("generation_max_length")
    if strategy is not None and _strategy(strategy) != "no":
        # transformers training_args.py: per_device_eval_batch_size defaults to 8, which run.eval.batch_size "auto" is
        b.set(key, "run.eval.batch_size", "auto" if bs is None else as_int("per_device_eval_batch_size", bs),
              default=bs is None)
        if acc is not None:
            b.set("eval_accumulation_steps", "run.eval.accumulation_steps", as_int("eval_accumulation_steps", acc))
        if isinstance(steps, (int, float)) and steps >= 1:
            b.set("eval_steps", "run.eval.every_steps", int(steps))
        if gen and as_bool("predict_with_generate", gen):
            b.set("predict_with_generate", "run.eval.generate.max_new_tokens",
                  as_int("generation_max_length", gen_len) if gen_len else 20)   # GenerationConfig max_length 20
    elif strategy is not None:
        b.set(key, "run.eval", None, default=True)
        for k, v in (("per_device_eval_batch_size", bs), ("eval_accumulation_steps", acc), ("eval_steps", steps),
                     ("predict_with_generate", gen), ("generation_max_length", gen_len)):
            if v is not None:
                b.skip(k, v, f"{key} is \"no\": no evaluation runs")
    else:
        for k, v in (("per_device_eval_batch_size", bs), ("eval_accumulation_steps", acc), ("eval_steps", steps),
                     ("predict_with_generate", gen), ("generation_max_length", gen_len)):
            if v is not None:
                b.skip(k, v, "eval_strategy is not set (\"no\"): no evaluation runs")
    save, only_model, save_steps = take("save_strategy"), take("save_only_model"), take("save_steps")
    if save is not None and _strategy(save) == "no":
        b.set("save_strategy", "run.save", None)
    else:
        if only_model is not None and as_bool("save_only_model", only_model):
            b.set("save_only_model", "run.save.optimizer", False)
        if isinstance(save_steps, (int, float)) and save_steps >= 1 and save is not None:
            b.set("save_steps", "run.save.every_steps", int(save_steps))
        elif save_steps is not None:
            b.skip("save_steps", save_steps, NO_CHANGE)
        if save is not None:
            b.skip("save_strategy", save, NO_CHANGE)
    best = take("load_best_model_at_end")
    if best is not None and as_bool("load_best_model_at_end", best):
        b.set("load_best_model_at_end", "run.load_best_at_end", True)
    elif best is not None:
        b.skip("load_best_model_at_end", best, NO_CHANGE)
    resume = take("resume_from_checkpoint")
    if resume:
        b.set("resume_from_checkpoint", "run.resume", True)
