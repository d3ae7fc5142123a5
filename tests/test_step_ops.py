"""The step model's per-op rules against the tracer's op logs (tests/data/step_oplog.json, written by
`python -m tools.memtrace.oplog` from the real HF / PEFT code on FakeTensors), and hand-computed cases.

Pure Python: reads the checked-in fixture; no torch."""
from __future__ import annotations

import json
import math
import pathlib

import pytest

from zerocalc import Plan, estimate
from zerocalc.step import kernels
from zerocalc.step.comm import nccl_latency
from zerocalc.step.ops import gemm_s, micro_step
from zerocalc.step.rates import gpu_rates

FIXTURE = json.loads((pathlib.Path(__file__).parent / "data" / "step_oplog.json").read_text())["results"]


def _engine(pid):
    r = FIXTURE[pid]
    plan = Plan.from_dict(r["plan"])
    arch = estimate(plan, search_min_gpus=False).arch
    rates = gpu_rates(plan)
    return r, plan, arch, rates, micro_step(arch, plan, rates)


def _trace(r, phases, what):
    out = 0.0
    for ph in phases:
        p = r["phases"].get(ph)
        if p:
            out += p["kernels"] if what == "kernels" else p["memory"]["bytes"]
    return out


@pytest.mark.parametrize("pid", sorted(FIXTURE))
def test_rules_match_the_op_logs(pid):
    """Memory-bound bytes and kernels per pass, engine rule vs op log: forward vs the forward phase,
    backward vs backward + recompute (the engine's backward holds the recompute). HF GPT-2 runs gelu_new,
    a chain the one-kernel GELU rule leaves out: kernels.GELU_NEW_EXTRA is added for it here."""
    r, plan, arch, rates, m = _engine(pid)
    bw = rates.hbm_bytes_s * kernels.MEMORY_EFFICIENCY
    for phase, eng, traced in (("forward", m.forward, ["forward"]), ("backward", m.backward, ["backward", "recompute"])):
        nbytes, kern = eng.memory_s * bw, eng.kernels
        if arch.family == "gpt2":
            extra_b, extra_k = kernels.GELU_NEW_EXTRA[phase]
            nbytes += plan.micro_batch_size * plan.seq_len * arch.num_layers * arch.intermediate_size * extra_b
            kern += arch.num_layers * extra_k
        tb, tk = _trace(r, traced, "bytes"), _trace(r, traced, "kernels")
        assert abs(nbytes / tb - 1) < 0.12, (pid, phase, nbytes, tb)
        assert abs(kern / tk - 1) < 0.25, (pid, phase, kern, tk)


@pytest.mark.parametrize("pid", sorted(FIXTURE))
def test_gemm_flops_match_the_op_logs(pid):
    """The forward's GEMM + attention FLOPs of the op log against flops.py's count (full square for the
    attention: the log counts what the CPU kernels compute)."""
    r, plan, arch, rates, m = _engine(pid)
    est = estimate(plan, search_min_gpus=False)
    tokens = plan.micro_batch_size * plan.seq_len
    ph = r["phases"]["forward"]
    traced = ph["gemm"]["flops"] + ph["attention"]["flops"]
    assert abs(traced / (tokens * est.step.flops.forward) - 1) < 0.03, (pid, traced, tokens * est.step.flops.forward)


def test_fused_adamw_reads_four_arrays_per_parameter():
    """The op log's optimizer phase: one _fused_adamw_ reading param, grad, exp_avg, exp_avg_sq (4 x 2 B under
    bf16-pure for llama-3.2-1b's 1,235,814,400 parameters); its three in-place writes are not outputs, so the
    rule's 7 passes = 4 reads + 3 writes."""
    r = FIXTURE["llama1b-full-pure-flash"]
    step = r["phases"]["step"]
    assert step["by_op"].get("_fused_adamw_") == 1
    assert abs(step["memory"]["bytes"] / (4 * 2 * 1_235_814_400) - 1) < 0.01
    assert kernels.ADAMW_PASSES["fused"] == 4 + 3


def test_qlora_dequantization_is_logged_per_linear_and_pass():
    """bitsandbytes dequantize_4bit: one kernel per 4-bit linear in forward, backward and recompute."""
    r = FIXTURE["llama1b-qlora-mixed-flash-gc-s4096"]
    for phase in ("forward", "backward", "recompute"):
        assert r["phases"][phase]["by_op"]["bnb.dequantize_4bit"] == 16 * 7


def test_gemm_roofline_by_hand():
    """A100 SXM (312 TFLOP/s, 2039 GB/s; MAMF 267.9): a 8192^3 GEMM is compute-bound at 267.9e12 x 0.9 x
    8192/(8192+128); a LoRA A-projection (16384 x 4096 x 16) would run its 16 columns at 16/(16+128) of the
    rate in 80 us, but streaming its 2 B x (16384x4096 + 4096x16 + 16384x16) at 2039e9 x 0.65 takes 102 us:
    memory-bound; a rank-64
    one at a (16384 x 64) output tile quarter-full the other way round is bound by neither more than the max."""
    rates = gpu_rates(Plan())
    n = 8192
    want = 2 * n ** 3 / (267.9e12 * 0.9 * n / (n + 128))
    assert math.isclose(gemm_s(n, n, n, 2, rates), want, rel_tol=1e-9)
    m, k, r = 16384, 4096, 16
    compute = 2 * m * k * r / (267.9e12 * 0.9 * r / (r + 128))
    memory = 2 * (m * k + k * r + m * r) / (2039e9 * 0.65)
    assert memory > compute and math.isclose(gemm_s(m, k, r, 2, rates), memory, rel_tol=1e-9)
    m, k, n = 64, 64, 1_000_000           # a thin output with a tiny k: memory-bound
    memory = 2 * (m * k + k * n + m * n) / (2039e9 * 0.65)
    assert math.isclose(gemm_s(m, k, n, 2, rates), max(memory, 2 * m * k * n / (267.9e12 * 0.9 * 64 / 192)))


def test_nccl_latency_by_hand():
    """NCCL tuning.cc Ring/Simple: 8.4 us + steps x hwLat; 2 nodes x 8 GPUs all-reduce: 2 x 15 = 30 steps of
    which 2 x 1 cross the network (9.6 us), the rest NVLink (3.4 us)."""
    p = Plan.from_dict({"nodes": 2, "gpus_per_node": 8})
    assert math.isclose(nccl_latency(p, "nvlink", True), 8.4e-6 + 28 * 3.4e-6 + 2 * 9.6e-6)
    assert math.isclose(nccl_latency(p, "nvlink", False), 8.4e-6 + 14 * 3.4e-6 + 1 * 9.6e-6)


def test_short_steps_are_launch_bound():
    """A 32-token eager bf16 step of a 1B model on an H100: its ~1,800 kernels take ~14 ms to launch at 8 us,
    more than they take to run (the 2.5 GB of weights stream in under 1 ms a pass), and the breakdown says so;
    with 16k tokens the launches hide behind the GPU."""
    short = Plan.from_dict({"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1, "zero_stage": 0,
                            "gpu": "h100-sxm-80gb", "precision": "bf16-pure",
                            "micro_batch_size": 1, "seq_len": 32, "gradient_accumulation_steps": 1})
    long = Plan.from_dict({**short.to_dict(), "micro_batch_size": 8, "seq_len": 2048})
    bs = estimate(short, search_min_gpus=False).to_dict()["step"]["breakdown"]
    bl = estimate(long, search_min_gpus=False).to_dict()["step"]["breakdown"]
    assert bs["launch_s"] > 0.3 * sum(bs.values())
    assert bl["launch_s"] == 0.0


def test_foreach_adamw_costs_its_twenty_passes():
    """foreach AdamW (a plain loop's torch.optim.AdamW on CUDA) streams 20 element passes where fused streams 7:
    on a memory-bound step the optimizer time is 20/7 of fused's (the 16-bit copy is not made under bf16-pure)."""
    base = {"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1, "zero_stage": 0,
            "precision": "bf16-pure", "gradient_accumulation_steps": 1}
    fused = estimate(Plan.from_dict({**base, "stack": {"optimizer_impl": "fused"}}), search_min_gpus=False)
    foreach = estimate(Plan.from_dict({**base, "stack": {"optimizer_impl": "foreach"}}), search_min_gpus=False)
    assert math.isclose(foreach.step.optimizer_s / fused.step.optimizer_s, 20 / 7, rel_tol=1e-9)


def test_cpu_optimizer_by_implementation_and_precision():
    """DeepSpeed's CPU Adam 30 B per parameter; torch's AdamW on host tensors (FSDP CPUOffload) 20 passes over
    the parameter dtype unless fused (7): bf16-pure fused 14 B, fp32-master single-tensor 80 B."""
    from zerocalc.step.offload import cpu_optimizer_bytes
    ds = Plan.from_dict({"offload_optimizer": "cpu"})
    assert cpu_optimizer_bytes(ds) == 30
    fs = Plan.from_dict({"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu", "precision": "bf16-pure",
                         "stack": {"trainer": "torchtune"}})
    assert cpu_optimizer_bytes(fs) == 7 * 2
    fm = Plan.from_dict({"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu", "precision": "bf16-mixed",
                         "stack": {"trainer": "custom-loop"}})
    assert cpu_optimizer_bytes(fm) == 20 * 4


def test_foreach_adamw_passes_from_the_op_log():
    """foreach AdamW's step phase (torch/optim/adamw.py _multi_tensor_adamw): _foreach_mul_ (weight decay),
    _foreach_lerp_, _foreach_mul_ + _foreach_addcmul_, _foreach_sqrt, _foreach_div_, _foreach_add_ (eps),
    _foreach_addcdiv_ over every parameter (plus two _foreach_add_ on the step counters and eps). The log
    counts each op's tensor inputs and its outputs: 1 + 2 + 1 + 3 + 1 + 1 + 1 + 3 = 13 reads and sqrt's 1
    write = 14 elements per parameter; the seven in-place ops write 7 more, and addcmul's grad, listed twice,
    is read once: 14 + 7 - 1 = 20 = kernels.ADAMW_PASSES["foreach"]."""
    step = FIXTURE["llama1b-full-pure-flash-foreach"]["phases"]["step"]
    assert step["by_op"] == {"_foreach_add_": 2, "_foreach_mul_": 2, "_foreach_lerp_": 1, "_foreach_addcmul_": 1,
                             "_foreach_sqrt": 1, "_foreach_div_": 1, "_foreach_addcdiv_": 1}
    per_param = step["memory"]["bytes"] / (2 * 1_235_814_400)
    assert abs(per_param - 14) < 1e-3
    assert kernels.ADAMW_PASSES["foreach"] == 14 + 7 - 1


def test_hopper_gemm_takes_the_power_limited_share():
    """H100 SXM (MAMF 792.1 TFLOP/s): an 8192^3 GEMM at 792.1e12 x 0.9 (KERNEL_SUSTAINED) x 0.85
    (HOPPER_SUSTAINED, sm90 only) x 8192/(8192+128); the A100 case above has no Hopper factor."""
    rates = gpu_rates(Plan.from_dict({"gpu": "h100-sxm-80gb"}))
    n = 8192
    want = 2 * n ** 3 / (792.1e12 * 0.9 * 0.85 * n / (n + 128))
    assert rates.generation == "sm90" and math.isclose(gemm_s(n, n, n, 2, rates), want, rel_tol=1e-9)
