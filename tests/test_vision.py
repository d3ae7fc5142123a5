"""plan-v1 Extension 8 `vision`: what trains in a vision-language model, and what its tower keeps.

Ground truth: tests/data/vision_trace.json (tools/memtrace/vision.py: a LLaVA-1.5-shaped model, CLIP tower
h 256, I 1024, 4 layers, 4 heads, 112 px images of 14 px patches = 64 patches + the class token; Llama
h 512, I 1376, 2 layers; bf16, SDPA; traced on fake tensors with transformers 5.24). A full case minus its
frozen twin is what the tower and the projector keep; the engine must be within 3 %.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.cli import main
from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.memory.vision import tower_saved_bytes
from zerocalc.plan import Plan, plan_to_dict

DATA = Path(__file__).parent / "data"
TRACE = json.loads((DATA / "vision_trace.json").read_text())
CASES = {c["id"]: c for c in TRACE["cases"]}
ARCHS = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}


def plan(case: dict | None = None, **kw) -> Plan:
    case = case or {"images": 1, "batch": 1, "seq": 256, "trainable": "frozen"}
    cfg = TRACE["config"] if case.get("feature_layer") is None else {**TRACE["config"],
                                                                       "vision_feature_layer": case["feature_layer"]}
    d = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
         "micro_batch_size": case["batch"], "seq_len": case["seq"],
         "vision": {"trainable": case["trainable"], "images_per_sample": case["images"],
                    "tokens_per_sample": case["images"] * 64}}
    d.update(kw)
    return Plan.from_dict(d)


@pytest.mark.parametrize("full", [c for c in CASES if "-full-" in c])
def test_tower_activations_within_3_percent_of_the_trace(full):
    traced = CASES[full]["saved_bytes_forward_end"] - CASES[full.replace("-full-", "-frozen-")]["saved_bytes_forward_end"]
    p = plan(CASES[full])
    got = tower_saved_bytes(p, p.arch, 2)
    assert abs(got - traced) <= 0.03 * traced, (full, got, traced)


def test_frozen_tower_keeps_nothing_and_the_trace_agrees():
    """Frozen (the default), the tower records no graph: the frozen trace's activations do not depend on the
    tower's feature layer, and the engine's tower term is 0."""
    assert CASES["llava-tiny-frozen-i1"]["saved_bytes_forward_end"] == \
        CASES["llava-tiny-frozen-i1-last"]["saved_bytes_forward_end"]
    p = plan(CASES["llava-tiny-frozen-i1"])
    assert tower_saved_bytes(p, p.arch, 2) == 0


def test_tower_formula_by_hand():
    """One image, vision_feature_layer -2 (3 of the 4 layers reach the loss), n = 65 tokens, e = 2:
    per layer 2*65*(8*256 + 3*1024) + 4*4*65 + 16*65 = 665,600 + 1,040 + 1,040 = 667,680;
    pre_layrnorm 2*65*256 + 8*65 = 33,800; the selected hidden state 2*65*256 = 33,280;
    the projector's GELU and linear_2 inputs 2*2*64*512 = 131,072.
    3*667,680 + 33,800 + 33,280 + 131,072 = 2,201,192."""
    p = plan({"images": 1, "batch": 1, "seq": 256, "trainable": "full"})
    assert tower_saved_bytes(p, p.arch, 2) == 2_201_192
    # two images per sample, two samples: 4x the tokens, every term linear in them
    p4 = plan({"images": 2, "batch": 2, "seq": 384, "trainable": "full"})
    assert tower_saved_bytes(p4, p4.arch, 2) == 4 * 2_201_192


def test_what_trains_matches_the_trace():
    """The traced model's parameters and trainable parameters (tower and projector frozen or not)."""
    for cid, case in CASES.items():
        est = estimate(plan(case))
        assert est.total_params == case["params"], cid
        assert est.trainable_params == case["trainable_params"], cid


def test_frozen_tower_has_weights_but_no_grads_or_states():
    """Full fine-tuning in bf16-pure with the default frozen tower: gradients and AdamW's two states cover
    the language model only (7,350,784 parameters: 11,072,512 less the tower's and projector's 3,721,728);
    the tower's weights stay (2 bytes each)."""
    frozen = estimate(plan()).to_dict()["per_gpu"]["components"]
    full = estimate(plan({"images": 0, "batch": 1, "seq": 256, "trainable": "full"})).to_dict()["per_gpu"]["components"]
    assert frozen["weights"] == full["weights"] == 2 * 11_072_512
    assert full["gradients"] - frozen["gradients"] == 2 * 3_721_728
    assert full["optimizer_states"] - frozen["optimizer_states"] == 2 * 2 * 3_721_728


def test_lora_in_the_tower():
    """vision.trainable lora: adapters on the tower's linears named in lora.targets. With the default
    targets (q/k/v/o, gate/up/down) CLIP's q_proj, k_proj, v_proj match (out_proj, fc1, fc2 and the
    projector's linear_1/linear_2 do not): 4 layers x 3 x r (256 + 256) = 4 * 3 * 16 * 512 = 98,304 more."""
    base = dict(method="lora")
    frozen = estimate(plan(**base)).trainable_params
    lora = estimate(plan({"images": 1, "batch": 1, "seq": 256, "trainable": "lora"}, **base)).trainable_params
    assert lora - frozen == 98_304
    full = estimate(plan({"images": 1, "batch": 1, "seq": 256, "trainable": "full"}, **base)).trainable_params
    assert full - frozen == 3_721_728


@pytest.mark.parametrize("vision,key", [
    ({"trainable": "half"}, "vision.trainable"),
    ({"tokens_per_sample": 300}, "vision.tokens_per_sample"),     # more than seq_len 256
    ({"images_per_sample": -1}, "vision.images_per_sample"),
    ({"images_per_sample": 1.5}, "vision.images_per_sample"),
    ({"resolution": 336}, "vision.resolution"),
])
def test_bad_vision_keys_are_named(vision, key):
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"model": TRACE["config"], "seq_len": 256, "vision": vision})
    assert e.value.key == key


def test_vision_keys_need_a_tower_and_a_modelled_one():
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"model": "llama-3.1-8b", "vision": {"images_per_sample": 1}})
    assert e.value.key == "vision.images_per_sample" and "no vision" in str(e.value)
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"model": TRACE["config"], "vision": {"trainable": "lora"}})   # method full
    assert e.value.key == "vision.trainable"
    mllama = ARCHS["default:mllama"]["config"]
    Plan.from_dict({"model": mllama, "vision": {"trainable": "full", "tokens_per_sample": 256}})   # counted, placed
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"model": mllama, "vision": {"images_per_sample": 1}})
    assert e.value.key == "vision.images_per_sample" and "'mllama'" in str(e.value)


def test_round_trip_and_default_omitted():
    p = plan({"images": 2, "batch": 1, "seq": 256, "trainable": "full"})
    d = plan_to_dict(p)
    assert d["vision"] == {"trainable": "full", "tokens_per_sample": 128, "images_per_sample": 2}
    assert Plan.from_dict(d) == p
    assert "vision" not in plan_to_dict(Plan.from_dict({"model": "llama-3.1-8b"}))


def test_cli_exits_2_naming_the_key(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"model": TRACE["config"], "seq_len": 256, "vision": {"trainable": "half"}}))
    rc = main(["estimate", "--plan", str(f)])
    err = capsys.readouterr().err
    assert rc == 2 and "vision.trainable" in err and "Traceback" not in err


# a tiny Fuyu: the "tower" is one biased linear from a 30 x 30 x 3 patch to the text width (modeling_fuyu.py
# vision_embed_tokens; its tower_spec: tests/test_vision_towers.py); Audio Flamingo 3's audio tower (the fixture's
# default config, tests/data/architectures.json) has no tower_spec (its activations are not modelled)
FUYU = {"model_type": "fuyu", "patch_size": 30, "num_channels": 3,
        "text_config": {"model_type": "persimmon", "hidden_size": 256, "intermediate_size": 1024,
                        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}}


def _fuyu(trainable: str, model: dict = FUYU):
    return estimate(Plan.from_dict({"model": model, "framework": "single", "gpus_per_node": 1,
                                    "precision": "bf16-pure", "method": "full", "seq_len": 256,
                                    "vision": {"trainable": trainable}}))


def test_untraced_tower_frozen_by_default_and_warned_when_trained():
    """Frozen (the default) freezes any composite's tower, modelled or not: Fuyu's 2,700 x 256 + 256 = 691,456
    tower parameters get no gradient (bf16-pure: 2 bytes each) and no AdamW states (2 x 2 bytes each), and
    nothing is said. Trained, they do; Audio Flamingo 3's audio tower has no tower_spec modelling what it saves, so trained the
    model-approximate warning says its activations are left out; LLaVA's and Fuyu's traced towers trained get
    no warning."""
    frozen, full = _fuyu("frozen"), _fuyu("full")
    assert full.trainable_params - frozen.trainable_params == 2_700 * 256 + 256
    fc, uc = frozen.to_dict()["per_gpu"]["components"], full.to_dict()["per_gpu"]["components"]
    assert uc["gradients"] - fc["gradients"] == 2 * 691_456
    assert uc["optimizer_states"] - fc["optimizer_states"] == 2 * 2 * 691_456
    assert "model-approximate" not in {w["id"] for w in frozen.to_dict()["warnings"]}
    assert "model-approximate" not in {w["id"] for w in full.to_dict()["warnings"]}
    af3 = {**_rows("audioflamingo3")["audioflamingo3"], "model_type": "audioflamingo3"}
    msg = {w["id"]: w["message"] for w in _fuyu("full", af3).to_dict()["warnings"]}["model-approximate"]
    assert msg.startswith("audioflamingo3") and "tower's activations are not modelled" in msg
    llava = estimate(plan({"images": 1, "batch": 1, "seq": 256, "trainable": "full"})).to_dict()
    assert "model-approximate" not in {w["id"] for w in llava["warnings"]}


def _rows(*model_types: str) -> dict:
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    rows = json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]
    return {r["model_type"]: r["config"] for r in rows if r["id"] == f"default:{r['model_type']}"
            and r["model_type"] in model_types}


def test_model_support_names_an_untraced_trained_tower():
    """Issue 20 point 5: a composite whose parameter count is exact but whose tower has no traced activation
    rule (Audio Flamingo 3's Whisper-style audio tower, Phi-4-multimodal's SigLIP + audio conformer, Aria's vision tower
    and MoE projector, Granite Speech's conformer + Q-Former) reports model_support "exact" only while the tower
    is frozen (it saves nothing then); trained (full), model_support keeps "exact parameter count" and says the
    activations are approximate because that tower's are not modelled, and the model-approximate warning says the
    same."""
    for model_type, cfg in _rows("audioflamingo3", "phi4_multimodal", "aria", "granite_speech").items():
        frozen, full = (_fuyu(t, {**cfg, "model_type": model_type}).to_dict() for t in ("frozen", "full"))
        assert frozen["model_support"] == "exact", model_type
        assert "model-approximate" not in {w["id"] for w in frozen["warnings"]}
        support = full["model_support"]
        assert support.startswith("exact parameter count; activations approximate"), (model_type, support)
        assert f"the {model_type} tower's activations are not modelled" in support
        assert "vision.trainable full" in support
        warned = {w["id"]: w["message"] for w in full["warnings"]}["model-approximate"]
        assert support in warned
        # the counts do not move with the wording: the same parameters, the tower's now trainable
        assert full["model"]["total_params"] == frozen["model"]["total_params"]


def test_idefics_freezes_its_text_layers_as_its_modelling_code_does():
    """modeling_idefics.py IdeficsModel.__init__ ends with freeze_relevant_params: IdeficsConfig's default
    freeze_text_layers freezes the 32 decoder layers and the final norm and embed_tokens' regular weight (the
    gated cross-attention layers train). Default config (h 4096, MLP 11008, vocab 32000): a layer 4*4096^2 +
    3*4096*11008 + 2*4096 = 202,383,360, 32 of them 6,476,267,520, the norm 4,096, the embedding 32000*4096 =
    131,072,000: 6,607,343,616 parameters with no gradient and no bf16 AdamW states (2 x 2 bytes each) under full
    fine-tuning; freeze_text_layers false trains them (transformers' own requires_grad count on the meta device
    is the same: 6,607,343,616)."""
    cfg = _rows("idefics")["idefics"]
    base = {"framework": "single", "gpus_per_node": 1, "nodes": 1, "zero_stage": 0, "precision": "bf16-pure",
            "optimizer": "adamw", "micro_batch_size": 1, "seq_len": 512, "method": "full"}
    frozen = estimate(Plan.from_dict({**base, "model": cfg})).to_dict()["per_gpu"]["detail"]
    trained = estimate(Plan.from_dict({**base, "model": {**cfg, "freeze_text_layers": False}})).to_dict()
    assert trained["per_gpu"]["detail"]["optimizer_states"] - frozen["optimizer_states"] == 4 * 6_607_343_616
    assert frozen["frozen_params"] - trained["per_gpu"]["detail"]["frozen_params"] == 2 * 6_607_343_616


def test_idefics_lora_adapts_the_gated_cross_attention_layers_as_peft_does():
    """PEFT matches a target against a module name's last segment, so q_proj / v_proj also adapt every
    IdeficsGatedCrossAttentionLayer's cross_attn.q_proj (4096 -> 4096) and v_proj (the vision width 768 -> 4096).
    Default config (cross_layer_interval 1: 32 gated layers), r 8: the decoder's 32 x 8 x (2 x 8192) = 4,194,304
    and the gated layers' 32 x 8 x (8192 + 4864) = 3,342,336, 7,536,640 adapter parameters (peft 0.21.2's
    get_peft_model on the meta-device IdeficsForVisionText2Text counts the same: 4,194,304 on the decoder layers,
    3,342,336 on gated_cross_attn_layers, the frozen tower's left out here). bf16-pure AdamW keeps the adapters'
    two states in fp32: 8 bytes each. Every target with r 16 and cross_layer_interval 4 (8 gated layers): a gated
    layer 16 x (2 x 8192 + 2 x 4864 + 3 x 15104) = 1,142,784, 8 of them 9,142,272 (peft: the same)."""
    cfg = _rows("idefics")["idefics"]
    base = {"framework": "single", "gpus_per_node": 1, "nodes": 1, "zero_stage": 0, "precision": "bf16-pure",
            "optimizer": "adamw", "micro_batch_size": 1, "seq_len": 512, "method": "lora",
            "lora": {"rank": 8, "targets": ["q_proj", "v_proj"]}}
    d = estimate(Plan.from_dict({**base, "model": cfg})).to_dict()["per_gpu"]["detail"]
    assert d["optimizer_states"] == 8 * (32 * 8 * 2 * 8192 + 32 * 8 * (8192 + 4864))
    every = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora4 = {**base, "lora": {"rank": 16, "targets": every}, "model": {**cfg, "cross_layer_interval": 4}}
    lora1 = {**lora4, "model": {**cfg, "cross_layer_interval": 32}}
    d4 = estimate(Plan.from_dict(lora4)).to_dict()["per_gpu"]["detail"]
    d1 = estimate(Plan.from_dict(lora1)).to_dict()["per_gpu"]["detail"]
    assert d4["optimizer_states"] - d1["optimizer_states"] == 8 * 7 * 16 * (2 * 8192 + 2 * 4864 + 3 * 15104)


def test_idefics_gated_layers_are_fsdp_units_of_their_own():
    """IdeficsPreTrainedModel._no_split_modules lists IdeficsDecoderLayer and IdeficsGatedCrossAttentionLayer apart,
    so FSDP wraps each gated layer alone. Default config: a decoder layer 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096
    = 202,383,360; a gated layer 2 x 4096^2 + 2 x 768 x 4096 (k/v from the CLIP width) + 3 x 4096 x 11008 +
    2 x 4096 + 2 (float alphas) = 175,120,386; 32 of each, the largest unit a decoder layer."""
    from zerocalc.model import model_from_config
    arch = model_from_config(_rows("idefics")["idefics"])
    assert sorted(arch.layer_sizes) == [175_120_386] * 32 + [202_383_360] * 32
    assert 2 * 4096**2 + 2 * 768 * 4096 + 3 * 4096 * 11008 + 2 * 4096 + 2 == 175_120_386
