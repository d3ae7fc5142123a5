"""Presets and parameter counts: every model's count equals models.json's computed_total."""
import json
import pathlib

import pytest

from zerocalc.model import model_from_config, resolve_model
from zerocalc.presets import GPUS, MODELS

# The full reference files, copied into the repository by scripts/build_presets.py (data/README.md).
REF = pathlib.Path(__file__).resolve().parents[1] / "data" / "reference"
# The repository's own presets (current checkpoints, cross-checked configs), appended by scripts/build_presets.py.
OWN = pathlib.Path(__file__).resolve().parents[1] / "data" / "presets" / "checkpoints.json"
ARCHS = pathlib.Path(__file__).resolve().parent / "data" / "architectures.json"
OWN_IDS = ["qwen3-vl-8b-instruct", "llama-4-scout-17b-16e", "llama-4-maverick-17b-128e", "glm-4.5", "glm-4.5-air",
           "qwen2.5-vl-7b-instruct", "gemma-3-4b-it", "qwen3.5-27b", "mistral-small-3-24b", "gemma-4-31b-it"]


def test_all_presets_present():
    assert len(MODELS) == 49          # 39 from the reference + 10 from data/presets/checkpoints.json
    assert list(MODELS)[39:] == OWN_IDS
    assert len(GPUS) == 31


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_parameter_count_matches_reference(model_id):
    arch = resolve_model(model_id)
    assert arch.total_params == MODELS[model_id].params_total
    assert arch.params_by_component() == dict(MODELS[model_id].params_breakdown)


def test_slim_copy_matches_reference():
    ref = json.loads((REF / "models.json").read_text())["models"]
    assert [m["id"] for m in ref] == list(MODELS)[:len(ref)]
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


def test_own_presets_match_their_file_and_transformers():
    """Each repository preset: its source and cross-check said, its config as in the file, and the engine's count
    equal to transformers 5.24's meta-device count of the same config (tests/data/architectures.json), exactly."""
    own = json.loads(OWN.read_text())["models"]
    assert [m["id"] for m in own] == OWN_IDS
    rows = {r["id"]: r for r in json.loads(ARCHS.read_text())["rows"]}
    for m in own:
        assert m["source"].startswith("https://huggingface.co/" + m["hf_repo"] + "/")
        assert m["cross_checked"]
        p = MODELS[m["id"]]
        assert dict(p.config) == m["config"] and p.model_type == m["model_type"]
        hf = m["params"]["transformers_5_24"]
        assert p.params_total == hf
        assert rows[f"preset:{m['id']}"]["hf_params"] == hf
        if f"checkpoint:{m['id']}" in rows:          # the seven typed in tools/archgen/checkpoints.json
            assert rows[f"checkpoint:{m['id']}"]["hf_params"] == hf
        arch = resolve_model(m["id"])
        assert arch.total_params == hf
        assert arch.params_by_component() == m["params"]["breakdown"]


def test_composite_presets_count_their_towers():
    # the vision presets count whole: tower + projector + language model, as transformers builds them
    rows = {r["id"]: r for r in json.loads(ARCHS.read_text())["rows"]}
    for pid in ("qwen3-vl-8b-instruct", "llama-4-scout-17b-16e", "llama-4-maverick-17b-128e", "gemma-3-4b-it",
                "qwen2.5-vl-7b-instruct", "qwen3.5-27b"):
        parts = rows[f"preset:{pid}"]["parts"]
        assert parts.get("vision", 0) > 0
        comp = resolve_model(pid).params_by_component()
        assert comp["vision"] + comp.get("projector", 0) == parts["vision"] + parts.get("projector", 0)
    # Gemma 3 4B IT = the text-only gemma-3-4b preset + the SigLIP tower (416,866,032) + the projector (2,950,272)
    assert MODELS["gemma-3-4b-it"].params_total == MODELS["gemma-3-4b"].params_total + 416_866_032 + 2_950_272
