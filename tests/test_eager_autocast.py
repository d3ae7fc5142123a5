"""Eager attention outside the Llama lineage under CUDA autocast (memory/blocks.py attention_core): softmax is on
autocast's fp32 list, so the probabilities it saves are fp32, and probs @ V keeps a 16-bit copy of its input
(GPT-2's `.type(value.dtype)`, or autocast's cast of BERT's dropped-out fp32 probabilities). The byte counts are
written out by hand; the traced whole steps are tools/memtrace/golden/stacks/bert-large-* and gpt2-*-eager
(tests/test_stack_grid.py holds the engine within 3 % of them).

Tiny encoder: h = 64, 4 heads, b = 2, s = 32, so t = s·b = 64 tokens and scores = a·s²·b = 4·32·32·2 = 8,192.
"""
from __future__ import annotations

from zerocalc.memory.blocks import Ctx, SavedSet, attention_core
from zerocalc.model import model_from_config

H, A, B, S = 64, 4, 2, 32
T, SCORES = S * B, A * S * S * B


def _arch(model_type="bert", **cfg):
    return model_from_config({"model_type": model_type, "hidden_size": H, "num_hidden_layers": 2,
                              "num_attention_heads": A, "intermediate_size": 4 * H, "vocab_size": 100, **cfg})


def _saved(arch, autocast, e, res=4, attention="eager"):
    ss = SavedSet()
    c = Ctx(tokens=T, seq=S, batch=B, e=e, res=res, autocast=autocast, train_base=True, adapter_bytes=e,
            dropout=0.0, attention=attention, first_layer=False)
    attention_core(ss, c, arch, "attn", arch.q_dim, arch.kv_dim)
    return ss.items


def test_bert_under_fp16_autocast_saves_fp32_softmax_mask_and_a_16_bit_copy():
    arch = _arch()                                   # BERT's hidden_dropout_prob default 0.1 (attention too)
    got = _saved(arch, autocast=True, e=2)
    qkv = 3 * 2 * T * H                              # q, k, v in fp16: 3 x 2 x 64 x 64 = 24,576
    assert got["attn.softmax"] == 4 * SCORES == 32_768
    assert got["attn.attn_drop_mask"] == SCORES == 8_192
    assert got["attn.probs"] == 2 * SCORES == 16_384
    assert sum(got.values()) == qkv + 7 * SCORES == 81_920


def test_bert_in_fp32_saves_softmax_mask_and_dropout_output_in_fp32():
    got = _saved(_arch(), autocast=False, e=4)
    assert sum(got.values()) == 3 * 4 * T * H + (4 + 1 + 4) * SCORES == 122_880


def test_without_dropout_the_16_bit_copy_is_the_matmuls_input():
    got = _saved(_arch("gpt2", resid_pdrop=0.0), autocast=True, e=2)
    assert "attn.attn_drop_mask" not in got
    assert got["attn.softmax"] + got["attn.probs"] == 6 * SCORES == 49_152


def test_falcon_softmax_in_the_hidden_states_dtype_over_a_16_bit_base():
    # modeling_falcon.py: F.softmax(..., dtype=hidden_states.dtype), which autocast leaves as asked
    arch = _arch("falcon", num_kv_heads=A, new_decoder_architecture=True, multi_query=False)
    assert _saved(arch, autocast=True, e=2, res=2)["attn.softmax"] == 2 * SCORES
    fp32 = _saved(arch, autocast=True, e=2, res=4)
    assert fp32["attn.softmax"] == 4 * SCORES and fp32["attn.probs"] == 2 * SCORES


def test_flash_attention_saves_no_scores():
    got = _saved(_arch(), autocast=True, e=2, attention="flash")
    assert "attn.softmax" not in got and sum(got.values()) == 4 * 2 * T * H + 4 * A * T
