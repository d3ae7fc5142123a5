"""The rollout engine's memory on a training GPU: colocated vLLM's budget, its CUDA graphs, its sleep levels,
the weight sync, and HF `generate`'s KV cache. vLLM cannot run on CPU, so nothing here is traced: the
accounting is read from vLLM's source.

- Budget: `Worker.determine_available_memory` (vllm/v1/worker/gpu_worker.py) sizes the KV cache as
  `total_gpu_memory * gpu_memory_utilization - peak_memory` (weights plus the profiling forward's peak), so an
  instance holds the fraction of the device's *total* memory, weights, activations and KV cache together,
  whatever the trainer already holds (verl's perf guide: "the vLLM instance will only use
  gpu_memory_utilization of the total memory"). Each GPU of a tensor-parallel group holds the fraction of its
  own capacity; the weights split over the group.
- CUDA graphs are captured after the KV cache is allocated (`compile_or_warm_up_model` -> `capture_model`,
  which logs "Graph capturing finished in N secs, took X GiB", measured as the drop in free memory), in torch's
  graph pool rather than the CuMemAllocator pool, so they cannot be offloaded (verl rollout.yaml: "cudagraph in
  inference engine can not be offloaded during update policy"). Up to vLLM 0.20 they come on top of the budget
  (vllm#21489: the profile "does not include CUDAGraph memory since the estimation happens before CUDAGraph
  capture"); from 0.21 vLLM captures dummy graphs while profiling and takes that estimate out of the budget
  (vllm#30515; its log in 0.27.1: "CUDA graph memory profiling is enabled (default since v0.21.0)",
  gpustack/runner#251). TRL supports vLLM 0.17-0.25.1 (pyproject `vllm>=0.17.0,<=0.25.1`), both sides of that
  change; the plan names no vLLM release, so the graphs stay counted beside the budget (an upper bound from 0.21).
  Their size is not derived from the model: the graphs of all capture sizes share one pool (vllm#45178: the
  per-graph extrapolation overestimates for that reason), and the logs give 0.13 GiB (a 1.1 GiB model,
  mellea#416), 0.21 GiB (Llama-3.2-1B, 35 sizes, vllm#11349), 0.36 GiB (estimated, 16 piecewise sizes,
  gpustack/runner#251), 0.65 GiB (gemma-3-4b, vllm#21489), ~1.3 GB (Llama 4 Maverick, vllm#21489), 6-28 MiB per
  capture size (vllm#22897): 0.5 GiB is assumed.
- Sleep (vLLM `LLM.sleep`, CuMemAllocator): level 1 offloads the weights to pinned host memory and discards the
  KV cache; level 2 discards both. TRL (`vllm_enable_sleep_mode`) sleeps at level 2 after each generation and
  wakes the weights before the sync, the KV cache before the next generation (trl/generation/
  vllm_generation.py). At level 0 the budget stays allocated through the update step.
- Weight sync (TRL vllm_generation.py `sync_weights`): without PEFT each parameter is gathered (ZeRO-3,
  FSDP) and sent on its own; with PEFT under ZeRO-3 "we must gather the full model at once before merging"
  (the 16-bit model on every GPU; under FSDP the gather is a no-op and the modules are synced in post-order);
  without sharding the adapter is merged in place.
- HF `generate` (TRL grpo_trainer.py `_generate_single_turn`: `unwrapped_model.generate(...)` under no_grad, for
  the whole generation batch at once): a `DynamicCache` (transformers cache_utils.py `DynamicLayer.update`:
  `torch.cat` of each step's keys / values onto the layer's) of L·n_kv·d_h·rows·(prompt + completion - 1)
  positions (the last sampled token is never fed back) x (key bytes + value bytes). The dtypes are what the
  attention hands the cache: values are `v_proj`'s output (16-bit under autocast, else the model's dtype), keys
  are `k_proj`'s output rotated by RoPE's cos / sin in the residual stream's dtype (`cos.to(x.dtype)`), so an
  fp32 model under bf16 autocast (TRL's fp32 default with accelerate's native_amp; `unwrap_model` keeps the
  autocast wrapper) caches fp32 keys and bf16 values. Traced: tools/memtrace/hfcache.py (golden/post/
  hf-generate-cache.json). Under ZeRO-3 the whole model is gathered (trl/models/utils.py
  `unwrap_model_for_generation`: `GatheredParameters(model.parameters())`, unless
  `ds3_gather_for_generation=False`).
- TRL's PPO rollout (ms-swift's PPO is TRL's PPOTrainer, swift/rlhf_trainers/ppo_trainer.py at 3602360; TRL
  ppo_trainer.py v0.19.0 lines 424-433, the same in trl/experimental/ppo): `unwrap_model_for_generation(self.model,
  ...)` where `self.model = PolicyAndValueWrapper(self.policy_model, self.value_model)`, so under ZeRO-3
  `GatheredParameters(model.parameters())` gathers the critic's 16-bit weights beside the policy's
  (`ppo_rollout_gathered_bytes`); and trl/trainer/utils.py `generate` asks for `output_scores=True` and returns
  `torch.stack(output.scores, 1)`: one fp32 row of processed logits per generated token (transformers `_sample`:
  `outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`) kept for every sequence, beside their stacked copy
  while the cache is still alive (`ppo_rollout_scores_bytes`).
"""
from __future__ import annotations

from ..model import ModelArch
from ..units import ceil_div

CUDA_GRAPH_BYTES = 512 << 20       # assumed; vLLM logs 0.13-1.3 GiB ("Graph capturing finished ... took X GiB")
KV_BYTES = 2                       # vLLM's default kv_cache_dtype "auto": the model's 16-bit dtype
MAX_BATCHED_TOKENS = 4096          # TRL colocate: LLM(..., max_num_batched_tokens=4096)


def vllm_budget_bytes(utilization: float, capacity: int) -> int:
    """What one colocated vLLM instance holds on each of its GPUs: the fraction of the device's capacity."""
    return int(utilization * capacity)


def vllm_weight_bytes(arch: ModelArch, tp: int) -> int:
    """vLLM's 16-bit copy of the policy on one GPU of its tensor-parallel group."""
    return ceil_div(2 * arch.total_params, tp)


def kv_bytes_per_token(arch: ModelArch, tp: int, nbytes: int = KV_BYTES) -> int:
    """Keys and values of every layer for one token, on one GPU of the TP group (heads split over it)."""
    return ceil_div(2 * arch.num_layers * arch.kv_dim * nbytes, tp)


def vllm_profile_peak(arch: ModelArch, tp: int) -> int:
    """The profiling forward's activation peak (a no-grad MLP at max_num_batched_tokens: its three
    intermediate-wide tensors and two hidden-wide ones, 16-bit)."""
    return MAX_BATCHED_TOKENS * 2 * (3 * ceil_div(arch.intermediate_size, tp) + 2 * arch.hidden_size)


def vllm_kv_tokens(utilization: float, capacity: int, arch: ModelArch, tp: int) -> int:
    """Tokens the KV cache holds: the budget less the weights and the profile peak, per token's KV bytes
    (negative when the fraction does not even hold the weights: vLLM then refuses to start)."""
    free = vllm_budget_bytes(utilization, capacity) - vllm_weight_bytes(arch, tp) - vllm_profile_peak(arch, tp)
    return free // kv_bytes_per_token(arch, tp)


def vllm_pool_bytes(utilization: float, capacity: int, arch: ModelArch, tp: int) -> int:
    """What a sleeping vLLM still counts in the training process's torch counters: its weights and KV cache,
    allocated inside `CuMemAllocator.use_memory_pool` (vllm/device_allocator/cumem.py: a `torch.cuda.memory.MemPool`
    of a `CUDAPluggableAllocator`, so the caching allocator books every block), and released at sleep by
    `unmap_and_release` in C, behind the allocator's back. So `torch.cuda.memory_allocated()` stays put across
    sleep and wake (vllm#17117: 28,294.25 MB before sleep, after wake_up and after sleep(level=2), while
    mem_get_info's free bytes move by 25 GB), and with verl `max_memory_reserved` reads 199 GB on a 140 GB H200
    (vllm#33625). The profiling forward's workspace is freed back to torch's own cache, not the pool."""
    kv = max(0, vllm_kv_tokens(utilization, capacity, arch, tp)) * kv_bytes_per_token(arch, tp)
    return vllm_weight_bytes(arch, tp) + kv


def cuda_graph_bytes(cuda_graphs: bool) -> int:
    return CUDA_GRAPH_BYTES if cuda_graphs else 0


def sleep_host_bytes(sleep: int, arch: ModelArch, tp: int) -> int:
    """Pinned host memory of a level-1 sleep (the weights backed up to the CPU); level 2 keeps nothing."""
    return vllm_weight_bytes(arch, tp) if sleep == 1 else 0


def hf_kv_dtypes(model_bytes: int, autocast: bool) -> tuple[int, int]:
    """(key, value) bytes per element of HF `generate`'s cache for a model stored in ``model_bytes``: values
    are `v_proj`'s output, keys its RoPE-rotated `k_proj` output promoted to the residual stream's dtype."""
    value = 2 if autocast else model_bytes
    return max(value, model_bytes), value


def hf_kv_cache_bytes(arch: ModelArch, rows: int, length: int, key_bytes: int = 2, value_bytes: int = 2) -> int:
    """HF `generate`'s DynamicCache for ``rows`` sequences of ``length`` tokens (prompt + completion): the
    cache ends one position short, the last sampled token never being fed back."""
    return arch.num_layers * arch.kv_dim * rows * (length - 1) * (key_bytes + value_bytes)


def sync_gathers_whole_model(peft: bool, framework: str, zero_stage: int, trainer: str,
                             fsdp_version: int = 1, layered: bool = False) -> bool:
    """Whether the sync gathers the whole model at once: TRL with PEFT under ZeRO-3 (`gather_params(list(
    model.parameters()))` then `merge_adapter()`; under FSDP that gather "is a no-op" and
    `_sync_fsdp_params_to_vllm` walks the modules in post-order), verl with LoRA on FSDP1 (`summon_full_params` of
    the whole module unless `layered_summon`: verl/workers/sharding_manager/fsdp_vllm.py `__enter__` at v0.4.1 /
    v0.5.0, verl/utils/fsdp_utils.py `collect_lora_params` at v0.6.0 / v0.7.0 / b178a3c). On FSDP2 torch's
    `FSDP.summon_full_params` finds no FSDP1 state (`_get_fsdp_states_with_modules`) and does nothing: the
    parameters are DTensors gathered one by one (`param.full_tensor().detach().cpu()`)."""
    if not peft:
        return False
    if framework == "deepspeed" and zero_stage == 3:
        return True
    return trainer == "verl" and framework == "fsdp" and fsdp_version == 1 and not layered


def sync_gather_bytes(whole: bool, model_numel: int, largest_tensor: int, nbytes: int = 2) -> int:
    """The weights gathered at once to hand the policy to vLLM: the whole model, or one parameter, at ``nbytes``
    per element (16-bit, or verl's full-precision actor: `verl_sync_bytes`)."""
    return nbytes * model_numel if whole else nbytes * largest_tensor


def verl_sync_bytes(load_bytes: int) -> int:
    """Bytes per element of verl's sync gather: the actor's own dtype. verl builds the actor in fp32
    (fsdp_workers.py `_build_model_optimizer`: `torch_dtype = torch.float32 if self._is_actor else
    torch.bfloat16`, unless `fsdp_config.model_dtype`; v0.4.1 ... b178a3c), and FSDP1's `summon_full_params`
    gathers the full-precision flat parameter although `MixedPrecision(param_dtype=bf16)` is set (torch
    distributed/fsdp/_flat_param.py `FlatParamHandle._force_full_precision`: true in
    `HandleTrainingState.SUMMON_FULL_PARAMS`; `_get_unflat_views` then reads `_full_prec_full_param_padded`);
    without LoRA, FSDP2, or layered, each `param.to(device).full_tensor()` of the sharded state dict is the
    fp32 shard's gather too (fsdp_workers.py `rollout_mode` at v0.6.0 / v0.7.0; fsdp_vllm.py at v0.5.0)."""
    return load_bytes


def verl_layered_unit_numel(layer_sizes, adapter_numel: int, num_layers: int) -> int:
    """verl's ``layered_summon`` (fsdp_utils.py `layered_summon_lora_params`, v0.4.1 ... b178a3c): each FSDP
    submodule under `base_model.model.model.layers.` is summoned on its own (`summon_full_params(submodule)`),
    its LoRA state copied to the CPU, then `empty_cache()`: one decoder layer with its adapters (the largest
    layer, the adapters spread evenly over the layers) is the most gathered at once. The root unit's embedding
    and head are not FSDP submodules of their own and are not summoned."""
    layer = max(layer_sizes) if layer_sizes else 0
    return layer + -(-adapter_numel // max(1, num_layers))


def verl_state_dict_moments(nbytes: int, numel: int, world: int, root_numel: int, layer_numel: int,
                            largest_tensor: int) -> tuple[int, int]:
    """(while `state_dict()` runs, after vLLM's weights wake) bytes of verl's full-parameter sync on FSDP1
    (fsdp_workers.py `rollout_mode` v0.6.0 / v0.7.0: `params = self.actor_module_fsdp.state_dict()`, kept until
    `del params` after `update_weights`; sharding_manager/fsdp_vllm.py `__enter__` v0.5.0 the same). verl sets
    SHARDED_STATE_DICT (FULL_STATE_DICT on one GPU) and FSDP1 built with a device mesh turns `_use_dtensor` on
    (torch fsdp/_state_dict_utils.py `_set_use_dtensor`): each FSDP unit is unsharded in full precision in its
    pre-state-dict hook (`_common_unshard_pre_state_dict_hook`, the root unit's while its children run), and
    each parameter is `tensor.detach().clone()`d whole then redistributed to its shard, cloned again
    (fsdp/_shard_utils.py `_create_chunk_dtensor`; tensor/placement_types.py `_replicate_to_shard` clone=True):
    the shards' copies, ``nbytes`` x numel / world, live through the sync. Then each `param.to(device).
    full_tensor()` gathers one full-precision tensor beside vLLM's woken weights."""
    clones = nbytes * numel // world
    during = clones + nbytes * (root_numel + layer_numel + largest_tensor)
    return during, clones + nbytes * largest_tensor


def ppo_rollout_scores_bytes(rows: int, completion: int, vocab: int) -> int:
    """TRL PPO's rollout logits (see the module docstring): the per-step fp32 scores and their torch.stack."""
    return 2 * 4 * rows * completion * vocab


def ppo_rollout_gathered_bytes(critic_numel: int) -> int:
    """The critic's 16-bit weights that ZeRO-3 gathers with the policy for TRL PPO's generation (the module
    docstring: `PolicyAndValueWrapper` is what `unwrap_model_for_generation` gathers)."""
    return 2 * critic_numel
