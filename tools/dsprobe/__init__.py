"""dsprobe: run the real DeepSpeed engine on CPU ranks and name every model-state buffer it allocates.

Dev-only ground truth for zerocalc's DeepSpeed terms; never shipped to the browser. Entry points:
``python -m tools.dsprobe PLAN.json`` (make dsprobe PLAN=...) and ``python -m tools.dsprobe.check``
(make dsprobe-check). Method and pitfalls: docs/deepspeed-cpu.md.
"""
from __future__ import annotations


def probe(plan: dict, *, steps: int = 3, seq_len: int = 128, micro_batch: int = 1) -> dict:
    """Run a plan-v1 dict on CPU ranks; return {"spec", "ranks": [...], "wall_s"} (see analysis.py)."""
    from .runner import run_spec
    from .spec import build_spec

    return run_spec(build_spec(plan, steps=steps, seq_len=seq_len, micro_batch=micro_batch))
