"""Post-training importers (issue 22): pasted command lines (cmdline.py) for verl, OpenRLHF, ms-swift and TRL, the
verl / ms-swift YAML layouts, LLaMA-Factory's stages. Hand-written cases with the arithmetic in the comments; the
real files are in tests/test_imports_real.py."""
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from zerocalc.imports import ConfigImportError, import_config
from zerocalc.imports.cmdline import looks_like_command, parse_command, typed
from zerocalc.imports.builder import NOT_MODELLED

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "data", "configs", "real")


# ---------------------------------------------------------------- the command-line reader

def test_parse_flags_values_lists_and_hydra():
    text = ("N=4\nexport LR=1e-6\n"
            "CUDA_VISIBLE_DEVICES=0,1,2 \\\n  python3 -m verl.trainer.main_ppo \\\n"
            "  # a comment inside the command\n"
            "  data.max_prompt_length=256 +actor_rollout_ref.rollout.n=$N \\\n"
            "  --flag --k=v --many a b, c --lr ${LR} --gone $UNSET --dflt ${X:-7}\n")
    cmd = parse_command(text)
    assert cmd.program == "verl"
    assert cmd.overrides == {"data": {"max_prompt_length": 256}, "actor_rollout_ref": {"rollout": {"n": 4}}}
    assert cmd.options == {"flag": True, "k": "v", "many": ["a", "b", "c"], "lr": 1e-6, "dflt": 7}
    assert cmd.unresolved == {"gone": "$UNSET"}
    assert (cmd.launcher_gpus, cmd.launcher_key) == (3, "CUDA_VISIBLE_DEVICES")     # 0,1,2: three devices


def test_typed_values():
    assert [typed(v) for v in ("True", "false", "null", "8", "0.6", "5e-7", "'q'", "abc")] == \
        [True, False, None, 8, 0.6, 5e-7, "q", "abc"]


def test_launcher_options_are_not_the_scripts():
    cmd = parse_command("accelerate launch --config_file z3.yaml --num_processes 8 trl/scripts/dpo.py "
                        "--beta 0.1 --per_device_train_batch_size 2\n")
    assert cmd.launcher == {"config_file": "z3.yaml", "num_processes": "8"}
    assert cmd.options == {"beta": 0.1, "per_device_train_batch_size": 2}
    assert cmd.launcher_gpus == 8


def test_yaml_and_json_are_not_commands():
    assert not looks_like_command('{"beta": 0.1}')
    assert not looks_like_command("stage: dpo\nfinetuning_type: lora\n")
    assert looks_like_command("swift rlhf --rlhf_type dpo --model Qwen/Qwen2.5-7B")
    assert not looks_like_command("base_model: x\nextra_args: --foo 1 --bar 2\n- item: --a --b\n")


# ---------------------------------------------------------------- TRL flags

def test_trl_grpo_flags():
    # 2 GPUs x micro 4 x steps_per_generation (= accumulation 2) = 16 completions, divisible by 8 generations
    res = import_config("accelerate launch --num_processes 2 trl/scripts/grpo.py --per_device_train_batch_size 4 "
                        "--gradient_accumulation_steps 2 --num_generations 8 --use_vllm --vllm_mode colocate "
                        "--vllm_gpu_memory_utilization 0.4 --max_prompt_length 256 --max_completion_length 768 "
                        "--vllm_enable_sleep_mode true\n", {})
    pt = res.plan["post_training"]
    assert res.format == "trl" and res.plan["gpus_per_node"] == 2
    assert (pt["method"], pt["num_generations"], pt["prompt_len"], pt["completion_len"]) == ("grpo", 8, 256, 768)
    assert pt["generator"]["gpu_memory_utilization"] == 0.4 and pt["generator"]["sleep"] == 2


def test_trl_generation_batch_rule_names_the_key():
    # 1 GPU x micro 3 x 1 = 3 completions: not divisible by 8 -> refused naming num_generations
    with pytest.raises(ConfigImportError) as e:
        import_config("trl grpo --per_device_train_batch_size 3 --num_generations 8 --num_processes 1 "
                      "--use_vllm\n", {"gpus_per_node": 1})
    assert e.value.key == "num_generations"


def test_trl_dpo_flags_precompute_and_lengths():
    # max_length 2048 with max_prompt_length 1536 -> completion 2048 - 1536 = 512
    res = import_config("trl dpo --model_name_or_path Qwen/Qwen2.5-7B --beta 0.1 --max_length 2048 "
                        "--max_prompt_length 1536 --precompute_ref_log_probs\n", {})
    pt = res.plan["post_training"]
    assert (pt["method"], pt["prompt_len"], pt["completion_len"], pt["reference"]) == ("dpo", 1536, 512, "precomputed")


@pytest.mark.parametrize("flags, ckpt, precision", [
    ("", "full", "bf16-mixed"),                                   # TRL's defaults: gradient_checkpointing, bf16 on
    ("--gradient_checkpointing false ", "none", "bf16-mixed"),
    ("--fp16 true ", "full", "fp16-mixed"),                       # bf16 = not fp16
    ("--bf16 false ", "full", "fp32"),
])
def test_trl_post_configs_take_trls_checkpointing_and_bf16_defaults(flags, ckpt, precision):
    # trl/trainer/base_config.py (v1.9.0) `_BaseConfig`: gradient_checkpointing True (since v0.22.0, #3510) and
    # bf16 = not fp16 (since v0.19.0) for DPOConfig and GRPOConfig as for SFTConfig, not transformers' off / off
    for cmd in ("trl dpo --model_name_or_path Qwen/Qwen2.5-0.5B --beta 0.1 ",
                "trl grpo --model_name_or_path Qwen/Qwen2.5-0.5B --num_generations 4 --per_device_train_batch_size 4 "):
        p = import_config(cmd + flags + "\n", {"gpus_per_node": 1}).plan
        assert (p["activation_checkpointing"], p["precision"]) == (ckpt, precision), cmd + flags


def test_trl_orpo_script_is_orpo():
    res = import_config("accelerate launch examples/scripts/orpo.py --beta 0.1 --max_length 1024 "
                        "--per_device_train_batch_size 2\n", {})
    assert res.plan["post_training"]["method"] == "orpo"


# ---------------------------------------------------------------- verl

VERL = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.n_gpus_per_node=4 "
        "actor_rollout_ref.rollout.n=8 actor_rollout_ref.actor.ppo_mini_batch_size=32 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 actor_rollout_ref.rollout.gpu_memory_utilization=0.7 "
        "actor_rollout_ref.rollout.free_cache_engine=False actor_rollout_ref.actor.fsdp_config.param_offload=True\n")


def test_verl_overrides():
    res = import_config(VERL, {})
    pt = res.plan["post_training"]
    # accumulation: 32 prompts x 8 / 4 GPUs = 64 per GPU / 16 = 4
    assert res.plan["micro_batch_size"] == 16 and res.plan["gradient_accumulation_steps"] == 4
    assert pt["reference"] == "none"                      # neither use_kl_loss nor use_kl_in_reward
    assert pt["generator"]["sleep"] == 0 and pt["generator"]["tensor_parallel_size"] == 2   # rollout.yaml TP 2
    # param_offload is verl's offload between updates, not FSDP CPUOffload (fsdp_workers.py v0.5.0)
    assert res.plan["offload_params"] == "none" and res.plan["framework"] == "fsdp"
    assert pt["offload_between_updates"] == {"weights": True, "optimizer": False}


def test_verl_yaml_layout_detected():
    yaml = ("actor_rollout_ref:\n  model:\n    path: Qwen/Qwen2.5-7B\n  rollout:\n    n: 4\n"
            "  actor:\n    ppo_micro_batch_size_per_gpu: 2\n    ppo_mini_batch_size: 8\n"
            "algorithm:\n  adv_estimator: rloo\ntrainer:\n  n_gpus_per_node: 8\n")
    res = import_config(yaml, {})
    assert res.format == "verl" and res.plan["model"] == "qwen2.5-7b"
    assert res.plan["post_training"]["method"] == "rloo"
    assert res.plan["gradient_accumulation_steps"] == 2          # 8 x 4 / 8 GPUs = 4 per GPU / 2


def test_verl_bad_tensor_parallel_names_the_key():
    with pytest.raises(ConfigImportError) as e:
        import_config(VERL.replace("trainer.n_gpus_per_node=4", "trainer.n_gpus_per_node=3"), {})
    # 3 GPUs: the mini-batch 32 x 8 / 3 is not whole (reported), TP 2 does not divide 3 (refused)
    assert e.value.key == "actor_rollout_ref.rollout.tensor_model_parallel_size"


# ---------------------------------------------------------------- OpenRLHF, ms-swift, LLaMA-Factory

def test_openrlhf_server_engines_and_no_reference():
    res = import_config("python3 -m openrlhf.cli.train_ppo_ray --advantage_estimator rloo --n_samples_per_prompt 4 "
                        "--vllm_num_engines 2 --vllm_tensor_parallel_size 2 --init_kl_coef 0 "
                        "--actor_num_gpus_per_node 4 --micro_train_batch_size 2 --train_batch_size 64\n", {})
    pt = res.plan["post_training"]
    assert pt["method"] == "rloo" and pt["reference"] == "none" and pt["num_generations"] == 4
    assert pt["generator"]["mode"] == "server" and pt["generator"]["gpus"] == 4      # 2 engines x TP 2
    assert res.plan["gradient_accumulation_steps"] == 8                              # 64 / (2 x 4)


def test_openrlhf_lora_dpo():
    res = import_config("torchrun --nproc_per_node 2 -m openrlhf.cli.train_dpo --lora_rank 16 --ref_offload "
                        "--max_len 2048 --micro_train_batch_size 2 --train_batch_size 8 --bf16\n", {})
    p = res.plan
    assert p["method"] == "lora" and p["lora"]["rank"] == 16 and p["lora"]["alpha"] == 16   # OpenRLHF alpha 16
    assert p["post_training"]["reference"] == "cpu" and p["gpus_per_node"] == 2
    assert p["gradient_accumulation_steps"] == 2                                     # 8 / (2 x 2)


def test_openrlhf_011_dotted_flags():
    # OpenRLHF v0.11.0 train_ppo_ray.py: the same options in dotted groups; --data.max_len is prompt + response
    # (4096 - 3072 new tokens = 1024 of prompt); 128 / (2 micro x 8 GPUs) = 8 accumulation steps; the report
    # names the flags as written
    res = import_config("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path meta-llama/Llama-3.1-8B "
                        "--algo.advantage.estimator group_norm --rollout.n_samples_per_prompt 8 --ds.zero_stage 3 "
                        "--vllm.num_engines 4 --vllm.tensor_parallel_size 2 --train.micro_batch_size 2 "
                        "--train.batch_size 128 --data.max_len 4096 --rollout.max_new_tokens 3072 "
                        "--algo.kl.init_coef 0 --ds.lora.rank 16 --actor.gradient_checkpointing_enable "
                        "--ds.packing_samples\n", {})
    p, pt = res.plan, res.plan["post_training"]
    assert (pt["method"], pt["num_generations"], pt["reference"]) == ("grpo", 8, "none")
    assert (pt["prompt_len"], pt["completion_len"]) == (1024, 3072)
    assert pt["generator"]["mode"] == "server" and pt["generator"]["gpus"] == 8          # 4 engines x TP 2
    assert (p["zero_stage"], p["micro_batch_size"], p["gradient_accumulation_steps"]) == (3, 2, 8)
    assert p["method"] == "lora" and p["lora"]["rank"] == 16 and p["activation_checkpointing"] == "full"
    applied = {a["key"] for a in res.applied}
    assert {"ds.zero_stage", "train.micro_batch_size", "rollout.max_new_tokens"} <= applied
    assert "ds.packing_samples" in {n["key"] for n in res.not_represented}             # reported, not guessed
    assert not any(w["id"] == "openrlhf-dtype" for w in res.warnings)                  # 0.11: --ds.param_dtype bf16


def test_openrlhf_011_defaults():
    # 0.11's changed defaults: --train.micro_batch_size 1, --data.max_len 2048 as two halves when
    # --rollout.max_new_tokens is left to max_len - prompt_len; DPO's --ref.offload puts the reference on the CPU
    ppo = import_config("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path meta-llama/Llama-3.1-8B "
                        "--ds.zero_stage 2\n", {}).plan
    assert ppo["micro_batch_size"] == 1
    assert (ppo["post_training"]["prompt_len"], ppo["post_training"]["completion_len"]) == (1024, 1024)
    dpo = import_config("torchrun --nproc_per_node 2 -m openrlhf.cli.train_dpo --model.model_name_or_path "
                        "meta-llama/Llama-3.1-8B --ref.offload --data.max_len 2048 --train.micro_batch_size 2 "
                        "--train.batch_size 8 --model.ipo_enable\n", {}).plan
    assert dpo["post_training"]["method"] == "ipo" and dpo["post_training"]["reference"] == "cpu"
    assert dpo["gradient_accumulation_steps"] == 2                                     # 8 / (2 x 2)


def test_swift_unmodelled_rlhf_type_is_reported_not_guessed():
    res = import_config("swift rlhf --rlhf_type gkd --model Qwen/Qwen2.5-7B\n", {})
    assert res.plan.get("post_training") is None
    assert [n["reason"] for n in res.not_represented if n["key"] == "rlhf_type"][0].startswith("changes memory")


def test_swift_yaml_full_zero3_offload():
    res = import_config("rlhf_type: simpo\ntrain_type: full\ndeepspeed: zero3_offload\nmax_length: 4096\n", {})
    p = res.plan
    assert res.format == "ms-swift" and p["post_training"]["method"] == "simpo"
    assert (p["framework"], p["zero_stage"], p["offload_params"], p["offload_optimizer"]) == \
        ("deepspeed", 3, "cpu", "cpu")
    assert (p["post_training"]["prompt_len"], p["post_training"]["completion_len"]) == (2048, 2048)


@pytest.mark.parametrize("loss,method", [("sigmoid", "dpo"), ("orpo", "orpo"), ("simpo", "simpo"), ("ipo", "ipo")])
def test_llamafactory_pref_loss(loss, method):
    res = import_config(f"stage: dpo\nfinetuning_type: lora\npref_loss: {loss}\ncutoff_len: 3000\n", {})
    pt = res.plan["post_training"]
    assert pt["method"] == method and (pt["prompt_len"], pt["completion_len"]) == (1500, 1500)


def test_llamafactory_separate_reference_is_a_model():
    res = import_config("stage: dpo\nfinetuning_type: lora\nref_model: meta-llama/Llama-3.1-8B\n", {})
    assert res.plan["post_training"]["reference"] == "model"


# ---------------------------------------------------------------- CLI and report

def test_cli_reads_a_command_and_reports_on_stderr(tmp_path):
    f = tmp_path / "run.sh"
    f.write_text(VERL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(HERE, "..", "py"), os.path.join(HERE, "..")])}
    out = subprocess.run([sys.executable, "-m", "zerocalc", "import", "--config", str(f)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["post_training"]["method"] == "grpo"
    assert "format: verl" in out.stderr and "mapped: 9 keys" in out.stderr   # 8 overrides + the program (trainer verl)
    bad = tmp_path / "bad.sh"
    bad.write_text(VERL.replace("trainer.n_gpus_per_node=4", "trainer.n_gpus_per_node=3"))
    out = subprocess.run([sys.executable, "-m", "zerocalc", "import", "--config", str(bad)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2 and "tensor_model_parallel_size" in out.stderr


def test_report_names_every_option():
    res = import_config(VERL, {})
    named = {a["key"] for a in res.applied} | {n["key"] for n in res.not_represented}
    for k in ("actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
              "actor_rollout_ref.rollout.free_cache_engine", "trainer.n_gpus_per_node"):
        assert k in named, k
    assert res.report["format"] == "verl" and res.detection["confidence"] >= 0.9


# ---------------------------------------------------------------- mangled real command lines: never a traceback

_SH = sorted(f for f in os.listdir(REAL) if f.endswith(".sh"))
_ODD = st.sampled_from(["", "x", "-1", "0", "2.5", "true", "null", "[1,2]", "$NOPE", "1e99", "auto", "'a b'"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(_SH), data=st.data())
def test_mangled_commands_refuse_with_a_key_or_import(name, data):
    lines = open(os.path.join(REAL, name), encoding="utf-8").read().split("\n")
    idx = [i for i, ln in enumerate(lines) if ("--" in ln or "=" in ln) and not ln.lstrip().startswith("#")]
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.sampled_from(idx))
        ln = lines[i].rstrip(" \\")
        odd = data.draw(_ODD)
        if "=" in ln and "--" not in ln:
            lines[i] = ln.split("=", 1)[0] + "=" + odd + " \\"
        else:
            lines[i] = ln.split(" ")[0:1][0] + " " + " ".join(ln.split()[:1]) + " " + odd + " \\"
    try:
        res = import_config("\n".join(lines), {})
    except ConfigImportError as e:
        assert e.key and "\n" not in str(e)
        return
    assert res.report["format"] == res.format


def test_verl_ulysses_normalizes_by_data_parallel_groups_and_is_reported():
    # fsdp_workers.py: ppo_mini_batch_size * n // (world // sp); ppo_micro_batch_size // (world // sp).
    # 4 GPUs, sp 2: 2 DP groups; 32 prompts x 8 / 2 = 128 rollouts per group, / 16 per micro = 8 steps
    res = import_config(VERL.replace("\n", " actor_rollout_ref.actor.ulysses_sequence_parallel_size=2\n"), {})
    assert res.plan["micro_batch_size"] == 16 and res.plan["gradient_accumulation_steps"] == 8
    keys = {n["key"]: n["reason"] for n in res.not_represented}
    assert "sequence" in keys["actor_rollout_ref.actor.ulysses_sequence_parallel_size"].lower()
    assert any(w["id"] == "verl-ulysses" for w in res.warnings)
    # the global micro-batch: 64 // (4 // 2) = 32 rollouts per DP group
    glob = VERL.replace("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
                        "actor_rollout_ref.actor.ppo_micro_batch_size=64")
    res = import_config(glob.replace("\n", " actor_rollout_ref.actor.ulysses_sequence_parallel_size=2\n"), {})
    assert res.plan["micro_batch_size"] == 32 and res.plan["gradient_accumulation_steps"] == 4   # 128 / 32
    with pytest.raises(ConfigImportError) as e:
        import_config(VERL.replace("\n", " actor_rollout_ref.actor.ulysses_sequence_parallel_size=3\n"), {})
    assert e.value.key == "actor_rollout_ref.actor.ulysses_sequence_parallel_size"


def test_verl_sleep_level_and_layered_summon():
    base = VERL.replace("actor_rollout_ref.rollout.free_cache_engine=False ", "")
    # free_cache_engine on (default): verl >= 0.6 VLLM_SLEEP_LEVEL, 2 on vLLM >= 0.8.5
    assert import_config(base, {}).plan["post_training"]["generator"]["sleep"] == 2
    lora = base.replace("\n", " actor_rollout_ref.model.lora_rank=32 actor_rollout_ref.rollout.layered_summon=True\n")
    g = import_config(lora, {}).plan["post_training"]["generator"]
    assert g["layered_summon"] is True and g["sleep"] == 1        # vLLMRollout: layered_summon keeps level 1
    # with rollout.yaml's load_format dummy verl refuses layered_summon (collect_lora_params): said, not hidden
    assert any(w["id"] == "verl-layered-summon" for w in import_config(lora, {}).warnings)
    ok = lora.replace("\n", " actor_rollout_ref.rollout.load_format=safetensors\n")
    assert not any(w["id"] == "verl-layered-summon" for w in import_config(ok, {}).warnings)
    # without LoRA layered_summon changes nothing: reported, not written
    res = import_config(base.replace("\n", " actor_rollout_ref.rollout.layered_summon=True\n"), {})
    assert "layered_summon" not in res.plan["post_training"]["generator"]
    assert res.plan["post_training"]["generator"]["sleep"] == 2


def test_verl_entropy_coeff_reported_when_on():
    res = import_config(VERL.replace("\n", " actor_rollout_ref.actor.entropy_coeff=0.001\n"), {})
    r = {n["key"]: n["reason"] for n in res.not_represented}["actor_rollout_ref.actor.entropy_coeff"]
    assert "entropy" in r and r.startswith(NOT_MODELLED)


def test_verl_sleep_level_assumption_is_warned():
    base = VERL.replace("actor_rollout_ref.rollout.free_cache_engine=False ", "")
    assert any(w["id"] == "verl-sleep-level" for w in import_config(base, {}).warnings)
    assert not any(w["id"] == "verl-sleep-level" for w in import_config(VERL, {}).warnings)   # engine kept


# verl's examples/grpo_trainer/run_qwen2-7b_seq_balance.sh (v0.5.0), rollout vLLM: remove-padding and
# use_dynamic_bsz with a 24,000-token budget
SEQ_BALANCE = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024 "
               "data.max_prompt_length=512 data.max_response_length=1024 "
               "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct actor_rollout_ref.model.use_remove_padding=True "
               "actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.actor.use_dynamic_bsz=True "
               "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000 actor_rollout_ref.actor.use_kl_loss=True "
               "actor_rollout_ref.rollout.tensor_model_parallel_size=2 actor_rollout_ref.rollout.name=vllm "
               "actor_rollout_ref.rollout.gpu_memory_utilization=0.6 actor_rollout_ref.rollout.n=5 "
               "actor_rollout_ref.ref.fsdp_config.param_offload=True trainer.n_gpus_per_node=8 trainer.nnodes=1\n")


def test_verl_remove_padding_and_dynamic_bsz():
    res = import_config(SEQ_BALANCE, {})
    pk = res.plan["post_training"]["packing"]
    # the log-prob passes default to the actor's switch and budget (rollout.yaml / ref.yaml oc.select): 24,000
    assert pk == {"remove_padding": True, "update_max_tokens": 24000, "score_max_tokens": 24000}
    # no ppo_micro_batch_size_per_gpu (dp_actor.py never reads it with use_dynamic_bsz): the micro-batch is the DP
    # group's mini-batch, 256 prompts x 5 / 8 GPUs = 160 rows, one accumulation step
    assert res.plan["micro_batch_size"] == 160 and res.plan["gradient_accumulation_steps"] == 1
    keys = {n["key"] for n in res.not_represented}
    assert not keys & {"actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.actor.use_dynamic_bsz",
                       "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"}
    assert not any(w["id"] == "verl-dynamic-bsz-padded" for w in res.warnings)
    from zerocalc.plan import Plan
    from zerocalc.post import resolve
    post = resolve(Plan.from_dict(res.plan))
    assert (post.rows, post.length) == (1, 24000 + 1536 - 1)          # the Karmarkar-Karp bound (post/defaults.py)


def test_verl_log_prob_budgets_sp_and_bad_budget():
    # the reference's own budget, larger than the rollout's: the score pass takes the larger
    res = import_config(SEQ_BALANCE.replace("\n", " actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=48000\n"), {})
    assert res.plan["post_training"]["packing"]["score_max_tokens"] == 48000
    # Ulysses sp 2: dp_actor.py `ppo_max_token_len_per_gpu * ulysses_sequence_parallel_size` per SP group, held
    # whole on one GPU by the plan: 48,000
    res = import_config(SEQ_BALANCE.replace("\n", " actor_rollout_ref.actor.ulysses_sequence_parallel_size=2\n"), {})
    assert res.plan["post_training"]["packing"]["update_max_tokens"] == 48000
    # a budget under one sequence (512 + 1,024): verl asserts max_token_len >= the sequence length
    with pytest.raises(ConfigImportError) as e:
        import_config(SEQ_BALANCE.replace("ppo_max_token_len_per_gpu=24000", "ppo_max_token_len_per_gpu=1024"), {})
    assert e.value.key == "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"


def test_verl_dynamic_bsz_without_remove_padding_is_warned_and_off_is_today():
    padded = SEQ_BALANCE.replace("use_remove_padding=True", "use_remove_padding=False")
    res = import_config(padded, {})
    assert res.plan["post_training"]["packing"]["remove_padding"] is False
    assert any(w["id"] == "verl-dynamic-bsz-padded" for w in res.warnings)
    # neither switch on: no packing key, as before
    off = VERL.replace("\n", " actor_rollout_ref.model.use_remove_padding=False "
                             "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384\n")
    res = import_config(off, {})
    assert "packing" not in res.plan["post_training"]
    reasons = {n["key"]: n["reason"] for n in res.not_represented}
    assert not reasons["actor_rollout_ref.model.use_remove_padding"].startswith(NOT_MODELLED)


def test_verl_log_prob_micro_batch_sizes():
    # no dynamic batch: the old-log-prob pass splits by rollout.log_prob_micro_batch_size_per_gpu (data.split), a
    # full reference by its own; the score pass takes the larger (8 vs 24 -> 24)
    base = VERL.replace("\n", " actor_rollout_ref.actor.use_kl_loss=True "
                              "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 "
                              "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=24\n")
    res = import_config(base, {})
    assert res.plan["post_training"]["packing"] == {"remove_padding": False, "score_micro_batch_size": 24}
    # the global form is divided by the data-parallel groups (fsdp_workers.py `//= world // sp`): 64 / 4 GPUs = 16
    res = import_config(VERL.replace("\n", " actor_rollout_ref.rollout.log_prob_micro_batch_size=64\n"), {})
    assert res.plan["post_training"]["packing"]["score_micro_batch_size"] == 16
    # with LoRA the reference is the actor's compute_log_prob on the rollout's settings: ref.* has no effect
    lora = base.replace("\n", " actor_rollout_ref.model.lora_rank=16\n")
    res = import_config(lora, {})
    assert res.plan["post_training"]["packing"]["score_micro_batch_size"] == 8
    reasons = {n["key"]: n["reason"] for n in res.not_represented}
    assert "compute_log_prob" in reasons["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"]


def test_llamafactory_pref_loss_that_is_not_a_name_is_refused_naming_it():
    # found by test_imports_detect's mangled real files: a list as pref_loss raised TypeError (unhashable)
    from zerocalc.imports import import_config
    from zerocalc.imports.builder import ConfigImportError
    with pytest.raises(ConfigImportError) as e:
        import_config({"stage": "dpo", "pref_loss": ["sigmoid"], "model_name_or_path": "meta-llama/Llama-3.1-8B",
                       "finetuning_type": "lora"}, {})
    assert e.value.key == "pref_loss"
