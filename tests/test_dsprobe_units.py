"""dsprobe pieces that need no DeepSpeed run: plan -> ds_config, the stage-1/2 partition (straddling) rule,
label rules, and the event-log replay. Numbers are hand-computed from the small Llama's parameter order
(tools/dsprobe/spec.SMALL_LLAMA; order recorded in notes/dsprobe-results.md)."""
from __future__ import annotations

import pytest

from tools.dsprobe.formulas import z12_partitions
from tools.dsprobe.spec import SMALL_LLAMA, SpecError, build_spec

# h=256, 4 layers, 8 heads (q/o 256x256), 2 kv heads of 32 (k/v 64x256), I=688, V=8192, untied.
EMB = 8192 * 256                                   # 2,097,152 = L (embed_tokens, lm_head)
LAYER = 2 * 256 * 256 + 2 * 64 * 256 + 3 * 688 * 256 + 2 * 256   # 65,536*2 + 16,384*2 + 176,128*3 + 512 = 692,736
ORDER = ([EMB] + [65536, 16384, 16384, 65536, 176128, 176128, 176128, 256, 256] * 4 + [256, EMB])


def test_small_llama_size():
    assert LAYER == 692_736
    assert sum(ORDER) == EMB + 4 * LAYER + 256 + EMB == 6_965_504


def test_straddling_partition_rule_world2():
    # S = 6,965,504 / 2 = 3,482,752 (already a multiple of 2N = 4, no padding).
    # Rank 0 ends inside layers.2.q_proj, which starts at EMB + 2*LAYER = 3,482,624: the whole q_proj counts.
    s, slices = z12_partitions(ORDER, 2)
    assert s == 3_482_752
    r0 = sum(ORDER[i] for i, _ in slices[0])
    r1 = sum(ORDER[i] for i, _ in slices[1])
    assert r0 == EMB + 2 * LAYER + 65536 == 3_548_160          # 2 B each -> 7,096,320 B measured
    assert r1 == 6_965_504 - (EMB + 2 * LAYER) == 3_482_880    # q_proj of layer 2 counts on both ranks


def test_straddling_partition_rule_world4():
    s, slices = z12_partitions(ORDER, 4)
    assert s == 1_741_376
    assert [ORDER[i] for i, _ in slices[0]] == [EMB]           # rank 0 sees only (part of) the embedding
    assert max(k for _, k in slices[1]) == EMB - s == 355_776  # the embedding's tail is rank 1's largest slice
    assert sum(ORDER[i] for i, _ in slices[1]) == EMB + 2 * LAYER + 65536


def test_build_spec_stage2_offload():
    plan = {"model": SMALL_LLAMA, "gpus_per_node": 2, "zero_stage": 2, "offload_optimizer": "cpu",
            "deepspeed": {"reduce_bucket_size": 5e5, "overlap_comm": True}}
    spec = build_spec(plan)
    z = spec["ds_config"]["zero_optimization"]
    assert spec["world"] == 2 and z["stage"] == 2
    assert z["reduce_bucket_size"] == 500_000 and isinstance(z["reduce_bucket_size"], int)
    assert z["offload_optimizer"] == {"device": "cpu"} and "offload_param" not in z
    assert spec["ds_config"]["zero_force_ds_cpu_optimizer"] is False
    assert spec["ds_config"]["bf16"] == {"enabled": True}


def test_build_spec_preset_model_is_replaced():
    spec = build_spec({"model": "llama-3.1-8b", "gpus_per_node": 4, "zero_stage": 3,
                       "offload_params": "cpu", "precision": "fp16-mixed"})
    assert spec["model"]["hidden_size"] == 256 and spec["notes"]
    assert spec["ds_config"]["zero_optimization"]["offload_param"] == {"device": "cpu"}
    assert spec["ds_config"]["fp16"]["enabled"] is True


@pytest.mark.parametrize("plan,key", [
    ({"method": "qlora"}, "method"),
    ({"offload_optimizer": "nvme"}, "offload_optimizer"),
    ({"framework": "fsdp"}, "framework"),
    ({"deepspeed": {"reduce_bucket_size": "auto"}}, "deepspeed.reduce_bucket_size"),
    ({"deepspeed": {"bogus": 1}}, "deepspeed.bogus"),
    ({"optimizer": "sgd"}, "optimizer"),
])
def test_build_spec_refuses_with_key(plan, key):
    with pytest.raises(SpecError) as e:
        build_spec(plan)
    assert str(e.value).startswith(key)


def test_label_rules():
    torch = pytest.importorskip("torch")
    from tools.dsprobe.labels import name_for_path

    assert name_for_path(("bit16_groups_flat", "[]"), False) == "flat_16bit_params"
    assert name_for_path(("single_partition_of_fp32_groups", "[]"), True) == "fp32_master"
    assert name_for_path(("single_partition_of_fp32_groups", "[]", ".grad"), True) == "fp32_grad_partition"
    assert name_for_path(("single_partition_of_fp32_groups", "[]", ".grad"), False) == "step_transient"
    assert name_for_path(("optimizer", "state", "[]", "exp_avg"), False) == "optimizer_states"
    assert name_for_path(("optimizer", "state", "[]", "step"), False) is None
    assert name_for_path(("ipg_buckets", "[]", "buffer", "[]"), False) == "ipg_bucket"
    assert name_for_path(("grad_partitions_flat_buffer",), True) == "grad_partition"
    assert torch.float64  # imported for the label module's dtype checks


def test_replay_peaks():
    """Synthetic log: A (100 B, named) at init; in fwd2 B (50, named) and C (30, activation); C freed; then
    D (8192 B, fp64 from a DeepSpeed site) in step2. Model-state peak: fwd 100 + 50, step 100 + 50 + 8192."""
    torch = pytest.importorskip("torch")
    from tools.dsprobe.analysis import analyse
    from tools.dsprobe.tracker import Rec

    class T:
        pass

    a = Rec(1, 100, torch.bfloat16, "empty", "deepspeed/runtime/zero/stage3.py:1:f", "init")
    a.label = "fp32_master"
    b = Rec(2, 50, torch.bfloat16, "empty", "deepspeed/x.py:1:f", "fwd2")
    b.label = "ipg_bucket"
    c = Rec(3, 30, torch.bfloat16, "mm", "transformers/models/llama/modeling_llama.py:1:forward", "fwd2")
    d = Rec(4, 8192, torch.float64, "_to_copy", "deepspeed/runtime/zero/stage_1_and_2.py:1:get_grad_norm_direct",
            "step2")
    t = T()
    t.events = [(1, a), (1, b), (1, c), (-1, c), (1, d), (-1, d)]
    t.marks = [(0, "init"), (1, "fwd2"), (4, "step2"), (6, "end")]
    r = analyse(t, steady_from=2)
    assert r["buffers"]["fp32_master"]["bytes"] == 100
    assert r["buffers"]["fp64_norm_copy"] == {"bytes": 8192, "at_end": 0}
    assert r["phases"]["fwd"]["model_state"] == 150 and r["phases"]["fwd"]["total"] == 180
    assert r["phases"]["step"]["model_state"] == 100 + 50 + 8192
    assert r["phases"]["init"]["model_state"] == 100


def test_allocator_phases_keeps_segments_across_phases_by_hand():
    """DSPROBE_ALLOCATOR's replay: a 30 MiB block freed in `fwd1` stays cached, so `step1`'s 40 MiB request (too
    large for it) opens a segment of its own beside it: reserved 30 + 40 MiB, allocated 40 MiB (requests over
    10 MiB get their own segment, rounded to 2 MiB: CUDACachingAllocator.cpp get_allocation_size)."""
    from types import SimpleNamespace

    from tools.dsprobe.worker import allocator_phases

    mib = 2**20
    a, b = SimpleNamespace(key=1, nbytes=30 * mib), SimpleNamespace(key=2, nbytes=40 * mib)
    tr = SimpleNamespace(marks=[(0, "fwd1"), (2, "step1")], events=[(1, a), (-1, a), (1, b), (-1, b)])
    ph = allocator_phases(tr)
    assert ph["fwd1"]["peak_reserved"] == 30 * mib and ph["fwd1"]["peak_allocated"] == 30 * mib
    assert ph["step1"]["peak_reserved"] == 70 * mib and ph["step1"]["peak_allocated"] == 40 * mib
