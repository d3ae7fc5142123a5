"""Names for storages: walk DeepSpeed's optimizer object and the model, then classify the rest by site.

Canonical buffer names (the engine reports the same in estimate(plan).to_dict()["per_gpu"]["deepspeed_buffers"]);
the attribute each comes from is DeepSpeed 0.19.8's (runtime/zero/stage_1_and_2.py, stage3.py,
runtime/fp16/unfused_optimizer.py, runtime/fp16/fused_optimizer.py):

  flat_16bit_params       stage 0/1/2 16-bit trainable params (bit16_groups_flat / fp16_groups_flat / fp16_groups)
  param_partition_16bit   stage 3 16-bit partitions of trainable params (lp_param_buffer, fp16_partitioned_groups_flat)
  persistent_params       stage 3 full copies of params with numel <= stage3_param_persistence_threshold
  fp32_master             single_partition_of_fp32_groups / fp32_partitioned_groups_flat / fp32_groups(_flat)
  optimizer_states        torch optimizer state (exp_avg, exp_avg_sq)
  grad_partition          grads_in_partition / averaged_gradients (1/2), grad_partitions_flat_buffer (3)
  fp32_grad_partition     offload: fp32 grads of the master partition (.grad of the fp32 partition)
  offload_16bit_staging   param_buffer_of_bit16_for_cpu_offload_groups (1/2 offload)
  offload_temp_grad_buffers temp_grad_buffer_for_cpu_offload + temp_grad_buffer_for_gpu_offload (1/2 offload)
  accumulated_grads       accumulated_grads_in_cpu (1/2 offload, GAS > 1)
  ipg_bucket              ipg_buckets[*].buffer (1/2: in backward only; 3: from init)
  gathered_params         stage 3 full param data alive outside persistence (the fwd->bwd working set)
  allgather_buffer        stage 3 coalesced all-gather flat buffer (partition_parameters._all_gather_dtype)
  param_grads_16bit       16-bit .grad tensors produced by autograd (per param, before/without reduction)
  step_transient          step-time temporaries: flattened/cast fp32 grads (non-offload .grad of the master)
  fp64_norm_copy          float64 copies for gradient norms (get_grad_norm_direct, set_norm_for_param_grad_in_gpu)
  offload_grad_clone      stage 1/2 offload: clone of grads with numel > reduce_bucket_size
  reduce_transient        stage 1/2 flattened grad slices per destination rank (allreduce_bucket's flatten);
                          stage 3 interleaved cat of the bucket's grads (coalesced_collectives.reduce_scatter_coalesced)
  allreduce_bucket        stage 0: engine.allreduce_bucket flattens all grads (bucket MEMORY_OPT_ALLREDUCE_SIZE 5e8)
  offload_fp32_grad_slice stage 1/2 offload: .float() of each grad slice before the host copy
                          (async_inplace_copy_grad_to_fp32_buffer_from_gpu), on the GPU; stage 3 offload: .to(fp32)
                          of each param's grad partition (stage3._offload_grad_partition_at_boundary)
  frozen_params           params with requires_grad False (LoRA base), full on every rank (stage 0/1/2)
  frozen_partition_16bit  stage 3: the 16-bit partitions of frozen params
"""
from __future__ import annotations

from collections import deque

import torch

MODEL_STATE = (
    "flat_16bit_params", "param_partition_16bit", "persistent_params", "fp32_master", "optimizer_states",
    "grad_partition", "fp32_grad_partition", "offload_16bit_staging", "offload_temp_grad_buffers",
    "accumulated_grads", "ipg_bucket", "gathered_params", "allgather_buffer", "param_grads_16bit",
    "step_transient", "fp64_norm_copy", "offload_grad_clone", "frozen_params", "frozen_partition_16bit", "reduce_transient",
    "allreduce_bucket", "offload_fp32_grad_slice",
)

# Attribute name (anywhere on the path) -> canonical name. First match along the path from the root wins.
ATTR_RULES = {
    "bit16_groups_flat": "flat_16bit_params",
    "fp16_groups_flat": "flat_16bit_params",
    "lp_param_buffer": "param_partition_16bit",
    "fp16_partitioned_groups_flat": "param_partition_16bit",
    "persistent_parameters": "persistent_params",
    "single_partition_of_fp32_groups": "fp32_master",
    "fp32_partitioned_groups_flat": "fp32_master",
    "fp32_groups_flat": "fp32_master",
    "fp32_groups": "fp32_master",
    "grads_in_partition": "grad_partition",
    "averaged_gradients": "grad_partition",
    "grad_partitions_flat_buffer": "grad_partition",
    "param_buffer_of_bit16_for_cpu_offload_groups": "offload_16bit_staging",
    "temp_grad_buffer_for_cpu_offload": "offload_temp_grad_buffers",
    "temp_grad_buffer_for_gpu_offload": "offload_temp_grad_buffers",
    "accumulated_grads_in_cpu": "accumulated_grads",
    "ipg_buckets": "ipg_bucket",
    "state": "optimizer_states",
}
# Walked first so that the named buffer wins when a storage is reachable from several places.
PRIORITY = tuple(ATTR_RULES)
_MASTER = ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat", "fp32_groups_flat", "fp32_groups")


def name_for_path(path: tuple[str, ...], offload: bool) -> str | None:
    """Canonical name for a tensor reached by ``path`` (attribute names and '.grad' steps)."""
    for i, a in enumerate(path):
        if a in ATTR_RULES:
            name = ATTR_RULES[a]
            if name == "persistent_params" and path[-1] == ".grad":
                return None
            if a in _MASTER and ".grad" in path[i + 1:]:
                # the fp32 grad of the master partition: resident under offload, a step temporary otherwise
                return "fp32_grad_partition" if offload else "step_transient"
            if name == "optimizer_states" and (i == 0 or path[i - 1] != "optimizer"):
                continue  # only the inner torch optimizer's .state
            if name == "optimizer_states" and path[-1] == "step":
                return None  # AdamW's step counter: a 4-byte scalar per state, not a buffer
            return name
    return None


def _children(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (k if isinstance(k, str) else "[]"), v
    elif isinstance(obj, (list, tuple, set, deque)):
        for v in obj:
            yield "[]", v
    elif hasattr(obj, "__dict__"):
        mod = type(obj).__module__ or ""
        if mod.startswith(("deepspeed", "torch.optim")) and not isinstance(obj, torch.nn.Module):
            items = list(vars(obj).items())
            items.sort(key=lambda kv: (0 if ("ipg" in kv[0] or kv[0].split("__")[-1] in PRIORITY) else 1))
            for k, v in items:
                yield k.split("__")[-1], v  # strip name mangling (_Cls__attr)


def walk_optimizer(root, max_depth: int = 10):
    """Breadth-first (path, tensor) pairs over DeepSpeed's optimizer object (shallowest path first)."""
    seen = {id(root)}
    q = deque([((), root)])
    while q:
        path, obj = q.popleft()
        if isinstance(obj, torch.nn.Parameter):
            continue  # module params (and bucket/group lists of them) are named by the model walk
        if isinstance(obj, torch.Tensor):
            yield path, obj
            g = obj.grad if obj.requires_grad or isinstance(obj, torch.nn.Parameter) else None
            if g is not None:
                yield path + (".grad",), g
            continue
        if len(path) >= max_depth:
            continue
        for k, v in _children(obj):
            if v is None or isinstance(v, (int, float, str, bool)) or id(v) in seen:
                continue
            if isinstance(v, torch.nn.Module) or callable(v) and not hasattr(v, "__dict__"):
                continue
            seen.add(id(v))
            q.append((path + (k,), v))


def _is_z3(p) -> bool:
    return hasattr(p, "ds_tensor")


def label_all(tracker, optimizer, model, offload: bool) -> None:
    """Give every live, unlabelled storage reachable from the engine a canonical name (first label sticks)."""
    named, unknown = [], []
    for path, t in walk_optimizer(optimizer):
        if isinstance(t, torch.nn.Parameter):
            continue  # module params (and bucket/group lists of them) are named by the model walk below
        name = name_for_path(path, offload)
        (named if name else unknown).append((t, name or "ds:" + ".".join(p for p in path if p != "[]")))
    for n, p in model.named_parameters():
        if _is_z3(p):
            named.append((p.ds_tensor, "param_partition_16bit" if p.requires_grad else "frozen_partition_16bit"))
            if p.data.numel() > 0:
                named.append((p.data, "persistent_params" if getattr(p, "ds_persist", False) else "gathered_params"))
        else:
            named.append((p.data, "flat_16bit_params" if p.requires_grad else "frozen_params"))
        if p.grad is not None:
            named.append((p.grad, "param_grads_16bit"))
    for t, name in named + unknown:
        rec = tracker.rec_of(t)
        if rec is not None and rec.label is None:
            rec.label = name


SMALL = 4096  # unlabelled storages below this are scalars (norms, loss scale, step counters): "other"


def classify_site(rec) -> str | None:
    """Name for a storage no walk reached (a transient), from its dtype and allocation site.

    None means "not a model state": activations and their grads (autograd allocates those under the
    engine's backward call: runtime/engine.py backward, fp16/loss_scaler.py), inputs, scalars.
    """
    site = rec.site
    if not site.startswith("deepspeed/") or rec.nbytes < SMALL:
        return None
    if ("runtime/engine.py" in site and site.endswith(":backward")) or "loss_scaler.py" in site:
        return None
    if site.startswith("deepspeed/comm/"):
        return None  # gloo's reduce_scatter_tensor stages a copy inside torch; NCCL does not (CPU artefact)
    if site.endswith("coalesced_collectives.py:reduce_scatter_coalesced") or ":reduce_scatter_coalesced" in site:
        return "reduce_transient"
    if rec.dtype == torch.float64:
        return "fp64_norm_copy"
    if "partition_parameters.py" in site and ("all_gather" in site or "_all_gather" in site):
        return "allgather_buffer"
    if "partition_parameters.py" in site:
        return "gathered_params"
    if "zero/linear.py" in site:
        return "param_grads_16bit"
    if "stage_1_and_2.py" in site and site.endswith(":allreduce_bucket"):
        return "reduce_transient"
    if "runtime/engine.py" in site and site.endswith(":allreduce_bucket"):
        return "allreduce_bucket"
    if site.endswith((":async_inplace_copy_grad_to_fp32_buffer_from_gpu", ":_offload_grad_partition_at_boundary")):
        return "offload_fp32_grad_slice"
    if "stage_1_and_2.py" in site and "reduce_independent_p_g_buckets_and_remove_grads" in site:
        return "offload_grad_clone"
    if rec.phase.startswith("step"):
        return "step_transient"
    return "ds_other:" + site.split(":")[0].rsplit("/", 1)[-1] + ":" + site.rsplit(":", 1)[-1]
