"""Model states outside DeepSpeed: one process (HF Trainer / torchtune), PyTorch DDP, PyTorch FSDP.

- single: weights, gradients (kept across micro-steps when accumulating) and optimizer states, all
  whole on the GPU. HF Trainer's default optimizer is fused AdamW (`adamw_torch_fused`), which adds
  no step temporaries (docs/tracer.md §4).
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

from ..model import ModelArch
from ..plan import Plan
from ..units import ceil_div
from .deepspeed import Trainable
from .optimizers import is_paged, optimizer_states, sharded_states
from .terms import (AFTER_BWD, ALL, ALLOCATOR, BWD_END, BWD_END_PHASE, FWD_BWD, FWD_IN, MANAGED, MID_BWD, RECOMPUTE,
                    STEP, STEP_PHASE, STREAM_CACHE, TOP_BWD, Term, gpu, host)


def adamw_step_temps(impl: str, sbytes: int, numel: int, largest: int,
                     phases: frozenset = frozenset({STEP_PHASE})) -> list[Term]:
    """torch AdamW's step transients (torch/optim/adam.py, AdamW = Adam with decoupled decay in torch 2.x):
    foreach `_multi_tensor_adam` allocates `exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)` for the whole
    group (+1 copy of the second moment); single-tensor `_single_tensor_adam` makes
    `(exp_avg_sq.sqrt() / bias_correction2_sqrt)` per parameter (two temporaries of the largest one); fused
    adds none. Traced: docs/tracer.md §4 (8B: foreach +2P bytes in bf16, single-tensor ~2 x the embedding)."""
    if impl == "foreach":
        return [gpu("optimizer_step_temps", "buffers", sbytes * numel, phases)]
    if impl == "single-tensor":
        return [gpu("optimizer_step_temps", "buffers", 2 * sbytes * largest, phases)]
    return []


def single_terms(plan: Plan, arch: ModelArch, tr: Trainable, shapes, frozen: int, wbytes: int, gbytes: int,
                 sbytes: int, gas: int, impl: str = "fused", grads_kept: bool = False) -> list[Term]:
    """``grads_kept``: zero_grad zeroes the gradients in place (torch 1.x's default, memory/stack.py), so they
    stay allocated from one step to the next, through forward and every backward moment."""
    p = tr.numel
    t: list[Term] = []
    if frozen:
        t.append(gpu("frozen_params", "weights", frozen))
    t.append(gpu("trainable_params", tr.component, wbytes * p))
    states = optimizer_states(plan.optimizer, shapes, sbytes)
    t.append(gpu("optimizer_states", tr.state_component, states.allocator_bytes))
    if states.paged_bytes:
        t.append(gpu("paged_optimizer_states", tr.state_component, states.paged_bytes, where=MANAGED))
    # At the top layer's backward only the head's gradients exist (inputs.py's grads_at_top_recompute),
    # so the whole gradient set is alive from the bottom layer's recompute on, not at the top. Accumulating
    # (gas > 1), every micro-step after the first adds into the previous ones' `.grad`: HF Trainer's
    # `_run_epoch` calls `model.zero_grad()` only after `optimizer.step()` on the sync micro-step
    # (transformers 5.24 trainer.py), so all of them are resident through forward and the whole backward.
    if plan.optimizer_in_backward:
        # each parameter is stepped and its gradient freed inside backward: one gradient at a time
        t.append(gpu("gradients", tr.grad_component, gbytes * tr.largest, {"bwd_end", RECOMPUTE}))
    else:
        t.append(gpu("gradients", tr.grad_component, gbytes * p,
                     ALL if grads_kept or gas > 1 else AFTER_BWD - TOP_BWD))
        if tr.component == "weights" and arch.tied_embeddings and arch.causal_lm:
            head = gbytes * arch.vocab_size * arch.hidden_size
            # the embedding's gradient exists before autograd adds it into lm_head's (tied), at the very end
            t.append(gpu("tied_embedding_grad", "gradients", head, {"bwd_end"}))
            if gas > 1:
                # the tied weight's AccumulateGrad runs once both contributions are in its input buffer, so
                # lm_head's waits there from the head's backward to the embedding's, beside the accumulated
                # `.grad` (without accumulation it is the gradient the phases above count). Traced:
                # tools/memtrace/golden/stacks/l1b-full-mixed-gc-ga2 (the top recompute's and the end's temporaries)
                t.append(gpu("tied_head_grad_pending", "gradients", head, MID_BWD | {"bwd_end"}))
    # optimizer in backward (torchtune's register_optim_in_bwd_hooks): one optimizer per parameter, stepped as
    # its gradient lands, so a foreach step's temporaries are one parameter's, beside its gradient, and the
    # step phase runs nothing (traced: tools/memtrace/golden/stacks/tt-l1b-*-inbwd*)
    in_bwd = plan.optimizer_in_backward
    step_phases = frozenset({BWD_END_PHASE, RECOMPUTE}) if in_bwd else STEP
    if plan.optimizer == "adafactor":
        # non-fused update: the squared gradient and the update of the largest tensor
        t.append(gpu("optimizer_step_temps", "buffers", 2 * 4 * tr.largest, step_phases))
    if plan.optimizer == "adamw":
        # foreach's temporary covers what one step call sees: one parameter in backward, all P otherwise
        t += adamw_step_temps(impl, sbytes, tr.largest if in_bwd else p, tr.largest,
                              step_phases if in_bwd else frozenset({STEP_PHASE}))
    return t


def ddp_terms(plan: Plan, arch: ModelArch, tr: Trainable, shapes, frozen: int, wbytes: int, gbytes: int,
              sbytes: int, gas: int, impl: str = "fused", grads_kept: bool = False) -> list[Term]:
    t = single_terms(plan, arch, tr, shapes, frozen, wbytes, gbytes, sbytes, gas, impl, grads_kept)
    t.append(gpu("ddp_grad_buckets", "buffers", gbytes * tr.numel))
    return t


def fsdp2_reduce_bytes(plan: Plan, trainer: str) -> int:
    """Bytes per element of FSDP2's reduce-scatter (MixedPrecisionPolicy.reduce_dtype; 0: the gathered
    dtype). torchtitan reduces in fp32 under bf16 parameters (its default mixed_precision_reduce "float32",
    torchtitan/config/job_config.py); accelerate's FSDP2 policy reduces in its param_dtype
    (FullyShardedDataParallelPlugin.set_mixed_precision, accelerate 1.15: reduce_dtype=dtype) and torchtune
    sets no policy, so both reduce in the gathered dtype."""
    return 4 if trainer == "torchtitan" and plan.precision == "bf16-mixed" else 0


def fsdp_terms(plan: Plan, arch: ModelArch, tr: Trainable, frozen_numel: int, frozen_bytes_whole: int,
               wbytes: int, gbytes: int, sbytes: int, compute: int, gas: int, impl: str = "fused",
               version: int = 1, keep_last_block: bool = False, no_sync: bool = False,
               adapters_in_units: bool = False, loss_outside: bool = False, reduce_bytes: int = 0,
               embedding_units: bool = False) -> list[Term]:
    """FSDP1 as accelerate wraps it (transformer-layer units, the rest in the root unit; LoRA adapters
    as their own units via peft's fsdp_auto_wrap_policy). Measured on CPU ranks by tools/fsdpprobe:
    - the root unit (embeddings, final norm, lm_head) is gathered at the start of forward and kept
      until its post-backward at the very end (FullyShardedDataParallel._post_forward skips the root);
    - a layer unit is gathered for its forward and resharded after it (FULL_SHARD), so the end of
      forward and the loss hold the root only; SHARD_GRAD_OP keeps every unit from forward to backward;
    - in backward the current unit and the one prefetched (BACKWARD_PRE) are gathered, with the
      unit's unsharded gradient in the gathered dtype (the bottom layer, with nothing left to prefetch,
      is counted with two units too: one unit conservative);
    - lm_head's gradient (use_orig_params: a view of the root's flat parameter) waits in autograd until
      the embedding's gradient completes the root's flat gradient at the end of backward, when the
      views' gradients and the flat gradient (their cat) coexist.
    The loss-gradient moment (logits) is taken before any layer unit is gathered for backward; the
    layer-by-layer backward moments are the checkpointing phases (and `bwd_top` without checkpointing).
    Modelled from the source, not measurable on CPU ranks (which run synchronously, one stream): in
    backward a unit's unsharded gradient lives until its asynchronous reduce-scatter ends, so two are
    counted; the all-gather stream's pool of two units stays reserved while no unit is gathered.
    tools/fsdpprobe/check.py allows the engine that margin over the CPU probe.
    Accumulation under FSDP1 `no_sync()` (``no_sync``: accelerate's accumulate, Lightning's
    no_backward_sync): `_post_backward_hook` returns before the reduce-scatter while gradients are not
    synced, so each unit keeps its unsharded flat gradient (gathered dtype) from the first micro-step's
    backward to the last one's; the reduce-scattered shards exist only from that last backward on.
    ``adapters_in_units`` (LitGPT under Lightning's FSDPStrategy): a layer unit's flat parameter holds the
    frozen weights and the LoRA layers, so it requires grad and its gradient covers the whole unit, the
    frozen weights included (FSDP's docs warn of "higher than expected gradient memory"). Traced:
    tools/fsdpprobe grid (s3w2_mixed_g2, s3w4_mixed_g2, s3w2_lora_g2, lit_s3w2_lora, lit_s3w2_lora_g2).
    FSDP2 (``version`` 2, fully_shard) is FSDP1 with per-parameter sharding, except the gradients' way out
    (torch 2.13 torch/distributed/fsdp/_fully_shard): a group's post_backward (_fsdp_param_group.py) reshards,
    then foreach_reduce (_fsdp_collectives.py) copies the unsharded gradients into one reduce-scatter input
    in the policy's ``reduce_bytes`` (MixedPrecisionPolicy.reduce_dtype) and frees them
    (``unsharded_grads.clear()``); the input stays referenced (comm_ctx.reduce_scatter_states,
    reduce_scatter_max_input_buffers = 1) until the next group's post_backward. So a unit's unsharded
    gradients sit beside the previous unit's reduce-scatter input; at the end of backward the root (last) is
    resharded and that input dropped before its own gradients are copied into theirs, so the end holds the larger
    of (gathered root + its gradients + the previous unit's input) and (its gradients + their input):
    (compute + reduce) bytes per element where FSDP1 has two gathered-dtype gradients; the same in bf16,
    2 B more per element with torchtitan's fp32 reduce. Measured on CPU ranks (v2_* rows, and the fp32
    reduce of the wide model: tests/test_fsdpprobe.py).
    ``embedding_units`` (FSDP2 at stage 3: torchtune's custom_sharded_layers ['tok_embeddings', 'output'], which
    training.shard_model fully_shards before the root): the embedding and lm_head are units of their own, so the
    root keeps the final norm only; the output unit is gathered for lm_head's forward and again for its backward,
    its gradient reduce-scattered there, and the embedding unit is gathered for the last backward. Through the
    layer-by-layer backward neither is gathered nor lm_head's unsharded gradient held (measured on CPU ranks:
    v2_*_emb rows, tests/test_fsdpprobe.py)."""
    n = plan.world_size
    p = tr.numel
    shard = ceil_div(p, n)
    layer_sizes = arch.layer_sizes
    unit = max(layer_sizes) if layer_sizes else arch.total_params
    root = arch.total_params - sum(layer_sizes)
    full = plan.method == "full"
    split = embedding_units and version == 2 and plan.zero_stage == 3
    emb = arch.numel_where(outside_blocks=True, components=("embedding",)) if split else 0
    out = arch.numel_where(outside_blocks=True, components=("lm_head",)) if split else 0   # 0 when tied
    in_units = adapters_in_units and not full
    accumulate_unsharded = no_sync and gas > 1 and version == 1
    # numel of the flat parameters that require grad: every unit (full), the layer units with their
    # adapters (LoRA inside the units), or the adapters' own units
    grad_numel = arch.total_params if full else (sum(layer_sizes) + p if in_units else p)
    t: list[Term] = []
    off = plan.offload_params != "none" or plan.offload_optimizer != "none"
    if off:
        t += [host("fsdp_param_shards", wbytes * shard + frozen_bytes_whole // n, True),
              host("fsdp_grad_shards", gbytes * shard, True),
              host("optimizer_states", sharded_states(plan.optimizer, shard, sbytes))]
    else:
        t += [gpu("param_shards", tr.component, wbytes * shard)]
        if frozen_bytes_whole:
            t.append(gpu("frozen_param_shards", "weights", ceil_div(frozen_bytes_whole, n)))
        t.append(gpu("optimizer_states", tr.state_component, sharded_states(plan.optimizer, shard, sbytes),
                     where=MANAGED if is_paged(plan.optimizer) else ALLOCATOR))
        # reduce-scattered shards: accumulated ones live through the whole step; fresh ones appear from the
        # layer-by-layer backward on, but nothing is reduce-scattered yet at the top layer
        once = gas == 1 or accumulate_unsharded     # the shards appear in one (the last) backward
        # under no_sync the last backward turns each unit's kept unsharded gradient into its shard, so
        # until the step the shards take no more than the unsharded gradients they replace
        grad_phases = STEP if accumulate_unsharded else AFTER_BWD - TOP_BWD if once else ALL
        # the root's and the bottom layer's shards arrive last, after the bottom layer's backward
        last = min(shard, ceil_div(root + unit, n)) if full and once else 0
        # the reduce-scattered flat gradient covers the frozen weights of a unit it shares with adapters
        grad_shard = ceil_div(grad_numel, n) if in_units else shard
        t.append(gpu("grad_shards", tr.grad_component, gbytes * (grad_shard - last), grad_phases))
        if last:
            t.append(gpu("grad_shards_last", tr.grad_component, gbytes * last, grad_phases - MID_BWD))
    # gathered copies in the compute dtype (QLoRA: the packed 4-bit layers as stored)
    if plan.method == "qlora" and layer_sizes:
        layer_bytes = (frozen_bytes_whole - compute * root) * unit // sum(layer_sizes)
    else:
        layer_bytes = compute * unit
    # FSDP2 with reshard_after_forward=True (torchtune's shard_model and torchtitan's apply_fsdp pass it for the
    # root too) frees the root after forward; their loops compute the loss outside the model, so the root is
    # gathered again only when backward reaches lm_head (fsdpprobe: 2 B x root less through the loss)
    root_out = version == 2 and loss_outside and plan.zero_stage == 3
    # FSDP2's end of backward is accounted below, with the gradients (v2_end)
    v2_end = version == 2 and plan.zero_stage == 3 and full and arch.causal_lm
    root_phases = (BWD_END if root_out else FWD_BWD) - ({BWD_END_PHASE} if v2_end else set())
    t.append(gpu("gathered_root", "buffers", compute * (root - emb - out), root_phases))
    if split and not root_out:
        # the output unit, gathered for lm_head's forward (the logits' moment) and again for its backward; with the
        # loss outside the model the loss and its gradient run while it is resharded (fsdpprobe: no change there)
        t.append(gpu("gathered_output_unit", "buffers", compute * out, {"fwd", "loss_bwd"}))
    if plan.zero_stage == 2:
        # SHARD_GRAD_OP keeps each unit from its forward to its post-backward reshard
        t.append(gpu("gathered_layers", "buffers", layer_bytes * len(layer_sizes), FWD_IN | {"loss_bwd"} | TOP_BWD))
        t.append(gpu("gathered_units", "buffers", 2 * layer_bytes, {RECOMPUTE}))
    else:
        t.append(gpu("gathered_units", "buffers", 2 * layer_bytes, MID_BWD))
    # The all-gathers run on FSDP's unshard stream, whose blocks the compute stream cannot reuse: the
    # caching allocator keeps them for that stream (per-stream pools) while no unit is gathered.
    pool_phases = FWD_BWD if plan.zero_stage == 3 else BWD_END
    t.append(gpu("unshard_stream_pool", "runtime", 2 * layer_bytes, pool_phases, where=STREAM_CACHE))
    # the unit being back-propagated and the previous one, whose unsharded gradient waits for its
    # reduce-scatter on the post-backward stream (record_stream), in the gathered dtype
    unit_grad = unit if full or in_units else max(tr.sizes, default=0)
    # FSDP2: the previous unit's reduce-scatter input (reduce dtype) instead of its unsharded gradient
    second = (reduce_bytes or compute) if version == 2 else compute
    t.append(gpu("unsharded_unit_grads", "buffers", (compute + second) * unit_grad, MID_BWD))
    if accumulate_unsharded:
        t.append(gpu("no_sync_unsharded_grads", "gradients", compute * grad_numel, FWD_BWD))
    if full and arch.causal_lm:
        head = arch.vocab_size * arch.hidden_size
        if out:
            # lm_head's own unit reduce-scatters its gradient at once; the reduce-scatter input stays referenced
            # until the next unit's post_backward, the top layer's
            t.append(gpu("lm_head_reduce_input", "gradients", second * out, TOP_BWD))
        else:
            t.append(gpu("lm_head_grad", "gradients", compute * head, MID_BWD))
        end = root - out     # the units back-propagated last: the root (the embedding's unit and the norm, split)
        if not v2_end:
            # at the very end only, beside the gathered root: FSDP1's view gradients and their flat cat (FSDP2 at
            # stage 2: its gradients and reduce input)
            t.append(gpu("fsdp_root_grads", "gradients", (compute + second) * end, {BWD_END_PHASE}))
        elif compute * end + second * unit_grad >= second * end:
            # FSDP2 post_backward (torch 2.13 _fsdp_param_group.py) reshards, drops the previous unit's reduce-
            # scatter input, then foreach_reduce copies the gradients into their own: the end of backward is the
            # larger of (gathered + gradients + the previous unit's input) and (gradients + their input)
            t.append(gpu("gathered_root_end", "buffers", compute * end, {BWD_END_PHASE}))
            t.append(gpu("previous_unit_reduce_input", "buffers", second * unit_grad, {BWD_END_PHASE}))
            t.append(gpu("fsdp_root_grads", "gradients", compute * end, {BWD_END_PHASE}))
        else:
            t.append(gpu("fsdp_root_grads", "gradients", (compute + second) * end, {BWD_END_PHASE}))
    if version == 2 and keep_last_block and plan.zero_stage == 3:
        # torchtitan parallelize_llama: fully_shard(block, reshard_after_forward=layer_id < n_layers - 1): the
        # last block stays gathered from its forward to its backward, which comes first
        t.append(gpu("gathered_last_block", "buffers", layer_bytes, FWD_IN | {"loss_bwd"} | TOP_BWD))
    if plan.optimizer == "adamw" and not off:
        t += adamw_step_temps(impl, sbytes, shard, ceil_div(tr.largest, n))
    return t
