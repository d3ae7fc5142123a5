"""Ling 3's (bailing_hybrid) layers (memory/blocks_kimi_linear.py), held to a trace.

The traced model (tools/memtrace/kda_trace.py bailing_hybrid, tests/data/bailing_hybrid_trace.json): Ling 3's default
config at h = 1024, 3 layers: KDA with a dense SwiGLU of 2816, MLA (8 heads, qk 128 + 64, v 128, kv_lora_rank 512,
no q_lora, RoPE, the head-wise sigmoid output gate g_proj) with the MoE, KDA with the MoE (8 experts of 512 in one
group, top-2, one shared expert of 512); KDA of 8 heads of 128 with the full-rank forget gate f_proj, the safe gate
(`lower_bound * sigmoid(exp(A_log) * gate_input)`) and the full-rank output gate g_proj. causal-conv1d and fla's
chunk_kda stood in as for Kimi Linear (fla 0.5.2 ChunkKDAFunction). The trace's layer 0 saves 44,102,176 bytes in the
bf16 full row, the engine the same. Before (a classic block of the KDA linears) activations were -64.1 % (full),
-15.8 % (ckpt), -27.2 % (mixed), -46.2 % (LoRA), -2.4 % (LoRA ckpt), -44.4 % (LoRA mixed). The MLA layer's RoPE
keeps two (t, 64) bf16 cos / sin copies (131 kB) the engine leaves out.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.kda_trace import plans
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_moe import layer_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "bailing_hybrid_trace.json").read_text())
T, H, NH, D = 512, 1024, 8, 128
Q = NH * D


def norm(d: int) -> int:
    """BailingHybridRMSNorm (Llama's), trained bf16 weight: fp32 upcast, fp32 rsqrt, bf16 normalised, bf16 output."""
    return 4 * T * d + 4 * T + 2 * T * d + 2 * T * d


def test_kda_layer_by_hand():
    """Layer 0 (KDA, dense MLP), bf16 full fine-tuning, first layer.
    - input_layernorm (its output is q/k/v/f/b/g_proj's input); the cat q/k/v (causal-conv1d's x);
    - safe forget gate: exp(A_log) (fp32, 8), the fp32 gate_input (A_log trains), sigmoid's fp32 output;
    - beta (bf16, t x 8);
    - chunk_kda: l2-normed q, k (bf16), 2 fp32 rstd per head and token, v's contiguous copy, fp32 g_cumsum, the bf16
      g (`gate.to(hidden_states.dtype)`), Aqk and Akk (bf16, 64 per head and token);
    - o_norm: fp32 copy, rsqrt per head and token, fp32 normalised tensor, fp32 weight copy (128), weight product,
      fp32 sigmoid of g_proj's gate; o_proj's bf16 input;
    - post_attention_layernorm and the SwiGLU of 2816 (gate, up, SiLU, product)."""
    kda = (norm(H) + 2 * T * 3 * Q
           + 4 * NH + 4 * T * Q + 4 * T * Q
           + 2 * T * NH
           + 2 * T * Q * 2 + 2 * 4 * T * NH + 2 * T * Q + 4 * T * Q + 2 * T * Q + 2 * 2 * T * NH * 64
           + 4 * T * Q + 4 * T * NH + 4 * T * Q + 4 * D + 4 * T * Q + 4 * T * Q + 2 * T * Q)
    mlp = norm(H) + 4 * 2 * T * 2816
    arch = model_from_config(dict(plans("bailing_hybrid"))["bailing-hybrid-3l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=True)
    assert kda + mlp == 44_102_176
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[0], ()) == 44_102_176


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_bailing_hybrid_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 % (activations within 0.2 %)."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
