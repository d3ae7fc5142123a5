"""Plan access for the exporters: a plan-v1 dict with every key filled.

The exporters are pure functions of the plan. They accept either the engine's frozen ``Plan`` (anything
with ``to_dict()``) or a plan-v1 dict, and work on the full plan-v1 dict (contracts/plan-v1.md).
DeepSpeed knob defaults are those of DeepSpeed 0.19.8 (``deepspeed/runtime/zero/config.py``,
``deepspeed/runtime/constants.py``), so an exported config never depends on DeepSpeed's own defaults.
"""
from __future__ import annotations

import copy
import json
import os

from ..memory.deepspeed import DEFAULTS as _ENGINE_DS_DEFAULTS
from ..plan import DEFAULT_PLAN

# plan-v1 defaults (contracts/plan-v1.md: "a missing key takes the default shown"), from the engine's Plan.
PLAN_DEFAULTS = DEFAULT_PLAN.to_dict()

# DeepSpeed 0.19.8 defaults of the knobs a plan can carry, shared with the engine (memory/deepspeed.py).
# overlap_comm has no fixed default: validator overlap_comm_valid makes it True at stage 3, else False.
DS_DEFAULTS = {k: v for k, v in _ENGINE_DS_DEFAULTS.items() if k != "zero_init"}

# Knobs the Hugging Face integration fills from the model's hidden size h
# (transformers/integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_finalize; accelerate
# _prepare_deepspeed uses the same formulas). The stage-3 ones are filled only at stage 3; elsewhere
# DeepSpeed drops the leftover "auto" and uses its default (deepspeed.md §5).
HF_HIDDEN_SIZE_KEYS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


def plan_dict(plan) -> dict:
    """The full plan-v1 dict of ``plan`` (a Plan or a dict); never aliases the input."""
    if hasattr(plan, "to_dict"):
        d = plan.to_dict()
    elif isinstance(plan, dict):
        try:
            from zerocalc.plan import Plan  # validate (PlanError names the key) and fill every key
        except ImportError:
            d = plan
        else:
            d = Plan.from_dict(plan).to_dict()
    else:
        raise TypeError(f"expected a Plan or a plan-v1 dict, got {type(plan).__name__}")
    out = copy.deepcopy(PLAN_DEFAULTS)
    for k, v in d.items():
        out[k] = copy.deepcopy(_thaw(v))
    if out.get("deepspeed") is None:
        out["deepspeed"] = {}
    return out


def _thaw(v):
    """Frozen mappings / tuples (the engine's Plan) -> plain dicts / lists."""
    if hasattr(v, "items"):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    if hasattr(v, "_asdict"):
        return {k: _thaw(x) for k, x in v._asdict().items()}
    return v


def world_size(p: dict) -> int:
    """Data-parallel world: gpus_per_node x nodes (plan-v1)."""
    return int(p["gpus_per_node"]) * int(p["nodes"])


def ds_default(key: str, stage: int):
    """DeepSpeed 0.19.8's default for a plan knob at this stage."""
    if key == "overlap_comm":
        return stage == 3  # validator overlap_comm_valid
    return DS_DEFAULTS[key]


def hf_auto_value(key: str, hidden: int, stage: int):
    """The value the HF integration writes for an "auto" knob (None when it fills nothing)."""
    if key == "reduce_bucket_size":
        return hidden * hidden
    if stage == 3 and key == "stage3_prefetch_bucket_size":
        return int(0.9 * hidden * hidden)
    if stage == 3 and key == "stage3_param_persistence_threshold":
        return 10 * hidden
    return None


def resolved_knob(p: dict, key: str, hidden=None):
    """The value DeepSpeed runs with for knob ``key`` of plan dict ``p``.

    Missing -> DeepSpeed 0.19.8 default; "auto" -> what the HF integration fills (needs the hidden size),
    or DeepSpeed's default where the integration fills nothing (DeepSpeed drops a leftover "auto")."""
    stage = int(p["zero_stage"])
    v = p["deepspeed"].get(key)
    if v is None:
        return ds_default(key, stage)
    if v == "auto":
        if key in HF_HIDDEN_SIZE_KEYS:
            h = hidden if hidden is not None else hidden_size(p)
            filled = hf_auto_value(key, h, stage)
            if filled is not None:
                return filled
        return ds_default(key, stage)
    return v


_PRESETS = None


def _model_presets() -> dict:
    global _PRESETS
    if _PRESETS is None:
        try:
            from zerocalc.presets import MODELS  # engine (preferred)
            _PRESETS = {k: _preset_config(v) for k, v in MODELS.items()}
        except Exception:
            path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "presets", "models.json")
            with open(path) as f:
                _PRESETS = {m["id"]: m["config"] for m in json.load(f)}
    return _PRESETS


def _preset_config(rec) -> dict:
    for name in ("hf_config", "config"):
        c = rec.get(name) if isinstance(rec, dict) else getattr(rec, name, None)
        if c:
            return dict(c)
    return {}


def model_config(p: dict) -> dict:
    """The model's config.json fields (a preset's, or the plan's own object); text_config is lifted."""
    m = p["model"]
    if isinstance(m, str):
        cfg = _model_presets().get(m)
        if cfg is None:
            raise KeyError(f"model: unknown preset id {m!r}")
    else:
        cfg = dict(m)
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k != "text_config"}}
    return cfg


def hidden_size(p: dict) -> int:
    """hidden_size as HF's trainer_config_finalize reads model.config.hidden_size (GPT-2's n_embd is mapped
    to it by transformers' attribute_map): the engine's ModelArch.hidden_size, else the config's field."""
    try:
        from zerocalc.architecture import resolve_model
    except ImportError:
        pass
    else:
        return int(resolve_model(p["model"]).hidden_size)
    cfg = model_config(p)
    if "hidden_size" in cfg:
        return int(cfg["hidden_size"])
    if cfg.get("hidden_sizes"):
        return int(max(cfg["hidden_sizes"]))
    raise KeyError("model: the config has no hidden_size")
