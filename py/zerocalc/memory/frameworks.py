"""Model states outside DeepSpeed: one process (HF Trainer / torchtune), PyTorch DDP, PyTorch FSDP.

- single: weights, gradients (kept across micro-steps when accumulating) and optimizer states, all
  whole on the GPU. HF Trainer's default optimizer is fused AdamW (`adamw_torch_fused`), which adds
  no step temporaries (research/tracer.md §4).
- ddp: the same, plus the DDP Reducer's flat gradient buckets: with `gradient_as_bucket_view=False`
  (the default in torch and accelerate) the buckets are separate tensors covering every trainable
  parameter (torch/csrc/distributed/c10d/reducer.cpp initialize_buckets).
- fsdp (FSDP1 through accelerate, transformer-layer auto wrap, use_orig_params): parameters,
  gradients and optimizer states sharded over the world (FULL_SHARD = stage 3; SHARD_GRAD_OP = 2
  keeps the gathered parameters from forward to backward); compute uses 16-bit gathered copies of
  the current and the prefetched unit; the root unit (embeddings, final norm, head) is not resharded
  after forward (FullyShardedDataParallel._post_forward for the root). CPU offload moves parameters,
  gradients and optimizer states to the host.
"""
from __future__ import annotations

from ..architecture import ModelArch
from ..plan import Plan
from .deepspeed import Trainable
from .optimizers import is_paged, optimizer_states, sharded_states
from .terms import AFTER_BWD, ALL, BWD, Term, gpu, host


def single_terms(plan: Plan, arch: ModelArch, tr: Trainable, shapes, frozen: int, wbytes: int, gbytes: int,
                 sbytes: int, gas: int) -> list[Term]:
    p = tr.numel
    t: list[Term] = []
    if frozen:
        t.append(gpu("frozen_params", "weights", frozen))
    t.append(gpu("trainable_params", tr.component, wbytes * p))
    states = optimizer_states(plan.optimizer, shapes, sbytes)
    t.append(gpu("optimizer_states", tr.state_component, states.allocator_bytes))
    if states.paged_bytes:
        t.append(gpu("paged_optimizer_states", tr.state_component, states.paged_bytes, allocator=False))
    if plan.optimizer_in_backward:
        # each parameter is stepped and its gradient freed inside backward: one gradient at a time
        t.append(gpu("gradients", tr.grad_component, gbytes * tr.largest, AFTER_BWD - {"step"}))
    else:
        t.append(gpu("gradients", tr.grad_component, gbytes * p, ALL if gas > 1 else AFTER_BWD))
        if tr.component == "weights" and arch.tied_embeddings and arch.causal_lm:
            # the embedding's gradient exists before autograd adds it into lm_head's (tied)
            t.append(gpu("tied_embedding_grad", "gradients", gbytes * arch.vocab_size * arch.hidden_size,
                         {"bwd_end"}))
    if plan.optimizer == "adafactor":
        # non-fused update: the squared gradient and the update of the largest tensor
        t.append(gpu("optimizer_step_temps", "buffers", 2 * 4 * tr.largest, {"step"}))
    return t


def ddp_terms(plan: Plan, arch: ModelArch, tr: Trainable, shapes, frozen: int, wbytes: int, gbytes: int,
              sbytes: int, gas: int) -> list[Term]:
    t = single_terms(plan, arch, tr, shapes, frozen, wbytes, gbytes, sbytes, gas)
    t.append(gpu("ddp_grad_buckets", "buffers", gbytes * tr.numel))
    return t


def fsdp_terms(plan: Plan, arch: ModelArch, tr: Trainable, frozen_numel: int, frozen_bytes_whole: int,
               wbytes: int, gbytes: int, sbytes: int, compute: int, gas: int) -> list[Term]:
    n = plan.world_size
    p = tr.numel
    shard = -(-p // n)
    layer_sizes = arch.layer_sizes
    unit = max(layer_sizes) if layer_sizes else arch.total_params
    root = arch.total_params - sum(layer_sizes)
    t: list[Term] = []
    off = plan.offload_params != "none" or plan.offload_optimizer != "none"
    if off:
        t += [host("fsdp_param_shards", wbytes * shard + frozen_bytes_whole // n, True),
              host("fsdp_grad_shards", gbytes * shard, True),
              host("optimizer_states", sharded_states(plan.optimizer, shard, sbytes))]
    else:
        t += [gpu("param_shards", tr.component, wbytes * shard)]
        if frozen_bytes_whole:
            t.append(gpu("frozen_param_shards", "weights", -(-frozen_bytes_whole // n)))
        t += [gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, shard, sbytes),
                  allocator=not is_paged(plan.optimizer)),
              gpu("grad_shards", tr.grad_component, gbytes * shard, ALL if gas > 1 else AFTER_BWD)]
    # 16-bit gathered copies for compute (a separate copy only when shards are in another dtype
    # or sharded at all): the current and the prefetched unit, and the root unit.
    if plan.zero_stage == 2:
        t.append(gpu("gathered_params", "buffers", compute * arch.total_params, {"fwd", "loss_bwd", "bwd_end"}))
    else:
        t.append(gpu("gathered_params", "buffers", compute * (2 * unit + root), {"fwd", "loss_bwd", "bwd_end"}))
    # backward: unsharded gradients of the unit being reduced and its reduce-scatter input
    t.append(gpu("unsharded_unit_grads", "buffers", 2 * gbytes * min(unit, p), BWD))
    return t
