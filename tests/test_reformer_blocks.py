"""What Reformer keeps at forward end (memory/blocks_reformer.py), held to a trace; the backward's recompute not.

The traced model (tools/memtrace/own_attention_trace.py reformer, tests/data/reformer_trace.json): ReformerConfig's
default (google/reformer-crime-and-punishment's layout: h 256, 12 heads of 64, local / lsh x 3, chunks of 64, axial
positions 64 x 64, so training needs exactly 4096 tokens; dropout 0.05; vocabulary 320), ReformerModelWithLMHead.
Rows: full fp32, full bf16-mixed at b 1 and 2. No bf16-pure rows (AxialPositionEmbeddings' fp32 weights turn the
stream fp32 and the first LayerNorm / Linear with 16-bit weights fails), no LoRA rows (the reversible function's
only input, the frozen embeddings' output, needs no gradient: "element 0 of tensors does not require grad"), no
checkpointing (ReformerPreTrainedModel does not support it; the reversible layers recompute anyway). Before this
rule (the classic block of memory/blocks.py with eager s² attention) saved activations were +387 x (fp32), +345 x
(mixed) the trace's.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown
from zerocalc import Plan, estimate

TRACE = json.loads((Path(__file__).parent / "data" / "reformer_trace.json").read_text())
T, H, A, V = 4096, 256, 12, 320


def _engine(plan: dict) -> int:
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    return (detail.get("saved_activations", 0) + detail.get("head_activations", 0)
            + detail.get("autocast_weight_copies", 0))


def test_forward_end_by_hand():
    """The fp32 row: the layers keep nothing; _ReversibleFunction the two fp32 halves (2 x 4·t·h) and the 3 LSH
    layers' int64 buckets (3 x 8 x 12 heads x 4096); encoder.layer_norm its fp32 (t, 2h) input and mean/rstd
    (8·t), the dropout after it its mask (t·2h) and output (lm_head.decoder's input, 4·t·2h), the embeddings'
    dropout its mask (t·h); the ids and labels (16·t). 29,589,504 bytes, the trace's less its log-softmax."""
    plan = TRACE["cases"][0]["plan"]
    assert plan["precision"] == "fp32"
    by_hand = 2 * 4 * T * H + 3 * 8 * A * T + 4 * T * 2 * H + 8 * T + T * 2 * H + 4 * T * 2 * H + T * H + 16 * T
    assert by_hand == 29_589_504 == _engine(plan)


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_saved_activations_at_forward_end_within_3_percent(case):
    """The trace's saved bytes at forward end, less the loss's fp32 log-softmax, against the engine's saved, head
    and autocast-copy activations (under autocast only lm_head's copy: the layers run under no_grad)."""
    plan = case["plan"]
    traced = case["saved_activations_forward_end"] - 4 * plan["seq_len"] * plan["micro_batch_size"] * V
    assert abs(_engine(plan) - traced) <= 0.03 * traced, (_engine(plan), traced)


# The step peaks in the backward of layer 0 (local attention): ReformerLayer.backward_pass recomputes its
# attention with grad (outside autocast: fp32 whatever the precision) on top of every gradient, 329 MiB of
# activations per sequence there (its recomputed saved set, 186 MiB, and the gradients in flight through the
# chunked scores). The engine has no such moment without checkpointing: activations -91 to -93 %, peak -68 to -77 %.
GAPS = {"reformer-6l-full-fp32-s4096": (-0.914, -0.680), "reformer-6l-full-mixed-s4096": (-0.925, -0.689),
        "reformer-6l-full-mixed-s4096-b2": (-0.926, -0.773)}


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_the_backward_recompute_is_the_known_gap(case):
    """Weights, gradients and optimizer states within 3 %; activations and the peak pinned (GAPS)."""
    rows = {r["name"]: r for r in compare(case, engine_breakdown(case["plan"]))}
    for name in ("weights", "gradients", "optimizer_states"):
        assert rows[name]["ok"], name
    acts, peak = GAPS[case["id"]]
    assert round(rows["activations"]["rel"], 3) == acts
    assert round(rows["peak"]["rel"], 3) == peak
