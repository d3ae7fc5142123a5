"""Presets and parameter counts: every model's count equals models.json's computed_total."""
import json
import pathlib

import pytest

from zerocalc.model import model_from_config, resolve_model
from zerocalc.presets import GPUS, MODELS

# The full reference files, copied into the repository by scripts/build_presets.py (data/README.md).
REF = pathlib.Path(__file__).resolve().parents[1] / "data" / "reference"


def test_all_presets_present():
    assert len(MODELS) == 39
    assert len(GPUS) == 31


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_parameter_count_matches_reference(model_id):
    arch = resolve_model(model_id)
    assert arch.total_params == MODELS[model_id].params_total
    assert arch.params_by_component() == dict(MODELS[model_id].params_breakdown)


def test_slim_copy_matches_reference():
    ref = json.loads((REF / "models.json").read_text())["models"]
    assert [m["id"] for m in ref] == list(MODELS)
    for m in ref:
        assert MODELS[m["id"]].params_total == m["params"]["computed_total"]
        assert dict(MODELS[m["id"]].config) == m["config"]
    gref = json.loads((REF / "gpus.json").read_text())["gpus"]
    assert [g["id"] for g in gref] == list(GPUS)


def test_llama_8b_by_hand():
    # embed 128256*4096 = 525,336,576 and the same for the untied lm_head
    # per layer: q 4096*4096 + k,v 2*(4096*1024) + o 4096*4096 = 41,943,040
    #            mlp 3*4096*14336 = 176,160,768; norms 2*4096 = 8,192  -> 218,112,000
    # 32 layers = 6,979,584,000; final norm 4,096
    expected = 2 * 525_336_576 + 32 * 218_112_000 + 4_096
    assert expected == 8_030_261_248
    assert resolve_model("llama-3.1-8b").total_params == expected


def test_custom_config_counts():
    # Yi-34B as a pasted config.json: 64000*7168*2 + 60*(attn + mlp + norms) + norm
    cfg = {"model_type": "llama", "hidden_size": 7168, "num_hidden_layers": 60, "num_attention_heads": 56,
           "num_key_value_heads": 8, "intermediate_size": 20480, "vocab_size": 64000, "tie_word_embeddings": False}
    attn = 7168 * 7168 * 2 + 2 * 7168 * 1024
    mlp = 3 * 7168 * 20480
    expected = 2 * 64000 * 7168 + 60 * (attn + mlp + 2 * 7168) + 7168
    assert model_from_config(cfg).total_params == expected


def test_largest_tensor_and_module():
    arch = resolve_model("llama-3.1-8b")
    assert arch.largest_tensor == 128256 * 4096
    assert arch.largest_module == 128256 * 4096          # embedding / lm_head module
    moe = resolve_model("mixtral-8x7b")
    # fused experts: gate_up (8, 2*14336, 4096) + down (8, 4096, 14336) in one module
    assert moe.largest_module == 8 * 3 * 14336 * 4096
