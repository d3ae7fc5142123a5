"""tools/memtrace/allocator.py: PyTorch's caching-allocator rules, case by case, with the arithmetic here
(c10/cuda/CUDACachingAllocator.cpp: 512 B rounding, 2 MiB small segments, 20 MiB segments for 1-10 MiB
requests, 2 MiB rounding above, split only when > 1 MiB would remain in the large pool), and the replay of a
traced step against the tracker's own count."""
from __future__ import annotations

import pytest

from tools.memtrace.allocator import RESET, CachingAllocator, replay

MIB = 2**20


def test_small_requests_share_one_2_mib_segment():
    a = CachingAllocator()
    a.malloc(100)                        # -> 512 B (the minimum block)
    a.malloc(1000)                       # -> 1,024 B, split from the same 2 MiB segment
    assert (a.requested, a.allocated, a.reserved, a.segments) == (1100, 512 + 1024, 2 * MIB, 1)
    a.malloc(MIB)                        # exactly 1 MiB is still small: 2 MiB - 1,536 B remain
    assert (a.reserved, a.segments) == (2 * MIB, 1)
    a.malloc(MIB)                        # 1 MiB - 1,536 B left: a second small segment
    assert (a.reserved, a.segments) == (4 * MIB, 2)


def test_mid_size_requests_split_a_20_mib_segment_and_a_small_remainder_stays_with_the_block():
    a = CachingAllocator()
    x = a.malloc(3 * MIB)                # 20 MiB segment; 17 MiB remain (> 1 MiB): split
    assert (a.allocated, a.reserved) == (3 * MIB, 20 * MIB)
    y = a.malloc(16 * MIB + MIB // 2)    # best fit: the 17 MiB block; 0.5 MiB would remain: not split
    assert a.requested == 3 * MIB + 16 * MIB + MIB // 2
    assert a.allocated == 3 * MIB + 17 * MIB            # max_memory_allocated counts the whole block
    assert a.reserved == 20 * MIB
    a.free(x)
    a.free(y)                            # both halves free: merged back into one 20 MiB block
    a.malloc(20 * MIB)                   # >= 10 MiB: rounds to 20 MiB, served by the merged block
    assert (a.reserved, a.segments) == (20 * MIB, 1)


def test_large_requests_round_to_2_mib_and_a_freed_block_too_small_is_not_reused():
    a = CachingAllocator()
    x = a.malloc(11 * MIB + 1)           # 512 B rounding, then a 12 MiB segment (2 MiB rounding)
    a.malloc(12 * MIB)                   # another 12 MiB segment
    assert (a.reserved, a.segments) == (24 * MIB, 2)
    a.free(x)
    a.malloc(14 * MIB)                   # the free 12 MiB block is too small: a third segment
    assert a.reserved == 38 * MIB and a.allocated == 12 * MIB + 14 * MIB
    # the first block is 12 MiB too (1 MiB - 512 B would remain: not split): 24 MiB before, 12 + 14 after
    assert a.peak_allocated == 26 * MIB


def test_best_fit_takes_the_smallest_block_that_fits():
    a = CachingAllocator()
    big, small = a.malloc(16 * MIB), a.malloc(12 * MIB)
    a.free(big)
    a.free(small)                        # free: 12 MiB and 16 MiB, in two segments
    a.malloc(11 * MIB)                   # 12 MiB block (1 MiB would remain: not split)
    assert a.allocated == 12 * MIB
    a.malloc(15 * MIB)                   # the 16 MiB block (1 MiB would remain: not split)
    assert (a.allocated, a.reserved) == (28 * MIB, 28 * MIB)


def test_replay_hands_over_blocks_and_resets_peaks():
    events = [(1, 12 * MIB), (2, 12 * MIB), (2, 0), (RESET, 0),
              (3, -1),                   # key 3 takes key 1's block in place: no allocation
              (4, 4 * MIB), (1, 0),      # key 1 is gone from the log already: ignored
              (3, 0), (4, 0)]
    r = replay(events)
    # after the reset: 12 MiB held; +4 MiB from the free 12 MiB block (split: 8 MiB remain)
    # both segments hold a live block then: a GPU with no room to spare needs all 24 MiB
    assert r == {"peak_requested": 16 * MIB, "peak_allocated": 16 * MIB, "peak_reserved": 24 * MIB,
                 "peak_pinned": 24 * MIB, "segments": 2}


@pytest.mark.tools
def test_replay_of_a_traced_step_matches_the_tracker():
    pytest.importorskip("transformers")
    from test_tracer_unit import plan

    from tools.memtrace.trace import trace

    r = trace(plan(activation_checkpointing="full", gradient_accumulation_steps=2))
    a = r["allocator"]
    # the log's live bytes are the tracker's (in-place accumulation included), so their peaks agree
    assert a["peak_requested"] == r["peak_bytes"]
    assert a["peak_requested"] <= a["peak_allocated"] <= a["peak_reserved"]
    # a tiny model: every request is small, so whole 2 MiB segments hold it
    assert a["peak_reserved"] % (2 * MIB) == 0
