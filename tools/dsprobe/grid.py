"""The comparison grid: small plans that exercise every DeepSpeed buffer rule on the small Llama.

Knobs are scaled to the model (docs/deepspeed-cpu.md §5): the largest tensor is L = 2,097,152 elements
(embed_tokens, lm_head), so reduce_bucket_size 5e5 is below it and 3e6 above it; stage-3 prefetch/reuse
/persistence knobs are set below and above the layer sizes. Each entry is (name, plan overrides).
fp16 runs only at world 2: CPU fp16 kernels are slow (a 4-rank fp16 step took ~6 s vs ~1 s in bf16).
"""
from __future__ import annotations

from .spec import SMALL_LLAMA

BASE = {"schema": 1, "model": {"name": "dsprobe-small-llama", **SMALL_LLAMA}, "framework": "deepspeed",
        "nodes": 1, "micro_batch_size": 1, "gradient_accumulation_steps": 1, "seq_len": 128,
        "precision": "bf16-mixed", "optimizer": "adamw", "method": "full",
        "offload_optimizer": "none", "offload_params": "none"}
RBS_LO, RBS_HI = 500_000, 3_000_000
Z3_DEFAULT = {"reduce_bucket_size": RBS_LO}

GRID: list[tuple[str, dict]] = [
    ("s0w2_fp16", dict(zero_stage=0, gpus_per_node=2, precision="fp16-mixed")),
    ("s0w4", dict(zero_stage=0, gpus_per_node=4)),
    ("s1w2_ov1", dict(zero_stage=1, gpus_per_node=2, deepspeed={"reduce_bucket_size": RBS_LO, "overlap_comm": True})),
    ("s1w4", dict(zero_stage=1, gpus_per_node=4, deepspeed={"reduce_bucket_size": RBS_LO})),
    ("s1w2_off", dict(zero_stage=1, gpus_per_node=2, offload_optimizer="cpu",
                      deepspeed={"reduce_bucket_size": RBS_LO})),
    ("s2w2", dict(zero_stage=2, gpus_per_node=2, deepspeed={"reduce_bucket_size": RBS_LO, "overlap_comm": False})),
    ("s2w2_rbshi_ov1", dict(zero_stage=2, gpus_per_node=2,
                            deepspeed={"reduce_bucket_size": RBS_HI, "overlap_comm": True})),
    ("s2w4_ov1", dict(zero_stage=2, gpus_per_node=4, deepspeed={"reduce_bucket_size": RBS_LO, "overlap_comm": True})),
    ("s2w2_off", dict(zero_stage=2, gpus_per_node=2, offload_optimizer="cpu",
                      deepspeed={"reduce_bucket_size": RBS_LO})),
    ("s2w2_fp16", dict(zero_stage=2, gpus_per_node=2, precision="fp16-mixed",
                       deepspeed={"reduce_bucket_size": RBS_LO})),
    ("s2w2_lora", dict(zero_stage=2, gpus_per_node=2, method="lora", deepspeed={"reduce_bucket_size": RBS_LO},
                       lora={"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "v_proj"]})),
    ("s3w2", dict(zero_stage=3, gpus_per_node=2, deepspeed=dict(Z3_DEFAULT))),
    ("s3w4_zinit", dict(zero_stage=3, gpus_per_node=4, deepspeed={**Z3_DEFAULT, "zero_init": True})),
    ("s3w2_off", dict(zero_stage=3, gpus_per_node=2, offload_optimizer="cpu", deepspeed=dict(Z3_DEFAULT))),
    ("s3w2_offp_zinit", dict(zero_stage=3, gpus_per_node=2, offload_optimizer="cpu", offload_params="cpu",
                             deepspeed={**Z3_DEFAULT, "zero_init": True})),
    ("s3w2_reuse0", dict(zero_stage=3, gpus_per_node=2, deepspeed={
        **Z3_DEFAULT, "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0,
        "stage3_max_reuse_distance": 0})),
    ("s3w2_pbs1e6_reuse0", dict(zero_stage=3, gpus_per_node=2, deepspeed={
        **Z3_DEFAULT, "stage3_prefetch_bucket_size": 1_000_000, "stage3_max_reuse_distance": 0})),
    ("s3w2_lora", dict(zero_stage=3, gpus_per_node=2, method="lora", deepspeed=dict(Z3_DEFAULT),
                       lora={"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "v_proj"]})),
    ("s3w2_fp16_rbshi", dict(zero_stage=3, gpus_per_node=2, precision="fp16-mixed",
                             deepspeed={"reduce_bucket_size": RBS_HI, "stage3_param_persistence_threshold": 20_000})),
]


def plan_for(overrides: dict) -> dict:
    return {**BASE, **overrides}


def plans(names=None) -> list[tuple[str, dict]]:
    return [(n, plan_for(o)) for n, o in GRID if names is None or n in names]
