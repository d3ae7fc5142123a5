"""BLT's byte-level stacks and global layers (memory/blocks_blt.py), held to a trace.

The traced model (tools/memtrace/own_attention_trace.py blt, tests/data/blt_trace.json): BltConfig's default made
small (a 1-layer local encoder of h 256, a 2-layer global transformer of h 512 with 4 heads of 128, a 2-layer local
decoder of h 256 with a cross-attention in each layer, the patcher 1 layer of h 128, 1000 rows per hash group),
BltForCausalLM at 512 bytes with SDPA (no FlashAttention in BltPreTrainedModel), the frozen patcher replaced by
patches of patch_size = 4 bytes (entropy patching needs the data: blt_fixed_patches). Rows: full bf16 with and
without checkpointing, full bf16-mixed. No LoRA rows: PEFT's enable_input_require_grads makes
local_encoder.embed_tokens' output a leaf that requires grad, and compute_hash_embeddings adds into it in place
("a leaf Variable that requires grad is being used in an in-place operation"). Before this rule (the global layers
as Llama blocks over every byte, nothing else) saved activations were -22.3 % (full), -89.6 % (checkpointed), -11.8 %
(mixed) of the trace; after, -0.2 %, -0.6 %, +0.6 %.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown
from tools.memtrace.own_attention_trace import plans
from zerocalc import Plan, estimate
from zerocalc.memory.blocks import Ctx, SavedSet
from zerocalc.memory.blocks_blt import _cross, _local
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "blt_trace.json").read_text())
S, V = 512, 260


def test_cross_attention_by_hand():
    """The local decoder's first BltCrossAttention in the full bf16 row, 512 byte queries over P·k = 128 x 2 patch
    states at h 256 (4 heads of 64): q_norm's fp32 upcast, normalised tensor and output (4 + 2 + 2) x 512 x 256
    and rsqrt 4 x 512; k_norm's the same over 256 positions; q, k, v (2 x 256 each over their positions), SDPA's
    output and fp32 logsumexp (4 heads x 512): 2,370,560 bytes, the trace's local_decoder.cross_attn_layers.0."""
    arch = model_from_config(dict(plans("blt"))["blt-2l-full-s512"]["model"])
    dec, _ = _local(arch, "decoder")
    c = Ctx(tokens=S, seq=S, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="sdpa", first_layer=False)
    ss = SavedSet()
    _cross(ss, c, dec, "x", ("q_in", 2, S), ("kv_in", 2, 256))
    h, pk = 256, 256
    by_hand = 8 * S * h + 4 * S + 8 * pk * h + 4 * pk + 2 * S * h + 2 * 2 * pk * h + 2 * S * h + 4 * 4 * S
    assert ss.total == by_hand == 2_370_560


def test_the_global_layers_run_over_the_patches():
    """Each global layer's saved set is the Llama layer's over s / patch_size = 128 patch positions."""
    plan = dict(plans("blt"))["blt-2l-full-s512"]
    arch = model_from_config(plan["model"])
    assert arch.own["patch_size"] == 4 and arch.own["hash_lookups"] == 6
    assert arch.own["decoder"] == {"dims": (256, 4, 4, 64, 512), "layers": 2, "cross_layers": 2}
    assert arch.own["encoder"]["cross_layers"] == 1
    assert all(name.startswith("model.patcher.") for name in arch.config_frozen) and arch.config_frozen


def _saved(case) -> tuple[int, int]:
    plan = case["plan"]
    traced = case["saved_activations_forward_end"] - 4 * plan["seq_len"] * plan["micro_batch_size"] * V
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    return (detail.get("saved_activations", 0) + detail.get("head_activations", 0)
            + detail.get("autocast_weight_copies", 0)), traced


# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_saved_activations_at_forward_end_within_3_percent(case):
    """The trace's saved bytes at forward end, less the loss's fp32 log-softmax, against the engine's saved, head
    and autocast-copy activations (GAPS pinned)."""
    engine, traced = _saved(case)
    if case["id"] in GAPS:
        assert round((engine - traced) / traced, 3) == GAPS[case["id"]]
        return
    assert abs(engine - traced) <= 0.03 * traced, (engine, traced)


# the moments the engine does not have: the full bf16 row peaks inside the forward (the trace's mul), the engine
# at the loss's backward, its activation component there -6.7 % of the trace's; the checkpointed row peaks in the
# recompute of a local layer over the s bytes, the engine's recomputed layer is a global one over the P patches
# (activations -35.7 %, peak -4.1 %)
MOMENTS = {"blt-2l-full-s512": (-0.067, None), "blt-2l-full-s512-ckpt": (-0.357, -0.041)}


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_blt_step_against_the_trace(case):
    """Weights and gradients within 3 %, the peak and activations at the peak within 3 % or pinned (MOMENTS)."""
    rows = {r["name"]: r for r in compare(case, engine_breakdown(case["plan"]))}
    for name in ("weights", "gradients"):
        assert rows[name]["ok"], name
    acts, peak = MOMENTS.get(case["id"], (None, None))
    assert rows["activations"]["ok"] if acts is None else round(rows["activations"]["rel"], 3) == acts
    assert rows["peak"]["ok"] if peak is None else round(rows["peak"]["rel"], 3) == peak
