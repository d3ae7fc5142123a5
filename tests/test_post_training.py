"""Post-training (plan-v1 Extension 7): the plan block, its validation, and the engine's terms, each against
arithmetic written here (no figure copied from the code under test)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerocalc.cli import main
from zerocalc.estimate import estimate
from zerocalc.plan import Plan, PlanError

# Llama 3.2 1B: 1,235,814,400 parameters, 16 layers, 8 KV heads x 64, vocabulary 128,256, tied embeddings
P1B, V, L, KV = 1_235_814_400, 128_256, 16, 512
A100 = 80 * 2**30


def plan(pt=None, **kw) -> Plan:
    d = {"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "framework": "deepspeed",
         "zero_stage": 2, "micro_batch_size": 2, "gradient_accumulation_steps": 4, "seq_len": 1024,
         "activation_checkpointing": "full"}
    d.update(kw)
    if pt is not None:
        d["post_training"] = pt
    return Plan.from_dict(d)


def detail(est) -> dict:
    return dict(est.per_gpu.detail)


# --- the plan block ---------------------------------------------------------------------------------

def test_round_trip_and_omitted_without_post_training():
    p = plan({"method": "grpo", "num_generations": 4, "generator": {"engine": "vllm", "sleep": 2},
              "reward_model": {"model": "llama-3.2-1b", "placement": "same-gpus"}})
    assert Plan.from_dict(p.to_dict()) == p
    assert "post_training" not in plan().to_dict()
    assert plan().post_training is None


BAD = [
    ({"method": "sft"}, "post_training.method"),
    ({"trainer": "deepspeed-chat"}, "post_training.trainer"),
    ({"method": "grpo", "num_generations": 3}, "post_training.num_generations"),      # 2 x 4 GPUs x 4 = 32
    ({"method": "grpo", "num_generations": 1}, "post_training.num_generations"),      # TRL: at least 2
    ({"method": "dpo", "reference": "adapter-disabled"}, "post_training.reference"),  # method full
    ({"method": "orpo", "reference": "model"}, "post_training.reference"),
    ({"method": "simpo", "reference": "precomputed"}, "post_training.reference"),
    ({"method": "grpo", "reference": "precomputed"}, "post_training.reference"),
    ({"method": "grpo", "generator": {"mode": "server"}}, "post_training.generator.gpus"),
    ({"method": "grpo", "generator": {"mode": "colocate", "gpus": 2}}, "post_training.generator.gpus"),
    ({"method": "grpo", "generator": {"gpu_memory_utilization": 1.5}}, "post_training.generator.gpu_memory_utilization"),
    ({"method": "grpo", "generator": {"sleep": 3}}, "post_training.generator.sleep"),
    ({"method": "grpo", "generator": {"tensor_parallel_size": 3}}, "post_training.generator.tensor_parallel_size"),
    ({"method": "grpo", "generator": {"engine": "hf", "sleep": 1}}, "post_training.generator.sleep"),
    ({"method": "dpo", "generator": {"engine": "vllm"}}, "post_training.generator"),
    ({"method": "dpo", "value_model": {}}, "post_training.value_model"),
    ({"method": "dpo", "reward_model": {}}, "post_training.reward_model"),
    ({"method": "ppo", "value_model": {"model": "no-such-model"}}, "post_training.value_model.model"),
    ({"method": "ppo", "value_model": {"placement": "moon"}}, "post_training.value_model.placement"),
    ({"method": "grpo", "trainer": "llamafactory"}, "post_training.method"),
    ({"method": "dpo", "steps_per_generation": 2}, "post_training.steps_per_generation"),
    ({"method": "dpo", "reference": "precomputed"}, "post_training.reference", {"loss": "chunked"}),
    ({"prompt_len": 0}, "post_training.prompt_len"),
    ({"completion_len": "long"}, "post_training.completion_len"),
    ({"betaa": 0.1}, "post_training.betaa"),
    ([], "post_training"),
]


@pytest.mark.parametrize("case", BAD)
def test_bad_values_name_the_key_and_exit_2(case, tmp_path, capsys):
    pt, key, extra = case if len(case) == 3 else (*case, {})
    with pytest.raises(PlanError) as e:
        plan(pt, **extra)
    assert e.value.key == key
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"gpus_per_node": 4, "micro_batch_size": 2, "gradient_accumulation_steps": 4,
                             "post_training": pt, **extra}))
    rc = main(["estimate", "--plan", str(f)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and key in err and "Traceback" not in err


def test_adapter_disabled_with_lora_and_divisible_generations_are_accepted():
    plan({"method": "dpo", "reference": "adapter-disabled"}, method="lora")
    plan({"method": "grpo", "num_generations": 8})                     # 32 completions / 8
    plan({"method": "grpo", "num_generations": 16, "steps_per_generation": 8})   # 2 x 4 x 8 = 64
    plan({"method": "grpo", "generator": {"mode": "server", "gpus": 1}})


def test_a_plan_without_post_training_estimates_as_before():
    a, b = estimate(plan()), estimate(Plan.from_dict({**plan().to_dict()}))
    assert a.to_dict() == b.to_dict()
    assert set(a.run.phases) & {"sync", "score"} == set()


# --- DPO and the reference --------------------------------------------------------------------------

def test_dpo_update_step_holds_2b_rows():
    # DPO at micro 2 with 512 + 512 tokens: the same saved activations as an SFT step of 4 rows x 1024
    dpo = detail(estimate(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512})))
    sft = detail(estimate(plan(micro_batch_size=4, seq_len=1024)))
    assert dpo["saved_activations"] == sft["saved_activations"]
    assert estimate(plan({"method": "dpo"})).tokens_per_step == 4 * 1024 * 4 * 4   # rows x len x accum x world


def test_trl_dpo_logits_buffers_by_hand():
    # TRL selective_log_softmax on bf16 logits: end of forward the logits 2·R·T·V plus the saved per-row
    # log_softmax 2·R·(T-1)·V; R = 2 x 2 = 4 rows, T = 1024
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "reference": "precomputed",
                     "trainer_version": "1.10"}))
    assert t["logits_forward"].nbytes == 2 * 4 * 1024 * V + 2 * 4 * 1023 * V
    # backward: the slice's gradient 2·R·T·V and the stacked row gradients with the saved rows 2 x 2·R·(T-1)·V
    assert t["logits_backward"].nbytes == 2 * 4 * 1024 * V + 2 * 2 * 4 * 1023 * V
    # the reference's no-grad logits meet them at the end of forward: its logits and one row's log_softmax
    ref = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512,
                       "trainer_version": "1.10"}))["reference_logits"]
    assert ref.nbytes == 2 * 4 * 1024 * V + 2 * 1024 * V and ref.phases == {"fwd"}


def _terms(p):
    from zerocalc.estimate import step_inputs_for, step_terms
    return {t.name: t for t in step_terms(p, step_inputs_for(p))[2]}


def test_trl_fused_head_by_hand():
    # TRL >= 1.15 (the default): the chunked log-prob head over the N = rows x completion labelled positions,
    # one 16-bit tile of min(N, 4096) x 32768; saved the 16-bit hidden copy (N x 2048) and 4N of log-normaliser;
    # DPO micro 2 -> 4 rows x 512 completion tokens = 2048 positions
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512}))
    n, h = 4 * 512, 2048
    tile = 2 * 2048 * 32768
    assert t["logits_forward"].nbytes == 2 * n * h + 4 * n + tile + 4 * 7 * n
    # backward: fp32 grad_hidden (4·N·h) and, the head being trained (full fine-tune), fp32 grad_weight 4·V·h
    assert t["logits_backward"].nbytes == 2 * n * h + 4 * n + 4 * n * h + tile + 4 * V * h
    # the reference's own head moment (its copy 2·N·h, a tile, the statistics) meets what the policy saved (its
    # tile and statistics died as its head's forward returned): carried as what it adds to the policy's forward
    # moment, (2·N·h + 4N) + (2·N·h + tile + 28N) - (2·N·h + 4N + tile + 28N) = 2·N·h
    assert t["reference_logits"].nbytes == 2 * n * h == 8_388_608
    assert t["logits_forward"].nbytes + t["reference_logits"].nbytes == (2 * n * h + 4 * n) + (
        2 * n * h + tile + 4 * 7 * n)
    lora = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512}, method="lora"))
    assert lora["logits_backward"].nbytes == 2 * n * h + 4 * n + 4 * n * h + tile       # the head is frozen


def test_trl_114_triton_kernel_by_hand():
    # TRL 1.11-1.14 on CUDA: the Triton kernel saves the 16-bit logits (2·R·T·V) and 16 B per position, and its
    # backward adds grad_logits over the shifted slice (2·R·(T-1)·V); R = 4 rows, T = 1024
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "trainer_version": "1.14.2"}))
    n, n1 = 4 * 1024 * V, 4 * 1023 * V
    assert t["logits_forward"].nbytes == 2 * n + 16 * 4 * 1024
    assert t["logits_backward"].nbytes == 2 * n + 2 * n1
    assert t["reference_logits"].nbytes == 2 * n + 16 * 4 * 1024


def test_accelerate_fp32_copy_of_the_logits_by_hand():
    # Without DeepSpeed, bf16-mixed is accelerate's native_amp: prepare_model wraps the forward in
    # convert_outputs_to_fp32, so TRL 1.14's kernel reads an fp32 copy L32 (4n) of the bf16 logits L16 (2n).
    # R = 4 rows (2 pairs), T = 1024, n = R·T·V, n' = R·(T-1)·V, 16 B of kernel statistics per position.
    n, n1, stats = 4 * 1024 * V, 4 * 1023 * V, 16 * 4 * 1024
    pt = {"method": "dpo", "prompt_len": 512, "completion_len": 512, "trainer_version": "1.14.2"}
    t = _terms(plan(pt, method="lora", framework="ddp", zero_stage=0))
    assert t["logits_forward"].nbytes == 2 * n + 4 * n            # L16 + L32 at the copy (> 4n + stats)
    assert t["logits_backward"].nbytes == 4 * n + 4 * n1          # the kernel's fp32 grad_logits beside L32
    # the reference's own L16 + L32 on top of what the policy's forward ends with (L32 saved + stats): the
    # end-of-forward moment is 4n + stats + 6n, carried as 6n (forward) + (4n + stats) (reference)
    assert t["reference_logits"].nbytes == 4 * n + stats
    assert t["logits_forward"].nbytes + t["reference_logits"].nbytes == 10 * n + stats
    # DeepSpeed has no native_amp: the 16-bit logits as before (test_trl_114_triton_kernel_by_hand)
    ds = _terms(plan(pt, method="lora"))
    assert ds["logits_forward"].nbytes == 2 * n + stats
    # TRL >= 1.15 returns no logits: nothing to copy
    new = _terms(plan({**pt, "trainer_version": "1.16"}, method="lora", framework="ddp", zero_stage=0))
    assert new["logits_forward"].nbytes < n


def test_grpo_114_score_holds_the_copy_by_hand():
    # GRPO's no-grad scoring pass over logits_to_keep = C + 1 positions of B = 2 completions: L16 + L32 = 6n
    pt = {"method": "grpo", "prompt_len": 256, "completion_len": 768, "num_generations": 2,
          "trainer_version": "1.14.2", "reference": "adapter-disabled"}
    n = 2 * 769 * V
    ph = estimate(plan(pt, method="lora", framework="ddp", zero_stage=0)).to_dict()["run"]["phases"]["score"]
    hidden = 2 * 2 * 1024 * 2048          # the last hidden states beside the logits (bf16, 2 rows x 1024)
    assert ph["components"]["logits"] == 6 * n + hidden


def test_trl_offline_trainers_disable_dropout_by_hand():
    # DPOConfig.disable_dropout True: PEFT's LoRA dropout at p = 0 returns its input, so no 1-byte mask per
    # adapter input: (q, k, v, o, gate, up: 6 x 2048) + (down: 8192) elements per token per layer, 16 layers;
    # GRPOConfig's default False keeps them. The same plan without post_training keeps them too.
    from zerocalc.estimate import step_inputs_for
    kw = {"method": "lora", "framework": "ddp", "zero_stage": 0, "activation_checkpointing": "none",
          "micro_batch_size": 1}
    dpo = {"method": "dpo", "prompt_len": 256, "completion_len": 256}
    drop = step_inputs_for(plan(dpo, **kw)).acts.stack_saved
    nodrop = step_inputs_for(plan(dpo, lora={"dropout": 0.0}, **kw)).acts.stack_saved
    assert drop == nodrop
    grpo = {"method": "grpo", "prompt_len": 256, "completion_len": 256, "num_generations": 2}
    g = step_inputs_for(plan(grpo, micro_batch_size=2, **{k: v for k, v in kw.items() if k != "micro_batch_size"}))
    g0 = step_inputs_for(plan(grpo, micro_batch_size=2, lora={"dropout": 0.0},
                              **{k: v for k, v in kw.items() if k != "micro_batch_size"}))
    # layer 0's q/k/v read the norm of the frozen embedding: no gradient flows into their dropout, no mask
    assert g.acts.stack_saved - g0.acts.stack_saved == ((6 * 2048 + 8192) * 16 - 3 * 2048) * 2 * 512


def test_trainer_version_is_validated():
    for bad in ("latest", "1.x", 1.14, "1.2.3.4"):
        with pytest.raises(PlanError) as e:
            plan({"method": "dpo", "trainer_version": bad})
        assert e.value.key == "post_training.trainer_version"


def test_lora_reference_costs_no_weights():
    t = _terms(plan({"method": "dpo"}, method="lora"))
    assert not any(n.startswith("reference_weights") for n in t)
    assert "reference_logits" in t                      # the base still scores the batch


def test_full_reference_zero2_replicated_zero3_sharded():
    # DeepSpeed casts the reference to bf16: 2 bytes x 1,235,814,400 on every GPU at ZeRO-2,
    # ceil(that / 4) at ZeRO-3 (prepare_deepspeed keeps stage 3 only)
    z2 = _terms(plan({"method": "dpo"}, zero_stage=2))
    z3 = _terms(plan({"method": "dpo"}, zero_stage=3))
    assert z2["reference_weights"].nbytes == 2 * P1B
    assert z3["reference_weights"].nbytes == -(-2 * P1B // 4)
    ddp = _terms(plan({"method": "dpo"}, framework="ddp", zero_stage=0))
    assert ddp["reference_weights"].nbytes == 4 * P1B            # TRL's fp32 default, nothing casts it
    bf16 = _terms(plan({"method": "dpo"}, framework="ddp", zero_stage=0, run={"load": {"dtype": "bf16"}}))
    assert bf16["reference_weights"].nbytes == 2 * P1B


def test_reference_none_for_orpo_and_precomputed_for_dpo():
    for pt in ({"method": "orpo"}, {"method": "simpo"}, {"method": "dpo", "reference": "precomputed"}):
        t = _terms(plan(pt))
        assert "reference_weights" not in t and "reference_logits" not in t
    est = estimate(plan({"method": "dpo", "reference": "precomputed"}))
    assert "score" in est.run.phases                    # the precompute pass


def test_verl_reference_in_host_memory():
    # verl loads a reference only with actor.use_kl_loss or algorithm.use_kl_in_reward (both false by default):
    # auto is none; the importer writes cpu when one is on
    pt = {"method": "ppo", "trainer": "verl", "generator": {"engine": "vllm", "sleep": 1}}
    none = _terms(plan(pt, framework="fsdp", zero_stage=3))
    assert "reference_weights_host" not in none and "reference_weights" not in none
    # nor a reward model unless reward_model.enable: a rule-based reward function
    assert "reward_model_weights" not in none
    t = _terms(plan({**pt, "reference": "cpu"}, framework="fsdp", zero_stage=3))
    assert t["reference_weights_host"].nbytes == 2 * P1B and not t["reference_weights_host"].on_gpu


def test_trl_fp32_lora_base_without_deepspeed():
    # TRL create_model_from_path: fp32 unless told; with LoRA on DDP the base stays fp32 (4 B/param)
    from zerocalc.estimate import step_inputs_for
    si = step_inputs_for(plan({"method": "dpo"}, method="lora", framework="ddp", zero_stage=0))
    assert si.frozen_bytes == 4 * P1B
    si16 = step_inputs_for(plan({"method": "dpo"}, method="lora", framework="ddp", zero_stage=0,
                                run={"load": {"dtype": "bf16"}}))
    assert si16.frozen_bytes == 2 * P1B


def test_reward_model_has_a_scalar_head_and_no_logits():
    est = estimate(plan({"method": "rm"}))
    d = detail(est)
    assert d.get("logits_forward", 0) == 0 and d.get("logits_backward", 0) == 0
    # tied embeddings: the sequence-classification model adds only score.weight (hidden 2048)
    from zerocalc.estimate import step_inputs_for
    assert step_inputs_for(est.plan).arch.total_params == P1B + 2048


# --- GRPO and the generator -------------------------------------------------------------------------

def grpo(gen, **kw):
    return estimate(plan({"method": "grpo", "num_generations": 8, "prompt_len": 256, "completion_len": 768,
                          "generator": gen}, **kw))


def test_colocated_vllm_holds_its_fraction_and_sleep_2_frees_it():
    asleep = grpo({"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 2})
    gen = asleep.run.phases["generate"]
    assert gen.components["generator"] == int(0.3 * A100)
    assert asleep.per_gpu.components.get("generator", 0) == 512 << 20     # only the CUDA graphs stay
    awake = grpo({"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 0})
    assert awake.per_gpu.detail["vllm_budget"] == int(0.3 * A100)
    assert awake.per_gpu.device_used - asleep.per_gpu.device_used >= int(0.3 * A100)
    eager = grpo({"engine": "vllm", "sleep": 2, "enforce_eager": True})
    assert eager.per_gpu.components.get("generator", 0) == 0


def test_trl_grpo_logits_only_for_the_completion():
    # logits_to_keep = completion + 1 = 769 positions, micro 2 rows, bf16
    t = _terms(plan({"method": "grpo", "prompt_len": 256, "completion_len": 768, "trainer_version": "1.10"}))
    assert t["logits_forward"].nbytes == 2 * 2 * 769 * V + 2 * 2 * 768 * V


def test_hf_generate_kv_cache_by_hand():
    # HF generate for the generation batch: micro 2 x steps_per_generation 4 = 8 sequences of 1024 tokens, the
    # cache one position short (1023); DeepSpeed casts the model to bf16, so 2-byte keys and values:
    # 16 layers x 512 x 8 x 1023 x (2 + 2) bytes, plus the last position's fp32 logits twice
    est = grpo(None)
    kv = L * KV * 8 * 1023 * (2 + 2)
    ph = est.run.phases["generate"]
    assert ph.components["activations"] == kv + 4 * 2 * 8 * V
    assert "8 sequences x 1024 tokens" in ph.note


def test_hf_generate_kv_cache_fp32_model_under_autocast():
    # TRL's fp32 load on one GPU under bf16 autocast (no DeepSpeed cast): fp32 keys (RoPE in the fp32 residual
    # stream), bf16 values: 16 layers x 512 x 8 x 1023 x (4 + 2) bytes
    est = grpo(None, framework="single", gpus_per_node=1, zero_stage=0)
    kv = L * KV * 8 * 1023 * (4 + 2)
    assert est.run.phases["generate"].components["activations"] == kv + 4 * 2 * 8 * V


def test_hf_generate_cache_dtypes_match_the_trace():
    """tools/memtrace/hfcache.py: a real DynamicCache after accelerate's prepare / unwrap and generate."""
    import os
    from zerocalc.post.generator import hf_kv_dtypes
    path = os.path.join(os.path.dirname(__file__), "..", "tools", "memtrace", "golden", "post",
                        "hf-generate-cache.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    assert len(cases) == 4
    for c in cases:
        model_bytes = {"fp32": 4, "bf16": 2}[c["model_dtype"]]
        assert hf_kv_dtypes(model_bytes, c["native_amp"]) == (c["key_bytes"], c["value_bytes"]), c
        assert c["cached_positions"] == c["prompt"] + c["new_tokens"] - 1, c
    fp32_amp = next(c for c in cases if c["model_dtype"] == "fp32" and c["native_amp"])
    assert (fp32_amp["key_bytes"], fp32_amp["value_bytes"]) == (4, 2)


def phases_of(gen, **kw) -> dict:
    """The post-training Phase objects (with their transients) of a GRPO plan."""
    from zerocalc.estimate import step_inputs_for, whole_run
    from zerocalc.post import post_phases, resolve
    p = plan({"method": "grpo", "num_generations": 8, "prompt_len": 256, "completion_len": 768,
              "generator": gen}, **kw)
    view = whole_run(p, step_inputs_for(p), p.gpu_spec)[1]
    return dict(post_phases(view, resolve(p)))


def test_peft_zero3_sync_gathers_the_whole_model():
    peft = grpo({"engine": "vllm", "sleep": 2}, method="lora", zero_stage=3)
    full = grpo({"engine": "vllm", "sleep": 2}, zero_stage=3)
    assert "whole 16-bit model" in peft.run.phases["sync"].note
    assert "one parameter" in full.run.phases["sync"].note
    # LoRA r16 on the 7 linears of Llama 3.2 1B: per layer r·(d_in + d_out) = 16 x (4096 + 2560 + 2560 + 4096
    # + 3 x 10240) = 704,512, x 16 layers = 11,272,192 adapter parameters; all gathered in 16 bits with the base
    assert phases_of({"engine": "vllm", "sleep": 2}, method="lora", zero_stage=3)["sync"].transient \
        == 2 * (P1B + 11_272_192)
    # without PEFT one parameter at a time: the largest, the tied embedding 128,256 x 2048
    assert phases_of({"engine": "vllm", "sleep": 2}, zero_stage=3)["sync"].transient == 2 * V * 2048
    # FSDP with PEFT syncs module by module (TRL `_sync_fsdp_params_to_vllm`)
    fsdp = phases_of({"engine": "vllm", "sleep": 2}, method="lora", framework="fsdp", zero_stage=3)
    assert fsdp["sync"].transient == 2 * V * 2048


def test_server_generator_costs_the_training_gpus_nothing():
    est = grpo({"engine": "vllm", "mode": "server", "gpus": 1})
    assert "generate" not in est.run.phases
    assert est.per_gpu.components.get("generator", 0) == 0


def test_ppo_keeps_a_critic_and_a_reward_model():
    t = _terms(plan({"method": "ppo"}))
    assert "critic_state" in t and t["reward_model_weights"].nbytes == 2 * (P1B + 2048)


def test_peak_phase_names_the_generation_when_it_is_largest():
    est = grpo({"engine": "vllm", "gpu_memory_utilization": 0.9, "sleep": 2})
    assert est.run.peak_phase == "generate"


# --- properties ---------------------------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(g=st.sampled_from([2, 4, 8, 16, 32]), c=st.integers(64, 2048), extra=st.integers(1, 1024))
def test_more_generations_or_longer_completions_never_need_less(g, c, extra):
    def used(gen, comp):
        return estimate(plan({"method": "grpo", "num_generations": gen, "completion_len": comp},
                             gradient_accumulation_steps=8), search_min_gpus=False).run.device_used
    assert used(g, c) <= used(min(64, 2 * g), c)
    assert used(g, c) <= used(g, c + extra)


@settings(max_examples=15, deadline=None)
@given(u=st.floats(0.05, 0.9), du=st.floats(0.01, 0.09), sleep=st.sampled_from([0, 1, 2]))
def test_a_larger_vllm_fraction_never_needs_less(u, du, sleep):
    def used(util):
        return grpo({"engine": "vllm", "gpu_memory_utilization": util, "sleep": sleep}).run.device_used
    assert used(u) <= used(u + du)


def test_the_sync_gather_stays_cached_when_vllm_wakes_for_the_rollout():
    # TRL empties the cache before waking vLLM's weights, not before waking its KV cache: the whole-model
    # gather of the sync (2 x (base + adapters)) is still reserved by torch when vLLM maps its 0.3 x 80 GiB
    est = grpo({"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 2}, method="lora", zero_stage=3)
    gen = est.run.phases["generate"]
    assert gen.device_used >= int(0.3 * A100) + 2 * (P1B + 11_272_192)
    # and vLLM's own bytes are not left cached for the scoring forwards that follow
    assert est.run.phases["score"].device_used < gen.device_used - int(0.3 * A100) + 2**30


# --- exports: TRL's config with the settings the estimate assumed ----------------------------------------

def test_trl_grpo_config_carries_the_generator():
    from zerocalc.exports import trl_config_kwargs
    p = plan({"method": "grpo", "num_generations": 8, "completion_len": 768,
              "generator": {"engine": "vllm", "gpu_memory_utilization": 0.4, "sleep": 2}},
             run={"load": {"dtype": "bf16"}})
    module, cls, kw = trl_config_kwargs(p)
    assert (module, cls) == ("trl", "GRPOConfig")
    assert kw["num_generations"] == 8 and kw["max_completion_length"] == 768
    assert kw["use_vllm"] is True and kw["vllm_mode"] == "colocate"
    assert kw["vllm_gpu_memory_utilization"] == 0.4 and kw["vllm_enable_sleep_mode"] is True
    assert kw["beta"] == 0.0                                  # no reference: TRL's default beta
    assert kw["gradient_checkpointing"] is True and "activation_checkpointing" not in kw
    assert kw["model_init_kwargs"] == {"dtype": "bfloat16"}
    assert kw["per_device_train_batch_size"] == 2 and kw["gradient_accumulation_steps"] == 4


def test_trl_dpo_config_and_refusals():
    from zerocalc.exports import ExportError, trl_config_kwargs, trl_snippet
    _, cls, kw = trl_config_kwargs(plan({"method": "ipo", "prompt_len": 256, "completion_len": 768,
                                         "reference": "precomputed"}))
    assert cls == "DPOConfig" and kw["max_length"] == 1024 and kw["loss_type"] == ["ipo"]
    assert kw["precompute_ref_log_probs"] is True
    assert "fp32" in trl_snippet(plan({"method": "dpo"}))    # TRL's fp32 load default is stated
    for pt, key in [({"method": "grpo", "generator": {"engine": "vllm", "sleep": 1}}, "post_training.generator.sleep"),
                    ({"method": "ppo", "trainer": "verl"}, "post_training.trainer"),
                    ({"method": "dpo", "reference": "cpu"}, "post_training.reference")]:
        with pytest.raises(ExportError) as e:
            trl_config_kwargs(plan(pt, framework="fsdp", zero_stage=3) if pt.get("trainer") == "verl" else plan(pt))
        assert e.value.key == key
    with pytest.raises(ExportError):
        trl_config_kwargs(plan())


def test_cli_exports_trl(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"gpus_per_node": 4, "micro_batch_size": 2, "gradient_accumulation_steps": 4,
                             "post_training": {"method": "grpo", "num_generations": 4}}))
    assert main(["export", "--plan", str(f), "--to", "trl"]) == 0
    out = capsys.readouterr().out
    assert "GRPOConfig(" in out and "num_generations=4" in out and "use_vllm=False" in out


# --- fit: the post-training questions ---------------------------------------------------------------------

def test_fit_answers_micro_batch_completion_and_vllm_fraction():
    from zerocalc.fit import fit
    p = Plan.from_dict({"model": "llama-3.2-1b", "gpus_per_node": 1, "framework": "single", "micro_batch_size": 4,
                        "gradient_accumulation_steps": 1,
                        "post_training": {"method": "grpo", "num_generations": 4,
                                          "generator": {"engine": "vllm", "sleep": 0}}})
    d = fit(p).to_dict()
    # TRL: 4 generations must divide micro x 1 GPU x 1 step, so the micro-batch moves in steps of 4
    assert d["max_micro_batch_size"] % 4 == 0 and d["max_seq_len"] is None
    n, u = d["max_completion_len"], d["max_gpu_memory_utilization"]
    pt = p.to_dict()["post_training"]

    def fits(**keys):
        gen = keys.pop("generator", {})
        q = {**p.to_dict(), "post_training": {**pt, **keys, "generator": {**pt["generator"], **gen}}}
        return estimate(Plan.from_dict(q), search_min_gpus=False).fits
    assert fits(completion_len=n) and not fits(completion_len=n + 1)
    assert fits(generator={"gpu_memory_utilization": u})
    assert u == 1.0 or not fits(generator={"gpu_memory_utilization": round(u + 0.01, 2)})


def test_fused_liger_loss_never_holds_the_whole_logits():
    # loss chunked = TRL use_liger_kernel: one of 8 chunks of 16-bit logits and fp32 log-softmax at a time
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "trainer_version": "1.10"},
                    loss="chunked"))
    n = 4 * 1024 * V
    assert t["logits_forward"].nbytes == (2 + 4) * n // 8
    assert t["reference_logits"].nbytes == (2 + 4) * n // 8


def test_post_warnings():
    from zerocalc.advice import warnings
    ids = {w.id for w in warnings(estimate(plan({"method": "grpo", "num_generations": 8, "generator": {
        "engine": "vllm", "gpu_memory_utilization": 0.02}})))}
    assert "vllm-fraction-too-small" in ids          # 0.02 x 80 GiB = 1.6 GiB < 2.47 GB of 16-bit weights
    ids = {w.id for w in warnings(estimate(plan({"method": "dpo"}, method="lora", framework="ddp", zero_stage=0)))}
    assert "trl-fp32-load" in ids
    ids = {w.id for w in warnings(estimate(plan({"method": "dpo"})))}
    assert "reference-replicated" in ids and "trl-fp32-load" not in ids   # DeepSpeed casts it


# --- imports: TRL post-training configs -> post_training ----------------------------------------------------

def _imported(cfg: dict, base: dict | None = None) -> dict:
    from zerocalc.imports import import_config
    res = import_config(json.dumps(cfg), base)
    Plan.from_dict(res.plan)                       # a valid plan
    return res.plan.get("post_training", {}), res


def test_import_an_older_grpo_config_dump():
    # a GRPOConfig dump of TRL 0.15 (tests/data/configs/hf/grpo-accounting-finetune...): max_prompt_length 128,
    # max_completion_length 96, num_generations 6, beta 0.04 (a reference), use_vllm false (HF generate)
    import os
    with open(os.path.join(os.path.dirname(__file__), "data", "configs", "hf",
                           "grpo-accounting-finetune__model_file_training_args.json")) as f:
        cfg = json.load(f)
    pt, res = _imported(cfg)
    assert pt == {"method": "grpo", "trainer": "trl", "prompt_len": 128, "completion_len": 96,
                  "num_generations": 6, "reference": "model"}
    skipped = {s["key"] for s in res.not_represented}
    assert {"vllm_gpu_memory_utilization", "vllm_device"} <= skipped      # use_vllm off


def test_import_grpo_with_colocated_vllm_and_peft():
    cfg = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_generations": 8,
           "max_completion_length": 1024, "use_vllm": True, "vllm_mode": "colocate",
           "vllm_gpu_memory_utilization": 0.45, "vllm_enable_sleep_mode": True, "beta": 0.01, "use_peft": True,
           "model_init_kwargs": {"dtype": "bfloat16"}}
    pt, res = _imported(cfg)
    assert pt["generator"] == {"engine": "vllm", "mode": "colocate", "gpu_memory_utilization": 0.45, "sleep": 2}
    assert pt["reference"] == "adapter-disabled" and pt["num_generations"] == 8 and pt["completion_len"] == 1024
    assert res.plan["run"]["load"]["dtype"] == "bf16"


def test_import_old_vllm_device_is_a_server_and_dpo_lengths():
    pt, res = _imported({"num_generations": 4, "use_vllm": True, "vllm_device": "cuda:7",
                         "per_device_train_batch_size": 2})
    assert pt["generator"]["mode"] == "server" and pt["generator"]["gpus"] == 1
    assert any(w["id"] == "generator-gpus" for w in res.warnings)
    # DPOConfig: max_length 2048 with max_prompt_length 512 (TRL < 0.29) -> 512 + 1536; IPO loss
    pt, _ = _imported({"loss_type": ["ipo"], "max_length": 2048, "max_prompt_length": 512,
                       "precompute_ref_log_probs": True})
    assert pt == {"method": "ipo", "trainer": "trl", "prompt_len": 512, "completion_len": 1536,
                  "reference": "precomputed"}
    pt, _ = _imported({"beta": 0.1, "output_dir": "out", "rpo_alpha": None})   # DPOConfig's max_length 1024
    assert (pt["method"], pt["prompt_len"], pt["completion_len"]) == ("dpo", 512, 512)


def test_import_refuses_generations_that_do_not_divide():
    from zerocalc.imports import ConfigImportError
    with pytest.raises(ConfigImportError) as e:
        _imported({"num_generations": 3, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1},
                  {"gpus_per_node": 1, "framework": "single"})
    assert e.value.key == "num_generations"


@settings(max_examples=20, deadline=None)
@given(method=st.sampled_from(["dpo", "ipo", "kto", "rm", "cpo", "simpo", "grpo"]), c=st.integers(16, 4096), g=st.sampled_from([2, 4, 8]),
       util=st.sampled_from([0.2, 0.3, 0.5]), sleep=st.sampled_from([0, 2]), vllm=st.booleans())
def test_export_to_trl_then_import_gives_the_post_training_back(method, c, g, util, sleep, vllm):
    from zerocalc.exports import trl_config_kwargs
    pt = {"method": method, "prompt_len": 256, "completion_len": c}
    if method == "grpo":
        pt["num_generations"] = g
        if vllm:
            pt["generator"] = {"engine": "vllm", "gpu_memory_utilization": util, "sleep": sleep}
    p = plan(pt, framework="ddp", zero_stage=0)
    kw = trl_config_kwargs(p)[2]
    back, _ = _imported(kw, {"gpus_per_node": 4, "framework": "ddp", "zero_stage": 0})
    q = Plan.from_dict({**p.to_dict(), "post_training": back})
    from zerocalc.post import resolve
    a, b = resolve(p), resolve(q)
    # DPOConfig keeps max_length only (the row length); GRPOConfig 1.x has no prompt length (its prompts are
    # the data's): the completion and what the generator holds come back
    assert (a.method, a.rows, a.generations, a.gen, a.reference) == (b.method, b.rows, b.generations, b.gen,
                                                                    b.reference)
    if method == "grpo":
        assert a.completion == b.completion and a.logit_positions == b.logit_positions
    else:
        assert a.length == b.length


@settings(max_examples=15, deadline=None)
@given(gpus=st.sampled_from([1, 2, 4, 8]), p=st.integers(16, 2048), extra=st.integers(1, 512),
       method=st.sampled_from(["dpo", "kto", "rm", "orpo"]), lora=st.booleans())
def test_offline_properties(gpus, p, extra, method, lora):
    kw = {"gpus_per_node": gpus, "method": "lora" if lora else "full"}
    def step(prompt, **more):
        return estimate(plan({"method": method, "prompt_len": prompt, "completion_len": 256}, **{**kw, **more}),
                        search_min_gpus=False).per_gpu

    # a longer prompt never needs less; ZeRO-3 never puts more reference bytes on a GPU than ZeRO-2
    assert step(p).device_used <= step(p + extra).device_used
    z2, z3 = step(p, zero_stage=2).detail.get("reference_weights", 0), step(p, zero_stage=3).detail.get(
        "reference_weights", 0)
    assert z3 <= z2 and (z2 == 0 or z3 == -(-z2 // gpus))


@settings(max_examples=10, deadline=None)
@given(u=st.sampled_from([0.2, 0.3, 0.5]), lora=st.booleans())
def test_a_sleeping_vllm_never_costs_the_update_step_more(u, lora):
    kw = {"method": "lora"} if lora else {}
    steps = [grpo({"engine": "vllm", "gpu_memory_utilization": u, "sleep": s}, **kw).per_gpu.device_used
             for s in (0, 1, 2)]
    assert steps[1] == steps[2] <= steps[0] - int(u * A100) + 2**20


def test_import_llamafactory_stages():
    import os
    from zerocalc.imports import import_config
    with open(os.path.join(os.path.dirname(__file__), "data", "configs", "llamafactory",
                           "train_lora__qwen3_lora_dpo.yaml")) as f:
        res = import_config(f.read())
    # LLaMA-Factory's example: stage dpo, pref_loss sigmoid, cutoff_len 2048 shared by prompt and response
    assert res.plan["post_training"] == {"method": "dpo", "trainer": "llamafactory", "prompt_len": 1024,
                                         "completion_len": 1024}
    p = Plan.from_dict(res.plan)
    assert p.method == "lora" and "reference_weights" not in _terms(p)      # the adapter is disabled
    base = "model_name_or_path: Qwen/Qwen2.5-7B\nfinetuning_type: full\ncutoff_len: 1024\n"
    for extra, want in (("stage: dpo\npref_loss: simpo\n", {"method": "simpo"}),
                        ("stage: kto\n", {"method": "kto", "prompt_len": 512, "completion_len": 512}),
                        ("stage: rm\n", {"method": "rm"}),
                        ("stage: ppo\nreward_model_type: full\nmax_new_tokens: 256\n",
                         {"method": "ppo", "prompt_len": 1024, "completion_len": 256,
                          "reward_model": {"model": None, "placement": "same-gpus"}})):
        got = import_config(base + extra).plan["post_training"]
        assert {k: got[k] for k in want} == want
        Plan.from_dict(import_config(base + extra).plan)
    assert "post_training" not in import_config(base + "stage: sft\n").plan


def test_grpo_reward_model_sharded_under_zero3_and_openrlhf_groups():
    # a reward model among TRL's reward functions is prepared like the reference: sharded under ZeRO-3
    # (2 bytes x (1,235,814,400 - nothing untied + 2048 score) / 4 GPUs), replicated at ZeRO-2
    rm = {"model": "llama-3.2-1b", "placement": "same-gpus"}
    z3 = _terms(plan({"method": "grpo", "reward_model": rm}, zero_stage=3))
    z2 = _terms(plan({"method": "grpo", "reward_model": rm}, zero_stage=2))
    assert z3["reward_model_weights"].nbytes == -(-2 * (P1B + 2048) // 4)
    assert z2["reward_model_weights"].nbytes == 2 * (P1B + 2048)
    # OpenRLHF's PPO keeps the reference, critic and reward model on Ray groups of their own
    t = _terms(plan({"method": "ppo", "trainer": "openrlhf"}))
    assert not any(n.startswith(("reference_", "critic_", "reward_model_")) for n in t)


SWIFT_GRPO = """# a command as ms-swift's example scripts write it
CUDA_VISIBLE_DEVICES=0,1,2,3 \\
NPROC_PER_NODE=4 \\
swift rlhf \\
    --rlhf_type grpo \\
    --model meta-llama/Llama-3.2-1B \\
    --train_type full \\
    --torch_dtype bfloat16 \\
    --use_vllm true \\
    --vllm_gpu_memory_utilization 0.4 \\
    --sleep_level 1 \\
    --offload_model true \\
    --deepspeed zero3 \\
    --per_device_train_batch_size 2 \\
    --gradient_accumulation_steps 4 \\
    --num_generations 8 \\
    --max_completion_length 1024 \\
    --reward_funcs accuracy format
"""


def test_import_an_ms_swift_command_line():
    from zerocalc.imports import import_config
    res = import_config(SWIFT_GRPO)
    p = res.plan
    assert res.format == "ms-swift"
    assert (p["model"], p["gpus_per_node"], p["framework"], p["zero_stage"], p["method"]) == \
        ("llama-3.2-1b", 4, "deepspeed", 3, "full")
    assert (p["micro_batch_size"], p["gradient_accumulation_steps"], p["precision"]) == (2, 4, "bf16-mixed")
    assert p["run"]["load"]["dtype"] == "bf16" and p["activation_checkpointing"] == "full"   # swift's default
    assert p["post_training"] == {"method": "grpo", "trainer": "ms-swift", "completion_len": 1024,
                                  "num_generations": 8,
                                  "generator": {"engine": "vllm", "mode": "colocate", "gpu_memory_utilization": 0.4,
                                                "sleep": 1},
                                  # offload_model around colocated vLLM's rollout (rollout_mixin.py offload_context)
                                  "offload_between_updates": {"weights": True, "optimizer": False}}
    skipped = {s["key"]: s["reason"] for s in res.not_represented}
    assert "offload_model" not in skipped and "reward_funcs" in skipped
    est = estimate(Plan.from_dict(p))
    assert est.run.phases["generate"].components["generator"] == int(0.4 * A100)
    # LoRA by default (train_type lora, rank 8, alpha 32, all linear layers); a DPO with max_length split
    res = import_config("NPROC_PER_NODE=2 swift rlhf --rlhf_type dpo --model meta-llama/Llama-3.2-1B "
                        "--max_length 2048 --deepspeed zero2")
    p = res.plan
    assert p["method"] == "lora" and p["lora"]["rank"] == 8 and p["lora"]["alpha"] == 32
    assert p["post_training"]["prompt_len"] + p["post_training"]["completion_len"] == 2048
    assert "post_training" not in import_config("swift sft --model meta-llama/Llama-3.2-1B").plan


def test_trl_fp32_logits_backward_by_hand():
    # fp32 logits (precision fp32), TRL <= 1.10: the logits 4·R·T·V kept; backward: the stacked logsumexp
    # gradients beside gather's zeros, which eager `gather_backward` fills in place (`scatter_add_`; only a
    # dispatch mode such as the tracer's takes the out-of-place `scatter_add`, a third tensor):
    # 2 x 4·R·(T-1)·V; R = 4, T = 1024
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "reference": "precomputed",
                     "trainer_version": "1.10"}, precision="fp32"))
    assert t["logits_backward"].nbytes == 4 * 4 * 1024 * V + 8 * 4 * 1023 * V


def test_torch_kernels_fallback_by_hand():
    # kernels torch (TRL 1.16 without Triton): every position scored, N = 4 rows x 1023; one tile
    # T = min(N, 4096) x 32768 = 4092 x 32768; backward: the 16-bit buffer 2T and 29T of fp32 temporaries, the
    # fp32 grad_hidden 4·N·h and (full fine-tune) grad_weight 4·V·h, beside the saved hidden copy and log-normaliser
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "kernels": "torch"}))
    n, h, tile = 4 * 1023, 2048, 4092 * 32768
    assert t["logits_backward"].nbytes == 2 * n * h + 4 * n + 4 * n * h + 2 * tile + 29 * tile + 4 * V * h
    # TRL 1.14 without Triton: DPO upcasts the logits to fp32: 2n + 4n at the copy, 4n + 12n' in backward
    t = _terms(plan({"method": "dpo", "prompt_len": 512, "completion_len": 512, "kernels": "torch",
                     "trainer_version": "1.14"}))
    assert t["logits_backward"].nbytes == 4 * 4 * 1024 * V + 12 * 4 * 1023 * V
    with pytest.raises(PlanError) as e:
        plan({"method": "dpo", "kernels": "cuda"})
    assert e.value.key == "post_training.kernels"


def test_trl_grpo_reference_by_version():
    # TRL GRPOConfig.beta defaulted to 0.04 up to 0.18 (a reference is loaded) and to 0.0 from 0.19 (none).
    # DDP, full: the fp32 replica of TRL's default load, 4 B x 1,235,814,400 on every GPU; with LoRA the adapter is
    # disabled instead (no weights, but the base scores the batch)
    grpo = {"method": "grpo", "num_generations": 2}
    old = _terms(plan({**grpo, "trainer_version": "0.18"}, framework="ddp", zero_stage=0))
    assert old["reference_weights"].nbytes == 4 * P1B
    for v in ("0.19", None):
        t = _terms(plan({**grpo, "trainer_version": v}, framework="ddp", zero_stage=0))
        assert "reference_weights" not in t and "reference_logits" not in t
    from zerocalc.post.defaults import resolve
    for v, ref in (("0.17", "adapter"), ("0.19", "none")):
        p = plan({**grpo, "trainer_version": v}, framework="ddp", zero_stage=0, method="lora")
        assert resolve(p).reference == ref and "reference_weights" not in _terms(p)


@pytest.mark.parametrize("method, version, copies", [
    ("grpo", "0.15", False), ("grpo", "0.16", True), ("grpo", "0.17", True), ("grpo", "0.29", True),
    ("grpo", "1.0", False), ("rloo", "0.21", False), ("rloo", "0.22", True), ("rloo", "1.0", False),
])
def test_trl_grpo_temperature_copy_by_version(method, version, copies):
    # TRL GRPO v0.16.0-v0.29.x (GRPO-style RLOO v0.22.0-v0.29.x): `logits = logits / self.temperature` out of
    # place, beside accelerate's fp32 copy of the logits (DDP bf16: native_amp). micro 2 completions of the
    # 256-token default (0.x) + 512 prompt: n = 2·257·V (logits_to_keep + 1), n' = 2·256·V. The fp32 copy and
    # its quotient: 4n + 4n' = 8·513·V, above the copy's own moment (bf16 + fp32 logits, 6n = 12·257·V); the
    # no-grad score pass meets the same moment. v1.0.0 divides in place (#5254): only the copy's moment.
    from zerocalc.post.defaults import resolve
    p = plan({"method": method, "num_generations": 2, "trainer_version": version}, framework="ddp", zero_stage=0)
    assert resolve(p).temperature_copy is copies
    fwd = _terms(p)["logits_forward"].nbytes
    assert fwd == (4 * 2 * 257 * V + 4 * 2 * 256 * V if copies else 6 * 2 * 257 * V)
    # the score's logits figure adds the last hidden state, bf16 2 rows x 768 tokens x 2048
    score = estimate(p).to_dict()["run"]["phases"]["score"]["components"]["logits"]
    assert score == fwd + 2 * 2 * 768 * 2048


def test_trl_018_grpo_reference_inside_the_step_by_hand():
    # TRL 0.18.x GRPO scores the reference in `_compute_loss` after the policy's forward (grpo_trainer.py v0.18.0
    # 1332-1345): its no-grad logits meet the end of the policy's forward, as DPO's do. DDP bf16 (native_amp's
    # fp32 copies), micro 2 completions of 256 (+ 512 prompt), n = 2·257·V, n' = 2·256·V. The reference's moment:
    # its fp32 copy and quotient, 4n + 4n' (temperature division), beside the policy's 4n (its fp32 branch keeps
    # the logits), less the step's logits_forward 4n + 4n' already counted at that moment: 4n = 4·2·257·V. No
    # pre-step score pass (one iteration, no old log-probs): the score phase is the step's end of forward.
    grpo = {"method": "grpo", "num_generations": 2}
    p = plan({**grpo, "trainer_version": "0.18"}, framework="ddp", zero_stage=0)
    t = _terms(p)
    assert t["reference_logits"].nbytes == 4 * 2 * 257 * V
    assert t["logits_forward"].nbytes == 4 * 2 * 257 * V + 4 * 2 * 256 * V
    assert "inside the step" in estimate(p).to_dict()["run"]["phases"]["score"]["note"]
    for v in ("0.17", "0.19"):      # scored before the step (0.19: beta 0.0 by default, so give a reference)
        q = plan({**grpo, "trainer_version": v, "reference": "model"}, framework="ddp", zero_stage=0)
        assert "reference_logits" not in _terms(q)
        assert "inside the step" not in estimate(q).to_dict()["run"]["phases"]["score"]["note"]


def test_trl_019_grpo_reference_scores_the_generation_batch_at_once_by_hand():
    # TRL 0.19 GRPO: the reference's _get_per_token_logps takes no batch_size (grpo_trainer.py v0.19.1 1224-1231),
    # so it scores the whole generation batch, micro 2 x steps_per_generation (GA 4) = 8 completions, in one
    # forward; 0.17 and 0.20 in chunks of the micro-batch. DDP bf16, 512 + 256 tokens, n = R·257·V: the fp32
    # copy and its quotient, 4·R·257·V + 4·R·256·V, plus the last hidden state 2·R·768·2048, for R = 8 vs 2
    def score(v):
        p = plan({"method": "grpo", "num_generations": 2, "trainer_version": v, "reference": "model"},
                 framework="ddp", zero_stage=0)
        return estimate(p).to_dict()["run"]["phases"]["score"]["components"]["logits"]
    for v, rows in (("0.17", 2), ("0.19", 8), ("0.20", 2)):
        assert score(v) == 4 * rows * 257 * V + 4 * rows * 256 * V + 2 * rows * 768 * 2048, v


def test_trl_dpo_019_to_028_reference_keeps_its_hidden_states_by_hand():
    # TRL DPO 0.19.0-0.28.x: concatenated_forward asks for output_hidden_states=True (dpo_trainer.py v0.19.0 line
    # 1482): the reference's no-grad forward returns the embedding output and 16 layer outputs, 17 x (R, T, h).
    # DDP LoRA (bf16 base loaded as bf16, native_amp): bf16 residual stream and accelerate's fp32 copy of each:
    # 17·4·1024·2048·(2 + 4) B more in the reference's logits term (micro 2 pairs -> R = 4 rows of T = 1024);
    # full fine-tuning (TRL's fp32 default, the reference fp32): 17·4·1024·2048·4, no copies.
    pt = {"method": "dpo", "prompt_len": 512, "completion_len": 512}
    for method, extra in (("lora", 17 * 4 * 1024 * 2048 * 6), ("full", 17 * 4 * 1024 * 2048 * 4)):
        kw = {"framework": "ddp", "zero_stage": 0, "method": method}
        if method == "lora":
            kw["run"] = {"load": {"dtype": "bf16"}}
        before = _terms(plan({**pt, "trainer_version": "0.18"}, **kw))["reference_logits"].nbytes
        for v in ("0.19", "0.28"):
            assert _terms(plan({**pt, "trainer_version": v}, **kw))["reference_logits"].nbytes == before + extra
        assert _terms(plan({**pt, "trainer_version": "0.29"}, **kw))["reference_logits"].nbytes == before


@pytest.mark.parametrize("method, version, completion", [
    ("grpo", "0.17", 256), ("grpo", "1.9.1", 256), ("grpo", "1.10", 512), ("grpo", None, 512),
    ("rloo", "1.0", 256), ("rloo", "1.16", 512),
])
def test_trl_grouped_completion_default_follows_the_release(method, version, completion):
    # GRPOConfig / RLOOConfig.max_completion_length: 256 in every release up to v1.9.x, 512 from 1.10
    # (286d19fc7, #6264). Prompt 512 (the stand-in), so the row is 512 + completion and the update scores the
    # completion's positions plus one (logits_to_keep + 1)
    from zerocalc.post.defaults import resolve
    p = plan({"method": method, "num_generations": 2, "trainer_version": version}, framework="ddp", zero_stage=0)
    post = resolve(p)
    assert (post.completion, post.length, post.logit_positions) == (completion, 512 + completion, completion + 1)
    # a stated length is kept whatever the release
    q = plan({"method": method, "num_generations": 2, "trainer_version": version, "completion_len": 1000},
             framework="ddp", zero_stage=0)
    assert resolve(q).completion == 1000


def test_chosen_nll_of_orpo_cpo_simpo_by_hand():
    # TRL's ORPO (always) and CPO / SimPO (cpo_alpha 1.0 by default) add the chosen rows' NLL: CrossEntropyLoss
    # over all_logits[:B, :-1] saves its log_softmax, 2·B·(T-1)·V bf16 (DeepSpeed: no autocast copy), beside
    # DPO's selective_log_softmax buffers (test_trl_dpo_logits_buffers_by_hand); B = 2 pairs, R = 4 rows, T = 1024
    dpo_fwd = 2 * 4 * 1024 * V + 2 * 4 * 1023 * V
    dpo_bwd = 2 * 4 * 1024 * V + 2 * 2 * 4 * 1023 * V
    nll = 2 * 2 * 1023 * V
    for method in ("orpo", "cpo", "simpo"):
        for trainer in ("trl", "ms-swift"):
            t = _terms(plan({"method": method, "trainer": trainer, "prompt_len": 512, "completion_len": 512,
                             "trainer_version": "1.10"} if trainer == "trl" else
                            {"method": method, "trainer": trainer, "prompt_len": 512, "completion_len": 512}))
            assert t["logits_forward"].nbytes == dpo_fwd + nll, (method, trainer)
            assert t["logits_backward"].nbytes == dpo_bwd + nll, (method, trainer)
    # DPO has no NLL term by default (rpo_alpha None)
    t = _terms(plan({"method": "dpo", "trainer": "ms-swift", "prompt_len": 512, "completion_len": 512,
                     "reference": "precomputed"}))
    assert t["logits_forward"].nbytes == dpo_fwd


# --- DPO's NLL term (post_training.rpo_alpha) -----------------------------------------------------------

def test_rpo_alpha_trl_028_cross_entropy_by_hand():
    # TRL 0.28 DPOTrainer.concatenated_forward: `if self.args.rpo_alpha is not None:` F.cross_entropy over
    # flatten(logits[:B, :-1]): its log_softmax of the B = 2 chosen rows, 2·2·1023·V bf16, saved beside
    # selective_log_softmax's buffers (R = 4 rows, T = 1024; no autocast copy under DeepSpeed)
    base = {"method": "dpo", "prompt_len": 512, "completion_len": 512, "trainer_version": "0.28"}
    dpo_fwd = 2 * 4 * 1024 * V + 2 * 4 * 1023 * V
    dpo_bwd = 2 * 4 * 1024 * V + 2 * 2 * 4 * 1023 * V
    nll = 2 * 2 * 1023 * V
    hidden = 17 * 4 * 1024 * 2048 * 2
    without = _terms(plan(base))
    assert without["logits_forward"].nbytes == dpo_fwd
    for alpha in (0.1, 0.0):          # `is not None`: 0.0 still runs the cross-entropy
        t = _terms(plan({**base, "rpo_alpha": alpha}))
        assert t["logits_forward"].nbytes == dpo_fwd + nll
        assert t["logits_backward"].nbytes == dpo_bwd + nll
        # the reference (adapter off: LoRA; here a full model) runs it too under no_grad: its logits 2·4·1024·V,
        # the flattened chosen slice and its log_softmax, 2 x 2·2·1023·V (the per-row loop's row has died),
        # beside the 17 hidden states 0.19-0.28 return (output_hidden_states=True), bf16 under DeepSpeed
        assert t["reference_logits"].nbytes == 2 * 4 * 1024 * V + 2 * nll + hidden
    assert without["reference_logits"].nbytes == 2 * 4 * 1024 * V + 2 * 1024 * V + hidden


def test_rpo_alpha_costs_nothing_in_ms_swift_and_llamafactory():
    # ms-swift's own concatenated_forward: nll_loss = -origin_per_token_logps[:B][mask].mean() (the log-probs it
    # has); LLaMA-Factory: sft_loss = -policy_chosen_logps_avg. Same terms with and without the key.
    for trainer in ("ms-swift", "llamafactory"):
        pt = {"method": "dpo", "trainer": trainer, "prompt_len": 512, "completion_len": 512}
        a, b = _terms(plan(pt)), _terms(plan({**pt, "rpo_alpha": 0.1}))
        assert {k: v.nbytes for k, v in a.items()} == {k: v.nbytes for k, v in b.items()}, trainer


@pytest.mark.parametrize("pt, message", [
    ({"method": "dpo", "trainer": "ms-swift", "rpo_alpha": -0.1}, "number from 0"),
    ({"method": "dpo", "trainer": "ms-swift", "rpo_alpha": "0.1"}, "number from 0"),
    ({"method": "dpo", "trainer": "ms-swift", "rpo_alpha": True}, "number from 0"),
    ({"method": "kto", "trainer": "ms-swift", "rpo_alpha": 0.1}, "kto has none"),
    ({"method": "grpo", "trainer": "ms-swift", "num_generations": 2, "rpo_alpha": 0.1}, "grpo has none"),
    ({"method": "dpo", "trainer": "openrlhf", "rpo_alpha": 0.1}, "openrlhf has none"),
    ({"method": "dpo", "trainer": "trl", "rpo_alpha": 0.1}, "from 0.29"),
    ({"method": "dpo", "trainer": "trl", "trainer_version": "0.29", "rpo_alpha": 0.1}, "from 0.29"),
])
def test_rpo_alpha_refused_naming_the_key(pt, message):
    with pytest.raises(PlanError) as e:
        plan(pt)
    assert e.value.key == "post_training.rpo_alpha" and message in e.value.message


def test_rpo_alpha_bad_value_exits_2(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb",
                             "post_training": {"method": "dpo", "trainer": "ms-swift", "rpo_alpha": -1}}))
    assert main(["estimate", "--plan", str(f)]) == 2
    assert "post_training.rpo_alpha" in capsys.readouterr().err


def test_rpo_alpha_imported_from_trl_swift_and_llamafactory():
    from zerocalc.imports import import_config
    pt, res = _imported({"beta": 0.1, "output_dir": "out", "rpo_alpha": 0.5})
    assert pt["rpo_alpha"] == 0.5 and pt["trainer_version"] == "0.28"      # the key exists up to 0.28 only
    pt, _ = _imported({"beta": 0.1, "output_dir": "out", "rpo_alpha": None})
    assert "rpo_alpha" not in pt
    sw = import_config("swift rlhf --rlhf_type dpo --model Qwen/Qwen2.5-7B-Instruct --rpo_alpha 0.1\n", {}).plan
    assert sw["post_training"]["rpo_alpha"] == 0.1
    lf = import_config("stage: dpo\nmodel_name_or_path: Qwen/Qwen2.5-7B\nfinetuning_type: lora\npref_ftx: 0.2\n",
                       {}).plan
    assert lf["post_training"]["rpo_alpha"] == 0.2
    lf0 = import_config("stage: dpo\nmodel_name_or_path: Qwen/Qwen2.5-7B\npref_ftx: 0.0\n", {}).plan
    assert "rpo_alpha" not in lf0["post_training"]                         # ftx_gamma > 1e-6 only


def test_trl_ppo_rollout_gathers_the_critic_and_keeps_the_scores_by_hand():
    """TRL's PPOTrainer (ms-swift's too) generates under `unwrap_model_for_generation(PolicyAndValueWrapper)`:
    ZeRO-3 gathers the critic's 16-bit weights with the policy's, and `generate(output_scores=True)` keeps one fp32
    row of V logits per generated token beside its torch.stack (2 x 4 bytes x rows x completion x V)."""
    pt = {"method": "ppo", "trainer": "ms-swift", "prompt_len": 512, "completion_len": 256}
    est = estimate(plan(pt, zero_stage=3, micro_batch_size=1, gradient_accumulation_steps=2))
    gen, score = est.run.phases["generate"].components, est.run.phases["score"].components
    # the policy (1,235,814,400) and the critic, the policy's scalar-head model (+ score 2048), 2 bytes each
    assert gen["weights"] - score["weights"] == 2 * P1B + 2 * (P1B + 2048)
    rows = 1 * 2                                   # micro-batch x accumulation: TRL PPO's local rollout batch
    kv = L * KV * rows * (512 + 256 - 1) * (2 + 2)   # bf16 keys and values under DeepSpeed's bf16
    assert gen["activations"] == kv + 4 * 2 * rows * V + 2 * 4 * rows * 256 * V
    # ZeRO-2 gathers nothing: only the scores are added there
    est2 = estimate(plan(pt, zero_stage=2, micro_batch_size=1, gradient_accumulation_steps=2))
    assert est2.run.phases["generate"].components["activations"] == gen["activations"]


def test_swift_dpo_nll_cross_entropy_up_to_3_5_by_hand():
    """ms-swift's DPOTrainer up to 3.5.x runs get_nll_loss: the chosen rows' shifted logits made contiguous into
    nn.CrossEntropyLoss, whose log_softmax output is saved for backward (under rpo_alpha in 3.4.1, always in 3.5.0);
    from 3.6.0 the NLL comes from the per-token log-probs. Single GPU under bf16 autocast: accelerate's fp32 copy of
    the logits, so 4 bytes x 1 pair x (512 - 1) positions x V at the backward peak. rpo_alpha left out at 3.4 is
    RLHFArguments' default `rpo_alpha: float = 1.` (swift/llm/argument/rlhf_args.py v3.0.0-v3.7.x; None from v3.8.0),
    which passes 3.4.1's `is not None`: the same cross-entropy as an explicit 0.1."""
    def peak(version, rpo):
        pt = {"method": "dpo", "trainer": "ms-swift", "prompt_len": 256, "completion_len": 256,
              "trainer_version": version}
        if rpo is not None:
            pt["rpo_alpha"] = rpo
        est = estimate(plan(pt, framework="single", gpus_per_node=1, zero_stage=0, micro_batch_size=1,
                            method="lora", activation_checkpointing="full", precision="bf16-mixed"))
        return est.per_gpu.phase_allocated["loss_bwd"]        # the policy's backward peak
    nll = 4 * 1 * (512 - 1) * V
    assert peak("3.4", 0.1) - peak("3.6", 0.1) == nll
    assert peak("3.5", None) - peak("3.6", None) == nll
    assert peak("3.4", None) - peak("3.6", None) == nll
    assert peak("3.4", None) == peak("3.4", 0.1) == peak("3.5", None)
    assert peak("3.6", None) == peak("3.6", 0.1) == peak("4.6", 0.1) == peak("4.6", None)


def test_trl_ppo_scores_the_rollout_in_forward_batches_beside_its_scores_by_hand():
    """TRL's PPO (ms-swift's) scores the whole local rollout batch (micro-batch x accumulation, at most
    local_rollout_forward_batch_size 64 rows) at once, while the generation's padded fp32 scores stay alive: the
    reference's bf16 logits (rows x T x V, one row's log_softmax beside them) and the last hidden states, plus
    4 bytes x rows x completion x V (ZeRO-2, bf16: no autocast)."""
    pt = {"method": "ppo", "trainer": "ms-swift", "prompt_len": 512, "completion_len": 256}
    est = estimate(plan(pt))                       # micro-batch 2 x accumulation 4: 8 rows
    rows, t, h = 8, 768, 2048
    logits = 2 * rows * t * V + 2 * t * V + 2 * rows * t * h
    assert est.run.phases["score"].components["logits"] == logits + 4 * rows * 256 * V



N, N1 = 4 * 1024 * V, 4 * 1023 * V          # n = R·T·V, n' = R·(T - 1)·V for R = 4 rows, T = 1024


@pytest.mark.parametrize("version, fwd, bwd, ref", [
    # up to v0.5.5: F.log_softmax of the bf16 logits' shifted slice, its output saved (2n'); the logits die when
    # concatenated_forward returns, so the reference (2n + 2n') meets only the policy's saved 2n': the term
    # beyond the policy's forward moment is 2n' + (2n + 2n') - (2n + 2n') = 2n'
    ("0.3.7", 2 * N + 2 * N1, 6 * N1, 2 * N1),
    ("0.5.5", 2 * N + 2 * N1, 6 * N1, 2 * N1),
    # v0.5.6-v0.5.x: the fp32 copy of the logits (2n + 4n at the cast), then the fp32 log_softmax beside it
    # (4n + 4n', the larger), 4n' saved; backward: gather's zeros, the saved output, log_softmax's backward output
    # (12n'); the reference: 4n' + (4n + 4n') - (4n + 4n') = 4n'
    ("0.5.6", 4 * N + 4 * N1, 12 * N1, 4 * N1),
    # v0.6.x: the fp32 copy kept by the per-row logsumexp (4n saved), TRL's fp32 backward 4n + 8n'; the reference
    # 4n + (2n + 4n) - (2n + 4n) = 4n
    ("0.6.0", 2 * N + 4 * N, 4 * N + 8 * N1, 4 * N),
    # from v0.7.0 (and the default, v0.11): flash-attn's cross_entropy_loss over the fp32 copy, as before
    ("0.7.0", 2 * N + 4 * N, 8 * N + 2 * N, 2 * N + 4 * N),
    (None, 2 * N + 4 * N, 8 * N + 2 * N, 2 * N + 4 * N),
])
def test_openrlhf_logprob_code_follows_the_release_by_hand(version, fwd, bwd, ref):
    """OpenRLHF's DPO log-probabilities as each release computes them (post/logprobs.py; read at 6a13d95,
    v0.5.5, v0.5.6, v0.6.0, v0.7.0): DPO micro 2 -> R = 4 rows x T = 1024 under bf16."""
    pt = {"method": "dpo", "trainer": "openrlhf", "prompt_len": 512, "completion_len": 512}
    if version is not None:
        pt["trainer_version"] = version
    t = _terms(plan(pt))
    assert t["logits_forward"].nbytes == fwd
    assert t["logits_backward"].nbytes == bwd
    assert t["reference_logits"].nbytes == ref


def test_llamafactory_reward_model_is_the_causal_lm_with_a_value_head_by_hand():
    """LLaMA-Factory's stage rm loads TRL's AutoModelForCausalLMWithValueHead (train/rm/workflow.py
    add_valuehead=True): the whole causal LM runs, its bf16 logits meet their fp32 copy as the forward returns
    (2n + 4n, n = R·T·V) and none reaches backward (PairwiseTrainer keeps only the values); ValueHead's
    Dropout(0.1) saves its mask and bf16 output (3 bytes x R·T·h). TRL's RewardTrainer is the sequence classifier:
    no logits. Llama 3.2 1B, micro 2 -> R = 4 rows x T = 1024."""
    pt = {"method": "rm", "prompt_len": 512, "completion_len": 512}
    lf = _terms(plan({**pt, "trainer": "llamafactory"}))
    trl = _terms(plan({**pt, "trainer": "trl"}))
    n = 4 * 1024 * V
    assert lf["logits_forward"].nbytes == 2 * n + 4 * n
    assert lf["logits_backward"].nbytes == 0
    assert lf["value_head_dropout"].nbytes == 3 * 4 * 1024 * 2048
    assert trl["logits_forward"].nbytes == 0 and "value_head_dropout" not in trl
    # the parameters: the tied 1B keeps its embedding either way; v_head.summary is h + 1, score h
    assert lf["flat_16bit_params"].nbytes - trl["flat_16bit_params"].nbytes == 2 * 1
    # an untied model keeps its lm_head too (Llama 3.1 8B: V x h = 128,256 x 4,096), all of it trained
    lf8 = _terms(plan({**pt, "trainer": "llamafactory"}, model="llama-3.1-8b"))
    trl8 = _terms(plan({**pt, "trainer": "trl"}, model="llama-3.1-8b"))
    assert lf8["flat_16bit_params"].nbytes - trl8["flat_16bit_params"].nbytes == 2 * (128_256 * 4096 + 1)


@pytest.mark.parametrize("version, saved, bwd", [
    # up to v0.5.5: the saved bf16 log_softmax (2n') and the output's bf16 logits (2n) that training_step_actor
    # holds; backward: max(6n', 2n + 2n') + 2n
    ("0.5.0", 2 * N1 + 2 * N, max(6 * N1, 2 * N + 2 * N1) + 2 * N),
    # v0.5.6-v0.5.x: the fp32 log_softmax (4n') and the output's fp32 copy (4n); backward max(12n', 4n + 2n) + 4n
    ("0.5.6", 4 * N1 + 4 * N, max(12 * N1, 6 * N) + 4 * N),
    # v0.6.x: the logsumexp saves the fp32 logits already: as DPO's
    ("0.6.0", 4 * N, 4 * N + 8 * N1),
])
def test_openrlhf_ppo_actor_keeps_its_output_by_hand(version, saved, bwd):
    """OpenRLHF's PPOTrainer.training_step_actor (v0.3.8-v0.6.0) keeps `output` from
    `self.actor(..., return_output=True)` through backward. PPO micro 4 -> R = 4 completions x T = 1024."""
    t = _terms(plan({"method": "ppo", "trainer": "openrlhf", "prompt_len": 512, "completion_len": 512,
                     "trainer_version": version}, micro_batch_size=4, gradient_accumulation_steps=1))
    assert t["logits_backward"].nbytes == bwd
    kept = saved - (2 * N1 if version == "0.5.0" else 4 * N1)       # the output's logits alone
    if version == "0.6.0":
        assert "actor_output_logits" not in t
    else:
        # alive through the layer-by-layer backward and the optimizer step, after the loss's backward moment
        assert t["actor_output_logits"].nbytes == kept == (2 * N if version == "0.5.0" else 4 * N)
        assert {"recompute_top", "step"} <= set(t["actor_output_logits"].phases)
        assert "fwd" not in t["actor_output_logits"].phases and "loss_bwd" not in t["actor_output_logits"].phases


def test_llamafactory_ppo_critic_is_the_policys_value_head():
    """LLaMA-Factory's PPO trains TRL's AutoModelForCausalLMWithValueHead (train/ppo/trainer.py:
    `logits, _, values = model(...)`): no critic model; LoRA's default reward_model_type lora is an adapter on the
    same base, a full fine-tune's reward a model of its own (the policy's shape, a replica at ZeRO-2)."""
    pt = {"method": "ppo", "trainer": "llamafactory", "prompt_len": 512, "completion_len": 512}
    lora = _terms(plan(pt, method="lora"))
    full = _terms(plan(pt))
    assert not any(k.startswith("critic") for k in lora) and not any(k.startswith("critic") for k in full)
    assert "reward_model_weights" not in lora
    # the reward model: LLaMA-Factory's value-head model of Llama 3.2 1B (tied lm_head), plus v_head (h + 1), bf16
    assert full["reward_model_weights"].nbytes == 2 * (P1B + 2048 + 1)
    trl = _terms(plan({**pt, "trainer": "trl"}))
    assert "critic_state" in trl
