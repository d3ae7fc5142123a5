"""Fused 3-D experts under full fine-tuning: layer 0's gate_up weight-gradient transient (memory/activations.py
_expert_grad_temp), held to traces of five MoE families (tools/memtrace/moe_trace.py families:
tests/data/moe_families_trace.json; Mixtral, Qwen3-MoE, OLMoE, gpt-oss, GraniteMoE at their default shapes,
two layers, full and LoRA on attention, with and without checkpointing); and frozen experts (LoRA on attention)
keep neither the gathered tokens nor the product (memory/blocks.py _moe).

In every full fine-tuning trace whose peak is not the loss's backward, the peak sits in layer 0's backward of
the gate_up grouped matmul with a temporary of one gate_up-sized gradient beside the stored gradients
(Mixtral 1.816 GiB, OLMoE 1.049, gpt-oss 3.991, GraniteMoE 1.397). Before the term the engine missed it and
those peaks were 4.5-6.5 % low.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from tools.memtrace.moe_trace import plans
from zerocalc.memory.activations import activations
from zerocalc.memory.precision import dtypes_for
from zerocalc.model import model_from_config
from zerocalc.plan import parse_plan

TRACE = json.loads((Path(__file__).parent / "data" / "moe_families_trace.json").read_text())


def _temp(plan_d: dict) -> int:
    plan = parse_plan(plan_d)
    arch = model_from_config(plan_d["model"])
    return activations(plan, arch, dtypes_for(plan)).layer_backward_temp


def test_mixtral_full_keeps_one_gate_up_gradient_in_layer_0_backward():
    """Mixtral's default (h 4096, 8 experts of 14336, top-2), 2 layers, bf16-pure, s 512, b 1, 4 accumulation
    steps (the gradients exist before the traced backward):
    the gradient flowing between layers  2*512*4096                      =     4,194,304
    gate_up's gradient (E, 2I, h) bf16    2*8*2*14336*4096                = 1,879,048,192
    the gradients of its output, input    2*512*2*(2*14336 + 4096)        =    67,108,864
    the trace's temporaries at its peak: 1.816 GiB (1,950,351,360 bytes is 1.8164 GiB)."""
    full = dict(plans("mixtral"))["mixtral-2l-full-s512"]
    assert _temp(full) == 4_194_304 + 1_879_048_192 + 67_108_864
    lora = dict(plans("mixtral"))["mixtral-2l-lora-attn-s512"]
    assert _temp(lora) == 4_194_304                     # frozen experts: no weight gradient
    # the first micro-step (gradient_accumulation_steps 1): AccumulateGrad stores the new gradient as .grad,
    # no second copy (the trace: 0.004 GiB of temporaries at its peak)
    ga1 = dict(plans("mixtral"))["mixtral-2l-full-s512-ga1"]
    assert _temp(ga1) == 4_194_304
    assert _temp({**full, "framework": "fsdp", "gpus_per_node": 2}) == 4_194_304    # not traced there


def test_a_dense_layer_0_keeps_no_expert_gradient():
    """DeepSeek-V3 (first_k_dense_replace = 1): layer 0 is dense, the sparse layer's transient passes before
    the last gradients exist; only the gradient between layers, 2*512*2048 = 2,097,152."""
    ds = dict(plans("deepseek_v3"))["deepseek-v3-2l-full-s512"]
    assert _temp(ds) == 2_097_152


def _moe_saved(plan_d: dict) -> dict:
    """The MoE terms one sparse block saves (memory/blocks.py _moe), by key."""
    from zerocalc.memory import blocks  # noqa: PLC0415
    seen: dict = {}
    orig = blocks.SavedSet.save

    def save(self, key, nbytes):
        seen[key] = nbytes
        return orig(self, key, nbytes)
    blocks.SavedSet.save = save
    try:
        _temp(plan_d)
    finally:
        blocks.SavedSet.save = orig
    return {k: v for k, v in seen.items() if k.startswith("moe.")}


def test_frozen_experts_keep_neither_the_gathered_tokens_nor_the_product():
    """LoRA on attention alone (Mixtral, t = 512, k = 2, h 4096, I 14336, bf16): the traced saved set
    (python -m tools.memtrace PLAN --saved-table) holds per layer the gate_up output [1024, 28672] (56 MiB),
    silu's output [1024, 14336] (28 MiB) and the experts' output [1024, 4096] (8 MiB) but neither the gathered
    input [1024, 4096] nor the product [1024, 14336]: a grouped matmul keeps its input only for its weight's
    gradient. Full fine-tuning keeps both: 2*1024*4096 = 8,388,608 and 2*1024*14336 = 29,360,128."""
    rows = dict(plans("mixtral"))
    lora, full = _moe_saved(rows["mixtral-2l-lora-attn-s512"]), _moe_saved(rows["mixtral-2l-full-s512"])
    assert lora["moe.gate_up"] == 2 * 1024 * 28672 == 58_720_256
    assert lora["moe.act"] == 2 * 1024 * 14336 == 29_360_128
    assert "moe.gathered" not in lora and "moe.prod" not in lora
    assert full["moe.gathered"] == 8_388_608 and full["moe.prod"] == 29_360_128


def test_gpt_oss_gate_keeps_four_tensors_per_routed_token():
    """gpt-oss's clamped SwiGLU (GptOssExperts._apply_gate: clamp(gate), sigmoid(gate * alpha), glu, up + 1):
    the trace keeps four [2048, 2880] bf16 tensors per layer beside the gate_up output (t*k = 512*4 = 2048,
    I = 2880): 4 * 2 * 2048 * 2880 = 47,185,920 bytes (SwiGLU keeps one)."""
    lora = _moe_saved(dict(plans("gpt_oss"))["gpt-oss-2l-lora-attn-s512"])
    assert lora["moe.act"] == 4 * 2 * 2048 * 2880 == 47_185_920


# full fine-tuning without checkpointing and with accumulated gradients: only the peak is held (below)
OPEN = {"mixtral-2l-full-s512", "olmoe-2l-full-s512", "gpt-oss-2l-full-s512", "granitemoe-2l-full-s512"}
HELD = [c for c in TRACE["cases"] if c["id"] not in OPEN]


@pytest.mark.parametrize("case", HELD, ids=[c["id"] for c in HELD])
def test_moe_family_step_within_3_percent_of_the_trace(case):
    """Every component at the peak and the peak within 3 %: LoRA on q/k/v/o (fp32 adapters, PEFT >= 0.12),
    full fine-tuning with checkpointing (the gate_up backward's moment inside the recomputed layer: before it
    the activations were +8.5 %), without accumulation, and Qwen3-MoE (a loss-backward peak).
    LoRA:
    Before the frozen-experts rule: activations +51..67 % without checkpointing (Mixtral +52.4 %, Qwen3-MoE
    +67.3 %, OLMoE +50.9 %, GraniteMoE +52.9 %), Mixtral + checkpointing +17 %; gpt-oss before its gate's four
    tensors -8.8 %."""
    rows = compare(case, engine_breakdown(case["plan"]))
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, engine_breakdown(case["plan"]), rows)


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_moe_family_peak_within_3_percent_of_the_trace(case):
    """The peak, weights, gradients and optimizer states within compare.REL_TOL (3 %). The activations at
    the peak of full fine-tuning without checkpointing, with accumulated gradients, are not yet held (open: the
    moment is the top layer's gate_up backward, with every layer's saved set but that layer's consumed MoE tail
    alive; the engine has no top-layer-backward moment outside FSDP and books the transient at the end of
    backward: -5..-15 %, peak -0.3..-1.2 %)."""
    eng = engine_breakdown(case["plan"])
    rows = [r for r in compare(case, eng) if r["name"] in ("peak", "weights", "gradients", "optimizer_states")]
    assert len(rows) == 4
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, eng, rows)
