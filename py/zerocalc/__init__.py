"""zerocalc: what each GPU and node really holds when training an LLM with DeepSpeed, FSDP or LoRA.

    from zerocalc import Plan, estimate
    est = estimate(Plan.from_dict({"model": "llama-3.1-8b", "zero_stage": 3}))
"""
from .plan import DEFAULT_PLAN, Plan, PlanError
from . import estimate as _estimate_module   # load the submodule first, then bind the function:
from .estimate import estimate               # `zerocalc.estimate` is the function, not the module

__version__ = "0.1.0"


__all__ = ["Plan", "PlanError", "estimate", "DEFAULT_PLAN", "__version__"]
