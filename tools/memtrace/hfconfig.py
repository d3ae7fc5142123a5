"""Model preset -> Hugging Face config dict (with `model_type`).

Prefers the engine's presets (`zerocalc.presets.MODELS[id].hf_config`); falls back to the
repository's copy of the reference file, data/reference/models.json (`config` + `model_type`; written by
scripts/build_presets.py), found relative to this file, or to the file named by $ZEROCALC_MODELS_JSON.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

# keys in models.json that are annotations, not HF config fields
_NOT_HF = {"head_dim_equals_hidden_over_heads", "name"}
_REPO = Path(__file__).resolve().parents[2]
_REFERENCE = Path(os.environ.get("ZEROCALC_MODELS_JSON", _REPO / "data" / "reference" / "models.json"))


def _from_engine(model_id: str) -> dict | None:
    try:
        from zerocalc.presets import MODELS  # noqa: PLC0415
    except ImportError:
        return None
    rec = MODELS.get(model_id) if hasattr(MODELS, "get") else None
    cfg = getattr(rec, "hf_config", None) if rec is not None else None
    return dict(cfg) if cfg else None


def _from_reference(model_id: str) -> dict:
    data = json.loads(_REFERENCE.read_text())
    for m in data["models"]:
        if m["id"] == model_id:
            return {"model_type": m["model_type"], **m["config"]}
    raise KeyError(f"model preset {model_id!r} not found in engine presets or {_REFERENCE}")


def hf_config_dict(model) -> dict:
    """plan.model (preset id or config dict) -> HF config.json-style dict incl. model_type."""
    if isinstance(model, dict):
        cfg = dict(model)
        cfg.setdefault("model_type", "llama")
    else:
        cfg = _from_engine(model) or _from_reference(model)
    cfg = {k: v for k, v in cfg.items() if k not in _NOT_HF}
    if cfg["model_type"] == "gpt2":   # GPT2Config names (attribute_map covers hidden_size/heads/layers)
        cfg.setdefault("n_inner", cfg.pop("intermediate_size", None))
        cfg.pop("num_key_value_heads", None)
        cfg.pop("head_dim", None)
    return cfg
