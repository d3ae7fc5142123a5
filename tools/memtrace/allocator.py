"""Replay of PyTorch's CUDA caching allocator over a traced allocation log: what `max_memory_allocated`
and `max_memory_reserved` would read for the storages the tracer saw, in the order it saw them, over one
step or thousands of them (tools/memtrace/runs.py).

The rules are those of c10/cuda/CUDACachingAllocator.cpp (torch 2.x, DeviceCachingAllocator), one stream:
- round_size: every request rounds up to a multiple of 512 B (kMinBlockSize), at least 512 B;
- get_pool: rounded sizes <= 1 MiB (kSmallSize) come from the small pool, larger ones from the large pool;
- get_free_block: the smallest cached block of the pool at least that large (best fit; ties: lowest address);
  with `max_split_size` a request under it never takes a block at or above it, and a request at or above it
  takes a cached block only if that is less than kLargeBuffer (20 MiB) larger ("oversize" blocks);
- get_allocation_size when none is cached: small requests open a 2 MiB segment (kSmallBuffer), large
  ones under 10 MiB (kMinLargeAlloc) a 20 MiB one (kLargeBuffer), larger ones their size rounded up to
  2 MiB (kRoundLarge);
- should_split: the block is split when what remains is >= 512 B (small pool, or expandable segments) or,
  in the large pool, > 1 MiB and the request is under `max_split_size`; otherwise the caller gets the whole
  block, and `allocated_bytes` counts all of it (it adds block->size);
- free_block / try_merge_blocks: a freed block merges with free neighbours of its segment (both mapped or
  both unmapped); segments are kept until release_cached_blocks;
- malloc's retry path when a segment does not fit the device (`capacity`): garbage_collect_cached_blocks
  first when `garbage_collection_threshold` is set (it acts only under a memory fraction, `set_fraction`:
  here, a capacity), then alloc_block; on failure release_available_cached_blocks (with `max_split_size`:
  the smallest oversize cached block large enough, else the largest ones until the request is covered) and
  retry; then release_cached_blocks (what `torch.cuda.empty_cache()` calls: every free block that is a whole
  segment is cudaFree'd; in expandable segments every whole page inside a free block is unmapped) and retry;
  then CUDA out of memory (`OutOfMemory`);
- expandable_segments:True (Note [Expandable Segments], ExpandableSegment, find_expandable_block,
  map_block, unmap_block): one virtual segment per pool and stream, mapped in pages of kSmallBuffer (2 MiB,
  small pool) or kLargeBuffer (20 MiB, large pool); a request no cached block serves maps the pages from the
  lowest address where free and unmapped space together fit it (the free block before the unmapped tail
  grows), reserved counts mapped pages; free pages are unmapped only by release_cached_blocks.
A side stream's blocks (FSDP's all-gather stream) are not replayed.
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
UNLIMITED = 1 << 62              # CUDAAllocatorConfig::max_split_size() default: SIZE_MAX
VIRTUAL = 5 << 48                # an expandable segment's address range, whole 2 and 20 MiB pages (the source
                                 # reserves 1 1/8 x the GPU's memory)


def round_size(n: int) -> int:
    return K_MIN_BLOCK if n < K_MIN_BLOCK else -(-n // K_MIN_BLOCK) * K_MIN_BLOCK


def allocation_size(size: int) -> int:
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


@dataclass(frozen=True)
class Config:
    """PYTORCH_CUDA_ALLOC_CONF and the device: `max_split_size` in bytes (max_split_size_mb x MiB; None: no
    limit), `expandable_segments`, `garbage_collection_threshold` (a fraction of `capacity`; 0: off), and
    `capacity`: the bytes the allocator may reserve (None: unlimited, never out of memory)."""
    max_split_size: int | None = None
    expandable_segments: bool = False
    garbage_collection_threshold: float = 0.0
    capacity: int | None = None


class OutOfMemory(Exception):
    """malloc found no cached block and could not reserve one even after freeing the cache."""


@dataclass(eq=False)
class Segment:
    size: int
    live: int = 0          # allocated blocks in it
    page: int = 0          # expandable: the page size (0: a cudaMalloc'd segment)


@dataclass(eq=False)
class Block:
    addr: int
    size: int
    small: bool
    segment: Segment
    allocated: bool = False
    prev: "Block | None" = None
    next: "Block | None" = None
    mapped: bool = True
    gc_base: int = 0       # the pool's get_free_block count when the block was cached (its age's origin)


@dataclass
class CachingAllocator:
    config: Config = field(default_factory=Config)
    reserved: int = 0
    allocated: int = 0
    requested: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    peak_requested: int = 0
    pinned: int = 0              # reserved bytes in segments with a live block (releasable: the rest; not
                                 # kept for expandable segments, whose free pages all unmap)
    peak_pinned: int = 0
    segments: int = 0
    retries: int = 0             # mallocs that had to free cached memory (stats.num_alloc_retries, roughly)
    _free: dict = field(default_factory=lambda: {True: [], False: []})   # small? -> sorted [(size, addr, id)]
    _blocks: dict = field(default_factory=dict)                           # id -> free mapped Block
    _unmapped: dict = field(default_factory=lambda: {True: [], False: []})  # expandable: unmapped Blocks
    _calls: dict = field(default_factory=lambda: {True: 0, False: 0})      # get_free_blocks_call_count
    _next_addr: int = 0

    # -- the split limit and the gc switch, as the source reads them --------------------------------------
    @property
    def _max_split(self) -> int:
        return self.config.max_split_size or UNLIMITED

    @property
    def _gc(self) -> bool:
        return self.config.capacity is not None and self.config.garbage_collection_threshold > 0

    def malloc(self, nbytes: int) -> tuple[Block, int]:
        size = round_size(nbytes)
        small = size <= K_SMALL_SIZE
        block = self._get_free_block(size, small)
        if block is None:
            if self._gc:
                self._garbage_collect()
            block = self._alloc_block(size, small)
            if block is None:
                self.retries += 1
                if self._release_available(size, small):
                    block = self._alloc_block(size, small)
            if block is None:
                self._release_cached()
                block = self._alloc_block(size, small)
            if block is None:
                raise OutOfMemory(size)
        remaining = block.size - size
        if (remaining >= K_MIN_BLOCK) if (small or self.config.expandable_segments) else \
                (size < self._max_split and remaining > K_SMALL_SIZE):
            rest = Block(block.addr + size, remaining, small, block.segment, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert(rest)
        block.allocated = True
        if not block.segment.live and not block.segment.page:
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
        if not block.segment.live and not block.segment.page:
            self.pinned -= block.segment.size
        self.allocated -= block.size
        self.requested -= nbytes
        self._merge(block)
        self._insert(block)

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache (emptyCache -> release_cached_blocks)."""
        self._release_cached()

    def reset_peaks(self) -> None:
        """torch.cuda.reset_peak_memory_stats: each peak restarts from its current value."""
        self.peak_reserved, self.peak_allocated, self.peak_requested = self.reserved, self.allocated, self.requested
        self.peak_pinned = self.pinned

    # -- get_free_block ------------------------------------------------------------------------------------
    def _get_free_block(self, size: int, small: bool) -> Block | None:
        pool = self._free[small]
        if self._gc:
            self._calls[small] += 1
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i == len(pool):
            return None
        if self.config.expandable_segments:
            # best fit counts a block before the unmapped tail as the size it can grow to
            while i + 1 < len(pool) and self._growable(pool[i + 1]) < self._growable(pool[i]):
                i += 1
        bsize = pool[i][0]
        ms = self._max_split
        if size < ms <= bsize:
            return None                       # do not return an oversize block for a smaller request
        if size >= ms and bsize >= size + K_LARGE_BUFFER:
            return None                       # an oversize block serves requests within 20 MiB of it
        block = self._blocks.pop(pool.pop(i)[2])
        return block

    def _growable(self, entry: tuple) -> int:
        b = self._blocks[entry[2]]
        return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

    # -- alloc_block: a new segment, or pages mapped into the expandable one ---------------------------------
    def _fits(self, n: int) -> bool:
        return self.config.capacity is None or self.reserved + n <= self.config.capacity

    def _alloc_block(self, size: int, small: bool) -> Block | None:
        if self.config.expandable_segments:
            return self._alloc_expandable(size, small)
        seg = allocation_size(size)
        if not self._fits(seg):
            return None
        block = Block(self._next_addr, seg, small, Segment(seg))
        self._next_addr += seg
        self.reserved += seg
        self.segments += 1
        return block

    def _alloc_expandable(self, size: int, small: bool) -> Block | None:
        """try_allocate_expandable_block: the lowest address where free + unmapped space fits `size`
        (find_expandable_block), then map_block over the unmapped part, page by page."""
        if not self._unmapped[small]:
            page = K_SMALL_BUFFER if small else K_LARGE_BUFFER
            seg = Segment(VIRTUAL, page=page)
            addr = -(-self._next_addr // page) * page
            tail = Block(addr, VIRTUAL, small, seg, mapped=False)
            self._next_addr = addr + VIRTUAL
            self._unmapped[small].append(tail)
            self.segments += 1
        cand = None
        for u in sorted(self._unmapped[small], key=lambda b: b.addr):
            c = u.prev if (u.prev is not None and not u.prev.allocated and u.prev.mapped) else u
            room, b = 0, c
            while b is not None and not b.allocated and room < size:
                room, b = room + b.size, b.next
            if room >= size:
                cand = c
                break
        if cand is None:
            return None
        if not cand.mapped:
            if not self._map(cand, min(cand.size, size)):
                return None
            cand = self._last_mapped
        while cand.size < size:
            nxt = cand.next
            if not self._map(nxt, min(size - cand.size, nxt.size)):
                return None
            cand = self._last_mapped
        self._remove(cand)
        return cand

    def _map(self, b: Block, n: int) -> bool:
        """map_block: whole pages from the (page-aligned) start of an unmapped block; merges with the free
        mapped neighbours; sets `_last_mapped` to the merged free block."""
        page = b.segment.page
        n = -(-n // page) * page
        if not self._fits(n):
            return False
        self._unmapped[b.small].remove(b)
        if n < b.size:
            rest = Block(b.addr + n, b.size - n, b.small, b.segment, prev=b, next=b.next, mapped=False)
            if b.next is not None:
                b.next.prev = rest
            b.next, b.size = rest, n
            self._unmapped[b.small].append(rest)
        b.mapped = True
        self.reserved += n
        self._merge(b)
        self._insert(b)
        self._last_mapped = b
        return True

    # -- merging and the free pool ---------------------------------------------------------------------------
    def _merge(self, block: Block) -> None:
        for nb in (block.prev, block.next):
            if nb is not None and not nb.allocated and nb.mapped == block.mapped:
                if nb.mapped:
                    self._remove(nb)
                else:
                    self._unmapped[nb.small].remove(nb)
                if nb is block.prev:
                    block.addr, block.prev = nb.addr, nb.prev
                    if nb.prev is not None:
                        nb.prev.next = block
                else:
                    block.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = block
                block.size += nb.size

    def _insert(self, b: Block) -> None:
        b.gc_base = self._calls[b.small]
        self._blocks[id(b)] = b
        bisect.insort(self._free[b.small], (b.size, b.addr, id(b)))

    def _remove(self, b: Block) -> None:
        pool = self._free[b.small]
        i = bisect.bisect_left(pool, (b.size, b.addr, id(b)))
        assert pool[i][2] == id(b)
        pool.pop(i)
        del self._blocks[id(b)]

    # -- giving memory back ----------------------------------------------------------------------------------
    def _release_block(self, b: Block) -> None:
        """release_block: cudaFree of a cached block that is a whole segment."""
        self._remove(b)
        self.reserved -= b.size
        self.segments -= 1

    def _release_available(self, size: int, small: bool) -> bool:
        """release_available_cached_blocks: only with max_split_size; the smallest cached oversize block
        at least max(size, max_split_size), else the largest oversize blocks until that much is freed."""
        ms = self._max_split
        if ms == UNLIMITED or self.config.expandable_segments:
            return False
        key = max(size, ms)
        pool = self._free[small]
        i = bisect.bisect_left(pool, (key, -1, -1))
        whole = [e for e in pool[i:] if self._whole(e)]
        if whole:
            self._release_block(self._blocks[whole[0][2]])
            return True
        freed = 0
        for e in reversed([e for e in pool[:i] if e[0] >= ms and self._whole(e)]):
            if freed >= key:
                break
            freed += e[0]
            self._release_block(self._blocks[e[2]])
        return freed >= key

    def _whole(self, e: tuple) -> bool:
        b = self._blocks[e[2]]
        return b.prev is None and b.next is None and not b.segment.page

    def _release_cached(self) -> None:
        """release_cached_blocks -> release_blocks: cudaFree every cached block that is a whole segment;
        in an expandable segment unmap the whole pages inside each free block (unmap_block)."""
        for small in (False, True):
            for e in list(self._free[small]):
                b = self._blocks[e[2]]
                if b.segment.page:
                    self._unmap(b)
                elif b.prev is None and b.next is None:
                    self._release_block(b)

    def _unmap(self, b: Block) -> None:
        page = b.segment.page
        lo = -(-b.addr // page) * page
        hi = (b.addr + b.size) // page * page
        if hi <= lo:
            return
        self._remove(b)
        if lo > b.addr:
            before = Block(b.addr, lo - b.addr, b.small, b.segment, prev=b.prev, next=b)
            if b.prev is not None:
                b.prev.next = before
            b.prev = before
            self._insert(before)
        end = b.addr + b.size
        if end > hi:
            after = Block(hi, end - hi, b.small, b.segment, prev=b, next=b.next)
            if b.next is not None:
                b.next.prev = after
            b.next = after
            self._insert(after)
        b.addr, b.size, b.mapped = lo, hi - lo, False
        self.reserved -= hi - lo
        self._merge(b)
        self._unmapped[b.small].append(b)

    def _garbage_collect(self) -> None:
        """garbage_collect_cached_blocks: above garbage_collection_threshold x capacity, cudaFree unsplit
        cached large blocks whose age (get_free_block calls since cached) is at least the mean age, repeated
        until the excess is reclaimed or nothing more can go."""
        thr = int(self.config.garbage_collection_threshold * self.config.capacity)
        if self.reserved <= thr:
            return
        target, reclaimed = self.reserved - thr, 0
        calls = self._calls[False]
        free = [self._blocks[e[2]] for e in self._free[False]]
        free = [b for b in free if b.prev is None and b.next is None and not b.segment.page]
        total_age = sum(calls - b.gc_base for b in free)
        freed = True
        while reclaimed < target and freed and free:
            threshold = total_age / len(free)
            freed = False
            for b in list(free):
                if calls - b.gc_base >= threshold:
                    freed = True
                    reclaimed += b.size
                    total_age -= calls - b.gc_base
                    free.remove(b)
                    self._release_block(b)

    def _peaks(self) -> None:
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_pinned = max(self.peak_pinned, self.pinned)


RESET = -1   # an event that resets the peaks (the tracer logs it where a step begins)
PHASE = -2   # (PHASE, name): a run phase begins (tools/memtrace/run.py); the replay keeps each phase's peaks
STEP = -3    # an event where each traced step begins (tools/memtrace/runs.py cuts the log there; -2 is
             # the whole-run tracer's PHASE)


def replay(events: list, config: Config | None = None) -> dict:
    """events: (key, nbytes) allocates nbytes under key, (key, 0) frees it, (key, -old) hands old's block to
    key (autograd's in-place accumulation: no allocation), (RESET, 0) resets the peaks, (STEP, 0) is a mark.
    Returns the peaks since the last reset: requested (the tensors' bytes), allocated (what
    max_memory_allocated reads: whole blocks), reserved (max_memory_reserved: whole segments) and pinned
    (segments holding a live block: what a GPU without room to spare still needs, since on a failed
cudaMalloc the allocator frees its wholly free segments and retries).
    With (PHASE, name) events it also returns `phases`: per run phase (a name may recur) the highest
    allocated and reserved bytes while it ran, and allocated / reserved when it last ended."""
    a = CachingAllocator(config or Config())
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
        elif key == STEP:
            continue
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
