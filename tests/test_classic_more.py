"""Pre-Llama LMs with blocks of their own (model/classic_more.py): counted by hand from transformers 5.24's
modules, and planned end to end with the approximate-activations warning."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.model import model_from_config
from zerocalc.model.classic_more import CLASSIC_MORE
from zerocalc.plan import Plan

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}


def cfg(model_type: str, **over) -> dict:
    return {**ROWS[f"default:{model_type}"]["config"], **over}


def test_xlm_by_hand():
    """XLMConfig defaults (emb_dim 2048, 12 layers, vocab 30145, 512 positions, one language: no
    lang_embeddings): positions 512*2048 + words 30145*2048 + LayerNorm 4096; a layer 4*(2048*2048 + 2048)
    + 2048*8192 + 8192 + 8192*2048 + 2048 + two LayerNorms 8192 = 50,358,272; pred_layer.proj's bias 30145."""
    arch = model_from_config(cfg("xlm"))
    assert arch.total_params == 512 * 2048 + 30145 * 2048 + 4096 + 12 * 50_358_272 + 30145 == 667_119_041
    # the four parallel ModuleLists make one block per layer index (FSDP's unit), not four
    assert len(arch.layer_sizes) == 12 and arch.layer_sizes[0] == 50_358_272
    langs = model_from_config(cfg("xlm", n_langs=4))
    assert langs.total_params - arch.total_params == 4 * 2048
    with pytest.raises(PlanError, match="'xlm'"):
        model_from_config(cfg("xlm", asm=True))


def test_reformer_by_hand():
    """Reformer's default (hidden 256, 12 heads x 64, ff 512, vocab 320, layers local/lsh x 3): axial
    positions 64*64 + 64*192 = 16,384; a local layer's query/key/value 3*256*768 + output 768*256 = 786,432,
    an LSH layer's query_key/value 2*256*768 + 768*256 = 589,824; each adds two LayerNorms 1024 and the
    feed-forward 256*512 + 512 + 512*256 + 256 = 262,912; the final LayerNorm over 512: 1024; lm_head's bias
    320 and decoder 512*320 + 320."""
    arch = model_from_config(cfg("reformer"))
    layers = 3 * (786_432 + 1024 + 262_912) + 3 * (589_824 + 1024 + 262_912)
    assert layers == 5_712_384
    assert arch.total_params == 320 * 256 + 16_384 + layers + 1024 + 320 + 512 * 320 + 320 == 5_976_192


def test_cpmant_and_modernbert_decoder_by_hand():
    """CPM-Ant 10B: a layer's two weight-only LayerNorms 2*4096, q/k/v/out 4*4096*(32*128), w_0/w_1/w_out
    3*4096*10240 = 192,946,176; the input embedding has 30720 + 32*32 prompt rows. ModernBERT decoder:
    q/k/v/Wo 4*768*768, mlp_norm 768, Wi 768*2304, Wo 1152*768 = 5,014,272, plus attn_norm 768 in layers
    1..21 only (nn.Identity in layer 0)."""
    cpm = model_from_config(cfg("cpmant"))
    assert cpm.layer_sizes[0] == 2 * 4096 + 4 * 4096 * 4096 + 3 * 4096 * 10240 == 192_946_176
    emb = next(t for t in cpm.tensors if t.name == "cpmant.input_embedding.weight")
    assert emb.shape == (30720 + 32 * 32, 4096)
    mb = model_from_config(cfg("modernbert-decoder"))
    assert mb.layer_sizes[0] == 4 * 768 * 768 + 768 + 768 * 2304 + 1152 * 768 == 5_014_272
    assert mb.layer_sizes[1] == 5_014_272 + 768
    assert sum(mb.layer_sizes) == 22 * 5_014_272 + 21 * 768 == 110_330_112


def test_moshi_text_model_by_hand():
    """MoshiForCausalLM defaults (hidden 4096, 32 layers, 32 heads x 128, ffn_dim 22528, vocab 32000): embed_tokens
    32001*4096; a layer q/k/v/o 4*4096*4096, fc1 4096*22528, fc2 (22528 / 2)*4096, two RMSNorms 8192 =
    205,529,088; final norm 4096; lm_head 32000*4096. The model_support says the depth decoder is not counted."""
    arch = model_from_config(cfg("moshi"))
    assert arch.layer_sizes[0] == 4 * 4096 * 4096 + 4096 * 22528 + 11264 * 4096 + 8192 == 205_529_088
    assert arch.total_params == 32001 * 4096 + 32 * 205_529_088 + 4096 + 32000 * 4096 == 6_839_083_008
    assert "depth decoder" in arch.support


# traced in tools/memtrace/families.py: ModernBERT-decoder exact; Moshi's activations traced, its note on the
# depth decoder and codec kept (so still warned)
# XLM's layer is memory/blocks_bert.py's, traced (tests/test_bert_grid.py)
# CPM-Ant's is memory/blocks_cpmant.py's, traced (tests/test_cpmant_blocks.py); Reformer's memory/blocks_reformer.py's
# (tests/test_reformer_blocks.py)
TRACED = {"modernbert-decoder": "exact", "moshi": "exact parameter count; activations traced", "xlm": "exact",
          "cpmant": "exact parameter count; activations traced",
          "xlnet": "exact parameter count; activations traced",
          "prophetnet": "exact parameter count; activations traced",
          "reformer": "exact parameter count; activations traced"}


@pytest.mark.parametrize("model_type", sorted(CLASSIC_MORE))
def test_each_plans_with_the_approximate_warning(model_type):
    for method in ("full", "lora"):
        est = estimate(Plan.from_dict({"model": cfg(model_type), "seq_len": 256, "method": method})).to_dict()
        assert est["model_support"].startswith(TRACED.get(model_type,
                                                          "exact parameter count; activations approximate"))
        warned = "model-approximate" in {w["id"] for w in est["warnings"]}
        assert warned == (est["model_support"] != "exact")
        # the weights (and under full fine-tuning their gradients and states) and the rest are there
        assert est["per_gpu"]["peak_allocated_bytes"] > est["per_gpu"]["components"]["weights"] > 0
