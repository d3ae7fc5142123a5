"""Many steps of varying length through the caching-allocator replay (tools/memtrace/allocator.py): what
`max_memory_reserved` reads after 10, 100, 1000, 10000 steps when every batch has its own shape, and the first
step at which a device of a given capacity runs out although that step's tensors fit (docs/tracer.md §8b).

A traced step's log (tracker.py events between STEP marks) is self-contained: every storage it allocates it
frees before the next step begins (checked in `family`). Its structure (the order of allocations, hand-overs
and frees) is the same at every length, and under flash attention each storage's bytes are a polynomial of
degree <= 2 in the sequence length (b·s·h activations, b·s·V logits; eager attention's b·a·s² scores), so
three traced lengths give every event's bytes at any length, checked exactly against a fourth (`family`).
A run is the setup log (weights, optimizer states) once, then one synthesized step log per batch length,
in the order a sampler draws them (`schedule`):
- `fixed`: every batch is `seq_len` long (packed data, or padding to max_length);
- `padded-longest`: a batch of b samples padded to its longest (HF DataCollatorWithPadding,
  DataCollatorForSeq2Seq, TRL's collator without padding_free): length max(samples);
- `padding-free`: the samples concatenated (TRL padding_free, flash-attention varlen): one sequence of
  sum(samples) tokens (a b = 1 family).
Sample lengths come from a histogram, or a log-normal with the given mean and 99th percentile, clipped to
[1, seq_len] (truncation at max_length).
"""
from __future__ import annotations

import math
import random
from fractions import Fraction

from .allocator import STEP, CachingAllocator, Config, OutOfMemory

CHECKPOINTS = (10, 100, 1000, 10000)


def split_log(events: list) -> tuple[list, list[list]]:
    """The setup events (before the first STEP mark, RESET dropped) and each step's events."""
    cuts = [i for i, (k, _) in enumerate(events) if k == STEP]
    setup = [e for e in events[:cuts[0]] if e[0] >= 0]
    steps = [events[a + 1:b] for a, b in zip(cuts, cuts[1:] + [len(events)])]
    return setup, steps


def _relative(step: list) -> list[tuple[int, int, int]]:
    """(kind, key, arg) with keys counted from the step's first: kind 0 allocates arg bytes, 1 hands key
    `arg`'s block to key, 2 frees key. Raises if the step frees or takes over a storage it did not allocate."""
    k0 = min(k for k, n in step if n > 0)
    live, out = set(), []
    for k, n in step:
        if n > 0:
            live.add(k)
            out.append((0, k - k0, n))
        elif n < 0:
            if -n not in live:
                raise ValueError("a step takes over a storage of an earlier step")
            live.discard(-n)
            live.add(k)
            out.append((1, k - k0, -n - k0))
        elif k in live:
            live.discard(k)
            out.append((2, k - k0, 0))
        else:
            raise ValueError("a step frees a storage of an earlier step")
    if live:
        raise ValueError(f"a step keeps {len(live)} storages into the next")
    return out


def family(logs: dict[int, list]) -> dict:
    """From full event logs at >= 4 sequence lengths ({s: events}): each event's bytes as the quadratic
    through the three shortest, checked exactly at every other. Returns {"setup", "template", "coeffs"}."""
    lens = sorted(logs)
    rel = {s: _relative(split_log(logs[s])[1][-1]) for s in lens}
    shape = [(k, key, arg if k else 0) for k, key, arg in rel[lens[0]]]
    for s in lens[1:]:
        if [(k, key, arg if k else 0) for k, key, arg in rel[s]] != shape:
            raise ValueError(f"the step at s={s} has another structure than at s={lens[0]}")
    pts = lens[:3]
    coeffs = []
    for i, (k, _, _) in enumerate(shape):
        if k:
            coeffs.append(None)
            continue
        ys = [rel[s][i][2] for s in pts]
        coeffs.append(_quadratic(pts, ys))
    for s in lens[3:]:
        for i, c in enumerate(coeffs):
            if c is not None and _eval(c, s) != rel[s][i][2]:
                raise ValueError(f"event {i}: {rel[s][i][2]} B at s={s}, the fit says {_eval(c, s)}")
    fl = [None if c is None else tuple(float(x) for x in c) for c in coeffs]
    return {"setup": split_log(logs[lens[-1]])[0], "template": shape, "coeffs": fl, "lengths": lens}


def _quadratic(xs: list[int], ys: list[int]) -> tuple[Fraction, Fraction, Fraction]:
    (x0, x1, x2), (y0, y1, y2) = xs, ys
    d01 = Fraction(y1 - y0, x1 - x0)
    d12 = Fraction(y2 - y1, x2 - x1)
    c2 = (d12 - d01) / (x2 - x0)
    c1 = d01 - c2 * (x0 + x1)
    c0 = y0 - c1 * x0 - c2 * x0 * x0
    return c0, c1, c2


def _eval(c: tuple, s: int) -> int:
    return max(0, round(c[0] + c[1] * s + c[2] * s * s))


def step_log(fam: dict, s: int) -> list[tuple[int, int, int]]:
    """The synthesized step at length s: (kind, key, bytes or source key)."""
    return [(k, key, _eval(c, s) if k == 0 else arg) for (k, key, arg), c in zip(fam["template"], fam["coeffs"])]


def lognormal_sigma(mean: float, p99: float) -> float:
    """sigma of a log-normal whose mean and 99th percentile are given: ln(p99/mean) = z99·σ - σ²/2."""
    z = 2.3263478740408408
    r = math.log(max(p99 / mean, 1.0 + 1e-9))
    return z - math.sqrt(max(z * z - 2 * r, 0.0))


def sampler(seq_len: int, mean: float | None = None, p99: float | None = None, histogram=None, seed: int = 0):
    """A function drawing one sample length (tokens, 1..seq_len)."""
    rng = random.Random(seed)
    if histogram:
        lens = [min(seq_len, max(1, int(x))) for x, _ in histogram]
        weights = [float(w) for _, w in histogram]
        return lambda: rng.choices(lens, weights)[0]
    sigma = lognormal_sigma(mean, p99)
    mu = math.log(mean) - sigma * sigma / 2
    return lambda: min(seq_len, max(1, round(rng.lognormvariate(mu, sigma))))


def schedule(lengths: str, steps: int, b: int, seq_len: int, draw=None) -> list[int]:
    """Each step's synthesized length: `fixed` seq_len, `padded-longest` the longest of b draws,
    `padding-free` the sum of b draws."""
    if lengths == "fixed":
        return [seq_len] * steps
    pick = max if lengths == "padded-longest" else sum
    return [pick(draw() for _ in range(b)) for _ in range(steps)]


def run(fam: dict, lens: list[int], config: Config | None = None, empty_cache_every: int | None = None,
        checkpoints=CHECKPOINTS) -> dict:
    """Replay setup + one step per entry of `lens`. Returns max_memory_reserved and max_memory_allocated
    after each checkpoint's count of steps, the tensors' and blocks' peak over the run, and, with a
    capacity, the first step that ran out of memory (`oom_step`, 1-based) with that step's tensor peak."""
    a = CachingAllocator(config or Config())
    live: dict = {}
    for k, n in fam["setup"]:
        if n > 0:
            live[k] = a.malloc(n)
        elif n == 0 and k in live:
            a.free(live.pop(k))
    base_req = a.requested
    cache: dict = {}
    out = {"reserved_after": {}, "allocated_after": {}, "oom_step": None}
    want = set(checkpoints)
    for i, s in enumerate(lens, 1):
        ev = cache.get(s)
        if ev is None:
            ev = cache[s] = step_log(fam, s)
        h: dict = {}
        try:
            for k, key, x in ev:
                if k == 0:
                    h[key] = a.malloc(x)
                elif k == 1:
                    h[key] = h.pop(x)
                else:
                    a.free(h.pop(key))
        except OutOfMemory:
            out["oom_step"] = i
            out["oom_len"] = s
            break
        if empty_cache_every and i % empty_cache_every == 0:
            a.empty_cache()
        if i in want:
            out["reserved_after"][i] = a.peak_reserved
            out["allocated_after"][i] = a.peak_allocated
    out.update(peak_requested=a.peak_requested, peak_allocated=a.peak_allocated, peak_reserved=a.peak_reserved,
               setup_requested=base_req, steps=len(lens), retries=a.retries)
    return out


def step_peak(fam: dict, s: int) -> int:
    """The tensors' peak (bytes requested, setup included) of one step at length s, alone."""
    cur = peak = sum(n for k, n in _net_setup(fam["setup"]))
    sizes: dict = {}
    for k, key, x in step_log(fam, s):
        if k == 0:
            sizes[key] = x
            cur += x
            peak = max(peak, cur)
        elif k == 1:
            sizes[key] = sizes.pop(x)
        else:
            cur -= sizes.pop(key)
    return peak


def _net_setup(setup: list) -> list:
    live: dict = {}
    for k, n in setup:
        if n > 0:
            live[k] = n
        elif n == 0:
            live.pop(k, None)
    return list(live.items())
