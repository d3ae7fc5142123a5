"""plan-v1 Extension 6: the data's sample lengths (`data`) and the CUDA caching allocator's settings
(`allocator`), parsed and checked (PlanError naming the dotted key). What they do to memory is
memory/fragmentation.py's business."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import PlanError
from .values import check_choice, check_int, check_mapping, check_number, reject_unknown, show

LENGTHS = ("fixed", "padded-longest", "padding-free")
EXPANDABLE = ("auto", True, False)
EXPANDABLE_BY_DEFAULT = ("torchtune",)   # torchtune's recipes set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True;
                                         # HF Trainer, TRL, LitGPT and torchtitan leave the allocator's default


@dataclass(frozen=True)
class DataSettings:
    lengths: str = "fixed"
    mean_len: int | None = None
    p99_len: int | None = None
    histogram: tuple[tuple[int, float], ...] | None = None


@dataclass(frozen=True)
class AllocatorSettings:
    expandable_segments: Any = "auto"       # "auto", True or False
    max_split_size_mb: int | None = None
    empty_cache_every: int | None = None


def expandable(settings: AllocatorSettings, trainer: str) -> bool:
    """`auto` is the trainer's default: on for torchtune, off for the others."""
    if settings.expandable_segments == "auto":
        return trainer in EXPANDABLE_BY_DEFAULT
    return bool(settings.expandable_segments)


def parse_data(value: Any, seq_len: int) -> DataSettings:
    obj = check_mapping("data", value)
    reject_unknown("data", obj, ("lengths", "mean_len", "p99_len", "histogram"))
    lengths = check_choice("data.lengths", obj.get("lengths", "fixed"), LENGTHS)
    mean = _opt_len("data.mean_len", obj.get("mean_len"), seq_len)
    p99 = _opt_len("data.p99_len", obj.get("p99_len"), seq_len)
    hist = _histogram(obj.get("histogram"), seq_len)
    if mean is not None and p99 is not None and p99 < mean:
        raise PlanError("data.p99_len", f"must be at least data.mean_len ({mean}), got {p99}")
    if lengths != "fixed" and hist is None and mean is None:
        raise PlanError("data.mean_len", f"is needed (or data.histogram) when data.lengths is {lengths}")
    return DataSettings(lengths, mean, p99, hist)


def parse_allocator(value: Any) -> AllocatorSettings:
    obj = check_mapping("allocator", value)
    reject_unknown("allocator", obj, ("expandable_segments", "max_split_size_mb", "empty_cache_every"))
    exp = obj.get("expandable_segments", "auto")
    if exp not in EXPANDABLE or (isinstance(exp, int) and not isinstance(exp, bool)):
        raise PlanError("allocator.expandable_segments", f"must be auto, true or false; got {show(exp)}")
    ms = obj.get("max_split_size_mb")
    # c10/core/AllocatorConfig.cpp parseMaxSplitSize: "max_split_size_mb too small, must be >= 20"
    # (kLargeBuffer / MiB; torch 2.0-2.7's CUDAAllocatorConfig wanted > 20)
    ms = None if ms is None else check_int("allocator.max_split_size_mb", ms, 20, 1 << 40)
    every = obj.get("empty_cache_every")
    every = None if every is None else check_int("allocator.empty_cache_every", every, 1, 1 << 40)
    return AllocatorSettings(exp, ms, every)


def _opt_len(key: str, value: Any, seq_len: int) -> int | None:
    return None if value is None else check_int(key, value, 1, seq_len)


def _histogram(value: Any, seq_len: int) -> tuple | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value:
        raise PlanError("data.histogram", f"must be a non-empty list of [length, weight], got {show(value)}")
    out = []
    for i, pair in enumerate(value):
        key = f"data.histogram[{i}]"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise PlanError(key, f"must be [length, weight], got {show(pair)}")
        out.append((check_int(key, pair[0], 1, seq_len), check_number(key, pair[1], 0, 1e18)))
    if not sum(w for _, w in out) > 0:
        raise PlanError("data.histogram", "needs a positive total weight")
    return tuple(out)


def data_dict(d: DataSettings) -> dict:
    return {"lengths": d.lengths, "mean_len": d.mean_len, "p99_len": d.p99_len,
            "histogram": None if d.histogram is None else [list(p) for p in d.histogram]}


def allocator_dict(a: AllocatorSettings) -> dict:
    return {"expandable_segments": a.expandable_segments, "max_split_size_mb": a.max_split_size_mb,
            "empty_cache_every": a.empty_cache_every}


