"""Page view of the crash-log doctor: request {"log": text, "plan": plan-v1 dict | null} -> the doctor's result
(plan-v1 Extension 3, zerocalc.doctor) plus the strings the page shows. Runs in the page's Web Worker (and
under CPython in the tests); the log never leaves the browser.

A log over MAX_LOG_BYTES (UTF-8) is refused with a message, as assets/doctor.js also does before sending it:
the part that matters is the error and the traceback above it. A plan that does not validate is reported and
the log is read without it.
"""
from __future__ import annotations

from zerocalc import Plan, PlanError
from zerocalc.doctor import diagnose
from zerocalc.doctor.sizes import format_gib

MAX_LOG_BYTES = 200 * 1024
KINDS = {"cuda_oom": "GPU out of memory", "host_oom": "host RAM (process killed / pinned memory)",
         "nccl_timeout": "NCCL watchdog timeout", "nccl_error": "NCCL error", "other": "other error",
         "none": "nothing recognised"}
PHASES = {"load": "loading the model", "init": "engine set-up", "forward": "forward pass", "loss": "loss",
          "backward": "backward pass", "step": "optimizer step", "eval": "evaluation", "generate": "generation",
          "save": "checkpoint save", "resume": "optimizer-state reload", "merge": "adapter merge",
          "unknown": "not shown in the log"}
FIELDS = (("gpu_total_bytes", "GPU total"), ("tried_to_allocate_bytes", "tried to allocate"),
          ("allocated_bytes", "allocated by PyTorch"), ("reserved_unallocated_bytes", "reserved, unallocated"),
          ("free_bytes", "free"))


def too_large_message(n: int) -> str:
    return (f"The log is {n / 1024:.0f} KB; paste at most {MAX_LOG_BYTES // 1024} KB: the error message and the "
            "traceback above it are enough.")


def phase_text(d: dict) -> str:
    """'evaluation (run phase eval, from prediction_step)': plain text, the page sets it as textContent."""
    if d["phase"] == "unknown":
        return PHASES["unknown"]
    why = f", from {d['phase_evidence']}" if d.get("phase_evidence") else ""
    return f"{PHASES[d['phase']]} (run phase {d['run_phase']}{why})"


def _leaves(v, prefix=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(x, f"{prefix}{k}.")
    else:
        yield prefix[:-1], v


def change_lines(changes: dict, plan_dict: dict | None) -> list:
    """'key = value' per changed setting; nested run.* changes as dotted keys, only the leaves that change."""
    now = dict(_leaves(plan_dict or {}))
    return [f"{k} = {v}" for k, v in _leaves(changes) if "." not in k or now.get(k, object()) != v]


def view(request: dict) -> dict:
    log = request.get("log")
    if not isinstance(log, str):
        return {"error": "log: paste the crash log as text"}
    size = len(log.encode("utf-8"))
    if size > MAX_LOG_BYTES:
        return {"error": too_large_message(size), "too_large": True}
    plan, plan_error = None, None
    if request.get("plan") is not None:
        try:
            plan = Plan.from_dict(request["plan"])
        except PlanError as e:
            plan_error = f"The plan was not used: {e}"
    d = diagnose(log, plan).to_dict()
    display = {
        "kind": KINDS[d["kind"]], "phase": phase_text(d), "device": d["device"] or "—",
        "fields": [{"key": k, "label": label, "text": format_gib(d[k]), "bytes": d[k]}
                   for k, label in FIELDS if d[k] is not None],
        "fragmentation": "yes: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" if d["fragmentation"] else "no",
        "findings": d["findings"],
        "changes": change_lines(d["plan_changes"], plan.to_dict() if plan is not None else None),
        "with_plan": plan is not None,
    }
    if d.get("nccl"):
        n = d["nccl"]
        if n["ran_for_ms"] is not None:
            display["nccl"] = f"{n['op']} #{n['seq']}, timeout {n['timeout_ms']} ms, waited {n['ran_for_ms']} ms"
        elif n["last_enqueued"] is not None:
            display["nccl"] = (f"collective #{(n['last_completed'] or 0) + 1} of {n['last_enqueued']} enqueued "
                               "never completed")
    return {"result": d, "display": display, "plan_error": plan_error}
