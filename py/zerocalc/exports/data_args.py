"""The data's lengths and the caching allocator (plan-v1 Extension 6) written out: the
``PYTORCH_CUDA_ALLOC_CONF`` line of the launch snippet, HF ``torch_empty_cache_steps``, the collator a
TrainingArguments snippet needs (TRL ``packing`` / ``padding_free``) and axolotl / LLaMA-Factory packing switches.
The inverse of zerocalc/imports/data_keys.py: an exported setting imports back to the same plan key.
"""
from __future__ import annotations

from ..datasettings import EXPANDABLE_BY_DEFAULT, DataSettings
from ..plan import Plan

ENV = "PYTORCH_CUDA_ALLOC_CONF"


def alloc_conf(plan: Plan) -> str | None:
    """The value of PYTORCH_CUDA_ALLOC_CONF the plan asks for (c10/core/AllocatorConfig.cpp option names), or None
    when the allocator runs as the trainer leaves it. ``auto`` writes nothing: torchtune's recipes turn
    expandable segments on themselves, the other trainers leave them off."""
    a, parts = plan.allocator, []
    if a.expandable_segments in (True, False):
        parts.append(f"expandable_segments:{a.expandable_segments}")
    if a.max_split_size_mb is not None:
        parts.append(f"max_split_size_mb:{a.max_split_size_mb}")
    if parts == ["expandable_segments:True"] and plan.stack.trainer in EXPANDABLE_BY_DEFAULT:
        return None                       # torchtune sets exactly this itself
    return ",".join(parts) or None


def env_lines(plan: Plan) -> list:
    """``export PYTORCH_CUDA_ALLOC_CONF=...`` for a launch snippet (before the launcher, on every node)."""
    conf = alloc_conf(plan)
    return [] if conf is None else ["# the caching allocator (plan.allocator); set it on every node before launching",
                                    f"export {ENV}={conf}"]


def hf_allocator_kwargs(plan: Plan) -> dict:
    """TrainingArguments.torch_empty_cache_steps (transformers training_args.py) from allocator.empty_cache_every."""
    every = plan.allocator.empty_cache_every
    return {} if every is None else {"torch_empty_cache_steps": every}


def collator_lines(plan: Plan) -> list:
    """Comment lines for a TrainingArguments snippet: how the batches must be built for the plan's data.lengths
    (the TrainingArguments themselves have no collator switch; TRL's SFTConfig has)."""
    d = plan.data
    if d == DataSettings():
        return []
    if d.lengths == "fixed":
        return [f"# data: packed rows of {plan.seq_len} tokens: TRL SFTConfig(packing=True, max_length={plan.seq_len})"]
    if d.lengths == "padding-free":
        return ["# data: padding-free batches: TRL SFTConfig(padding_free=True), or "
                "data_collator=DataCollatorWithFlattening() (needs flash attention)"]
    return ["# data: each batch padded to its longest sample: DataCollatorWithPadding / DataCollatorForSeq2Seq "
            "(padding=True), TRL SFTConfig(packing=False)"]


def packing_value(plan: Plan) -> bool | None:
    """axolotl sample_packing / LLaMA-Factory packing: True for packed (fixed) rows of a variable-length dataset,
    False for padded-longest batches, None (not written) otherwise."""
    d = plan.data
    if d.lengths == "padded-longest":
        return False
    if d.lengths == "fixed" and d != DataSettings():
        return True
    return None
