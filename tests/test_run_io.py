"""The run's settings through the importers and exporters (plan-v1 Extension 5): read from the user's config
(HF TrainingArguments, DeepSpeed, FSDP), written back by the exports, and a plan -> config -> plan round trip."""
from __future__ import annotations

import json

from zerocalc import Plan, estimate
from zerocalc.exports import ds_config
from zerocalc.exports.accelerate import accelerate_config
from zerocalc.exports.hf import training_arguments_kwargs
from zerocalc.imports import import_config


def _imp(cfg: dict, plan=None):
    return import_config(json.dumps(cfg), plan or {})


def test_hf_eval_and_save_settings_are_read():
    r = _imp({"per_device_train_batch_size": 2, "eval_strategy": "steps", "eval_steps": 50,
              "per_device_eval_batch_size": 2, "eval_accumulation_steps": 4, "save_strategy": "no",
              "load_best_model_at_end": True, "resume_from_checkpoint": "out/checkpoint-100"})
    run = Plan.from_dict(r.plan).run
    assert (run.eval.batch_size, run.eval.every_steps, run.eval.accumulation_steps) == (2, 50, 4)
    assert run.save is None and run.load_best_at_end and run.resume


def test_hf_eval_batch_left_unset_is_the_trainers_default_8():
    r = _imp({"eval_strategy": "epoch", "per_device_train_batch_size": 1})
    p = Plan.from_dict(r.plan)
    assert p.run.eval.batch_size == "auto"
    assert "eval forward at batch 8" == estimate(p).to_dict()["run"]["phases"]["eval"]["note"]


def test_eval_batch_without_eval_strategy_has_no_effect():
    r = _imp({"per_device_eval_batch_size": 4})
    assert "run" not in r.plan or r.plan["run"].get("eval") is None
    assert any(n["key"] == "per_device_eval_batch_size" for n in r.not_represented)


def test_hf_arguments_round_trip():
    plan = Plan.from_dict({"framework": "single", "gpus_per_node": 1, "method": "lora",
                           "run": {"eval": {"batch_size": 2, "every_steps": 100, "accumulation_steps": 3},
                                   "save": {"every_steps": 250, "optimizer": False}, "load_best_at_end": True}})
    kw = training_arguments_kwargs(plan)
    assert (kw["eval_strategy"], kw["per_device_eval_batch_size"], kw["eval_accumulation_steps"]) == ("steps", 2, 3)
    assert (kw["save_steps"], kw["save_only_model"], kw["load_best_model_at_end"]) == (250, True, True)
    back = _imp({**kw, "use_peft": True, "bf16": True}, plan.to_dict())
    assert Plan.from_dict(back.plan).run == plan.run


def test_zero3_gather_flag_reads_and_writes_the_save_writer():
    base = {"framework": "deepspeed", "zero_stage": 3, "gpus_per_node": 8}
    cfg = ds_config(Plan.from_dict(base))
    assert cfg["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True   # the default writer
    off = {**base, "run": {"save": {"weights": "zero3-partitions"}}}
    cfg = ds_config(Plan.from_dict(off))
    assert cfg["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is False
    back = import_config(json.dumps(cfg), Plan.from_dict(base).to_dict()).plan
    assert Plan.from_dict(back).run.save.weights == "zero3-partitions"
    # the flag at its default changes nothing in the plan
    again = import_config(json.dumps(ds_config(Plan.from_dict(base))), Plan.from_dict(base).to_dict()).plan
    assert Plan.from_dict(again) == Plan.from_dict(base)


def test_fsdp_state_dict_type_is_read():
    cfg = {"fsdp": "full_shard auto_wrap", "fsdp_config": {"state_dict_type": "SHARDED_STATE_DICT"}, "bf16": True,
           "per_device_train_batch_size": 1}
    p = Plan.from_dict(_imp(cfg, {"gpus_per_node": 8}).plan)
    assert p.framework == "fsdp" and p.run.save.weights == "fsdp-sharded"     # FSDP1's default would be full
    full = Plan.from_dict({"framework": "fsdp", "zero_stage": 3, "run": {"save": {"weights": "fsdp-full"}}})
    assert accelerate_config(full)["fsdp_config"]["fsdp_state_dict_type"] == "FULL_STATE_DICT"
