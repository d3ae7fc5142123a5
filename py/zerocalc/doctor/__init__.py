"""The crash-log doctor: a pasted OOM / NCCL / host-kill log read into numbers, phase and what to change.

    from zerocalc.doctor import diagnose
    diagnose(log_text, plan).to_dict()      # plan-v1 Extension 3

Pure functions, no I/O: ``sizes`` (printed sizes -> bytes), ``oom`` (every wording of the CUDA OOM message),
``classify`` (kind, phase, device, NCCL fields), ``findings`` (what it means, against the plan's estimate),
``candidates`` (plan changes re-estimated until one fits; the planner's fit() replaces it), ``report``
(the result object), ``table`` (the CLI's text rendering).
"""
from .report import Diagnosis, diagnose

__all__ = ["Diagnosis", "diagnose"]
