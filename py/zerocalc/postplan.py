"""Post-training (contract plan-v1, Extension 7: ``post_training``): the keys, their parsing, validation and
serialisation. A key the plan leaves unsaid (``None`` here) takes the trainer's default for the method,
resolved by the engine (zerocalc/post/defaults.py). Nothing here knows about memory.

Validation follows the trainers' own checks where they have one:
- TRL `GRPOConfig.__post_init__` (trl@f2cd577 trl/trainer/grpo_config.py): `generation_batch_size =
  per_device_train_batch_size * num_processes * steps_per_generation` (steps_per_generation defaults to
  gradient_accumulation_steps) "must be divisible by num_generations", and `num_generations` must be >= 2;
- a reference model is never built for ORPO, SimPO or CPO (LLaMA-Factory `use_ref_model = stage == "dpo" and
  pref_loss not in ["orpo", "simpo"]`, hparams/finetuning_args.py; TRL's trl/experimental/orpo, cpo) nor for a
  reward model; `precompute_ref_log_probs` exists for the offline methods only (TRL DPOConfig, KTOConfig);
- TRL's Liger DPO loss (`loss: chunked`) "does not support precomputing reference log probabilities";
- disabling the adapter as the reference needs an adapter (TRL `use_adapter`, LLaMA-Factory `disable_adapter`);
- ``offload_between_updates`` (the training state moved to the host outside the update step, not FSDP's or
  ZeRO's CPU offload, which keeps it there through the step) exists where the trainer has it: verl's
  `actor.fsdp_config.param_offload` / `optimizer_offload` (FSDP workers only; `offload_policy`, FSDP2's real
  CPUOffloadPolicy, turns both off: fsdp_workers.py v0.5.0 `_build_model_optimizer`), ms-swift's `offload_model` /
  `offload_optimizer` (around colocated vLLM's rollout: rollout_mixin.py `enable_offload` v4.5.2) and OpenRLHF's
  `--deepspeed_enable_sleep` (DeepSpeed states only, never the 16-bit weights, ZeRO-3: deepspeed_utils.py
  `offload_deepspeed_states` v0.9.5); an offline method has no phase outside its update step;
- a vLLM ``server`` runs on GPUs outside the plan's world (TRL `trl vllm-serve`, OpenRLHF's own vLLM engines),
  so it needs their count; colocated vLLM's tensor-parallel groups split the training world (TRL
  `vllm_tensor_parallel_size`: "world_size must be divisible by it").
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import PlanError
from .model import resolve_model
from .presets import MODELS
from .values import (check_bool, check_choice, check_int, check_mapping, check_number, freeze, reject_unknown, show,
                     thaw)

METHODS = ("dpo", "ipo", "kto", "orpo", "simpo", "cpo", "rm", "ppo", "grpo", "rloo")
OFFLINE = ("dpo", "ipo", "kto", "orpo", "simpo", "cpo", "rm")      # no generation: a fixed preference data set
ONLINE = ("ppo", "grpo", "rloo")                                    # completions generated during training
NO_REFERENCE = ("orpo", "simpo", "cpo", "rm")
PRECOMPUTABLE = ("dpo", "ipo", "kto")
GROUPED = ("grpo", "rloo")                                          # several completions per prompt
TRAINERS = ("trl", "openrlhf", "verl", "llamafactory", "ms-swift")
REFERENCES = ("auto", "none", "model", "adapter-disabled", "precomputed", "cpu")
PLACEMENTS = ("same-gpus", "own-gpus", "cpu")
ENGINES = ("vllm", "hf")
MODES = ("colocate", "server")
SLEEP_LEVELS = (0, 1, 2)
KERNELS = ("triton", "torch")
# the methods each trainer implements (read in their trees: TRL trl/trainer + trl/experimental; OpenRLHF
# openrlhf/cli train_dpo, train_kto, train_rm, train_ppo_ray (GRPO/RLOO by --algo.advantage_estimator);
# verl's PPO-family ray trainer; LLaMA-Factory stages dpo/kto/rm/ppo with pref_loss sigmoid/ipo/orpo/simpo;
# ms-swift rlhf_type dpo/orpo/simpo/kto/cpo/rm/ppo/grpo)
TRAINER_METHODS = {
    "trl": METHODS,
    "openrlhf": ("dpo", "ipo", "kto", "rm", "ppo", "grpo", "rloo"),
    "verl": ("ppo", "grpo", "rloo"),
    "llamafactory": ("dpo", "ipo", "orpo", "simpo", "kto", "rm", "ppo"),
    "ms-swift": ("dpo", "ipo", "orpo", "simpo", "kto", "cpo", "rm", "ppo", "grpo", "rloo"),
}
MAX_LEN = 1 << 24
MAX_GENERATIONS = 4096
MAX_SERVER_GPUS = 1 << 16


@dataclass(frozen=True)
class Generator:
    engine: str = "vllm"
    mode: str = "colocate"
    gpu_memory_utilization: Any = None      # number in (0, 1], or None = the trainer's default
    tensor_parallel_size: int = 1
    sleep: int = 0                          # vLLM sleep level after each generation (0: stays resident)
    enforce_eager: bool = False             # no CUDA graphs
    gpus: Any = None                        # server: the GPUs it runs on, outside the plan
    layered_summon: bool = False            # verl rollout.layered_summon: a LoRA actor's FSDP units gathered one
                                            # at a time for the sync (left out of the plan's dict when false)


@dataclass(frozen=True)
class RoleModel:
    """PPO's critic or a reward model run as a network."""
    model: Any = None                       # preset id, a read-only config mapping, or None = the policy's model
    placement: str = "same-gpus"


@dataclass(frozen=True)
class Offload:
    """What the trainer moves to the host between update steps (post/offload.py says in which phases)."""
    weights: bool = False                   # the training model's parameters (verl param_offload, ms-swift offload_model)
    optimizer: bool = False                 # its optimizer states (verl optimizer_offload, ms-swift offload_optimizer,
                                            # OpenRLHF deepspeed_enable_sleep: with DeepSpeed's fp32 and grad buffers)


@dataclass(frozen=True)
class PostTraining:
    method: str = "dpo"
    trainer: str = "trl"
    trainer_version: Any = None             # "1.14" etc., or None = the newest release modelled (TRL 1.16)
    kernels: str = "triton"                 # TRL's log-prob kernels: triton (a CUDA GPU) or torch (its fallbacks)
    prompt_len: Any = None                  # int, or None = the trainer's default
    completion_len: Any = None
    num_generations: Any = None             # int, or None = the trainer's default (GRPO/RLOO only)
    steps_per_generation: Any = None        # TRL: None = gradient_accumulation_steps
    reference: str = "auto"
    reward_model: Any = None                # RoleModel or None
    value_model: Any = None                 # RoleModel or None
    generator: Any = None                   # Generator or None (HF generate where the method generates)
    rpo_alpha: Any = None                   # DPO's NLL weight on the chosen rows (TRL / ms-swift rpo_alpha,
                                            # LLaMA-Factory pref_ftx), or None = no NLL term
    offload_between_updates: Any = None     # Offload or None (nothing moved: everything stays on the GPU)
    packing: Any = None                     # Packing or None (verl: padded micro-batches of micro_batch_size rows)


@dataclass(frozen=True)
class Packing:
    """verl's remove-padding and dynamic batch sizes (``actor_rollout_ref.model.use_remove_padding``,
    ``actor.use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``, ``rollout`` / ``ref.log_prob_use_dynamic_bsz`` /
    ``log_prob_max_token_len_per_gpu``); the engine's reading is post/defaults.py `packed_shape`."""
    remove_padding: bool = False            # the micro-batch's real tokens as one row (flash-attn varlen)
    update_max_tokens: Any = None           # the update step's token budget per GPU, or None = micro_batch_size rows
    score_max_tokens: Any = None            # the log-prob (score) passes' budget, or None = as the update's rows
    score_micro_batch_size: Any = None      # their rows without a budget (log_prob_micro_batch_size_per_gpu), or
                                            # None = micro_batch_size


def _opt_int(key: str, v: Any, lo: int, hi: int) -> Any:
    return None if v is None else check_int(key, v, lo, hi)


def _parse_version(key: str, v: Any) -> Any:
    """A release number like "1.14" or "0.29.1" (digits and dots), or None."""
    if v is None:
        return None
    parts = v.split(".") if isinstance(v, str) else []
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() and len(p) <= 4 for p in parts):
        raise PlanError(key, f"must be a release number like \"1.14\", got {show(v)}")
    return v


def version_tuple(v: Any, newest: tuple) -> tuple:
    """(major, minor, patch) of a release string; ``newest`` when None."""
    if v is None:
        return newest
    parts = [int(p) for p in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def _nested(key: str, v: Any, names: tuple) -> Any:
    """A nested mapping whose keys must be ``names`` (unknown ones refused, naming ``key``), or None for null."""
    if v is None:
        return None
    obj = check_mapping(key, v)
    reject_unknown(key, obj, names)
    return obj


def _given(obj: Mapping, name: str, default: Any) -> Any:
    """``obj[name]``, or ``default`` where it is absent or null."""
    v = obj.get(name)
    return default if v is None else v


def _parse_role(key: str, v: Any) -> Any:
    obj = _nested(key, v, ("model", "placement"))
    if obj is None:
        return None
    model = obj.get("model")
    if isinstance(model, str):
        if model not in MODELS:
            raise PlanError(f"{key}.model", f"unknown preset {show(model)}; see `zerocalc presets models`")
    elif model is not None:
        model = freeze(check_mapping(f"{key}.model", model))
        try:
            resolve_model(model)
        except PlanError as e:
            raise PlanError(f"{key}.{e.key}", e.message) from None
    return RoleModel(model=model, placement=check_choice(f"{key}.placement", obj.get("placement", "same-gpus"),
                                                         PLACEMENTS))


def _parse_generator(v: Any, trainer: Any = None, version: Any = None) -> Any:
    key = "post_training.generator"
    obj = _nested(key, v, tuple(f.name for f in fields(Generator)))
    if obj is None:
        return None
    d = Generator()
    if trainer == "verl" and obj.get("sleep") is None and obj.get("engine", d.engine) == "vllm" \
            and obj.get("mode", d.mode) == "colocate":
        # unsaid: verl's own level (free_cache_engine is on by default), not 0, which verl never runs
        d = Generator(sleep=verl_sleep_level(version, obj.get("layered_summon") is True))
    util = obj.get("gpu_memory_utilization")
    if util is not None:
        util = check_number(f"{key}.gpu_memory_utilization", util, 0.01, 1.0)
    return Generator(
        engine=check_choice(f"{key}.engine", obj.get("engine", d.engine), ENGINES),
        mode=check_choice(f"{key}.mode", obj.get("mode", d.mode), MODES),
        gpu_memory_utilization=util,
        tensor_parallel_size=check_int(f"{key}.tensor_parallel_size",
                                       obj.get("tensor_parallel_size", d.tensor_parallel_size), 1, 1024),
        sleep=check_choice(f"{key}.sleep", check_int(f"{key}.sleep", _given(obj, "sleep", d.sleep), 0, 2),
                           SLEEP_LEVELS),
        enforce_eager=check_bool(f"{key}.enforce_eager", obj.get("enforce_eager", d.enforce_eager)),
        gpus=_opt_int(f"{key}.gpus", obj.get("gpus"), 1, MAX_SERVER_GPUS),
        layered_summon=check_bool(f"{key}.layered_summon", obj.get("layered_summon", d.layered_summon)))


def _parse_offload(v: Any) -> Any:
    key = "post_training.offload_between_updates"
    obj = _nested(key, v, tuple(f.name for f in fields(Offload)))
    if obj is None:
        return None
    return Offload(weights=check_bool(f"{key}.weights", obj.get("weights", False)),
                   optimizer=check_bool(f"{key}.optimizer", obj.get("optimizer", False)))


def parse_post_training(value: Any) -> Any:
    """plan-v1 ``post_training`` mapping (or null) -> PostTraining; PlanError names the dotted key."""
    if value is None:
        return None
    key = "post_training"
    obj = check_mapping(key, value)
    reject_unknown(key, obj, tuple(f.name for f in fields(PostTraining)))
    d = PostTraining()
    return PostTraining(
        method=check_choice(f"{key}.method", obj.get("method", d.method), METHODS),
        trainer=check_choice(f"{key}.trainer", obj.get("trainer", d.trainer), TRAINERS),
        trainer_version=_parse_version(f"{key}.trainer_version", obj.get("trainer_version")),
        kernels=check_choice(f"{key}.kernels", obj.get("kernels", d.kernels), KERNELS),
        prompt_len=_opt_int(f"{key}.prompt_len", obj.get("prompt_len"), 1, MAX_LEN),
        completion_len=_opt_int(f"{key}.completion_len", obj.get("completion_len"), 1, MAX_LEN),
        num_generations=_opt_int(f"{key}.num_generations", obj.get("num_generations"), 1, MAX_GENERATIONS),
        steps_per_generation=_opt_int(f"{key}.steps_per_generation", obj.get("steps_per_generation"), 1, 1 << 20),
        reference=check_choice(f"{key}.reference", obj.get("reference", d.reference), REFERENCES),
        reward_model=_parse_role(f"{key}.reward_model", obj.get("reward_model")),
        value_model=_parse_role(f"{key}.value_model", obj.get("value_model")),
        generator=_parse_generator(obj.get("generator"), obj.get("trainer", d.trainer), obj.get("trainer_version")),
        rpo_alpha=None if obj.get("rpo_alpha") is None else check_number(f"{key}.rpo_alpha", obj["rpo_alpha"], 0.0,
                                                                           1e6),
        offload_between_updates=_parse_offload(obj.get("offload_between_updates")),
        packing=_parse_packing(obj.get("packing")))


def _parse_packing(v: Any) -> Any:
    key = "post_training.packing"
    obj = _nested(key, v, tuple(f.name for f in fields(Packing)))
    if obj is None:
        return None
    return Packing(remove_padding=check_bool(f"{key}.remove_padding", obj.get("remove_padding", False)),
                   update_max_tokens=_opt_int(f"{key}.update_max_tokens", obj.get("update_max_tokens"), 1, MAX_LEN),
                   score_max_tokens=_opt_int(f"{key}.score_max_tokens", obj.get("score_max_tokens"), 1, MAX_LEN),
                   score_micro_batch_size=_opt_int(f"{key}.score_micro_batch_size", obj.get("score_micro_batch_size"),
                                                   1, 1 << 20))


def default_generations(pt: PostTraining) -> int:
    """Completions per prompt when the plan does not say: TRL `GRPOConfig.num_generations` 8 (ms-swift inherits
    TRL's config), verl `actor_rollout_ref.rollout.n` 1, OpenRLHF `--rollout.n_samples_per_prompt` 1;
    methods that do not group completions: 1."""
    if pt.num_generations is not None:
        return pt.num_generations
    if pt.method not in GROUPED:
        return 1
    return 8 if pt.trainer in ("trl", "ms-swift") else 1


def check_post_training(plan) -> None:
    """Combinations no trainer accepts; ``plan`` is the parsed Plan (world size, method, batch)."""
    pt = plan.post_training
    if pt is None:
        return
    k = "post_training"
    if pt.method not in TRAINER_METHODS[pt.trainer]:
        raise PlanError(f"{k}.method", f"{pt.trainer} has no {pt.method} trainer (it has "
                                       f"{', '.join(TRAINER_METHODS[pt.trainer])})")
    if pt.method in NO_REFERENCE and pt.reference not in ("auto", "none"):
        raise PlanError(f"{k}.reference", f"{pt.method} uses no reference model; use \"auto\" or \"none\"")
    if pt.reference == "adapter-disabled" and plan.method == "full":
        raise PlanError(f"{k}.reference", "adapter-disabled needs LoRA adapters (method lora or qlora), "
                                          "not method full")
    if pt.reference == "precomputed" and pt.method not in PRECOMPUTABLE:
        raise PlanError(f"{k}.reference", "precomputed reference log-probabilities exist for the offline "
                                          "methods dpo, ipo and kto only")
    if pt.reference == "precomputed" and plan.loss == "chunked" and pt.trainer in ("trl", "ms-swift"):
        # trl/trainer/dpo_trainer.py: "Liger DPO loss does not support precomputing reference log probabilities"
        raise PlanError(f"{k}.reference", "TRL's fused (Liger) DPO loss (loss chunked) cannot use precomputed "
                                          "reference log-probabilities")
    if pt.value_model is not None and pt.method != "ppo":
        raise PlanError(f"{k}.value_model", f"a value model (critic) is PPO's; {pt.method} has none")
    if pt.reward_model is not None and pt.method not in ONLINE:
        raise PlanError(f"{k}.reward_model", f"{pt.method} learns from a fixed data set and runs no reward model")
    if pt.steps_per_generation is not None and (pt.method not in GROUPED or pt.trainer not in ("trl", "ms-swift")):
        raise PlanError(f"{k}.steps_per_generation", "steps_per_generation is TRL's GRPO/RLOO setting")
    if pt.method in GROUPED and pt.trainer in ("trl", "ms-swift"):
        g = default_generations(pt)
        if g < 2:
            raise PlanError(f"{k}.num_generations", f"TRL's GRPO needs at least 2 generations per prompt, got {g}")
        steps = pt.steps_per_generation or plan.gradient_accumulation_steps
        batch = plan.micro_batch_size * plan.world_size * steps
        if batch % g:
            raise PlanError(f"{k}.num_generations", f"must divide TRL's generation batch (micro_batch_size "
                            f"{plan.micro_batch_size} x {plan.world_size} GPUs x steps_per_generation {steps} = "
                            f"{batch} completions), got {g}")
    _check_rpo(pt)
    _check_generator(plan, pt)
    _check_offload(plan, pt)
    _check_packing(plan, pt)


def _check_packing(plan, pt: PostTraining) -> None:
    """verl's own checks: `rearrange_micro_batches` (verl/utils/seqlen_balancing.py, v0.4.1 ... v0.7.0) asserts
    "max_token_len must be greater than the sequence length" (`max_token_len >= attention_mask.shape[-1]`, the
    padded prompt + response); the FSDP actor loads the model with `attn_implementation="flash_attention_2"`
    (fsdp_workers.py, v0.4.1 ... v0.7.0) and the remove-padding forward passes `attention_mask=None` with the
    packed position ids, which only flash-attn's varlen kernel separates (eager or SDPA would attend across the
    packed sequences)."""
    pk, k = pt.packing, "post_training.packing"
    if pk is None:
        return
    if pt.trainer != "verl":
        raise PlanError(k, f"is verl's remove-padding / dynamic batch size; {pt.trainer} has none")
    if pk.remove_padding and plan.attention != "flash":
        raise PlanError(f"{k}.remove_padding", f"verl's remove-padding forward runs flash-attn's varlen kernel "
                                               f"(attention flash), not attention {plan.attention}")
    p, c = (pt.prompt_len or 512), (pt.completion_len or 512)       # verl's data.max_*_length defaults
    for name in ("update_max_tokens", "score_max_tokens"):
        budget = getattr(pk, name)
        if budget is not None and budget < p + c:
            raise PlanError(f"{k}.{name}", f"verl asserts a token budget of at least one row's prompt + completion "
                                           f"({p} + {c} = {p + c}; seqlen_balancing.py rearrange_micro_batches), "
                                           f"got {budget}")


TRL_NEWEST = (1, 16, 0)          # the newest TRL release whose rules were read (post/defaults.py NEWEST)
VERL_NEWEST = (0, 7, 0)          # the newest verl release whose rules were read (post/defaults.py NEWEST)
VERL_SLEEP_LEVEL_SINCE = (0, 6, 0)   # verl: VLLM_SLEEP_LEVEL (2 on vLLM >= 0.8.5); 0.5: level=1


def verl_sleep_level(trainer_version, layered_summon: bool) -> int:
    """The level verl's rollout sleeps at with ``free_cache_engine`` (its default). Up to 0.5 `sleep(level=1)`
    is written out (verl/workers/sharding_manager/fsdp_vllm.py `__exit__` and vllm_rollout_spmd.py at v0.4.1 and
    v0.5.0). From 0.6 the rollout takes `VLLM_SLEEP_LEVEL` (verl/third_party/vllm/__init__.py at v0.6.0 / v0.7.0:
    1, set to 2 when vLLM >= 0.8.5; verl 0.6 pins vllm>=0.7.3,<=0.9.1, 0.7 vllm>=0.8.5: level 2 taken), except
    with ``rollout.layered_summon`` (and expert parallelism on an old vLLM), which keep level 1 (v0.6.0
    vllm_rollout_spmd.py `vLLMRollout.__init__`: `if config.layered_summon: self.sleep_level = 1`; v0.7.0 /
    b178a3c vllm_rollout.py the same)."""
    if layered_summon or version_tuple(trainer_version, VERL_NEWEST) < VERL_SLEEP_LEVEL_SINCE:
        return 1
    return 2

RPO_TRAINERS = ("trl", "ms-swift", "llamafactory")
RPO_REMOVED = (0, 29, 0)         # TRL 0.29's DPOConfig has no rpo_alpha (0.28: "Deprecated ... add 'sft'")


def _check_rpo(pt: PostTraining) -> None:
    """rpo_alpha: DPOTrainer's (dpo and its ipo loss) in TRL up to 0.28, ms-swift and LLaMA-Factory (pref_ftx)."""
    if pt.rpo_alpha is None:
        return
    k = "post_training.rpo_alpha"
    if pt.method not in ("dpo", "ipo"):
        raise PlanError(k, f"is DPO's NLL term (DPOTrainer: dpo, ipo); {pt.method} has none")
    if pt.trainer not in RPO_TRAINERS:
        raise PlanError(k, f"is TRL's, ms-swift's and LLaMA-Factory's (pref_ftx) setting; {pt.trainer} has none")
    if pt.trainer == "trl" and version_tuple(pt.trainer_version, TRL_NEWEST) >= RPO_REMOVED:
        raise PlanError(k, "TRL's DPOConfig has no rpo_alpha from 0.29 (trainer_version "
                        f"{pt.trainer_version or '1.16, the default'}); give trainer_version 0.28 or older")


def _check_generator(plan, pt: PostTraining) -> None:
    g, k = pt.generator, "post_training.generator"
    if g is None:
        return
    if pt.method in OFFLINE:
        raise PlanError(k, f"{pt.method} generates nothing during training; remove the generator (null)")
    if g.engine == "hf":
        if g.mode != "colocate":
            raise PlanError(f"{k}.mode", "HF generate runs the training model itself: mode colocate only")
        if g.sleep or g.gpu_memory_utilization is not None or g.tensor_parallel_size != 1:
            key = "sleep" if g.sleep else ("gpu_memory_utilization" if g.gpu_memory_utilization is not None
                                           else "tensor_parallel_size")
            raise PlanError(f"{k}.{key}", "is a vLLM setting; HF generate has none")
    if g.mode == "server":
        if g.gpus is None:
            raise PlanError(f"{k}.gpus", "a server generator runs on GPUs outside the plan: give their number")
        if g.sleep:
            raise PlanError(f"{k}.sleep", "sleep frees a colocated engine's memory for training; a server's GPUs "
                                          "do not train")
    else:
        if g.gpus is not None:
            raise PlanError(f"{k}.gpus", "a colocated generator shares the plan's GPUs; gpus is for mode server")
        if plan.world_size % g.tensor_parallel_size:
            raise PlanError(f"{k}.tensor_parallel_size", f"colocated vLLM groups must divide the "
                            f"{plan.world_size} training GPUs, got {g.tensor_parallel_size}")
    if pt.trainer == "verl" and g.mode == "server":
        raise PlanError(f"{k}.mode", "verl's hybrid engine colocates the rollout with the actor")
    if g.layered_summon and (pt.trainer != "verl" or g.engine != "vllm" or plan.method == "full"
                             or plan.framework != "fsdp"):
        raise PlanError(f"{k}.layered_summon", "is verl's rollout.layered_summon: a LoRA actor on FSDP syncing "
                                               "vLLM unit by unit (trainer verl, engine vllm, a LoRA method, "
                                               "framework fsdp)")


def _check_offload(plan, pt: PostTraining) -> None:
    """offload_between_updates where the trainer's code has it (the module docstring names each site)."""
    o, k = pt.offload_between_updates, "post_training.offload_between_updates"
    if o is None:
        return
    if pt.method in OFFLINE:
        raise PlanError(k, f"{pt.method} runs nothing but its update step (no rollout); remove it (null)")
    if pt.trainer not in ("verl", "ms-swift", "openrlhf"):
        raise PlanError(k, f"{pt.trainer} moves nothing to the host between updates (verl param_offload / "
                           "optimizer_offload, ms-swift offload_model / offload_optimizer, OpenRLHF "
                           "deepspeed_enable_sleep do)")
    if pt.trainer == "verl":
        if plan.framework != "fsdp":
            raise PlanError(k, "verl's param_offload / optimizer_offload are its FSDP workers'; use framework fsdp")
        if plan.offload_params != "none" or plan.offload_optimizer != "none":
            raise PlanError(k, "verl's offload_policy (FSDP2 CPUOffloadPolicy: offload_params / offload_optimizer "
                               "cpu) turns param_offload and optimizer_offload off (fsdp_workers.py)")
    elif pt.trainer == "ms-swift":
        g = pt.generator
        if g is None or g.engine != "vllm" or g.mode != "colocate":
            raise PlanError(k, "ms-swift offloads the model and optimizer around colocated vLLM's rollout only: "
                               "give generator engine vllm, mode colocate")
    else:
        if o.weights:
            raise PlanError(f"{k}.weights", "OpenRLHF's deepspeed_enable_sleep keeps the 16-bit weights on the GPU "
                                            "(offload_deepspeed_states: lp_params left out)")
        if plan.framework != "deepspeed" or plan.zero_stage != 3:
            raise PlanError(k, "OpenRLHF's deepspeed_enable_sleep offloads ZeRO-3 states (offload_deepspeed_states: "
                               "\"Only Zero stage 3 is currently supported\"); use deepspeed zero_stage 3")


def post_training_to_dict(pt: Any) -> Any:
    """PostTraining -> the plan's ``post_training`` object (every key; defaults left unsaid stay null)."""
    if pt is None:
        return None
    out = {}
    for f in fields(pt):
        v = getattr(pt, f.name)
        if f.name == "packing" and v is None:
            continue              # left out when unsaid: plans from before the key read the same
        if isinstance(v, (Generator, RoleModel, Offload, Packing)):
            v = {g.name: thaw(getattr(v, g.name)) for g in fields(v)
                 if not (g.name == "layered_summon" and not getattr(v, g.name))}
        out[f.name] = v
    return out


__all__ = ["PostTraining", "Generator", "RoleModel", "Offload", "Packing", "parse_post_training", "post_training_to_dict",
           "check_post_training", "default_generations", "version_tuple", "METHODS", "TRAINERS", "OFFLINE", "ONLINE", "GROUPED"]
