"""The models post-training keeps besides the policy: the reference, a reward model, PPO's critic; and the
reward model's own shape (a scalar head instead of the language-model head).

- Reference weights (`reference_weight_terms`): a model reference holds every parameter in its dtype, divided
  over the world when sharded (TRL models/utils.py `prepare_deepspeed`: ZeRO-3 shards "both the active and
  reference model", any other stage runs it at stage 0, a full replica per GPU; `prepare_fsdp` shards it);
  ZeRO-3 gathers one layer of it at a time for its forward. A disabled adapter, a precomputed reference and no
  reference cost no weights; verl's CPU-offloaded reference (`CPUOffload(offload_params=True)`,
  fsdp_workers.py) lives in host memory and visits the GPU one FSDP unit at a time.
- Reward model: the same placement rule (TRL's PPO prepares it with `prepare_deepspeed`, experimental/ppo/
  ppo_trainer.py); ``own-gpus`` puts it on GPUs outside the plan (OpenRLHF's Ray groups), ``cpu`` in host
  memory.
- Critic: trained beside the policy by the same engine (TRL `PolicyAndValueWrapper`, one optimizer), so its
  weights, gradients and optimizer states scale the policy's model state by the parameter ratio; its forward
  runs with the policy's and saves activations in the same proportion (no vocabulary-wide tensor: a value head).
- A reward model trained as such (`method: rm`) is `AutoModelForSequenceClassification`: the language-model
  head is replaced by a `score` linear of one output (transformers `LlamaForSequenceClassification`). Not in
  LLaMA-Factory: `stage: rm` loads `load_model(..., add_valuehead=True)` (train/rm/workflow.py, the same at v0.8.3,
  v0.9.0 and ff6d4d1), i.e. TRL's `AutoModelForCausalLMWithValueHead` around the causal LM (model/loader.py): the
  language-model head stays, trained with the rest, and a `v_head.summary` Linear(h, 1) is added
  (`value_head_arch`); its forward's full logits are post/logprobs.py `value_head_logits`.
"""
from __future__ import annotations

from dataclasses import replace

from ..memory.terms import ALL, FWD, FWD_BWD, Term, gpu, host
from ..model import ModelArch, Tensor, resolve_model
from ..units import ceil_div

MODEL_STATE = ("weights", "gradients", "optimizer_states", "lora_adapters")


def scalar_head_arch(arch: ModelArch) -> ModelArch:
    """The sequence-classification model of a causal LM: no lm_head, a `score` weight of hidden_size."""
    kept = tuple(t for t in arch.tensors if t.component != "lm_head")
    score = Tensor("score.weight", arch.hidden_size, "other", "score", "", (1, arch.hidden_size))
    return replace(arch, tensors=kept + (score,), causal_lm=False, name=arch.name + " (reward model)")


def value_head_arch(arch: ModelArch) -> ModelArch:
    """TRL's AutoModelForCausalLMWithValueHead of a causal LM (LLaMA-Factory's reward model): every tensor of the
    model, lm_head included, plus ValueHead's `summary` Linear(hidden_size, 1) (trl/models/modeling_value_head.py)."""
    h = arch.hidden_size
    head = (Tensor("v_head.summary.weight", h, "other", "v_head.summary", "", (1, h)),
            Tensor("v_head.summary.bias", 1, "other", "v_head.summary"))
    return replace(arch, tensors=arch.tensors + head, name=arch.name + " (value head)")


def role_arch(role, policy: ModelArch) -> ModelArch:
    """A reward model's or critic's architecture: its own model, or the policy's."""
    return policy if role is None or role.model is None else resolve_model(role.model)


def placed_weights(name: str, numel: int, nbytes: int, sharded: bool, world: int, largest_layer: int,
                   where: str) -> list[Term]:
    """An inference-only model placed on the training GPUs (replicated or sharded) or in host memory."""
    total = numel * nbytes
    if where == "cpu":
        return [host(f"{name}_weights_host", total),
                gpu(f"{name}_unit_on_gpu", "weights", nbytes * largest_layer, {FWD})]
    if where == "own-gpus":
        return []
    if sharded:
        return [gpu(f"{name}_weights", "weights", ceil_div(total, world), ALL),
                gpu(f"{name}_gathered_layer", "weights", nbytes * largest_layer, {FWD})]
    return [gpu(f"{name}_weights", "weights", total, ALL)]


def reference_weight_terms(source: str, sharded: bool, nbytes: int, arch: ModelArch, world: int) -> list[Term]:
    """The reference's weights on one GPU (see the module docstring)."""
    if source not in ("model", "cpu"):
        return []
    layer = max(arch.layer_sizes, default=arch.largest_tensor)
    return placed_weights("reference", arch.total_params, nbytes, sharded, world, layer,
                          "cpu" if source == "cpu" else "same-gpus")


def reward_weight_terms(role, policy: ModelArch, nbytes: int, sharded: bool, world: int,
                        value_head: bool = False) -> list[Term]:
    """A reward model's weights: the sequence classifier, or (``value_head``: LLaMA-Factory's PPO reward model,
    `load_model(..., add_valuehead=True)` in train/trainer_utils.py create_reward_model) the causal LM with its
    value head."""
    if role is None:
        return []
    a = (value_head_arch if value_head else scalar_head_arch)(role_arch(role, policy))
    layer = max(a.layer_sizes, default=a.largest_tensor)
    return placed_weights("reward_model", a.total_params, nbytes, sharded, world, layer, role.placement)


def critic_terms(role, policy: ModelArch, step_terms: list, saved_activations: int) -> list[Term]:
    """PPO's critic trained beside the policy: its model state and its forward's saved activations, scaled from
    the policy's by the parameter ratio (same engine, precision and optimizer)."""
    if role is None or role.placement == "own-gpus":
        return []
    a = scalar_head_arch(role_arch(role, policy))
    ratio = a.total_params / max(1, policy.total_params)
    state = sum(t.live("step") for t in step_terms if t.component in MODEL_STATE and t.on_gpu)
    if role.placement == "cpu":
        return [host("critic_state_host", int(state * ratio))]
    act_ratio = (a.num_layers * a.hidden_size) / max(1, policy.num_layers * policy.hidden_size)
    return [gpu("critic_state", "weights", int(state * ratio), ALL),
            gpu("critic_activations", "activations", int(saved_activations * act_ratio), FWD_BWD)]
