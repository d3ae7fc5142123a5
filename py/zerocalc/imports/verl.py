"""verl's Hydra config (``python3 -m verl.trainer.main_ppo a.b.c=value ...`` overrides, or a YAML with the
``actor_rollout_ref`` / ``data`` / ``trainer`` sections) -> plan with ``post_training`` (plan-v1 Extension 7).

Defaults from verl's config files (verl/trainer/config: ppo_trainer.yaml, rollout/rollout.yaml @035682e,
actor/actor.yaml, model/hf_model.yaml): ``algorithm.adv_estimator`` gae (PPO with a critic; verl builds a
critic for gae only, every other estimator updates the actor alone, as GRPO: grpo/rloo named, the rest read as
grpo and said so), ``data.max_prompt_length`` / ``max_response_length`` 512 / 512, ``rollout.n`` 1,
``rollout.gpu_memory_utilization`` 0.5, ``rollout.tensor_model_parallel_size`` 2, ``rollout.free_cache_engine``
true (sleep level 2: the newest verl's `VLLM_SLEEP_LEVEL` on vLLM >= 0.8.5, verl 0.6+; level 1 with
``rollout.layered_summon``, and in verl 0.5, post/defaults.py `verl_sleep_level`), ``rollout.layered_summon`` false
(a LoRA actor on FSDP syncs one layer at a time), ``rollout.enforce_eager`` false, ``actor.ppo_mini_batch_size``
256 prompts (per data-parallel group: × rollout.n ÷ (world ÷ ``actor.ulysses_sequence_parallel_size``);
accumulation = that ÷ ``ppo_micro_batch_size_per_gpu``), ``actor.strategy`` fsdp,
``model.enable_gradient_checkpointing`` true, ``model.lora_rank`` 0 / ``lora_alpha`` 16 /
``target_modules all-linear``, ``trainer.n_gpus_per_node`` 8, ``trainer.nnodes`` 1. A reference exists only
with ``actor.use_kl_loss`` or ``algorithm.use_kl_in_reward`` (ray_trainer ``need_reference_policy``); verl
forces it to CPU offload (fsdp_workers.py "We force reference policy to use CPUOffload"), with LoRA it is the
actor without its adapter (``ref_in_actor``). FSDP keeps bf16 compute over an fp32 actor (bf16-mixed).
``model.use_remove_padding`` (false), ``actor.use_dynamic_bsz`` (false) with ``ppo_max_token_len_per_gpu`` (16384)
and the log-prob passes' ``log_prob_use_dynamic_bsz`` / ``log_prob_max_token_len_per_gpu`` (the actor's) or
``log_prob_micro_batch_size_per_gpu`` give
``post_training.packing`` (`_packing`; the engine's reading: post/defaults.py `packed_shape`).
"""
from __future__ import annotations

from .builder import EMPTY, NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, as_bool, as_int, as_number, \
    no_effect_reason, set_model
from ..post.defaults import verl_sleep_level
from .post_common import not_modelled_flags, role_model, set_lora

A = "actor_rollout_ref."
ESTIMATORS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo"}
LENGTH_KEYS = ("data.max_prompt_length", "data.max_response_length")
NOT_MODELLED_KEYS = (A + "actor.fsdp_config.grad_offload",
                     A + "actor.entropy_checkpointing", A + "rollout.max_num_batched_tokens",
                     "critic.ppo_micro_batch_size_per_gpu",
                     "critic.forward_micro_batch_size_per_gpu", A + "model.use_fused_kernels",
                     A + "rollout.cudagraph_capture_sizes", A + "actor.calculate_entropy")
READ_ONLY = {
    A + "ref.fsdp_config.param_offload": "read: verl forces the reference to CPU offload whatever this says "
                                         "(fsdp_workers.py)",
    "data.train_batch_size": "read: prompts per step; the update step's rows are the actor's micro-batch",
    A + "rollout.mode": "read: sync and async rollouts hold the same engine",
    A + "rollout.load_format": NO_EFFECT, A + "model.use_shm": NO_EFFECT,
    A + "actor.kl_loss_coef": NO_EFFECT, A + "actor.kl_loss_type": NO_EFFECT,
    "algorithm.kl_ctrl.kl_coef": NO_EFFECT,
    "trainer.critic_warmup": NO_EFFECT, "data.filter_overlong_prompts": NO_EFFECT, "data.truncation": NO_EFFECT,
}


def _offloads(b: Builder, take, strat: str) -> None:
    """The actor's ``fsdp_config``: ``param_offload`` / ``optimizer_offload`` move the FSDP shards / the Adam moments
    to the host between updates (post_training.offload_between_updates; fsdp_workers.py v0.5.0 `update_actor`,
    `compute_log_prob`, fsdp_utils.py `offload_fsdp_model_to_cpu` / `offload_fsdp_optimizer`: the actor never gets
    FSDP's CPUOffload, "it causes incorrect results when using grad accumulation"). ``offload_policy`` (FSDP2
    only) is CPUOffloadPolicy(pin_memory=True), the real CPU offload through the step, and turns both flags off."""
    f = A + "actor.fsdp_config."
    po, oo, pol = take(f + "param_offload"), take(f + "optimizer_offload"), take(f + "offload_policy")
    policy = pol is not None and as_bool(f + "offload_policy", pol)
    if policy and strat == "fsdp2":
        b.set(f + "offload_policy", "offload_params", "cpu")
        b.set(f + "offload_policy", "offload_optimizer", "cpu")
        for k, v in ((f + "param_offload", po), (f + "optimizer_offload", oo)):
            if v is not None:
                b.skip(k, v, NO_EFFECT + " (offload_policy turns it off: fsdp_workers.py)")
        return
    if pol is not None:
        b.skip(f + "offload_policy", pol, NO_EFFECT + (" (FSDP2's; the actor runs FSDP1)" if policy else ""))
    b.set("(verl actor: no FSDP CPUOffload)", "offload_params", "none", default=True)
    b.set("(verl actor: no FSDP CPUOffload)", "offload_optimizer", "none", default=True)
    w = po is not None and as_bool(f + "param_offload", po)
    o = oo is not None and as_bool(f + "optimizer_offload", oo)
    if w or o:
        key = "post_training.offload_between_updates."
        b.set(f + "param_offload", key + "weights", w, default=po is None)
        b.set(f + "optimizer_offload", key + "optimizer", o, default=oo is None)
    else:
        for k, v in ((f + "param_offload", po), (f + "optimizer_offload", oo)):
            if v is not None:
                b.skip(k, v, "verl's default (nothing moved between updates)")


def flatten(cfg: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def import_verl(cfg: dict, plan, loader=None, cmd=None):
    flat = flatten(cfg)
    b = Builder("verl", plan)
    seen = set()

    def take(k):
        seen.add(k)
        return flat.get(k)

    def num(k, default, fn=as_int, **kw):
        v = take(k)
        return (default if v is None else fn(k, v, **kw)), v is None

    for k, plan_key, dflt in (("trainer.n_gpus_per_node", "gpus_per_node", 8), ("trainer.nnodes", "nodes", 1)):
        v, d = num(k, dflt)
        b.set(k, plan_key, v, default=d)
    world = b.plan["gpus_per_node"] * b.plan["nodes"]
    est = take("algorithm.adv_estimator") or "gae"
    if not isinstance(est, str):
        raise ConfigImportError("algorithm.adv_estimator", f"expected a name, got {est!r}")
    method = ESTIMATORS.get(est, "grpo")
    b.set("algorithm.adv_estimator", "post_training.method", method, default="algorithm.adv_estimator" not in flat)
    if est not in ESTIMATORS:
        b.warn("verl-estimator", f"advantage estimator {est!r}: no critic (verl builds one for gae only), "
                                 "read as grpo")
    b.set("(program)", "post_training.trainer", "verl")
    path = take(A + "model.path")
    if isinstance(path, str):
        set_model(b, A + "model.path", path)
    # --- LoRA
    rank = flat.get(A + "model.lora_rank")
    lora = rank is not None and as_int(A + "model.lora_rank", rank, minimum=0) > 0
    if lora:
        b.set(A + "model.lora_rank", "method", "lora")
        set_lora(b, flat, take, A + "model.lora_rank", 0, A + "model.lora_alpha", 16, A + "model.lora_dropout", 0.0,
                 A + "model.target_modules", "verl model.target_modules all-linear")
    else:
        take(A + "model.lora_rank")
        b.set(A + "model.lora_rank", "method", "full", default=rank is None)
    # --- lengths, generations
    for k, pk in (("data.max_prompt_length", "post_training.prompt_len"),
                  ("data.max_response_length", "post_training.completion_len")):
        v, d = num(k, 512)
        b.set(k, pk, v, default=d)
    n, d = num(A + "rollout.n", 1)
    b.set(A + "rollout.n", "post_training.num_generations", n, default=d)
    # --- actor batch: micro per GPU, accumulation from the mini-batch. verl normalizes both batch sizes by the
    # data-parallel size world // ulysses_sequence_parallel_size (fsdp_workers.py ActorRolloutRefWorker.__init__:
    # `ppo_mini_batch_size //= self.device_mesh.size() // self.ulysses_sequence_parallel_size`, the same for
    # ppo_micro_batch_size; v0.4.1 ... b178a3c): the GPUs of one SP group share their micro-batch's rows, each
    # holding 1/sp of every sequence (dp_actor.py `ulysses_pad_and_slice_inputs`). The plan has no sequence
    # parallelism, so the key is reported and the estimate holds whole sequences on each GPU (sp x the tokens)
    sp = take(A + "actor.ulysses_sequence_parallel_size")
    sp = 1 if sp is None else as_int(A + "actor.ulysses_sequence_parallel_size", sp, minimum=1)
    if world % sp:
        raise ConfigImportError(A + "actor.ulysses_sequence_parallel_size", f"{sp} does not divide the {world} GPUs")
    dp = world // sp
    if sp > 1:
        b.skip(A + "actor.ulysses_sequence_parallel_size", sp,
               NOT_MODELLED + f" (Ulysses sequence parallelism: each GPU holds 1/{sp} of every sequence; the plan "
                              f"cannot split a sequence, so the estimate holds whole ones: an upper bound)")
        b.warn("verl-ulysses", f"ulysses_sequence_parallel_size {sp}: batches normalized over {dp} data-parallel "
                               f"groups as verl does, but each GPU is estimated with whole sequences, not 1/{sp}")
    micro = take(A + "actor.ppo_micro_batch_size_per_gpu")
    glob = take(A + "actor.ppo_micro_batch_size")
    if micro is not None:
        micro = as_int(A + "actor.ppo_micro_batch_size_per_gpu", micro)
        b.set(A + "actor.ppo_micro_batch_size_per_gpu", "micro_batch_size", micro)
    elif glob is not None:
        g = as_int(A + "actor.ppo_micro_batch_size", glob)
        if g % dp:
            raise ConfigImportError(A + "actor.ppo_micro_batch_size", f"{g} is not a multiple of the {dp} "
                                                                      "data-parallel groups")
        micro = g // dp                     # fsdp_workers.py: ppo_micro_batch_size //= world // sp
        b.set(A + "actor.ppo_micro_batch_size", "micro_batch_size", micro)
    mini, d = num(A + "actor.ppo_mini_batch_size", 256)
    per_gpu = mini * n
    dyn = _flag(flat, take, A + "actor.use_dynamic_bsz")
    if micro is None and dyn and per_gpu % dp == 0:
        # use_dynamic_bsz: dp_actor.py update_policy splits each mini-batch by tokens and never reads the
        # micro-batch size; the plan's micro-batch is then the DP group's mini-batch (one step of accumulation)
        micro = per_gpu // dp
        b.set(A + "actor.use_dynamic_bsz", "micro_batch_size", micro)
    elif micro is None:
        b.skip(A + "actor.ppo_micro_batch_size_per_gpu", None, "empty: verl requires it (or use_dynamic_bsz); "
                                                               f"the plan keeps micro_batch_size {b.plan['micro_batch_size']}")
        micro = b.plan["micro_batch_size"]
    if per_gpu % dp == 0 and (per_gpu // dp) % micro == 0:
        b.set(A + "actor.ppo_mini_batch_size", "gradient_accumulation_steps", per_gpu // dp // micro, default=d)
    else:
        b.skip(A + "actor.ppo_mini_batch_size", mini, f"not mapped: {mini} prompts x {n} over {dp} data-parallel "
                                                      f"groups is not a multiple of the micro-batch {micro}")
    # --- FSDP, offload, checkpointing
    strat = take(A + "actor.strategy") or "fsdp"
    if strat in ("fsdp", "fsdp2"):
        b.set(A + "actor.strategy", "framework", "fsdp", default="actor_rollout_ref.actor.strategy" not in flat)
        b.set(A + "actor.strategy", "zero_stage", 3, default=True)          # FULL_SHARD
        b.set(A + "actor.strategy", "stack.fsdp_version", 2 if strat == "fsdp2" else 1, default=strat == "fsdp")
    else:
        b.skip(A + "actor.strategy", strat, NOT_MODELLED + " (verl's Megatron workers); the estimate is FSDP's")
        b.warn("verl-megatron", f"actor.strategy {strat}: verl's Megatron backend is not modelled, the plan runs FSDP")
    _offloads(b, take, strat)
    gc = take(A + "model.enable_gradient_checkpointing")
    on = True if gc is None else as_bool(A + "model.enable_gradient_checkpointing", gc)
    b.set(A + "model.enable_gradient_checkpointing", "activation_checkpointing", "full" if on else "none",
          default=gc is None)
    ao = take(A + "model.enable_activation_offload")
    if ao is not None:
        b.set(A + "model.enable_activation_offload", "activation_offloading",
              as_bool(A + "model.enable_activation_offload", ao))
    b.set("(verl FSDP mixed precision)", "precision", "bf16-mixed", default=True)
    # --- reference, critic, reward model, rollout
    kl_loss, kl_reward = take(A + "actor.use_kl_loss"), take("algorithm.use_kl_in_reward")
    need_ref = any(v is not None and as_bool(k, v) for k, v in ((A + "actor.use_kl_loss", kl_loss),
                                                                 ("algorithm.use_kl_in_reward", kl_reward)))
    src = A + "actor.use_kl_loss" if kl_loss is not None and as_bool(A + "actor.use_kl_loss", kl_loss) \
        else "algorithm.use_kl_in_reward"
    b.set(src, "post_training.reference", ("adapter-disabled" if lora else "cpu") if need_ref else "none",
          default=kl_loss is None and kl_reward is None)
    if method == "ppo":
        cp = take("critic.model.path")
        b.set("critic.model.path", "post_training.value_model",
              role_model(b, "critic.model.path", cp if cp is not None else path, path, "same-gpus"),
              default=cp is None)
    rm_on = take("reward_model.enable")
    if rm_on is not None and as_bool("reward_model.enable", rm_on):
        rp = take("reward_model.model.path")
        b.set("reward_model.enable", "post_training.reward_model",
              role_model(b, "reward_model.model.path", rp, path, "same-gpus"))
    _rollout(b, flat, take, world)
    _packing(b, flat, take, sp, dp, dyn, need_ref and not lora)
    not_modelled_flags(b, flat, take, NOT_MODELLED_KEYS)
    # the update step computes the entropy under autograd only when entropy_coeff != 0 (dp_actor.py update_policy:
    # `if entropy_coeff != 0: calculate_entropy = True`, v0.4.1 / v0.5.0; v0.7.0 `self.config.calculate_entropy or
    # (entropy_coeff != 0)`); default 0 from v0.4 (0.001 before #1100), not in the estimate's update step
    ec = take(A + "actor.entropy_coeff")
    if ec is not None:
        on = as_number(A + "actor.entropy_coeff", ec, minimum=float("-inf")) != 0
        b.skip(A + "actor.entropy_coeff", ec, NOT_MODELLED + " (the update step's entropy under autograd, "
               "dp_actor.py update_policy)" if on else NO_EFFECT + " (0: the update computes no entropy)")
    for k, why in READ_ONLY.items():
        if k in flat:
            b.skip(k, take(k), why)
    _rest(b, flat, seen)
    return b.result()


def _flag(flat: dict, take, key: str, default: bool = False) -> bool:
    v = take(key)
    return default if v is None else as_bool(key, v)


BUDGET = 16384      # actor.ppo_max_token_len_per_gpu (actor.yaml / ppo_trainer.yaml, v0.4.1 ... v0.7.0)


def _packing(b: Builder, flat: dict, take, sp: int, dp: int, dyn: bool, ref_own: bool) -> None:
    """``post_training.packing`` from verl's ``model.use_remove_padding`` (default false), ``actor.use_dynamic_bsz``
    (false) with ``actor.ppo_max_token_len_per_gpu`` (16384), and the log-prob passes' own
    ``rollout`` / ``ref.log_prob_use_dynamic_bsz`` (default: the actor's) with ``log_prob_max_token_len_per_gpu``
    (default: the actor's budget; ppo_trainer.yaml v0.4.1 `${actor_rollout_ref.actor...}`, rollout.yaml / ref.yaml
    v0.5.0+ `oc.select`), or ``log_prob_micro_batch_size_per_gpu`` (a global ``log_prob_micro_batch_size`` is
    divided by world // sp: fsdp_workers.py `ActorRolloutRefWorker.__init__`). dp_actor.py multiplies each budget by
    ``ulysses_sequence_parallel_size`` (the SP group's budget); the plan holds the group's whole sequences on one
    GPU (see the batch above), so it takes budget x sp. The reference's keys count for a full reference only: with
    LoRA `compute_ref_log_prob` runs the actor's `compute_log_prob`, on the rollout's settings (fsdp_workers.py
    v0.5.0). The score pass takes the larger pass (post/defaults.py `score_shape`)."""
    rp_key, t_key = A + "model.use_remove_padding", A + "actor.ppo_max_token_len_per_gpu"
    rp_v = flat.get(rp_key)
    rp = _flag(flat, take, rp_key)
    t_v = take(t_key)
    budget = BUDGET if t_v is None else as_int(t_key, t_v, minimum=1)
    length = b.plan["post_training"]["prompt_len"] + b.plan["post_training"]["completion_len"]
    scores, micros = [], []
    for role in ("rollout", "ref"):
        r = A + role + "."
        keys = [r + k for k in ("log_prob_use_dynamic_bsz", "log_prob_max_token_len_per_gpu",
                                "log_prob_micro_batch_size_per_gpu", "log_prob_micro_batch_size")]
        vals = [take(k) for k in keys]
        if role == "ref" and not ref_own:
            for k, v in zip(keys, vals):
                if v is not None:
                    b.skip(k, v, NO_EFFECT + " (no reference of its own: none runs, or with LoRA the actor's "
                                             "compute_log_prob on the rollout's settings)")
            continue
        on = dyn if vals[0] is None else as_bool(keys[0], vals[0])
        if on:
            t = budget if vals[1] is None else as_int(keys[1], vals[1], minimum=1)
            scores.append((t * sp, keys[1], vals[1] is None and t_v is None))
            for k, v in zip(keys[2:], vals[2:]):
                if v is not None:
                    b.skip(k, v, NO_EFFECT + f" ({keys[0]}: the pass splits by tokens)")
            continue
        if vals[1] is not None:
            b.skip(keys[1], vals[1], NO_EFFECT + f" ({keys[0]} false: the pass splits by its micro-batch size)")
        if vals[2] is not None:
            micros.append((as_int(keys[2], vals[2], minimum=1), keys[2]))
        elif vals[3] is not None:
            g = as_int(keys[3], vals[3], minimum=1)
            if g < dp:
                raise ConfigImportError(keys[3], f"{g} is less than one row per data-parallel group ({dp})")
            micros.append((g // dp, keys[3]))          # fsdp_workers.py: log_prob_micro_batch_size //= world // sp
    for tokens, key, _ in ([(budget * sp, t_key, False)] if dyn else []) + scores:
        if tokens < length:
            # seqlen_balancing.py rearrange_micro_batches: "max_token_len must be greater than the sequence length"
            raise ConfigImportError(key, f"{tokens} tokens{f' (x ulysses {sp})' if sp > 1 else ''} is less than "
                                         f"one sequence, data.max_prompt_length + max_response_length = {length}: "
                                         "verl asserts max_token_len >= the sequence length")
    if not (rp or dyn or scores or micros):
        if rp_v is not None:
            b.skip(rp_key, rp_v, NO_EFFECT + " (false: the default, padded micro-batches)")
        if t_v is not None:
            b.skip(t_key, t_v, NO_EFFECT + " (use_dynamic_bsz false: the micro-batch size splits the batch)")
        return
    k = "post_training.packing."
    b.set(rp_key, k + "remove_padding", rp, default=rp_v is None)
    if dyn:
        b.set(t_key, k + "update_max_tokens", budget * sp, default=t_v is None)
    elif t_v is not None and not scores:
        b.skip(t_key, t_v, NO_EFFECT + " (use_dynamic_bsz false: the micro-batch size splits the batch)")
    if scores:
        tokens, key, dflt = max(scores)
        b.set(key, k + "score_max_tokens", tokens, default=dflt)
    if micros:
        rows, key = max(micros)
        b.set(key, k + "score_micro_batch_size", rows)
    if (dyn or scores) and not rp:
        b.warn("verl-dynamic-bsz-padded", "use_dynamic_bsz without use_remove_padding: each micro-batch is padded to "
                                          "prompt + response, and how many rows it packs depends on the real "
                                          "lengths; the estimate takes full-length rows (budget // length), not an "
                                          "upper bound")


def _rest(b: Builder, flat: dict, seen) -> None:
    """The keys left: a section's bookkeeping (data files and keys, the trainer's logging / saving / schedule,
    the optimizer's rates) has no memory effect; the rest by the leaf's name."""
    for k, v in flat.items():
        if k in seen:
            continue
        leaf = k.rsplit(".", 1)[-1]
        if v is None or v == "" or v == [] or v == {}:
            b.skip(k, v, EMPTY)
        elif (k.startswith(("data.", "trainer.")) or ".optim." in k) and k not in LENGTH_KEYS:
            b.skip(k, v, NO_EFFECT + " (data, schedule, logging, saving or the optimizer's rates)")
        else:
            b.skip(k, v, no_effect_reason(leaf))


def _rollout(b: Builder, flat: dict, take, world: int) -> None:
    name = take(A + "rollout.name")
    if name == "hf":
        b.set(A + "rollout.name", "post_training.generator", {"engine": "hf"})
        return
    if name not in (None, "vllm"):
        b.skip(A + "rollout.name", name, NOT_MODELLED + f" ({name}); the estimate runs vLLM's budget")
        b.warn("verl-rollout-engine", f"rollout.name {name}: only vLLM and HF rollouts are modelled; vLLM assumed")
    u = take(A + "rollout.gpu_memory_utilization")
    tp = take(A + "rollout.tensor_model_parallel_size")
    tp = 2 if tp is None else as_int(A + "rollout.tensor_model_parallel_size", tp)
    if world % tp:
        raise ConfigImportError(A + "rollout.tensor_model_parallel_size", f"{tp} does not divide the {world} GPUs")
    fce = take(A + "rollout.free_cache_engine")
    ee = take(A + "rollout.enforce_eager")
    g = "post_training.generator."
    b.set(A + "rollout.name", g + "engine", "vllm", default=name is None)
    b.set(A + "rollout.name", g + "mode", "colocate", default=True)          # the hybrid engine
    b.set(A + "rollout.gpu_memory_utilization", g + "gpu_memory_utilization",
          0.5 if u is None else as_number(A + "rollout.gpu_memory_utilization", u), default=u is None)
    b.set(A + "rollout.tensor_model_parallel_size", g + "tensor_parallel_size", tp,
          default=A + "rollout.tensor_model_parallel_size" not in flat)
    ls = take(A + "rollout.layered_summon")
    layered = ls is not None and as_bool(A + "rollout.layered_summon", ls)
    if layered and b.plan.get("method") != "full" and b.plan.get("framework") == "fsdp":
        b.set(A + "rollout.layered_summon", g + "layered_summon", True)
        fmt = flat.get(A + "rollout.load_format")
        if not isinstance(fmt, str) or "dummy" in fmt:
            # fsdp_utils.py collect_lora_params / fsdp_vllm.py __enter__: layered_summon needs the base in vLLM
            b.warn("verl-layered-summon", f"rollout.layered_summon with load_format {fmt or 'dummy (default)'}: "
                                          "verl raises 'To use layered_summon, you must make sure base-model is "
                                          "preloaded in vllm' (set rollout.load_format=safetensors)")
    elif ls is not None:
        b.skip(A + "rollout.layered_summon", ls, NO_EFFECT + " (verl reads it for a LoRA actor on FSDP only)"
               if layered else NO_EFFECT + " (false: the default)")
        layered = False
    # verl >= 0.6 sleeps at VLLM_SLEEP_LEVEL (2 on vLLM >= 0.8.5) unless layered_summon; the config names no verl
    # release, so the newest read (0.7.0) is taken
    on = fce is None or as_bool(A + "rollout.free_cache_engine", fce)
    b.set(A + "rollout.free_cache_engine", g + "sleep", verl_sleep_level(None, layered) if on else 0,
          default=fce is None)
    if on and not layered:
        b.warn("verl-sleep-level", "free_cache_engine: sleep level 2 as verl >= 0.6 on vLLM >= 0.8.5 sleeps "
                                   "(VLLM_SLEEP_LEVEL); verl <= 0.5 sleeps at level 1: set generator.sleep 1 for it")
    b.set(A + "rollout.enforce_eager", g + "enforce_eager",
          False if ee is None else as_bool(A + "rollout.enforce_eager", ee), default=ee is None)
