"""Configs in: a model's config.json -> the plan's model object (plan-v1 takes a whole config.json)."""
from __future__ import annotations

from ..errors import PlanError
from ..model import model_from_config
from .common import ConfigImportError, base_plan_dict, parse_json, validate_plan_dict


def import_model_config(config) -> dict:
    """A model's config.json (text or dict) -> the plan's model object, validated by zerocalc.model (dense,
    MoE, MLA; a multimodal config's text_config). Errors name the field as ``config.json.<field>``."""
    cfg = parse_json(config, "config.json")
    if "name" not in cfg:
        name = cfg.get("_name_or_path") or cfg.get("model_type")
        if isinstance(name, str) and name:
            cfg["name"] = name
    try:
        model_from_config(cfg)
    except PlanError as e:
        key = e.key.replace("model", "config.json", 1) if e.key.startswith("model") else e.key
        raise ConfigImportError(key, e.message) from None
    return cfg


def apply_model_config(config, plan) -> dict:
    """A new plan dict with ``model`` set from a pasted config.json (the current plan is not touched). A GPTQ
    checkpoint's config.json (``quantization_config.quant_method: gptq``, with ``bits`` and ``group_size``, as
    optimum / gptqmodel write it) makes a LoRA plan QLoRA on GPTQ (plan-v1 Extension 1 quantization gptq)."""
    new = base_plan_dict(plan)
    new["model"] = import_model_config(config)
    qc = new["model"].get("quantization_config")
    if isinstance(qc, dict) and str(qc.get("quant_method", "")).lower() == "gptq" and new["method"] in ("lora", "qlora"):
        new["method"] = "qlora"
        new["quantization"] = {**new["quantization"], "type": "gptq", "bits": qc.get("bits", 4),
                               "group_size": qc.get("group_size", 128)}
        if new["precision"] == "fp32":
            new["precision"] = "fp16-mixed"   # GPTQ kernels compute in 16 bits (builder.gptq_half_precision)
    validate_plan_dict(new)
    return new
