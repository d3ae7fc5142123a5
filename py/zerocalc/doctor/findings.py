"""Findings: what the parsed log means and what to change, quantified; against the plan's estimate when given.

Memory arithmetic of an OOM message (the allocator's own terms, CUDACachingAllocator.cpp):
reserved by PyTorch = allocated + reserved-but-unallocated; what neither PyTorch nor the free pool holds,
total - free - reserved, is the CUDA context, NCCL, cuBLAS workspaces outside the allocator and other processes.
The 2.x message names this process's whole footprint ("this process has X in use"), so there
total - free - X is other processes alone.

Fragmentation: when reserved-but-unallocated >= the request, the cache held enough bytes but no block big
enough; ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (PyTorch >= 2.1) lets segments grow instead
(fragmentation.py: how far the run got, the remedies, the plan's predicted growth).
"""
from __future__ import annotations

from . import fragmentation as frag
from .phase import run_phase
from .sizes import format_gib as g

GIB = 1 << 30
OTHER_PROCESS_MIN = GIB                  # beyond the CUDA context of a few hundred MiB: someone else's memory
CONTEXT_ALLOWANCE = GIB                  # context + NCCL + workspaces when only allocator figures are printed

# the run.* key that gives a plan each run phase (plan-v1 Extension 5), for the note when the plan has none
RUN_KEYS = {"eval": "run.eval", "generate": "run.eval.generate", "save": "run.save",
            "resume": "run.resume or run.load_best_at_end", "merge": "run.merge_at_end"}
# log phase -> the engine phases (estimate()["per_gpu"]["phases"]) that cover it
PHASE_MAP = {"forward": ("fwd", "fwd_top"), "loss": ("loss_bwd",),
             "backward": ("loss_bwd", "bwd_end", "recompute", "recompute_top", "bwd_top", "head_bwd"),
             "step": ("step", "step_norm")}


def _f(fid, severity, message):
    return {"id": fid, "severity": severity, "message": message}


def _names_this_process(o) -> bool:
    """The 2.x "this process has X in use" figure, when it is usable: at least what its own allocator holds
    (WSL2 and MIG report 0 bytes there)."""
    held = (o.allocated_bytes or 0) + (o.reserved_unallocated_bytes or 0)
    return o.this_process_bytes is not None and o.this_process_bytes >= held


def other_memory(o) -> int | None:
    """Bytes on the GPU held by something other than this process's allocator (None if not computable)."""
    if o.gpu_total_bytes is None or o.free_bytes is None:
        return None
    if _names_this_process(o):
        return o.gpu_total_bytes - o.free_bytes - o.this_process_bytes
    # "this process has 0 bytes in use" below its own allocator's figures (WSL2 / MIG accounting): not usable
    if o.processes:
        return None                      # which "Process N" is ours is not stated
    if o.allocated_bytes is None or o.reserved_unallocated_bytes is None:
        return None
    return o.gpu_total_bytes - o.free_bytes - o.allocated_bytes - o.reserved_unallocated_bytes


def is_fragmented(o) -> bool:
    return (o is not None and o.reserved_unallocated_bytes is not None and o.tried_to_allocate_bytes is not None
            and o.reserved_unallocated_bytes >= o.tried_to_allocate_bytes > 0)


def cuda_oom_findings(o, device, prog=None) -> list:
    """What the OOM message says, quantified; `prog` (fragmentation.progress) is how far the run got."""
    out = []
    where = device or "the GPU"
    if o.tried_to_allocate_bytes is None:
        if o.wording == "cuda_driver_error":
            out.append(_f("cuda_driver_oom", "error",
                          "CUDA driver error: out of memory comes from the driver's virtual-memory calls that back "
                          "expandable segments; where they are unsupported (WSL2, Jetson/Tegra) it fails with memory "
                          "free: unset PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True there, otherwise treat it as "
                          "an ordinary out-of-memory"))
        else:
            out.append(_f("cuda_oom_no_numbers", "error",
                          f"CUDA ran out of memory on {where} outside the caching allocator's report (no figures "
                          "printed); rerun with CUDA_LAUNCH_BLOCKING=1 for the allocating frame, or compare the "
                          "plan's estimate with the GPU's capacity"))
        return out
    t, tot, free = o.tried_to_allocate_bytes, o.gpu_total_bytes, o.free_bytes
    parts = [f"{where} could not allocate {g(t)}"]
    if tot is not None:
        parts.append(f"of {g(tot)}")
    if free is not None:
        parts.append(f"with {g(free)} free")
    if o.allocated_bytes is not None:
        parts.append(f"while PyTorch had {g(o.allocated_bytes)} allocated")
    if o.reserved_unallocated_bytes is not None:
        parts.append(f"and {g(o.reserved_unallocated_bytes)} cached but unallocated")
    out.append(_f("cuda_oom", "error", " ".join(parts)))
    if tot is not None and t > tot:
        out.append(_f("request_exceeds_gpu", "error",
                      f"the single request of {g(t)} is larger than the whole GPU ({g(tot)}): one tensor is too "
                      "big - shrink the micro batch or sequence, or the tensor's dimension (chunk the loss or the "
                      "attention)"))
    if is_fragmented(o):
        out.append(_f("fragmentation", "warning", frag.message(o, prog)))
    other = other_memory(o)
    limit = OTHER_PROCESS_MIN if _names_this_process(o) else OTHER_PROCESS_MIN + CONTEXT_ALLOWANCE
    if other is not None and other >= limit:
        out.append(_f("other_process", "warning",
                      f"{g(other)} of the GPU was held outside this process's PyTorch allocator (another process, "
                      "or a second model/engine in this one); free it or run on an idle GPU"
                      + (f": with it free, {g(free + other)} would have been available for the {g(t)} request"
                         if free is not None else "")))
    if len(o.processes) > 1:
        listed = ", ".join(f"process {pid} {g(b)}" for pid, b in o.processes)
        out.append(_f("several_processes", "warning", f"several processes share {where}: {listed}"))
    if o.private_pools_bytes is not None and o.allocated_bytes and o.private_pools_bytes * 4 >= o.allocated_bytes:
        out.append(_f("private_pools", "warning",
                      f"{g(o.private_pools_bytes)} of the allocated memory sits in CUDA-graph private pools "
                      "(torch.compile mode='reduce-overhead' or captured graphs); capture fewer shapes or compile "
                      "without CUDA graphs"))
    return out


def _step_estimate(phase, pg):
    """(bytes, label) for a step moment, or for load / init / save read off the step when the estimate has no
    run phases (an engine before plan-v1 Extension 5)."""
    keys = [k for k in PHASE_MAP.get(phase, ()) if k in pg["phases"]]
    if keys:
        return max(pg["phases"][k] for k in keys), f"{phase} ({'/'.join(keys)})", None
    c = pg["components"]
    if phase == "load":
        return c["weights"], "load (weights)", None
    if phase == "init":
        return c["weights"] + c["gradients"] + c["optimizer_states"], \
            "init (weights, gradients and optimizer states)", None
    if phase == "save" and "step" in pg["phases"]:
        return pg["phases"]["step"], "save (the state resident after the step)", None
    return pg["peak_allocated_bytes"], f"the peak ({pg['peak_phase']})", pg["peak_reserved_bytes"]


def phase_estimate(phase: str, est: dict):
    """(allocated, reserved or None, label, note or None): the estimate of the run phase the log stopped in.

    ``estimate.run.phases[run phase]`` (plan-v1 Extension 5) when the estimate has it; the step's moments read
    per_gpu.phases; a phase the plan's run does not have, or an estimate without run phases, falls back to the
    step's figures with a note saying so."""
    pg = est["per_gpu"]
    rp = run_phase(phase)
    phases = (est.get("run") or {}).get("phases") or {}
    if rp in phases and rp != "step":
        ph = phases[rp]
        note = ph.get("note") or ""
        return ph["peak_allocated_bytes"], ph["peak_reserved_bytes"], f"the {rp} phase" + (
            f" ({note})" if note else ""), None
    alloc, label, reserved = _step_estimate(phase, pg)
    if rp in ("step", "unknown"):
        if rp == "step" and phase in PHASE_MAP and "step" in phases:
            reserved = phases["step"]["peak_reserved_bytes"]
        return alloc, reserved, label, None
    if phases:
        note = (f"the log stopped in the {rp} phase, which the plan's run does not have (set "
                f"{RUN_KEYS.get(rp, 'run')} to estimate it): compared with the steady step's figures")
    else:
        note = (f"this estimate has no run phases (plan-v1 Extension 5): the {rp} phase is compared with the "
                "steady step's figures")
    return alloc, reserved, label, note


def plan_findings(o, phase, est: dict) -> list:
    """The log's numbers beside the plan's estimate of the same run phase (allocated + the request, reserved)."""
    out = []
    pg = est["per_gpu"]
    cap = est["capacity_bytes"]
    if o is not None and o.gpu_total_bytes is not None and abs(o.gpu_total_bytes - cap) > 0.05 * cap:
        out.append(_f("gpu_mismatch", "warning",
                      f"the log's GPU has {g(o.gpu_total_bytes)}, the plan's GPU {g(cap)}: set the plan's gpu to "
                      "the card that crashed before reading the comparison below"))
    est_phase, est_reserved, label, note = phase_estimate(phase, est)
    if note:
        out.append(_f("phase_estimate_fallback", "warning", note))
    has_res = est_reserved is not None
    at = f"at {label} the plan's estimate is {g(est_phase)} allocated" + (f", {g(est_reserved)} reserved" if has_res else "")
    if o is not None and o.allocated_bytes is not None and o.tried_to_allocate_bytes is not None:
        logged = o.allocated_bytes + o.tried_to_allocate_bytes
        ratio = logged / est_phase if est_phase else 0.0
        msg = (f"{at}; the log had {g(o.allocated_bytes)} allocated and asked for {g(o.tried_to_allocate_bytes)} "
               f"more ({g(logged)}, {ratio:.0%} of the estimate)")
        if has_res and o.reserved_unallocated_bytes is not None:
            held = o.allocated_bytes + o.reserved_unallocated_bytes
            msg += f", {g(held)} reserved ({held / est_reserved:.0%} of the estimate's reserved)" if est_reserved \
                else f", {g(held)} reserved"
        if ratio > 1.25:
            msg += ": the run holds more than this plan describes - check micro_batch_size, seq_len, "
            msg += "activation_checkpointing and the stage" + (", and the run.* settings" if run_phase(phase) not in
                                                               ("step", "unknown") else "") + " against the run's config"
        elif ratio < 0.75 and phase not in ("load", "init", "save"):
            msg += ": the crash came before this phase's peak; the estimate shows what the phase still needs"
        out.append(_f("estimate_vs_log", "info", msg))
    else:
        out.append(_f("estimate_phase", "info", at))
    verdict = "fits" if est["fits"] else "does not fit"
    run = est.get("run") or {}
    if run.get("phases") and not est["fits"] and run.get("peak_phase") != "step":
        where = (f"{g(run['device_used_bytes'])} used of {g(cap)} on the busiest GPU at its peak, the "
                 f"{run['peak_phase']} phase (the step: {g(pg['device_used_bytes'])})")
    else:
        where = f"{g(pg['device_used_bytes'])} used of {g(cap)} on the busiest GPU (largest part: {est['primary_driver']})"
    out.append(_f("estimate_fit", "info" if est["fits"] else "error", f"the plan's estimate {verdict}: {where}"))
    over = [k for k, v in (run.get("phases") or {}).items() if v["device_used_bytes"] > cap]
    if over and run.get("fix") and over[0] == run_phase(phase):
        out.append(_f("run_fix", "warning", f"the plan's estimate runs out in the same phase ({over[0]}): "
                      f"{run['fix']}"))
    return out


def need_bytes(o, est: dict, phase: str = "unknown") -> int:
    """How much the busiest GPU must shed: the estimate's overshoot (of the log's run phase when the estimate has
    it, else of the step), or what the crash lacked (request - free)."""
    phases = (est.get("run") or {}).get("phases") or {}
    used = phases.get(run_phase(phase), {}).get("device_used_bytes", est["per_gpu"]["device_used_bytes"])
    over = used - est["capacity_bytes"]
    lacked = 0
    if o is not None and o.tried_to_allocate_bytes is not None and o.free_bytes is not None:
        lacked = o.tried_to_allocate_bytes - o.free_bytes
    return max(over, lacked, 0)
