"""Kimi Linear's layers (memory/blocks_kimi_linear.py), held to a trace.

The traced model (tools/memtrace/kda_trace.py kimi_linear, tests/data/kimi_linear_trace.json): KimiLinearConfig's
default layout (MLA of qk 128 + 64, v 128, kv rank 512, no q rank; KDA heads of 128; routed experts top-k with one
shared expert, layer 0 dense) at h 1024: 8 MLA heads, 8 KDA heads, 8 experts of 512 top-2, a dense MLP of 2816, 4
layers KDA KDA KDA MLA. fla's chunk_kda (flash-linear-attention 0.5.2) and causal-conv1d's kernel are stood in by
autograd Functions that save what the kernels save (KdaStandIn, ssm_trace.py ConvStandIn). Rows: full bf16 with and
without checkpointing, LoRA on q/k/v/o_proj, kv_a_proj_with_mqa and kv_b_proj (fp32 adapters) with and without, full
bf16-mixed, full bf16 with eager attention. Before this rule (the KDA layers' linears costed as a classic block)
activations were -67.5 % (full), -51.2 % (LoRA), -23.5 % (mixed), -12.5 % (full checkpointed) of the trace at its
peak, the full and LoRA peaks -2.8 % and -3.8 %; the eager row -0.2 % (the classic block's s² terms over every
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

TRACE = json.loads((Path(__file__).parent / "data" / "kimi_linear_trace.json").read_text())
T, H, I, IE = 512, 1024, 2816, 512
Q, D, NH = 1024, 128, 8                # KDA: 8 heads of 128
A, QK, VH, R, K = 8, 192, 128, 512, 2  # MLA: 8 heads, qk head 128 + 64, v head 128, kv rank 512; top-2


def _layer(i: int, autocast: bool = False) -> int:
    arch = model_from_config(dict(plans("kimi_linear"))["kimi-linear-4l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=4 if autocast else 2, autocast=autocast, train_base=True,
            adapter_bytes=2, dropout=0.0, attention="flash", first_layer=False)
    return layer_saved_bytes(arch, c, block_linears_per_layer(arch)[i], ())


def test_kda_layer_by_hand():
    """Layer 0 (KDA, the dense MLP) of the full bf16 row, bytes per token: the two block norms (fp32 upcast, 16-bit
    normalised tensor and output: 4 + 2 + 2, twice) 16 x h; per q = 1024: the conv's input (the q/k/v cat) 6, the
    forget gate's exp, log's input `1 + exp`, the bool `g > 20`, the softplus and the product (fla's g) 4 + 4 + 1 +
    4 + 4, the kernel's l2-normed q and k and v's copy 6, its fp32 g_cumsum 4, the gated norm's fp32 copy,
    normalised tensor, sigmoid and weighted tensor 4 x 4 and its 16-bit output 2: 51 x q; f_a_proj's and g_a_proj's
    outputs 2 + 2 per d; per KDA head: beta 2, the q / k rstd 8, the norm's rsqrt 4, Aqk and Akk 2 x 2 x 64; the two
    block rsqrts 8; the MLP's gate, up, SiLU and product 4 x 2 x I. Besides: exp(A_log) and its negation (4 x 8 each)
    and the norm weight's fp32 copy (4 x 128)."""
    per_token = 16 * H + 51 * Q + 4 * D + NH * (2 + 8 + 4 + 2 * 2 * 64) + 8 + 8 * I
    by_hand = T * per_token + 2 * 4 * NH + 4 * D
    assert by_hand == 48_034_368
    assert _layer(0) == by_hand


def test_mla_layer_by_hand():
    """Layer 3 (MLA, MoE) of the full bf16 row, bytes per token: the block norms 16 x h; FA2's query (a view of
    q_proj's output), the new key, the value padded to 192 and the output, 4 x 2 x a x 192; kv_a_layernorm over the
    rank 8 x 512; the fp32 logsumexp 4 x a; o_proj's copy of the cropped output 2 x a x 128; the three rsqrts 12; the
    router's fp32 input copy 4 x h and fp32 sigmoid 4 x 8; per routed row (k = 2): the gathered input and the
    experts' output 2 x 2 x h, gate_up 2 x 2 x 512, SiLU and the product 2 x 2 x 512, the routing indices and
    weights 40; the router's row sums 4; the shared expert's gate, up, SiLU and product 4 x 2 x 512. (The trace also
    has grouped_mm's int32 offsets, 32 bytes, which the engine leaves out.)"""
    per_token = (16 * H + 4 * 2 * A * QK + 8 * R + 4 * A + 2 * A * VH + 12 + 4 * H + 4 * 8
                 + K * (2 * 2 * H + 2 * 2 * IE + 2 * 2 * IE + 40) + 4 + 4 * 2 * IE)
    assert T * per_token + 32 == 30_490_656            # the trace's layer 3
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
def test_kimi_linear_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 % (no GAPS)."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)


def test_support_says_traced():
    arch = model_from_config(TRACE["cases"][0]["plan"]["model"])
    assert "activations traced" in arch.support and "kda_trace" in arch.support
