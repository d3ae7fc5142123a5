"""What nvidia-smi shows beyond the tensors: the CUDA context, NCCL, and the caching allocator.

- CUDA context + kernels: with lazy module loading (CUDA >= 11.7, PyTorch's default) a PyTorch
  process holds about 0.5 GiB before its first tensor on Ampere/Hopper/Blackwell parts and about
  0.3 GiB on Volta/Turing (fewer, smaller kernel images). Outside the caching allocator.
- cuBLAS workspaces are allocated through the caching allocator (counted in `reserved`): 32 MiB on
  sm90+, 4 MiB + 8 MiB elsewhere per handle/stream (CUDABlasHandlePool.cpp getChosenWorkspaceSize).
- NCCL communicators (world > 1): channel buffers of NCCL_BUFFSIZE (4 MiB) per peer and channel and
  proxy state; about 0.25 GiB per process on one node, outside the allocator.
- Caching allocator: `max_memory_reserved` exceeds `max_memory_allocated` by the blocks cached
  after transients (`allocator_reserve`), measured by replaying the traced grid through the
  allocator's rules (tools/memtrace/allocator.py, scripts/allocator_cache.py).
  Full fine-tuning whose optimizer creates its states in the first step strands some of the step's
  segments under them (`lazy_state_cache`, docs/tracer.md section 10f).
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


# Per byte of activations and logits live at the peak: the bytes the caching allocator keeps cached (`cache`)
# and, of those, the bytes in segments that also hold a live block (`pinned`: what a full GPU cannot get back).
# From the tracer grid replayed through the allocator's rules (scripts/allocator_cache.py, which prints them):
# the cache is the median of 9 plans with activation checkpointing (0.22-0.70) and of 19 that save their
# activations (0.01-0.27); the pinned part is the upper decile (medians 0.056 and 0.043), since a "fits" that
# fails costs a launch. Plans whose activations and logits are under 5 % of the peak are left out: their cache
# is the gradients' and optimizer states' blocks (docs/tracer.md section 8).
CACHE_PER_TRANSIENT = {"checkpointed": 0.37, "saved": 0.087}
PINNED_PER_TRANSIENT = {"checkpointed": 0.187, "saved": 0.187}


def allocator_reserve(transient: int, checkpointed: bool, room: int) -> Term:
    """Reserved minus allocated at the peak: free blocks the caching allocator keeps in its segments and
    cannot hand to the requests that set the peak (c10/cuda/CUDACachingAllocator.cpp: best-fit reuse, no
    merging across segments, segments kept until empty_cache). The transients leave them: under activation
    checkpointing every layer's forward frees its intermediates, whose blocks the loss's logits-sized requests
    cannot use, so the cache is a larger share of `transient` (activations and logits live at the peak) than
    when the forward saves its activations. On a full GPU the allocator frees its wholly free segments and
    retries a failed cudaMalloc (release_cached_blocks), so the cache shrinks to what `room` (the capacity
    less the rest) leaves, never below the pinned part. Shown as its own `allocator_cache` line."""
    return Term("allocator_cache", "runtime", allocator_cache_bytes(transient, checkpointed, room), ALL, RESERVE)


def allocator_cache_bytes(transient: int, checkpointed: bool, room: int) -> int:
    """``allocator_reserve(...).nbytes`` (the aggregator weighs every phase's and keeps one)."""
    kind = "checkpointed" if checkpointed else "saved"
    cache = int(transient * CACHE_PER_TRANSIENT[kind])
    pinned = int(transient * PINNED_PER_TRANSIENT[kind])
    return min(cache, max(pinned, room))


# Per byte of the smaller of (optimizer states created lazily, activations and logits at their largest): the
# segments the first optimizer.step's states strand. The median of the three full fine-tuning recipe replays
# (tools/memtrace/golden/run: HF Trainer 0.30, LitGPT 0.17, torchtune 0.31; docs/tracer.md section 10f).
LAZY_STATE_SHARE = 0.30


def lazy_state_cache(states: int, transient: int) -> int:
    """Reserved above the steady step's allocated peak when the optimizer states are created in the first
    optimizer.step, not at init: torch.optim's AdamW / SGD (`_init_group`: `state["exp_avg"] = torch.zeros_like`
    when `len(state) == 0`), torchtune's and LitGPT's optimizers (torch.optim) and bitsandbytes' (`init_state` in
    `step`). By then the first step's activations and logits have been freed, and best fit puts the states into
    those cached blocks (c10/cuda/CUDACachingAllocator.cpp: no merging across segments, segments kept), so the
    second step's transients no longer find their own blocks free and open fresh segments around the states
    (the replay of the torchtune recipe: reserved 10,886 MiB after step 1, 14,102 after step 2). The states can
    take at most what the transients freed before the optimizer step and displace at most what they are: a share of the smaller of the two.
    DeepSpeed's ZeRO optimizers create their states at init (stage_1_and_2.py / stage3.py
    `initialize_optimizer_states`: a step on zero gradients "to prevent memory fragmentation"), before any
    transient: no such term there."""
    return int(LAZY_STATE_SHARE * min(states, transient))


def stream_cache(nbytes: int) -> Term:
    """Blocks cached for another stream (FSDP's all-gather stream) in the phases where no tensor occupies
    them: reserved, never allocated (memory/frameworks.py unshard_stream_pool)."""
    return Term("stream_cache", "runtime", nbytes, ALL, RESERVE)
