"""Qwen4-Exp's language model (memory/blocks_qwen4_exp.py), held to a trace.

The traced model (tools/memtrace/qwen4_trace.py, tests/data/qwen4_exp_trace.json): the default Qwen4ExpTextConfig at
h = 1024, 4 layers (Gated DeltaNet at 0 and 2: 8 key / 16 value heads of 128; QSA-indexed attention at 1 and 3: 8
query heads of 128, 2 KV heads, the indexer's 8 heads of 128), 4 hyper-connection streams of rank 320, 16 experts of
512 top-4 and a gated shared expert of 512 in every layer, vocab 8192; the DeltaNet's causal-conv1d and fla kernels
and the indexer's per-query loop stood in (the driver's docstring). Eight rows: full bf16 (b1 s512, b2 s256,
checkpointed), LoRA on the attention and DeltaNet projections with fp32 adapters (with and without checkpointing),
bf16-mixed full and LoRA, full under eager attention. Every parameter of the indexers is left without a gradient
(memory/indexers.py; the tracer's gradient-accumulation step gives never-run parameters no .grad either). Before
this rule (a classic block of the DeltaNet's linears) activations were -75 % to -95 % of the trace.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.qwen4_trace import plans
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.indexers import no_grad_tensors
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "qwen4_exp_trace.json").read_text())
ARCHS = json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]
T, H, N, W, R = 512, 1024, 4, 4096, 320          # tokens, hidden, streams, N·h, hc_lowrank
K, V, NK, NV = 1024, 2048, 8, 16                 # DeltaNet key / value widths and heads
E, TOPK, I, SI = 16, 4, 512, 512                 # experts, top-k, expert and shared widths
A, D, KV = 8, 128, 2                             # attention heads, head dim, KV heads

# one Qwen4ExpTextGatedResidual (full bf16): hc_norm's fp32 copy of the stream, rsqrt per stream, 1 + weight, the fp32
# normalised tensor, the bf16 weighted output (read by input_mix_weight_down, block_inject_weight and the product);
# down / hc_count (silu's input) and silu's output (t·r each); the W-wide sigmoid and the N-wide injection sigmoid
HC = 4 * T * W + 4 * T * N + 4 * W + 4 * T * W + 2 * T * W + 2 * T * R + 2 * T * R + 2 * T * W + 2 * T * N
MIX = 2 * T * H                                  # the mix's mean: the sublayer's input
INJECT = 2 * T * N + 2 * T * H                   # 2·sigmoid weights and the sublayer's output
# Qwen2-MoE: fp32 router softmax, int64 top-k / permutation indices and fp32 row sums (40 bytes a slot + 4 a token),
# gathered rows, gate_up, SiLU, product, expert outputs; the shared expert's gate, up, SiLU, product; its sigmoid gate
# and its output
MOE = (4 * T * E + 40 * T * TOPK + 4 * T + 2 * T * TOPK * H + 2 * 2 * T * TOPK * I + 2 * 2 * T * TOPK * I
       + 2 * T * TOPK * H + 4 * 2 * T * SI + 2 * T + 2 * T * H)


def test_deltanet_layer_by_hand():
    """A Gated DeltaNet layer (layer 2, full bf16): causal-conv1d's input (t·(2K + V)), beta, softplus's fp32 input
    and output, fla's l2-normed q and k, their fp32 rstd, v, the fp32 cumulative g, solve_tril's A (64 per value head
    and token), then Qwen4ExpTextRMSNormGated (fp32 copy, rsqrt, bf16 normed, weight times it, fp32 gate, SiLU) and
    out_proj's bf16 input. The trace's layer 2 saves 104,430,784 bytes (`qwen4_trace` rows dumped with
    dump_saved): 3,904 fewer, A_log's exp and neg (128 bytes) and the routing indices, which the engine books at 40
    bytes a slot."""
    delta = (2 * T * (2 * K + V) + 2 * T * NV + 4 * T * NV + 4 * T * NV + 2 * 2 * T * K + 2 * 4 * T * NK + 2 * T * V
             + 4 * T * NV + 2 * T * NV * 64
             + 4 * T * V + 4 * T * NV + 2 * T * V + 2 * T * V + 4 * T * V + 4 * T * V + 2 * T * V)
    arch = model_from_config(dict(plans())["qwen4-exp-4l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="sdpa", first_layer=False)
    layer = HC + MIX + delta + INJECT + HC + MIX + MOE + INJECT
    assert layer == 104_434_688
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[2], ()) == layer


def test_attention_layer_by_hand():
    """An indexed-attention layer (layer 3, full bf16, SDPA): q_norm and k_norm (fp32 copy, rsqrt, 1 + weight, fp32
    normalised tensor, per head), SDPA's additive bf16 mask (s·s), the rotated q, K and V repeated to 8 heads, the
    output and fp32 logsumexp, the contiguous output, sigmoid(gate) and their product (o_proj's input). The indexer
    keeps nothing. The trace's layer 3 saves 89,083,968 bytes (the routing indices' 4,032 fewer)."""
    attn = (4 * T * A * D + 4 * T * A + 4 * D + 4 * T * A * D + 4 * T * KV * D + 4 * T * KV + 4 * D + 4 * T * KV * D
            + 2 * T * T + 4 * 2 * T * A * D + 4 * A * T + 3 * 2 * T * A * D)
    arch = model_from_config(dict(plans())["qwen4-exp-4l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="sdpa", first_layer=False)
    layer = HC + MIX + attn + INJECT + HC + MIX + MOE + INJECT
    assert layer == 89_088_000
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[3], ()) == layer


def test_indexers_take_no_gradient():
    """The QSA indexer returns a boolean mask built from top-k indices: its parameters (index_qk_proj, q_layernorm,
    k_layernorm) get no gradient, hence no optimizer state, in the text model and the composite's."""
    for mt in ("qwen4_exp_text", "qwen4_exp"):
        arch = model_from_config(next(r for r in ARCHS if r["id"] == f"default:{mt}")["config"])
        names = {t.name.rsplit(".", 2)[-2] for t in no_grad_tensors(arch)}
        assert names == {"index_qk_proj", "q_layernorm", "k_layernorm"}, mt
        assert "activations traced" in arch.support


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_qwen4_exp_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %. The rows without checkpointing peak in the loss's
    backward with every layer's saved set alive; full fine-tuning with checkpointing in the recomputed layer's
    expert backward; LoRA with checkpointing at the end of the recomputed layer's experts forward
    (memory/blocks_qwen4_exp.py recompute_moment: -19.4 % without it)."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)


def testindexer_stand_in_masks_as_the_indexer_does():
    """tools/memtrace/qwen4_trace.py's stand-in for Qwen4ExpTextQSAIndexer.forward: with indexer_budget at least
    seq_len the real indexer (run here on real CPU tensors, s = 12) selects every visible key, so the attention's
    mask `attention_mask & selected_token_mask` is the same with either; and the real one's result needs no
    gradient (no parameter of the indexer gets one)."""
    torch = pytest.importorskip("torch")
    from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
    from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpTextQSAIndexer
    from tools.memtrace.qwen4_trace import indexer_stand_in
    cfg = Qwen4ExpTextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                             num_hidden_layers=1, indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=32,
                             indexer_budget=16, indexer_compress_ratio=4, num_experts=2, num_experts_per_tok=1)
    idx = Qwen4ExpTextQSAIndexer(cfg, 0)
    b, s = 2, 12
    x = torch.randn(b, s, 64)
    cos, sin = torch.randn(b, s, 32), torch.randn(b, s, 32)
    causal = torch.ones(s, s, dtype=torch.bool).tril().expand(b, 1, s, s)
    real = idx(x, (cos, sin), causal, None)
    stand = indexer_stand_in(idx, x, (cos, sin), causal, None)
    assert real.shape == stand.shape == (b, 1, s, s)
    assert torch.equal(causal & real, causal & stand)
    assert not real.requires_grad
