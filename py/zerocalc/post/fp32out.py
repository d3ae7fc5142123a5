"""accelerate's fp32 copy of the model outputs: what the trainers built on the HF Trainer (TRL, ms-swift,
LLaMA-Factory) hand their log-probability code when the run is mixed precision without DeepSpeed.

accelerate `Accelerator.__init__` sets `native_amp` for `mixed_precision` "bf16" (and "fp16" off CPU) unless the
distributed type is DeepSpeed or Megatron-LM; `prepare_model` then wraps the forward twice when `native_amp`:
`autocast_context(forward)` and `convert_outputs_to_fp32(...)` (accelerate/accelerator.py `prepare_model`,
accelerate/utils/operations.py `ConvertOutputsToFp32.__call__` -> `convert_to_fp32`: `tensor.float()` of every
fp16/bf16 tensor in the output, a new ModelOutput; read in accelerate 1.15.0, the same wrapper since 0.x). The
Trainer prepares the policy (`accelerator.prepare` in `_inner_training_loop`) and TRL < 1.15 the reference too
(dpo_trainer.py: `self.accelerator.prepare_model(self.ref_model, evaluation_mode=True)`; the `native_amp`
block does not look at evaluation_mode). So the lm_head's 16-bit logits L16 (2n) are copied to fp32 L32 (4n)
as the forward returns; L16 dies with the original output (no autograd node saves it: the matmul saves its
inputs, `_to_copy`'s backward saves nothing), and what TRL's `selective_log_softmax`, its Triton kernel and
LLaMA-Factory's `.logits.to(torch.float32)` (a no-op now) read is L32:
- the log-prob code runs its fp32 branch (c = 4) on L32: what it saves and its backward are those of fp32 logits;
- the moment of the copy holds L16 + L32 = 6n (forward and, for a no-grad forward, the reference's and the
  score pass's peak where the fp32 branch holds less);
- backward ends with `_to_copy`'s backward casting L32's fp32 gradient to 16 bits: 4n + 2n.
Traced: tools/memtrace/post.py prepares the trainer's model with `accelerator.prepare_model` (TRL 1.14.2 on
CPU with bf16=True: native_amp) and the fixtures list the `_to_copy` (rows, s, V) fp32 storages beside the
bf16 `mm` output (golden/post/*-trl114.json `logits_at_peak`). TRL >= 1.15 (the fused head, which returns no
logits), Liger's chunked losses (no logits either), DeepSpeed (no native_amp), OpenRLHF and verl (no accelerate
wrapper) are untouched.
"""
from __future__ import annotations

from dataclasses import replace

from ..memory.inputs import StepInputs
from ..memory.logits import Logits
from .defaults import TRL_LIKE, Post

HALF = 2        # the 16-bit logits the autocast lm_head returns


def casts_outputs(post: Post, si: StepInputs, chunked: bool) -> bool:
    """Whether the logits reach the loss as accelerate's fp32 copy: an HF-Trainer trainer under autocast (the
    plan's mixed precision without DeepSpeed: memory/precision.py) and a loss that materialises the logits."""
    return post.trainer in TRL_LIKE and si.dt.autocast and not post.fused_head and not chunked


def with_copy(lg: Logits, numel: int) -> Logits:
    """An fp32-branch Logits (computed with c = 4) plus the copy's own moments: L16 + L32 as the forward
    returns, L32's gradient and its 16-bit cast at the end of backward."""
    return replace(lg, forward_peak=max(lg.forward_peak, (HALF + 4) * numel),
                   backward_peak=max(lg.backward_peak, (4 + HALF) * numel))


def no_grad_with_copy(fp32_bytes: int, numel: int) -> int:
    """A no-grad forward's logits bytes: the copy's moment (L16 + L32) or what the fp32 branch holds after it."""
    return max(fp32_bytes, (HALF + 4) * numel)
