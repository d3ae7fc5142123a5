"""ds_config export: hand-computed values (DeepSpeed 0.19.8 defaults, HF auto formulas), errors, notes."""
import json

import pytest

from zerocalc.exports import (ExportError, ds_config, ds_key_notes, ds_warnings, placeholders, run_export)


def test_batch_triple_is_micro_times_accumulation_times_world():
    # 2 micro x 4 accumulation x (8 GPUs/node x 2 nodes) = 2*4*16 = 128
    cfg = ds_config({"micro_batch_size": 2, "gradient_accumulation_steps": 4, "gpus_per_node": 8, "nodes": 2})
    assert cfg["train_batch_size"] == 128
    assert cfg["train_micro_batch_size_per_gpu"] == 2
    assert cfg["gradient_accumulation_steps"] == 4


def test_stage2_defaults_written_explicitly():
    z = ds_config({"zero_stage": 2})["zero_optimization"]
    # DeepSpeed 0.19.8: reduce_bucket_size 5e8, contiguous_gradients true, overlap_comm None -> False below stage 3
    assert z == {"stage": 2, "reduce_bucket_size": 500_000_000, "overlap_comm": False, "contiguous_gradients": True}


def test_stage3_defaults_written_explicitly():
    z = ds_config({"zero_stage": 3})["zero_optimization"]
    assert z["overlap_comm"] is True  # overlap_comm_valid: True at stage 3
    assert z["stage3_prefetch_bucket_size"] == 50_000_000
    assert z["stage3_param_persistence_threshold"] == 100_000
    assert z["stage3_max_live_parameters"] == 1_000_000_000
    assert z["stage3_max_reuse_distance"] == 1_000_000_000
    assert z["sub_group_size"] == 1_000_000_000
    assert "zero_hpz_partition_size" not in z  # only when the plan sets ZeRO++


def test_stage0_has_no_buffer_knobs():
    assert ds_config({"zero_stage": 0})["zero_optimization"] == {"stage": 0}


def test_auto_knobs_resolved_from_hidden_size_in_explicit_style():
    # llama-3.1-8b: h = 4096. HF: reduce h*h = 16,777,216; prefetch int(0.9*h*h) = int(15,099,494.4) = 15,099,494;
    # persistence 10*h = 40,960
    auto = {k: "auto" for k in ("reduce_bucket_size", "stage3_prefetch_bucket_size",
                                "stage3_param_persistence_threshold")}
    z = ds_config({"model": "llama-3.1-8b", "zero_stage": 3, "deepspeed": auto})["zero_optimization"]
    assert (z["reduce_bucket_size"], z["stage3_prefetch_bucket_size"], z["stage3_param_persistence_threshold"]) == \
        (16_777_216, 15_099_494, 40_960)
    # qwen2.5-0.5b: h = 896 -> 802,816 / int(722,534.4) = 722,534 / 8,960
    z = ds_config({"model": "qwen2.5-0.5b", "zero_stage": 3, "deepspeed": auto})["zero_optimization"]
    assert (z["reduce_bucket_size"], z["stage3_prefetch_bucket_size"], z["stage3_param_persistence_threshold"]) == \
        (802_816, 722_534, 8_960)


def test_auto_style_leaves_trainer_keys_auto_and_keeps_explicit_knobs():
    cfg = ds_config({"zero_stage": 3, "deepspeed": {"reduce_bucket_size": "auto", "sub_group_size": 123}}, "auto")
    for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
              "gradient_clipping"):
        assert cfg[k] == "auto"
    assert cfg["bf16"]["enabled"] == "auto" and cfg["fp16"]["enabled"] == "auto"
    assert cfg["optimizer"]["params"] == {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}
    z = cfg["zero_optimization"]
    assert z["reduce_bucket_size"] == "auto"
    assert z["stage3_prefetch_bucket_size"] == 50_000_000  # plan has no knob: DeepSpeed's default, not HF's
    assert z["sub_group_size"] == 123


def test_stage3_auto_knob_at_stage2_is_default_not_auto():
    # HF fills stage3_* only at stage 3; at stage 2 the plan's "auto" means DeepSpeed's default.
    cfg = ds_config({"zero_stage": 2, "deepspeed": {"reduce_bucket_size": "auto"}}, "auto")
    assert cfg["zero_optimization"]["reduce_bucket_size"] == "auto"


@pytest.mark.parametrize("prec,fp16,bf16", [
    ("bf16-mixed", False, {"enabled": True}),
    ("fp16-mixed", True, {"enabled": False}),
    ("fp32", False, {"enabled": False}),
    ("bf16-pure", False, {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}),
])
def test_precision_blocks(prec, fp16, bf16):
    cfg = ds_config({"precision": prec, "zero_stage": 2})
    assert cfg["fp16"]["enabled"] is fp16
    assert cfg["bf16"] == bf16
    if fp16:  # dynamic loss scaling written out
        assert cfg["fp16"]["loss_scale"] == 0 and cfg["fp16"]["initial_scale_power"] == 16


def test_offload_blocks_and_nvme_placeholder():
    cfg = ds_config({"zero_stage": 3, "offload_optimizer": "nvme", "offload_params": "cpu"})
    z = cfg["zero_optimization"]
    assert z["offload_optimizer"] == {"device": "nvme", "pin_memory": True, "nvme_path": "/local_nvme"}
    assert z["offload_param"] == {"device": "cpu", "pin_memory": True}
    assert placeholders(cfg) == ["zero_optimization.offload_optimizer.nvme_path"]
    assert any(w["id"] == "ds-nvme-path" for w in ds_warnings({"zero_stage": 3, "offload_optimizer": "nvme"}))


def test_optimizers():
    assert ds_config({"optimizer": "adamw"})["optimizer"]["type"] == "AdamW"
    assert ds_config({"optimizer": "lion"})["optimizer"]["type"] == "Lion"
    c = ds_config({"optimizer": "adamw-8bit", "zero_stage": 2, "offload_optimizer": "cpu"})
    assert "optimizer" not in c
    assert c["zero_allow_untested_optimizer"] is True and c["zero_force_ds_cpu_optimizer"] is False
    c = ds_config({"optimizer": "sgd", "zero_stage": 2})
    assert "optimizer" not in c and "zero_force_ds_cpu_optimizer" not in c


def test_zero_plus_plus_and_clipping():
    cfg = ds_config({"zero_stage": 3, "gpus_per_node": 8, "nodes": 4,
                     "deepspeed": {"zero_hpz_partition_size": 8, "gradient_clipping": 0.5}})
    assert cfg["zero_optimization"]["zero_hpz_partition_size"] == 8
    assert cfg["gradient_clipping"] == 0.5
    assert ds_config({})["gradient_clipping"] == 1.0  # GRADIENT_CLIPPING_DEFAULT in 0.19.8


def test_activation_checkpointing_block():
    cfg = ds_config({"activation_checkpointing": "full", "activation_offloading": True})
    assert cfg["activation_checkpointing"]["cpu_checkpointing"] is True
    assert "activation_checkpointing" not in ds_config({"activation_checkpointing": "selective"})


@pytest.mark.parametrize("plan,key", [
    ({"framework": "fsdp", "zero_stage": 3}, "framework"),
    ({"zero_stage": 0, "precision": "bf16-pure"}, "precision"),
    ({"zero_stage": 2, "offload_params": "cpu"}, "offload_params"),
    ({"optimizer_in_backward": True}, "optimizer_in_backward"),
    ({"zero_stage": 2, "precision": "bf16-pure", "offload_optimizer": "cpu", "optimizer": "lion"}, "optimizer"),
])
def test_inexpressible_plans_name_the_key(plan, key):
    with pytest.raises(ExportError) as e:
        ds_config(plan)
    assert e.value.key == key


def test_param_offload_below_stage3_is_warned():
    ws = ds_warnings({"zero_stage": 2, "offload_params": "cpu"})
    assert [w["id"] for w in ws] == ["ds-offload-param-ignored"]
    assert ws[0]["severity"] == "warning"
    assert ds_warnings({"zero_stage": 3}) == []


def test_run_export_ds_is_json():
    assert json.loads(run_export({}, "ds", "explicit"))["train_batch_size"] == 32  # 2*4*4
    with pytest.raises(ExportError):
        run_export({}, "yaml")


def test_key_notes_read_bytes_from_the_estimate():
    est = {"per_gpu": {"components": {"activations": 1000, "logits": 24, "weights": 7, "gradients": 5,
                                      "optimizer_states": 11},
                       "deepspeed_buffers": {"ipg_bucket": 2_000_000_000, "grad_partition": 5,
                                             "fp64_norm_copy": 17}},
           "host_per_node_bytes": 99}
    notes = {n["key"]: n for n in ds_key_notes({"zero_stage": 2, "offload_optimizer": "cpu"}, estimate=est)}
    assert notes["zero_optimization.reduce_bucket_size"]["bytes"] == 2_000_000_000
    assert notes["train_micro_batch_size_per_gpu"]["bytes"] == 1024  # activations 1000 + logits 24
    assert notes["zero_optimization.stage"]["bytes"] == 7 + 5 + 11
    assert notes["gradient_clipping"]["bytes"] == 17
    assert notes["train_batch_size"]["bytes"] == 0
    assert notes["zero_optimization.offload_optimizer.device"] == {
        "key": "zero_optimization.offload_optimizer.device", "value": "cpu", "what": notes[
            "zero_optimization.offload_optimizer.device"]["what"], "bytes": 99, "where": "host", "terms": ["host"],
        "placeholder": False}
    assert all(n["what"] for n in notes.values())
    # a term the estimate does not list costs nothing in this plan
    notes = {n["key"]: n for n in ds_key_notes({"zero_stage": 3}, estimate=est)}
    assert notes["zero_optimization.sub_group_size"]["bytes"] == 0


def test_key_notes_with_the_engine():
    from zerocalc import Plan
    from zerocalc.estimate import estimate
    plan = Plan.from_dict({"zero_stage": 3, "offload_optimizer": "nvme"})
    est = estimate(plan).to_dict()
    notes = {n["key"]: n for n in ds_key_notes(plan, est)}
    assert notes["zero_optimization.reduce_bucket_size"]["bytes"] == \
        est["per_gpu"]["deepspeed_buffers"].get("ipg_bucket", 0) > 0
    assert notes["zero_optimization.offload_optimizer.nvme_path"]["placeholder"] is True


def test_note_terms_are_engine_term_names():
    """Every buffer name the notes read is produced by the engine for some DeepSpeed plan."""
    from zerocalc import Plan
    from zerocalc.estimate import estimate
    from zerocalc.exports.ds_config import note_term_names
    seen = set()
    for st in (0, 1, 2, 3):
        for oo, op in (("none", "none"), ("cpu", "none"), ("nvme", "nvme"), ("cpu", "cpu")):
            if (st == 0 and oo != "none") or (st < 3 and op != "none"):
                continue
            p = {"zero_stage": st, "offload_optimizer": oo, "offload_params": op, "gpus_per_node": 8, "nodes": 2,
                 "deepspeed": {"zero_hpz_partition_size": 8} if st == 3 else {}}
            seen |= set(estimate(Plan.from_dict(p)).to_dict()["per_gpu"]["deepspeed_buffers"])
    # 12 ranks at ZeRO-2: the rank whose step holds the most is not the one with the largest gradient buffer
    p = {"zero_stage": 2, "gpus_per_node": 6, "nodes": 2}
    seen |= set(estimate(Plan.from_dict(p)).to_dict()["per_gpu"]["deepspeed_buffers"])
    assert note_term_names() - seen == set()


def test_export_warnings_leave_out_what_the_engine_says_itself():
    from zerocalc.exports import export_warnings
    plan = {"zero_stage": 3, "offload_optimizer": "nvme", "optimizer": "sgd", "activation_offloading": True}
    assert {w["id"] for w in ds_warnings(plan)} == {"ds-nvme-path", "ds-client-optimizer-offload",
                                                    "ds-activation-offload"}
    assert [w["id"] for w in export_warnings(plan)] == ["ds-client-optimizer-offload", "ds-activation-offload"]
    assert export_warnings({"framework": "fsdp", "zero_stage": 3, "activation_offloading": True}) == []
