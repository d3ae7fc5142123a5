"""BigBird's block_sparse attention and gelu_new (memory/blocks_big_bird.py), held to a trace.

The traced model (tools/memtrace/own_attention_trace.py big_bird, tests/data/big_bird_trace.json): BigBirdConfig's
default (attention_type block_sparse, block_size 64, 3 random blocks, gelu_new, dropout 0.1) at h 256, 4 heads of
64, I 1024, 2 layers, the vocabulary cut to 8192, BigBirdForCausalLM at 1024 tokens (block_sparse runs above
(5 + 2·3)·64 = 704): full bf16 with and without checkpointing, LoRA on query / value bf16-mixed with and without,
full bf16-mixed; two sequences of 2048 (the batch dims no longer fold: more copies); 512 tokens, where
BigBirdModel.forward runs original_full; is_decoder at 1024 tokens (no cache is passed in training, so
block_sparse runs, bidirectionally, as without it: the same saved bytes). Before this rule (BigBird's original_full layer with F.gelu for every
length) saved activations were +9.9 % (full), -35.2 % (checkpointed), -10.7 % (LoRA), -40.3 % (LoRA
checkpointed), -10.0 % (mixed), +64.0 % (b 2, s 2048), -25.3 % (s 512: gelu_new) of the trace.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.own_attention_trace import plans
from zerocalc import Plan, estimate
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_bart import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "big_bird_trace.json").read_text())
T, H, I, A, D = 1024, 256, 1024, 4, 64
BS, R, M = 64, 3, 1024 // 64 - 4            # block size, random blocks, middle blocks


def _layer(seq: int = T, batch: int = 1, **over) -> int:
    arch = model_from_config({**dict(plans("big_bird"))["big-bird-2l-full-s1024"]["model"], **over})
    c = Ctx(tokens=seq * batch, seq=seq, batch=batch, e=2, res=2, autocast=False, train_base=True,
            adapter_bytes=2, dropout=0.0, attention="eager", first_layer=False)
    return layer_saved_bytes(arch, c, block_linears_per_layer(arch)[1], ())


def test_layer_by_hand():
    """Layer 1 of the full bf16 row at s 1024. Per token: the layer input q/k/v read, q, k, v, output.dense's
    input, the two residual sums LayerNorm keeps and attention.output.LayerNorm's output the MLP reads, 2 bytes
    each of h (8 x 2), the two dropout masks (2 x 1); gelu_new's four tensors and its output 5 x 2 of I; two
    LayerNorms' mean/rstd (16). The block-sparse attention per head of 64: the middle blocks' sliding keys and
    values (2·12·192 rows), the gathered random ones (2·12·3·64), the second / second-to-last blocks' keys and
    values (4·7·64), the two middle-query copies (2·12·64), 2 bytes x 64 wide; the softmaxes over 64 query rows:
    the middle band 12 x 8·64, the first / last 2 x 1024, the second / second-to-last 2 x 7·64, 2 bytes each;
    the int64 random block indices (4 heads x 14 x 3)."""
    dense = T * (18 * H + 10 * I + 16)
    blocks = 2 * A * D * (2 * M * 3 * BS + 2 * M * R * BS + 4 * (4 + R) * BS + 2 * M * BS)
    scores = 2 * A * BS * (M * (5 + R) * BS + 2 * T + 2 * (4 + R) * BS)
    by_hand = dense + blocks + scores + 8 * A * 14 * R
    assert (dense, blocks, scores) == (15_220_736, 6_422_528, 4_653_056)
    assert _layer() == by_hand == 26_297_664


def test_original_full_at_or_below_the_threshold():
    """At or below (5 + 2·3)·64 = 704 tokens BigBirdModel.forward switches to original_full (memory/blocks_bert.py's
    eager rule: the (b, a, s, s) softmax, dropout mask and output); above it the blocks, and with
    add_cross_attention never (BigBirdModel.__init__)."""
    full = {"attention_type": "original_full"}
    assert _layer(704) == _layer(704, **full)
    assert _layer(768) < _layer(768, **full)
    assert not model_from_config({**dict(plans("big_bird"))["big-bird-2l-full-s1024"]["model"], "is_decoder": True,
                                  "add_cross_attention": True}).own["block_sparse"]


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_saved_activations_at_forward_end_within_3_percent(case):
    """The trace's saved bytes at forward end, less the loss's fp32 log-softmax, against the engine's saved, head
    and autocast-copy activations."""
    plan = case["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    traced = case["saved_activations_forward_end"] - 4 * t * plan["model"]["vocab_size"]
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = detail["saved_activations"] + detail.get("head_activations", 0) + detail.get("autocast_weight_copies", 0)
    assert abs(engine - traced) <= 0.03 * traced, (engine, traced)


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_big_bird_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
