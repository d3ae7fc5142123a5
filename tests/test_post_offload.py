"""post_training.offload_between_updates (plan-v1 Extension 7, post/offload.py): the training state a trainer moves
to the host outside the update step. verl (v0.5.0 fsdp_workers.py / fsdp_utils.py), ms-swift (v4.5.2
rollout_mixin.py `offload_context`) and OpenRLHF (v0.9.5 deepspeed_utils.py `offload_deepspeed_states`); each
figure below is written out from the model's parameter count, not copied from the engine."""
from __future__ import annotations

import json

import pytest

from zerocalc.cli import main
from zerocalc.estimate import estimate
from zerocalc.imports import import_config
from zerocalc.plan import Plan, PlanError

# Llama 3.2 1B: 1,235,814,400 parameters; 4 GPUs
P, N = 1_235_814_400, 4
VLLM = {"engine": "vllm", "sleep": 1}


def plan(pt, **kw) -> Plan:
    d = {"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": N, "framework": "fsdp",
         "zero_stage": 3, "micro_batch_size": 2, "gradient_accumulation_steps": 4, "seq_len": 1024,
         "activation_checkpointing": "full", "post_training": pt}
    d.update(kw)
    return Plan.from_dict(d)


def verl(offload=None, version="0.5.0", **kw) -> Plan:
    pt = {"method": "grpo", "trainer": "verl", "generator": VLLM, "trainer_version": version}
    if offload is not None:
        pt["offload_between_updates"] = offload
    return plan(pt, **kw)


def phases(p: Plan) -> dict:
    return estimate(p).run.phases


# verl's actor: fp32 FlatParameter shards (4 B / param / GPU) and AdamW's two fp32 moments (8 B), FULL_SHARD
VERL_WEIGHTS = 4 * P // N                # 1,235,814,400
VERL_MOMENTS = 8 * P // N                # 2,471,628,800


def test_verl_param_and_optimizer_offload():
    base, off = phases(verl()), phases(verl({"weights": True, "optimizer": True}))
    # the update step: load_fsdp_model_to_gpu / load_fsdp_optimizer before update_actor: nothing differs
    assert off["step"] == base["step"]
    # generate: offload_fsdp_model_to_cpu after the sync, the optimizer still on the host since update_actor
    g, g0 = off["generate"], base["generate"]
    assert g.allocated == g0.allocated - VERL_WEIGHTS - VERL_MOMENTS
    assert "weights" not in g.components and "optimizer_states" not in g.components
    assert g0.components["weights"] == VERL_WEIGHTS and g0.components["optimizer_states"] == VERL_MOMENTS
    # the host holds both, pageable (`.to("cpu")`): 1,235,814,400 + 2,471,628,800 = 3,707,443,200
    assert g.host == g0.host + 3_707_443_200
    # and the offload's empty_cache() leaves nothing of the step's cache: reserved is what generate allocates
    assert g.reserved < g0.reserved
    # the sync loads the weights for state_dict() (0.5 sharding manager __enter__: load_fsdp_model_to_gpu, then
    # offloaded after update_params, so the shard is there at each of the sync's moments), the optimizer stays away
    s, s0 = off["sync"], base["sync"]
    assert s.allocated == s0.allocated - VERL_MOMENTS and s.host == s0.host + VERL_MOMENTS
    # compute_log_prob loads the weights again; optimizer_offload keeps the moments on the host
    assert off["score"].allocated == base["score"].allocated - VERL_MOMENTS


def test_verl_optimizer_offload_alone_keeps_the_weights():
    base, off = phases(verl()), phases(verl({"optimizer": True}))
    assert off["step"] == base["step"]
    for name in ("sync", "generate", "score"):
        assert off[name].allocated == base[name].allocated - VERL_MOMENTS, name
        assert off[name].components["weights"] == base[name].components["weights"] >= VERL_WEIGHTS
    # offload_fsdp_optimizer calls no empty_cache(), but the sync ends with one (sharding manager): the generate's
    # reserve drops with its allocation
    assert off["generate"].reserved == base["generate"].reserved - VERL_MOMENTS


def test_verl_lora_offload_moves_base_and_adapters():
    base = phases(verl(method="lora"))
    off = phases(verl({"weights": True}, method="lora"))
    # the FSDP module holds verl's fp32 base shard (4 B x P / 4 = 1,235,814,400) and the adapters' fp32 shards
    g, g0 = off["generate"], base["generate"]
    assert g0.components["weights"] == 4 * P // N
    assert "weights" not in g.components
    assert g.allocated < g0.allocated - 4 * P // N
    assert off["step"] == base["step"]


def test_swift_offload_model_under_zero3():
    pt = {"method": "grpo", "trainer": "ms-swift", "generator": VLLM}
    kw = {"framework": "deepspeed", "zero_stage": 3}
    base = phases(plan(pt, **kw))
    off = phases(plan({**pt, "offload_between_updates": {"weights": True, "optimizer": True}}, **kw))
    # offload_model: the reference's own ZeRO-3 partitions (2 B x P / 4 = 617,907,200) leave; the trainable 16-bit
    # partition is a view of fp16_partitioned_groups_flat and stays. offload_optimizer: optimizer.state's moments
    # (8 B x P / 4 = 2,471,628,800); DeepSpeed's fp32 master (4 B x P / 4) is not in it and stays
    ref, moments = 2 * P // N, 8 * P // N
    g, g0 = off["generate"], base["generate"]
    assert g.allocated == g0.allocated - ref - moments
    assert g.components["weights"] == g0.components["weights"] - ref == 2 * P // N
    assert g.components["optimizer_states"] == 4 * P // N           # the fp32 master alone
    assert g.host == g0.host + ref + moments
    # around the generation only (after _move_model_to_vllm, reloaded before scoring)
    for name in ("sync", "score", "step"):
        assert off[name] == base[name], name


def test_openrlhf_deepspeed_sleep_keeps_the_16bit_weights():
    pt = {"method": "grpo", "trainer": "openrlhf", "generator": VLLM}
    kw = {"framework": "deepspeed", "zero_stage": 3}
    base = phases(plan(pt, **kw))
    off = phases(plan({**pt, "offload_between_updates": {"optimizer": True}}, **kw))
    # offload_deepspeed_states: optim_states 8P/4, hp_params 4P/4, lp_grads 2P/4, the ipg bucket (DeepSpeed's
    # reduce_bucket_size 5e8 x 2 B = 1,000,000,000, freed to "meta"); lp_params (2P/4) stay
    moved = 8 * P // N + 4 * P // N + 2 * P // N + 1_000_000_000
    for name in ("sync", "generate", "score"):
        assert off[name].allocated == base[name].allocated - moved, name
        assert off[name].components["weights"] == base[name].components["weights"]
    # pinned buffers, each rounded to a power of two: 2^32 + 2^31 + 2^30 (the bucket has no host copy)
    assert off["generate"].host == base["generate"].host + 2**32 + 2**31 + 2**30
    assert off["step"] == base["step"]


def test_openrlhf_sleep_with_adam_offload_moves_nothing():
    pt = {"method": "grpo", "trainer": "openrlhf", "generator": VLLM}
    kw = {"framework": "deepspeed", "zero_stage": 3, "offload_optimizer": "cpu"}
    assert phases(plan({**pt, "offload_between_updates": {"optimizer": True}}, **kw)) == phases(plan(pt, **kw))


def test_absent_and_null_are_todays_plan():
    a = verl()
    assert verl(None) == a and a.post_training.offload_between_updates is None
    p = verl({"weights": True})
    assert Plan.from_dict(p.to_dict()) == p
    assert p.to_dict()["post_training"]["offload_between_updates"] == {"weights": True, "optimizer": False}


BAD = [
    ({"weights": "yes"}, "post_training.offload_between_updates.weights", {}),
    ({"params": True}, "post_training.offload_between_updates.params", {}),
    ([], "post_training.offload_between_updates", {}),
    ({"weights": True}, "post_training.offload_between_updates", {"framework": "deepspeed"}),
    ({"weights": True}, "post_training.offload_between_updates", {"offload_params": "cpu", "offload_optimizer": "cpu"}),
]


@pytest.mark.parametrize("case", BAD)
def test_bad_values_name_the_key_and_exit_2(case, tmp_path, capsys):
    o, key, kw = case
    with pytest.raises(PlanError) as e:
        verl(o, **kw)
    assert e.value.key == key
    f = tmp_path / "plan.json"
    d = {"model": "llama-3.2-1b", "gpus_per_node": N, "framework": "fsdp", "zero_stage": 3, "micro_batch_size": 2,
         "gradient_accumulation_steps": 4, **kw,
         "post_training": {"method": "grpo", "trainer": "verl", "generator": VLLM, "offload_between_updates": o}}
    f.write_text(json.dumps(d))
    assert main(["estimate", "--plan", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and key in err and "Traceback" not in err


@pytest.mark.parametrize("pt,kw,key", [
    ({"method": "dpo", "trainer": "ms-swift"}, {}, ""),                                  # offline: no rollout
    ({"method": "grpo", "trainer": "trl", "generator": VLLM}, {}, ""),                    # TRL has no such switch
    ({"method": "grpo", "trainer": "ms-swift"}, {}, ""),                                   # HF generate
    ({"method": "grpo", "trainer": "openrlhf", "generator": VLLM}, {"framework": "deepspeed", "zero_stage": 2}, ""),
    ({"method": "grpo", "trainer": "openrlhf", "generator": VLLM}, {"framework": "deepspeed"}, ".weights"),
])
def test_refused_where_the_trainer_has_no_such_offload(pt, kw, key):
    o = {"weights": True, "optimizer": True} if key else {"optimizer": True}
    with pytest.raises(PlanError) as e:
        plan({**pt, "offload_between_updates": o}, **{"zero_stage": 3, **kw})
    assert e.value.key == "post_training.offload_between_updates" + key


# ---------------------------------------------------------------- importers

VERL = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.n_gpus_per_node=4 "
        "actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=32 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 ")


def test_verl_flags_are_offload_between_updates_not_fsdp_cpu_offload():
    res = import_config(VERL + "actor_rollout_ref.actor.fsdp_config.param_offload=True "
                               "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True\n", {})
    assert res.plan["offload_params"] == "none" and res.plan["offload_optimizer"] == "none"
    assert res.plan["post_training"]["offload_between_updates"] == {"weights": True, "optimizer": True}
    Plan.from_dict(res.plan)
    res = import_config(VERL + "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True\n", {})
    assert res.plan["post_training"]["offload_between_updates"] == {"weights": False, "optimizer": True}
    res = import_config(VERL + "actor_rollout_ref.actor.fsdp_config.param_offload=False\n", {})
    assert "offload_between_updates" not in res.plan["post_training"]


def test_verl_fsdp2_offload_policy_is_the_real_cpu_offload():
    res = import_config(VERL + "actor_rollout_ref.actor.strategy=fsdp2 actor_rollout_ref.actor.fsdp_config."
                               "offload_policy=True actor_rollout_ref.actor.fsdp_config.param_offload=True\n", {})
    assert res.plan["offload_params"] == "cpu" and res.plan["offload_optimizer"] == "cpu"
    assert "offload_between_updates" not in res.plan["post_training"]
    skipped = {s["key"] for s in res.not_represented}
    assert "actor_rollout_ref.actor.fsdp_config.param_offload" in skipped       # turned off by offload_policy
    Plan.from_dict(res.plan)
    # FSDP1's builder never reads offload_policy
    res = import_config(VERL + "actor_rollout_ref.actor.fsdp_config.offload_policy=True\n", {})
    assert res.plan["offload_params"] == "none"


SWIFT = ("NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --train_type full "
         "--deepspeed zero3 --per_device_train_batch_size 4 --num_generations 8 --gradient_accumulation_steps 2 "
         "--offload_model true --offload_optimizer true")


def test_swift_offload_flags():
    res = import_config(SWIFT + " --use_vllm true --vllm_mode colocate --sleep_level 1\n", {})
    assert res.plan["post_training"]["offload_between_updates"] == {"weights": True, "optimizer": True}
    assert res.plan["offload_params"] == "none"
    Plan.from_dict(res.plan)
    # HF generate: enable_offload is set in the colocate-vLLM branch only
    res = import_config(SWIFT + "\n", {})
    assert "offload_between_updates" not in res.plan["post_training"]
    assert {s["key"] for s in res.not_represented} >= {"offload_model", "offload_optimizer"}


ORL = ("ray job submit -- python3 -m openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --actor_num_gpus_per_node 4 "
       "--vllm_num_engines 4 --colocate_all_models --vllm_enable_sleep --pretrain meta-llama/Llama-3.1-8B-Instruct "
       "--micro_train_batch_size 4 --train_batch_size 64 --rollout_batch_size 64 --n_samples_per_prompt 4 "
       "--advantage_estimator group_norm --bf16 --gradient_checkpointing --deepspeed_enable_sleep")


def test_openrlhf_deepspeed_enable_sleep():
    res = import_config(ORL + " --zero_stage 3\n", {})
    assert res.plan["post_training"]["offload_between_updates"] == {"weights": False, "optimizer": True}
    Plan.from_dict(res.plan)
    # ZeRO-2: offload_deepspeed_states raises for DeepSpeed <= 0.17.5; reported, not mapped
    res = import_config(ORL + " --zero_stage 2\n", {})
    assert "offload_between_updates" not in res.plan["post_training"]
    assert any(s["key"] == "deepspeed_enable_sleep" for s in res.not_represented)
    # adam_offload: the function returns at once
    res = import_config(ORL + " --zero_stage 3 --adam_offload\n", {})
    assert "offload_between_updates" not in res.plan["post_training"]
