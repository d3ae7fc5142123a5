"""The CUDA out-of-memory message in every wording PyTorch has printed, read into numbers.

Wordings (c10/cuda/CUDACachingAllocator.cpp, ``DeviceCachingAllocator::malloc``, by release):

* PyTorch 1.0-1.3: ``CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity;
  8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)`` - "cached" is reserved-but-unallocated.
* PyTorch 1.4-2.0: ``... 9.28 GiB free; 1.24 GiB reserved in total by PyTorch)`` - reserved in total
  (allocated + cached), later followed by "If reserved memory is >> allocated memory try setting
  max_split_size_mb to avoid fragmentation".
* PyTorch 2.1: ``Tried to allocate 1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of which 0 bytes is free.
  [Process 20398 has 14.52 GiB memory in use. | Including non-PyTorch memory, this process has 3.44 GiB
  memory in use.] Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB is reserved by
  PyTorch but unallocated.`` (the "capacty" typo is 2.1's).
* PyTorch 2.2+: the same with "capacity" and the ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` hint;
  2.4+ adds ``, with 104.00 MiB allocated in private pools (e.g., CUDA Graphs)`` (PR #124673; the
  "allocated by PyTorch" figure then includes the private pools).
* The exception's name alone (``OutOfMemoryError``), or a person's "OOM" (``MENTIONED``, weakest of all).
* Without numbers: ``CUDA error: out of memory`` (a cudaMalloc/kernel failure outside the caching allocator),
  ``CUDA driver error: out of memory`` (C10_CUDA_DRIVER_CHECK around the driver VMM calls that back
  expandable segments), ``cuda runtime error (2) : out of memory`` (THC, PyTorch <= 1.0), ``HIP out of memory``.

Each field is searched for on its own after the "Tried to allocate" anchor, so a message cut off by a
terminal or an issue excerpt still yields every figure it prints.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .sizes import SIZE, to_bytes

_WS = re.compile(r"\s+")
ANCHOR = re.compile(r"(?:CUDA|HIP) out of memory\.\s*Tried to allocate " + SIZE, re.IGNORECASE)
WORDING_ONLY = (
    ("cuda_driver_error", re.compile(r"CUDA driver error: out of memory", re.IGNORECASE)),
    ("cuda_error", re.compile(r"CUDA error:\s*out of memory", re.IGNORECASE)),
    ("cuda_runtime_error", re.compile(r"cuda runtime error \(2\)\s*:\s*out of memory", re.IGNORECASE)),
    ("cuda_oom_bare", re.compile(r"(?:CUDA|HIP) out of memory", re.IGNORECASE)),
    ("cublas_alloc", re.compile(r"CUBLAS_STATUS_ALLOC_FAILED")),
    # the exception class alone (an IPython header "OutOfMemoryError   Traceback", a title): torch.OutOfMemoryError
    # (torch.cuda.OutOfMemoryError before 2.5) is what the caching allocator raises (c10/util/Exception.h)
    ("oom_error_class", re.compile(r"\b(?:torch\.)?(?:cuda\.)?OutOfMemoryError\b")),
)
# "OOM" written by a person (an issue title, a note) with nothing more specific: read last, after every other kind
MENTIONED = re.compile(r"(?<![A-Za-z0-9_-])OOM(?![A-Za-z0-9_-])(?!\s*kill)", re.IGNORECASE)
_WINDOW = 900   # characters after the anchor that belong to one message

_OLD_GPU = re.compile(r"^\s*\(GPU (\d+);")
_OLD_TOTAL = re.compile(SIZE + r" total capacity")
_OLD_ALLOC = re.compile(SIZE + r" already allocated")
_OLD_FREE = re.compile(SIZE + r" free")
_OLD_RESERVED = re.compile(SIZE + r" reserved in total by PyTorch")
_OLD_CACHED = re.compile(SIZE + r" cached\)")
_NEW_GPU = re.compile(r"^\.?\s*GPU (\d+) has a total capac")
_NEW_TOTAL = re.compile(r"total capaci?ty of " + SIZE)
_NEW_FREE = re.compile(r"of which " + SIZE + r" is free")
_NEW_THIS = re.compile(r"this process has " + SIZE + r" memory in use")
_NEW_PROC = re.compile(r"Process (\d+) has " + SIZE + r" memory in use")
_NEW_ALLOC = re.compile(r"Of the allocated memory " + SIZE + r" is allocated by PyTorch")
_NEW_POOLS = re.compile(r"with " + SIZE + r" allocated in private pools")
_NEW_UNALLOC = re.compile(SIZE + r" is reserved by PyTorch but unallocated")


@dataclass(frozen=True)
class OomNumbers:
    """What one CUDA OOM message states, in bytes (None where it does not say)."""
    wording: str                      # torch-1.0 | torch-1.4 | torch-2.1 | torch-2.2 | torch-2.4 | <no-number kind>
    tried_to_allocate_bytes: int | None = None
    gpu_total_bytes: int | None = None
    allocated_bytes: int | None = None
    reserved_unallocated_bytes: int | None = None
    free_bytes: int | None = None
    gpu_index: int | None = None
    this_process_bytes: int | None = None       # "Including non-PyTorch memory, this process has X in use"
    processes: tuple = ()                       # ((pid, bytes), ...) from "Process N has X memory in use"
    private_pools_bytes: int | None = None
    position: int = 0                           # offset of the message in the whitespace-collapsed text


def _grab(rx: re.Pattern, text: str) -> int | None:
    m = rx.search(text)
    return to_bytes(m.group(1), m.group(2)) if m else None


def collapse(text: str) -> str:
    """Whitespace runs (wrapped lines included) to single spaces, so a message split by a terminal reads whole."""
    return _WS.sub(" ", text)


def _cut(rest: str) -> str:
    """The message ends where the next OOM message begins (multi-rank logs repeat it)."""
    nxt = re.search(r"(?:CUDA|HIP) out of memory\.", rest)
    return rest[: nxt.start()] if nxt else rest


def parse_oom(text: str) -> OomNumbers | None:
    """The first CUDA OOM message in ``text`` (any wording), or None when there is none."""
    flat = collapse(text)
    m = ANCHOR.search(flat)
    if m is None:
        for name, rx in WORDING_ONLY:
            w = rx.search(flat)
            if w:
                return OomNumbers(wording=name, position=w.start())
        return None
    tried = to_bytes(m.group(1), m.group(2))
    rest = _cut(flat[m.end(): m.end() + _WINDOW])
    old = _OLD_GPU.search(rest)
    if old:
        alloc = _grab(_OLD_ALLOC, rest)
        reserved = _grab(_OLD_RESERVED, rest)
        cached = _grab(_OLD_CACHED, rest)
        unalloc = cached if cached is not None else (
            reserved - alloc if reserved is not None and alloc is not None else None)
        return OomNumbers(
            wording="torch-1.0" if cached is not None else "torch-1.4", tried_to_allocate_bytes=tried,
            gpu_total_bytes=_grab(_OLD_TOTAL, rest), allocated_bytes=alloc, reserved_unallocated_bytes=unalloc,
            free_bytes=_grab(_OLD_FREE, rest), gpu_index=int(old.group(1)), position=m.start())
    new = _NEW_GPU.search(rest)
    pools = _grab(_NEW_POOLS, rest)
    wording = "torch-2.4" if pools is not None else ("torch-2.1" if "capacty" in rest else "torch-2.2")
    return OomNumbers(
        wording=wording, tried_to_allocate_bytes=tried, gpu_total_bytes=_grab(_NEW_TOTAL, rest),
        allocated_bytes=_grab(_NEW_ALLOC, rest), reserved_unallocated_bytes=_grab(_NEW_UNALLOC, rest),
        free_bytes=_grab(_NEW_FREE, rest), gpu_index=int(new.group(1)) if new else None,
        this_process_bytes=_grab(_NEW_THIS, rest),
        processes=tuple((int(p.group(1)), to_bytes(p.group(2), p.group(3))) for p in _NEW_PROC.finditer(rest)),
        private_pools_bytes=pools, position=m.start())

