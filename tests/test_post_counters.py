"""torch's counters against the device with a colocated vLLM (post/generator.py `vllm_pool_bytes`, memory/terms
COUNTED): a sleeping vLLM in the training process stays in `torch.cuda.memory_allocated()` (its CuMemAllocator
pool is unmapped behind the caching allocator: vllm#17117), while another process's vLLM (OpenRLHF's Ray actors)
is on the device but never in the trainer's counters. nvidia-smi (device used) is the same either way."""
from __future__ import annotations

from zerocalc.estimate import estimate
from zerocalc.plan import Plan

# Llama 3.2 1B: 1,235,814,400 parameters (tied), 16 layers, 8 KV heads x 64, hidden 2048, intermediate 8192
P1B, L, KV, H, I = 1_235_814_400, 16, 512, 2048, 8192
A100 = 80 * 2**30


def grpo(gen: dict, trainer: str = "trl", **kw):
    d = {"model": "llama-3.2-1b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "framework": "deepspeed",
         "zero_stage": 2, "micro_batch_size": 2, "gradient_accumulation_steps": 4, "seq_len": 1024,
         "activation_checkpointing": "full",
         "post_training": {"method": "grpo", "trainer": trainer, "num_generations": 8, "prompt_len": 256,
                           "completion_len": 768, "generator": gen}}
    d.update(kw)
    return estimate(Plan.from_dict(d))


def pool_by_hand(util: float) -> int:
    # vLLM's 16-bit weights, 2 x 1,235,814,400 = 2,471,628,800; the profiling forward at 4096 batched tokens:
    # 4096 x 2 x (3 x 8192 + 2 x 2048) = 234,881,024; the KV cache takes what is left of util x 80 GiB in whole
    # tokens of 2 (K, V) x 16 layers x 512 x 2 bytes = 32,768 bytes
    weights = 2 * P1B
    profile = 4096 * 2 * (3 * I + 2 * H)
    per_token = 2 * L * KV * 2
    tokens = (int(util * A100) - weights - profile) // per_token
    return weights + tokens * per_token


def test_a_sleeping_vllm_stays_in_torchs_counters_not_on_the_device():
    est = grpo({"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 2})
    pool = pool_by_hand(0.3)
    # 0.3 x 80 GiB = 25,769,803,776; less weights and profile 23,063,293,952 = 703,835 tokens (28,672 bytes over)
    assert pool == 2_471_628_800 + 703_835 * 32_768 == 25_534_894_080
    pg = est.per_gpu
    assert pg.detail["vllm_sleeping_pool"] == pool == pg.counted
    # the device's own figures keep their order; the counters sit the pool above them
    assert pg.peak_allocated - pool <= pg.peak_reserved - pool <= pg.device_used < pg.peak_reserved
    assert sum(pg.components.values()) == pg.device_used          # components are the device's bytes
    # every phase after the trainer's build counts the pool, less what the phase has mapped (the steady step's
    # components hold the allocator's reserve and the CUDA context too: it is per_gpu, above)
    for name, ph in est.run.phases.items():
        if name == "step":
            assert (ph.allocated, ph.reserved, ph.device_used) == (pg.peak_allocated, pg.peak_reserved, pg.device_used)
            continue
        over = ph.allocated - sum(ph.components.values())
        want = {"load": 0, "generate": 0, "sync": pool - 2 * P1B}.get(name, pool)   # sync: the weights are awake
        assert over == want, name
        assert ph.reserved - want <= ph.device_used
    assert est.run.peak_allocated >= pg.peak_allocated


def test_sleep_0_and_hf_generate_count_nothing_off_the_device():
    awake = grpo({"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 0})
    assert awake.per_gpu.counted == 0 and "vllm_sleeping_pool" not in awake.per_gpu.detail
    assert awake.per_gpu.detail["vllm_budget"] == int(0.3 * A100)      # allocated through torch, on the device
    hf = grpo(None)
    assert hf.per_gpu.counted == 0
    assert all(p.allocated == sum(p.components.values()) for n, p in hf.run.phases.items() if n != "step")


def test_openrlhf_colocated_vllm_is_another_process():
    util = 0.3
    budget = int(util * A100)
    awake = grpo({"engine": "vllm", "mode": "colocate", "gpu_memory_utilization": util, "sleep": 0}, "openrlhf")
    pg = awake.per_gpu
    assert pg.counted == 0 and pg.detail["vllm_budget"] == budget
    # on the device (nvidia-smi), outside the trainer's allocator: device used holds it beside reserved
    assert pg.device_used - pg.peak_reserved >= budget
    asleep = grpo({"engine": "vllm", "mode": "colocate", "gpu_memory_utilization": util, "sleep": 2}, "openrlhf")
    gen = asleep.run.phases["generate"]
    assert gen.components["generator"] == budget
    assert gen.allocated == sum(gen.components.values()) - budget
    assert gen.device_used >= gen.reserved + budget
