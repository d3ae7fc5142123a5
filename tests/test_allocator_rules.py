"""tools/memtrace/allocator.py, the rules a multi-step run needs, case by case with the arithmetic here
(c10/cuda/CUDACachingAllocator.cpp): max_split_size (get_free_block's oversize rules, should_split), the
out-of-memory retry (release_available_cached_blocks, release_cached_blocks), empty_cache,
garbage_collection_threshold (garbage_collect_cached_blocks) and expandable_segments (map_block in 20 MiB
large-pool pages, unmap_block)."""
from __future__ import annotations

import pytest

from tools.memtrace.allocator import CachingAllocator, Config, OutOfMemory

MIB = 2**20


def test_max_split_size_keeps_oversize_blocks_whole_and_reuses_them_only_within_20_mib():
    a = CachingAllocator(Config(max_split_size=64 * MIB))
    x = a.malloc(100 * MIB)              # >= 64 MiB: an oversize segment of 100 MiB
    a.free(x)
    y = a.malloc(90 * MIB)               # 100 < 90 + 20: the cached block serves it, whole (no split)
    assert (a.allocated, a.reserved) == (100 * MIB, 100 * MIB)
    a.free(y)
    z = a.malloc(70 * MIB)               # 100 >= 70 + 20: refused; a new 70 MiB segment
    assert a.reserved == 170 * MIB
    a.free(z)
    a.malloc(30 * MIB)                   # under 64 MiB: no oversize block (70, 100) for it; a new 30 MiB one
    assert (a.reserved, a.allocated) == (200 * MIB, 30 * MIB)


def test_without_max_split_size_the_cached_block_is_split():
    a = CachingAllocator()
    a.free(a.malloc(100 * MIB))
    a.malloc(30 * MIB)                   # best fit: the 100 MiB block, split (70 MiB > 1 MiB remain)
    assert (a.reserved, a.allocated) == (100 * MIB, 30 * MIB)


def test_oom_retry_frees_oversize_blocks_largest_first_with_max_split_size():
    a = CachingAllocator(Config(max_split_size=64 * MIB, capacity=200 * MIB))
    a.free(a.malloc(100 * MIB))
    a.free(a.malloc(70 * MIB))           # 100 >= 70 + 20: a second segment; both cached now
    a.malloc(30 * MIB)                   # a third: 200 MiB reserved, the capacity
    a.malloc(120 * MIB)                  # 200 + 120 > 200: release_available_cached_blocks frees 100 (< 120),
    # then 70 (170 >= 120); 30 + 120 = 150 MiB reserved
    assert (a.reserved, a.allocated, a.segments, a.retries) == (150 * MIB, 150 * MIB, 2, 1)


def test_oom_retry_frees_whole_free_segments_and_retries():
    a = CachingAllocator(Config(capacity=32 * MIB))
    x = a.malloc(12 * MIB)
    a.malloc(12 * MIB)                   # two 12 MiB segments: 24 MiB
    a.free(x)
    a.malloc(14 * MIB)                   # 12 free is too small; 24 + 14 > 32: x's segment goes, 12 + 14 = 26
    assert (a.reserved, a.segments, a.retries) == (26 * MIB, 2, 1)


def test_a_split_segment_is_not_released_so_the_device_runs_out_although_the_tensors_fit():
    a = CachingAllocator(Config(capacity=150 * MIB))
    a.free(a.malloc(100 * MIB))
    a.malloc(50 * MIB)                   # split from the cached 100 MiB: 50 MiB free beside it
    with pytest.raises(OutOfMemory):
        a.malloc(60 * MIB)               # 50 free < 60; 100 + 60 > 150; the free half is split: not released
    assert a.allocated == 50 * MIB       # 50 + 60 = 110 MiB of tensors would have fit in 150


def test_expandable_segments_grow_in_20_mib_pages_and_the_same_run_fits():
    a = CachingAllocator(Config(expandable_segments=True, capacity=150 * MIB))
    a.free(a.malloc(100 * MIB))          # 5 pages of 20 MiB mapped
    assert a.reserved == 100 * MIB
    b = a.malloc(50 * MIB)               # split from the mapped 100: [0, 50) live, [50, 100) free
    a.malloc(60 * MIB)                   # the free 50 before the unmapped tail grows by one 20 MiB page
    assert (a.reserved, a.allocated) == (120 * MIB, 110 * MIB)
    a.free(b)                            # [0, 50) free: pages [0, 20) and [20, 40) are whole inside it
    a.empty_cache()
    assert a.reserved == 120 * MIB - 40 * MIB


def test_expandable_segments_a_growing_request_reuses_its_pages():
    a = CachingAllocator(Config(expandable_segments=True))
    a.free(a.malloc(100 * MIB))
    a.malloc(110 * MIB)                  # 100 cached + one more page: 120, not 100 + 110 as in cudaMalloc'd ones
    assert a.reserved == 120 * MIB
    n = CachingAllocator()
    n.free(n.malloc(100 * MIB))
    n.malloc(110 * MIB)
    assert n.reserved == 210 * MIB


def test_small_pool_pages_are_2_mib():
    a = CachingAllocator(Config(expandable_segments=True))
    a.malloc(600 * 1024)                 # small pool: one 2 MiB page
    a.malloc(600 * 1024)                 # 2 MiB - 600 KiB left: fits
    assert a.reserved == 2 * MIB
    a.malloc(900 * 1024)                 # 848 KiB left: one more page, contiguous with the first
    assert a.reserved == 4 * MIB


def test_empty_cache_frees_whole_free_segments_only():
    a = CachingAllocator()
    a.malloc(3 * MIB)                    # a 20 MiB segment, 17 MiB free beside the live block
    a.free(a.malloc(12 * MIB))           # a 12 MiB segment, wholly free
    a.empty_cache()
    assert (a.reserved, a.segments) == (20 * MIB, 1)


def test_garbage_collection_frees_blocks_older_than_the_mean_above_the_threshold():
    a = CachingAllocator(Config(capacity=100 * MIB, garbage_collection_threshold=0.5))   # threshold 50 MiB
    x, y = a.malloc(30 * MIB), a.malloc(20 * MIB)      # get_free_block calls: 1, 2
    a.free(x)
    a.free(y)                            # both cached at call count 2
    c = a.malloc(40 * MIB)               # call 3; reserved 50 <= 50: no collection; 90 MiB
    a.free(c)                            # cached at count 3
    a.malloc(44 * MIB)                   # call 4; 90 > 50: reclaim 40; ages 2, 2, 1, mean 5/3: the 30 and the
    # 20 go (50 >= 40), the 40 stays; 40 + 44 = 84 MiB (sizes from 10 MiB round to 2 MiB)
    assert (a.reserved, a.segments, a.retries) == (84 * MIB, 2, 0)


def test_garbage_collection_needs_a_memory_fraction():
    a = CachingAllocator(Config(garbage_collection_threshold=0.5))    # no capacity: set_fraction is false
    a.free(a.malloc(30 * MIB))
    a.malloc(44 * MIB)                   # the cached 30 stays: 30 + 44
    assert a.reserved == 74 * MIB


def test_states_created_in_the_first_step_strand_the_transients_segment():
    """Lazily created optimizer states (torch.optim's first step) land in the block step 1's activations freed, so
    step 2's activations open a segment of their own: 100 MiB weights, a 200 MiB activation freed, 150 MiB states
    split from its cached block (50 MiB left, too small), step 2's 200 MiB activation a new segment: reserved
    100 + 200 + 200 = 500 MiB at 100 + 150 + 200 = 450 allocated. States made before the first activation (DeepSpeed
    creates them at init) take their own segment, and the activation's is reused: 450 reserved at 450."""
    lazy = CachingAllocator()
    lazy.malloc(100 * MIB)
    lazy.free(lazy.malloc(200 * MIB))
    lazy.malloc(150 * MIB)
    lazy.malloc(200 * MIB)
    assert (lazy.allocated, lazy.reserved) == (450 * MIB, 500 * MIB)
    eager = CachingAllocator()
    eager.malloc(100 * MIB)
    eager.malloc(150 * MIB)
    eager.free(eager.malloc(200 * MIB))
    eager.malloc(200 * MIB)
    assert (eager.allocated, eager.reserved) == (450 * MIB, 450 * MIB)
