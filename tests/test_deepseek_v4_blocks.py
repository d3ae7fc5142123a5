"""DeepSeek-V4's hyper-connected layers (memory/blocks_hyper.py), held to a trace.

The traced model (tools/memtrace/moe_trace.py deepseek_v4, tests/data/deepseek_v4_trace.json): DeepSeek-V4-Flash's
layout at h = 1024, N = 4 hyper-connection streams (20 Sinkhorn iterations), 8 heads of d = 128 sharing one KV head
(r = 16 rope dims), q_lora_rank 256, o_groups 2 x o_lora_rank 256, 8 experts of I = 512, top-2, a shared expert of
512, and one layer of each attention kind: 0 sliding, 1 CSA (rate 4, an indexer of 4 heads of 64), 2 HCA (rate 128);
bf16, FA2, one sequence of t = 512 tokens. The per-layer sums below are the trace's saved tensors to the byte
(`python -m tools.memtrace PLAN --dump-saved`, grouped by layer: 80,593,952 / 84,052,000 / 81,123,632), less in
layer 1 what the CSA indexer saves (2,236,928 B): its graph ends in top-k indices, so those die at forward end
(the trace's forward-end activations are the dump's sum less that).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.moe_trace import plans
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "deepseek_v4_trace.json").read_text())
T, H, N, A, D, R = 512, 1024, 4, 8, 128, 16


def _saved(layer: int) -> int:
    arch = model_from_config(dict(plans("deepseek_v4"))["deepseek-v4-3l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=False)
    return layer_saved_bytes(arch, c, block_linears_per_layer(arch)[layer], ())


def norm(d: int, rows: int = T) -> int:
    """DeepseekV4RMSNorm (fp32 weight): the fp32 upcast, the rsqrt and the fp32 normalised tensor."""
    return 4 * rows * d + 4 * rows + 4 * rows * d


# one hyper connection: the fp32 copy of the (t, 4·1024) stream and its rsqrt, the normed fp32 F.linear input, the
# per-token fp32 mix (24 outputs, comb softmax 16, pre/post sigmoids and pre + eps 12, 39 Sinkhorn divisions of
# 16 + 4 = 780) = 832 floats, and the bf16 stream:
#   4*512*4096 + 4*512 + 4*512*4096 + 4*512*832 + 2*512*4096 = 22,677,504
HC = 4 * T * N * H + 4 * T + 4 * T * N * H + 4 * T * (24 + 16 + 12 + 39 * 20) + 2 * T * N * H
ATTENTION = (norm(H) + 2 * T * H                            # input_layernorm, its bf16 output (q_a_proj, kv_proj)
             + norm(256) + 2 * T * 256                      # q_a_norm, its output (q_b_proj)
             + 4 * T * A * D + 4 * T * A + 2 * T * A + 2 * T * A * D   # q_b_norm: fp32 q, rsqrt fp32 / bf16, q
             + norm(D)                                      # kv_norm
             + 6 * 2 * T * R                                # the rotations' cos / sin
             + 2 * T * A * D + 2 * T * A * D + 4 * A * T    # FA2: rotated q, output, logsumexp (KV below)
             + 2 * T * A * D + 2 * T * 512                  # o_a_proj's regrouped input, o_b_proj's input
             + 2 * T * H + 2 * T * (N + N * N))             # the residual mix: o_b_proj's output, post, comb
FFN = (norm(H) + 2 * T * H                                  # post_attention_layernorm, its output
       + 2 * 2 * T * 8 + 8 * T * 2 + 2 * T * 2 + 2 * T      # router: logits, sqrt, top-k, weights, their sum
       + 2 * 1024 * H + 2 * 1024 * 512                      # experts: gathered input, product (t·k = 1024 rows)
       + 2 * 1024 * 1024 + 3 * 2 * 1024 * 512               # gate_up output, both clamps, SiLU
       + 2 * 1024 * H + 2 * 1024 + 24 * 1024 + 4 * 8        # down output, weights, int64 indices, offsets
       + 6 * 2 * T * 512                                    # shared expert: gate, up, clamps, SiLU, product
       + 2 * T * H + 2 * T * (N + N * N))                   # the mix


def test_sliding_layer_by_hand():
    """Layer 0 (sliding_attention): the KV head over the 512 tokens, 2*512*128 = 131,072 B."""
    assert 2 * HC + ATTENTION + 2 * T * D + FFN == 80_593_952
    assert _saved(0) == 80_593_952


def test_compressed_sparse_layer_by_hand():
    """Layer 1 (CSA, rate 4: W = 128 windows, each of 2·4 overlapping slots): the KV head over 512 + 128 entries,
    the compressor's fp32 softmax, its bf16 copy and the zero-filled overlap tensor (b, W, 8, 128), kv_norm over 128
    entries, their rotation. The indexer's saved tensors (the dump's: its own compressor at 64 dims, the queries'
    rotation, the scorer's fp32 q (512, 4, 64), keys (128, 64) and scores (512, 4, 128)) die with its graph."""
    compressor = (4 + 2 + 2) * 128 * 8 * D + norm(D, 128) + 2 * 2 * 128 * R
    indexer = ((4 + 2 + 2) * 128 * 8 * 64 + norm(64, 128) + 2 * 2 * 128 * R + 2 * 2 * T * R
               + 4 * T * 4 * 64 + 4 * 128 * 64 + 4 * T * 4 * 128)
    assert compressor + indexer == 3_425_280
    assert 2 * HC + ATTENTION + 2 * (T + 128) * D + compressor + indexer + FFN == 84_052_000   # the dump
    assert _saved(1) == 84_052_000 - indexer == 81_815_072


def test_heavily_compressed_layer_by_hand():
    """Layer 2 (HCA, rate 128: 4 windows): kv_proj's output, the fp32 softmax and its bf16 copy (512, 128), kv_norm
    over 4 entries and their rotation; the KV head over 516 entries."""
    compressor = 2 * T * D + 4 * T * D + 2 * T * D + norm(D, 4) + 2 * 2 * 4 * R
    assert compressor == 528_656
    assert _saved(2) == 2 * HC + ATTENTION + 2 * (T + 4) * D + compressor + FFN == 81_123_632


def test_deepseek_v4_reads_its_kinds_and_says_traced():
    arch = model_from_config(dict(plans("deepseek_v4"))["deepseek-v4-3l-full-s512"]["model"])
    names = [{lin.name for lin in lins} for lins in block_linears_per_layer(arch)]
    assert "compressor.kv_proj" not in names[0] and "indexer.q_b_proj" in names[1]
    assert "compressor.kv_proj" in names[2] and "indexer.q_b_proj" not in names[2]
    assert arch.support == "exact"


def test_backward_moments_by_hand():
    """With checkpointing the peak is inside a recomputed layer (its input stream, 2*512*4*1024 = 4,194,304 B, is
    the checkpoint's, counted once). Full fine-tuning (the trace: a backward mul, the layer whole): the FFN
    residual mix's four bf16 stream gradients, 4*2*512*4*1024 = 16,777,216 B. LoRA on attention (the trace: five
    fp32 (512, 4096) temporaries and a bf16 stream gradient at ffn_hc's norm backward): the attention half and
    ffn_hc's fp32 copy and rsqrt alive, 5*4*512*4096 + 2*512*4096 = 46,137,344 B of temporaries."""
    from zerocalc.memory.activations import activations
    from zerocalc.memory.blocks_hyper import mix_backward_temps
    from zerocalc.memory.precision import dtypes_for
    from zerocalc.plan import parse_plan
    rows = dict(plans("deepseek_v4"))
    arch = model_from_config(rows["deepseek-v4-3l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=False)
    assert mix_backward_temps(arch, c) == 4 * 2 * T * N * H == 16_777_216
    full = parse_plan(rows["deepseek-v4-3l-full-s512-ckpt"])
    acts = activations(full, arch, dtypes_for(full))
    assert acts.stack_saved == 3 * 2 * T * N * H                       # three (b, s, 4, h) bf16 checkpoint inputs
    # the largest layer (CSA) less its checkpointed stream, and the mix's gradients
    assert acts.recompute_layer == 81_815_072 - 2 * T * N * H + 16_777_216


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_deepseek_v4_step_within_3_percent_of_the_trace(case):
    """tools/memtrace/moe_trace.py deepseek_v4 on fake tensors: every component at the peak and the peak within 3 %.
    Costed as a classic block before (memory/blocks_hyper.py did not exist): activations -90 % (full, s 512).
    With checkpointing the peak is in a recomputed layer's backward (test_backward_moments_by_hand); before those
    moments and before the checkpointed stream was read as the recompute's own, LoRA + checkpointing was -71.6 %.
    bf16-mixed (fp32 stream, autocast copies, fp32 grouped_mm experts): -4.2 % with the 16-bit rules alone."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
