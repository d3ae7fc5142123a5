"""zerocalc: what each GPU and node really holds when training an LLM with DeepSpeed, FSDP or LoRA.

    from zerocalc import Plan, estimate
    est = estimate(Plan.from_dict({"model": "llama-3.1-8b", "zero_stage": 3}))
"""
from .plan import DEFAULT_PLAN, Plan, PlanError

__version__ = "0.1.0"


def estimate(plan: Plan):
    """Plan -> Estimate (see zerocalc.estimate)."""
    from .estimate import estimate as _estimate
    return _estimate(plan)


__all__ = ["Plan", "PlanError", "estimate", "DEFAULT_PLAN", "__version__"]
