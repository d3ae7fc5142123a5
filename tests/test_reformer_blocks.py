"""What Reformer keeps at forward end and what is live where its step peaks, the backward's recompute of its
reversible layers (memory/blocks_reformer.py), held to a trace.

The traced model (tools/memtrace/own_attention_trace.py reformer, tests/data/reformer_trace.json): ReformerConfig's
default (google/reformer-crime-and-punishment's layout: h 256, 12 heads of 64, local / lsh x 3, chunks of 64, axial
positions 64 x 64, so training needs exactly 4096 tokens; dropout 0.05; vocabulary 320), ReformerModelWithLMHead.
Rows: full fp32, full bf16-mixed at b 1 and 2; and four other layouts for the recompute: local layers only (chunks of
128), lsh / local / lsh / local (LSH chunks of 128, local of 32) at b 2 bf16-mixed and with 2 hashes in fp32,
local / lsh (the LSH layer on top, chunks of 256), a feed-forward of 8192 with 2 heads (its recompute the peak),
whole in fp32 and in chunks of 512 (chunk_size_feed_forward) in bf16-mixed, and dropout only in the LSH
attention's probabilities. No bf16-pure rows (AxialPositionEmbeddings' fp32 weights turn the
stream fp32 and the first LayerNorm / Linear with 16-bit weights fails), no LoRA rows (the reversible function's
only input, the frozen embeddings' output, needs no gradient: "element 0 of tensors does not require grad"), no
checkpointing (ReformerPreTrainedModel does not support it; the reversible layers recompute anyway). Before the
forward-end rule (the classic block of memory/blocks.py with eager s² attention) saved activations were +387 x
(fp32), +345 x (mixed) the trace's; before the recompute moment the peak was -68 to -77 % (activations at the peak
-91 to -93 %).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown
from zerocalc import Plan
from zerocalc.memory.blocks_reformer import reversible_backward_moment
from zerocalc.memory.inputs import step_inputs

TRACE = json.loads((Path(__file__).parent / "data" / "reformer_trace.json").read_text())
T, H, A, D, V = 4096, 256, 12, 64, 320


def _engine(plan: dict) -> int:
    """The engine's saved, head and autocast-copy activations at forward end."""
    return step_inputs(Plan.from_dict(plan)).acts.saved_total


def test_forward_end_by_hand():
    """The fp32 row: the layers keep nothing; _ReversibleFunction the two fp32 halves (2 x 4·t·h) and the 3 LSH
    layers' int64 buckets (3 x 8 x 12 heads x 4096); encoder.layer_norm its fp32 (t, 2h) input and mean/rstd
    (8·t), the dropout after it its mask (t·2h) and output (lm_head.decoder's input, 4·t·2h), the embeddings'
    dropout its mask (t·h); the ids and labels (16·t). 29,589,504 bytes, the trace's less its log-softmax."""
    plan = TRACE["cases"][0]["plan"]
    assert plan["precision"] == "fp32"
    by_hand = 2 * 4 * T * H + 3 * 8 * A * T + 4 * T * 2 * H + 8 * T + T * 2 * H + 4 * T * 2 * H + T * H + 16 * T
    assert by_hand == 29_589_504 == _engine(plan)


def test_recompute_moment_by_hand():
    """The default config's peak: layer 3's LSH attention (chunks of c = 64 queries over w = 128 keys, 1 hash)
    recomputed inside its own backward, at logsumexp's backward. E = 12·4096·64 = 3,145,728 (one head-split
    tensor), L = 12·4096·128 = 6,291,456 (the chunks' scores), r = 12·4096, all fp32:
    - its saved set: query_key's and value's repeat (2E), the sorted query_key (E), the look-adjacent keys and
      values (2 x 2E), the merged output (E): 32·E; scores and probabilities 8·L, causal and self masks 2·L (bool),
      the sorted indices and their remainder 16·r (int64), rsqrt and logsumexp 8·r;
    - in flight: the values' gradient (2E), exp's backward and logsumexp's sub / exp / product (4L): 8·E + 16·L,
      and the sum of its result's gradient 4·r;
    - the streams: the previous layer's output (4 x 4·t·h), this layer's X_2 and grad_attn_output (2 x 4·t·h),
      the final LayerNorm's input gradient 8·t·h; the attention's LayerNorm output 4·t·h and mean / rstd 8·t, its
      output (the dropout's) 4·t·h and mask t·h;
    - forward's leftovers: the two halves 8·t·h, the buckets 3 x 8·r, the embeddings' dropout mask t·h, ids 8·t.
    344,457,216 bytes, the trace's activations and temporaries at the peak less 264 bytes of scalars."""
    plan = TRACE["cases"][0]["plan"]
    e, big, r, t = A * T * D, A * T * 128, A * T, T
    attention = 32 * e + 8 * big + 2 * big + 16 * r + 8 * r + 8 * e + 16 * big + 4 * r
    streams = 16 * t * H + 8 * t * H + 8 * t * H + 4 * t * H + 8 * t + 4 * t * H + t * H
    leftovers = 8 * t * H + 3 * 8 * r + t * H + 8 * t
    by_hand = attention + streams + leftovers
    p = Plan.from_dict(plan)
    assert by_hand == 344_457_216 == reversible_backward_moment(p.arch, 1, T)
    c = TRACE["cases"][0]["peak"]["components"]
    assert c["activations"] + c["temporaries"] - by_hand == 264


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_saved_activations_at_forward_end_within_3_percent(case):
    """The trace's saved bytes at forward end, less the loss's fp32 log-softmax, against the engine's saved, head
    and autocast-copy activations (under autocast only lm_head's copy: the layers run under no_grad)."""
    plan = case["plan"]
    traced = case["saved_activations_forward_end"] - 4 * plan["seq_len"] * plan["micro_batch_size"] * V
    assert abs(_engine(plan) - traced) <= 0.03 * traced, (_engine(plan), traced)


# no row is left out: the recompute moment (memory/blocks_reformer.py reversible_backward_moment) closed all of them
GAPS: dict = {}


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_components_and_peak_within_3_percent(case):
    """Weights, gradients, optimizer states, activations (at the peak: the recompute), logits and the peak."""
    assert case["id"] not in GAPS
    rows = compare(case, engine_breakdown(case["plan"]))
    assert all(r["ok"] for r in rows), [(r["name"], round(r["rel"], 4)) for r in rows if not r["ok"]]
    assert case["peak_phase"] == "backward" and engine_breakdown(case["plan"])["peak_phase"] == "bwd_top"
