"""What nvidia-smi shows beyond the tensors: the CUDA context, NCCL, and the caching allocator.

- CUDA context + kernels: with lazy module loading (CUDA >= 11.7, PyTorch's default) a PyTorch
  process holds about 0.5 GiB before its first tensor on Ampere/Hopper/Blackwell parts and about
  0.3 GiB on Volta/Turing (fewer, smaller kernel images). Outside the caching allocator.
- cuBLAS workspaces are allocated through the caching allocator (counted in `reserved`): 32 MiB on
  sm90+, 4 MiB + 8 MiB elsewhere per handle/stream (CUDABlasHandlePool.cpp getChosenWorkspaceSize).
- NCCL communicators (world > 1): channel buffers of NCCL_BUFFSIZE (4 MiB) per peer and channel and
  proxy state; about 0.25 GiB per process on one node, outside the allocator.
- Caching allocator: `max_memory_reserved` exceeds `max_memory_allocated` by the blocks cached
  after transients and the rounding of large blocks to 2 MiB. Modelled as a flat fraction of the
  peak (`allocator_slack`), an empirical figure shown as its own line; a segment-level model would
  need the order and sizes of every allocation, which the plan does not fix.
"""
from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class Runtime:
    cuda_context: int
    nccl: int
    cublas_workspace: int

    @property
    def outside_allocator(self) -> int:
        return self.cuda_context + self.nccl


def runtime(compute_capability: str | None, world: int) -> Runtime:
    major = _major(compute_capability)
    context = 512 * MIB if major >= 8 else 320 * MIB
    workspace = 32 * MIB if major >= 9 else 12 * MIB
    nccl = 256 * MIB if world > 1 else 0
    return Runtime(cuda_context=context, nccl=nccl, cublas_workspace=workspace)


def _major(cc: str | None) -> int:
    try:
        return int(str(cc).split(".")[0])
    except (TypeError, ValueError):
        return 8  # AMD / Gaudi / unknown: treat like a current part


RESERVE_FRACTION = 0.06


def allocator_slack(peak_allocated: int) -> int:
    """Reserved minus allocated at the peak: blocks the caching allocator keeps after transients and
    cannot reuse for differently sized requests, and the rounding of large blocks to 2 MiB. Not
    derivable from the plan alone; research/tracer.md §5 reports `max_memory_reserved` 5-15 % above
    `max_memory_allocated` for training steps. 6 % is the low-middle of that band (an empirical
    figure, shown as its own `allocator_cache` line)."""
    return int(peak_allocated * RESERVE_FRACTION)
