"""MoE blocks with a shared expert keep the routed experts' activations (memory/blocks.py llama_block).

The block's linears list both the routed experts' fused ``down_proj`` (count = E) and the shared expert's
``down_proj`` (count 1). Keyed by name alone the shared one hid the routed one, and the block was costed as a
dense MLP of the shared width: no router, no gathered tokens, no expert activations. The shapes below are those
transformers 5.24 builds for the default Qwen2-MoE config (tests/data/architectures.json default:qwen2_moe,
first block): gate (60, 2048); experts.gate_up_proj (60, 2816, 2048), down_proj (60, 2048, 1408); shared
expert 2048 -> 5632 -> 2048; and for DeepSeek-V3's default (256 experts of 2048, top-8, one shared expert).

The comparison is with a dense block of the shared expert's width (Qwen2, intermediate_size = 5632): both
blocks run the same attention, norms and a gated MLP of 5632 on the same input, so what the MoE block saves
on top is exactly the routed part of ``_moe`` (full fine-tuning in bf16, no autocast: e = 2 bytes):
  router probs (fp32)             4 * t * E
  gathered expert inputs          2 * t * k * h
  gate_up output                  2 * 2 * t * k * I_e
  activation, product             2 * t * k * I_e   (each)
  weighted expert outputs         2 * t * k * h
  top-k / sort indices, weights   40 * t * k + 4 * t
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from zerocalc.memory.blocks import Ctx, block_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}
T = 512   # tokens of the micro-batch (seq 512, batch 1)


def ctx() -> Ctx:
    return Ctx(tokens=T, seq=T, batch=1, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
               dropout=0.0, attention="flash", first_layer=False)


def saved(cfg: dict, layer: int) -> int:
    arch = model_from_config(cfg)
    return block_saved_bytes(arch, ctx(), block_linears_per_layer(arch)[layer], ())


def routed(e: int, k: int, h: int, ie: int) -> int:
    t = T
    return 4 * t * e + 2 * t * k * h + 2 * 2 * t * k * ie + 2 * (2 * t * k * ie) + 2 * t * k * h + 40 * t * k + 4 * t


def test_qwen2_moe_block_keeps_the_routed_experts():
    cfg = ROWS["default:qwen2_moe"]["config"]
    shapes = ROWS["default:qwen2_moe"]["first_block_tensors"]
    assert shapes["mlp.experts.down_proj"] == [60, 2048, 1408]
    assert shapes["mlp.shared_expert.down_proj.weight"] == [2048, 5632]
    dense = {**cfg, "model_type": "qwen2", "intermediate_size": 5632}
    # E = 60, k = 4, h = 2048, I_e = 1408: 4*512*60 + 2*512*4*2048 + 4*512*4*1408 + 2*2*512*4*1408
    #   + 2*512*4*2048 + 40*512*4 + 4*512 = 122,880 + 8,388,608 + 11,534,336 + 11,534,336 + 8,388,608
    #   + 81,920 + 2,048 = 40,052,736
    assert routed(60, 4, 2048, 1408) == 40_052_736
    assert saved(cfg, 0) - saved(dense, 0) == 40_052_736


def test_deepseek_v3_sparse_block_keeps_the_routed_experts():
    """Layer 3 (after first_k_dense_replace = 3 dense layers) against layer 0, a dense MLP of 18432: the
    sparse layer runs a shared expert of 2048 instead, so it saves the routed part and 4 tensors of
    (2048 - 18432) per token less (gate, up, act, product at 2 bytes), and its router's fp32 copy of the
    input (DeepseekV3TopkRouter: F.linear(hidden_states.type(torch.float32), ...)), 4 bytes x h per token."""
    cfg = ROWS["default:deepseek_v3"]["config"]
    # E = 256, k = 8, h = 7168, I_e = 2048: 4*512*256 + 2*2*512*8*7168 + 4*512*8*2048 + 2*2*512*8*2048
    #   + 40*512*8 + 4*512 = 524,288 + 117,440,512 + 33,554,432 + 33,554,432 + 163,840 + 2,048 = 185,239,552
    assert routed(256, 8, 7168, 2048) == 185_239_552
    shared_minus_dense = 4 * 2 * T * (2048 - 18432)          # = -67,108,864
    router_fp32 = 4 * T * 7168                               # = 14,680,064
    assert saved(cfg, 3) - saved(cfg, 0) == 185_239_552 + shared_minus_dense + router_fp32


TRACE = json.loads((Path(__file__).parent / "data" / "moe_shared_trace.json").read_text())


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_qwen2_moe_step_within_3_percent_of_the_trace(case):
    """tools/memtrace/moe_trace.py: a two-layer Qwen2-MoE (default shapes: 60 experts of 1408, top-4, a shared
    expert of 5632) traced on fake tensors; every component at the peak and the peak itself within 3 %
    (the tracer grid's criterion, tools/memtrace/compare.py). Before the fix the routed experts' activations
    were missing from every sparse layer."""
    rows = compare(case, engine_breakdown(case["plan"]))
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, engine_breakdown(case["plan"]), rows)
