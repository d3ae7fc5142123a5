"""Units: bytes are integers inside the engine; GiB (2^30) and MiB (2^20) only at the edges, labelled."""
from __future__ import annotations

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30


def ceil_div(a: int, b: int) -> int:
    """The smallest integer >= a / b (for partitions, blocks, shards)."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """PyTorch's CachingHostAllocator rounds every pinned block up to a power of two
    (ATen/core/CachingHostAllocator.h, torch 2.13; docs/deepspeed.md §2.8)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def gib_text(n: int, digits: int = 2) -> str:
    """Bytes -> '12.34 GiB'."""
    return f"{n / GIB:.{digits}f} GiB"
