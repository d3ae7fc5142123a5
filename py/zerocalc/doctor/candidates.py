"""Plan changes that would have fitted, found by re-estimating candidates with the engine.

``search(plan, need_bytes)`` takes the planner's ranked options (zerocalc.fit: every one a real estimate of the
changed plan) that free at least ``need_bytes`` on the busiest GPU and fit; when none does, it tries the
standard levers cumulatively, each a plan-v1 change validated by ``Plan.from_dict`` and estimated with
``estimate(..., search_min_gpus=False)``. Callers only read ``Option``.

Levers, least disruptive first: full activation checkpointing (Hugging Face ``gradient_checkpointing``),
chunked cross-entropy, half the micro batch with twice the accumulation (same global batch), an 8-bit
(paged) optimizer, ZeRO-3 / FULL_SHARD, optimizer offload to CPU.

A log that stopped in evaluation is fixed in evaluation: ``eval_search`` halves ``run.eval.batch_size``
(HF ``per_device_eval_batch_size``; ``auto`` is the trainer's default, read back from the estimate) until the
estimate's eval phase (plan-v1 Extension 5 ``run.phases.eval``) frees what is needed and fits.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import Plan, PlanError, estimate
from ..fit import fit


@dataclass(frozen=True)
class Option:
    label: str
    changes: dict          # plan keys -> values, merged into the plan dict
    device_used_bytes: int
    saves_bytes: int       # busiest-GPU device_used before minus after
    fits: bool


def _levers(p: dict) -> list:
    out = []
    if p.get("activation_checkpointing", "none") != "full":
        out.append(("full activation checkpointing", {"activation_checkpointing": "full"}))
    if p.get("loss", "standard") != "chunked":
        out.append(("chunked cross-entropy loss", {"loss": "chunked"}))
    mbs, gas = int(p.get("micro_batch_size", 2)), int(p.get("gradient_accumulation_steps", 4))
    if mbs > 1:
        half = mbs // 2
        # keep micro x accumulation: exact when mbs is even, else the nearest accumulation above
        new_gas = -(-mbs * gas // half)
        out.append((f"micro_batch_size {mbs} -> {half} with gradient_accumulation_steps {gas} -> {new_gas}",
                    {"micro_batch_size": half, "gradient_accumulation_steps": new_gas}))
    if p.get("optimizer", "adamw") in ("adamw", "paged-adamw-32bit") and p.get("method", "full") == "full":
        out.append(("8-bit paged AdamW (bitsandbytes)", {"optimizer": "paged-adamw-8bit"}))
    if p.get("framework") in ("deepspeed", "fsdp") and int(p.get("zero_stage", 2)) < 3:
        out.append(("ZeRO stage 3" if p.get("framework") == "deepspeed" else "FSDP FULL_SHARD", {"zero_stage": 3}))
    if p.get("framework") == "deepspeed" and p.get("offload_optimizer", "none") == "none":
        out.append(("optimizer states offloaded to CPU", {"offload_optimizer": "cpu"}))
    return out


def _merge(base: dict, changes: dict) -> dict:
    out = dict(base)
    for k, v in changes.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _try(base: dict, changes: dict):
    try:
        d = estimate(Plan.from_dict(_merge(base, changes)), search_min_gpus=False).to_dict()
    except (PlanError, ValueError):
        return None
    return d


def search(plan: Plan, need_bytes: int, limit: int = 3) -> list:
    """Up to ``limit`` options that free ``need_bytes`` and fit, single levers first, then cumulative ones."""
    base = plan.to_dict()
    before = estimate(plan, search_min_gpus=False).to_dict()
    used0 = before["per_gpu"]["device_used_bytes"]
    cap = before["capacity_bytes"]
    found, acc, acc_label = [], {}, []
    levers = _levers(base)
    for o in fit(plan).options:                       # ranked: fitting first, then by tokens/s
        if o.fits and used0 - o.device_used_bytes >= need_bytes:
            found.append(Option(o.label, dict(o.changes), o.device_used_bytes, used0 - o.device_used_bytes, True))
    if not found:
        for label, ch in levers:
            trial = _merge(acc, ch)
            d = _try(base, trial)
            if d is None:
                continue
            acc, acc_label = trial, acc_label + [label]
            used = d["per_gpu"]["device_used_bytes"]
            if used0 - used >= need_bytes and used <= cap:
                found.append(Option(" + ".join(acc_label), dict(acc), used, used0 - used, True))
                break
    return found[:limit]


def _eval_used(d: dict):
    ph = ((d.get("run") or {}).get("phases") or {}).get("eval")
    return None if ph is None else ph["device_used_bytes"]


def eval_search(plan: Plan, need_bytes: int, start_batch: int = 8) -> list:
    """The largest eval batch below the plan's that frees ``need_bytes`` in the eval phase and fits it."""
    base = plan.to_dict()
    ev = (base.get("run") or {}).get("eval")
    if not ev:
        return []
    before = estimate(plan, search_min_gpus=False).to_dict()
    used0, cap = _eval_used(before), before["capacity_bytes"]
    if used0 is None:
        return []
    b = ev["batch_size"] if isinstance(ev.get("batch_size"), int) else start_batch
    while b > 1:
        b //= 2
        changes = {"run": {"eval": {**ev, "batch_size": b}}}
        d = _try(base, changes)
        used = None if d is None else _eval_used(d)
        if used is not None and used0 - used >= need_bytes and used <= cap:
            return [Option(f"run.eval.batch_size {b} (per_device_eval_batch_size)", changes, used, used0 - used, True)]
    return []
