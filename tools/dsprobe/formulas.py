"""Allocation-site formulas for each named buffer, per rank, from the parameter order (hand-derived).

A reference for the engine's DeepSpeed terms and the "formula that explains it" column of
the probe's results tables (notes.py); check.py compares the probe with the ENGINE, the probe self-test compares the
probe with THIS. Sources: DeepSpeed 0.19.8 runtime/zero/stage_1_and_2.py, stage3.py, partition_parameters.py,
parameter_offload.py, runtime/fp16/unfused_optimizer.py, runtime/engine.py; facts in
docs/deepspeed-cpu.md §3-4.

params: [(name, numel, trainable)] in module order (model.named_parameters(); DeepSpeed flattens the
optimizer's one param group in this order). b = 2 bytes (bf16/fp16).
"""
from __future__ import annotations

DEFAULTS = {"reduce_bucket_size": 500_000_000, "overlap_comm_z12": False, "stage3_param_persistence_threshold": 100_000,
            "stage3_prefetch_bucket_size": 50_000_000, "stage3_max_reuse_distance": 1_000_000_000,
            "sub_group_size": 1_000_000_000}


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def z12_partitions(numels: list[int], n: int) -> tuple[int, list[list[tuple[int, int]]]]:
    """Stage 1/2 flat partition: pad the flat group to a multiple of 2N (nccl_start_alignment_factor 2,
    flatten_dense_tensors_aligned), S = padded/N; per rank the list of (param index, slice numel) it overlaps."""
    total = sum(numels)
    padded = _ceil(total, 2 * n) * 2 * n
    s = padded // n
    slices = [[] for _ in range(n)]
    off = 0
    for i, k in enumerate(numels):
        for r in range(n):
            lo, hi = max(off, r * s), min(off + k, (r + 1) * s)
            if hi > lo:
                slices[r].append((i, hi - lo))
        off += k
    return s, slices


def expected(spec: dict, params: list) -> list[dict]:
    """Per rank: {name: bytes} for the names whose arithmetic is exact (see check.EXACT)."""
    n, stage = spec["world"], spec["stage"]
    z = spec["ds_config"]["zero_optimization"]
    off = spec["offload_optimizer"] == "cpu"
    tr = [k for _, k, t in params if t]
    fr = [k for _, k, t in params if not t]
    p = sum(tr)
    rbs = int(z.get("reduce_bucket_size", DEFAULTS["reduce_bucket_size"]))
    out = []
    if stage == 0:  # FP16_UnfusedOptimizer with a client torch optimizer (docs/deepspeed-cpu.md §2)
        for _ in range(n):
            out.append({"flat_16bit_params": 2 * p, "fp32_master": 4 * p, "optimizer_states": 8 * p,
                        "param_grads_16bit": 2 * p,  # all 16-bit grads, backward -> step
                        "allreduce_bucket": 2 * min(p, 500_000_000),  # engine.allreduce_bucket, MEMORY_OPT_ALLREDUCE_SIZE
                        "step_transient": 4 * p,  # per-param fp32 grads (unfused_optimizer.step)
                        **({"frozen_params": 2 * sum(fr)} if fr else {})})
        return out
    if stage in (1, 2):
        s, slices = z12_partitions(tr, n)
        big = max(tr)
        ov = bool(z.get("overlap_comm", DEFAULTS["overlap_comm_z12"]))
        for r in range(n):
            sl = slices[r]
            maxslice = max(k for _, k in sl)
            d = {"flat_16bit_params": 2 * s * n, "fp32_master": 4 * s, "optimizer_states": 8 * s,
                 "ipg_bucket": 2 * rbs * (2 if ov else 1),
                 # get_grad_norm_direct: g.to(float64) of each grad slice in the partition, one at a time
                 "fp64_norm_copy": 8 * maxslice}
            if fr:
                d["frozen_params"] = 2 * sum(fr)
            if off:
                d.update(fp32_grad_partition=4 * s, offload_16bit_staging=2 * s,
                         offload_temp_grad_buffers=2 * 2 * big,  # temp_grad_buffer_for_{cpu,gpu}_offload, L each
                         offload_fp32_grad_slice=4 * maxslice)  # async_inplace_copy_grad_to_fp32_buffer_from_gpu
            else:
                # grads_in_partition: every param overlapping the partition, whole numel (straddling rule)
                d["grad_partition"] = 2 * sum(tr[i] for i, _ in sl)
                # step: flatten (2S, a view when the partition is one slice and needs no padding) + .float() 4S
                d["step_transient"] = 4 * s + (2 * s if len(sl) > 1 or s * n != p and r == n - 1 else 0)
            out.append(d)
        return out
    return expected_z3(spec, params)


def expected_z3(spec: dict, params: list) -> list[dict]:
    """Stage 3 (DeepSpeedZeroOptimizer_Stage3). Every tensor is padded to a multiple of N and split evenly
    (partition_parameters._partition_param: ds_tensor numel = ceil(numel/N)), so all ranks are equal."""
    n = spec["world"]
    z = spec["ds_config"]["zero_optimization"]
    off = spec["offload_optimizer"] == "cpu"
    rbs = int(z.get("reduce_bucket_size", DEFAULTS["reduce_bucket_size"]))
    thr = int(z.get("stage3_param_persistence_threshold", DEFAULTS["stage3_param_persistence_threshold"]))
    reuse = int(z.get("stage3_max_reuse_distance", DEFAULTS["stage3_max_reuse_distance"]))
    pbs = int(z.get("stage3_prefetch_bucket_size", DEFAULTS["stage3_prefetch_bucket_size"]))
    sg = int(z.get("sub_group_size", DEFAULTS["sub_group_size"]))
    part = [(_ceil(k, n), k, t) for _, k, t in params]
    sp = sum(pp for pp, _, t in part if t)  # trainable partition numel
    sf = sum(pp for pp, _, t in part if not t)
    persistent = sum(k for _, k, _ in part if k <= thr)  # parameter_offload.mark_persistent_parameters
    nonpers = sum(k for _, k, _ in part if k > thr)
    # fwd->bwd turn: params re-used within max_reuse_distance elements (or prefetched) stay gathered.
    # With reuse >= the whole non-persistent model (default 1e9) every one stays; with reuse 0 and
    # prefetch 0 none stays beyond the module in use; the probe measured prefetch 1e6 keeping the whole model again (docs/deepspeed-cpu.md §3.3).
    # otherwise only the module in use: its largest non-persistent tensor (the fetch unit is a leaf module)
    gathered = 2 * nonpers if (reuse >= nonpers or pbs > 0) else 2 * max((k for _, k, _ in part if k > thr), default=0)
    maxpart = max(pp for pp, _, t in part if t)
    d = {"param_partition_16bit": 2 * sp, "persistent_params": 2 * persistent, "fp32_master": 4 * sp,
         "optimizer_states": 8 * sp, "grad_partition": 2 * sp, "ipg_bucket": 2 * rbs,
         "gathered_params": gathered,
         # stage3 get_grad_norm / _constant_buffered_norm2: fp64 copy of each param's grad partition
         "fp64_norm_copy": 8 * maxpart}
    if sf:
        d["frozen_partition_16bit"] = 2 * sf
    if off:
        d.update(fp32_grad_partition=4 * sp, offload_fp32_grad_slice=4 * maxpart)
    else:
        # _prepare_fp32_grad_for_sub_group: flatten (2) + .to(fp32) (4) per sub-group
        d["step_transient"] = 6 * min(sg, sp)
    return [dict(d) for _ in range(n)]
