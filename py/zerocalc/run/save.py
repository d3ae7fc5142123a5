"""Checkpoint saves, optimizer reloads and the merge at the end: the ``save``, ``resume`` and ``merge`` phases.
Each runs after `zero_grad`, on the resident state (run/view.py), plus what its writer gathers.

Writers (run/defaults.py `save_writer` picks the default):
- ``module`` (a state dict of tensors already whole on the GPU: transformers `save_pretrained` / safetensors,
  DeepSpeed stages 0-2 `module_state_dict`, torchtune single-device `{k: v.cpu()}`): host copies only.
  torchtune's NF4 state-dict hook dequantizes one weight at a time (`v.to(dtype)` before `.cpu()`); torchtune
  0.6.1's single-device full save permutes q and k on the GPU, its LoRA save merges a host copy of the model;
  LitGPT's `fabric.save` serialises model and optimizer into memory first.
- ``adapter-only`` (PEFT `save_pretrained`, LitGPT `save_lora_checkpoint`): host copies only, except under
  ZeRO-3, where accelerate's `get_state_dict` still gathers every module's parameters one module at a time.
- ``zero3-16bit`` (DeepSpeed engine.py `_zero3_consolidated_16bit_state_dict`, "gather one layer at a time":
  `GatheredParameters(module.parameters(recurse=False), modifier_rank=0)`, then `.cpu()` on rank 0): the
  largest module whole in 16 bits; rank 0 assembles the 16-bit model in host memory.
- ``zero3-partitions`` (DeepSpeed `save_checkpoint` of the partitions) and ``dcp`` (torchtitan, DCP
  `dcp.save` of local shards): no gather.
- ``fsdp-full`` (accelerate's and Lightning's FULL_STATE_DICT with `offload_to_cpu=True, rank0_only=True`;
  torch/distributed/fsdp/_state_dict_utils.py `_full_pre_state_dict_hook` unshards each unit on every rank, rank
  0 `handle.to_cpu()`): the largest unit unsharded in the parameters' dtype; the optimizer's full state dict
  (`FSDP.optim_state_dict`, _optim_utils.py `_allgather_orig_param_states`) gathers one unit's states (two Adam
  moments). FSDP2 (torchtune `gather_cpu_state_dict`: `full_tensor()` per parameter, then `.cpu()`): one
  parameter whole.
- ``fsdp-full-no-offload`` (raw FSDP1 FULL_STATE_DICT, `_full_post_state_dict_hook` `.clone().detach()` of
  every unsharded parameter on every rank): the whole model in the parameters' dtype per GPU.
- ``fsdp-sharded`` (FSDP1 SHARDED_STATE_DICT, `_sharded_pre_state_dict_hook` unshards each unit too): the largest
  unit; FSDP2 none.
Resume and `load_best_model_at_end` (torch/optim/optimizer.py `load_state_dict` builds the new state before
replacing the old; DeepSpeed stage3.py `_rigid_load_state_dict` loads into an optimizer whose states exist since
init; transformers `_load_best_model` -> `deepspeed_load_checkpoint(..., load_optimizer_states=True)`): the old and
new optimizer states coexist under DeepSpeed. A torch optimizer resumed before its first step has no old states
(they are created lazily), and HF's best-model reload outside DeepSpeed loads weights only (host -> in place).
Merge (peft tuners/lora/layer.py `merge`: `base.weight.data += get_delta_weight()`, one layer at a time; bnb
4-bit: `dequantize_bnb_weight`, add, re-quantize): the largest adapted weight's 16-bit copy, its fp32 delta
and the sum. ``16bit-in-process`` (merging a QLoRA run into a 16-bit model on the training GPU, e.g. Unsloth
`save_pretrained_merged(merged_16bit)`): the base reloaded in 16 bits beside the live quantized model.
"""
from __future__ import annotations

from ..memory.lora import largest_quantized_matrix
from ..units import ceil_div
from .phase import Phase, phase
from .view import RunView


def _after_zero_grad(v: RunView) -> dict:
    """What a phase without a forward starts from: the resident state and the gradients zero_grad leaves."""
    return v.by_component(v.state + v.kept_grads)


def _largest_unit(v: RunView) -> int:
    arch = v.si.arch
    return max(max(arch.layer_sizes or (0,)), arch.total_params - sum(arch.layer_sizes))


def save_transient(v: RunView, writer: str, optimizer: bool) -> tuple[int, str]:
    """GPU bytes a save's writer adds on the busiest rank, and its name."""
    plan, si, arch = v.plan, v.si, v.si.arch
    full = plan.method == "full"
    pbytes = si.dt.weight if full else si.dt.frozen
    if writer == "adapter-only":
        gathered = 2 * arch.largest_module if plan.framework == "deepspeed" and plan.zero_stage == 3 else 0
        return gathered, "adapter-only save"
    if writer == "module":
        if si.stack.trainer == "torchtune" and plan.method == "qlora":
            return 2 * largest_quantized_matrix(arch), "state dict, one NF4 weight dequantized at a time"
        if si.stack.trainer == "torchtune" and full and plan.world_size == 1:
            # torchtune 0.6.1 full_finetune_single_device.py `save_checkpoint` hands `self._model.state_dict()` (the
            # device tensors) to FullModelHFCheckpointer.save_checkpoint (training/checkpointing/_checkpointer.py),
            # whose convert_weights.tune_to_hf `_permute`s every q_proj and k_proj (view, transpose, reshape: a copy)
            # into the converted dict before any shard is written (traced: golden/run tt-l1b-full-chunked-s1024-b2-val)
            qk = si.dt.weight * arch.num_layers * arch.hidden_size * (arch.q_dim + arch.kv_dim)
            return qk, "state dict on the GPU, q and k permuted to HF's layout"
        return 0, "state dict copied to the host"
    if writer == "zero3-16bit":
        return 2 * arch.largest_module, "ZeRO-3 16-bit gather, one module at a time"
    if writer in ("zero3-partitions", "dcp"):
        return 0, "each rank writes its own shards"
    if plan.framework != "fsdp":
        return 0, writer
    v1 = si.stack.fsdp_version == 1
    if writer == "fsdp-full-no-offload":
        # every parameter cloned, beside the root unit, which its pre-state-dict hook unshards first and its
        # post hook clones last (traced: tools/fsdpprobe fsdp-small-full-no-offload, +4P + the root unit in fp32
        # over the resident state)
        model = pbytes * arch.total_params + (si.dt.adapter * si.trainable.numel if not full else 0)
        unit = pbytes * _largest_unit(v) if v1 else 0
        return model + unit, "FULL_STATE_DICT without offload: the whole model on every GPU"
    if writer == "fsdp-sharded" and not v1:
        return 0, "sharded state dict"
    unit = _largest_unit(v) if v1 else arch.largest_tensor
    model = pbytes * unit
    states = 2 * si.dt.state * (unit if full else 0) if optimizer and writer == "fsdp-full" else 0
    what = "one unit" if v1 else "one parameter"
    return max(model, states), f"{'FULL' if writer == 'fsdp-full' else 'SHARDED'}_STATE_DICT: {what} gathered"


def save_host(v: RunView, writer: str) -> int:
    """Host bytes a save's writer holds on the busiest rank (rank 0), at its peak:
    - ``module``: transformers `save_pretrained` hands safetensors `save_file` the whole state dict, which
      serialises every tensor to host bytes before writing (safetensors/torch.py `_flatten` -> `_tobytes`);
      torchtune single-device `{k: v.cpu() for k, v in state_dict.items()}`: the model's bytes as stored;
    - ``adapter-only``: the same for the adapters alone (PEFT `get_peft_model_state_dict`);
    - ``zero3-16bit``: rank 0 keeps `param.detach().cpu()` of every 16-bit parameter (DeepSpeed engine.py
      `_zero3_consolidated_16bit_state_dict`): 2 bytes a parameter;
    - ``zero3-partitions``: `torch.save` copies one storage at a time (serialization.py `_save`), the largest
      being the rank's fp32 partition;
    - ``fsdp-full`` (FSDP1, offload_to_cpu + rank0_only): rank 0 holds every parameter's clone on the host in
      the parameters' dtype, beside `FlatParamHandle.to_cpu`'s copy of the unit being unsharded (FSDP2 /
      torchtune `gather_cpu_state_dict`: the clones alone);
    - ``fsdp-sharded`` (FSDP1, accelerate's offload_to_cpu): each rank's chunk of every parameter;
    - FSDP2 sharded, DCP and FULL_STATE_DICT without offload: nothing beyond a storage in flight.
    Traced (tools/memtrace/golden/run: the HF Trainer saves 2P and the adapters; the DeepSpeed probe 2P on rank 0,
    4P/N on rank 1; the FSDP probe's offloaded FULL_STATE_DICT 4P + 4 x the root unit on rank 0). The optimizer's
    own full state dict (FSDP `optim_state_dict` offloaded to rank 0) is not traced and not counted."""
    plan, si = v.plan, v.si
    full = plan.method == "full"
    adapters = (si.dt.weight if full else si.dt.adapter) * si.trainable.numel
    if writer == "module":
        if si.stack.trainer == "torchtune" and not full:
            # lora_finetune_single_device.py `save_checkpoint` (save_adapter_weights_only False, the 0.6.1 configs'):
            # `{k: v.cpu() ...}` of the whole model, get_merged_lora_ckpt merges in place on the host, and safetensors
            # `save_file` serialises the merged shard beside it; the adapters' own `.to("cpu")` copies too (traced:
            # golden/run tt-l1b-lora-chunked-s1024-b2-val)
            return adapters + 2 * si.frozen_bytes
        if si.stack.trainer == "litgpt":
            # finetune/full.py `fabric.save(checkpoint_file, state)`: lightning cloud_io.py `_atomic_save` serialises the
            # model's and the optimizer's state dicts into a BytesIO, then `f.write(bytesbuffer.getvalue())` copies it
            # (traced: golden/run lit-l1b-full-s1024-b2-val)
            opt = v.state_bytes("optimizer_states") if v.run.save.optimizer else 0
            return 2 * (adapters + (si.frozen_bytes if not full else 0) + opt)
        return adapters + (si.frozen_bytes if not full else 0)
    if writer == "adapter-only":
        return adapters
    if writer == "zero3-16bit":
        return 2 * (si.trainable.numel + si.frozen_numel)
    if writer == "zero3-partitions":
        return 4 * ceil_div(si.trainable.numel, plan.world_size)
    if writer == "fsdp-sharded" and plan.framework == "fsdp" and si.stack.fsdp_version == 1:
        # accelerate's ShardedStateDictConfig(offload_to_cpu=True): `_sharded_post_state_dict_hook` chunks each
        # unsharded parameter (`_ext_chunk_tensor`: this rank's chunk cloned) and `.cpu()`s the ShardedTensor
        pbytes = si.dt.weight if full else si.dt.frozen
        return pbytes * ceil_div(si.trainable.numel + (si.frozen_numel if not full else 0), plan.world_size)
    if writer == "fsdp-full" and plan.framework == "fsdp":
        pbytes = si.dt.weight if full else si.dt.frozen
        whole = si.trainable.numel + (si.frozen_numel if not full else 0)
        unit = _largest_unit(v) if si.stack.fsdp_version == 1 else 0
        return pbytes * (whole + unit)
    return 0


def save_phase(v: RunView) -> Phase | None:
    s = v.run.save
    if s is None:
        return None
    extra, note = save_transient(v, s.writer, s.optimizer)
    # FSDP1's root pre-state-dict hook frees every flat gradient first (torch/distributed/fsdp/_state_dict_utils.py
    # `_common_pre_state_dict_hook` -> `_reset_flat_param_grad_info_if_needed(fsdp_state._all_handles)`), whatever
    # the state-dict type: a save starts from the resident state alone (traced: the three FSDP probe saves)
    return phase("save", v.by_component(v.state), {"buffers": extra}, transient=extra, host=save_host(v, s.writer),
                 note=note)


def resume_phase(v: RunView) -> Phase | None:
    r = v.run
    if not (r.resume or r.load_best_at_end):
        return None
    new_states = 0
    if v.plan.framework == "deepspeed" and v.plan.offload_optimizer == "none":
        new_states = sum(t.nbytes for t in v.state if t.name == "optimizer_states")
    what = "resume" if r.resume else "best-model reload"
    note = f"{what}: old and new optimizer states coexist" if new_states else f"{what}: weights loaded in place"
    return phase("resume", _after_zero_grad(v), {"optimizer_states": new_states}, transient=new_states, note=note)


def merge_phase(v: RunView) -> Phase | None:
    plan, si = v.plan, v.si
    if v.run.merge == "none":
        return None
    w = largest_quantized_matrix(si.arch)
    per_layer = w * (2 + 4 + 4) if plan.method == "qlora" else w * (si.dt.adapter + 2)
    extra = {"buffers": per_layer}
    note = "adapters merged one layer at a time"
    if v.run.merge == "16bit-in-process" and plan.method == "qlora":
        extra["weights"] = 2 * si.frozen_numel
        note = "the base reloaded in 16 bits beside the quantized model"
    return phase("merge", _after_zero_grad(v), extra, transient=per_layer, note=note)


__all__ = ["save_phase", "resume_phase", "merge_phase", "save_transient", "save_host"]
