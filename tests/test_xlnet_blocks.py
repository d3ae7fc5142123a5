"""XLNet's layers (memory/blocks_xlnet.py), held to a trace.

The traced model (tools/memtrace/own_attention_trace.py xlnet, tests/data/xlnet_trace.json): XLNetConfig's default
(attn_type "bi", gelu, dropout 0.1, tied lm_loss) at d_model 256, 4 heads of 64, d_inner 1024, 2 layers, the
vocabulary cut to 8192; XLNetLMHeadModel fed input_ids and labels (one stream: no target_mapping). No bf16-pure
rows: XLNetRelativeAttention's parameters are torch.FloatTensor, fp32 in a bf16 build, and the first einsum fails
("expected scalar type BFloat16 but found Float"); no checkpointing (XLNetPreTrainedModel does not support it).
Rows: full fp32, LoRA on layer_1 / layer_2 (PEFT cannot wrap the attention's nn.Parameters) bf16-mixed, full
bf16-mixed at b 1 and 2. Before this rule (the BERT block of memory/blocks.py) saved activations were -15.0 %
(fp32), +41.7 % (LoRA), -10.2 % (mixed), -9.8 % (mixed, b 2) of the trace.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.own_attention_trace import plans
from zerocalc import Plan, estimate
from zerocalc.memory.blocks import Ctx
from zerocalc.memory.blocks_bart import layer_saved_bytes
from zerocalc.memory.lora import Adapter, block_linears_per_layer
from zerocalc.model import model_from_config

TRACE = json.loads((Path(__file__).parent / "data" / "xlnet_trace.json").read_text())
T, H, I, A = 512, 256, 1024, 4          # 4 heads of 64: q / k / v are 256 wide


def test_layer_by_hand():
    """Layer 1 of the full bf16-mixed row. Per token, in units of h (= n·d = 256): three 16-bit copies of the
    fp32 layer input for the q / k / v einsums (6), pos_emb's copy over 2·s positions for r (4), k and v (4), k_r
    over 2·s (4), the 16-bit copies of q + r_w_bias and q + r_r_bias (4), attn_vec's copy for o (2), the
    attention output's dropout mask (1), the fp32 sum rel_attn.layer_norm keeps (4), layer_1's copy of that
    LayerNorm's output (2), the feed-forward's output dropout mask (1), the fp32 sum ff.layer_norm keeps (4): 36;
    of I: gelu's input (2), the dropout mask (1) and output layer_2 reads (2); two LayerNorms' mean/rstd (16).
    Then the 16-bit copies of the fp32 q / k / v / o parameters (4 x 2 x 256 x 256), 7 bytes per score for the
    fp32 softmax, dropout mask and 16-bit copy (4 heads x 512²) and rel_shift's int64 arange (512)."""
    arch = model_from_config(dict(plans("xlnet"))["xlnet-2l-full-mixed-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=4, autocast=True, train_base=True, adapter_bytes=4, dropout=0.0,
            attention="eager", first_layer=False)
    by_hand = T * (36 * H + 5 * I + 16) + 2 * 4 * H * H + 7 * A * T * T + 8 * T
    assert by_hand == 15_216_640
    assert layer_saved_bytes(arch, c, block_linears_per_layer(arch)[1], ()) == by_hand


def test_first_layer_under_lora_keeps_no_attention():
    """LoRA (rank 16, fp32 adapters) on the feed-forward only: nothing before layer 0's layer_1 needs a gradient,
    so its attention keeps nothing. Per token: lora_A's 16-bit copy of the fp32 LayerNorm output (2·h), gelu's
    input (2·I), the dropout mask (I), lora_A's copy of layer_2's input (2·I), the two lora_A outputs (2 x 2·16),
    the output dropout mask (h), the fp32 sum ff.layer_norm keeps (4·h) and its mean/rstd (8): 3,575,808 bytes, the
    trace's layer 0 (3.41 MiB)."""
    arch = model_from_config(dict(plans("xlnet"))["xlnet-2l-lora-mixed-s512"]["model"])
    c = Ctx(tokens=T, seq=T, batch=1, e=2, res=4, autocast=True, train_base=False, adapter_bytes=4, dropout=0.0,
            attention="eager", first_layer=True)
    ads = (Adapter("layer_1", H, I, 16), Adapter("layer_2", I, H, 16))
    first = layer_saved_bytes(arch, c, block_linears_per_layer(arch)[0], ads)
    assert first == T * (7 * H + 5 * I + 4 * 16 + 8) == 3_575_808
    later = layer_saved_bytes(arch, replace(c, first_layer=False), block_linears_per_layer(arch)[1], ads)
    assert later > first + 7 * A * T * T


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
def test_xlnet_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
