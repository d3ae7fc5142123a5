"""``diagnose(log, plan)``: the crash-log doctor's result object (plan-v1 Extension 3).

Pure: text and an optional Plan in, a frozen Diagnosis out; ``to_dict()`` is the contract's JSON.
Kinds in priority order: a CUDA OOM (the root cause when launchers then kill the other ranks), a host-RAM
kill or pinned-memory failure, an NCCL error, an NCCL watchdog timeout (usually the echo of a rank that died
or stalled), bf16 / bitsandbytes on a GPU that lacks them ("other"), any other traceback ("other"), nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import estimate
from . import candidates, classify, findings
from .oom import OomNumbers, parse_oom
from .sizes import format_gib as g

_TRACE = re.compile(r"Traceback \(most recent call last\)|\b\w*(?:Error|Exception): ")
_LAST_ERROR = re.compile(r"^\W{0,20}([\w.]{0,200}(?:Error|Exception)): (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Diagnosis:
    kind: str
    phase: str
    oom: OomNumbers | None = None
    device: str | None = None
    fragmentation: bool = False
    findings: tuple = ()
    plan_changes: dict = field(default_factory=dict)
    nccl: classify.NcclTimeout | None = None
    host_tried_to_allocate_bytes: int | None = None
    subkind: str | None = None

    def to_dict(self) -> dict:
        o = self.oom
        d = {
            "kind": self.kind, "phase": self.phase,
            "gpu_total_bytes": o.gpu_total_bytes if o else None,
            "tried_to_allocate_bytes": o.tried_to_allocate_bytes if o else self.host_tried_to_allocate_bytes,
            "allocated_bytes": o.allocated_bytes if o else None,
            "reserved_unallocated_bytes": o.reserved_unallocated_bytes if o else None,
            "free_bytes": o.free_bytes if o else None,
            "device": self.device, "fragmentation": self.fragmentation,
            "findings": [dict(f) for f in self.findings], "plan_changes": _thaw(self.plan_changes),
            # compatible additions
            "subkind": self.subkind,
            "message_wording": o.wording if o else None,
            "this_process_bytes": o.this_process_bytes if o else None,
            "private_pools_bytes": o.private_pools_bytes if o else None,
        }
        if self.nccl is not None:
            n = self.nccl
            d["nccl"] = {"op": n.op, "seq": n.seq, "timeout_ms": n.timeout_ms, "ran_for_ms": n.ran_for_ms,
                         "numel_in": n.numel_in, "numel_out": n.numel_out, "rank": n.rank}
        return d


def _thaw(v):
    return {k: _thaw(x) for k, x in v.items()} if isinstance(v, dict) else v


def _f(fid, severity, message):
    return {"id": fid, "severity": severity, "message": message}


def _kind(text: str, oom):
    """(kind, subkind)."""
    if classify.pinned_failure(text) and (oom is None or oom.tried_to_allocate_bytes is None):
        return "host_oom", "pinned"
    if oom is not None:
        return "cuda_oom", oom.wording
    if classify.CPU_ALLOC.search(text):
        return "host_oom", "cpu_allocator"
    if classify.DATALOADER_SHM.search(text):
        return "host_oom", "dataloader_shm"
    if classify.host_kill(text):
        return "host_oom", "killed"
    sub = classify.nccl_error_kind(text)
    if sub is not None and classify.WATCHDOG.search(text) is None:
        return "nccl_error", sub
    if classify.WATCHDOG.search(text):
        return "nccl_timeout", sub
    if classify.BF16.search(text) or classify.TF32.search(text):
        return "other", "bf16_unsupported"
    if classify.BNB.search(text):
        return "other", "bitsandbytes_gpu"
    if _TRACE.search(text):
        return "other", None
    return "none", None


# The fixed advice per sub-kind (the log's numbers go into the others).
_HOST_MESSAGES = {
    "pinned": ("pinned_memory",
               "pinning host memory failed (cudaHostAlloc behind pin_memory): the OS limits page-locked "
               "RAM (WSL2 and containers especially); set pin_memory false in the DataLoader and in "
               "DeepSpeed's offload_optimizer/offload_param, or give the machine more locked memory"),
    "dataloader_shm": ("dataloader_shm",
                       "DataLoader workers ran out of shared memory (/dev/shm, 64 MiB by default in Docker): run the "
                       "container with --shm-size=16g or --ipc=host, or use fewer DataLoader workers (num_workers, "
                       "dataloader_num_workers)"),
}
_NCCL_MESSAGES = {
    "shm": ("nccl_shm",
            "NCCL could not create its shared-memory segment in /dev/shm (too small or not writable, "
            "typical in Docker's 64 MiB default): run the container with --shm-size=16g (or --ipc=host), "
            "or NCCL_SHM_DISABLE=1 at some speed cost"),
    "ib": ("nccl_ib",
           "NCCL's InfiniBand transport got an error completion (a link, GID or RDMA setup problem, not "
           "memory): check ibstat/ib_write_bw between the nodes, NCCL_IB_GID_INDEX, or test with "
           "NCCL_IB_DISABLE=1"),
    "system": ("nccl_system",
               "NCCL returned a system error (a socket, shared-memory or driver call failed): rerun with "
               "NCCL_DEBUG=INFO; the WARN line before the error names the failing call"),
}


def _host_findings(text, sub, est):
    out = []
    if sub in _HOST_MESSAGES:
        fid, message = _HOST_MESSAGES[sub]
        out.append(_f(fid, "error", message))
    elif sub == "cpu_allocator":
        n = int(classify.CPU_ALLOC.search(text).group(1))
        out.append(_f("cpu_allocator", "error",
                      f"host RAM: PyTorch's CPU allocator could not get {g(n)}; load with low_cpu_mem_usage=True "
                      "(or device_map), use fewer dataloader workers, or add RAM/swap"))
    else:
        out.append(_f("host_oom_killed", "error",
                      "the process was killed by the operating system (SIGKILL, exit -9): host RAM ran out - "
                      "typically every rank loading the full checkpoint at once, CPU offload, or dataloader "
                      "workers; load shards lazily (low_cpu_mem_usage=True, zero_init / meta-device init), "
                      "fewer workers, more RAM or swap"))
    if est is not None:
        out.append(_f("host_estimate", "info",
                      f"the plan needs {g(est['host_per_node_bytes'])} of host RAM per node for offload, pinned "
                      "buffers and loading"))
    return out


def _nccl_findings(text, kind, sub, n):
    out = []
    if kind == "nccl_timeout" and n is not None:
        out.append(_f("nccl_timeout", "error", _timeout_message(n)))
    if sub in _NCCL_MESSAGES:
        fid, message = _NCCL_MESSAGES[sub]
        out.append(_f(fid, "error", message))
    return out


def _timeout_message(n) -> str:
    who = f"rank {n.rank}" if n.rank is not None else "a rank"
    limit = f"{n.timeout_ms / 60000:g} min" if n.timeout_ms else "the timeout"
    size = f" of {n.numel_in:,} elements" if n.numel_in else ""
    return (f"{who} waited {n.ran_for_ms / 1000:.0f} s in {n.op or 'a collective'}{size} (sequence number "
            f"{n.seq}) against a limit of {limit}: another rank never joined - it crashed (look for an OOM or a "
            "-9 in its log), stalls in rank-0-only work (evaluation, saving, data preprocessing), or the ranks "
            "diverged; raise the limit (TrainingArguments ddp_timeout, init_process_group(timeout=)) only once "
            "the slow rank is known")


def _other_findings(text, sub, plan):
    out, changes = [], {}
    if sub == "bf16_unsupported":
        out.append(_f("bf16_unsupported", "error",
                      "this GPU has no bf16 (compute capability < 8.0: V100, T4, P100, RTX 20xx): train in fp16 "
                      "mixed precision (--fp16, fp16.enabled in ds_config) or use an Ampere+ GPU; also drop --tf32"))
        changes = {"precision": "fp16-mixed"}
    elif sub == "bitsandbytes_gpu":
        cc = classify.BNB_CC.search(text)
        at = f" (compute capability {cc.group(1)})" if cc else ""
        out.append(_f("bitsandbytes_gpu", "error",
                      f"bitsandbytes' int8 kernels do not run on this GPU{at}: LLM.int8 matmul needs compute "
                      "capability >= 7.5; use 4-bit NF4 (works on all CUDA GPUs) or a plain optimizer"))
        if plan is not None and plan.method == "qlora" and plan.quantization.type == "int8":
            changes = {"quantization": {"type": "nf4"}}
        elif plan is not None and "8bit" in plan.optimizer:
            changes = {"optimizer": "adamw"}
    else:
        errors = _LAST_ERROR.findall(text)
        if errors:
            name, msg = errors[-1]
            out.append(_f("unrecognised_error", "info",
                          f"not a memory, NCCL, bf16 or bitsandbytes failure the doctor knows: {name}: {msg.strip()[:300]}"))
    return out, changes


def diagnose(text: str, plan=None) -> Diagnosis:
    """Read a pasted log (and the plan it ran, if given) into the doctor's result."""
    oom = parse_oom(text)
    kind, sub = _kind(text, oom)
    if kind != "cuda_oom":
        oom = None                      # a pinned-memory "CUDA error: out of memory" is host memory
    stop = None
    if kind == "cuda_oom" and oom is not None:
        stop = classify.line_index(text, oom.position)
    phase = classify.phase_of(text, stop) if kind != "none" else "unknown"
    n = classify.nccl_timeout(text) if kind in ("nccl_timeout", "nccl_error") else None
    device = classify.device_of(text, oom.gpu_index if oom else None)
    if device is None and n is not None and n.rank is not None:
        device = f"rank {n.rank}"
    est = estimate(plan, search_min_gpus=False).to_dict() if plan is not None else None
    out, changes = [], {}
    if kind == "cuda_oom":
        out = findings.cuda_oom_findings(oom, device)
        if est is not None:
            out += findings.plan_findings(oom, phase, est)
            need = findings.need_bytes(oom, est)
            opts = candidates.search(plan, need)
            for o in opts:
                out.append(_f("option", "info", f"{o.label}: {g(o.device_used_bytes)} on the busiest GPU, "
                              f"{g(o.saves_bytes)} less (needed {g(need)})"))
            if opts:
                changes = dict(opts[0].changes)
            else:
                out.append(_f("no_option", "warning",
                              f"no single plan lever (checkpointing, chunked loss, smaller micro batch, 8-bit "
                              f"optimizer, ZeRO-3, offload) frees the {g(need)} needed: more GPUs or a larger GPU"))
    elif kind == "host_oom":
        out = _host_findings(text, sub, est)
    elif kind in ("nccl_timeout", "nccl_error"):
        out = _nccl_findings(text, kind, sub, n)
    elif kind == "other":
        out, changes = _other_findings(text, sub, plan)
    frag = findings.is_fragmented(oom)
    return Diagnosis(kind=kind, phase=phase, oom=oom, device=device, fragmentation=frag, findings=tuple(out),
                     plan_changes=changes, nccl=n,
                     host_tried_to_allocate_bytes=(int(classify.CPU_ALLOC.search(text).group(1))
                                                   if sub == "cpu_allocator" else None),
                     subkind=sub)
