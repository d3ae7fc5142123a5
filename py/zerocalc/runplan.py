"""What the run does besides its steady steps (contract plan-v1, Extension 5: ``run``): the keys, their
parsing and serialisation. A key the plan omits takes the trainer's default, resolved by the engine
(zerocalc/run/defaults.py); here an omitted ``eval`` or ``save`` stays ``DEFAULT`` so that a plan without
``run`` round-trips unchanged. Nothing here knows about memory."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .errors import PlanError
from .values import check_bool, check_choice, check_int, check_mapping, reject_unknown, show

DEFAULT = "default"          # the key was not given: the trainer's default applies
EVAL_LOGITS = ("loss-only", "accumulate", "argmax")
SAVE_WEIGHTS = ("auto", "zero3-16bit", "zero3-partitions", "fsdp-full", "fsdp-full-no-offload", "fsdp-sharded",
                "dcp", "adapter-only")
LOAD_DTYPES = ("auto", "fp32", "bf16", "fp16")
MERGES = ("none", "peft", "16bit-in-process")
MAX_STEPS = 1 << 30
MAX_BATCH = 65536
MAX_LEN = 1 << 24


@dataclass(frozen=True)
class GenerateSettings:
    max_new_tokens: int = 256
    batch_size: Any = "auto"             # int, or auto = the eval batch


@dataclass(frozen=True)
class EvalSettings:
    every_steps: Any = None              # int or None (the trainer's cadence; memory does not depend on it)
    batch_size: Any = "auto"             # int, or auto = the trainer's default
    seq_len: Any = None                  # int, or None = the plan's seq_len
    logits: str = "loss-only"
    samples: Any = None                  # int, or None (accumulate: one eval batch is kept)
    accumulation_steps: Any = None       # int, or None (HF eval_accumulation_steps unset)
    generate: Any = None                 # GenerateSettings or None


@dataclass(frozen=True)
class SaveSettings:
    every_steps: Any = None
    weights: str = "auto"
    optimizer: bool = True


@dataclass(frozen=True)
class LoadSettings:
    dtype: str = "auto"
    zero_init: Any = "auto"
    on_device_build: Any = "auto"        # auto, true, false: the whole model built on each GPU before FSDP wraps it


@dataclass(frozen=True)
class RunSettings:
    """The plan's ``run`` block. ``eval`` / ``save``: DEFAULT (not given), None (none) or their settings."""
    eval: Any = DEFAULT
    save: Any = DEFAULT
    load: LoadSettings = LoadSettings()
    resume: bool = False
    load_best_at_end: bool = False
    merge_at_end: str = "none"


def _opt_int(key: str, v: Any, lo: int, hi: int) -> Any:
    return None if v is None else check_int(key, v, lo, hi)


def _int_or_auto(key: str, v: Any, lo: int, hi: int) -> Any:
    if isinstance(v, str) and v == "auto":
        return "auto"
    if isinstance(v, str):
        raise PlanError(key, f"must be an integer from {lo} to {hi} or \"auto\", got {show(v)}")
    return check_int(key, v, lo, hi)


def _parse_generate(v: Any) -> Any:
    if v is None:
        return None
    obj = check_mapping("run.eval.generate", v)
    reject_unknown("run.eval.generate", obj, ("max_new_tokens", "batch_size"))
    d = GenerateSettings()
    return GenerateSettings(
        max_new_tokens=check_int("run.eval.generate.max_new_tokens", obj.get("max_new_tokens", d.max_new_tokens),
                                 1, MAX_LEN),
        batch_size=_int_or_auto("run.eval.generate.batch_size", obj.get("batch_size", d.batch_size), 1, MAX_BATCH))


def _parse_eval(v: Any) -> Any:
    if v is None:
        return None
    obj = check_mapping("run.eval", v)
    reject_unknown("run.eval", obj, tuple(f.name for f in fields(EvalSettings)))
    d = EvalSettings()
    return EvalSettings(
        every_steps=_opt_int("run.eval.every_steps", obj.get("every_steps"), 1, MAX_STEPS),
        batch_size=_int_or_auto("run.eval.batch_size", obj.get("batch_size", d.batch_size), 1, MAX_BATCH),
        seq_len=_opt_int("run.eval.seq_len", obj.get("seq_len"), 1, MAX_LEN),
        logits=check_choice("run.eval.logits", obj.get("logits", d.logits), EVAL_LOGITS),
        samples=_opt_int("run.eval.samples", obj.get("samples"), 1, 1 << 32),
        accumulation_steps=_opt_int("run.eval.accumulation_steps", obj.get("accumulation_steps"), 1, MAX_STEPS),
        generate=_parse_generate(obj.get("generate")))


def _parse_save(v: Any) -> Any:
    if v is None:
        return None
    obj = check_mapping("run.save", v)
    reject_unknown("run.save", obj, ("every_steps", "weights", "optimizer"))
    d = SaveSettings()
    return SaveSettings(every_steps=_opt_int("run.save.every_steps", obj.get("every_steps"), 1, MAX_STEPS),
                        weights=check_choice("run.save.weights", obj.get("weights", d.weights), SAVE_WEIGHTS),
                        optimizer=check_bool("run.save.optimizer", obj.get("optimizer", d.optimizer)))


def _auto_or_bool(key: str, v: Any) -> Any:
    if isinstance(v, str) and v == "auto":
        return v
    if not isinstance(v, bool):
        raise PlanError(key, f"must be \"auto\", true or false, got {show(v)}")
    return v


def _parse_load(v: Any) -> LoadSettings:
    obj = check_mapping("run.load", v)
    reject_unknown("run.load", obj, ("dtype", "zero_init", "on_device_build"))
    d = LoadSettings()
    return LoadSettings(dtype=check_choice("run.load.dtype", obj.get("dtype", d.dtype), LOAD_DTYPES),
                        zero_init=_auto_or_bool("run.load.zero_init", obj.get("zero_init", d.zero_init)),
                        on_device_build=_auto_or_bool("run.load.on_device_build",
                                                      obj.get("on_device_build", d.on_device_build)))


def parse_run(value: Any) -> RunSettings:
    """plan-v1 ``run`` mapping -> RunSettings; PlanError names the dotted key (``run.eval.batch_size``)."""
    obj = check_mapping("run", value)
    reject_unknown("run", obj, tuple(f.name for f in fields(RunSettings)))
    d = RunSettings()
    return RunSettings(
        eval=_parse_eval(obj["eval"]) if "eval" in obj else DEFAULT,
        save=_parse_save(obj["save"]) if "save" in obj else DEFAULT,
        load=_parse_load(obj.get("load", {})),
        resume=check_bool("run.resume", obj.get("resume", d.resume)),
        load_best_at_end=check_bool("run.load_best_at_end", obj.get("load_best_at_end", d.load_best_at_end)),
        merge_at_end=check_choice("run.merge_at_end", obj.get("merge_at_end", d.merge_at_end), MERGES))


def _as_dict(obj: Any) -> Any:
    if obj is None:
        return None
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = _as_dict(v) if isinstance(v, GenerateSettings) else v
    return out


def run_to_dict(run: RunSettings) -> dict:
    """RunSettings -> the plan's ``run`` object; keys left to the trainer's default are omitted, so
    ``parse_run(run_to_dict(r)) == r``."""
    out: dict = {}
    if run.eval != DEFAULT:
        out["eval"] = _as_dict(run.eval)
    if run.save != DEFAULT:
        out["save"] = _as_dict(run.save)
    if run.load != LoadSettings():
        # a key added later to run.load is omitted at "auto", so plans that state the others serialise as before
        out["load"] = {k: v for k, v in _as_dict(run.load).items() if k != "on_device_build" or v != "auto"}
    for k in ("resume", "load_best_at_end", "merge_at_end"):
        if getattr(run, k) != getattr(RunSettings(), k):
            out[k] = getattr(run, k)
    return out


__all__ = ["RunSettings", "EvalSettings", "SaveSettings", "LoadSettings", "GenerateSettings", "parse_run",
           "run_to_dict", "DEFAULT"]
