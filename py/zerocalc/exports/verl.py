"""verl's command for an online post-training plan (plan-v1 Extension 7): ``python3 -m verl.trainer.main_ppo``
with the Hydra overrides that reproduce the plan as verl's config reads it, one per line. Every key exists in
verl v0.7.0, the newest release modelled (verl/trainer/config/_generated_ppo_trainer.yaml, the flattened
ppo_trainer.yaml); each is written even at verl's default, so that the command says what the estimate assumed.

The inverse of imports/verl.py: ``algorithm.adv_estimator`` gae / grpo / rloo; the actor's micro-batch is
``ppo_micro_batch_size_per_gpu`` and its accumulation comes from ``ppo_mini_batch_size`` prompts, which verl
multiplies by ``rollout.n`` and divides by the data-parallel size world // ulysses_sequence_parallel_size
(fsdp_workers.py v0.7.0 ActorRolloutRefWorker.__init__, lines 242-243): mini = accumulation x micro x world / n,
with no sequence parallelism (the plan has none). ``data.train_batch_size`` is one mini-batch of prompts, so the
rollout holds the update step's micro x accumulation completions per GPU (the estimate's generation rows);
verl's validate_config asks `train_batch_size * rollout.n` to divide by the GPUs and train_batch_size >= the
mini-batch (verl/utils/config.py, workers/config/actor.py `validate`). Without ``use_dynamic_bsz`` verl also
requires the scoring passes' micro-batches (``rollout.log_prob_micro_batch_size_per_gpu``, the reference's, the
critic's): the actor's micro-batch is written, the rows the estimate's scoring pass holds (post/phases.py).
``post_training.packing`` (verl's remove-padding and token budgets, post/defaults.py `packed_shape`) is written as
imports/verl.py `_packing` reads it; without it the plan's rows are padded to prompt + completion, so
``model.use_remove_padding`` (true by default in verl 0.7.0's hf_model.yaml) is written false and
``use_dynamic_bsz`` is left off.

A plan for another trainer (TRL, OpenRLHF, ms-swift) is written with its own resolved numbers (lengths,
generations, vLLM fraction) and a comment for each setting that does not carry over; a verl plan that verl cannot
run as planned raises ExportError naming the key.
"""
from __future__ import annotations

from ..plan import Plan, as_plan
from ..postplan import ONLINE, default_generations, version_tuple
from ..post.defaults import NEWEST, VLLM_UTILIZATION, VERL_SLEEP_LEVEL_SINCE, lengths, reference_source, resolve, \
    verl_sleep_level
from ..presets import MODELS
from .ds_config import ExportError

A = "actor_rollout_ref."
ESTIMATORS = {"ppo": "gae", "grpo": "grpo", "rloo": "rloo"}
PROGRAM = "python3 -m verl.trainer.main_ppo"


class _Out:
    """The overrides in order, the comments, and whether a mismatch is an error (a verl plan) or a comment."""

    def __init__(self, strict: bool):
        self.kv, self.notes, self.env, self.strict = [], [], [], strict

    def set(self, key: str, value) -> None:
        self.kv.append((key, value))

    def cannot(self, key: str, why: str) -> None:
        if self.strict:
            raise ExportError(key, why)
        self.notes.append(f"does not carry over: {key}: {why}")


def _value(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(str(x) for x in v) + "]"
    return str(v)


def _model_path(plan: Plan, out: _Out) -> str:
    m = plan.model
    repo = MODELS[m].hf_repo if isinstance(m, str) and m in MODELS else None
    if repo:
        return repo
    name = m if isinstance(m, str) else str(m.get("name", "custom"))
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "custom"
    out.env.append(f"MODEL_PATH=/path/to/{safe}   # the plan's model is no Hub preset: its checkpoint directory")
    return "$MODEL_PATH"


def _actor(plan: Plan, out: _Out) -> None:
    """Strategy, sharding, precision, offload, checkpointing and LoRA of the actor (fsdp_workers.py v0.7.0
    `_build_model_optimizer`)."""
    if plan.framework != "fsdp":
        out.cannot("framework", "verl's actor runs its FSDP workers (actor.strategy fsdp / fsdp2); use framework "
                                "fsdp")
    elif plan.zero_stage != 3:
        out.cannot("zero_stage", "verl's actor is FULL_SHARD (fsdp_config.reshard_after_forward true); "
                                 "SHARD_GRAD_OP is not read back by zerocalc's verl import")
    fsdp2 = plan.stack.fsdp_version == 2
    out.set(A + "actor.strategy", "fsdp2" if fsdp2 else "fsdp")
    if plan.precision != "bf16-mixed":
        out.cannot("precision", "verl's FSDP keeps an fp32 actor under bf16 compute (fsdp_config.dtype bfloat16): "
                                "bf16-mixed")
    if plan.optimizer != "adamw" or plan.optimizer_in_backward:
        out.cannot("optimizer", "verl's actor steps torch AdamW (actor.optim.optimizer AdamW, optimizer_impl "
                                "torch.optim); the import reads no other")
    if plan.run.load.dtype not in ("auto", "fp32"):
        out.cannot("run.load.dtype", "verl builds its actor in fp32 (fsdp_config.model_dtype fp32)")
    f = A + "actor.fsdp_config."
    pt = plan.post_training
    o = pt.offload_between_updates
    off = (plan.offload_params, plan.offload_optimizer)
    if off != ("none", "none"):
        if fsdp2 and off == ("cpu", "cpu"):
            # FSDP2 CPUOffloadPolicy(pin_memory=True) through the step; it turns param_offload / optimizer_offload off
            out.set(f + "offload_policy", True)
        else:
            out.cannot("offload_params", "verl's actor gets FSDP CPU offload only as FSDP2's offload_policy, "
                                         "parameters and optimizer together (stack.fsdp_version 2, both cpu)")
    if not (fsdp2 and off == ("cpu", "cpu")):
        out.set(f + "param_offload", bool(o and o.weights))
        out.set(f + "optimizer_offload", bool(o and o.optimizer))
    if plan.activation_checkpointing not in ("none", "full"):
        out.cannot("activation_checkpointing", "verl checkpoints whole layers (model.enable_gradient_checkpointing)")
    out.set(A + "model.enable_gradient_checkpointing", plan.activation_checkpointing == "full")
    if plan.activation_offloading:
        out.set(A + "model.enable_activation_offload", True)
    if plan.method == "qlora":
        out.cannot("method", "verl's LoRA actor has no quantized base")
    if plan.method == "full":
        out.set(A + "model.lora_rank", 0)
        return
    lo = plan.lora
    out.set(A + "model.lora_rank", lo.rank)
    out.set(A + "model.lora_alpha", int(lo.alpha) if float(lo.alpha).is_integer() else lo.alpha)
    linear = plan.arch.linear_names()
    out.set(A + "model.target_modules", "all-linear" if sorted(lo.targets) == sorted(linear) else list(lo.targets))
    if lo.dropout:
        # verl's LoraConfig(task_type, r, lora_alpha, target_modules, exclude_modules, bias) sets no dropout
        out.notes.append(f"does not carry over: lora.dropout {lo.dropout}: verl's LoraConfig sets none (peft's 0.0)")
    if lo.modules_to_save:
        out.cannot("lora.modules_to_save", "verl's LoraConfig has no modules_to_save")


def _batch(plan: Plan, out: _Out, n: int) -> None:
    """The mini-batch in prompts, and the update step's split: ``ppo_micro_batch_size_per_gpu`` rows, or with
    ``post_training.packing.update_max_tokens`` verl's token budget (``use_dynamic_bsz``, which never reads the
    micro-batch size: dp_actor.py update_policy), where the plan's micro x accumulation rows are one mini-batch."""
    world = plan.world_size
    micro, accum = plan.micro_batch_size, plan.gradient_accumulation_steps
    rows = micro * accum * world              # completions per update over the world
    if rows % n:
        raise ExportError("gradient_accumulation_steps", f"verl's mini-batch counts prompts: micro_batch_size "
                          f"{micro} x {accum} steps x {world} GPUs = {rows} completions is not a multiple of "
                          f"rollout.n {n}")
    mini = rows // n
    pk = plan.post_training.packing
    out.set("data.train_batch_size", mini)
    out.set(A + "actor.ppo_mini_batch_size", mini)
    out.set(A + "model.use_remove_padding", bool(pk and pk.remove_padding))
    if pk is not None and pk.update_max_tokens is not None:
        if accum != 1:
            # imports/verl.py reads a use_dynamic_bsz mini-batch as one micro-batch of its rows
            out.cannot("gradient_accumulation_steps", "under use_dynamic_bsz verl splits each mini-batch by tokens, "
                                                      "never by micro_batch_size: give the mini-batch's rows as "
                                                      "micro_batch_size with gradient_accumulation_steps 1")
        out.set(A + "actor.use_dynamic_bsz", True)
        out.set(A + "actor.ppo_max_token_len_per_gpu", pk.update_max_tokens)
    else:
        out.set(A + "actor.ppo_micro_batch_size_per_gpu", micro)
    pt = plan.post_training
    if pt.steps_per_generation:
        out.notes.append(f"does not carry over: post_training.steps_per_generation {pt.steps_per_generation}: "
                         "verl generates data.train_batch_size prompts per step, one mini-batch here")


def _scoring(plan: Plan, out: _Out, roles) -> None:
    """The log-prob passes (old log-probs: rollout.*, a reference: ref.*): split by tokens with
    ``packing.score_max_tokens`` (log_prob_use_dynamic_bsz, written: its default follows the actor's), else by
    ``score_micro_batch_size`` or the actor's micro-batch. verl's validate_config (verl/utils/config.py v0.7.0)
    asks for ``log_prob_micro_batch_size_per_gpu`` whenever the actor's use_dynamic_bsz is off, for the reference
    too when one runs (a LoRA one included): written there, unread by verl where the pass splits by tokens."""
    pk = plan.post_training.packing
    smax = pk.score_max_tokens if pk else None
    smicro = pk.score_micro_batch_size if pk else None
    dyn = bool(pk and pk.update_max_tokens is not None)
    if smax is not None and smicro is not None:
        out.cannot("post_training.packing.score_micro_batch_size", "verl's log-prob passes split by tokens "
                                                                   "(score_max_tokens) or by rows, not both")
    for r in roles:
        if smax is not None or dyn:
            out.set(A + r + ".log_prob_use_dynamic_bsz", smax is not None)
        if smax is not None:
            out.set(A + r + ".log_prob_max_token_len_per_gpu", smax)
        if smax is None or not dyn:
            out.set(A + r + ".log_prob_micro_batch_size_per_gpu", smicro or plan.micro_batch_size)


def _reference(plan: Plan, out: _Out) -> bool:
    """verl loads a reference only for the KL loss or the in-reward KL (ray_trainer need_reference_policy): with
    LoRA the actor without its adapter (ref_in_actor), else a bf16 copy forced to CPU offload (fsdp_workers.py).
    The plan's reference as the estimate resolved it (post/defaults.py reference_source) decides use_kl_loss."""
    pt = plan.post_training
    src = reference_source(plan, pt)
    lora = plan.method != "full"
    if src == "model":
        out.cannot("post_training.reference", "verl's reference is the CPU-offloaded copy (cpu) or, with LoRA, the "
                                              "adapter-disabled actor; it keeps no GPU copy")
    elif src == "cpu" and lora:
        out.cannot("post_training.reference", "a LoRA actor's reference in verl is the actor without its adapter "
                                              "(ref_in_actor): adapter-disabled")
    elif src == "elsewhere":
        out.notes.append("does not carry over: OpenRLHF's reference on GPUs of its own; verl's is "
                         + ("the adapter-disabled actor" if lora else "a CPU-offloaded copy"))
    if pt.reference == "auto" and src != "none":
        out.notes.append(f"post_training.reference auto: the estimate loads a reference ({src}): use_kl_loss True")
    use = src != "none"
    out.set(A + "actor.use_kl_loss", use)
    return use


def _rollout(plan: Plan, out: _Out, post) -> None:
    """The generator as the estimate resolved it (post/defaults.py: the plan's, or the trainer's default)."""
    pt, g = plan.post_training, post.gen
    old = version_tuple(pt.trainer_version, NEWEST["verl"]) < VERL_SLEEP_LEVEL_SINCE
    engine, mode, util, tp, sleep, eager, layered = g.engine, g.mode, g.utilization, g.tp, g.sleep, \
        not g.cuda_graphs, g.layered_summon
    if engine == "hf":
        if old:                  # verl <= 0.5: fsdp_workers.py `rollout_name == "hf"` builds HFRollout
            out.set(A + "rollout.name", "hf")
            return
        out.cannot("post_training.generator.engine", "verl 0.6 and 0.7 roll out with vLLM or SGLang only (rollout/"
                                                     "base.py _ROLLOUT_REGISTRY; HF generate is verl <= 0.5's, "
                                                     "trainer_version 0.5): vLLM written at verl's defaults")
        util, tp, sleep, eager = VLLM_UTILIZATION["verl"], 1, verl_sleep_level(pt.trainer_version, False), False
    if mode == "server":
        out.cannot("post_training.generator.mode", "verl's hybrid engine colocates vLLM with the actor: written "
                                                   "colocated")
        sleep = 0
    out.set(A + "rollout.name", "vllm")
    out.set(A + "rollout.gpu_memory_utilization", util)
    out.set(A + "rollout.tensor_model_parallel_size", tp)
    level = verl_sleep_level(pt.trainer_version, layered)
    if sleep not in (0, level):
        out.cannot("post_training.generator.sleep", f"verl frees vLLM at level {level} here (free_cache_engine; "
                                                    "VLLM_SLEEP_LEVEL by vLLM's version, 1 with layered_summon "
                                                    "or verl <= 0.5) or not at all (0)")
    out.set(A + "rollout.free_cache_engine", sleep != 0)
    out.set(A + "rollout.enforce_eager", eager)
    if layered:
        out.set(A + "rollout.layered_summon", True)
        # fsdp_utils.py collect_lora_params: layered_summon needs the base model preloaded in vLLM (not dummy)
        out.set(A + "rollout.load_format", "safetensors")


def _role_path(m, path: str) -> str:
    return MODELS[m].hf_repo if isinstance(m, str) and m in MODELS and MODELS[m].hf_repo else path


def _roles(plan: Plan, out: _Out, post, path: str) -> None:
    """PPO's critic (verl builds one for gae: ray_trainer `use_critic`) and a reward model the plan names."""
    pt = plan.post_training
    fsdp2 = plan.stack.fsdp_version == 2
    if pt.method == "ppo":
        c = post.critic
        if c is None:            # LLaMA-Factory: the value head on the policy is the critic
            out.notes.append(f"does not carry over: {pt.trainer}'s critic is a value head on the policy; verl's "
                             "is a model of its own (the policy's here)")
        elif c.placement != "same-gpus":
            out.cannot("post_training.value_model.placement", f"verl's critic shares the actor's GPUs, not "
                                                              f"{c.placement}")
        m = c.model if c is not None else None
        if m is not None and not isinstance(m, str):
            out.notes.append("post_training.value_model is a config mapping: critic.model.path is the policy's")
        out.set("critic.model.path", _role_path(m, path))
        out.set("critic.strategy", "fsdp2" if fsdp2 else "fsdp")
        pk = pt.packing
        if pk is None or pk.update_max_tokens is None:     # else critic.use_dynamic_bsz follows the actor's
            out.set("critic.ppo_micro_batch_size_per_gpu", plan.micro_batch_size)
    rm = pt.reward_model
    if rm is not None:
        if rm.placement != "same-gpus":
            out.cannot("post_training.reward_model.placement", f"written on the actor's GPUs, not {rm.placement}")
        out.set("reward_model.enable", True)
        out.set("reward_model.model.path", _role_path(rm.model, path))


def verl_overrides(plan) -> tuple[list, list, list]:
    """([(key, value)] in order, [comment], [shell assignment]) for the plan's verl command."""
    plan = as_plan(plan)
    pt = plan.post_training
    if pt is None:
        raise ExportError("post_training", "the plan has no post_training block; verl runs online methods")
    if pt.method not in ONLINE:
        raise ExportError("post_training.method", f"verl runs PPO, GRPO and RLOO (algorithm.adv_estimator); "
                                                  f"{pt.method} learns from a fixed data set: export --to trl")
    out = _Out(strict=pt.trainer == "verl")
    if pt.trainer != "verl":
        out.notes.append(f"the plan runs {pt.trainer}; verl's own memory (fp32 actor, CPU reference, its sleep and "
                         "scoring passes) follows from trainer verl: import this command to estimate it")
    if pt.trainer_version is not None and pt.trainer == "verl" and \
            version_tuple(pt.trainer_version, NEWEST["verl"])[:2] != NEWEST["verl"][:2]:
        out.notes.append(f"keys as verl 0.7.0 names them; the plan's trainer_version is {pt.trainer_version}")
    out.set("algorithm.adv_estimator", ESTIMATORS[pt.method])
    prompt, completion = lengths(pt)
    n = default_generations(pt)
    out.set("data.max_prompt_length", prompt)
    out.set("data.max_response_length", completion)
    path = _model_path(plan, out)
    out.set(A + "model.path", path)
    _actor(plan, out)
    _batch(plan, out, n)
    out.set(A + "rollout.n", n)
    _scoring(plan, out, ["rollout", "ref"] if _reference(plan, out) else ["rollout"])
    post = resolve(plan)
    _rollout(plan, out, post)
    _roles(plan, out, post, path)
    if plan.attention != "flash":
        out.notes.append(f"attention {plan.attention}: verl loads flash_attention_2 unless model.override_config "
                         "says otherwise")
    if plan.loss != "standard":
        out.notes.append(f"does not carry over: loss {plan.loss}: verl's actor computes full logits")
    out.set("trainer.n_gpus_per_node", plan.gpus_per_node)
    out.set("trainer.nnodes", plan.nodes)
    return out.kv, out.notes, out.env


def verl_command(plan) -> str:
    """The shell text: comments, assignments, then the command with one override per line."""
    kv, notes, env = verl_overrides(plan)
    lines = ["# verl 0.7.0 (python3 -m verl.trainer.main_ppo): the plan's memory settings; data.train_files / "
             "val_files and the reward function are the run's own"]
    lines += [f"# {n}" for n in notes]
    lines += env
    # a Hydra list is quoted: [ and ] are shell glob characters
    body = [PROGRAM] + [f"'{k}={_value(v)}'" if isinstance(v, (list, tuple)) else f"{k}={_value(v)}" for k, v in kv]
    return "\n".join(lines + [" \\\n  ".join(body)]) + "\n"
