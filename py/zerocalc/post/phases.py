"""The moments an online post-training step adds to the run (contract plan-v1, Extension 7): ``generate``
(the rollout), ``sync`` (the policy's weights handed to vLLM, before each generation) and ``score`` (the no-grad forwards that give the
old, reference, reward and value figures), each over the state the update step leaves resident (run/view.py:
weights, optimizer states, DeepSpeed's flat buffers, the reference, a reward model, a vLLM that does not
sleep), less what the trainer moves to the host there (``offload_between_updates``: post/offload.py). A DPO-family run with ``precomputed`` reference log-probabilities adds the precompute pass as
``score`` (TRL `_precompute_ref_logps`, once before training, at `precompute_ref_batch_size`, by default the
training batch). Every mechanism and its code site is in post/generator.py and post/logprobs.py.
"""
from __future__ import annotations

from ..run.phase import Phase, phase
from ..run.view import RunView
from .defaults import Post
from .fp32out import casts_outputs, no_grad_with_copy
from .kto import KTO_METRICS
from .generator import (hf_kv_cache_bytes, hf_kv_dtypes, kv_bytes_per_token, ppo_rollout_gathered_bytes,
                        ppo_rollout_scores_bytes, sleep_host_bytes, sync_gather_bytes, sync_gathers_whole_model,
                        verl_layered_unit_numel, verl_state_dict_moments, verl_sync_bytes, vllm_budget_bytes,
                        vllm_kv_tokens, vllm_weight_bytes)
from .models import role_arch, scalar_head_arch
from . import offload

# TRL's OnPolicyConfig / ms-swift's RLHFArguments local_rollout_forward_batch_size (64): the rows each of PPO's
# rollout forwards (policy scores, reference, value, reward) takes at once (trl/trainer/ppo_trainer.py v0.19.0
# `for i in range(0, queries.shape[0], args.local_rollout_forward_batch_size)`), while `logitss`, the generation's
# padded fp32 scores (utils.py `batch_generation`: `pad(logitss)`), stay alive until the loop ends
ROLLOUT_FORWARD_BATCH = 64
from .logprobs import (fused_head_no_grad, fused_head_torch, kernel_buffers, reference_forward_bytes,
                       temperature_copy_bytes, verl_entropy_bytes)


def _resident(v: RunView, post: Post, name: str) -> dict:
    return v.by_component(offload.resident(v, post, name, v.state))


def _forward_resident(v: RunView, post: Post, name: str) -> dict:
    return v.by_component(offload.resident(v, post, name, v.state + v.forward_extra))


def _offload_kw(v: RunView, post: Post, name: str, host: int = 0, before: bool = False) -> dict:
    """The phase's host bytes and cache release with what the trainer offloads there (post/offload.py)."""
    return {"host": host + offload.host_bytes(v, post, name),
            "empties_cache_before": before or offload.empties_cache_before(v, post, name)}


def _layer_moment(v: RunView, rows: int, length: int) -> int:
    """A no-grad layer's transient: its MLP's three intermediate-wide tensors and two hidden-wide ones."""
    a = v.si.arch
    e = 2 if v.si.dt.autocast else v.si.dt.compute
    return e * rows * length * (3 * a.intermediate_size + 2 * a.hidden_size)


def generate_phase(v: RunView, post: Post) -> Phase | None:
    """The rollout on a training GPU: colocated vLLM's budget (held there already when it never sleeps), or HF
    `generate`'s KV cache for the generation batch (ZeRO-3: the whole 16-bit model gathered)."""
    g = post.gen
    if g is None or g.mode == "server":
        return None
    arch, plan = v.plan.arch, v.plan
    length = post.prompt + post.completion
    if g.engine == "vllm":
        budget = vllm_budget_bytes(g.utilization, v.capacity)
        tokens = vllm_kv_tokens(g.utilization, v.capacity, arch, g.tp)
        need = post.gen_rows * length
        note = (f"vLLM colocated: {g.utilization:g} of the GPU ({tokens:,} KV tokens for {need:,} needed)"
                if tokens > 0 else f"vLLM colocated: {g.utilization:g} of the GPU does not hold the 16-bit weights")
        extra = {} if g.sleep == 0 else {"generator": budget}
        # a sleeping vLLM maps its CuMemAllocator pool back for the rollout and unmaps it after: those bytes are
        # never left in torch's cache; what the sync left cached stays (TRL calls no empty_cache before waking
        # the KV cache)
        return phase("generate", _resident(v, post, "generate"), extra, note=note, outside=budget if g.sleep else 0,
                     uncounted=0 if g.in_process or not g.sleep else budget, **_offload_kw(v, post, "generate"))
    dt = v.si.dt
    kv = hf_kv_cache_bytes(arch, post.gen_rows, length,
                           *hf_kv_dtypes(dt.weight if plan.method == "full" else dt.frozen, dt.autocast))
    trl_ppo = post.method == "ppo" and post.trainer in ("trl", "ms-swift")
    scores = ppo_rollout_scores_bytes(post.gen_rows, post.completion, arch.vocab_size) if trl_ppo else 0
    extra = {"activations": kv + 4 * 2 * post.gen_rows * arch.vocab_size + scores}
    note = f"HF generate: KV cache for {post.gen_rows} sequences x {length} tokens"
    if plan.framework == "deepspeed" and plan.zero_stage == 3:
        extra["weights"] = 2 * (v.si.trainable.numel + (v.si.frozen_numel if plan.method != "full" else 0))
        note += ", whole model gathered (ZeRO-3 ds3_gather_for_generation)"
        if trl_ppo and post.critic is not None and post.critic.placement == "same-gpus":
            critic = scalar_head_arch(role_arch(post.critic, arch)).total_params
            extra["weights"] += ppo_rollout_gathered_bytes(critic)
            note += " with the critic (TRL PolicyAndValueWrapper)"
    return phase("generate", _forward_resident(v, post, "generate"), extra, transient=kv, note=note,
                 **_offload_kw(v, post, "generate"))


def sync_phase(v: RunView, post: Post) -> Phase | None:
    """The weight sync: vLLM's weights woken (sleep 1/2) beside the trainer's state, plus what is gathered."""
    g = post.gen
    if g is None or g.engine != "vllm":
        return None
    arch = v.plan.arch
    peft = v.plan.method != "full"
    numel = v.si.trainable.numel + (v.si.frozen_numel if peft else 0)
    verl = post.trainer == "verl"
    whole = sync_gathers_whole_model(peft, v.plan.framework, v.plan.zero_stage, post.trainer,
                                     v.si.stack.fsdp_version, g.layered_summon)
    nbytes = verl_sync_bytes(post.policy_load_bytes) if verl else 2
    if verl and peft and g.layered_summon:
        unit = verl_layered_unit_numel(arch.layer_sizes, v.si.trainable.numel, arch.num_layers)
        gathered = nbytes * unit
        what = "one FSDP layer at a time (verl layered_summon)"
    else:
        gathered = sync_gather_bytes(whole, numel, arch.largest_tensor, nbytes)
        what = (f"the whole {8 * nbytes}-bit model gathered (PEFT on sharded weights)" if whole
                else "one parameter at a time")
    extra = {"weights": gathered}
    woken = vllm_weight_bytes(arch, g.tp) if g.mode == "colocate" and g.sleep else 0
    host = sleep_host_bytes(g.sleep, arch, g.tp) if g.mode == "colocate" else 0
    # verl with param_offload loads the actor's shard to the GPU for the sync (`load_fsdp_model_to_gpu`) and
    # offloads it after vLLM's update up to 0.5 (sharding_manager/fsdp_vllm.py `__enter__` v0.4.1 / v0.5.0), before
    # vLLM's weights wake from 0.6 (fsdp_workers.py `rollout_mode` v0.6.0 / v0.7.0)
    # (post_training.offload_between_updates.weights: the resident state omits the shard here, post/offload.py)
    shard = offload.loaded_for_sync(v, post)
    kept = 0 if post.offload_before_wake else shard
    if verl and peft and gathered + shard >= woken + kept:
        # verl collects a LoRA actor's weights to the CPU (`.detach().cpu()` inside summon_full_params, then
        # empty_cache()) before `wake_up(tags=["weights"])` / `resume(tags=["weights"])`: the gather and the woken
        # weights never meet (sharding_manager/fsdp_vllm.py `__enter__` v0.5.0; fsdp_workers.py `rollout_mode`
        # v0.6.0 / v0.7.0), and the sync starts and ends with empty_cache()
        return phase("sync", _resident(v, post, "sync"), {"weights": gathered + shard}, transient=gathered + shard,
                     note=f"weights to vLLM: {what}", empties_cache=True, **_offload_kw(v, post, "sync", host, True))
    if verl and peft:
        extra = {"weights": kept}       # the LoRA tensors reach vLLM from the CPU
    elif verl and v.si.stack.fsdp_version == 1 and v.plan.framework == "fsdp":
        during, after = verl_state_dict_moments(nbytes, numel, v.plan.world_size,
                                                arch.total_params - sum(arch.layer_sizes),
                                                max(arch.layer_sizes, default=0), arch.largest_tensor)
        if during + shard > after + kept + woken:   # state_dict() before the wake, its shard copies kept beside it
            return phase("sync", _resident(v, post, "sync"), {"weights": during + shard}, transient=during + shard,
                         note="weights to vLLM: FSDP1 sharded state dict, one unit unsharded at a time",
                         empties_cache=True, **_offload_kw(v, post, "sync", host, True))
        extra = {"weights": after + kept}
        what = "FSDP1 sharded state dict kept, one tensor gathered at a time"
    elif verl:
        extra = {"weights": gathered + kept}
    if woken:
        extra["generator"] = woken      # TRL sync_weights: empty_cache(), then llm.wake_up(tags=["weights"])
    return phase("sync", _resident(v, post, "sync"), extra, transient=extra.get("weights", 0),
                 note=f"weights to vLLM: {what}", outside=woken, empties_cache=verl,
                 uncounted=0 if g.in_process else woken,
                 **_offload_kw(v, post, "sync", host, verl or (bool(woken) and post.trainer in ("trl", "ms-swift"))))


def score_phase(v: RunView, post: Post) -> Phase | None:
    """No-grad forwards over the generation batch in chunks of the training micro-batch (TRL GRPO
    `_get_per_token_logps_and_entropies(..., batch_size)`; verl / OpenRLHF log-prob micro-batches; TRL's and ms-swift's
    PPO in chunks of `ROLLOUT_FORWARD_BATCH` rows beside the rollout's kept fp32 scores), the reference, reward and
    value models as placed; or the DPO precompute pass."""
    arch = v.plan.arch
    if not post.online and post.reference != "precomputed":
        return None
    if post.ref_in_step and post.reward is None and post.gen_rows <= v.plan.micro_batch_size * \
            v.plan.gradient_accumulation_steps:
        return None     # TRL 0.18 GRPO: the reference inside the step, no old log-probs at one iteration
    trl_ppo = post.method == "ppo" and post.trainer in ("trl", "ms-swift")
    # TRL PPO scores the rollout in chunks of local_rollout_forward_batch_size, beside the generation's fp32 scores
    rows = min(post.gen_rows, ROLLOUT_FORWARD_BATCH) if trl_ppo else (post.score_rows or post.rows)
    length = post.score_length or post.length     # verl's log-prob budgets (post/defaults.py packed_shape)
    if post.ref_unchunked:        # TRL 0.19 GRPO: the reference over the whole generation batch (defaults.py)
        rows = post.gen_rows
    kept = ppo_rollout_scores_bytes(post.gen_rows, post.completion, arch.vocab_size) // 2 if trl_ppo else 0
    positions = (post.score_length or post.logit_positions) if post.online else length
    e = 2 if v.si.dt.autocast else v.si.dt.compute
    cast = casts_outputs(post, v.si, v.plan.loss == "chunked")
    c = 4 if cast else e          # accelerate's fp32 copy of the logits (post/fp32out.py)
    if not arch.causal_lm:
        logits = 0
    elif post.fused_head and post.torch_kernels:
        logits = fused_head_torch(rows * (length - 1), arch.vocab_size, arch.hidden_size, e, False).forward_peak
    elif post.fused_head:
        logits = fused_head_no_grad(rows * post.labelled, arch.vocab_size, arch.hidden_size, e)
    elif post.loss_kernel and not post.torch_kernels:
        logits = kernel_buffers(rows, positions, arch.vocab_size, c).forward_peak
    else:
        logits = reference_forward_bytes(post.trainer, rows, positions, arch.vocab_size, c, path=post.logits_path)
    if cast and arch.causal_lm:
        logits = no_grad_with_copy(logits, rows * positions * arch.vocab_size)
    if post.temperature_copy and arch.causal_lm and v.plan.loss != "chunked":
        logits = max(logits, temperature_copy_bytes(rows, positions, arch.vocab_size, c))   # logits / temperature
    if post.kto_copies and post.trainer == "trl" and not post.online and arch.causal_lm:
        # TRL < 1.15 KTO's precompute: the matched forward's logits kept through the KL forward (post/kto.py)
        logits += c * rows * length * arch.vocab_size
    if post.score_entropy and arch.causal_lm and not post.packed:     # packed: torch.compile'd, fused (logprobs.py)
        logits += verl_entropy_bytes(rows, post.completion, arch.vocab_size)      # the actor's old-log-prob pass
    peak = max(logits + e * rows * length * arch.hidden_size, _layer_moment(v, rows, length)) + kept
    base = _forward_resident(v, post, "score")
    if not post.online:
        base = {k: b for k, b in base.items() if k in ("weights", "lora_adapters", "buffers")}
    what = "old/reference/reward log-probabilities" if post.online else "reference log-probabilities precomputed"
    return phase("score", base, {"logits": peak}, transient=peak - kept,
                 note=f"{what}, {rows} rows x {length} tokens", **_offload_kw(v, post, "score"))


def in_step_score_phase(post: Post, step_terms) -> Phase | None:
    """The offline methods' reference forward, inside the update step: TRL's and LLaMA-Factory's `compute_loss`
    run it under no_grad after the policy's forward, before backward (post/step.py), so its window is the step's
    end-of-forward moment (``fwd``: the policy's saved activations and logits plus `reference_logits`), less what
    dies as the policy's forward returns (autocast's cache of checkpointed layers' weights) or comes after the
    reference (TRL 1.9-1.14 KTO's metrics copies)."""
    if (post.online and not post.ref_in_step) or post.reference not in ("model", "adapter", "cpu"):
        return None
    comps: dict = {}
    transient = 0
    for t in step_terms:
        if t.name in (KTO_METRICS, "autocast_cache_forward"):
            # TRL 1.9-1.14 KTO's metrics copies come after the reference's forward (post/kto.py); autocast's
            # cache of checkpointed layers' 16-bit weights is cleared as the policy's forward exits its autocast
            # context (accelerate prepare_model wraps `forward`), before the reference runs
            continue
        b = t.live("fwd") if t.where == "allocator" else 0
        if b:
            comps[t.component] = comps.get(t.component, 0) + b
            transient += b if t.component in ("activations", "logits") else 0
    return phase("score", comps, transient=transient, note="the reference's no-grad forward, inside the step "
                                                           "(after the policy's forward, before backward)")


def post_phases(v: RunView, post: Post | None, step_terms=()) -> tuple:
    """(name, Phase) of the moments before the update step, in the order a step meets them (an offline method's
    reference forward, which runs inside the step, is listed as ``score`` too)."""
    if post is None:
        return ()
    out = []
    # TRL `_generate`: the weights are synced before each generation (`_sync_weights` when the step moved on)
    for name, fn in (("sync", sync_phase), ("generate", generate_phase), ("score", score_phase)):
        ph = fn(v, post)
        if ph is not None:
            out.append((name, offload.noted(v, post, name, ph)))
    inside = in_step_score_phase(post, step_terms)
    if inside is not None and not any(n == "score" for n, _ in out):
        out.append(("score", inside))
    return tuple(out)


__all__ = ["post_phases", "generate_phase", "sync_phase", "score_phase", "kv_bytes_per_token"]
