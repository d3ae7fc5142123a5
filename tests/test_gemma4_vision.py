"""Gemma 4 with its vision tower (py/zerocalc/model/vision_gemma4.py; transformers 5.24 modeling_gemma4.py
Gemma4VisionModel + Gemma4MultimodalEmbedder): the count by hand on the 31B release, the top-level tie flag
deciding, a frozen tower exact and a trained one approximate, an audio tower refused by name."""
import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.model import model_from_config
from zerocalc.plan import Plan

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}
ROW = ROWS["checkpoint:gemma-4-31b-it"]


def _parts(cfg) -> dict:
    out: dict = {}
    for t in model_from_config(cfg).tensors:
        out[t.component] = out.get(t.component, 0) + t.numel
    return out


def test_31b_tower_by_hand():
    # patch_embedder: input_proj 3·16²·1152 = 884,736; position_embedding_table 2·10240·1152 = 23,592,960
    # per layer (27): q/k/v/o 4·1152·(16·72 = 1152) = 5,308,416; q_norm + k_norm 2·72 = 144;
    #   gate/up/down 3·1152·4304 = 14,874,624; four norms 4·1152 = 4,608 -> 20,187,792; x27 = 545,070,384
    vision = 884_736 + 23_592_960 + 27 * (5_308_416 + 144 + 14_874_624 + 4_608)
    assert vision == 569_548_080 == ROW["parts"]["vision"]
    # embed_vision.embedding_projection 1152 -> 5376 (its pre-projection RMSNorm has no weight)
    parts = _parts(ROW["config"])
    assert parts["vision"] == vision and parts["projector"] == 1152 * 5376 == ROW["parts"]["projector"]
    assert sum(parts.values()) == ROW["hf_params"] == 31_273_086_512


def test_top_level_tie_decides():
    row = ROWS["variant:gemma4-vision-untied-clipped-kv4"]
    assert row["config"]["text_config"]["tie_word_embeddings"] is True
    arch = model_from_config(row["config"])
    assert not arch.tied_embeddings and sum(t.numel for t in arch.tensors) == row["hf_params"]
    assert _parts(row["config"])["lm_head"] == row["parts"]["lm_head"]


def test_frozen_tower_exact_trained_tower_approximate():
    frozen = estimate(Plan.from_dict({"model": "gemma-4-31b-it", "seq_len": 512})).to_dict()
    assert frozen["model_support"] == "exact"
    assert frozen["total_params"] - frozen["trainable_params"] == 569_548_080 + 6_193_152
    trained = estimate(Plan.from_dict({"model": "gemma-4-31b-it", "seq_len": 512,
                                       "vision": {"trainable": "full"}})).to_dict()
    assert "activations approximate" in trained["model_support"]
    assert trained["trainable_params"] == trained["total_params"]


def test_audio_tower_refused_by_name():
    cfg = {**ROW["config"], "audio_config": {"model_type": "gemma4_audio"}}
    with pytest.raises(PlanError, match="gemma4"):
        model_from_config(cfg)
