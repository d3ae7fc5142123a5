"""Muse Spark's language model (model/muse_spark.py; memory/blocks_muse_spark.py muse_spark_block), held to a trace.

The traced model (tools/memtrace/more_moe_trace.py muse_spark, tests/data/muse_spark_trace.json): the whole
MuseSparkForConditionalGeneration (transformers 5.24 modeling_muse_spark.py) with its vision and audio towers cut
small, frozen and never run (text only), and the text model at h 1024, 16 heads of 64 (4 KV heads) with the output
gate, weightless q/k and output norms, fp32 residual gates, a sliding dense first layer (MLP 2048) and a full sparse
one (pre_expert_proj to 512, 16 grouped_mm experts of 512 with the post-expert norm, top-4, the fp32 sigmoid
router, post_expert_proj), vocab 8192, the soft-capped logits; bf16, FA2, t = 512. Full fine-tuning with
checkpointing peaks in the recomputed sparse layer's post-expert norm backward (memory/blocks_muse_spark.py
post_expert_norm_moment). As a classic block of the same linears the engine was -80 % / -93 % on activations in
the full rows, -66 % under LoRA, and the logits -14 % (the softcap not modelled).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.more_moe_trace import plans
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "muse_spark_trace.json").read_text())
T, H, Q, KV, A, KH, M, E, K, IE = 512, 1024, 1024, 256, 16, 4, 512, 16, 4, 512
R = T * K


def test_sparse_layer_by_hand():
    """Layer 1 under full fine-tuning. Attention: input_layernorm (fp32 upcast, rsqrt, fp32 product) and its 16-bit
    output; qk_norm over q and k and o_norm over FA2's output (the fp32 upcast, 8 bytes a head and token); FA2's q,
    k, v, output, logsumexp; o_norm's output, the gate's sigmoid and the gated product; post_attention_layernorm
    (weightless) and the residual gate's two factors. MoE: pre_feedforward_layernorm and its output; the router's
    fp32 input copy, sigmoid, top-k, gathered weights, sums; pre_expert_norm over 512; per routed row the gathered
    row, gate_up's output, SiLU, the product, post_expert_norm's x.float(), its rounded fp32 copy, rsqrt and output,
    28 bytes of weight and indices; post_expert_proj's (t, 512) input; post_feedforward_layernorm (two fp32 copies,
    rsqrt) and the second residual gate's factors."""
    attn = (4 * T * H + 4 * T + 4 * T * H + 2 * T * H + 4 * T * Q + 8 * T * A + 4 * T * KV + 8 * T * KH
            + 2 * T * Q + 2 * 2 * T * KV + 2 * T * Q + 4 * A * T + 4 * T * Q + 8 * T * A + 3 * 2 * T * Q
            + 4 * T * H + 8 * T + 2 * T * H + 2 * T * H)
    moe = (4 * T * H + 4 * T + 4 * T * H + 2 * T * H + 4 * T * H + 4 * T * E + 8 * R + 4 * R + 4 * T
           + 4 * T * M + 4 * T + 4 * T * M + 2 * R * M + 2 * R * 2 * IE + 2 * R * IE + 2 * R * IE
           + 4 * R * M + 4 * R * M + 4 * R + 2 * R * M + 28 * R + 2 * T * M
           + 4 * T * H + 4 * T * H + 4 * T + 2 * T * H + 2 * T * H)
    arch = model_from_config(dict(plans("muse_spark"))["muse-spark-2l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=False)
    assert attn + moe == 57_464_832
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[1], ()) == 57_464_832


HELD = TRACE["cases"]


@pytest.mark.parametrize("case", HELD, ids=[c["id"] for c in HELD])
def test_muse_spark_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
