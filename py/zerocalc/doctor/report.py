"""``diagnose(log, plan)``: the crash-log doctor's result object (plan-v1 Extension 3).

Pure: text and an optional Plan in, a frozen Diagnosis out; ``to_dict()`` is the contract's JSON.
Kinds in priority order: a CUDA OOM (the root cause when launchers then kill the other ranks), a host-RAM
kill or pinned-memory failure, an NCCL error, an NCCL watchdog timeout (usually the echo of a rank that died
or stalled) or a stack dump of ranks hung in a collective, bf16 / bitsandbytes on a GPU that lacks them or a
bitsandbytes install that cannot load its CUDA library ("other"), a stack dump of a hang outside collectives
("other"), any other traceback ("other"), a person's "OOM" with nothing more specific ("cuda_oom"), nothing.

``phase`` names where in the run the log stopped (phase.py: load, init, forward, loss, backward, step, eval,
generate, save, resume, merge, unknown) and ``run_phase`` the plan-v1 Extension 5 phase it belongs to (the step's
four moments are ``step``); with a plan, the log's numbers are read against that phase's estimate
(findings.plan_findings).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import estimate
from ..datasettings import expandable
from . import candidates, classify, findings, fragmentation
from .oom import MENTIONED, OomNumbers, parse_oom
from .phase import run_phase
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
    phase_evidence: str | None = None

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
            "run_phase": run_phase(self.phase), "phase_evidence": self.phase_evidence,
        }
        if self.nccl is not None:
            n = self.nccl
            d["nccl"] = {"op": n.op, "seq": n.seq, "timeout_ms": n.timeout_ms, "ran_for_ms": n.ran_for_ms,
                         "numel_in": n.numel_in, "numel_out": n.numel_out, "rank": n.rank,
                         "last_enqueued": n.last_enqueued, "last_completed": n.last_completed, "stuck_s": n.stuck_s}
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
    marker = classify.timeout_marker(text)
    if sub is not None and marker is None:
        return "nccl_error", sub
    if marker is not None:
        return "nccl_timeout", sub if sub is not None else (None if marker == "watchdog" else marker)
    dump = classify.hang_dump(text)
    if dump == "collective":
        return "nccl_timeout", "hang_dump"
    if classify.BF16.search(text) or classify.TF32.search(text):
        return "other", "bf16_unsupported"
    if classify.BNB.search(text):
        return "other", "bitsandbytes_gpu"
    if classify.BNB_SETUP.search(text):
        return "other", "bitsandbytes_setup"
    if dump == "dump":
        return "other", "hang_dump"
    if _TRACE.search(text):
        return "other", None
    if MENTIONED.search(text):
        return "cuda_oom", "oom_mentioned"
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
    elif classify.killed_after_see_memory_usage(text) and not any(rx.search(text) for rx in classify.HOST_KILL):
        out.append(_f("host_oom_killed", "error",
                      "DeepSpeed's launcher killed the ranks right after its memory report, with no Python error: a "
                      "rank was killed from outside (SIGKILL, exit -9), the kernel's OOM killer in practice - host RAM "
                      "ran out while the engine was set up (every rank holding a full copy of the model, the fp32 "
                      "optimizer partitions or offload buffers); check dmesg for 'Out of memory: Killed process', "
                      "load with zero.Init (zero_init) or low_cpu_mem_usage, fewer ranks per node, more RAM or swap"))
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


_HANG = ("the ranks stopped making progress: a collective was enqueued and never completed - another rank never "
         "joined it (it crashed: look for an OOM or a -9 in its log; it stalls in rank-0-only work: evaluation, "
         "saving, data preprocessing; or the ranks diverged: different numbers of batches or collectives). Get every "
         "rank's Python stack (py-spy dump --pid, or TORCH_NCCL_TRACE_BUFFER_SIZE=2000 for the flight recorder's "
         "dump) and compare: the rank that is not in the collective is the one to look at")


def _nccl_findings(text, kind, sub, n, phase="unknown", evidence=None):
    out = []
    if kind == "nccl_timeout" and n is not None and n.ran_for_ms is not None:
        out.append(_f("nccl_timeout", "error", _timeout_message(n)))
    elif kind == "nccl_timeout" and sub == "hang_dump":
        where = f" - the main thread is in {evidence}" if evidence else ""
        out.append(_f("hang_dump", "error", f"a stack dump of a hang: a thread waits in a collective{where}; {_HANG}"))
    elif kind == "nccl_timeout":
        detail = []
        if n is not None and n.stuck_s is not None:
            detail.append(f"the watchdog made no progress for {n.stuck_s} s (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)")
        if n is not None and n.last_enqueued is not None:
            detail.append(f"collective {n.last_completed + 1 if n.last_completed is not None else '?'} of "
                          f"{n.last_enqueued} enqueued never completed")
        lead = ("; ".join(detail) + ": ") if detail else ""
        out.append(_f("nccl_hang", "error", lead + _HANG))
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


def _other_findings(text, sub, plan, phase="unknown", evidence=None):
    out, changes = [], {}
    if sub == "bitsandbytes_setup":
        out.append(_f("bitsandbytes_setup", "error",
                      "bitsandbytes could not load its CUDA library and fell back to (or failed on) the CPU-only build "
                      "(libbitsandbytes_cpu): the install does not match the machine's CUDA. pip install -U "
                      "bitsandbytes (0.43+ ships CUDA binaries for Linux and Windows and finds PyTorch's CUDA), unset "
                      "BNB_CUDA_VERSION, make libcudart visible (LD_LIBRARY_PATH), and run python -m bitsandbytes to "
                      "check; QLoRA and 8-bit optimizers need it"))
        return out, changes
    if sub == "hang_dump":
        where = f" (the main thread is in {evidence})" if evidence else ""
        out.append(_f("hang_dump", "warning", f"a stack dump of a process that hangs outside collectives{where}: "
                      "the main thread's innermost frames are where it waits (I/O, a lock, a DataLoader worker)"))
        return out, changes
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
    elif oom is None:                   # a person's "OOM": no message to read numbers from
        m = MENTIONED.search(text)
        oom = OomNumbers(wording="oom_mentioned", position=len(" ".join(text[: m.start()].split())))
    stop = None
    if kind == "cuda_oom" and oom is not None:
        stop = classify.line_index(text, oom.position)
    phase, evidence = classify.phase_of(text, stop) if kind != "none" else ("unknown", None)
    n = classify.nccl_timeout(text) if kind in ("nccl_timeout", "nccl_error") else None
    device = classify.device_of(text, oom.gpu_index if oom else None)
    if device is None and n is not None and n.rank is not None:
        device = f"rank {n.rank}"
    est = estimate(plan, search_min_gpus=False).to_dict() if plan is not None else None
    out, changes = [], {}
    if kind == "cuda_oom":
        prog = fragmentation.progress(text, stop)
        out = findings.cuda_oom_findings(oom, device, prog)
        if est is not None:
            out += findings.plan_findings(oom, phase, est)
            late_frag = findings.is_fragmented(oom) and fragmentation.is_late(prog)
            exp_est = _expandable_estimate(plan) if findings.is_fragmented(oom) else None
            if findings.is_fragmented(oom):
                out += fragmentation.plan_findings(oom, prog, est, plan.data.lengths, exp_est)
            need = findings.need_bytes(oom, est, phase)
            opts = candidates.eval_search(plan, need) if run_phase(phase) == "eval" else []
            opts = opts or candidates.search(plan, need)
            where = "in the eval phase" if opts and opts[0].label.startswith("run.eval") else "on the busiest GPU"
            for o in opts:
                out.append(_f("option", "info", f"{o.label}: {g(o.device_used_bytes)} {where}, "
                              f"{g(o.saves_bytes)} less (needed {g(need)})"))
            if late_frag and exp_est is not None and (est["fits"] or est["run"].get("fragmentation_oom_step")):
                # a late fragmentation OOM of a plan whose step fits: the allocator is the change, not the plan
                changes = {"allocator": {**plan.to_dict().get("allocator", {}), "expandable_segments": True}}
            elif opts:
                changes = dict(opts[0].changes)
            else:
                out.append(_f("no_option", "warning",
                              f"no single plan lever (checkpointing, chunked loss, smaller micro batch, 8-bit "
                              f"optimizer, ZeRO-3, offload) frees the {g(need)} needed: more GPUs or a larger GPU"))
    elif kind == "host_oom":
        out = _host_findings(text, sub, est)
    elif kind in ("nccl_timeout", "nccl_error"):
        out = _nccl_findings(text, kind, sub, n, phase, evidence)
    elif kind == "other":
        out, changes = _other_findings(text, sub, plan, phase, evidence)
    if kind != "none" and phase != "unknown":
        out.append(_f("phase", "info", _phase_message(phase, evidence)))
    frag = findings.is_fragmented(oom)
    return Diagnosis(kind=kind, phase=phase, oom=oom, device=device, fragmentation=frag, findings=tuple(out),
                     plan_changes=changes, nccl=n,
                     host_tried_to_allocate_bytes=(int(classify.CPU_ALLOC.search(text).group(1))
                                                   if sub == "cpu_allocator" else None),
                     subkind=sub, phase_evidence=evidence)


def _expandable_estimate(plan) -> dict | None:
    """The plan's estimate with expandable segments on, or None when its trainer already runs with them."""
    if expandable(plan.allocator, plan.stack.trainer):
        return None
    alloc = {**(plan.to_dict().get("allocator") or {}), "expandable_segments": True}
    return estimate(plan.with_changes(allocator=alloc), search_min_gpus=False).to_dict()


_PHASE_WORDS = {"load": "loading the model", "init": "the engine's set-up (after loading, before training)",
                "forward": "the forward pass of a training step", "loss": "the loss of a training step",
                "backward": "the backward pass of a training step", "step": "the optimizer step",
                "eval": "evaluation", "generate": "generation", "save": "a checkpoint save",
                "resume": "reloading a checkpoint's optimizer state (resume / best-model reload)",
                "merge": "merging the adapter into the base model"}


def _phase_message(phase: str, evidence: str | None) -> str:
    why = f" (from {evidence})" if evidence else ""
    return f"the log stopped in {_PHASE_WORDS[phase]}{why}: run phase {run_phase(phase)}"
