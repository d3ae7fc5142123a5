"""tools/memtrace/runs.py: the multi-step replay's parts, by hand: a step log's keys made relative and
checked self-contained, each event's bytes fitted as a quadratic in s and checked on a held-out length,
the schedules of the three collators, and a run through the allocator replay."""
from __future__ import annotations

import math

import pytest

from tools.memtrace.allocator import RESET, STEP, Config
from tools.memtrace.runs import family, lognormal_sigma, run, sampler, schedule, step_log, step_peak

MIB = 2**20


def log(s: int, base: int = 100) -> list:
    """weights (key 1, 8 MiB) then two steps: an activation of s MiB, a quadratic score of s^2/64 MiB freed
    first, a gradient handed over in place (key b+2 takes b+1's block), all freed by the step's end"""
    ev = [(1, 8 * MIB), (RESET, 0)]
    for step in range(2):
        b = base + 10 * step
        ev += [(STEP, 0), (b, s * MIB), (b + 1, s * s // 64 * MIB), (b + 3, MIB),
               (b + 2, -(b + 1)), (b + 2, 0), (b + 3, 0), (b, 0)]
    return ev


def test_family_fits_each_event_and_checks_the_held_out_length():
    fam = family({s: log(s) for s in (8, 16, 32, 64)})
    assert fam["setup"] == [(1, 8 * MIB)]
    # at s = 48: activation 48 MiB, scores 48^2/64 = 36 MiB, 1 MiB; the hand-over and frees carry no bytes
    ev = step_log(fam, 48)
    assert [x for k, _, x in ev if k == 0] == [48 * MIB, 36 * MIB, MIB]
    # peak: 8 (weights) + 48 + 36 + 1 MiB
    assert step_peak(fam, 48) == 93 * MIB


def test_family_refuses_a_length_off_the_quadratic():
    logs = {s: log(s) for s in (8, 16, 32)}
    bad = log(64)
    bad[11] = (bad[11][0], 65 * MIB)     # the last step's activation at the held-out length is not 64 MiB
    logs[64] = bad
    with pytest.raises(ValueError, match="fit says"):
        family(logs)


def test_a_step_that_keeps_a_storage_is_refused():
    ev = [(1, MIB), (RESET, 0), (STEP, 0), (5, MIB), (STEP, 0), (6, MIB), (5, 0)]
    with pytest.raises(ValueError, match="earlier step"):
        family({s: ev for s in (1, 2, 3)})


def test_schedules():
    assert schedule("fixed", 3, 4, 2048) == [2048] * 3
    draws = iter([100, 300, 200, 50, 10, 20, 30, 40])
    assert schedule("padded-longest", 2, 4, 2048, lambda: next(draws)) == [300, 40]
    draws = iter([100, 300, 200, 50, 10, 20, 30, 40])
    assert schedule("padding-free", 2, 4, 2048, lambda: next(draws)) == [650, 100]


def test_lognormal_sampler_keeps_its_mean_and_p99_and_clips_at_seq_len():
    # ln(p99 / mean) = 2.326 sigma - sigma^2 / 2; mean 700, p99 2048: sigma solves it
    sig = lognormal_sigma(700, 2048)
    assert abs(2.3263478740408408 * sig - sig * sig / 2 - math.log(2048 / 700)) < 1e-12
    draw = sampler(4096, mean=700, p99=2048, seed=3)
    xs = sorted(draw() for _ in range(20000))
    assert abs(sum(xs) / len(xs) / 700 - 1) < 0.03
    assert abs(xs[int(0.99 * len(xs))] / 2048 - 1) < 0.06
    clipped = sampler(1000, mean=700, p99=2048, seed=3)
    assert max(clipped() for _ in range(2000)) == 1000


def test_a_run_of_growing_lengths_ratchets_and_expandable_segments_do_not():
    fam = family({s: log(s) for s in (8, 16, 32, 64)})
    lens = [16, 18, 20, 22]              # activation s MiB, scores s^2/64 MiB: each step a bit larger
    native = run(fam, lens, Config(), checkpoints=(1, 4))
    # native: each step's s MiB activation is larger than every cached block, so it opens a new segment
    # and the earlier ones stay cached
    assert native["reserved_after"][4] > native["reserved_after"][1]
    exp = run(fam, lens, Config(expandable_segments=True), checkpoints=(1, 4))
    assert exp["reserved_after"][4] <= native["reserved_after"][4]
    assert native["peak_requested"] == exp["peak_requested"] == (8 + 22 + 1) * MIB + 22 * 22 * MIB // 64   # weights, activation, 1 MiB, scores
