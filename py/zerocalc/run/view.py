"""The one resolved view every run phase reads: the plan's model, dtypes and stack (memory/inputs.StepInputs,
resolved once), the run's moments with their defaults (run/defaults.py), and what the steady step leaves
resident between steps, taken from the step's own terms (so a phase never re-derives a term).

- ``state``: allocator terms alive through the whole step, from forward to the optimizer step (weights,
  master copies, optimizer states, DeepSpeed's persistent buffers), less the gradients a torch optimizer's
  `zero_grad(set_to_none=True)` frees after every step (HF Trainer, torchtune, LitGPT, torchtitan all call it);
  DeepSpeed keeps its flat gradient partitions (stage_1_and_2.py / stage3.py allocate them once).
- ``forward_extra``: what a forward adds besides activations and logits (ZeRO-3's gathered and prefetched
  parameters, FSDP's gathered root unit): an evaluation's forward gathers them just as training's does.
- ``driver``: bytes outside the allocator (CUDA context, NCCL), present in every phase.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..memory.inputs import StepInputs
from ..memory.terms import ALLOCATOR, COUNTED, DRIVER, FWD, STEP_PHASE, Term
from ..plan import Plan
from .defaults import Run, resolve


@dataclass(frozen=True)
class RunView:
    plan: Plan
    si: StepInputs
    run: Run
    state: tuple                 # of Term
    forward_extra: tuple         # of Term
    driver: int
    capacity: int
    step_reserved: int
    step_largest: int            # the largest tensor the step frees and allocates again (its cached blocks' size)
    kept_grads: tuple = ()       # of Term: gradients zero_grad leaves allocated (FSDP1's flat gradient shards)
    counted: int = 0             # bytes torch's counters hold off the device (memory/terms COUNTED)

    def state_bytes(self, *components: str) -> int:
        return sum(t.nbytes for t in self.state if not components or t.component in components)

    def by_component(self, terms) -> dict:
        out: dict = {}
        for t in terms:
            out[t.component] = out.get(t.component, 0) + t.nbytes
        return out


ZERO_GRAD_FREES = ("gradients", "tied_embedding_grad", "grad_shards", "grad_shards_last", "no_sync_unsharded_grads")


def _freed_by_zero_grad(plan: Plan, si: StepInputs, t: Term) -> bool:
    """torch's `zero_grad(set_to_none=True)` frees `.grad` (DDP's reducer buckets stay allocated); torch 1.x's
    default zeroes it in place (memory/stack.py `grads_kept`), which frees nothing."""
    return plan.framework != "deepspeed" and not si.stack.grads_kept and (t.component == "gradients"
                                                                           or t.name in ZERO_GRAD_FREES)


def kept_flat_grads(plan: Plan, si: StepInputs, terms: list) -> tuple:
    """FSDP1 with `use_orig_params` (accelerate's default) keeps the reduce-scattered gradient shard on the
    FlatParameter: zero_grad sets the original parameters' views to None, not the flat gradient, which lives until
    the unit's next unshard resets it. So a reload or a merge, which run no forward, still holds it (the FSDP
    probe's saves start from the resident plus 4P/N of sharded fp32 gradient, docs/tracer.md §10d); a save frees
    them all in the root's pre-state-dict hook (run/save.py), an evaluation's forward as it unshards each unit."""
    if plan.framework != "fsdp" or si.stack.fsdp_version != 1:
        return ()
    return tuple(t for t in terms if t.where == ALLOCATOR and t.name in ("grad_shards", "grad_shards_last"))


def run_view(plan: Plan, si: StepInputs, terms: list, capacity: int, step_reserved: int) -> RunView:
    alloc = [t for t in terms if t.where == ALLOCATOR and t.nbytes]
    state = tuple(t for t in alloc if FWD in t.phases and STEP_PHASE in t.phases
                  and not _freed_by_zero_grad(plan, si, t))
    extra = tuple(t for t in alloc if FWD in t.phases and STEP_PHASE not in t.phases
                  and t.component not in ("activations", "logits") and not _freed_by_zero_grad(plan, si, t))
    driver = sum(t.nbytes for t in terms if t.where == DRIVER)
    counted = sum(t.nbytes for t in terms if t.where == COUNTED)
    return RunView(plan, si, resolve(plan, si.stack), state, extra, driver, capacity, step_reserved,
                   step_largest_block(plan, si), kept_flat_grads(plan, si, terms), counted)


def step_largest_block(plan: Plan, si: StepInputs) -> int:
    """The largest tensor a steady step frees and requests again, so the largest block its cached segments hold:
    the fp32 logits (4·b·s·V), a gradient the optimizer step frees (`zero_grad(set_to_none=True)`: the largest
    trainable tensor), or an MLP-wide activation."""
    arch, b, s = si.arch, plan.micro_batch_size, plan.seq_len
    e = 2 if si.dt.autocast else si.dt.compute
    logits = 4 * b * s * arch.vocab_size if arch.causal_lm else 0
    grad = (si.dt.grad if plan.method == "full" else si.dt.adapter) * max(si.trainable.sizes, default=0)
    return max(logits, grad, e * b * s * max(arch.intermediate_size, arch.hidden_size))
