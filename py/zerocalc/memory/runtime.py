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
  peak (`allocator_reserve`), an empirical figure shown as its own line; a segment-level model would
  need the order and sizes of every allocation, which the plan does not fix.
"""
from __future__ import annotations

from ..units import MIB
from .terms import ALL, DRIVER, RESERVE, Term, gpu


EAGER_CONTEXT = 1343 * MIB   # transformers v4.27 perf_train_gpu_one: "GPU memory occupied: 1343 MB" on a V100


def runtime_terms(compute_capability: str | None, world: int, eager_context: bool = False) -> list[Term]:
    """The CUDA context and NCCL (outside the allocator) and the cuBLAS workspace (inside it). An eager
    context (CUDA < 11.7 / PyTorch < 1.13 load every kernel module at start) takes what the HF
    single-GPU performance guide measured for a bare PyTorch process."""
    major = _major(compute_capability)
    context = EAGER_CONTEXT if eager_context else (512 * MIB if major >= 8 else 320 * MIB)
    t = [gpu("cublas_workspace", "runtime", 32 * MIB if major >= 9 else 12 * MIB),
         gpu("cuda_context", "runtime", context, where=DRIVER)]
    if world > 1:
        t.append(gpu("nccl", "runtime", 256 * MIB, where=DRIVER))
    return t


def _major(cc: str | None) -> int:
    try:
        return int(str(cc).split(".")[0])
    except (TypeError, ValueError):
        return 8  # AMD / Gaudi / unknown: treat like a current part


RESERVE_FRACTION = 0.06


def allocator_reserve(peak_allocated: int) -> Term:
    """Reserved minus allocated at the peak: blocks the caching allocator keeps after transients and
    cannot reuse for differently sized requests, and the rounding of large blocks to 2 MiB. Not
    derivable from the plan alone; docs/tracer.md §5 reports `max_memory_reserved` 5-15 % above
    `max_memory_allocated` for training steps. 6 % is the low-middle of that band (an empirical
    figure, shown as its own `allocator_cache` line)."""
    return Term("allocator_cache", "runtime", int(peak_allocated * RESERVE_FRACTION), ALL, RESERVE)


def stream_cache(nbytes: int) -> Term:
    """Blocks cached for another stream (FSDP's all-gather stream) in the phases where no tensor occupies
    them: reserved, never allocated (memory/frameworks.py unshard_stream_pool)."""
    return Term("stream_cache", "runtime", nbytes, ALL, RESERVE)
