"""A.X K2's decoder layers (memory/blocks_axk2.py axk2_block), held to a trace.

The traced model (tools/memtrace/axk2_trace.py, tests/data/axk2_trace.json): AXK2's default config with 2 layers
(layer 0 dense with an MLP of 5120, layer 1 sparse: 16 experts of 512, top-8, one shared expert of 512), h 2048,
32 heads of qk 64 + 32 = 96 and v 64, q_lora_rank 384, kv_lora_rank 128, vocab 32000; full fine-tuning in bf16
(2-byte activations), one sequence of 512 tokens (t = 512), eager attention: AXK2 has no FA2 path
(_supports_flash_attn = False) and under SDPA AXK2Attention.forward's `attention_mask[:, 0, :, :]` raises
TypeError ('NoneType' object is not subscriptable: SDPA's causal mask is None), traced in transformers 5.24.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from zerocalc import Plan, estimate
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_families import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "axk2_trace.json").read_text())
FULL, CKPT, LORA, MIXED = TRACE["cases"]
T, H = 512, 2048


def saved(layer: int, attention: str = "eager") -> int:
    arch = model_from_config(FULL["plan"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention=attention, first_layer=False)
    return layer_saved_bytes(arch, c, block_linears_per_layer(arch)[layer], ())


def norm(d: int) -> int:
    """AXK2RMSNorm over d in bf16: the fp32 upcast, the fp32 rsqrt per token, the normalised 16-bit tensor."""
    return 4 * T * d + 4 * T + 2 * T * d


# the gated norm (h): the norm, its output (fc1's and the gate product's input), the fp32 sigmoid, the gated output
GATED = norm(H) + 2 * T * H + 4 * T * H + 2 * T * H
# attention:
#   q_a norm (384) and the cat [q_resid, q_compressed] q_gate_proj reads   norm(384) + 2*512*768
#   kv_a norm (128) and its output, kv_b_proj's input                      norm(128) + 2*512*128
#   kv_b_proj's output (the values are a view of it)                      2*512*4096
#   the query and expand_kv's key                                          2 * 2*512*32*96
#   eager softmax (fp32) and its bf16 copy                                 4*32*512*512 + 2*32*512*512
#   the contiguous output, the fp32 sigmoid of the gate, o_proj's input    2*512*2048 + 4*512*2048 + 2*512*2048
ATTENTION = (GATED + norm(384) + 2 * T * 768 + norm(128) + 2 * T * 128 + 2 * T * 4096 + 2 * 2 * T * 32 * 96
             + 6 * 32 * T * T + 8 * T * 2048)


def test_dense_layer_by_hand():
    """Layer 0: the attention part, the plain post-attention norm (2048) with its output and a SwiGLU MLP of 5120
    (gate, up, act, product: 4 * 2*512*5120)."""
    assert ATTENTION == 86_382_592
    assert saved(0) == ATTENTION + norm(H) + 2 * T * H + 4 * 2 * T * 5120


def test_sparse_layer_by_hand():
    """Layer 1: the attention part, the gated post-attention norm and DeepSeek-V3's MoE:
      router's fp32 copy of its input, sigmoid scores (fp32)    4*512*2048 + 4*512*16
      gathered inputs, gate_up output, act, product, outputs   2*4096*2048 + 2*4096*1024 + 2 * 2*4096*512 + 2*4096*2048
      top-k / sort / inverse indices, weights; the row sums    40*4096 + 4*512
      the shared expert (512): gate, up, act, product          4 * 2*512*512"""
    moe = (4 * T * H + 4 * T * 16 + 2 * 4096 * H + 2 * 4096 * 1024 + 2 * 2 * 4096 * 512 + 2 * 4096 * H
           + 40 * 4096 + 4 * T + 4 * 2 * T * 512)
    assert saved(1) == ATTENTION + GATED + moe


def test_attention_always_costed_as_eager():
    """FA2 and SDPA do not run for AXK2 in transformers 5.24 (module docstring): a flash plan costs the eager
    layer the model actually runs, and model_support says so."""
    assert saved(1, "flash") == saved(1, "eager")
    est = estimate(Plan.from_dict({**FULL["plan"], "attention": "flash"})).to_dict()
    assert "eager" in est["model_support"] and "activations traced" in est["model_support"]


@pytest.mark.parametrize("case", [FULL, LORA, CKPT, MIXED], ids=lambda c: c["id"])
def test_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak itself within 3 % (tools/memtrace/compare.py): full fine-tuning
    (before memory/blocks_axk2.py, a classic block of the same linears: activations -66.6 %, peak -7.9 %) and LoRA
    on the attention's five projections with the experts frozen. model.norm is Llama's RMSNorm (memory/blocks_axk2.py
    rmsnorm_head): full -1.5 -> -0.1 %, LoRA +1.7 -> +2.6 % (the head's fp32 upcast, 4 MiB, where the LayerNorm head
    kept a 2 MiB input)."""
    rows = compare(case, engine_breakdown(case["plan"]))
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, engine_breakdown(case["plan"]), rows)


def test_bf16_mixed_peaks_in_lm_heads_backward():
    """bf16-mixed over fp32 weights: the fp32 residual stream, fp32 RMSNorm products, autocast's weight copies and
    fp32 grouped_mm experts; the trace's peak is lm_head's backward, the _to_copy of its bf16 (32000, 2048) weight
    gradient to fp32 (memory/head_backward.py MIXED_HEAD_MOMENT), lm_head's autocast copy and the logits' gradient
    freed. Before that moment activations -30.7 % and logits +0.183 GiB at the engine's loss moment; now +0.1 %."""
    rows = {r["name"]: r for r in compare(MIXED, engine_breakdown(MIXED["plan"]))}
    assert rows["activations"]["ok"] and rows["logits"]["ok"]
    assert (2 + 4) * 32000 * 2048 + 4 * 512 * 2048 == 397_410_304          # the trace's temporaries at the peak


def test_checkpointed_step_peaks_at_the_unpermute():
    """With full checkpointing the trace's peak is inside the recomputed sparse layer's backward: index_put of the
    fp32 gradient of the routing-weighted expert outputs (the sigmoid router's fp32 weights), 3 x 4*4096*2048 B in
    flight (memory/expert_backward.py unpermute_moment, now AXK2's under full fine-tuning too). Before that moment
    the engine peaked in the loss backward: activations -95.0 %, logits +0.183 GiB; now +0.9 % and 0."""
    rows = {r["name"]: r for r in compare(CKPT, engine_breakdown(CKPT["plan"]))}
    assert rows["activations"]["ok"] and rows["logits"]["ok"]
    assert 3 * 4 * 4096 * 2048 == 100_663_296