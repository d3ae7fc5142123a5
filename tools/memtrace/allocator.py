"""Replay of PyTorch's CUDA caching allocator over a traced allocation log: what `max_memory_allocated`
and `max_memory_reserved` would read for the storages the tracer saw, in the order it saw them.

The rules are those of the native allocator with its defaults (no expandable segments, no max_split_size,
no garbage-collection threshold), c10/cuda/CUDACachingAllocator.cpp (torch 2.x, DeviceCachingAllocator):
- round_size: every request rounds up to a multiple of 512 B (kMinBlockSize), at least 512 B;
- get_pool: rounded sizes <= 1 MiB (kSmallSize) come from the small pool, larger ones from the large pool;
- get_free_block: the smallest cached block of the pool at least that large (best fit; ties: lowest address);
- get_allocation_size when none is cached: small requests open a 2 MiB segment (kSmallBuffer), large
  ones under 10 MiB (kMinLargeAlloc) a 20 MiB one (kLargeBuffer), larger ones their size rounded up to
  2 MiB (kRoundLarge);
- should_split: the block is split when what remains is >= 512 B (small pool) or > 1 MiB (large pool);
  otherwise the caller gets the whole block, and `allocated_bytes` counts all of it (it adds block->size);
- free_block: a freed block merges with free neighbours of its segment; segments are never returned
  (no empty_cache, and a replay has no out-of-memory retry).
One stream, as a single-GPU step has: a side stream's blocks (FSDP's all-gather stream) are not replayed.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_LARGE_BUFFER = 20 << 20
K_ROUND_LARGE = 2 << 20


def round_size(n: int) -> int:
    return K_MIN_BLOCK if n < K_MIN_BLOCK else -(-n // K_MIN_BLOCK) * K_MIN_BLOCK


def allocation_size(size: int) -> int:
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


@dataclass(eq=False)
class Segment:
    size: int
    live: int = 0          # allocated blocks in it


@dataclass(eq=False)
class Block:
    addr: int
    size: int
    small: bool
    segment: Segment
    allocated: bool = False
    prev: "Block | None" = None
    next: "Block | None" = None


@dataclass
class CachingAllocator:
    reserved: int = 0
    allocated: int = 0
    requested: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    peak_requested: int = 0
    pinned: int = 0              # reserved bytes in segments with a live block (releasable: the rest)
    peak_pinned: int = 0
    segments: int = 0
    _free: dict = field(default_factory=lambda: {True: [], False: []})   # small? -> sorted [(size, addr, id)]
    _blocks: dict = field(default_factory=dict)                           # id -> free Block
    _next_addr: int = 0

    def malloc(self, nbytes: int) -> tuple[Block, int]:
        size = round_size(nbytes)
        small = size <= K_SMALL_SIZE
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i < len(pool):
            _, _, bid = pool.pop(i)
            block = self._blocks.pop(bid)
        else:
            seg = allocation_size(size)
            block = Block(self._next_addr, seg, small, Segment(seg))
            self._next_addr += seg
            self.reserved += seg
            self.segments += 1
        remaining = block.size - size
        if (remaining >= K_MIN_BLOCK) if small else (remaining > K_SMALL_SIZE):
            rest = Block(block.addr + size, remaining, small, block.segment, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert(rest)
        block.allocated = True
        if not block.segment.live:
            self.pinned += block.segment.size
        block.segment.live += 1
        self.allocated += block.size
        self.requested += nbytes
        self._peaks()
        return block, nbytes

    def free(self, handle: tuple[Block, int]) -> None:
        block, nbytes = handle
        block.allocated = False
        block.segment.live -= 1
        if not block.segment.live:
            self.pinned -= block.segment.size
        self.allocated -= block.size
        self.requested -= nbytes
        for nb in (block.prev, block.next):
            if nb is not None and not nb.allocated:
                self._remove(nb)
                if nb is block.prev:
                    block.addr, block.prev = nb.addr, nb.prev
                    if nb.prev is not None:
                        nb.prev.next = block
                else:
                    block.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = block
                block.size += nb.size
        self._insert(block)

    def reset_peaks(self) -> None:
        """torch.cuda.reset_peak_memory_stats: each peak restarts from its current value."""
        self.peak_reserved, self.peak_allocated, self.peak_requested = self.reserved, self.allocated, self.requested
        self.peak_pinned = self.pinned

    def _peaks(self) -> None:
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_pinned = max(self.peak_pinned, self.pinned)

    def _insert(self, b: Block) -> None:
        self._blocks[id(b)] = b
        bisect.insort(self._free[b.small], (b.size, b.addr, id(b)))

    def _remove(self, b: Block) -> None:
        pool = self._free[b.small]
        i = bisect.bisect_left(pool, (b.size, b.addr, id(b)))
        assert pool[i][2] == id(b)
        pool.pop(i)
        del self._blocks[id(b)]


RESET = -1   # an event that resets the peaks (the tracer logs it where a step begins)
PHASE = -2   # (PHASE, name): a run phase begins (tools/memtrace/run.py); the replay keeps each phase's peaks


def replay(events: list) -> dict:
    """events: (key, nbytes) allocates nbytes under key, (key, 0) frees it, (key, -old) hands old's block to
    key (autograd's in-place accumulation: no allocation), (RESET, 0) resets the peaks.
    Returns the peaks since the last reset: requested (the tensors' bytes), allocated (what
    max_memory_allocated reads: whole blocks), reserved (max_memory_reserved: whole segments) and pinned
    (segments holding a live block: what a GPU without room to spare still needs, since on a failed
    cudaMalloc the allocator frees its wholly free segments and retries).
    With (PHASE, name) events it also returns `phases`: per run phase (a name may recur) the highest
    allocated and reserved bytes while it ran, and allocated / reserved when it last ended."""
    a = CachingAllocator()
    live: dict = {}
    phases: dict = {}
    cur = None
    for key, n in events:
        if key == PHASE:
            cur = phases.setdefault(n, {"peak_allocated": 0, "peak_reserved": 0})
            _phase_peaks(cur, a)
            cur["end_allocated"], cur["end_reserved"] = a.allocated, a.reserved
            continue
        if key == RESET:
            a.reset_peaks()
        elif n > 0:
            live[key] = a.malloc(n)
            if cur is not None:
                _phase_peaks(cur, a)
        elif n < 0:
            live[key] = live.pop(-n)
        else:
            h = live.pop(key, None)
            if h is not None:
                a.free(h)
        if cur is not None:
            cur["end_allocated"], cur["end_reserved"] = a.allocated, a.reserved
    extra = {"phases": phases} if phases else {}
    return {**extra, "peak_requested": a.peak_requested, "peak_allocated": a.peak_allocated,
            "peak_reserved": a.peak_reserved, "peak_pinned": a.peak_pinned, "segments": a.segments}


def _phase_peaks(cur: dict, a: CachingAllocator) -> None:
    cur["peak_allocated"] = max(cur["peak_allocated"], a.allocated)
    cur["peak_reserved"] = max(cur["peak_reserved"], a.reserved)
