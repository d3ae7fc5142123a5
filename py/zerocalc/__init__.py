"""zerocalc: what each GPU and node really holds when training an LLM with DeepSpeed, FSDP or LoRA.

    from zerocalc import Plan, estimate
    est = estimate(Plan.from_dict({"model": "llama-3.1-8b", "zero_stage": 3}))
"""
from .plan import DEFAULT_PLAN, Plan, PlanError
# Importing the submodule binds `zerocalc.estimate` to it; the from-import then rebinds the name to the
# function, and later `import zerocalc.estimate` finds the module in sys.modules without rebinding.
from .estimate import estimate
from .fit import fit

__version__ = "0.1.0"


__all__ = ["Plan", "PlanError", "estimate", "fit", "DEFAULT_PLAN", "__version__"]
