"""verl's post-training mechanisms read in verl's source (tags v0.4.1 ... v0.7.0, HEAD b178a3c), each against
arithmetic written here (no figure copied from the code under test)."""
from __future__ import annotations

import pytest

from zerocalc.plan import Plan, PlanError

# Llama 3.2 1B: 1,235,814,400 parameters, 16 layers, hidden 2048, intermediate 8192, 8 KV heads x 64,
# vocabulary 128,256 (tied embedding: the largest tensor, 128,256 x 2048)
P1B, V, H = 1_235_814_400, 128_256, 2048
# one decoder layer: q, o 2048 x 2048; k, v 512 x 2048; gate, up, down 8192 x 2048; two norms of 2048
LAYER = 2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048 + 2 * 2048          # 60,821,504
# LoRA r16 on the 7 linears: 16 x (4096 + 2560 + 2560 + 4096 + 3 x 10240) = 704,512 per layer, x 16
ADAPTERS = 16 * 704_512                                                         # 11,272,192


def verl_plan(gen=None, method="lora", version=None, offload=None, **kw) -> Plan:
    pt = {"method": "grpo", "trainer": "verl", "num_generations": 8, "prompt_len": 256, "completion_len": 768}
    if offload is not None:
        pt["offload_between_updates"] = offload
    if gen is not None:
        pt["generator"] = gen
    if version is not None:
        pt["trainer_version"] = version
    d = {"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "framework": "fsdp",
         "zero_stage": 3, "micro_batch_size": 2, "gradient_accumulation_steps": 4, "seq_len": 1024,
         "activation_checkpointing": "full", "method": method, "post_training": pt}
    d.update(kw)
    return Plan.from_dict(d)


def phases(p: Plan) -> dict:
    from zerocalc.estimate import step_inputs_for, whole_run
    from zerocalc.post import post_phases, resolve
    view = whole_run(p, step_inputs_for(p), p.gpu_spec)[1]
    return dict(post_phases(view, resolve(p)))


def test_layer_arithmetic():
    assert 16 * LAYER + V * H + H == P1B


# --- 1. the LoRA weight sync -------------------------------------------------------------------------------

def test_verl_lora_fsdp1_sync_gathers_the_whole_fp32_model():
    # fsdp_utils.py collect_lora_params: FSDP.summon_full_params(module) of the whole actor; verl builds the actor
    # in fp32 and FSDP1 summons the full-precision flat parameter (FlatParamHandle._force_full_precision):
    # 4 B x (base + adapters) = 4 x (1,235,814,400 + 11,272,192) = 4,988,346,368
    ph = phases(verl_plan({"engine": "vllm", "sleep": 1}))["sync"]
    assert ph.transient == 4 * (P1B + ADAPTERS) == 4_988_346_368
    assert "whole 32-bit model" in ph.note


def test_verl_layered_summon_gathers_one_fp32_layer():
    # layered_summon_lora_params: summon_full_params(one decoder layer) then empty_cache():
    # 4 B x (60,821,504 + 11,272,192 / 16) = 4 x 61,526,016 = 246,104,064
    from zerocalc.post.generator import verl_layered_unit_numel
    arch = verl_plan().arch
    assert 4 * verl_layered_unit_numel(arch.layer_sizes, ADAPTERS, 16) == 4 * (LAYER + ADAPTERS // 16) == 246_104_064
    # that gather ends (empty_cache) before vLLM's weights wake: 2 x 1,235,814,400 / TP 1 = 2,471,628,800 is the
    # sync's moment, the LoRA tensors coming from the CPU
    ph = phases(verl_plan({"engine": "vllm", "sleep": 1, "layered_summon": True}))["sync"]
    assert ph.transient == 0 and ph.components["generator"] == 2 * P1B == 2_471_628_800
    assert "layered_summon" in ph.note and ph.empties_cache_before and ph.empties_cache


def test_verl_gather_and_woken_weights_never_meet():
    # FSDP1, not layered: the whole fp32 gather 4,988,346,368 > the woken 16-bit weights 2 x P1B / 4 = 617,907,200:
    # the sync's moment is the gather alone (no generator component), emptied at both ends
    ph = phases(verl_plan({"engine": "vllm", "sleep": 1, "tensor_parallel_size": 4}))["sync"]
    assert ph.transient == 4 * (P1B + ADAPTERS) and "generator" not in ph.components
    assert ph.empties_cache_before and ph.empties_cache


def test_verl_fsdp2_and_full_sync_one_fp32_tensor():
    # FSDP2: summon_full_params finds no FSDP1 state; each DTensor's full_tensor(): 4 x 128,256 x 2048 =
    # 1,050,673,152, more than the woken weights at TP 4 (617,907,200): the gather's moment
    fsdp2 = phases(verl_plan({"engine": "vllm", "sleep": 1, "tensor_parallel_size": 4},
                             stack={"fsdp_version": 2}))["sync"]
    assert fsdp2.transient == 4 * V * H == 1_050_673_152


def test_verl_full_fsdp1_sync_keeps_the_state_dicts_shard_copies():
    # without LoRA, FSDP1: state_dict() (SHARDED_STATE_DICT, DTensor: _create_chunk_dtensor clones each full
    # parameter, then its shard) keeps 4 B x P / 4 GPUs = 1,235,814,400 of shard copies until `del params`.
    # While it runs: the root unit (embedding + final norm: 1,235,814,400 - 16 x 60,821,504 = 262,670,336), one
    # layer (60,821,504) and one whole-parameter clone (the embedding, 262,668,288) in fp32 beside them:
    # 1,235,814,400 + 4 x 586,160,128 = 3,580,454,912. After vLLM's weights wake: the copies and one
    # full_tensor() of the largest parameter, 1,235,814,400 + 1,050,673,152 = 2,286,487,552
    root = P1B - 16 * LAYER
    assert root == 262_670_336
    during = 4 * P1B // 4 + 4 * (root + LAYER + V * H)
    after = 4 * P1B // 4 + 4 * V * H
    assert (during, after) == (3_580_454_912, 2_286_487_552)
    # TP 1: the woken 2 x P1B = 2,471,628,800 beside `after` (4,758,116,352) is the larger moment
    full = phases(verl_plan({"engine": "vllm", "sleep": 1}, method="full"))["sync"]
    assert full.transient == after and full.components["generator"] == 2 * P1B
    # TP 4: woken 617,907,200 + after = 2,904,394,752 < during: the state_dict() moment, before the wake
    tp4 = phases(verl_plan({"engine": "vllm", "sleep": 1, "tensor_parallel_size": 4}, method="full"))["sync"]
    assert tp4.transient == during and "generator" not in tp4.components
    # FSDP2's state_dict() hands out the sharded DTensors themselves: one fp32 tensor, 1,050,673,152
    f2 = phases(verl_plan({"engine": "vllm", "sleep": 1}, method="full", stack={"fsdp_version": 2}))["sync"]
    assert f2.transient == 4 * V * H


def test_verl_lora_base_is_fp32_and_reference_bf16():
    # fsdp_workers.py: torch.float32 if self._is_actor else torch.bfloat16: the LoRA actor's frozen base is fp32
    from zerocalc.estimate import step_inputs_for
    from zerocalc.post import resolve
    from zerocalc.post.step import update_inputs
    p = verl_plan({"engine": "vllm", "sleep": 1})
    post = resolve(p)
    assert post.policy_load_bytes == 4 and post.ref_bytes == 2
    si = update_inputs(p, step_inputs_for(p), post)
    assert si.frozen_numel == P1B and si.frozen_bytes == 4 * P1B == 4_943_257_600


@pytest.mark.parametrize("bad", [
    {"trainer": "trl"},                                      # TRL has no layered_summon
    {"method": "full"},                                      # a full actor syncs tensor by tensor anyway
    {"framework": "deepspeed"},
])
def test_layered_summon_is_verl_lora_fsdp_only(bad):
    kw = {}
    if "trainer" in bad:
        with pytest.raises(PlanError, match="layered_summon"):
            Plan.from_dict({"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4,
                            "framework": "fsdp", "zero_stage": 3, "method": "lora",
                            "post_training": {"method": "grpo", "trainer": "trl", "num_generations": 8,
                                              "generator": {"engine": "vllm", "layered_summon": True}}})
        return
    kw.update(bad)
    if kw.get("framework") == "deepspeed":
        kw["zero_stage"] = 3
    with pytest.raises(PlanError, match="layered_summon"):
        verl_plan({"engine": "vllm", "sleep": 1, "layered_summon": True}, **kw)


def test_layered_summon_round_trips_and_is_omitted_when_off():
    p = verl_plan({"engine": "vllm", "sleep": 1, "layered_summon": True})
    assert Plan.from_dict(p.to_dict()) == p
    assert p.to_dict()["post_training"]["generator"]["layered_summon"] is True
    assert "layered_summon" not in verl_plan({"engine": "vllm", "sleep": 1}).to_dict()["post_training"]["generator"]


# --- 3. the sleep level ----------------------------------------------------------------------------------

def test_verl_default_sleep_level_by_version():
    from zerocalc.post import resolve
    # 0.5: sleep(level=1) written out (sharding_manager/fsdp_vllm.py); 0.6+: VLLM_SLEEP_LEVEL, 2 on vLLM >= 0.8.5
    assert resolve(verl_plan(version="0.5.0")).gen.sleep == 1
    assert resolve(verl_plan(version="0.6")).gen.sleep == 2
    assert resolve(verl_plan()).gen.sleep == 2                       # newest read: 0.7.0


# --- 2. entropy in the old-log-prob pass -------------------------------------------------------------------

def test_verl_old_log_prob_pass_computes_the_entropy():
    # 2 rows of 256 + 768 tokens; 16-bit logits of every position: 2 B x 2 x 1024 x 128,256 = 525,336,576, the
    # hidden states beside them 2 x 2 x 1024 x 2048 = 8,388,608 (the MLP moment, 2 x 2 x 1024 x (3 x 8192
    # + 2 x 2048) = 117,440,512, is smaller), and entropy_from_logits under bf16 autocast: the fp32 softmax and
    # the fp32 product over the response slice, 2 x 4 B x 2 rows x 768 x 128,256 = 1,576,009,728
    for version in ("0.3.0", None):            # 0.3.x: _forward_micro_batch always; 0.4+: calculate_entropy=True
        ph = phases(verl_plan({"engine": "vllm", "sleep": 1}, version=version))["score"]
        assert ph.transient == 2 * 2 * 1024 * V + 2 * 2 * 1024 * H + 2 * 4 * 2 * 768 * V == 2_109_734_912


def test_verl_update_step_entropy_up_to_0_3():
    # the update step's entropy under autograd: 0.3.x always, 0.4+ only with entropy_coeff != 0 (default 0).
    # n = 2 rows x 768 x 128,256 = 197,001,216: 8n saved and at the end of forward, 26n more at backward's peak
    from zerocalc.estimate import step_inputs_for
    from zerocalc.post import resolve
    from zerocalc.post.step import update_inputs, update_plan

    def lg(version):
        p = verl_plan({"engine": "vllm", "sleep": 1}, version=version)
        post = resolve(p)
        sp = update_plan(p, post)
        return update_inputs(sp, step_inputs_for(sp), post).logits
    old, new = lg("0.3.0"), lg(None)
    n = 2 * 768 * V
    assert old.saved - new.saved == 8 * n == 1_576_009_728
    assert old.forward_peak - new.forward_peak == 8 * n
    assert old.backward_peak - new.backward_peak == 26 * n == 5_122_031_616


def test_trl_score_has_no_verl_entropy():
    from zerocalc.post import resolve
    p = Plan.from_dict({"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4,
                        "post_training": {"method": "grpo", "num_generations": 8}})
    assert not resolve(p).score_entropy


# actor.fsdp_config.param_offload / optimizer_offload: verl's offload between updates (post/offload.py), not FSDP's
# CPUOffload (the actor never has it: fsdp_workers.py)
OFFLOAD = {"weights": True, "optimizer": True}


def test_verl_param_offload_loads_the_shard_for_the_sync():
    # load_fsdp_model_to_gpu before collecting: the fp32 shard 4 x (P + adapters) / 4 GPUs = 1,247,086,592 beside the
    # whole-model gather 4,988,346,368 = 6,235,432,960 (every release)
    shard = 4 * (P1B + ADAPTERS) // 4
    assert shard == 1_247_086_592
    for version in ("0.5.0", None):
        ph = phases(verl_plan({"engine": "vllm", "sleep": 1}, version=version, offload=OFFLOAD))["sync"]
        assert ph.components["weights"] == 4 * (P1B + ADAPTERS) + shard == 6_235_432_960
    # layered_summon: the wake is the larger moment; up to 0.5 the shard stays through it (offloaded after
    # update_params), from 0.6 it is offloaded before resume(tags=["weights"])
    old = phases(verl_plan({"engine": "vllm", "sleep": 1, "layered_summon": True}, version="0.5.0",
                           offload=OFFLOAD))["sync"]
    assert old.components["generator"] == 2 * P1B and old.components["weights"] == shard
    new = phases(verl_plan({"engine": "vllm", "sleep": 1, "layered_summon": True}, offload=OFFLOAD))["sync"]
    assert new.components["generator"] == 2 * P1B and "weights" not in new.components


def test_an_unsaid_sleep_in_a_verl_generator_block_is_verls_own_level():
    # verl's free_cache_engine is on by default: a generator block that leaves `sleep` out sleeps as verl does
    # (2 from 0.6, 1 up to 0.5 and with layered_summon), not 0; a stated 0 stays 0, and other trainers' default is 0
    from zerocalc.plan import Plan

    def sleep(pt, **kw):
        d = {"model": "llama-3.2-1b", "framework": "fsdp", "zero_stage": 3, "post_training": pt, **kw}
        return Plan.from_dict(d).post_training.generator.sleep

    block = {"engine": "vllm", "gpu_memory_utilization": 0.6}
    assert sleep({"method": "grpo", "trainer": "verl", "generator": block}) == 2
    assert sleep({"method": "grpo", "trainer": "verl", "trainer_version": "0.5", "generator": block}) == 1
    assert sleep({"method": "grpo", "trainer": "verl", "generator": {**block, "layered_summon": True}},
                 method="lora") == 1
    assert sleep({"method": "grpo", "trainer": "verl", "generator": {**block, "sleep": 0}}) == 0
    assert sleep({"method": "grpo", "trainer": "trl", "generator": block}) == 0
