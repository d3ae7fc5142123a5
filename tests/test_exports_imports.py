"""ds_config.json / config.json import: plan updates, listed leftovers, errors naming the key, round trip."""
import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerocalc import Plan
from zerocalc.exports import ds_config
from zerocalc.imports import ConfigImportError, apply_model_config, import_ds_config, import_model_config

BASE = {"model": "llama-3.1-8b", "gpus_per_node": 4, "nodes": 1}  # world 4


def _imp(cfg, plan=BASE):
    return import_ds_config(json.dumps(cfg) if isinstance(cfg, dict) else cfg, plan)


def _error_key(cfg, plan=BASE):
    before = copy.deepcopy(plan)
    with pytest.raises(ConfigImportError) as e:
        _imp(cfg, plan)
    assert plan == before  # the current plan is kept
    return e.value.key, str(e.value)


def test_malformed_json_names_position():
    key, msg = _error_key('{"train_batch_size": 8,,}')
    assert key == "ds_config" and "line 1 column 24" in msg
    assert _error_key("[1, 2]")[0] == "ds_config"


@pytest.mark.parametrize("cfg,key", [
    ({"train_micro_batch_size_per_gpu": 1.5}, "train_micro_batch_size_per_gpu"),
    ({"train_micro_batch_size_per_gpu": True}, "train_micro_batch_size_per_gpu"),
    ({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": "two"}}, "zero_optimization.stage"),
    ({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 4}}, "zero_optimization.stage"),
    ({"train_micro_batch_size_per_gpu": 2, "zero_optimization": []}, "zero_optimization"),
    ({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "reduce_bucket_size": True}},
     "zero_optimization.reduce_bucket_size"),
    ({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "overlap_comm": "yes"}},
     "zero_optimization.overlap_comm"),
    ({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}}}, "zero_optimization.offload_param.device"),
    ({"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": True}, "bf16": {"enabled": True}}, "bf16.enabled"),
    ({"train_micro_batch_size_per_gpu": 2, "optimizer": {"params": {}}}, "optimizer.type"),
    ({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": "high"}, "gradient_clipping"),
    ({"gradient_accumulation_steps": 2}, "train_micro_batch_size_per_gpu"),
])
def test_wrong_types_name_the_key(cfg, key):
    assert _error_key(cfg)[0] == key


def test_contradictory_batch_product_names_train_batch_size():
    # world 4: 2 x 4 x 4 = 32, not 30
    key, msg = _error_key({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 2,
                           "gradient_accumulation_steps": 4})
    assert key == "train_batch_size" and "32" in msg and "4" in msg


@pytest.mark.parametrize("cfg,mbs,gas", [
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4}, 4, 4),     # gas = 64 / (4 x 4)
    ({"train_batch_size": 48}, 12, 1),                                          # mbs = 48 / 4, gas 1
    ({"train_batch_size": 64, "gradient_accumulation_steps": 2}, 8, 2),        # mbs = 64 / (2 x 4)
    ({"train_micro_batch_size_per_gpu": 3}, 3, 1),                              # DeepSpeed sets gas 1
    ({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2}, 3, 2),
])
def test_batch_derivations_follow_deepspeed(cfg, mbs, gas):
    p = _imp(cfg).plan
    assert (p["micro_batch_size"], p["gradient_accumulation_steps"]) == (mbs, gas)


def test_batch_not_divisible_is_an_error():
    key, msg = _error_key({"train_batch_size": 50, "train_micro_batch_size_per_gpu": 4})  # 50 / 16
    assert key == "train_batch_size" and "world" in msg


HF_ZERO3 = {  # the Hugging Face docs' ZeRO-3 example
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
             "hysteresis": 2, "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                 "warmup_num_steps": "auto"}},
    "zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
        "offload_param": {"device": "cpu", "pin_memory": True}, "overlap_comm": True, "contiguous_gradients": True,
        "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": True},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False,
}


def test_hf_zero3_example():
    base = {**BASE, "framework": "fsdp", "zero_stage": 2, "precision": "fp16-mixed", "micro_batch_size": 3}
    r = _imp(HF_ZERO3, base)
    p = r.plan
    assert (p["framework"], p["zero_stage"], p["offload_optimizer"], p["offload_params"]) == \
        ("deepspeed", 3, "cpu", "cpu")
    assert p["precision"] == "fp16-mixed" and p["micro_batch_size"] == 3  # "auto": the plan's own
    assert p["deepspeed"] == {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto"}  # the rest equal the defaults
    listed = {n["key"] for n in r.not_represented}
    assert {"scheduler", "steps_per_print", "wall_clock_breakdown",
            "zero_optimization.stage3_gather_16bit_weights_on_model_save", "fp16.loss_scale"} <= listed
    Plan.from_dict(p)


def test_every_key_is_accounted_for():
    cfg = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
           "train_batch_szie": 1, "communication_data_type": "fp32",
           "zero_optimization": {"stage": 2, "allgather_bucket_size": 2e8, "round_robin_gradients": True,
                                 "bogus_key": 1}}
    r = _imp(cfg)
    listed = {n["key"]: n["reason"] for n in r.not_represented}
    assert "unknown" in listed["train_batch_szie"]
    assert "unknown" in listed["zero_optimization.bogus_key"]
    assert "not model" in listed["zero_optimization.allgather_bucket_size"]
    assert "not model" in listed["communication_data_type"]
    assert sum(w["id"] == "ds-unknown-key" for w in r.warnings) == 2


def test_param_offload_below_stage3_warned_and_not_applied():
    r = _imp({"train_micro_batch_size_per_gpu": 2,
              "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})
    assert r.plan["offload_params"] == "none"
    assert [w["id"] for w in r.warnings] == ["ds-offload-param-ignored"]
    assert any(n["key"] == "zero_optimization.offload_param.device" for n in r.not_represented)


def test_nvme_without_path_warned():
    r = _imp({"train_micro_batch_size_per_gpu": 2,
              "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})
    assert r.plan["offload_optimizer"] == "nvme"
    assert [w["id"] for w in r.warnings] == ["ds-nvme-path"]


def test_knobs_only_where_they_differ():
    r = _imp({"train_micro_batch_size_per_gpu": 2,
              "zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8, "overlap_comm": False,
                                    "contiguous_gradients": True, "sub_group_size": "auto"}})
    # overlap False and contiguous True are stage 2's defaults; sub_group_size "auto" is dropped by DeepSpeed
    assert r.plan["deepspeed"] == {"reduce_bucket_size": 200_000_000}


def test_precision_and_optimizer():
    cases = [({"bf16": {"enabled": True}}, "bf16-mixed"), ({"fp16": {"enabled": True}}, "fp16-mixed"),
             ({}, "fp32"),
             ({"bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}},
              "bf16-pure")]
    for extra, prec in cases:
        cfg = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}, **extra}
        assert _imp(cfg).plan["precision"] == prec
    cfg = {"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Lion", "params": {"lr": 1e-4}}}
    assert _imp(cfg, {**BASE, "optimizer": "sgd"}).plan["optimizer"] == "lion"
    cfg = {"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Lamb"}}
    r = _imp(cfg, {**BASE, "optimizer": "sgd"})
    assert r.plan["optimizer"] == "sgd" and any(n["key"] == "optimizer.type" for n in r.not_represented)


def test_import_does_not_mutate_the_plan_object():
    plan = Plan.from_dict(BASE)
    r = _imp({"train_micro_batch_size_per_gpu": 7, "zero_optimization": {"stage": 3}}, plan)
    assert plan.micro_batch_size == 2 and plan.zero_stage == 2
    assert r.plan["micro_batch_size"] == 7 and r.plan["zero_stage"] == 3


# ---------------------------------------------------------------- round trip over the plan space
MODELS = ["llama-3.1-8b", "qwen2.5-0.5b", "mixtral-8x7b", "gpt2", "deepseek-v3"]
AUTO_OK = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")
INT_KNOBS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
             "stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size")


@st.composite
def expressible_plans(draw):
    stage = draw(st.integers(0, 3))
    gpn = draw(st.integers(1, 64))
    p = {"model": draw(st.sampled_from(MODELS)), "framework": "deepspeed", "zero_stage": stage,
         "gpus_per_node": gpn, "nodes": draw(st.integers(1, 16)),
         "offload_optimizer": "none" if stage == 0 else draw(st.sampled_from(["none", "cpu", "nvme"])),
         "offload_params": draw(st.sampled_from(["none", "cpu", "nvme"])) if stage == 3 else "none",
         "precision": draw(st.sampled_from(["bf16-mixed", "fp16-mixed", "fp32"] + (["bf16-pure"] if stage else []))),
         "optimizer": draw(st.sampled_from(["adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit",
                                            "adafactor", "sgd", "lion"])),
         "micro_batch_size": draw(st.integers(1, 64)), "gradient_accumulation_steps": draw(st.integers(1, 64)),
         "activation_checkpointing": draw(st.sampled_from(["none", "full", "selective"])),
         "activation_offloading": draw(st.booleans()),
         "method": draw(st.sampled_from(["full", "lora", "qlora"])), "seq_len": draw(st.integers(1, 32768))}
    knobs = {}
    for k in INT_KNOBS:
        choice = draw(st.sampled_from(["missing", "number"] + (["auto"] if k in AUTO_OK else [])))
        if choice == "number":
            knobs[k] = draw(st.integers(1, 2_000_000_000))
        elif choice == "auto":
            knobs[k] = "auto"
    for k in ("overlap_comm", "contiguous_gradients", "zero_init"):
        if draw(st.booleans()):
            knobs[k] = draw(st.booleans())
    if draw(st.booleans()):
        knobs["zero_hpz_partition_size"] = draw(st.integers(1, gpn))
    if draw(st.booleans()):
        knobs["gradient_clipping"] = draw(st.sampled_from([0.0, 0.3, 1.0, 2, 5.5]))
    p["deepspeed"] = knobs
    if p["precision"] == "bf16-pure" and p["offload_optimizer"] != "none":
        p["optimizer"] = "adamw"  # ZeRO needs DeepSpeedCPUAdam for bf16 master weights with offload
    return p


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressible_plans(), st.sampled_from(["explicit", "auto"]))
def test_round_trip_plan_ds_config_plan_is_identity(plan, style):
    text = json.dumps(ds_config(plan, style))
    back = import_ds_config(text, plan).plan
    assert Plan.from_dict(back) == Plan.from_dict(plan)


# ---------------------------------------------------------------- config.json
LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                "intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16,
                "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": True,
                "rope_scaling": {"factor": 32.0, "rope_type": "llama3"}, "torch_dtype": "bfloat16",
                "_name_or_path": "my-org/my-1b"}


def test_model_config_import():
    m = import_model_config(json.dumps(LLAMA_CONFIG))
    assert m["hidden_size"] == 2048 and m["name"] == "my-org/my-1b"
    p = apply_model_config(LLAMA_CONFIG, BASE)
    assert Plan.from_dict(p).model["num_hidden_layers"] == 16
    vl = {"model_type": "llava", "text_config": {k: v for k, v in LLAMA_CONFIG.items() if k != "_name_or_path"},
          "vision_config": {"model_type": "clip_vision_model"}}
    assert import_model_config(vl)["text_config"]["hidden_size"] == 2048
    # plan-v1 Extension 8: a composite is counted whole (here with CLIP's default tower) or refused by name,
    # never as its text tower alone
    with pytest.raises(ConfigImportError) as e:
        import_model_config({k: v for k, v in vl.items() if k != "vision_config"})
    assert "'llava'" in str(e.value)


def test_model_config_errors_name_the_field():
    with pytest.raises(ConfigImportError) as e:
        import_model_config('{"model_type": "llama", "hidden_size": 2048,')
    assert e.value.key == "config.json"
    bad = {**LLAMA_CONFIG, "num_hidden_layers": "sixteen"}
    with pytest.raises(ConfigImportError) as e:
        import_model_config(bad)
    assert e.value.key == "config.json.num_hidden_layers"
    missing = {k: v for k, v in LLAMA_CONFIG.items() if k != "hidden_size"}
    with pytest.raises(ConfigImportError) as e:
        import_model_config(missing)
    assert e.value.key == "config.json.hidden_size"
