"""The model package: a Hugging Face config.json (or a preset id) -> ModelArch, the tensor inventory.

One module per family (`llama.py`: the Llama lineage incl. MoE and MLA; `classic.py`: GPT-2, BERT,
Falcon, BLOOM, GPT-NeoX, Phi-1/2, T5), the shared dataclasses in `arch.py`, config reading in
`config.py`. ``resolve_model`` memoises: a plan's model is built once, however many layers ask.
"""
from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from typing import Any, Mapping

from ..errors import PlanError
from ..presets import MODELS
from .arch import Linear, ModelArch, MoE, Tensor
from .classic import classic, t5
from .classic_more import CLASSIC_MORE
from .config import ConfigReader
from .composite import COMPOSITES, composite, is_composite
from .llama import LLAMA_LIKE, llama_like
from .dbrx import dbrx
from .decoders import DECODERS, bart_decoder
from .seq2seq import SEQ2SEQ, seq2seq
from .encoders import ENCODERS, encoder_lm
from .encdec import encoder_decoder
from .vision_encdec import VISION_ENCDEC
from .kosmos import KOSMOS, kosmos
from .udop import udop
from .florence2 import florence2
from .pi0 import pi0
from .t5gemma2 import t5gemma2
from .pp_formulanet import pp_formulanet
from .evolla import evolla
from .blt import blt
from .gptlike import GPTLIKE, gptlike
from .t5gemma import t5gemma
from .gemma4 import gemma4_text, gemma4_unified_text, gemma4_without_towers
from .vision_gemma4 import gemma4_with_towers
from .hybrid import lfm2, lfm2_moe
from .ssm import bamba, falcon_h1, granitemoehybrid, jamba, mamba, mamba2, nemotron_h
from .textmodels import TEXT_MODELS

CLASSIC = {"gpt2", "bert", "falcon", "bloom", "gpt_neox", "phi", "gpt_bigcode"}
T5 = {"t5", "mt5", "umt5", "longt5", "switch_transformers"}
SSM = {"mamba": mamba, "mamba2": mamba2, "nemotron_h": nemotron_h, "granitemoehybrid": granitemoehybrid,
       "lfm2": lfm2, "lfm2_moe": lfm2_moe, "falcon_h1": falcon_h1, "jamba": jamba, "bamba": bamba, "gemma4_text": gemma4_text,
       "gemma4_unified_text": gemma4_unified_text,
       # modeling_falcon_mamba.py: Mamba's mixer and kernel; its B / C / dt RMS norms have no weights
       "falcon_mamba": lambda c: replace(mamba(c), model_type="falcon_mamba"),
       **TEXT_MODELS,   # textmodels.py: text builders outside the Llama rows, one module per family
       **CLASSIC_MORE}  # classic_more.py: XLM, XLNet, Reformer, ProphetNet, CPM-Ant, ModernBERT decoder
TOWERS = ("vision_config", "audio_config")
GEMMA4 = {"gemma4", "gemma4_unified"}   # without towers; Gemma 4's vision / audio towers (vision_gemma4.py)
MODELLED_TEXT = LLAMA_LIKE | CLASSIC | T5 | set(SSM) | {"dbrx"} | set(ENCODERS) | set(DECODERS) | set(SEQ2SEQ) | set(GPTLIKE) | {"t5gemma", "encoder-decoder"}
# whole models of their own modules (towers + text), dispatched in model_from_config ahead of composite.py
WHOLE = set(VISION_ENCDEC) | set(KOSMOS) | {"udop", "florence2", "pi0", "t5gemma2", "pp_formulanet", "evolla", "blt"}
SUPPORTED_MODEL_TYPES = tuple(sorted(MODELLED_TEXT | set(COMPOSITES) | GEMMA4 | WHOLE))


def model_from_config(cfg: Mapping) -> ModelArch:
    """A Hugging Face config.json (as a mapping) -> ModelArch. Raises PlanError naming the field.

    A missing ``model_type`` is read as a Llama-style decoder (the most common custom case); a model_type
    the engine does not model is refused by name, never built as another architecture (a GPT-BigCode model
    built as a Llama gets a third too many parameters)."""
    if not isinstance(cfg, Mapping):
        raise PlanError("model", "must be a preset id or a config.json object")
    c = ConfigReader(cfg)
    if cfg.get("model_type") in GEMMA4 and not any(isinstance(cfg.get(k), Mapping) for k in TOWERS):
        return gemma4_without_towers(cfg)
    if cfg.get("model_type") == "gemma4" and all(
            cfg[k].get("model_type", kind) == kind for k, kind in (("vision_config", "gemma4_vision"),
                                                                   ("audio_config", "gemma4_audio"))
            if isinstance(cfg.get(k), Mapping)):
        return gemma4_with_towers(cfg)
    if cfg.get("model_type") == "t5gemma":
        return t5gemma(cfg)
    if cfg.get("model_type") == "encoder-decoder":
        return encoder_decoder(cfg)
    if cfg.get("model_type") in VISION_ENCDEC:    # vision_encdec.py: towers before a cross-attending BERT decoder
        return VISION_ENCDEC[cfg["model_type"]](cfg)
    if cfg.get("model_type") == "udop":
        return udop(cfg)
    if cfg.get("model_type") == "florence2":
        return florence2(cfg)
    if cfg.get("model_type") == "pi0":
        return pi0(cfg, model_from_config)
    if cfg.get("model_type") == "t5gemma2":
        return t5gemma2(cfg, model_from_config)
    if cfg.get("model_type") == "pp_formulanet":
        return pp_formulanet(cfg)
    if cfg.get("model_type") == "evolla":
        return evolla(cfg, model_from_config)
    if cfg.get("model_type") == "blt":
        return blt(cfg)
    if cfg.get("model_type") in KOSMOS:
        return kosmos(cfg)
    if is_composite(cfg) and cfg.get("model_type") not in MODELLED_TEXT:
        return composite(cfg, model_from_config)
    if not c.has("model_type"):
        arch = llama_like(c, "llama")
        return replace(arch, support="approximate: no model_type in the config, read as a Llama decoder")
    model_type = c.str("model_type", "llama")
    if model_type in CLASSIC:
        return classic(c, model_type)
    if model_type in T5:
        return t5(c, model_type)
    if model_type in SSM:
        return SSM[model_type](c)
    if model_type == "dbrx":
        return dbrx(c)
    if model_type in ENCODERS:
        return encoder_lm(c, model_type)
    if model_type in DECODERS:
        return bart_decoder(c, model_type)
    if model_type in SEQ2SEQ:
        return seq2seq(c, model_type)
    if model_type in GPTLIKE:
        return gptlike(c, model_type)
    if model_type not in LLAMA_LIKE:
        raise PlanError("model.model_type", f"model_type {model_type!r} is not modelled; modelled: "
                                            + ", ".join(SUPPORTED_MODEL_TYPES))
    return llama_like(c, model_type)


def resolve_model(model: Any) -> ModelArch:
    """plan.model (preset id or config mapping) -> ModelArch, memoised: presets by id, custom configs by
    their canonical JSON (building DeepSeek-V3's inventory takes milliseconds; a page request asks often)."""
    if isinstance(model, str):
        return _preset(model)
    if not isinstance(model, Mapping):
        raise PlanError("model", "must be a preset id or a config.json object")
    return _custom(json.dumps(_thaw(model), sort_keys=True, default=str))


@lru_cache(maxsize=None)
def _preset(model_id: str) -> ModelArch:
    preset = MODELS[model_id]
    return model_from_config({**preset.hf_config, "name": preset.name})


@lru_cache(maxsize=64)
def _custom(canonical: str) -> ModelArch:
    return model_from_config(json.loads(canonical))


def _thaw(v):
    if isinstance(v, Mapping):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_thaw(x) for x in v]
    return v


__all__ = ["ModelArch", "Tensor", "Linear", "MoE", "model_from_config", "resolve_model", "SUPPORTED_MODEL_TYPES"]
