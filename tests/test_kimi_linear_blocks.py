"""Kimi Linear's layers (memory/blocks_kimi_linear.py), held to a trace.

The traced model (tools/memtrace/kda_trace.py kimi_linear, tests/data/kimi_linear_trace.json): Kimi Linear's default
config at h = 1024, 3 layers: KDA with a dense SwiGLU of 2816, MLA (8 heads, qk 128 + 64, v 128, kv_lora_rank 512,
no q_lora) with the MoE, KDA with the MoE (8 experts of 512, top-2, one shared expert of 512, the fp32 sigmoid
router); KDA of 8 heads of 128, conv 4. causal-conv1d and fla's chunk_kda are stood in by autograd Functions that
keep what the GPU kernels keep (fla 0.5.2 ChunkKDAFunction). Rows: bf16 full (t = 512), full with checkpointing
(s 1024), bf16-mixed (b 2), LoRA on the attention projections with and without checkpointing, LoRA bf16-mixed.
The trace's layer 0 saves 48,034,368 bytes in the bf16 full row (`python -m tools.memtrace PLAN --dump-saved`, with
kda_trace.kda_kernels), the engine the same. Before this rule (a classic block of the KDA linears) activations were
-66.2 % (full), -14.3 % (ckpt), -28.7 % (mixed), -48.5 % (LoRA), -0.0 % (LoRA ckpt), -47.1 % (LoRA mixed).
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

TRACE = json.loads((Path(__file__).parent / "data" / "kimi_linear_trace.json").read_text())
T, H, NH, D = 512, 1024, 8, 128
Q = NH * D


def norm(d: int) -> int:
    """KimiLinearRMSNorm (Llama's) with a trained bf16 weight: fp32 upcast, fp32 rsqrt, the bf16 normalised tensor,
    its bf16 output (the next linears' input)."""
    return 4 * T * d + 4 * T + 2 * T * d + 2 * T * d


def test_kda_layer_by_hand():
    """Layer 0 (KDA, dense MLP), bf16 full fine-tuning, first layer.
    - input_layernorm; f_a's and g_a's (t, 128) outputs (f_b / g_b's inputs); the cat q/k/v (causal-conv1d's x);
    - forget gate: exp(g), 1 + exp(g), the g > 20 mask (bool), where's fp32 softplus (A_log trains), the two
      (1, 1, 8, 1) fp32 exp(A_log) / -exp(A_log);
    - beta (bf16, t x 8);
    - chunk_kda: l2-normed q, k (bf16), 2 fp32 rstd per head and token, v's contiguous copy, fp32 g_cumsum and g,
      Aqk and Akk (bf16, 64 per head and token);
    - o_norm: fp32 copy, rsqrt per head and token, fp32 normalised tensor, fp32 weight copy (128), weight product,
      fp32 sigmoid of the gate; o_proj's bf16 input;
    - post_attention_layernorm and the SwiGLU of 2816 (gate, up, SiLU, product)."""
    kda = (norm(H) + 2 * 2 * T * D + 2 * T * 3 * Q
           + 4 * T * Q + 4 * T * Q + T * Q + 4 * T * Q + 2 * 4 * NH
           + 2 * T * NH
           + 2 * T * Q * 2 + 2 * 4 * T * NH + 2 * T * Q + 4 * T * Q * 2 + 2 * 2 * T * NH * 64
           + 4 * T * Q + 4 * T * NH + 4 * T * Q + 4 * D + 4 * T * Q + 4 * T * Q + 2 * T * Q)
    mlp = norm(H) + 4 * 2 * T * 2816
    arch = model_from_config(dict(plans("kimi_linear"))["kimi-linear-3l-full-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2, dropout=0.0,
            attention="flash", first_layer=True)
    assert kda + mlp == 48_034_368
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[0], ()) == 48_034_368


def test_layers_are_of_their_own_kind():
    """KDA (b_proj), MLA (kv_a_proj_with_mqa) + MoE, KDA + MoE, as layer_types / mlp_layer_types say."""
    arch = model_from_config(TRACE["cases"][0]["plan"]["model"])
    names = [{lin.name for lin in lins} for lins in block_linears_per_layer(arch)]
    assert "b_proj" in names[0] and "gate_up_proj" not in names[0]
    assert "kv_a_proj_with_mqa" in names[1] and "gate_up_proj" in names[1]
    assert "b_proj" in names[2] and "gate_up_proj" in names[2]


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_kimi_linear_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 % (activations within 2.5 %)."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
