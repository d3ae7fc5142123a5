"""What the post-training importers (openrlhf.py, verl.py) share: DeepSpeed by stage, LoRA
keys, a role model (critic, reward model) from a Hub id, the GPU count a launcher gave, halves of a length."""
from __future__ import annotations

from .builder import NOT_MODELLED, Builder, all_linear, as_bool, as_int, as_list, as_number, preset_for_hub_id


def set_deepspeed(b: Builder, key: str, stage: int, offload_optimizer=False, offload_params=False,
                  default=False) -> None:
    """framework deepspeed at ``stage`` with the optimizer / parameters on the CPU or not."""
    if stage not in (0, 1, 2, 3):
        from .builder import ConfigImportError
        raise ConfigImportError(key, f"ZeRO stage is 0, 1, 2 or 3, got {stage}")
    b.set(key, "framework", "deepspeed", default=default)
    b.set(key, "zero_stage", stage, default=default)
    b.set(key, "offload_optimizer", "cpu" if offload_optimizer else "none", default=default and not offload_optimizer)
    b.set(key, "offload_params", "cpu" if offload_params and stage == 3 else "none",
          default=default and not offload_params)


def set_lora(b: Builder, opt: dict, take, rank_key: str, rank_default, alpha_key: str, alpha_default,
             dropout_key: str, dropout_default, targets_key: str, where: str) -> None:
    """method lora with the trainer's LoRA defaults (``where`` names the code that states them)."""
    r = take(rank_key)
    rank = rank_default if r is None else as_int(rank_key, r)
    b.set(rank_key, "lora.rank", rank, default=r is None)
    a = take(alpha_key)
    b.set(alpha_key, "lora.alpha", alpha_default if a is None else as_number(alpha_key, a), default=a is None)
    d = take(dropout_key)
    b.set(dropout_key, "lora.dropout", dropout_default if d is None else as_number(dropout_key, d), default=d is None)
    t = take(targets_key)
    names = [t] if isinstance(t, str) and " " not in t and "," not in t else (as_list(targets_key, t) if t else None)
    if names is None or [n.lower() for n in names] in (["all-linear"], ["all"]):
        b.set(targets_key, "lora.targets", all_linear(b, targets_key), default=t is None)
    else:
        b.set(targets_key, "lora.targets", names)


def set_int(b: Builder, take, key: str, target: str, default: int, minimum: int = 1) -> int:
    """``target`` from the integer option ``key``, or the trainer's ``default`` (reported as a default) when the
    text leaves it out; returns the value set."""
    v = take(key)
    value = default if v is None else as_int(key, v, minimum=minimum)
    b.set(key, target, value, default=v is None)
    return value


def role_model(b: Builder, key: str, name, policy_name, placement: str) -> dict:
    """A critic or reward model from a Hub id: the preset of that architecture, the policy's own model when it is
    the policy's checkpoint (None), else the policy's size with the reason in the report."""
    preset = preset_for_hub_id(name) if isinstance(name, str) else None
    if preset:
        return {"model": preset, "placement": placement}
    if name != policy_name:
        b.skip(key, name, "not mapped: not a zerocalc preset; the estimate gives it the policy's size "
                          f"(set post_training's model to its config to change that)")
    return {"model": None, "placement": placement}


def set_launcher_gpus(b: Builder, cmd) -> None:
    """The GPUs per node a launcher line starts (torchrun / deepspeed / accelerate, NPROC_PER_NODE,
    CUDA_VISIBLE_DEVICES): one node."""
    if cmd is None or cmd.launcher_gpus is None:
        return
    b.set(f"(launcher) {cmd.launcher_key}", "gpus_per_node", cmd.launcher_gpus)
    b.set(f"(launcher) {cmd.launcher_key}", "nodes", 1, default=True)


def split_total(b: Builder, key: str, total: int, default: bool, prompt: str = "post_training.prompt_len",
                completion: str = "post_training.completion_len") -> None:
    """A limit on prompt and response together, taken as two halves (the contract's reading of TRL's
    ``max_length``: 512 + 512)."""
    b.set(key, prompt, total // 2, default=default)
    b.set(key, completion, total - total // 2, default=default)


def flag(opt: dict, take, key: str) -> bool:
    """An argparse ``store_true`` flag: present -> True (or the value given)."""
    v = take(key)
    return False if v is None else as_bool(key, v)


def not_modelled_flags(b: Builder, opt: dict, take, keys, why: str = "") -> None:
    """Switches that change memory in ways the plan cannot say (on, or a size other than 1)."""
    for k in keys:
        if k not in opt:
            continue
        v = opt[k]
        off = v is None or v is False or (not isinstance(v, bool) and v in (0, 1))
        if not off:
            b.skip(k, take(k), NOT_MODELLED + why)
