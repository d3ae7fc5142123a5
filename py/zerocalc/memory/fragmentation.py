"""Reserved memory over a run whose batches change shape (plan-v1 Extension 6): compact rules, no replay at
estimate time. They stand for the replay of traced step logs through the CUDA caching allocator's rules over
up to 1000 steps (tools/memtrace/allocator.py, tools/memtrace/runs.py, scripts/fragmentation.py; fixtures
tests/data/fragmentation.json and fragmentation_shapes.json, docs/tracer.md section 8b) and are held against
them in CI (tests/test_fragmentation.py: within 5 % on the grid; tests/test_fragmentation_shapes.py: within
5 % of each step shape's median replay).

The mechanism (c10/cuda/CUDACachingAllocator.cpp): a request no cached block can serve opens a segment of its
own (alloc_block); blocks of different segments never merge (free_block merges neighbours only); cached
segments are kept until empty_cache() or a failed cudaMalloc (malloc -> release_cached_blocks), and only
whole free segments go then. Each time a batch is longer than every earlier one, its activation- and
logits-sized requests outgrow the cache and new segments open beside it; shorter batches later split those
and pin them. So `max_memory_reserved` ratchets with the record-long batches (about ln N of N independent
draws, ending once the batches reach the truncation length), each leaving a share of its own logits bytes
behind: the sum over the records before the longest (earlier_records) is what the cache grows by.
With expandable_segments the segment grows in place (map_block, 20 MiB pages), and the ratchet is gone.
Inputs are per-GPU bytes of the fixed-length (seq_len) step: `allocated` (its peak), `transient` (its
activations and logits at the peak, which scale with the batch's tokens), `logits` (its logits at their own
largest moment) and `cache` (its steady cache, memory/runtime.py allocator_reserve).
"""
from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

STEPS = (10, 100, 1000, 10000)
Z99 = 2.3263478740408408
EULER = 0.5772156649015329

# Native allocator (c10/cuda/CUDACachingAllocator.cpp; the traced steps' blocks at the loss): the step's largest
# blocks are its logits (three fp32-sized b·s·V blocks live at the loss, each its own segment: > 10 MiB, rounded
# to 2 MiB).
# A record-long batch's logits fit no cached block (every earlier one is shorter), so they open segments of their
# own; an earlier record's logits segments are then free but too short for any later logits, and best-fit
# (get_free_block) hands them to the next records' activations, whose own earlier blocks are too short as well.
# So the cache holds every record's logits segments whole, the longest's activations inside them, and beside
# them the activations' segments of the first batches (a typical batch, x-bar) or the steady cache, the larger:
#   reserved = max(longest step's peak + cache·x, static + logits·(earlier + x) + max(act·x-bar, cache·x))
# (act = transient - logits; scripts/fragmentation.py --segments: after the first batch each record opens just its
# three logits segments; one within the 2 MiB round-up of the record before opens none). The growth per logits byte of the record-sum form therefore fell as the activations
# grew (0.64-0.95 on tests/data/fragmentation_shapes.json, lowest for LoRA without checkpointing at h 4096).
# max_split_size_mb:128 keeps every oversize block whole, so each distinct oversize length opens its own
# segment: per record-long batch beyond the first, this share of the longest batch's transient (the grid's
# median, 1.4-11.6); expandable segments: no growth (-0.13-0.04).
GROWTH = {"native": 0.61, "max_split": 3.03, "expandable": 0.0}
# The logits segments a record-long batch opens (the three fp32-sized b·s·V blocks above, logits / 3 bytes each;
# scripts/fragmentation.py --segments, and the retry path below, where they open and fail one at a time).
LOGITS_SEGMENTS = 3
# Of the longest batch's transient bytes, what a full device cannot get back (segments holding a live block,
# memory/runtime.py PINNED_PER_TRANSIENT); expandable segments unmap every whole free page.
PINNED = {"native": 0.187, "max_split": 0.187, "expandable": 0.0}


def sample_quantile(q: float, seq_len: int, mean: float | None, p99: float | None, histogram=None) -> float:
    """The q-quantile of the sample lengths: the histogram's, or a log-normal's with that mean and 99th
    percentile (p99 missing: seq_len, the widest truncation allows), clipped at seq_len."""
    if histogram:
        total = sum(w for _, w in histogram)
        acc = 0.0
        for length, w in sorted(histogram):
            acc += w
            if acc >= q * total:
                return float(min(length, seq_len))
        return float(min(max(x for x, _ in histogram), seq_len))
    mu, sigma = _lognormal(mean, p99 or seq_len)
    return min(float(seq_len), math.exp(mu + sigma * NormalDist().inv_cdf(min(q, 1 - 1e-15))))


def _lognormal(mean: float, p99: float) -> tuple[float, float]:
    r = math.log(max(p99 / mean, 1.0 + 1e-9))
    sigma = Z99 - math.sqrt(max(Z99 * Z99 - 2 * r, 0.0))
    return math.log(mean) - sigma * sigma / 2, sigma


def _moments(seq_len: int, mean: float | None, p99: float | None, histogram=None) -> tuple[float, float]:
    if histogram:
        total = sum(w for _, w in histogram)
        m = sum(min(x, seq_len) * w for x, w in histogram) / total
        return m, math.sqrt(max(sum((min(x, seq_len) - m) ** 2 * w for x, w in histogram) / total, 0.0))
    _, sigma = _lognormal(mean, p99 or seq_len)
    return mean, mean * math.sqrt(math.exp(sigma * sigma) - 1)


def longest_fraction(lengths: str, steps: int, b: int, seq_len: int, mean=None, p99=None, histogram=None) -> float:
    """The longest batch over `steps` steps, as a share of a fixed batch's b·seq_len tokens (the median of
    the maximum: quantile 0.5^(1/n)). padded-longest: the longest of steps·b samples, padded b times;
    padding-free: the largest sum of b samples (normal approximation), at most b·seq_len."""
    if lengths == "fixed":
        return 1.0
    if lengths == "padded-longest":
        return sample_quantile(0.5 ** (1 / (steps * b)), seq_len, mean, p99, histogram) / seq_len
    m, sd = _moments(seq_len, mean, p99, histogram)
    z = NormalDist().inv_cdf(0.5 ** (1 / steps)) if steps > 1 else 0.0
    return min(1.0, (b * m + z * math.sqrt(b) * sd) / (b * seq_len))


def typical_fraction(lengths: str, b: int, seq_len: int, mean=None, p99=None, histogram=None) -> float:
    """A typical batch's tokens as a share of b·seq_len: what step time and tokens/s see. padded-longest:
    the median batch's longest (quantile 0.5^(1/b)); padding-free: the mean."""
    if lengths == "fixed":
        return 1.0
    if lengths == "padded-longest":
        return sample_quantile(0.5 ** (1 / b), seq_len, mean, p99, histogram) / seq_len
    return min(1.0, _moments(seq_len, mean, p99, histogram)[0] / seq_len)


def record_batches(lengths: str, steps: int, b: int, seq_len: int, mean=None, p99=None, histogram=None) -> float:
    """Expected record-long batches among `steps` (each longer than all before): the harmonic number
    H_n ~ ln n + 0.577 of the steps before a batch reaches the truncation (1 / P(a batch is clipped))."""
    if lengths == "fixed" or steps <= 1:
        return 1.0
    n = float(steps)
    if lengths == "padded-longest":
        clipped = _tail(seq_len, seq_len, mean, p99, histogram)
        p = 1 - (1 - clipped) ** b
        if p > 0:
            n = min(n, 1 / p)
    return max(1.0, math.log(n) + EULER + 1 / (2 * n))


_STD = NormalDist()
QUAD = 32   # quadrature points of earlier_records (midpoints in -ln(1 - G))


def earlier_records(lengths: str, steps: tuple, b: int, seq_len: int, mean=None, p99=None,
                    histogram=None) -> tuple:
    """For each step count n of `steps`: the expected sum of the x (share of a fixed batch's tokens) of the
    record-long batches among n, less the expected longest: E[sum of records] - E[max]. Of iid batches with
    CDF G, a record of value y comes at step i with density G(y)^(i-1) dG(y), so E[sum of records] = integral
    of y (1 - G^n) / (1 - G) dG and E[max] = integral of y d(G^n); a histogram's lengths are atoms (as
    tools/memtrace/runs.py samples them), the truncation at seq_len an atom at x = 1. Cached per distinct
    distribution (a page edit or a fit re-estimates the same data many times)."""
    if lengths == "fixed":
        return tuple(0.0 for _ in steps)
    hist = tuple((float(x), float(w)) for x, w in histogram) if histogram else None
    return _earlier(lengths, tuple(steps), b, seq_len, mean, p99, hist)


@lru_cache(maxsize=256)
def _earlier(lengths: str, steps: tuple, b: int, seq_len: int, mean, p99, histogram) -> tuple:
    if histogram:
        total = sum(w for _, w in histogram)
        atoms: dict = {}
        for length, w in histogram:
            atoms[min(length, seq_len)] = atoms.get(min(length, seq_len), 0.0) + w / total
        if lengths == "padded-longest":
            pts, acc = [], 0.0
            for v in sorted(atoms):
                acc += atoms[v]
                pts.append((v / seq_len, min(acc, 1.0) ** b))
            return tuple(_atoms_earlier(pts, n) for n in steps)
    if lengths == "padded-longest":
        mu, sigma = _lognormal(mean, p99 or seq_len)
        cdf_top = NormalDist(mu, sigma).cdf(math.log(seq_len)) if sigma > 0 else float(mean < seq_len)
        top = cdf_top ** b                                   # P(a batch is shorter than seq_len)

        def y(u: float) -> float:
            q = min(u ** (1 / b), 1 - 1e-15)
            return min(1.0, math.exp(mu + sigma * _STD.inv_cdf(q)) / seq_len) if sigma > 0 else mean / seq_len
    else:                                                    # padding-free: the sum of b samples, normal
        m, sd = _moments(seq_len, mean, p99, histogram)
        dist = NormalDist(b * m, math.sqrt(b) * sd) if sd > 0 else None
        top = dist.cdf(b * seq_len) if dist else float(b * m < b * seq_len)

        def y(u: float) -> float:
            if dist is None:
                return min(1.0, m / seq_len)
            return min(1.0, max(0.0, dist.inv_cdf(min(max(u, 1e-15), 1 - 1e-15)) / (b * seq_len)))
    return _continuous_earlier(y, top, steps)


def _atoms_earlier(pts: list, n: int) -> float:
    """E[sum of records] - E[max] of n iid draws from atoms (x, G(x)) in increasing x."""
    if n <= 1:
        return 0.0
    rec = mx = 0.0
    below = 0.0
    for x, g in pts:
        p = g - below
        if p > 0:
            rec += x * p * (n if below >= 1.0 else (1 - below ** n) / (1 - below))
            mx += x * (g ** n - below ** n)
        below = g
    return max(0.0, rec - mx)


def _continuous_earlier(y, top: float, steps: tuple) -> tuple:
    """The same for a continuous part of probability `top` below x = 1 and an atom of 1 - top at x = 1, by
    the substitution u = 1 - e^-v (du = (1 - u) dv): midpoints on v in [0, min(-ln(1 - top), ln N + 10)],
    one grid (and one y per point) for every n of `steps` (N the largest)."""
    cap = math.log(max(max(steps), 2)) + 10.0
    vmax = cap if top >= 1.0 else min(cap, -math.log(1.0 - top))
    h = vmax / QUAD
    us = [1.0 - math.exp(-(i + 0.5) * h) for i in range(QUAD)]
    ys = [y(u) for u in us]
    out = []
    for n in steps:
        if n <= 1:
            out.append(0.0)
            continue
        rec = mx = 0.0
        for u, yu in zip(us, ys):
            un1 = u ** (n - 1)
            rec += yu * (1.0 - un1 * u)
            mx += yu * n * un1 * (1.0 - u)
        rec, mx = rec * h, mx * h
        if top < 1.0:                                       # the atom at x = 1: one record, the maximum
            rec += 1.0 - top ** n
            mx += 1.0 - top ** n
        out.append(max(0.0, rec - mx))
    return tuple(out)


def _tail(x: float, seq_len: int, mean, p99, histogram) -> float:
    """P(a sample length >= x) after truncation at seq_len."""
    if histogram:
        total = sum(w for _, w in histogram)
        return sum(w for length, w in histogram if min(length, seq_len) >= x) / total
    mu, sigma = _lognormal(mean, p99 or seq_len)
    return 1 - NormalDist(mu, sigma).cdf(math.log(x)) if sigma > 0 else float(mean >= x)


def allocated_peak(allocated: int, transient: int, x: float) -> int:
    """max_memory_allocated at the longest batch: the transient bytes scale with its tokens (x of b·seq_len)."""
    return int(allocated - transient * (1 - x))


def first_overflow(kept: float, logits_x: float, capacity: int) -> float:
    """max_memory_reserved of the native ratchet on a device, where the rule's `kept` (every record's logits
    segments, logits_x bytes of them the longest's) is above `capacity`. The allocator's retry path
    (CUDACachingAllocator.cpp malloc: alloc_block fails -> release_cached_blocks -> alloc_block again): the
    longest record's logits segments open one at a time over the cache the earlier records left (kept - logits_x);
    the first that does not fit frees every whole free segment, so the reserve drops before the rest open and
    the peak is the level just before that failure. Replayed (scripts/fragmentation.py grid, padded-longest
    p99 = seq_len, 10 steps): 3.504 GiB before the record, two 0.697 GiB segments to 4.898, the third fails on a
    5.475 GiB device, 2.066 GiB released, it opens at 3.529. When the earlier records' cache alone is above the
    device, the ratchet has overflowed before, each time just under the device, and the peak is the device."""
    before = kept - logits_x
    if before > capacity or logits_x <= 0:
        return float(capacity)
    seg = logits_x / LOGITS_SEGMENTS
    return before + min(LOGITS_SEGMENTS, int((capacity - before) // seg)) * seg


def reserved_after(allocated: int, transient: int, logits: int, cache: int, x: float, records: float,
                   earlier: float, setting: str, capacity: int | None = None, typical: float | None = None) -> int:
    """max_memory_reserved after the steps that gave a longest batch x, `records` record-long batches and
    `earlier` (the sum of the x of the records before the longest), `typical` the mean batch's x (default x):
    the longest step's allocated peak and steady cache, or for the native allocator, when more, the static
    bytes, every record's logits segments and the larger of a typical batch's activations and the steady cache
    (the segments the replay keeps: the comment above GROWTH); for max_split_size GROWTH of the
    longest's transient per record after the first; on a device, at most `capacity` (a failed cudaMalloc frees
    whole cached segments), for the native ratchet the level before its first failure (first_overflow)."""
    peak = allocated_peak(allocated, transient, x)
    r = peak + cache * x
    if setting == "native":
        if earlier > 0:
            xbar = x if typical is None else min(typical, x)
            kept = allocated - transient + logits * (earlier + x) + max((transient - logits) * xbar, cache * x)
            if capacity is not None and kept > capacity and kept > r:
                r = max(first_overflow(kept, logits * x, capacity), min(r, capacity))
            else:
                r = max(r, kept)
    else:
        r += GROWTH[setting] * transient * x * (records - 1)
    return int(r if capacity is None else min(r, max(capacity, peak)))


def mean_fraction(lengths: str, b: int, seq_len: int, mean=None, p99=None, histogram=None) -> float:
    """The mean batch's tokens as a share of b·seq_len (what the first batches leave in the cache).
    padded-longest: E[the longest of b samples] (a histogram's atoms exactly, a log-normal's by midpoints in
    the batch's CDF u: its longest is the quantile u^(1/b)); padding-free: the mean sample. Cached per
    distinct distribution, as earlier_records."""
    if lengths == "fixed":
        return 1.0
    hist = tuple((float(x), float(w)) for x, w in histogram) if histogram else None
    return _mean(lengths, b, seq_len, mean, p99, hist)


@lru_cache(maxsize=256)
def _mean(lengths: str, b: int, seq_len: int, mean, p99, histogram) -> float:
    if lengths != "padded-longest":
        return min(1.0, _moments(seq_len, mean, p99, histogram)[0] / seq_len)
    if histogram:
        total = sum(w for _, w in histogram)
        acc = below = out = 0.0
        for length, w in sorted(histogram):
            acc += w / total
            out += min(length, seq_len) / seq_len * (min(acc, 1.0) ** b - below)
            below = min(acc, 1.0) ** b
        return out
    return sum(sample_quantile(((i + 0.5) / QUAD) ** (1 / b), seq_len, mean, p99) for i in range(QUAD)) / QUAD / seq_len


def setting(expandable: bool, max_split_size_mb: int | None) -> str:
    """The allocator setting a rule reads: expandable segments win over max_split_size (get_free_block and
    should_split follow expandable segments first)."""
    if expandable:
        return "expandable"
    return "max_split" if max_split_size_mb else "native"


def oom_step(allocated: int, transient: int, xs: dict, setting_: str, capacity: int) -> int | None:
    """The first step count (of `xs`: steps -> longest fraction) at which the longest step's tensors fit
    the device but not with the cache a full device cannot free (PINNED), or None. A step whose tensors
    alone do not fit is an ordinary out-of-memory, not this one."""
    for n in sorted(xs):
        peak = allocated_peak(allocated, transient, xs[n])
        if peak <= capacity < peak + PINNED[setting_] * transient * xs[n]:
            return n
    return None


def over_steps(lengths: str, mean, p99, histogram, b: int, seq_len: int, allocated: int, reserved: int,
               transient: int, logits: int, capacity: int, expandable_: bool, max_split_size_mb: int | None,
               empty_cache_every: int | None) -> dict:
    """plan-v1 Extension 6 output: `reserved_after_steps` (10 / 100 / 1000 / 10000 -> bytes) and
    `fragmentation_oom_step`. `allocated`, `reserved` and `transient` are the fixed-length step's (per_gpu),
    `logits` its logits bytes at their largest moment (PerGpu.logits_step);
    `capacity` what the allocator may reserve (the device less the CUDA context and NCCL). With
    empty_cache_every the cache starts again every that many steps, so records count within one window."""
    st = setting(expandable_, max_split_size_mb)
    if lengths == "fixed":                         # one shape: the steady step's reserve, flat
        r = int(min(reserved, max(capacity, allocated)))
        return {"reserved_after_steps": {str(n): r for n in STEPS}, "fragmentation_oom_step": None}
    cache = reserved - allocated
    xs, out = {}, {}
    windows = tuple(min(n, empty_cache_every) if empty_cache_every else n for n in STEPS)
    before = earlier_records(lengths, windows, b, seq_len, mean, p99, histogram) if st == "native" else \
        tuple(0.0 for _ in STEPS)
    xbar = mean_fraction(lengths, b, seq_len, mean, p99, histogram)
    for n, window, e in zip(STEPS, windows, before):
        xs[n] = longest_fraction(lengths, n, b, seq_len, mean, p99, histogram)
        rec = record_batches(lengths, window, b, seq_len, mean, p99, histogram)
        out[str(n)] = reserved_after(allocated, transient, logits, cache, xs[n], rec, e, st, capacity, xbar)
    for a, n in zip(STEPS, STEPS[1:]):            # a peak since the start never falls
        out[str(n)] = max(out[str(n)], out[str(a)])
    return {"reserved_after_steps": out, "fragmentation_oom_step": oom_step(allocated, transient, xs, st, capacity)}
