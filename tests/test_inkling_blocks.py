"""Inkling's layers (memory/blocks_inkling.py inkling_layer), held to a trace.

The traced model (tools/memtrace/inkling_trace.py, tests/data/inkling_trace.json): Inkling's text model at h = 1024,
3 layers (sliding dense, sliding sparse, full sparse; 8 heads of 128, 4 KV heads in the sliding layers and 2 in the
full one; window 128, rel_extent 256, d_rel 16; dense MLP 2048; 8 routed experts of 512, top-2, one shared
expert), bf16, eager attention (no FlashAttention path: the relative-logits bias), t = 512. The trace's layers save
49,180,672 / 52,993,056 / 52,202,528 bytes under full fine-tuning (`python -m tools.memtrace PLAN --dump-saved`),
the engine the same, byte for byte. One SDPA row (HF's sdpa with the bias as a float mask: CPU SDPA's math
kernel) is held to the same eager rule.

Inkling 2 (memory/blocks_inkling2.py; tests/data/inkling2_trace.json): its text model at h = 1024, 3 layers
(sliding without attention_input, sliding, full with three input queries and dynamic convs; 8 heads of 128, 2 KV
heads, window 128, rel_extent 256; a residual block every 2 layers; 8 experts of 512, top-2), eager (its only
attention), t = 512: 73,513,504 / 81,910,304 / 104,999,456 bytes under full fine-tuning, the engine the same.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.inkling_trace import plans
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "inkling_trace.json").read_text())
T, H, A, D = 512, 1024, 8, 128


def norm(d: int, groups: int = 1) -> int:
    """InklingRMSNorm (Llama's) under full fine-tuning: fp32 upcast, rsqrt per group, the 16-bit normalised tensor."""
    return 4 * T * d + 4 * T * groups + 2 * T * d


def attention(kv_heads: int, extent: int) -> int:
    """The attention sublayer of a layer with kv_heads KV heads and this rel_extent: input_layernorm; its output
    (read by q/k/v/r_proj); the k/v convs' fp32 inputs (4·t·kv·d each); q_norm and k_norm per head; relative
    logits: relative_states (2·t·a·16), the rel logits gather keeps (2·t·a·extent), its int64 (1, 1, s, s) index
    and bool mask; eager: q (q_norm's output), repeated K and V, fp32 softmax and bf16 probs (6·a·s²), o_proj's
    contiguous input; attn_sconv's fp32 input."""
    kvd = kv_heads * D
    return (norm(H) + 2 * T * H + 2 * 4 * T * kvd + norm(A * D, A) + norm(kvd, kv_heads)
            + 2 * T * A * 16 + 2 * T * A * extent + 8 * T * T + T * T
            + 2 * T * A * D * 3 + 6 * A * T * T + 2 * T * A * D + 4 * T * H)


# post_attention_layernorm + its output, then the MLP, then mlp_sconv's fp32 input
DENSE = norm(H) + 2 * T * H + 4 * 2 * T * 2048 + 2 * T * H + 4 * T * H
# the router (fp32 input and (9, 1024) weight copies, sigmoid and logits (t, 9), int64 top-2, cat / logsigmoid out
# and buffer / exp over 3 and `* global_scale`'s input, logsumexp, the bf16 gammas); the routed experts over 1,024
# rows (three int64 indices, the int32 offsets, gathered rows, gate_up, SiLU, product, weights, down); the shared
# expert (gate, up, SiLU, act*up, *gammas)
SPARSE = (norm(H) + 2 * T * H
          + 4 * T * H + 4 * 9 * H + 2 * 4 * T * 9 + 8 * T * 2 + 4 * 4 * T * 3 + 4 * T + 4 * T * 3 + 2 * T
          + 24 * 1024 + 4 * 8 + 2 * 1024 * (H + 2 * 512 + 512 + 512 + 1 + H)
          + 5 * 2 * T * 512 + 4 * T * H)


def test_layers_by_hand():
    """Full fine-tuning, bf16, eager: each traced layer's saved bytes, written out."""
    arch = model_from_config(dict(plans())["inkling-text-3l-full-s512-eager"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="eager", first_layer=False)
    expect = (attention(4, 128) + DENSE, attention(4, 128) + SPARSE, attention(2, 256) + SPARSE)
    assert expect == (49_180_672, 52_993_056, 52_202_528)
    lins = block_linears_per_layer(arch)
    assert tuple(layer_saved_bytes(arch, c, lins[i], ()) for i in range(3)) == expect


GAPS = ("inkling-text-3l-full-mixed-s512-eager",)
HELD = [c for c in TRACE["cases"] if c["id"] not in GAPS]


@pytest.mark.parametrize("case", HELD, ids=[c["id"] for c in HELD])
def test_inkling_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %. Before memory/blocks_inkling.py (a classic block of
    the attention's and the experts' linears) the layers were costed without the s² softmax, the (1, 1, s, s)
    int64 gather index or the fp32 short-conv inputs."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)


def _rows(cid: str) -> dict:
    case = next(c for c in TRACE["cases"] if c["id"] == cid)
    return {r["name"]: r for r in compare(case, engine_breakdown(case["plan"]))}


def test_lora_with_checkpointing_peaks_in_the_recompute_forward():
    """LoRA on the attention with checkpointing peaks inside the top layer's recompute forward, at the shared
    experts' `down.float().sum(0)` (memory/recompute_locals.py): the locals alive there and mlp_sconv's two fp32
    gradients made before the recompute started, beside the recomputed saved set. Before that moment activations
    were -17.7 % and the peak -6.9 %; now -1.2 % and -0.5 %."""
    rows = _rows("inkling-text-3l-lora-attn-s512-eager-ckpt")
    t, h, s_i = T, H, 512
    locals_ = 4 * 2 * t * h + 2 * t * s_i + 4 * t * h + 4 * t * h - 4 * t * h     # 4 bf16 (t, h), `* gammas`, fp32s
    grads = 4 * t * h + 4 * h * (t + 4 - 1)                                         # to() and slice_backward
    assert locals_ + grads == 6_815_744 + 4_206_592
    assert rows["activations"]["ok"] and rows["peak"]["ok"]


def test_bf16_mixed_logits_are_a_known_gap():
    """bf16-mixed peaks in the forward's nll_loss, where fewer of the (narrow, 3000-wide) logits tensors are alive
    than at the engine's loss-backward moment: logits +20 % (3 MB), activations and the peak within 3 %. Not a
    missing term but a near-tie of two moments: the trace's backward-phase peak (_log_softmax_backward_data) is
    1.1 MB (0.1 %) below its forward one, and there its logits are the engine's to the byte (18,432,000 B); the
    forward moment has 4.2 MB more activations and 3 MB fewer logits. Pinned so that a change shows."""
    rows = _rows("inkling-text-3l-full-mixed-s512-eager")
    assert 0.18 < rows["logits"]["rel"] < 0.22
    assert rows["activations"]["ok"] and rows["peak"]["ok"]
    case = next(c for c in TRACE["cases"] if c["id"] == "inkling-text-3l-full-mixed-s512-eager")
    bwd = case["phase_peaks"]["backward"]
    assert bwd["components"]["logits"] == engine_breakdown(case["plan"])["components"]["logits"] == 18_432_000
    assert 0 < case["peak_bytes"] - bwd["bytes"] < 1_200_000


# --- Inkling 2 (memory/blocks_inkling2.py) -----------------------------------------------------------------------
TRACE2 = json.loads((Path(__file__).parent / "data" / "inkling2_trace.json").read_text())
K, DR, E, ROWS, I2 = 2 * D, 16, 8, 2 * T, 512     # 2 KV heads; d_rel; experts; routed rows (top-2); expert width


def block_residual(states: int, queries: int = 1) -> int:
    """Inkling2BlockAttentionResidual: the fp32 stack, rsqrt, the fp32 normed stack, the softmax; its output."""
    return 4 * T * states * H + 4 * T * states + 4 * T * states * H + 4 * T * queries * states + 4 * T * queries * H


def test_inkling2_sliding_layer_by_hand():
    """Layer 1 of the traced Inkling 2 (sliding, attention_input over 2 states), full fine-tuning, bf16: 81,910,304
    bytes in the trace. attention_input; input_layernorm over its fp32 output (rsqrt, fp32 product) and the bf16
    cast the projections read; q's ScaledL2Clip (fp32 upcast, the scale's fp32 copy, the product, four (t, a)
    tensors); the static convs' fp32 inputs; k's L2Clip and v's UnweightedRMSNorm; the bias's ScaledL2Clip, its
    bf16 states, the rel logits (extent 128), the int64 (s, s) index and bool mask; q, repeated K and V, the fp32
    softmax over s + 1 (the sink), bf16 probs; the output gate's fp32 sigmoid and fp32 attention copy, their bf16
    product; the conv's fp32 input; mlp_input; post_attention_layernorm; the fp32 router (input copy, scores,
    top-2, weights and their sum); the experts (indices, gathered rows, six fp32 SwiGLU tensors, down's bf16 input,
    fp32 weights, down's output); the last conv's fp32 input."""
    attn = (block_residual(2) + 4 * T + 4 * T * H + 2 * T * H
            + 4 * T * H + 4 * H + 4 * T * H + 16 * T * A
            + 2 * 4 * T * K + 4 * T * K + 16 * T * 2 + 4 * T * K + 4 * T * 2
            + 4 * T * A * DR + 4 * A * DR + 4 * T * A * DR + 16 * T * A + 2 * T * A * DR + 2 * T * A * 128
            + 8 * T * T + T * T
            + 3 * 2 * T * H + 4 * A * T * (T + 1) + 2 * A * T * T
            + 4 * T * H + 4 * T * H + 2 * T * H + 4 * T * H)
    mlp = (block_residual(2) + 4 * T + 4 * T * H
           + 4 * T * H + 4 * T * E + 8 * T * 2 + 4 * T * 2 + 4 * T
           + 24 * ROWS + 4 * E + 2 * ROWS * H + 2 * ROWS * I2 + 24 * ROWS * I2 + 4 * ROWS + 2 * ROWS * H + 4 * T * H)
    assert attn + mlp == 81_910_304
    arch = model_from_config(dict(plans("inkling2_text"))["inkling2-text-3l-full-s512-eager"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="eager", first_layer=False)
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[1], ()) == attn + mlp


HELD2 = TRACE2["cases"]


@pytest.mark.parametrize("case", HELD2, ids=[c["id"] for c in HELD2])
def test_inkling2_step_within_3_percent_of_the_trace(case):
    """Full fine-tuning, LoRA on the attention and bf16-mixed: every component and the peak within 3 % (the layers
    match the trace byte for byte: 73,513,504 / 81,910,304 / 104,999,456 under full fine-tuning). bf16-mixed:
    the block residuals' matmuls, the static convs and the router's F.linear run in bf16 under autocast and keep
    bf16 copies; the grouped_mm experts run in fp32 over the fp32 weights (before that rule: activations -4.0 %).
    With full checkpointing: see test_inkling2_checkpointing_peaks_in_the_recompute."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)


def _rows2(cid: str) -> dict:
    case = next(c for c in TRACE2["cases"] if c["id"] == cid)
    return {r["name"]: r for r in compare(case, engine_breakdown(case["plan"]))}


def test_inkling2_checkpointing_peaks_in_the_recompute():
    """With full checkpointing both rows peak inside the top layer's recompute, at the experts' un-permute
    (`weighted_out[inv_perm]`, memory/recompute_locals.py): the gradients final_input's backward has made for the
    three final block states and post_mlp_convolution's, the forward's live locals (the fp32 residual, the new
    block_states, the fp32 routing-weighted rows and their copy) and, as checkpoint inputs, both (s, s) int64
    relative_distance tensors (memory/ckpt_inputs.py). Before: activations -10.4 % (full) and -20.8 % (LoRA), the
    peak -2.6 % and -10.9 %; now -0.6 % each (test_inkling2_step_within_3_percent_of_the_trace holds them)."""
    grads = 2 * T * 3 * H - 2 * T * H + 2 * 4 * T * H + 4 * H * (T + 3)
    lora_locals = 4 * T * H + 2 * T * 2 * H + 2 * T * H + 4 * T * E + 2 * ROWS * H + 2 * 4 * ROWS * H
    assert grads == 8_400_896 and lora_locals == 15_745_024            # the trace's, less sort's 8 KiB index
    assert lora_locals - 2 * ROWS * H == 13_647_872                   # full: the gathered rows are saved


# --- Inkling 2 Loop (memory/blocks_inkling2.py, the loop layers' message gates) ------------------------------------
TRACE3 = json.loads((Path(__file__).parent / "data" / "inkling2_loop_trace.json").read_text())


def _rows3(cid: str) -> dict:
    case = next(c for c in TRACE3["cases"] if c["id"] == cid)
    return {r["name"]: r for r in compare(case, engine_breakdown(case["plan"]))}


def test_inkling2_loop_calls():
    """The traced Inkling 2 Loop (4 layers, layers 1-2 looped twice, a residual block per layer) runs six layer
    calls, each costed with its own block-state counts; the second pass reads two message states and carries the
    four message gates' linears; PEFT wraps the four blocks once (memory/lora.py LOOPED)."""
    arch = model_from_config(dict(plans("inkling2_loop_text"))["inkling2-loop-text-4l-full-s512-eager"]["model"])
    lay = arch.inkling2["layers"]
    assert arch.num_layers == 6 and arch.inkling2["final_states"] == 5
    assert [x["attn_states"] for x in lay] == [1, 2, 3, 2, 3, 4]
    assert [x["message_states"] for x in lay] == [0, 0, 0, 2, 2, 0]
    assert [len(lins) for lins in block_linears_per_layer(arch)] == [9, 9, 11, 21, 23, 9]


@pytest.mark.parametrize("cid", ["inkling2-loop-text-4l-full-s512-eager", "inkling2-loop-text-4l-lora-attn-s512-eager"])
def test_inkling2_loop_saved_set_at_forward_end(cid):
    """What the forward leaves saved: the engine's layers and head within 2 % of the trace's saved activations at
    forward end (which also hold the 12 MB of fp32 softcapped logits and log-softmax the engine books as logits).
    The per-module sums of the trace (`--dump-saved`, message_input's stacks moved into the calls that read them)
    are 73,513,504 / 231,482,432 / 277,673,024 / 102,902,304 bytes for layers 0-3, the engine's calls within 15 KB."""
    case = next(c for c in TRACE3["cases"] if c["id"] == cid)
    d = engine_breakdown(case["plan"])["detail"]
    eng = d["saved_activations"] + d["head_activations"]
    assert -0.02 < eng / case["saved_activations_forward_end"] - 1 < 0


def test_inkling2_loop_peaks_are_known_gaps():
    """The loop layers are the model's largest, so every row peaks inside a layer's backward (a `mul`, with about
    49 MB of backward temporaries) or, with checkpointing, in a recompute, not at the loss where the engine puts
    the peak: activations at the peak -4.8 % (full), -5.6 % (LoRA), -28.6 % for LoRA with checkpointing (the
    recompute's live locals, as for Inkling 2); bf16-mixed peaks in the forward (a bmm), before any logits:
    activations -1.5 %, the logits the engine adds at its loss moment are not there (the peak +0.6 %). Pinned."""


def test_inkling2_loop_full_checkpointing_within_3_percent():
    """Full fine-tuning with full checkpointing: the checkpoint keeps every call's inputs, the block-state stacks of
    each pass and the later passes' messages with message_input's saved set (memory/blocks_inkling2.py
    checkpointed_block_states; without the messages activations were -15.3 %): every component within 3 %."""
    case = next(c for c in TRACE3["cases"] if c["id"] == "inkling2-loop-text-4l-full-s512-eager-ckpt")
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
    bounds = {"inkling2-loop-text-4l-full-s512-eager": (-0.06, -0.04),
              "inkling2-loop-text-4l-lora-attn-s512-eager": (-0.07, -0.045),
              "inkling2-loop-text-4l-full-mixed-s512-eager": (-0.03, -0.005),
              # -28.6 -> -26.6 % with the relative_distance checkpoint inputs (memory/ckpt_inputs.py)
              "inkling2-loop-text-4l-lora-attn-s512-eager-ckpt": (-0.28, -0.25)}
    for cid, (lo, hi) in bounds.items():
        rows = _rows3(cid)
        assert lo < rows["activations"]["rel"] < hi, (cid, rows["activations"]["rel"])
