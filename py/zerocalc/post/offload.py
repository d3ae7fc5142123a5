"""``post_training.offload_between_updates`` (contract plan-v1, Extension 7): the training state a trainer moves to
the host outside the update step and back before it. Not FSDP's CPUOffload nor ZeRO-Offload (``offload_params`` /
``offload_optimizer``), which keep the state on the host through the step: here the update step is the plan's
steady step, unchanged, and the phases before it (post/phases.py: sync, generate, score) go without what is
offloaded there, which sits in host memory instead. Which phases, which state and which host memory, as each
trainer's code does it:

- verl (v0.5.0 verl/workers/fsdp_workers.py, ActorRolloutRefWorker; verl/utils/fsdp_utils.py). `param_offload`:
  `offload_fsdp_model_to_cpu` after `update_actor`, `compute_log_prob` and the rollout sharding manager's weight
  sync (sharding_manager/fsdp_vllm.py `__enter__`: `load_fsdp_model_to_gpu`, `state_dict()`, `update_params`,
  `offload_fsdp_model_to_cpu`), `load_fsdp_model_to_gpu` before each: the actor's FlatParameter shards
  (`handle.flat_param_to(cpu)`; FSDP2 `param.data.to(cpu)`) are on the host during the rollout, back on the GPU
  for part of the sync (the sync's own moments: post/phases.py, 0.5 and 0.6+ orders) and for the scoring, and
  the offload ends with `empty_cache()`. `optimizer_offload`: `offload_fsdp_optimizer` after `update_actor` (and at
  init), `load_fsdp_optimizer` before it: the Adam moments are off the GPU in sync, generate and score. Both
  `value.to("cpu")`: pageable memory, freed again on the reload.
- ms-swift (v4.5.2 swift/rlhf_trainers/rollout_mixin.py `_fast_infer`, `offload_model`, `offload_optimizer`;
  grpo_trainer.py `offload_context`): around colocated vLLM's generation only, after `_move_model_to_vllm`.
  `offload_model` moves `param.data` of the training model and the reference (`.to("cpu")`, FSDP2 `model.cpu()`),
  then `empty_cache()`; a parameter that is a view of a flat buffer frees nothing (DeepSpeed's optimizer keeps the
  trainable 16-bit weights in `bit16_groups_flat` / `fp16_partitioned_groups_flat`, FSDP1's FlatParameter holds
  `use_orig_params` views), so under DeepSpeed only the frozen weights and the reference leave, under FSDP1
  nothing. `offload_optimizer` moves `optimizer.state`'s tensors: the moments (DeepSpeed's fp32 master partitions
  are not in it), into pageable `torch.empty_like(value, device="cpu")` buffers under DeepSpeed.
- OpenRLHF (v0.9.5 openrlhf/utils/deepspeed/deepspeed_utils.py `offload_deepspeed_states`, ppo_trainer.py
  `_run_sleep`: reload -> fit -> offload): ZeRO-3's optim_states, hp_params (the fp32 master), lp_grads (the
  gradient partitions) and contiguous_grad_buffer (the ipg bucket, freed: `.to("meta")`) go to pinned buffers
  (`pin_memory=True`; DeepSpeed stage3.py `offload_states`) outside `fit`, then `empty_cache()`; `lp_params` (the
  16-bit weights) stay. Nothing happens with `adam_offload` (the optimizer is on the host already).
"""
from __future__ import annotations

from dataclasses import replace

from ..run.phase import Phase
from ..run.view import RunView
from ..units import next_pow2
from .defaults import Post

# the phases (post/phases.py) each trainer runs without what it offloads
PHASES = {"verl": {"weights": ("sync", "generate"), "optimizer": ("sync", "generate", "score")},
          "ms-swift": {"weights": ("generate",), "optimizer": ("generate",)},
          "openrlhf": {"weights": (), "optimizer": ("sync", "generate", "score")}}
OPTIMIZER_TERMS = {"verl": ("optimizer_states",), "ms-swift": ("optimizer_states",),
                   "openrlhf": ("optimizer_states", "fp32_master", "grad_partition", "ipg_bucket")}
FREED_NOT_MOVED = ("ipg_bucket",)
# verl loads the offloaded shard back for part of the sync (`load_fsdp_model_to_gpu` before `state_dict()`,
# offloaded again after vLLM's update up to 0.5, before vLLM's weights wake from 0.6): the resident state omits it
# and the sync's own moments add it (post/phases.py sync_phase); the host copy is freed by the load meanwhile
LOADED_IN_SYNC = ("verl",)        # OpenRLHF: DeepSpeed's contiguous_grad_buffer goes to "meta"
PINNED = ("openrlhf",)
# the first phase after the offload's own empty_cache(): verl's model offload after update_actor (and again after
# the sync), ms-swift's offload_model before the rollout, OpenRLHF's offload_deepspeed_states after fit
EMPTIES_BEFORE = {"verl": {"weights": ("sync", "generate")}, "ms-swift": {"weights": ("generate",)},
                  "openrlhf": {"optimizer": ("sync",)}}


def _weight_terms(v: RunView, trainer: str) -> tuple:
    """The state terms the trainer's model offload frees (module docstring)."""
    fw, version = v.plan.framework, v.si.stack.fsdp_version
    if trainer == "verl":
        return ("param_shards", "frozen_param_shards")
    if trainer != "ms-swift":
        return ()
    if fw == "deepspeed":
        return ("frozen_params", "frozen_partition_16bit", "reference_weights")
    if fw == "fsdp":
        return ("param_shards", "frozen_param_shards", "reference_weights") if version == 2 else ()
    return ("trainable_params", "frozen_params", "reference_weights")


def offloaded(v: RunView, post: Post, phase: str) -> tuple:
    """The resident state terms (RunView.state) that are on the host during ``phase``."""
    o = getattr(v.plan.post_training, "offload_between_updates", None)
    sched = PHASES.get(post.trainer)
    if o is None or sched is None:
        return ()
    names: tuple = ()
    if o.weights and phase in sched["weights"]:
        names += _weight_terms(v, post.trainer)
    if o.optimizer and phase in sched["optimizer"] and not (post.trainer == "openrlhf"
                                                            and v.plan.offload_optimizer != "none"):
        names += OPTIMIZER_TERMS[post.trainer]
    return tuple(t for t in v.state if t.name in names)


def loaded_for_sync(v: RunView, post: Post) -> int:
    """Bytes of the offloaded weights the trainer loads back during the sync (LOADED_IN_SYNC), else 0."""
    if post.trainer not in LOADED_IN_SYNC:
        return 0
    weights = _weight_terms(v, post.trainer)
    return sum(t.nbytes for t in offloaded(v, post, "sync") if t.name in weights)


def resident(v: RunView, post: Post, phase: str, terms) -> tuple:
    """``terms`` (the state, or the state and the forward's extra) less what is on the host in ``phase``."""
    gone = {id(t) for t in offloaded(v, post, phase)}
    return tuple(t for t in terms if id(t) not in gone)


def host_bytes(v: RunView, post: Post, phase: str) -> int:
    """Host memory the offloaded state takes in ``phase`` (pinned buffers rounded to a power of two, as
    torch's pinned-memory allocator rounds them: estimate.py)."""
    loaded = _weight_terms(v, post.trainer) if phase == "sync" and post.trainer in LOADED_IN_SYNC else ()
    terms = [t for t in offloaded(v, post, phase) if t.name not in loaded
             and (t.name not in FREED_NOT_MOVED or post.trainer != "openrlhf")]
    if post.trainer in PINNED:
        return sum(next_pow2(t.nbytes) for t in terms)
    return sum(t.nbytes for t in terms)


def empties_cache_before(v: RunView, post: Post, phase: str) -> bool:
    """The offload's own `empty_cache()` runs before ``phase`` (the reserve the update step left is released)."""
    o = getattr(v.plan.post_training, "offload_between_updates", None)
    if o is None:
        return False
    e = EMPTIES_BEFORE.get(post.trainer, {})
    return (o.weights and phase in e.get("weights", ())) or (o.optimizer and phase in e.get("optimizer", ())
                                                              and not (post.trainer == "openrlhf"
                                                                       and v.plan.offload_optimizer != "none"))


def noted(v: RunView, post: Post, phase: str, ph: Phase) -> Phase:
    """``ph`` with what is on the host in it named in its note."""
    names = [t.name for t in offloaded(v, post, phase)]
    return replace(ph, note=f"{ph.note}; on the host ({post.trainer} offload between updates): "
                            f"{', '.join(names)}") if names else ph


__all__ = ["offloaded", "resident", "host_bytes", "empties_cache_before", "noted"]
