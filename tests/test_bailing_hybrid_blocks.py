"""Bailing Hybrid / Ling 3's layers (memory/blocks_kimi_linear.py), held to a trace.

The traced model (tools/memtrace/kda_trace.py bailing_hybrid, tests/data/bailing_hybrid_trace.json):
BailingHybridConfig's default layout (MLA of qk 128 + 64 with interleaved RoPE, v 128, kv rank 512, no q rank, and
the head-wise output gate; KDA heads of 128 with the safe sigmoid forget gate and a full-width output gate; routed
experts in groups, one shared expert) at h 1024: 8 MLA heads, 8 KDA heads, 8 experts of 512 top-2 in 2 groups, a
dense MLP of 2816, 4 layers KDA KDA KDA MLA, layer 0 dense. fla's chunk_kda (flash-linear-attention 0.5.2) and
causal-conv1d's kernel are stood in (KdaStandIn, ssm_trace.py ConvStandIn). Rows: full bf16 with and without
checkpointing, LoRA on q/k/v/o_proj, kv_a_proj_with_mqa and kv_b_proj (fp32 adapters) with and without, full
bf16-mixed, full bf16 with eager attention. Before this rule (the KDA layers' linears costed as a classic block)
activations were -65.3 % (full), -48.3 % (LoRA), -22.0 % (mixed), -13.8 % (full checkpointed) of the trace at its
peak, the full and LoRA peaks -2.6 % and -3.5 %; the eager row -0.9 % (the classic block's s² terms over every
layer, by chance); after it every component is within 0.1 %.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.kda_trace import plans
from zerocalc import Plan, estimate
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "bailing_hybrid_trace.json").read_text())
T, H, I, IE = 512, 1024, 2816, 512
Q, D, NH = 1024, 128, 8                # KDA: 8 heads of 128
A, QK, VH, R, K = 8, 192, 128, 512, 2  # MLA: 8 heads, qk head 128 + 64, v head 128, kv rank 512; top-2


def _layer(i: int) -> int:
    arch = model_from_config(dict(plans("bailing_hybrid"))["bailing-hybrid-4l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=False)
    return layer_saved_bytes(arch, c, block_linears_per_layer(arch)[i], ())


def test_kda_layer_by_hand():
    """Layer 0 (KDA, the dense MLP) of the full bf16 row, bytes per token: the two block norms 16 x h; per q = 1024:
    the conv's input (the q/k/v cat) 6, the safe gate's fp32 sigmoid and gate_input (kept by `decay * gate_input`
    as A_log trains) 4 + 4 and its bf16 cast (fla's g) 2, the kernel's l2-normed q and k and v's copy 6, its fp32
    g_cumsum 4, the gated norm's fp32 copy, normalised tensor, sigmoid and weighted tensor 4 x 4 and its 16-bit
    output 2: 44 x q; per KDA head: beta 2, the q / k rstd 8, the norm's rsqrt 4, Aqk and Akk 2 x 2 x 64; the two
    block rsqrts 8; the MLP's gate, up, SiLU and product 4 x 2 x I. Besides: exp(A_log) (4 x 8) and the norm
    weight's fp32 copy (4 x 128)."""
    per_token = 16 * H + 44 * Q + NH * (2 + 8 + 4 + 2 * 2 * 64) + 8 + 8 * I
    by_hand = T * per_token + 4 * NH + 4 * D
    assert by_hand == 44_102_176
    assert _layer(0) == by_hand


def test_gated_mla_layer_by_hand():
    """Layer 3 (MLA, MoE) of the full bf16 row: Kimi Linear's MLA layer (tests/test_kimi_linear_blocks.py; the
    rotated query a new tensor here, of the same bytes) and the head-wise output gate's fp32 sigmoid and its bf16
    cast, 4 + 2 per head and token. (The trace also has grouped_mm's int32 offsets, 32 bytes.)"""
    per_token = (16 * H + 4 * 2 * A * QK + 8 * R + 4 * A + 2 * A * VH + 12 + 4 * H + 4 * 8
                 + K * (2 * 2 * H + 2 * 2 * IE + 2 * 2 * IE + 40) + 4 + 4 * 2 * IE + (4 + 2) * A)
    assert T * per_token + 32 == 30_515_232            # the trace's layer 3
    assert _layer(3) == T * per_token


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_saved_activations_at_forward_end_within_3_percent(case):
    """The trace's saved bytes at forward end, less the loss's fp32 log-softmax, against the engine's saved, head
    and autocast-copy activations."""
    plan = case["plan"]
    traced = case["saved_activations_forward_end"] - 4 * T * plan["model"]["vocab_size"]
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = detail["saved_activations"] + detail.get("head_activations", 0) + detail.get("autocast_weight_copies", 0)
    assert abs(engine - traced) <= 0.03 * traced, (engine, traced)


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_bailing_hybrid_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 % (no GAPS)."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)


def test_support_says_traced():
    arch = model_from_config(TRACE["cases"][0]["plan"]["model"])
    assert "activations traced" in arch.support and "kda_trace" in arch.support
