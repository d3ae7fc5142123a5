"""LLaMA-Factory's preference and RL stages (``stage: dpo | kto | rm | ppo``) -> the plan's ``post_training``
(plan-v1 Extension 7), read at LLaMA-Factory@ff6d4d1 (src/llamafactory/hparams/finetuning_args.py,
generating_args.py, train/trainer_utils.py, data/processor/pairwise.py).

- ``pref_loss`` (default sigmoid): sigmoid and hinge are DPO's pairwise losses, ipo IPO, orpo ORPO, simpo SimPO
  (``use_ref_model = stage == "dpo" and pref_loss not in ["orpo", "simpo"]``); ``kto_pair`` is read as DPO's
  pairs with a reference.
- Lengths: a pair's prompt and response share ``cutoff_len`` (default 2048; pairwise.py ``infer_seqlen``), read
  as two halves as the contract does (1024 + 1024); PPO's prompt is cut to ``cutoff_len`` and its response to
  ``max_new_tokens`` (generating_args.py, default 1024).
- The reference: ``ref_model`` names a separate checkpoint (a model reference, even with LoRA); otherwise
  ``create_ref_model`` gives LoRA none (``disable_adapter``) and a full fine-tune a second copy: the engine's
  ``auto``.
- PPO: ``reward_model_type`` lora (default) is an adapter on the policy's own base (``load_adapter(...,
  "reward")``): no second network; full / api are read and reported. The value head sits on the policy.
"""
from __future__ import annotations

from .builder import NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, as_int
from .post_common import split_total

PREF_LOSS = {"sigmoid": "dpo", "hinge": "dpo", "ipo": "ipo", "orpo": "orpo", "simpo": "simpo", "kto_pair": "dpo"}
STAGE_METHOD = {"dpo": None, "kto": "kto", "rm": "rm", "ppo": "ppo"}
NO_EFFECT_KEYS = ("pref_beta", "pref_ftx", "pref_bco_weight", "simpo_gamma", "dpo_label_smoothing",
                  "kto_chosen_weight", "kto_rejected_weight", "ppo_buffer_size", "ppo_epochs", "ppo_score_norm",
                  "ppo_target", "ppo_whiten_rewards", "ppo_logger", "top_k", "top_p", "temperature",
                  "repetition_penalty", "do_sample", "num_beams", "length_penalty", "ld_alpha")


def lf_post_keys(b: Builder, cfg: dict, take) -> bool:
    """Set ``post_training`` for a preference / RL stage; False for pt / sft (and no stage)."""
    stage = cfg.get("stage")
    if not isinstance(stage, str) or stage not in STAGE_METHOD:
        return False
    take("stage")
    method = STAGE_METHOD[stage]
    if method is None:
        loss = take("pref_loss")
        loss = "sigmoid" if loss is None else str(loss)
        if loss not in PREF_LOSS:
            raise ConfigImportError("pref_loss", f"unknown preference loss {loss!r}; LLaMA-Factory has "
                                                 f"{', '.join(PREF_LOSS)}")
        method = PREF_LOSS[loss]
        b.set("stage", "post_training.method", method)
        if "pref_loss" in cfg:
            b.skip("pref_loss", cfg["pref_loss"], f"read: the {loss} loss (post_training.method {method})")
    else:
        b.set("stage", "post_training.method", method)
    b.set("stage", "post_training.trainer", "llamafactory")
    cl = cfg.get("cutoff_len")
    total = 2048 if cl is None else as_int("cutoff_len", cl)
    if method == "ppo":
        b.set("cutoff_len", "post_training.prompt_len", total, default=cl is None)
        mnt = take("max_new_tokens")
        b.set("max_new_tokens", "post_training.completion_len", 1024 if mnt is None else as_int("max_new_tokens", mnt),
              default=mnt is None)
        _ppo_models(b, cfg, take)
    else:
        split_total(b, "cutoff_len", total, default=cl is None)
    ref = take("ref_model")
    if ref and method not in ("orpo", "simpo", "rm"):
        b.set("ref_model", "post_training.reference", "model")
        if ref != cfg.get("model_name_or_path"):
            b.skip("ref_model", ref, "not mapped: a reference checkpoint other than the policy's; the estimate "
                                     "gives it the policy's size")
    for k in ("ref_model_adapters", "ref_model_quantization_bit"):
        if k in cfg:
            b.skip(k, take(k), NOT_MODELLED)
    for k in NO_EFFECT_KEYS:
        if k in cfg:
            b.skip(k, take(k), NO_EFFECT)
    return True


def _ppo_models(b: Builder, cfg: dict, take) -> None:
    rtype = take("reward_model_type") or "lora"
    rm = take("reward_model")
    if rtype == "lora":
        b.skip("reward_model", rm, "read: a LoRA adapter on the policy's base (trainer_utils.py load_adapter "
                                   "'reward'): no second network on the GPUs")
        b.set("reward_model_type", "post_training.reward_model", None, default="reward_model_type" not in cfg)
    elif rtype == "api":
        b.skip("reward_model", rm, "read: a reward served over HTTP, outside the plan's GPUs")
        b.set("reward_model_type", "post_training.reward_model", None)
    else:
        b.set("reward_model_type", "post_training.reward_model", {"model": None, "placement": "same-gpus"})
        b.skip("reward_model", rm, "not mapped: a full reward checkpoint, given the policy's size")
    # the value head sits on the policy (AutoModelForCausalLMWithValueHead): no critic network of its own
    b.set("(value head)", "post_training.value_model", None, default=True)
    b.warn("lf-ppo-value-head", "LLaMA-Factory's PPO critic is a value head on the policy (and a LoRA reward "
                                "model an adapter on its base); the estimate's PPO counts a critic and a reward "
                                "model the policy's size (an upper bound)")
