"""plan-v1 Extension 6: the data's sample lengths (`data`) and the CUDA caching allocator's settings
(`allocator`), parsed and checked (PlanError naming the dotted key). What they do to memory is
memory/fragmentation.py's business."""
from __future__ import annotations

import json
import math
import re
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


HISTOGRAM_BINS = 256    # most [length, weight] rows a list of lengths is binned into


def histogram_from_lengths(value: Any, seq_len: int, key: str = "data.histogram") -> list | None:
    """What a user pastes as the length distribution -> a plan-v1 `data.histogram` (list of [length, weight]).

    Accepted: a histogram already (a JSON list of [length, weight] pairs: returned as given, parse_data checks
    it); a JSON object {length: count} (Counter / pandas value_counts().to_dict()); a list of sample lengths, as
    JSON or as numbers separated by commas, semicolons, spaces or newlines (`datasets`: ds["length"], or
    [len(x) for x in ds["input_ids"]]). Every length is truncated at seq_len (what the tokenizer's truncation
    does; fit.py clips a histogram the same way when it shortens seq_len). A list of lengths is counted: each distinct length its own row when there are at most HISTOGRAM_BINS of them,
    else HISTOGRAM_BINS log-spaced bins, each at its samples' mean length (rounded), the longest length in a row
    of its own (the distribution's top, which sets the padded-longest peak, stays exact). None / "" -> None.
    Anything else -> PlanError naming `key`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        value = _parse_text(value, key)
    if isinstance(value, dict):
        if not value:
            raise PlanError(key, "is empty: paste at least one length")
        value = sorted(([_whole(str(k).strip(), key, f"key {show(k)}"), w] for k, w in value.items()),
                       key=lambda p: p[0])
    if not isinstance(value, list) or not value:
        raise PlanError(key, f"must be a list of sample lengths, a histogram [[length, weight], ...] or an object "
                             f"{{length: count}}; got {show(value)}")
    if all(isinstance(p, (list, tuple)) for p in value):   # a histogram: parse_data checks its rows
        return [[_clip(p[0], seq_len), *p[1:]] if p else list(p) for p in value]
    lengths = [_whole(x, key, f"item {i + 1} ({show(x)})") for i, x in enumerate(value)]
    return _bin([min(n, seq_len) for n in lengths])


def _clip(length: Any, seq_len: int) -> Any:
    """A histogram row's length truncated at seq_len; what is not a number is left for parse_data to name."""
    ok = isinstance(length, (int, float)) and not isinstance(length, bool) and math.isfinite(length)
    return min(length, seq_len) if ok else length


def _parse_text(text: str, key: str) -> Any:
    t = text.strip()
    if t[0] in "[{":
        try:
            return json.loads(t)
        except ValueError as e:
            raise PlanError(key, f"is not valid JSON ({e.msg} at character {e.pos + 1}); paste a JSON list, or "
                                 f"lengths separated by commas or newlines") from None
    tokens = [x for x in re.split(r"[\s,;]+", t) if x]
    return [_whole(x, key, f"item {i + 1} ({show(x)})") for i, x in enumerate(tokens)]


def _whole(x: Any, key: str, what: str) -> int:
    """A sample length: a whole number >= 1 (5, 5.0, "5")."""
    if isinstance(x, str):
        try:
            x = float(x) if x.strip() else x
        except ValueError:
            pass
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x) or x < 1:
        raise PlanError(key, f"lengths must be whole numbers of tokens, at least 1: {what} is not")
    return int(x)


def _bin(lengths: list[int]) -> list[list]:
    """Counts of each length, or HISTOGRAM_BINS log-spaced bins at their mean (the longest length kept apart)."""
    counts: dict[int, int] = {}
    for n in lengths:
        counts[n] = counts.get(n, 0) + 1
    if len(counts) <= HISTOGRAM_BINS:
        return [[n, counts[n]] for n in sorted(counts)]
    top = max(counts)
    lo, ratio = min(counts), math.log(top / min(counts)) / (HISTOGRAM_BINS - 1)
    bins: dict[int, list] = {}
    for n, c in counts.items():
        if n == top:
            continue
        b = min(HISTOGRAM_BINS - 2, int(math.log(n / lo) / ratio))
        acc = bins.setdefault(b, [0, 0])
        acc[0] += n * c
        acc[1] += c
    rows = [[max(1, round(s / c)), c] for s, c in (bins[b] for b in sorted(bins))]
    return rows + [[top, counts[top]]]


def data_dict(d: DataSettings) -> dict:
    return {"lengths": d.lengths, "mean_len": d.mean_len, "p99_len": d.p99_len,
            "histogram": None if d.histogram is None else [list(p) for p in d.histogram]}


def allocator_dict(a: AllocatorSettings) -> dict:
    return {"expandable_segments": a.expandable_segments, "max_split_size_mb": a.max_split_size_mb,
            "empty_cache_every": a.empty_cache_every}


