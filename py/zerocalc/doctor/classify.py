"""What kind of crash a log shows, in which phase of the training step, on which device or rank.

Markers are the exact strings the software prints:

* host RAM: the kernel OOM killer's SIGKILL as the launchers report it - DeepSpeed's launcher
  (deepspeed/launcher/launch.py ``sigkill_handler``: "... exits with return code = -9"), torchrun
  (torch/distributed/elastic/multiprocessing/api.py: "failed (exitcode: -9)", "Signal 9 (SIGKILL) received by
  PID"), the shell's bare "Killed"; c10's CPU allocator ("DefaultCPUAllocator: can't allocate memory: you
  tried to allocate N bytes", alloc_cpu.cpp); DataLoader workers out of /dev/shm ("Unexpected bus error
  encountered in worker. This might be caused by insufficient shared memory (shm)",
  torch/utils/data/_utils/signal_handling.py); pinned host memory (``pin_memory`` / cudaHostAlloc failing
  with "CUDA error: out of memory" or "invalid argument").
* NCCL: ProcessGroupNCCL's watchdog ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=...,
  OpType=..., Timeout(ms)=...) ran for N milliseconds before timing out"); NCCL return codes
  ("unhandled system error", "unhandled cuda error", ncclSystemError), its shared-memory transport
  ("Error while creating shared memory segment /dev/shm/nccl-...", misc/shmutils.cc) and InfiniBand
  ("NET/IB : Got completion from peer ... with status=12 / error 12", net_ib.cc).
* bf16: transformers' TrainingArguments ("Your setup doesn't support bf16/gpu"), accelerate/torch
  ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0"), Triton ("'.bf16' requires
  .target sm_80 or higher").
* bitsandbytes: "Your GPU does not support Int8 Matmul!", "Compute capability < 7.5 detected! Only slow 8-bit
  matmul", with "Highest compute capability among GPUs detected: 6.1"; its set-up failing to load a CUDA library
  (bitsandbytes/cuda_setup/main.py before 0.43: "CUDA Setup failed despite GPU being available", "CUDA SETUP: CUDA
  detection failed!", "Defaulting to libbitsandbytes_cpu.so", "CUDA SETUP: Problem: The main issue seems to be that
  the main CUDA library was not detected"; cextension.py after: "Could not load bitsandbytes native library",
  "The installed version of bitsandbytes was compiled without GPU support").
* NCCL watchdog, newer wordings (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp): the heartbeat monitor
  ("ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued
  collectives", 2.3+), the flight recorder's dump on a timeout ("failure detected by watchdog at work sequence id:
  716 PG status: last enqueued work: 747, last completed work: 715", "Received a dump signal due to a collective
  timeout", "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled",
  2.6+), "Timeout at NCCL work: N, last enqueued NCCL work: M, last completed NCCL work: K", and the watchdog's own
  C++ frames (``WorkNCCL::checkTimeout``).
* A hang dumped by py-spy (``py-spy dump``: ``Thread 42 (idle): "MainThread"``) or faulthandler
  (``faulthandler.dump_traceback[_later]``: ``Thread 0x7f... (most recent call first):``): a thread waiting in a
  torch.distributed collective (distributed_c10d.py ``all_reduce``, ``all_gather_into_tensor``, ``broadcast``,
  ``barrier``, ...) makes it a collective that never completed.
* DeepSpeed ``see_memory_usage`` lines (deepspeed/runtime/utils.py) followed by the launcher's ``sigkill_handler``
  ("Killing subprocess N", deepspeed/launcher/launch.py: a rank exited non-zero) and no Python traceback: the rank
  was killed from outside, the kernel's OOM killer in practice (host RAM at init: every rank loading a copy).

The phase comes from the traceback: frames are read outermost first (Python's order); the innermost frame
that names a phase decides, except that a forward frame below a backward frame is activation recomputation
(torch/utils/checkpoint.py) and stays "backward".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import phase as _phase

HOST_KILL = (
    re.compile(r"exits with return code\s*=\s*-9"),
    re.compile(r"exitcode\s*:\s*-9\b"),
    re.compile(r"Signal 9 \(SIGKILL\) received"),
    re.compile(r"Out of memory: Killed process"),
    re.compile(r"(?:^|[\]|\s])Killed\s*$", re.MULTILINE),
)
CPU_ALLOC = re.compile(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate "
                       r"(\d+) bytes")
DATALOADER_SHM = re.compile(r"insufficient shared memory \(shm\)|DataLoader worker \(pid \d+\) is killed by signal: Bus "
                            r"error|out of shared memory")
PINNED_FRAME = re.compile(r"pin_memory|cudaHostAlloc|CachingHostAllocator|cudaMallocHost|pinned", re.IGNORECASE)
PINNED_ERROR = re.compile(r"CUDA error: (?:out of memory|invalid argument)")

WATCHDOG = re.compile(r"Watchdog caught collective operation timeout:\s*WorkNCCL\(([^()]*(?:\([^()]*\)[^()]*)*)\)"
                      r"\s*ran\s+f\s*or\s+(\d+)\s*milliseconds")
HEARTBEAT = re.compile(r"watchdog got stuck for (\d+) seconds without making progress")
FLIGHT = re.compile(r"failure detected by watchdog at work sequence id: (\d+)|Received a dump signal due to a collective "
                    r"timeout|Stack trace of the failed collective not found")
PROGRESS = re.compile(r"last enqueued(?: NCCL)? work: (\d+), last completed(?: NCCL)? work: (\d+)")
CHECK_TIMEOUT = re.compile(r"WorkNCCL::checkTimeout|Timeout at NCCL work: \d+")
COLLECTIVES = re.compile(r"^(?:all_reduce|all_gather|all_gather_into_tensor|_all_gather_base|all_gather_object|"
                         r"reduce_scatter|reduce_scatter_tensor|_reduce_scatter_base|broadcast|broadcast_object_list|"
                         r"barrier|monitored_barrier|all_to_all|all_to_all_single|send|recv|isend|irecv)$")
FATAL = re.compile(r"Fatal Python error")
SEE_MEMORY = re.compile(r"see_memory_usage\]")
DS_KILL = re.compile(r"sigkill_handler\] Killing subprocess \d+")
PY_ERROR = re.compile(r"Traceback \(most recent call last\)|\w(?:Error|Exception): ")
NCCL_SHM = re.compile(r"Error while (?:creating|attaching to) shared memory segment|shm_open failed|/dev/shm/nccl-"
                      r"|NCCL_SHM", re.IGNORECASE)
NCCL_IB = re.compile(r"NET/IB\w* ?: ?Got completion|ibv_\w+ failed|NET/IB : .*(?:error|failed)|IBV_WC_")
NCCL_ERR = re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|unhandled system error"
                      r"|unhandled cuda error|NCCL WARN")

BF16 = re.compile(r"doesn't support bf16|Bfloat16 is only supported on GPUs with compute capability|'\.bf16' "
                  r"requires \.target sm_80|bf16.{0,40}requires.{0,40}(?:Ampere|sm_80)", re.IGNORECASE)
TF32 = re.compile(r"--tf32 requires Ampere")
BNB = re.compile(r"does not support Int8 Matmul|Compute capability < 7\.5 detected|8-bit optimizers.{0,40}unavailable",
                 re.IGNORECASE)
BNB_SETUP = re.compile(r"CUDA Setup failed despite GPU being available|CUDA SETUP: CUDA detection failed|Defaulting to "
                       r"libbitsandbytes_cpu|CUDA SETUP: Problem: The main issue seems to be that the main CUDA "
                       r"(?:library|runtime)|Could not load bitsandbytes native library|bitsandbytes was compiled "
                       r"without GPU support|bin \S*libbitsandbytes_cpu\.(?:so|dll)")
BNB_CC = re.compile(r"Highest compute capability among GPUs detected: (\d+\.\d+)")

# legacy phase markers, matched against one line: the fallback for a log without frame structure (phase.py reads
# frames first)
PHASE_RULES = (
    ("save", re.compile(r"save_model|save_checkpoint|_save_checkpoint|\b_save\b|torch\.save|_save_to_state_dict"
                        r"|consolidated_16bit_state_dict|save_pretrained|fsdp_save|state_dict_utils|"
                        r"save_model_and_optimizer|gather_16bit_weights_on_model_save")),
    ("load", re.compile(r"from_pretrained|_load_pretrained_model|_load_state_dict_into_meta_model|load_state_dict"
                        r"|Loading checkpoint shards|load_checkpoint|safe_open|set_module_tensor_to_device")),
    ("init", re.compile(r"deepspeed\.initialize|DeepSpeedEngine\(|_configure_distributed_model|_broadcast_model"
                        r"|_configure_optimizer|_configure_zero_optimizer|initialize_optimizer_states|"
                        r"_move_model_to_device|accelerator\.prepare|\.prepare\(|FullyShardedDataParallel\(|"
                        r"fully_shard\(|init_process_group|\bmodel\.cuda\(\)|module\.to\(self\.device\)|"
                        r"\bin _apply\b")),
    ("step", re.compile(r"optimizer\.step|optimizer_step|_take_model_step|\bstep\(\)|\bin step\b|adamw?\.py|"
                        r"_init_group|exp_avg|_multi_tensor_adam|_single_tensor_adam|_fused_adam|_foreach_|"
                        r"_maybe_opt_step|clip_grad_norm|unscale_|scaler\.step|cpu_adam|"
                        r"stage_1_and_2\.py.*\bstep\b")),
    ("backward", re.compile(r"\.backward\(|\bin backward\b|run_backward|_engine_run_backward|autograd/__init__|"
                            r"autograd\.backward|backward_hooks|reduce_ready_partitions|reduce_independent_p_g|"
                            r"average_tensor|allreduce_gradients|_backward_hook|checkpoint\.py.*backward")),
    ("loss", re.compile(r"cross_entropy|log_softmax|nll_loss|loss_fct|loss_function|ForCausalLMLoss|"
                        r"fixed_cross_entropy|CrossEntropyLoss|compute_log_probs|logits\.float\(\)|\.float\(\)\s*$|"
                        r"loss_utils\.py|LigerFusedLinearCrossEntropy|chunked_cross_entropy")),
    ("forward", re.compile(r"\bin forward\b|\.forward\(|model\(\*\*inputs\)|_call_impl|_wrapped_call_impl|"
                           r"forward_call\(|F\.linear|grid_sampler|scaled_dot_product|flash_attn|"
                           r"pre_sub_module_forward|fetch_sub_module|\bin forward\b")),
)


@dataclass(frozen=True)
class NcclTimeout:
    """One watchdog report: the collective that did not complete (fields the log does not print are None)."""
    op: str | None
    seq: int | None
    timeout_ms: int | None
    ran_for_ms: int | None
    numel_in: int | None
    numel_out: int | None
    rank: int | None
    last_enqueued: int | None = None      # "last enqueued NCCL work: N" (the watchdog's progress counters)
    last_completed: int | None = None
    stuck_s: int | None = None            # the heartbeat monitor's "watchdog got stuck for N seconds"


def phase_of(text: str, stop: int | None = None) -> tuple:
    """(phase, evidence): the frames' phase (phase.read), else the legacy line walk before ``stop`` (a line
    index: the error line), else over all lines."""
    reading = _phase.read(text, stop)
    if reading is not None:
        return reading.phase, reading.evidence
    return legacy_phase(text, stop), None


def legacy_phase(text: str, stop: int | None = None) -> str:
    """load | init | forward | loss | backward | step | save | unknown from single lines, for logs whose frames
    phase.py cannot read (a cut-off source line, a bare frame path)."""
    lines = text.splitlines()
    head = lines[:stop] if stop is not None else lines
    phase = _walk(head)
    return phase if phase != "unknown" else _walk(lines)


def _walk(lines) -> str:
    phase = "unknown"
    for line in lines:
        if len(line) > _phase.MAX_LINE:
            continue
        tag = _tag(line)
        if tag is None:
            continue
        if phase == "backward" and tag in ("forward", "loss"):
            continue                      # recomputation inside backward
        phase = tag
    return phase


def _tag(line: str) -> str | None:
    if "OutOfMemoryError" in line or "out of memory" in line.lower():
        return None                       # the error line itself names no phase
    for name, rx in PHASE_RULES:
        if rx.search(line):
            return name
    return None


def line_index(text: str, pos_in_flat: int) -> int | None:
    """The line of ``text`` holding the error whose offset ``pos_in_flat`` is in the whitespace-collapsed text."""
    count = 0
    for i, line in enumerate(text.splitlines()):
        words = len(" ".join(line.split()))
        if count + words >= pos_in_flat:
            return i
        count += words + 1
    return None


def device_of(text: str, gpu_index: int | None) -> str | None:
    """'GPU 3' when the message names the GPU, else 'rank N' from a rank prefix, else None."""
    if gpu_index is not None:
        return f"GPU {gpu_index}"
    for rx in (re.compile(r"\[[Rr]ank ?(\d+)\]"), re.compile(r"\bRank (\d+)\b"), re.compile(r"local_rank: (\d+)"),
               re.compile(r"\brank(\d+)\]")):
        m = rx.search(text)
        if m:
            return f"rank {int(m.group(1))}"
    return None


def timeout_marker(text: str) -> str | None:
    """How the log says a collective timed out: ``watchdog`` (the classic timeout line), ``watchdog_stuck`` (the
    heartbeat monitor), ``flight_recorder`` (the 2.6+ dump on a timeout, or the watchdog's checkTimeout frames), or
    None."""
    if "Watchdog caught" in text and WATCHDOG.search(text):
        return "watchdog"
    if HEARTBEAT.search(text):
        return "watchdog_stuck"
    if FLIGHT.search(text) or CHECK_TIMEOUT.search(text):
        return "flight_recorder"
    return None


def hang_dump(text: str) -> str | None:
    """``collective`` when a py-spy / faulthandler stack dump shows a thread inside a torch.distributed collective,
    ``dump`` for a dump without one, None when the log is no stack dump (a ``Fatal Python error`` is a crash)."""
    if FATAL.search(text):
        return None
    stacks = [b for b in _phase.blocks(text) if b.thread is not None]
    if not stacks:
        return None
    return "collective" if any(COLLECTIVES.match(n) for b in stacks for n in b.names) else "dump"


def killed_after_see_memory_usage(text: str) -> bool:
    """DeepSpeed's memory report, then its launcher killing the ranks, and no Python error: killed from outside."""
    return bool(SEE_MEMORY.search(text) and DS_KILL.search(text) and not PY_ERROR.search(text))


def nccl_timeout(text: str) -> NcclTimeout | None:
    """The first watchdog timeout in the log: the classic line's fields, else the heartbeat's or the flight
    recorder's counters."""
    m = WATCHDOG.search(text)
    prog = PROGRESS.search(text)
    last = {"last_enqueued": int(prog.group(1)) if prog else None,
            "last_completed": int(prog.group(2)) if prog else None}
    stuck = HEARTBEAT.search(text)
    if m is None:
        if timeout_marker(text) is None:
            return None
        seq = re.search(r"failure detected by watchdog at work sequence id: (\d+)|Timeout at NCCL work: (\d+)|"
                        r"detected by watchdog at work: (\d+)", text)
        rank = re.search(r"\[(?:PG [^\]]*?)?Rank (\d+)\]", text)
        return NcclTimeout(op=None, seq=int(next(g for g in seq.groups() if g)) if seq else None, timeout_ms=None,
                           ran_for_ms=None, numel_in=None, numel_out=None,
                           rank=int(rank.group(1)) if rank else None, stuck_s=int(stuck.group(1)) if stuck else None,
                           **last)
    inner = m.group(1)

    def field(name):
        f = re.search(name + r"=([^,]+)", inner)
        return f.group(1).strip() if f else None
    line_start = text.rfind("\n", 0, m.start()) + 1
    rank = re.search(r"\[Rank (\d+)\]", text[line_start: m.start()])
    ints = {k: (int(v) if v is not None and v.isdigit() else None)
            for k, v in (("seq", field("SeqNum")), ("timeout", field(r"Timeout\(ms\)")),
                         ("numel_in", field("NumelIn")), ("numel_out", field("NumelOut")))}
    return NcclTimeout(op=field("OpType"), seq=ints["seq"], timeout_ms=ints["timeout"], ran_for_ms=int(m.group(2)),
                       numel_in=ints["numel_in"], numel_out=ints["numel_out"],
                       rank=int(rank.group(1)) if rank else None, stuck_s=int(stuck.group(1)) if stuck else None,
                       **last)


def host_kill(text: str) -> bool:
    return any(rx.search(text) for rx in HOST_KILL) or killed_after_see_memory_usage(text)


def pinned_failure(text: str) -> bool:
    """A CUDA error raised while pinning host memory (the caching host allocator's cudaHostAlloc)."""
    m = PINNED_ERROR.search(text)
    if m is None:
        return False
    before = text[max(0, m.start() - 1500): m.start()]
    return bool(PINNED_FRAME.search(before))


def nccl_error_kind(text: str) -> str | None:
    """shm | ib | system | None."""
    if NCCL_SHM.search(text):
        return "shm"
    if NCCL_IB.search(text):
        return "ib"
    if NCCL_ERR.search(text):
        return "system"
    return None
