"""A memory term: bytes that live somewhere during some moments of a steady training step.

Every term declares its whole lifetime (the set of phases it is alive in) and where its bytes live; the
aggregator (estimate.py) sums the live terms of each phase without knowing any term by name.

Phases of one steady-state step (step >= 2, optimizer states exist):
- ``fwd``:       end of forward (activations kept, the loss being computed);
- ``loss_bwd``:  start of backward, inside the loss gradient (all activations + 12·s·b·V logits);
- ``bwd_end``:   end of backward (all gradients, DeepSpeed reduce buffers);
- ``step``:      the optimizer step (flat and fp32 gradient copies);
- ``step_norm``: inside the step, the gradient norm (fp64 copies), before the step's own transients.
Layer-by-layer backward moments, evaluated where they exist (``phases_of``): ``recompute`` /
``recompute_top`` with full checkpointing (the bottom / top layer recomputed), ``bwd_top`` for FSDP
without it (the top layer's backward, whose units are gathered one by one); ``fwd_top``, inside the top
layer's forward (every layer's saved activations, the head and logits not yet), where a term lives there and
not at the end of forward: torchtune's NF4 weight dequantized for one matmul (memory/inputs.py dequant_bytes);
``head_bwd``, lm_head's backward after the loss's, where a term lives there alone (memory/head_backward.py).
A term is the same size in every phase it lives in; transients are terms that live in one phase.
"""
from __future__ import annotations

from typing import NamedTuple

FWD, LOSS_BWD, BWD_END_PHASE, STEP_PHASE = "fwd", "loss_bwd", "bwd_end", "step"
STEP_NORM = "step_norm"
RECOMPUTE = "recompute"          # checkpointing: the last layer recomputed, nearly all gradients there
RECOMPUTE_TOP = "recompute_top"  # checkpointing: the first layer recomputed, every checkpoint input alive
BWD_TOP = "bwd_top"              # FSDP without checkpointing: the top layer's backward, all activations alive
FWD_TOP = "fwd_top"              # inside the top layer's forward: saved activations of every layer, no logits yet
HEAD_BWD = "head_bwd"            # lm_head's backward, after the loss's (memory/head_backward.py)
PHASES = (FWD, LOSS_BWD, BWD_END_PHASE, STEP_PHASE, STEP_NORM)
MID_BWD = frozenset((RECOMPUTE, RECOMPUTE_TOP, BWD_TOP))   # layer-by-layer backward moments
TOP_BWD = frozenset((RECOMPUTE_TOP, BWD_TOP))              # the top layer's backward (with / without checkpointing)
TOP_ONLY = frozenset((BWD_TOP,))                          # a term there alone makes the moment exist (phases_of)
HEAD_ONLY = frozenset((HEAD_BWD,))                        # likewise lm_head's backward (memory/head_backward.py)

# Lifetimes, as sets of phases. "Backward" includes its layer-by-layer moments.
FWD_IN = frozenset((FWD, FWD_TOP))                         # alive through forward (from its start or its first layer)
ALL = frozenset(PHASES) | MID_BWD | {FWD_TOP, HEAD_BWD}    # allocated before the step and never freed
STEP = frozenset((STEP_PHASE, STEP_NORM))                  # the whole optimizer step
BWD_END = frozenset((BWD_END_PHASE,)) | MID_BWD            # during backward, until its end
BWD = BWD_END | {LOSS_BWD, HEAD_BWD}                       # from the loss gradient to the end of backward
FWD_BWD = BWD | FWD_IN                                     # from forward to the end of backward
AFTER_BWD = BWD_END | STEP                                 # produced in backward, used by the step

COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters",
              "buffers", "runtime")

# Where a term's bytes live.
ALLOCATOR = "allocator"          # GPU, PyTorch's caching allocator: counted by max_memory_allocated
MANAGED = "managed"              # GPU, CUDA managed (paged) memory: resident as far as there is room
STREAM_CACHE = "stream_cache"    # GPU, blocks the allocator keeps for another stream: reserved, no tensor
RESERVE = "reserve"              # GPU, reserved by the allocator beyond the live tensors (cache, rounding)
DRIVER = "driver"                # GPU, outside the allocator: CUDA context, NCCL buffers
COUNTED = "counted"              # not on the GPU, yet in torch's allocated / reserved counters (a sleeping vLLM's
#                                  CuMemAllocator pool, unmapped behind the caching allocator's back)
HOST_PINNED = "host_pinned"      # host, page-locked through PyTorch (rounded to a power of two)
HOST_PAGEABLE = "host_pageable"  # host, ordinary memory
ON_GPU = frozenset((ALLOCATOR, MANAGED, STREAM_CACHE, RESERVE, DRIVER))


class Term(NamedTuple):
    """Immutable; a named tuple, not a frozen dataclass: an estimate builds a few hundred and a tuple is built in
    a fraction of the time (frozen dataclasses set each field through object.__setattr__)."""
    name: str                 # detail key, e.g. "fp32_master", "ipg_bucket"
    component: str            # one of COMPONENTS ("host" for host-side buffers)
    nbytes: int
    phases: frozenset = ALL   # every phase the term is alive in
    where: str = ALLOCATOR

    def live(self, phase: str) -> int:
        return self.nbytes if phase in self.phases else 0

    @property
    def on_gpu(self) -> bool:
        return self.where in ON_GPU


def gpu(name: str, component: str, nbytes: int, phases=ALL, where: str = ALLOCATOR) -> Term:
    return Term(name, component, int(nbytes), frozenset(phases), where)


def host(name: str, nbytes: int, pinned: bool = False, component: str = "host") -> Term:
    return Term(name, component, int(nbytes), ALL, HOST_PINNED if pinned else HOST_PAGEABLE)


def phases_of(plan, ts=()) -> tuple[str, ...]:
    """The moments of this plan's step: the steady phases, plus the layer-by-layer backward moments
    that exist (recompute with full checkpointing; the top layer's backward under FSDP without it, or where a
    term lives there alone: an MoE layer's expert weight gradient), and the top layer's forward where a term lives
    there and not at the end of forward (a forward-time transient)."""
    fwd_top = (FWD_TOP,) if any(FWD_TOP in t.phases and FWD not in t.phases for t in ts) else ()
    fwd_top += (HEAD_BWD,) if any(t.phases == HEAD_ONLY for t in ts) else ()
    if plan.activation_checkpointing == "full":
        return PHASES + (RECOMPUTE, RECOMPUTE_TOP) + fwd_top
    top = plan.framework == "fsdp" or any(t.phases == TOP_ONLY for t in ts)
    return PHASES + ((BWD_TOP,) if top else ()) + fwd_top
