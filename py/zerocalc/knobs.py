"""The one owner of DeepSpeed's knob defaults and of the values the Hugging Face integration fills for "auto".

The engine (memory/deepspeed.py) sizes its buffers with ``knobs(plan)``; the exporters write
``resolved(plan, key)`` into ds_config.json and the importer compares with it, so a plan, its estimate and
its config always mean the same numbers.

- Defaults: DeepSpeed 0.19.8 `runtime/zero/config.py` (DeepSpeedZeroConfig) and `runtime/constants.py`
  (GRADIENT_CLIPPING_DEFAULT). overlap_comm has no fixed default: the validator `overlap_comm_valid` makes
  it True at stage 3 and False below.
- "auto": transformers `integrations/deepspeed.py` HfTrainerDeepSpeedConfig.trainer_config_finalize fills
  reduce_bucket_size = h·h at every stage and, at stage 3 only, stage3_prefetch_bucket_size = 0.9·h·h and
  stage3_param_persistence_threshold = 10·h (h: model.config.hidden_size; accelerate's _prepare_deepspeed
  uses the same formulas). A leftover "auto" nobody fills is dropped by DeepSpeed's pydantic base, so its
  default applies (docs/deepspeed.md §5).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

DEFAULTS = {"reduce_bucket_size": 500_000_000, "contiguous_gradients": True,
            "stage3_prefetch_bucket_size": 50_000_000, "stage3_max_live_parameters": 1_000_000_000,
            "stage3_max_reuse_distance": 1_000_000_000, "stage3_param_persistence_threshold": 100_000,
            "sub_group_size": 1_000_000_000, "zero_hpz_partition_size": 1, "zero_init": True,
            "gradient_clipping": 1.0}
NVME_PLACEHOLDER = "/local_nvme"   # the nvme_path written into exported configs, for the user to replace
HF_HIDDEN_SIZE_KEYS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


def ds_default(key: str, stage: int):
    """DeepSpeed 0.19.8's default for a plan knob at this ZeRO stage."""
    if key == "overlap_comm":
        return stage == 3
    return DEFAULTS[key]


def hf_auto_value(key: str, hidden: int, stage: int):
    """The value the HF integration writes for an "auto" knob, or None where it fills nothing."""
    if key == "reduce_bucket_size":
        return hidden * hidden
    if stage == 3 and key == "stage3_prefetch_bucket_size":
        return int(0.9 * hidden * hidden)
    if stage == 3 and key == "stage3_param_persistence_threshold":
        return 10 * hidden
    return None


def fills_auto(key: str, stage: int) -> bool:
    """Whether the HF integration replaces an "auto" for this key at this stage."""
    return hf_auto_value(key, 1, stage) is not None


def resolve_knob(values, key: str, stage: int, hidden):
    """The value DeepSpeed runs with for knob ``key`` given the plan's `deepspeed` values: the number, the HF
    fill for "auto" (DeepSpeed's default where nothing fills it), else DeepSpeed's default. ``hidden``: the
    model's hidden size, or a function returning it (only "auto" needs it)."""
    v = values.get(key)
    if v is None:
        return ds_default(key, stage)
    if v == "auto":
        if fills_auto(key, stage):
            return hf_auto_value(key, hidden() if callable(hidden) else hidden, stage)
        return ds_default(key, stage)
    return v


def resolved(plan, key: str):
    """The value DeepSpeed runs with for knob ``key`` of a Plan."""
    return resolve_knob(plan.deepspeed, key, plan.zero_stage, lambda: plan.arch.hidden_size)


@dataclass(frozen=True)
class Knobs:
    """The knobs the engine sizes DeepSpeed's buffers with, every one resolved."""
    reduce_bucket_size: int
    overlap_comm: bool
    contiguous_gradients: bool
    prefetch_bucket_size: int
    max_live_parameters: int
    max_reuse_distance: int
    persistence_threshold: int
    sub_group_size: int
    hpz: int
    zero_init: bool
    gradient_clipping: float


def knobs(plan) -> Knobs:
    """The plan's knobs, resolved once per distinct `deepspeed` mapping and stage (the estimate asks for them
    in every memory and advice module, and for every layout the min_gpus search tries)."""
    values = plan.deepspeed
    hidden = plan.arch.hidden_size if any(v == "auto" for v in values.values()) else 0   # only "auto" reads it
    return _knobs(tuple(values.items()), plan.zero_stage, hidden)


@lru_cache(maxsize=256)
def _knobs(items: tuple, stage: int, hidden: int) -> Knobs:
    values = dict(items)
    r = lambda k: resolve_knob(values, k, stage, hidden)  # noqa: E731
    return Knobs(reduce_bucket_size=int(r("reduce_bucket_size")), overlap_comm=bool(r("overlap_comm")),
                 contiguous_gradients=bool(r("contiguous_gradients")),
                 prefetch_bucket_size=int(r("stage3_prefetch_bucket_size")),
                 max_live_parameters=int(r("stage3_max_live_parameters")),
                 max_reuse_distance=int(r("stage3_max_reuse_distance")),
                 persistence_threshold=int(r("stage3_param_persistence_threshold")),
                 sub_group_size=int(r("sub_group_size")), hpz=int(r("zero_hpz_partition_size")),
                 zero_init=bool(r("zero_init")), gradient_clipping=float(r("gradient_clipping")))
