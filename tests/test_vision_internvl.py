"""plan-v1 Extension 8 `vision.images_per_sample` for InternVL (InternViT tower + pixel-shuffle projector).

Ground truth: tests/data/vision_internvl_trace.json (tools/memtrace/vision_internvl.py: InternVLModel
.get_image_features, tower h 128, I 512, 4 layers, 4 heads, 112 px tiles of 14 px patches = 64 patches + the
class token, downsample_ratio 0.5 -> 16 tokens of 512, Qwen2 text width 256; bf16, SDPA, transformers 5.24;
1-3 tiles, vision_feature_layer -2, InternViT-6B's rms_norm + use_qk_norm + no mean pooling, gradient
checkpointing, flash_attention_2 (HF's glue, the kernel's saves stood in for: the same saves as SDPA)).
The engine must be within 3 % (the trace's LayerNorm statistics are bf16 on CPU, fp32 in the
engine as on CUDA).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.estimate import estimate
from zerocalc.memory.vision import tower_saved_bytes
from zerocalc.plan import Plan

TRACE = json.loads((Path(__file__).parent / "data" / "vision_internvl_trace.json").read_text())
CASES = {c["id"]: c for c in TRACE["cases"]}


def plan(case: dict, trainable: str = "full", **kw) -> Plan:
    return Plan.from_dict({"model": case["config"], "framework": "single", "gpus_per_node": 1,
                           "precision": "bf16-pure", "method": "lora", "micro_batch_size": 1, "seq_len": 1024,
                           "activation_checkpointing": "full" if case.get("checkpointing") else "none",
                           "attention": "flash" if case.get("attention") == "flash_attention_2" else "sdpa",
                           "vision": {"trainable": trainable, "images_per_sample": case["tiles"],
                                      "tokens_per_sample": 16 * case["tiles"]}, **kw})


@pytest.mark.parametrize("cid", list(CASES))
def test_tower_activations_within_3_percent_of_the_trace(cid):
    p = plan(CASES[cid])
    got, traced = tower_saved_bytes(p, p.arch, 2), CASES[cid]["saved_bytes_forward_end"]
    assert abs(got - traced) <= 0.03 * traced, (cid, got, traced)
    parts = p.arch.params_by_component()
    assert parts["vision"] + parts["projector"] == CASES[cid]["tower_and_projector_params"]


def test_internvit_formula_by_hand():
    """One tile, n = 65 tokens, e = 2. A layer: two LayerNorms 2 * (2*2*65*128 + 8*65) = 67,600; q, k, v and SDPA's
    output 4 * 2*65*128 = 66,560; logsumexp 4*4*65 = 1,040; the layer-scale inputs 2 * 2*65*128 = 33,280;
    fc1's and GELU's outputs 2 * 2*65*512 = 133,120: 301,600; 4 layers 1,206,400. The projector over 16 tokens
    of 512: LayerNorm input and output 2 * 2*16*512 = 32,768, statistics 8*16 = 128, linear_1's and GELU's
    outputs 2 * 2*16*256 = 16,384. 1,206,400 + 32,768 + 128 + 16,384 = 1,255,680."""
    p = plan(CASES["internvl-tiny-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_255_680
    # vision_feature_layer -2: hidden_states[-2] is layer 3's output, so layer 4's graph dies: 2 tiles,
    # 2 * (3 * 301,600 + 49,280) = 1,908,160
    p2 = plan(CASES["internvl-tiny-t2-layer-2"])
    assert tower_saved_bytes(p2, p2.arch, 2) == 1_908_160


def test_frozen_keeps_nothing_and_trained_is_not_warned():
    case = CASES["internvl-tiny-t1"]
    p = plan(case, trainable="frozen")
    assert tower_saved_bytes(p, p.arch, 2) == 0
    assert "model-approximate" not in {w["id"] for w in estimate(plan(case)).to_dict()["warnings"]}
