"""Logits and the cross-entropy loss: the terms that scale with the vocabulary.

transformers 5 `ForCausalLMLoss` upcasts the logits (`logits.float()`), pads the labels instead of
shifting the logits (no shifted copy), and calls `cross_entropy`, i.e. log_softmax + nll_loss.
Traced (docs/tracer.md §3):
- kept from forward to backward: the fp32 log_softmax output, 4·s·b·V bytes;
- end of forward: 16-bit logits + fp32 copy + log_softmax = (2 + 4 + 4)·s·b·V (fp32 model: 8·s·b·V);
- start of backward (the step's peak without checkpointing): the saved log_softmax, nll_loss's fp32
  gradient and _log_softmax_backward_data's fp32 output = 12·s·b·V.
With V = 128,256 and s·b = 8192 that is 11.7 GiB, the term most calculators leave out.

Chunked loss (torchtune CEWithChunkedOutputLoss with 8 output chunks, compiled; LitGPT's
chunked_cross_entropy; Liger/Cut-CE keep even less): the 16-bit logits of every chunk are kept for
the backward, while the fp32 upcast, log-softmax and gradients exist for one chunk at a time (the
compiled cross-entropy keeps only its input and a per-row logsumexp).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import ModelArch
from ..plan import Plan

CHUNKS = 8


@dataclass(frozen=True)
class Logits:
    saved: int          # kept across forward -> backward
    forward_peak: int   # all logits-related bytes alive at the end of forward
    backward_peak: int  # all logits-related bytes alive at the start of backward


def logits(plan: Plan, arch: ModelArch, compute_bytes: int) -> Logits:
    if not arch.causal_lm:
        return Logits(0, 0, 0)
    n = plan.seq_len * plan.micro_batch_size * arch.vocab_size
    raw = compute_bytes * n                      # lm_head output in the compute dtype
    upcast = 0 if compute_bytes == 4 else 4 * n  # logits.float(): a copy unless already fp32
    if plan.loss == "chunked":
        return Logits(saved=raw, forward_peak=raw + 8 * n // CHUNKS, backward_peak=raw + 12 * n // CHUNKS)
    saved = 4 * n
    if arch.final_softcap:
        # Gemma 2: logits = tanh(logits / cap) * cap keeps the 16-bit tanh output (traced: 14·s·b·V)
        saved += compute_bytes * n
    return Logits(saved=saved, forward_peak=raw + upcast + saved, backward_peak=saved + 8 * n)
