"""LLaMA-Factory's preference and RL stages -> the plan's ``post_training`` block (plan-v1 Extension 7).

From LLaMA-Factory (hiyouga/LLaMA-Factory@ff6d4d1) ``src/llamafactory/hparams/finetuning_args.py`` and
``train/{dpo,kto,rm,ppo}``: ``stage`` dpo / kto / rm / ppo; ``pref_loss`` (default sigmoid; ipo, orpo, simpo,
hinge, ...) picks the objective, and orpo / simpo use no reference (`use_ref_model = stage == "dpo" and
pref_loss not in ["orpo", "simpo"]`); ``ref_model`` names a separate reference, else LoRA disables its adapter
and a full fine-tune copies the model (train/trainer_utils.py `create_ref_model`); PPO's ``reward_model_type``
lora loads the reward head as an adapter on the same base (no weights of its own), full a model, api none, and
the critic is the policy's own value head (no value_model); PPO
generates with HF `generate` up to ``max_new_tokens`` (generating_args, default 1024) after prompts of
``cutoff_len``. The preference pair's prompt and response share ``cutoff_len`` (data/processor
`infer_seqlen`): taken as half each.
"""
from __future__ import annotations

from .builder import NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, as_int, as_number

PREF_LOSSES = {"sigmoid": "dpo", "ipo": "ipo", "orpo": "orpo", "simpo": "simpo"}
POST_STAGES = ("dpo", "kto", "rm", "ppo")


def llamafactory_post_keys(b: Builder, cfg: dict, take) -> bool:
    """Set ``post_training`` for a preference / RL stage; True when the stage was one of them."""
    stage = take("stage")
    if stage not in POST_STAGES:
        if stage is not None:
            b.skip("stage", stage, "the training objective; memory as supervised fine-tuning")
        return False
    method = stage
    if stage == "dpo":
        loss = take("pref_loss") or "sigmoid"
        if not isinstance(loss, str):
            raise ConfigImportError("pref_loss", f"expected a loss name, got {loss!r}")
        method = PREF_LOSSES.get(loss, "dpo")
        if loss not in PREF_LOSSES:
            b.skip("pref_loss", loss, NO_EFFECT + " (a DPO-family loss: memory as sigmoid DPO)")
    b.set("stage", "post_training.method", method)
    b.set("stage", "post_training.trainer", "llamafactory")
    cl = cfg.get("cutoff_len")
    total = 2048 if cl is None else as_int("cutoff_len", cl)
    if stage == "ppo":
        new = take("max_new_tokens")
        b.set("cutoff_len", "post_training.prompt_len", total, default=cl is None)
        b.set("max_new_tokens", "post_training.completion_len", 1024 if new is None else as_int("max_new_tokens", new),
              default=new is None)
        rtype = take("reward_model_type") or "lora"
        if rtype == "full":
            b.set("reward_model_type", "post_training.reward_model", {"model": None, "placement": "same-gpus"})
        else:
            b.skip("reward_model_type", rtype, NO_EFFECT + (" (an adapter on the policy's base)" if rtype == "lora"
                                                            else " (an API)"))
    else:
        b.set("cutoff_len", "post_training.prompt_len", total // 2, default=True)
        b.set("cutoff_len", "post_training.completion_len", total - total // 2, default=True)
    if take("ref_model"):
        b.set("ref_model", "post_training.reference", "model" if method not in ("orpo", "simpo") else "none")
    ftx = take("pref_ftx")
    if ftx is not None and method in ("dpo", "ipo") and as_number("pref_ftx", ftx) > 1e-6:
        # train/dpo/trainer.py get_batch_loss_metrics: `if self.ftx_gamma > 1e-6: losses += self.ftx_gamma * sft_loss`
        b.set("pref_ftx", "post_training.rpo_alpha", as_number("pref_ftx", ftx))
    elif ftx is not None:
        b.skip("pref_ftx", ftx, NO_EFFECT)
    for k in ("pref_beta", "simpo_gamma", "dpo_label_smoothing", "kto_chosen_weight",
              "kto_rejected_weight", "ppo_buffer_size", "ppo_epochs", "ppo_score_norm", "ppo_target",
              "ppo_whiten_rewards", "reward_model", "ref_model_adapters", "reward_model_adapters"):
        if k in cfg:
            b.skip(k, take(k), NO_EFFECT)
    for k in ("ref_model_quantization_bit", "reward_model_quantization_bit"):
        if k in cfg:
            b.skip(k, take(k), NOT_MODELLED)
    return True
