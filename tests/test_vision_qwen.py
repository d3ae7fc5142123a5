"""plan-v1 Extension 8 `vision.images_per_sample` for the Qwen-VL towers (Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Qwen3.5, EXAONE 4.5): what ``model.visual`` keeps for its backward.

Ground truth: tests/data/vision_qwen_trace.json (tools/memtrace/vision_qwen.py: each tower alone, 4 blocks of
width 128, 4 heads, merger to 256, bf16, SDPA, transformers 5.24, on 1-2 images of 112-224 px; 2.5-VL with
windows of 56 px and full attention in blocks 1 and 3, Qwen3-VL with deepstack mergers after blocks 1 and 2;
three cases with gradient checkpointing, four under flash_attention_2: HF's varlen glue with the kernel's saves
stood in for). The engine must be within 3 %; the trace's LayerNorm statistics are
bf16 on CPU, the engine's fp32 as on CUDA.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.memory.vision import tower_saved_bytes
from zerocalc.plan import Plan

DATA = Path(__file__).parent / "data"
TRACE = json.loads((DATA / "vision_qwen_trace.json").read_text())
ARCHS = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}
TYPE = {"2": "qwen2_vl", "2.5": "qwen2_5_vl", "3": "qwen3_vl", "3.5": "qwen3_5", "exaone4.5": "exaone4_5"}


def model(version: str) -> dict:
    """The model_type's default config (tests/data/architectures.json) with the traced tower."""
    return {**ARCHS[f"default:{TYPE[version]}"]["config"], "vision_config": dict(TRACE["towers"][version]),
            "model_type": TYPE[version]}


def plan(version: str, tokens: int, images: int = 1, batch: int = 1, trainable: str = "full", **kw) -> Plan:
    kw.setdefault("attention", "sdpa")
    return Plan.from_dict({"model": model(version), "framework": "single", "gpus_per_node": 1,
                           "precision": "bf16-pure", "method": "lora", "micro_batch_size": batch, "seq_len": 1024,
                           "vision": {"trainable": trainable, "images_per_sample": images,
                                      "tokens_per_sample": tokens}, **kw})


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_tower_activations_within_3_percent_of_the_trace(case):
    ac = "full" if case["checkpointing"] else "none"
    attention = "flash" if case["attention"] == "flash_attention_2" else "sdpa"
    p = plan(case["version"], case["tokens"], case["images"], activation_checkpointing=ac, attention=attention)
    got, traced = tower_saved_bytes(p, p.arch, 2), case["saved_bytes_forward_end"]
    assert abs(got - traced) <= 0.03 * traced, (case["id"], got, traced)
    # the same patches as two samples of half the tokens: the tower sees one packed sequence either way
    if case["tokens"] % 2 == 0:
        p2 = plan(case["version"], case["tokens"] // 2, case["images"], batch=2, activation_checkpointing=ac,
                  attention=attention)
        assert tower_saved_bytes(p2, p2.arch, 2) == got


@pytest.mark.parametrize("version", list(TYPE))
def test_tower_parameters_match_the_traced_tower(version):
    p = plan(version, 16)
    parts = p.arch.params_by_component()
    assert parts["vision"] + parts["projector"] == TRACE["cases"][[c["version"] for c in TRACE["cases"]].index(
        version)]["params"]


def test_qwen2_5_vl_formula_by_hand():
    """One 112 x 112 image: 8 x 8 = 64 patches of 14 px, 16 tokens after the 2 x 2 merge; h 128, I 344,
    4 heads of 32, e = 2. Per block: two RMSNorms 2 * (4*64*128 + 2*2*64*128 + 4*64) = 2 * 65,792 = 131,584;
    attention qkv 2*64*384 = 49,152, rotated q, k 2*2*64*128 = 32,768, SDPA output and proj input
    2 * 2*64*128 = 32,768, logsumexp 4*4*64 = 1,024; the gated MLP gate, up, silu, product 4*2*64*344 =
    176,128: 423,424 a block, 4 blocks 1,693,696. Rotary cos and sin 2*4*64*32 = 16,384; window index and its
    argsort 2*8*16 = 256; merger RMSNorm 65,792, mlp.0's and GELU's outputs 2*2*64*128 = 32,768.
    1,693,696 + 16,384 + 256 + 65,792 + 32,768 = 1,808,896 (the trace: 1,808,900, its 4-byte loss)."""
    p = plan("2.5", 16)
    assert tower_saved_bytes(p, p.arch, 2) == 1_808_896
    # checkpointed: each block keeps its input, 2*64*128 = 16,384: 4*16,384 + 16,384 + 256 + 98,560 = 180,736
    pc = plan("2.5", 16, activation_checkpointing="full")
    assert tower_saved_bytes(pc, pc.arch, 2) == 180_736
    # flash_attention_2: the varlen kernel's one output is proj's input, no concatenated copy: 4 * 16,384 less
    pf = plan("2.5", 16, attention="flash")
    assert tower_saved_bytes(pf, pf.arch, 2) == 1_808_896 - 4 * 16_384


def test_qwen3_vl_deepstack_by_hand():
    """Qwen3-VL with two deepstack mergers against Qwen3.5's tower (the same without them): each deepstack
    merger keeps its LayerNorm output, linear_fc1's and GELU's outputs (3*2*64*128 = 49,152) and the norm's fp32
    mean and rstd over 16 merged tokens (8*16 = 128): 2 * 49,280 = 98,560 more for one 128 x 128 image."""
    a, b = plan("3", 16), plan("3.5", 16)
    assert tower_saved_bytes(a, a.arch, 2) - tower_saved_bytes(b, b.arch, 2) == 98_560


def test_exaone_grouped_kv_by_hand():
    """EXAONE 4.5's tower is Qwen2.5-VL's with 2 k/v heads of 4 (kv width 64): per block the qkv output is
    2*n*(128 + 128) instead of 2*n*384 and the rotated k 2*n*64 instead of 2*n*128, 384*n less; 4 blocks, 64
    patches: 4 * 384 * 64 = 98,304 less than the same-sized Qwen2.5-VL tower."""
    a, b = plan("exaone4.5", 16), plan("2.5", 16)
    assert tower_saved_bytes(b, b.arch, 2) - tower_saved_bytes(a, a.arch, 2) == 98_304


def test_frozen_tower_keeps_nothing_and_no_warning_when_trained():
    p = plan("2.5", 16, trainable="frozen")
    assert tower_saved_bytes(p, p.arch, 2) == 0
    warned = {w["id"] for w in estimate(plan("2.5", 16, trainable="lora")).to_dict()["warnings"]}
    assert "model-approximate" not in warned


def test_images_without_tokens_are_refused_naming_the_key():
    with pytest.raises(PlanError) as e:
        plan("2.5", 0)
    assert e.value.key == "vision.tokens_per_sample" and "'qwen2_5_vl'" in str(e.value)


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5",
                                        "qwen3_5_moe", "hyperclovax_vision_v2", "exaone4_5"])
def test_every_qwen_tower_composite_takes_images(model_type):
    cfg = ARCHS[f"default:{model_type}"]["config"]
    p = Plan.from_dict({"model": cfg, "method": "lora", "seq_len": 2048,
                        "vision": {"trainable": "full", "images_per_sample": 1, "tokens_per_sample": 256}})
    assert tower_saved_bytes(p, p.arch, 2) > 0


def test_hyperclovax_projector_keeps_its_input():
    """HyperCLOVA X Vision V2: Qwen2.5-VL's tower, then model.projector (out_hidden_size 3584 by
    Qwen2_5_VLVisionConfig's default -> the text width), which keeps its input: 256 tokens x 3584 x 2 bytes =
    1,835,008 more than the same tower under qwen2_5_vl."""
    vis = {"trainable": "full", "images_per_sample": 1, "tokens_per_sample": 256}
    hx = Plan.from_dict({"model": ARCHS["default:hyperclovax_vision_v2"]["config"], "method": "lora",
                         "micro_batch_size": 1, "seq_len": 2048, "vision": vis})
    q = Plan.from_dict({"model": {**ARCHS["default:qwen2_5_vl"]["config"],
                                  "vision_config": ARCHS["default:hyperclovax_vision_v2"]["config"]["vision_config"]},
                        "method": "lora", "micro_batch_size": 1, "seq_len": 2048, "vision": vis})
    assert tower_saved_bytes(hx, hx.arch, 2) - tower_saved_bytes(q, q.arch, 2) == 256 * 3584 * 2
