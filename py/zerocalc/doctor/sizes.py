"""Sizes as PyTorch prints them, back to integer bytes.

PyTorch's caching allocator formats every figure of its OOM message with ``format_size``
(c10/cuda/CUDACachingAllocator.cpp): ``N bytes`` up to 1 KiB, then ``X.XX KiB``, ``X.XX MiB``, ``X.XX GiB``
with two decimals, binary units (KiB = 2^10). DeepSpeed's and NCCL's lines print plain byte counts.
The value read back is therefore exact only to the print's rounding: half of the last printed digit times
the unit (``print_tolerance``).
"""
from __future__ import annotations

import re

UNITS = {"bytes": 1, "byte": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "pib": 1 << 50, "eib": 1 << 60}

# a number followed by a unit, as the allocator prints it ("781.59 MiB", "0 bytes", "31.75\nGiB")
SIZE = r"(\d+(?:\.\d+)?)\s*(bytes|byte|KiB|MiB|GiB|TiB|PiB|EiB)"
_SIZE_RE = re.compile(SIZE, re.IGNORECASE)


def to_bytes(number: str, unit: str) -> int:
    """'2.26', 'GiB' -> round(2.26 * 2^30) bytes."""
    scale = UNITS[unit.lower()]
    if "." in number:
        whole, frac = number.split(".", 1)
        # exact decimal arithmetic: (whole * 10^k + frac) * scale / 10^k, rounded half up
        k = len(frac)
        num = (int(whole) * 10 ** k + int(frac)) * scale
        return (2 * num + 10 ** k) // (2 * 10 ** k)
    return int(number) * scale


def parse_size(text: str) -> int | None:
    """The first printed size in ``text`` as bytes, or None."""
    m = _SIZE_RE.search(text)
    return to_bytes(m.group(1), m.group(2)) if m else None


def print_tolerance(number: str, unit: str) -> int:
    """Half a unit of the last printed digit, in bytes ('2.26 GiB' -> 0.005 GiB)."""
    decimals = len(number.split(".", 1)[1]) if "." in number else 0
    return (UNITS[unit.lower()] // 2) // (10 ** decimals) if decimals else UNITS[unit.lower()] // 2


def format_gib(n: int | None) -> str:
    """Bytes as GiB for messages (2^30, two decimals); MiB below 1 GiB."""
    if n is None:
        return "?"
    if abs(n) < (1 << 30):
        return f"{n / (1 << 20):.2f} MiB" if abs(n) >= (1 << 20) else f"{n} bytes"
    return f"{n / (1 << 30):.2f} GiB"
