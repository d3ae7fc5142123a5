"""The step-time model: hand-computed FLOPs and communication volumes, and its invariants."""
from __future__ import annotations

import math
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from zerocalc import Plan, PlanError, estimate
from zerocalc.model import resolve_model
from zerocalc.step import step_estimate
from zerocalc.step.flops import flops_per_token

L8B = resolve_model("llama-3.1-8b")
# Llama 3.1 8B (config.json): hidden 4096, 32 layers, 32 heads of 128, 8 KV heads, MLP 14336, vocab 128256
PER_LAYER = (4096 * 4096 * 2          # q_proj, o_proj
             + 4096 * 1024 * 2        # k_proj, v_proj (8 KV heads x 128)
             + 4096 * 14336 * 3)      # gate, up, down
assert PER_LAYER == 218_103_808
P = 32 * PER_LAYER + 128256 * 4096    # + lm_head; embeddings are lookups, norms no matmul
ATTN_4096 = 2 * 2 * 4096 * (32 * 128) * 32     # Q·Kᵀ and P·V: 2 matmuls x 2·s·(H·d) per token, 32 layers


def test_full_finetune_flops_by_hand():
    f = flops_per_token(L8B, Plan())
    assert f.matmul_params == P == 7_504_658_432
    assert f.forward == 2 * P + ATTN_4096 == 17_156_800_512
    assert f.backward == 4 * P + 2 * ATTN_4096 == 34_313_601_024
    assert f.recompute == 0


def test_full_checkpointing_recomputes_the_blocks_once():
    f = flops_per_token(L8B, Plan.from_dict({"activation_checkpointing": "full"}))
    assert f.recompute == 2 * 32 * PER_LAYER + ATTN_4096       # every decoder layer, not the lm_head
    s = flops_per_token(L8B, Plan.from_dict({"activation_checkpointing": "selective"}))
    assert s.recompute == ATTN_4096                             # Megatron's: the attention core only


def test_lora_backward_has_no_weight_gradient_of_the_base():
    f = flops_per_token(L8B, Plan.from_dict({"method": "lora"}))   # rank 16 on all 7 linears
    per_layer = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 2 + (14336 + 4096))
    a = 32 * per_layer
    assert a == 41_943_040 == f.adapter_params
    assert f.forward == 2 * P + ATTN_4096 + 2 * a
    assert f.backward == 2 * P + 2 * ATTN_4096 + 4 * a


def test_seed_example_communication_by_hand():
    """ZeRO-2 on 4 A100 (NVSwitch, 300 GB/s per direction), accumulation 4, bf16: the 16-bit gradients are
    reduce-scattered every micro-step, the updated 16-bit parameters all-gathered once per step."""
    d = estimate(Plan()).to_dict()
    psi = 8_030_261_248
    rs, ag = d["communication"]["reduce_scatter"], d["communication"]["all_gather"]
    assert rs["bytes"] == 4 * 2 * psi and rs["link"] == "nvlink" and rs["calls"] == 4
    assert ag["bytes"] == 2 * psi and ag["calls"] == 1
    assert rs["bus_bytes"] == int(4 * 2 * psi * 3 / 4)        # ring: (n-1)/n of the buffer per rank
    # bus bytes / (link x 80 %), plus NCCL's latency (tuning.cc Ring/Simple: 8.4 us base + 3 ring steps x 3.4 us
    # over NVLink) for each of its ceil(2 psi / (5e8 elements x 2 B)) = 17 bucket reduces
    per_call = 2 * psi * (3 / 4) / (300e9 * 0.8) + 17 * (8.4e-6 + 3 * 3.4e-6)
    assert math.isclose(rs["time_s"], 4 * per_call, rel_tol=1e-9)
    # overlap_comm is off by default at stage 2: all of it is exposed
    assert math.isclose(d["step"]["exposed_communication_s"], d["step"]["communication_s"], rel_tol=1e-12)


def test_zero3_moves_three_psi_and_ddp_all_reduces_fp32():
    psi = 8_030_261_248
    d = estimate(Plan.from_dict({"zero_stage": 3, "gradient_accumulation_steps": 1}),
                 search_min_gpus=False).to_dict()["communication"]
    assert d["all_gather"]["bytes"] == 2 * (2 * psi)          # forward and backward gathers, 16-bit
    assert d["reduce_scatter"]["bytes"] == 2 * psi            # 3 psi in all
    dd = estimate(Plan.from_dict({"framework": "ddp", "zero_stage": 0, "gpus_per_node": 2, "model": "llama-3.2-1b",
                                  "gradient_accumulation_steps": 3}), search_min_gpus=False).to_dict()
    ar = dd["communication"]["all_reduce"]
    n1b = resolve_model("llama-3.2-1b").total_params
    assert ar["bytes"] == 4 * n1b and ar["calls"] == 1          # fp32 grads of fp32 params, once per step
    assert ar["bus_bytes"] == int(4 * n1b * 2 * (2 - 1) / 2)    # 2(n-1)/n


def test_network_key_and_multi_node_link():
    p = Plan.from_dict({"nodes": 2, "network": {"gbps_per_gpu": 100, "kind": "roce"}})
    d = estimate(p, search_min_gpus=False).to_dict()
    assert d["communication"]["reduce_scatter"]["link"] == "network"
    assert d["step"]["network"] == {"gbps_per_gpu": 100.0, "kind": "roce", "defaulted": False}
    # 4 rails of 100 Gb/s = 50 GB/s (below NVLink's 300): 8 ranks, (n-1)/n of 2 psi per call; latency of each of
    # the 17 bucket calls: 8.4 us + 6 NVLink steps x 3.4 us + 1 network step x 9.6 us (tuning.cc)
    per_call = 2 * 8_030_261_248 * (7 / 8) / (4 * 100e9 / 8 * 0.8) + 17 * (8.4e-6 + 6 * 3.4e-6 + 9.6e-6)
    assert math.isclose(d["communication"]["reduce_scatter"]["time_s"], 4 * per_call, rel_tol=1e-9)
    for bad, key in (({"gbps_per_gpu": 0}, "network.gbps_per_gpu"), ({"kind": "tokenring"}, "network.kind"),
                     ({"speed": 1}, "network.speed"), ("fast", "network")):
        with pytest.raises(PlanError) as e:
            Plan.from_dict({"network": bad})
        assert e.value.key == key


def test_train_tokens_time_and_cost():
    p = Plan()
    s = step_estimate(p, L8B, train_tokens=1e9, price_per_gpu_hour=2.0)
    t = s.to_dict()["step"]["train"]
    steps = 1e9 / (2 * 4 * 4096 * 4)
    assert math.isclose(t["time_s"], steps * s.time_s)
    assert math.isclose(t["gpu_hours"], t["time_s"] * 4 / 3600)
    assert math.isclose(t["cost"], 2.0 * t["gpu_hours"])


def test_compile_fuses_kernels_and_bytes():
    """torch.compile as fusion: fewer kernels and fewer memory-bound bytes, the same GEMMs and attention; the
    step says so. (Eager llama layer: 32 + 64 memory-bound kernels forward + backward; compiled 5 + 10.)"""
    eager = Plan.from_dict({"framework": "single", "gpus_per_node": 1, "stack": {"trainer": "custom-loop"}})
    comp = Plan.from_dict({**eager.to_dict(), "stack": {"trainer": "custom-loop", "compile": "model"}})
    a, b = step_estimate(eager, L8B), step_estimate(comp, L8B)
    assert b.micro.forward.kernels < a.micro.forward.kernels and b.micro.backward.kernels < a.micro.backward.kernels
    # bf16-mixed over fp32 weights (the seed plan): the "mixed" layer table, 32 kernels a layer, 32 layers
    assert a.micro.forward.kernels - b.micro.forward.kernels == 32 * (32 - 5)
    assert b.micro.forward.memory_s < a.micro.forward.memory_s
    assert math.isclose(a.micro.forward.gemm_s, b.micro.forward.gemm_s)
    assert any("torch.compile" in n for n in b.notes) and not any("torch.compile" in n for n in a.notes)


def test_estimate_keys_unchanged_and_step_added():
    d = estimate(Plan()).to_dict()
    assert list(d)[-2:] == ["step", "communication"]
    for k in ("time_s", "tokens_per_s_per_gpu", "compute_s", "communication_s", "offload_s",
              "exposed_communication_s", "mfu"):
        assert isinstance(d["step"][k], float)
    bd = d["step"]["breakdown"]
    assert list(bd) == ["gemm_s", "attention_s", "memory_bound_s", "launch_s", "optimizer_s", "exposed_comm_s",
                        "offload_s"]
    assert math.isclose(sum(bd.values()), d["step"]["time_s"], rel_tol=1e-9)


PLANS = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "qwen3-30b-a3b", "mistral-7b-v0.3"]),
    "gpu": st.sampled_from(["a100-sxm4-80gb", "h100-sxm-80gb", "rtx-4090", "l40s", "h100-pcie-80gb"]),
    "gpus_per_node": st.sampled_from([1, 2, 4, 8]),
    "zero_stage": st.sampled_from([1, 2, 3]),
    "micro_batch_size": st.integers(1, 8),
    "gradient_accumulation_steps": st.integers(1, 8),
    "seq_len": st.sampled_from([512, 2048, 8192]),
    "activation_checkpointing": st.sampled_from(["none", "full", "selective"]),
    "method": st.sampled_from(["full", "lora", "qlora"]),
    "deepspeed": st.sampled_from([{}, {"overlap_comm": True}]),
})


@settings(max_examples=60, deadline=None)
@given(PLANS, st.integers(1, 16))
def test_parts_add_up_and_more_gpus_never_beat_the_floor(d, nodes):
    p = Plan.from_dict(d)
    s = step_estimate(p, resolve_model(p.model))
    assert math.isclose(s.time_s, s.compute_s + s.exposed_communication_s + s.offload_s, rel_tol=1e-12)
    assert math.isclose(sum(s.breakdown().values()), s.time_s, rel_tol=1e-9)
    assert all(v >= 0 for v in s.breakdown().values())
    assert 0 <= s.exposed_communication_s <= s.communication_s * (1 + 1e-12)
    big = Plan.from_dict({**d, "nodes": nodes})
    b = step_estimate(big, resolve_model(big.model))
    tokens = big.micro_batch_size * big.seq_len * big.gradient_accumulation_steps
    per_token = b.time_s / tokens
    # the forward+backward compute of a token does not shrink with data parallelism ...
    compute_floor = (b.forward_s + b.backward_s) * big.gradient_accumulation_steps / tokens
    assert per_token >= compute_floor * (1 - 1e-12)
    assert math.isclose(compute_floor, (s.forward_s + s.backward_s) * p.gradient_accumulation_steps / tokens,
                        rel_tol=1e-9)
    # ... and what cannot overlap (the post-step all-gather, exposed collectives) is never hidden
    floor = sum(c.calls * c.time_s for c in b.collectives if c.window == "none") / tokens
    assert per_token >= compute_floor + floor * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(PLANS, st.sampled_from(["cpu", "nvme"]), st.booleans())
def test_offload_never_reduces_step_time(d, device, params):
    p = Plan.from_dict(d)
    ch = {"offload_optimizer": device}
    if params:
        ch.update(zero_stage=3, offload_params=device)
    off = Plan.from_dict({**d, **ch})
    base = Plan.from_dict({**d, "zero_stage": off.zero_stage})
    arch = resolve_model(p.model)
    assert step_estimate(off, arch).time_s >= step_estimate(base, arch).time_s


def test_custom_gpu_rates_are_used_and_checked():
    g = {"name": "card", "memory_gib": 48, "compute_capability": "8.6", "bf16_dense_tflops": 100,
         "memory_bandwidth_gb_s": 500}
    p = Plan.from_dict({"gpu": g, "gpus_per_node": 1, "framework": "single", "zero_stage": 0,
                        "model": "llama-3.2-1b", "gradient_accumulation_steps": 1})
    s = step_estimate(p, resolve_model(p.model))
    # sm86 takes the Ampere/Ada best-shape ratio (0.85, stated in the notes) of the given 100 TFLOP/s; the rates
    # are known, so nothing is warned
    assert s.rates.peak_flops == 100e12 and s.rates.gemm_best == 0.85 and s.rates.hbm_bytes_s == 500e9
    assert any("0.85" in n for n in s.notes) and s.warnings == ()
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"gpu": {**g, "bf16_dense_tflops": "fast"}})
    assert e.value.key == "gpu.bf16_dense_tflops"


def test_custom_gpu_without_rates_warns_naming_what_it_assumed():
    g = {"name": "mystery", "memory_gib": 48}
    p = Plan.from_dict({"gpu": g, "gpus_per_node": 1, "framework": "single", "zero_stage": 0,
                        "model": "llama-3.2-1b", "gradient_accumulation_steps": 1})
    est = estimate(p, search_min_gpus=False)
    w = [x for x in est.warnings if x.id == "step-rates-assumed"]
    assert len(w) == 1
    for text in ("mystery", "312 TFLOP/s", "2039 GB/s", "compute capability"):
        assert text in w[0].message
    assert not [x for x in estimate(Plan(), search_min_gpus=False).warnings if x.id == "step-rates-assumed"]


def test_throughput_data_is_sourced_and_parses():
    import json
    import pathlib
    rows = json.loads((pathlib.Path(__file__).resolve().parents[1] / "validation" / "throughput.json").read_text())
    assert len(rows) >= 25 and len({r["source"] for r in rows}) >= 4
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source_url"].startswith("https://") and r["quote"].strip()
        assert r["measured_tokens_per_s_per_gpu"] > 0
        Plan.from_dict(r["plan"])


def test_untraced_model_family_warns_naming_what_the_step_assumed():
    # a Mamba config: its selective-scan mixers are in no op log, so the step prices its layers as Llama layers
    # and says so; a traced family (Llama preset, GPT-2) warns nothing
    mamba = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280,
             "state_size": 16, "expand": 2, "conv_kernel": 4}
    base = {"gpus_per_node": 1, "framework": "single", "zero_stage": 0, "gradient_accumulation_steps": 1,
            "seq_len": 1024, "micro_batch_size": 1}
    est = estimate(Plan.from_dict({**base, "model": mamba}), search_min_gpus=False)
    w = [x for x in est.warnings if x.id == "step-model-assumed"]
    assert len(w) == 1 and "mamba" in w[0].message and "Llama decoder layer" in w[0].message
    for model in ("llama-3.2-1b", {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                   "vocab_size": 50257}):
        est = estimate(Plan.from_dict({**base, "model": model}), search_min_gpus=False)
        assert not [x for x in est.warnings if x.id == "step-model-assumed"]


def test_gemma2_extra_norms_are_priced_not_warned():
    # Gemma 2's four norms a layer: two more RMSNorms over h than the traced Llama layer, each 36 B per element
    # forward and 83 B backward (kernels.EXTRA_NORM, the traced RMSNorm's per-element cost)
    from zerocalc.step.ops import model_assumptions, micro_step
    from zerocalc.step.rates import gpu_rates
    g2 = {"model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000}
    arch = resolve_model(g2)
    assert arch.norms_per_layer == 4 and model_assumptions(arch) == ()
    p = Plan.from_dict({"model": g2, "gpus_per_node": 1, "framework": "single", "zero_stage": 0,
                        "precision": "bf16-pure", "micro_batch_size": 1, "seq_len": 1024,
                        "gradient_accumulation_steps": 1})
    rates = gpu_rates(p)
    two = micro_step(dataclasses.replace(arch, norms_per_layer=2), p, rates)
    four = micro_step(arch, p, rates)
    # 1024 tokens x 26 layers x 2 norms x 2304 x 36 B forward, at 65 % of the A100's 2039 GB/s
    want = 1024 * 26 * 2 * 2304 * 36 / (0.65 * 2039e9)
    assert four.forward.memory_s - two.forward.memory_s == pytest.approx(want, rel=1e-9)
    assert four.forward.kernels - two.forward.kernels == 26 * 2 * 4
