"""plan -> axolotl / LLaMA-Factory / torchtune fragment -> import into the same plan gives the plan back
(hypothesis over plans); a plan the trainer cannot express is refused with the key named."""
import json

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from zerocalc import Plan, PlanError
from zerocalc.exports import ExportError, ds_config
from zerocalc.exports.trainers import trainer_yaml
from zerocalc.imports import import_config

MODELS = ["llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "gemma-2-2b", "phi-3-mini-4k", "qwen3-8b", "llama-2-7b"]
ATTN4 = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ["gate_proj", "up_proj", "down_proj"]


@st.composite
def plans(draw, target=None):
    """Valid plans; for torchtune drawn from what a torchtune recipe can be (torch SDPA, bf16 or fp32, one
    device or FSDP), so that most examples are expressible and the property is not vacuous."""
    tt = target == "torchtune"
    fw = draw(st.sampled_from(["fsdp", "single"] if tt else ["deepspeed", "fsdp", "ddp", "single"]))
    stage = draw(st.sampled_from([0, 1, 2, 3] if fw == "deepspeed" else [2, 3]))
    gpus = 1 if fw == "single" else draw(st.sampled_from([2, 4, 8]))
    off = draw(st.sampled_from(["none", "cpu"])) if fw in ("deepspeed", "fsdp") and stage > 0 else "none"
    offp = off if (fw == "fsdp" and stage == 3) or (fw == "deepspeed" and stage == 3 and draw(st.booleans())) else "none"
    if fw == "fsdp" and stage == 2:
        offp = "none"
    method = draw(st.sampled_from(["full", "lora", "qlora"]))
    targets = draw(st.sampled_from([ATTN4, ["q_proj", "v_proj"], ATTN4 + MLP, ["q_proj", "v_proj", "o_proj"] + MLP]))
    gc = draw(st.sampled_from(["none", "full"]))
    p = {"model": draw(st.sampled_from(MODELS)), "framework": fw, "zero_stage": stage, "gpus_per_node": gpus,
         "nodes": 1, "offload_optimizer": off, "offload_params": offp,
         "precision": draw(st.sampled_from(["bf16-pure", "fp32"] if tt else
                                           ["bf16-mixed", "bf16-pure", "fp16-mixed", "fp32"])),
         "optimizer": draw(st.sampled_from(["adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit", "sgd"])),
         "micro_batch_size": draw(st.integers(1, 16)), "gradient_accumulation_steps": draw(st.integers(1, 32)),
         "seq_len": draw(st.sampled_from([512, 1024, 2048, 4096, 8192])),
         "activation_checkpointing": gc, "activation_offloading": gc == "full" and draw(st.booleans()),
         "attention": "sdpa" if tt else draw(st.sampled_from(["flash", "sdpa", "eager"])),
         "loss": draw(st.sampled_from(["standard", "chunked"])),
         "optimizer_in_backward": draw(st.booleans()) if fw == "single" else False, "method": method,
         "lora": {"rank": draw(st.sampled_from([4, 8, 16, 64])), "alpha": draw(st.sampled_from([8, 16, 32])),
                  "dropout": draw(st.sampled_from([0.0, 0.05, 0.1])), "targets": targets},
         "quantization": {"type": draw(st.sampled_from(["nf4", "fp4", "int8"])), "double_quant": draw(st.booleans()),
                          "compute_dtype": draw(st.sampled_from(["bf16", "fp16", "fp32"]))}}
    p["stack"] = {"trainer": "torchtune" if tt else "hf-trainer"}   # what the trainer's file implies
    if tt and fw == "fsdp":
        p["stack"]["fsdp_embedding_units"] = draw(st.booleans())    # custom_sharded_layers
    try:
        return json.loads(json.dumps(Plan.from_dict(p).to_dict()))
    except PlanError:
        assume(False)


@pytest.mark.parametrize("target", ["axolotl", "llamafactory", "torchtune"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(target, data):
    plan = data.draw(plans(target))
    try:
        text = trainer_yaml(plan, target)
    except ExportError:
        assume(False)
    ds_text = json.dumps(ds_config(plan)) if plan["framework"] == "deepspeed" else None
    res = import_config(text, plan, loader=lambda path: ds_text if path == "ds_config.json" else None)
    assert res.plan == plan


def test_round_trip_some_plan_each_target():
    """Not all skipped: a concrete plan of each kind goes through."""
    for target, plan in (("axolotl", {"model": "qwen3-8b", "method": "qlora", "framework": "deepspeed", "zero_stage": 3}),
                         ("llamafactory", {"method": "lora", "framework": "ddp"}),
                         ("torchtune", {"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1,
                                        "precision": "bf16-pure", "attention": "sdpa", "loss": "chunked",
                                        "stack": {"trainer": "torchtune"}})):
        full = json.loads(json.dumps(Plan.from_dict(plan).to_dict()))
        ds_text = json.dumps(ds_config(full)) if full["framework"] == "deepspeed" else None
        res = import_config(trainer_yaml(full, target), full, loader=lambda p: ds_text)
        assert res.plan == full, target


@pytest.mark.parametrize("target,plan,key", [
    ("torchtune", {"framework": "deepspeed"}, "attention"),
    ("torchtune", {"attention": "sdpa", "precision": "bf16-pure", "framework": "deepspeed"}, "framework"),
    ("llamafactory", {"framework": "fsdp", "zero_stage": 3}, "framework"),
    ("axolotl", {"activation_checkpointing": "selective"}, "activation_checkpointing"),
    ("axolotl", {"framework": "single", "optimizer_in_backward": True, "gpus_per_node": 1}, "optimizer_in_backward"),
])
def test_inexpressible_is_refused(target, plan, key):
    with pytest.raises(ExportError) as e:
        trainer_yaml(plan, target)
    assert e.value.key == key
