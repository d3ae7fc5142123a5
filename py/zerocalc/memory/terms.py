"""A memory term: bytes that live on the GPU (or the host) during some phases of a training step.

Phases of one steady-state step (step >= 2, optimizer states exist):
- ``fwd``:      end of forward (activations kept, the loss being computed);
- ``loss_bwd``: start of backward, inside the loss gradient (all activations + 12·s·b·V logits);
- ``bwd_end``:  end of backward (all gradients, DeepSpeed reduce buffers);
- ``step``:     the optimizer step (flat and fp32 gradient copies);
- ``step_norm``: inside the step, the gradient norm (fp64 copies), before the step's own transients:
                 everything of ``step`` but the ``step_transient`` term.
Layer-by-layer backward moments (estimate.py): ``recompute`` / ``recompute_top`` with full checkpointing
(the bottom / top layer recomputed), ``bwd_top`` for FSDP without it (the top layer's backward, whose
units are gathered one by one).
A term is the same size in every phase it lives in; transients are terms that live in one phase.
"""
from __future__ import annotations

from dataclasses import dataclass

STEP_NORM = "step_norm"
RECOMPUTE = "recompute"          # checkpointing: the last layer recomputed, nearly all gradients there
RECOMPUTE_TOP = "recompute_top"  # checkpointing: the first layer recomputed, every checkpoint input alive
BWD_TOP = "bwd_top"              # FSDP without checkpointing: the top layer's backward, all activations alive
PHASES = ("fwd", "loss_bwd", "bwd_end", "step", STEP_NORM)
ALL = frozenset(PHASES)
FWD_BWD = frozenset(("fwd", "loss_bwd", "bwd_end"))
BWD = frozenset(("loss_bwd", "bwd_end"))
AFTER_BWD = frozenset(("bwd_end", "step"))
MID_BWD = frozenset((RECOMPUTE, RECOMPUTE_TOP, BWD_TOP))   # layer-by-layer backward moments
TOP_BWD = frozenset((RECOMPUTE_TOP, BWD_TOP))              # the top layer's backward (with / without checkpointing)

COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters",
              "buffers", "runtime")


@dataclass(frozen=True)
class Term:
    name: str                 # detail key, e.g. "fp32_master", "ipg_bucket"
    component: str            # one of COMPONENTS
    nbytes: int
    phases: frozenset = ALL
    place: str = "gpu"        # "gpu" or "host"
    pinned: bool = False      # host: page-locked through PyTorch (rounded to a power of two)
    allocator: bool = True    # gpu: inside PyTorch's caching allocator (paged optimizer states are not)
    cached: bool = False      # gpu: blocks the allocator keeps for another stream, no tensor in them
                              # (counted in reserved, not in allocated)

    def live(self, phase: str) -> int:
        if phase == STEP_NORM and self.name != "step_transient" and "step" in self.phases:
            return self.nbytes
        return self.nbytes if phase in self.phases else 0


def gpu(name: str, component: str, nbytes: int, phases=ALL, allocator: bool = True, cached: bool = False) -> Term:
    return Term(name, component, int(nbytes), frozenset(phases), "gpu", False, allocator, cached)


def host(name: str, nbytes: int, pinned: bool = False) -> Term:
    return Term(name, "host", int(nbytes), ALL, "host", pinned)


def next_pow2(n: int) -> int:
    """PyTorch's CachingHostAllocator rounds every pinned block up to a power of two
    (ATen/core/CachingHostAllocator.h, torch 2.13; research/deepspeed.md §2.8)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()
