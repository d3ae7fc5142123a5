"""export --to verl (exports/verl.py): the python3 -m verl.trainer.main_ppo overrides of an online plan, and the
round trip through imports/verl.py. The arithmetic of the hand-written command is in its comments."""
import json

import pytest
from hypothesis import assume, given, settings, strategies as st

from zerocalc import Plan, estimate
from zerocalc.cli import main
from zerocalc.exports import ExportError, run_export, verl_overrides
from zerocalc.imports import import_config
from zerocalc.post import resolve

# every key the export may write, as verl v0.7.0 names it (verl/trainer/config/_generated_ppo_trainer.yaml,
# read in the volcengine/verl mirror at tag v0.7.0); a key added to the export must be checked there first
A = "actor_rollout_ref."
VERL_070_KEYS = {
    "algorithm.adv_estimator", "data.max_prompt_length", "data.max_response_length", "data.train_batch_size",
    A + "model.path", A + "model.enable_gradient_checkpointing", A + "model.enable_activation_offload",
    A + "model.use_remove_padding", A + "model.lora_rank", A + "model.lora_alpha", A + "model.target_modules",
    A + "actor.strategy", A + "actor.ppo_mini_batch_size", A + "actor.ppo_micro_batch_size_per_gpu",
    A + "actor.use_kl_loss", A + "actor.fsdp_config.param_offload", A + "actor.fsdp_config.optimizer_offload",
    A + "actor.fsdp_config.offload_policy", A + "ref.log_prob_micro_batch_size_per_gpu",
    A + "actor.use_dynamic_bsz", A + "actor.ppo_max_token_len_per_gpu", A + "rollout.log_prob_use_dynamic_bsz",
    A + "rollout.log_prob_max_token_len_per_gpu", A + "ref.log_prob_use_dynamic_bsz",
    A + "ref.log_prob_max_token_len_per_gpu",
    A + "rollout.log_prob_micro_batch_size_per_gpu", A + "rollout.n", A + "rollout.name",
    A + "rollout.gpu_memory_utilization", A + "rollout.tensor_model_parallel_size", A + "rollout.free_cache_engine",
    A + "rollout.enforce_eager", A + "rollout.layered_summon", A + "rollout.load_format",
    "critic.model.path", "critic.strategy", "critic.ppo_micro_batch_size_per_gpu",
    "reward_model.enable", "reward_model.model.path", "trainer.n_gpus_per_node", "trainer.nnodes",
}

PPO = {"model": "llama-3.2-1b", "gpus_per_node": 4, "framework": "fsdp", "zero_stage": 3, "micro_batch_size": 2,
       "gradient_accumulation_steps": 4, "activation_checkpointing": "full",
       "post_training": {"method": "ppo", "trainer": "verl", "prompt_len": 256, "completion_len": 768,
                         "num_generations": 2, "reference": "cpu",
                         "generator": {"engine": "vllm", "gpu_memory_utilization": 0.4, "tensor_parallel_size": 2,
                                       "sleep": 2},
                         "offload_between_updates": {"weights": True, "optimizer": False}}}

# the mini-batch: 2 rows x 4 steps x 4 GPUs = 32 completions per update = 32 / rollout.n 2 = 16 prompts
# (verl: 16 x 2 // (4 GPUs // sp 1) = 8 per GPU = 4 micro-batches of 2); train_batch_size one mini-batch;
# reference cpu = use_kl_loss on a full actor; sleep 2 = free_cache_engine at verl 0.7.0 (VLLM_SLEEP_LEVEL 2);
# no packing: padded rows (use_remove_padding False, verl 0.7.0's default is True), log-prob passes of 2 rows
PPO_COMMAND = """\
# verl 0.7.0 (python3 -m verl.trainer.main_ppo): the plan's memory settings; data.train_files / val_files and the reward function are the run's own
python3 -m verl.trainer.main_ppo \\
  algorithm.adv_estimator=gae \\
  data.max_prompt_length=256 \\
  data.max_response_length=768 \\
  actor_rollout_ref.model.path=meta-llama/Llama-3.2-1B \\
  actor_rollout_ref.actor.strategy=fsdp \\
  actor_rollout_ref.actor.fsdp_config.param_offload=True \\
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \\
  actor_rollout_ref.model.enable_gradient_checkpointing=True \\
  actor_rollout_ref.model.lora_rank=0 \\
  data.train_batch_size=16 \\
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
  actor_rollout_ref.model.use_remove_padding=False \\
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\
  actor_rollout_ref.rollout.n=2 \\
  actor_rollout_ref.actor.use_kl_loss=True \\
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 \\
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 \\
  actor_rollout_ref.rollout.name=vllm \\
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \\
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
  actor_rollout_ref.rollout.free_cache_engine=True \\
  actor_rollout_ref.rollout.enforce_eager=False \\
  critic.model.path=meta-llama/Llama-3.2-1B \\
  critic.strategy=fsdp \\
  critic.ppo_micro_batch_size_per_gpu=2 \\
  trainer.n_gpus_per_node=4 \\
  trainer.nnodes=1
"""


def test_hand_written_ppo_command():
    assert run_export(PPO, "verl") == PPO_COMMAND


def test_hand_written_command_imports_back():
    res = import_config(PPO_COMMAND, {})
    assert res.format == "verl"
    pl = res.plan
    # 16 prompts x 2 / 4 GPUs = 8 rows per GPU / micro 2 = 4 steps
    assert (pl["micro_batch_size"], pl["gradient_accumulation_steps"], pl["gpus_per_node"]) == (2, 4, 4)
    pt = pl["post_training"]
    assert (pt["method"], pt["reference"], pt["prompt_len"], pt["completion_len"], pt["num_generations"]) == \
        ("ppo", "cpu", 256, 768, 2)
    assert pt["offload_between_updates"] == {"weights": True, "optimizer": False}
    assert pt["generator"]["sleep"] == 2 and pt["generator"]["gpu_memory_utilization"] == 0.4


def test_cli_exports_verl(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(PPO))
    assert main(["export", "--plan", str(f), "--to", "verl"]) == 0
    assert capsys.readouterr().out == PPO_COMMAND


def _plan(d: dict) -> Plan:
    return Plan.from_dict(d)


@settings(max_examples=40, deadline=None)
@given(method=st.sampled_from(["ppo", "grpo", "rloo"]), prompt=st.integers(16, 4096), completion=st.integers(16, 8192),
       n=st.sampled_from([1, 2, 4, 8]), util=st.sampled_from([0.3, 0.5, 0.85]), tp=st.sampled_from([1, 2]),
       sleep=st.booleans(), eager=st.booleans(), gpus=st.sampled_from([2, 4, 8]), nodes=st.sampled_from([1, 2]),
       micro=st.integers(1, 4), accum=st.integers(1, 4), lora=st.booleans(), layered=st.booleans(),
       all_linear=st.booleans(), offload=st.sampled_from(["none", "weights", "optimizer", "both", "fsdp2-cpu"]),
       ref=st.booleans(), model=st.sampled_from(["llama-3.2-1b", "qwen2.5-7b"]), ckpt=st.booleans(),
       packing=st.sampled_from([None, "rmpad", "update", "score", "both", "score-rows"]))
def test_export_to_verl_then_import_gives_the_plan_back(method, prompt, completion, n, util, tp, sleep, eager, gpus,
                                                        nodes, micro, accum, lora, layered, all_linear, offload, ref,
                                                        model, ckpt, packing):
    assume(micro * accum * gpus * nodes % n == 0)
    layered = layered and lora
    d = {"model": model, "gpus_per_node": gpus, "nodes": nodes, "framework": "fsdp", "zero_stage": 3,
         "micro_batch_size": micro, "gradient_accumulation_steps": accum,
         "activation_checkpointing": "full" if ckpt else "none", "method": "lora" if lora else "full"}
    if lora:
        targets = list(_plan({"model": model}).arch.linear_names()) if all_linear else ["q_proj", "v_proj"]
        d["lora"] = {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": targets}
    pt = {"method": method, "trainer": "verl", "prompt_len": prompt, "completion_len": completion,
          "num_generations": n, "reference": ("adapter-disabled" if lora else "cpu") if ref else "none",
          "generator": {"engine": "vllm", "mode": "colocate", "gpu_memory_utilization": util,
                        "tensor_parallel_size": tp, "sleep": (1 if layered else 2) if sleep else 0,
                        "enforce_eager": eager, "layered_summon": layered}}
    if offload == "fsdp2-cpu":
        d.update(offload_params="cpu", offload_optimizer="cpu", stack={"fsdp_version": 2})
    elif offload != "none":
        pt["offload_between_updates"] = {"weights": offload in ("weights", "both"),
                                         "optimizer": offload in ("optimizer", "both")}
    if method == "ppo":
        pt["value_model"] = {"model": model, "placement": "same-gpus"}
    length = prompt + completion
    pk = {None: None, "rmpad": {"remove_padding": True},
          "update": {"update_max_tokens": 2 * length},
          "score": {"remove_padding": True, "score_max_tokens": 3 * length},
          "both": {"remove_padding": True, "update_max_tokens": 2 * length, "score_max_tokens": 4 * length},
          "score-rows": {"score_micro_batch_size": 2 * micro}}[packing]
    if pk is not None:
        pt["packing"] = pk
    p = _plan({**d, "post_training": pt})
    if pk and "update_max_tokens" in pk and accum != 1:
        with pytest.raises(ExportError) as e:       # use_dynamic_bsz: the mini-batch is split by tokens only
            run_export(p, "verl")
        assert e.value.key == "gradient_accumulation_steps"
        return
    text = run_export(p, "verl")
    assert {k for k, _ in verl_overrides(p)[0]} <= VERL_070_KEYS
    q = _plan(import_config(text, {}).plan)
    # what the import reads back: verl requires the log-prob passes' rows (log_prob_micro_batch_size_per_gpu)
    # unless they split by tokens, so the plan's packing comes back with them said (None = micro_batch_size)
    pk = dict(pk or {})
    if "score_max_tokens" not in pk:
        pk.setdefault("score_micro_batch_size", micro)
    want = {**d, "post_training": {**pt, "packing": pk}}
    assert q.to_dict() == _plan(want).to_dict()
    # and the estimate is the plan's
    assert estimate(q, search_min_gpus=False).per_gpu.device_used == \
        estimate(p, search_min_gpus=False).per_gpu.device_used
    if packing is None:
        assert resolve(q).gen == resolve(p).gen and resolve(q).reference == resolve(p).reference


def test_another_trainers_plan_is_written_with_what_does_not_carry_over():
    trl = {"model": "llama-3.2-1b", "gpus_per_node": 4, "framework": "deepspeed", "zero_stage": 2,
           "micro_batch_size": 4, "gradient_accumulation_steps": 2, "method": "lora",
           "post_training": {"method": "grpo", "num_generations": 8, "steps_per_generation": 4,
                             "generator": {"engine": "vllm", "mode": "server", "gpus": 1}}}
    text = run_export(trl, "verl")
    # TRL's resolved numbers: 8 generations, completion 512, vLLM fraction 0.3 (GRPOConfig's default)
    assert "actor_rollout_ref.rollout.n=8" in text and "data.max_response_length=512" in text
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.3" in text
    # 4 x 2 x 4 GPUs = 32 completions / 8 = 4 prompts
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=4" in text
    for said in ("the plan runs trl", "does not carry over: framework", "steps_per_generation",
                 "does not carry over: post_training.generator.mode", "lora.dropout 0.05"):
        assert said in text, said
    assert import_config(text, {}).plan["post_training"]["trainer"] == "verl"


@pytest.mark.parametrize("change, key", [
    ({"framework": "deepspeed", "zero_stage": 3, "post_training": {**PPO["post_training"],
                                                                   "offload_between_updates": None}}, "framework"),
    ({"gradient_accumulation_steps": 3, "post_training": {**PPO["post_training"], "num_generations": 16}},
     "gradient_accumulation_steps"),             # 2 x 3 x 4 = 24 completions: not whole prompts of 16
    ({"post_training": {**PPO["post_training"], "generator": {"engine": "vllm", "sleep": 1}}},
     "post_training.generator.sleep"),           # verl 0.7.0 sleeps at level 2 unless layered_summon
    ({"post_training": {**PPO["post_training"], "generator": {"engine": "hf"}}}, "post_training.generator.engine"),
    ({"post_training": {**PPO["post_training"], "reference": "model"}}, "post_training.reference"),
    ({"offload_params": "cpu", "offload_optimizer": "cpu", "post_training": {**PPO["post_training"],
                                                                              "offload_between_updates": None}},
     "offload_params"),                          # FSDP1: verl's actor gets no CPUOffload
    ({"activation_checkpointing": "selective"}, "activation_checkpointing"),
])
def test_a_verl_plan_verl_cannot_run_names_the_key(change, key):
    with pytest.raises(ExportError) as e:
        run_export({**PPO, **change}, "verl")
    assert e.value.key == key


def test_hf_rollout_is_verl_05s_and_offline_methods_are_refused():
    old = {**PPO, "post_training": {**PPO["post_training"], "trainer_version": "0.5", "generator": {"engine": "hf"}}}
    assert "actor_rollout_ref.rollout.name=hf" in run_export(old, "verl")
    with pytest.raises(ExportError) as e:
        run_export({**PPO, "post_training": {"method": "dpo"}}, "verl")
    assert e.value.key == "post_training.method"


def test_custom_model_is_a_placeholder_path():
    cfg = {"name": "my model", "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 1000}
    text = run_export({**PPO, "model": cfg}, "verl")
    assert "MODEL_PATH=/path/to/my-model" in text and "actor_rollout_ref.model.path=$MODEL_PATH" in text
    assert "critic.model.path=$MODEL_PATH" in text


def test_lora_targets_are_a_quoted_hydra_list():
    lora = {**PPO, "method": "lora", "lora": {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "v_proj"]},
            "post_training": {**PPO["post_training"], "reference": "adapter-disabled"}}
    text = run_export(lora, "verl")
    assert "'actor_rollout_ref.model.target_modules=[q_proj,v_proj]'" in text
    assert import_config(text, {}).plan["lora"]["targets"] == ["q_proj", "v_proj"]


def test_packing_is_written_as_verl_reads_it():
    # remove-padding with token budgets: no ppo_micro_batch_size_per_gpu (use_dynamic_bsz never reads it), the
    # log-prob passes split by their own budget, for the reference too (a full one: ref.*); the micro-batch is the
    # mini-batch's rows: 8 rows x 1 step x 4 GPUs = 32 completions / n 2 = 16 prompts
    d = {**PPO, "micro_batch_size": 8, "gradient_accumulation_steps": 1,
         "post_training": {**PPO["post_training"],
                           "packing": {"remove_padding": True, "update_max_tokens": 4096, "score_max_tokens": 8192}}}
    lines = run_export(d, "verl").splitlines()
    for want in ("actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.model.use_remove_padding=True",
                 "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
                 "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
                 "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192",
                 "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=8192"):
        assert f"  {want} \\" in lines, want
    assert not any("micro_batch_size_per_gpu" in line for line in lines)
    assert import_config("\n".join(lines), {}).plan["post_training"]["packing"] == \
        {"remove_padding": True, "update_max_tokens": 4096, "score_max_tokens": 8192}
