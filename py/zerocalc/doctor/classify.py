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
  matmul", "compiled without GPU support", with "Highest compute capability among GPUs detected: 6.1".

The phase comes from the traceback: frames are read outermost first (Python's order); the innermost frame
that names a phase decides, except that a forward frame below a backward frame is activation recomputation
(torch/utils/checkpoint.py) and stays "backward".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

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

WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\(([^()]*(?:\([^()]*\)[^()]*)*)\) ran "
                      r"for (\d+) milliseconds")
NCCL_SHM = re.compile(r"Error while (?:creating|attaching to) shared memory segment|shm_open failed|/dev/shm/nccl-"
                      r"|NCCL_SHM", re.IGNORECASE)
NCCL_IB = re.compile(r"NET/IB\w* ?: ?Got completion|ibv_\w+ failed|NET/IB : .*(?:error|failed)|IBV_WC_")
NCCL_ERR = re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|unhandled system error"
                      r"|unhandled cuda error|NCCL WARN")

BF16 = re.compile(r"doesn't support bf16|Bfloat16 is only supported on GPUs with compute capability|'\.bf16' "
                  r"requires \.target sm_80|bf16.{0,40}requires.{0,40}(?:Ampere|sm_80)", re.IGNORECASE)
TF32 = re.compile(r"--tf32 requires Ampere")
BNB = re.compile(r"does not support Int8 Matmul|Compute capability < 7\.5 detected|bitsandbytes was compiled without "
                 r"GPU support|8-bit optimizers.{0,40}unavailable", re.IGNORECASE)
BNB_CC = re.compile(r"Highest compute capability among GPUs detected: (\d+\.\d+)")

# phase markers, matched against one line (a frame or its source line)
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
                           r"pre_sub_module_forward|fetch_sub_module|\bforward\b")),
)


@dataclass(frozen=True)
class NcclTimeout:
    """One watchdog line: the collective that did not complete."""
    op: str | None
    seq: int | None
    timeout_ms: int | None
    ran_for_ms: int
    numel_in: int | None
    numel_out: int | None
    rank: int | None


def phase_of(text: str, stop: int | None = None) -> str:
    """load | init | forward | loss | backward | step | save | unknown, from the frames before ``stop``
    (a line index: the error line), or from all lines when none before it names a phase."""
    lines = text.splitlines()
    head = lines[:stop] if stop is not None else lines
    phase = _walk(head)
    return phase if phase != "unknown" else _walk(lines)


def _walk(lines) -> str:
    phase = "unknown"
    for line in lines:
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


def nccl_timeout(text: str) -> NcclTimeout | None:
    """The first watchdog timeout in the log."""
    m = WATCHDOG.search(text)
    if m is None:
        return None
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
                       rank=int(rank.group(1)) if rank else None)


def host_kill(text: str) -> bool:
    return any(rx.search(text) for rx in HOST_KILL)


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
