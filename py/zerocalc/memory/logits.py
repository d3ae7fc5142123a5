"""Logits and the cross-entropy loss: the terms that scale with the vocabulary, per loss path.

n = s·b·V; c = the logits' compute dtype (2 under bf16/fp16, 4 in fp32); n' = (s-1)·b·V where a loss
shifts a copy of the logits instead of the labels.
- transformers 5 (`ForCausalLMLoss`: `logits.float()`, labels padded instead of logits shifted, then
  log_softmax + nll_loss). Traced (docs/tracer.md §3): kept from forward to backward the fp32 log_softmax
  4n; end of forward c·n + 4n (upcast) + 4n = 10n in bf16; start of backward the saved log_softmax,
  nll_loss's fp32 gradient and _log_softmax_backward_data's output = 12n.
  Under the HF Trainer with accelerate's native_amp (bf16/fp16 mixed, no DeepSpeed) the forward is wrapped in
  `convert_outputs_to_fp32` (accelerate accelerator.py `prepare_model`), which copies the returned 16-bit logits
  to fp32 after the loss: raw c·n + the saved log_softmax 4n + the copy 4n = 10n, the loss's own moment, and
  `Trainer.compute_loss` drops the outputs before backward, so nothing moves (the run tracer drives the real
  Trainer with bf16 on CPU, native_amp: golden/run/l1b-lora-mixed-gc-s1024-eval-loss, step within 1 %).
  Post-training's log-prob code reads that copy instead: post/fp32out.py.
- transformers 4.46-4.57 (`ForCausalLMLoss` upcasts, then `shift_logits = logits[..., :-1, :].contiguous()`):
  the shifted fp32 copy 4n' on top at the end of forward (b > 1; one sequence's slice needs no copy); the
  loss runs on n' rows.
- transformers <= 4.45 (the model's forward does `logits = logits.float()`, the loss shifts a copy): the
  16-bit logits die at the upcast; end of forward 4n + 4n' + 4n'; the model output holds the fp32 logits.
- torchtune 0.x (TransformerDecoder returns `self.output(h).float()`; recipes shift the labels and
  `del logits` before backward): end of forward max(c·n + 4n, 8n), backward 12n; its uncompiled
  CEWithChunkedOutputLoss saves every chunk's fp32 log_softmax (4n) while the 16-bit chunks live to the
  recipe's `del logits`.
- torchtitan (`cross_entropy(pred.float(), ...)`, then `del pred`): as transformers 5.
- LitGPT (Oct 2023 finetune scripts: `model(input_ids, lm_head_chunk_size=128)`, then
  `cross_entropy` on each 16-bit chunk, lit_gpt/utils.py chunked_cross_entropy): the 16-bit chunks c·n and
  their 16-bit log_softmax c·n' are kept; backward holds them plus one chunk's two gradients.
Chunked loss (`loss: chunked`: torchtune CEWithChunkedOutputLoss with 8 output chunks, compiled; LitGPT's
chunked_cross_entropy; Liger/Cut-CE keep even less): the 16-bit logits of every chunk are kept for the
backward, while the fp32 upcast, log-softmax and gradients exist for one chunk at a time; compiled
(`stack.compile: model+loss`, torchtune's `compile_loss` compiles `compute_cross_entropy` in place) each chunk's
kernel keeps only per-row fp32 amax and log-sum-exp and writes the 16-bit gradient, one chunk at a time
(traced on CPU inductor: tools/memtrace/compiled.py `chunked_ce_compiled`).
Compiled loss (`stack.compile: model+loss`): inductor fuses log_softmax + nll into one kernel that keeps its
input and a per-row fp32 logsumexp and recomputes the softmax in backward (modelled from the partitioner's
rule of saving the inputs of fused regions; not traced).
``kept_by_loop``: the logits a loop that holds the model output (custom-loop, LitGPT) keeps through
backward and the step, and until the next forward returns (memory/stack.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import ModelArch
from ..plan import Plan
from .blocks_git import image_tokens
from .blocks_seq2seq import stacks
from .stack import Stack

CHUNKS = 8
# causal LMs whose own loss is `cross_entropy(scores.view(-1, V), y.view(-1))` on the 16-bit logits, labels not shifted
# (XLM; modeling_cpmant.py CpmAntForCausalLM.forward: `CrossEntropyLoss()(logits.view(-1, V), labels.view(-1))`)
NO_UPCAST = ("xlm", "cpmant", "encoder-decoder", "vision-encoder-decoder", "blip", "pix2struct", "udop")
# encoder-decoders whose loss is transformers' ForCausalLMLoss (logits upcast, fp32 log-softmax), not their own
# CrossEntropyLoss: Florence2ForConditionalGeneration.forward's self.loss_function (traced:
# tools/memtrace/golden/vision_seq2seq/florence2-*)
UPCAST_SEQ2SEQ = ("florence2",)
# softcapped logits in fp32 (logits() below)
FP32_SOFTCAP = ("xlstm", "beam", "inkling2_text", "inkling2", "inkling2_loop_text", "inkling2_loop")
LITGPT_CHUNK = 128        # lm_head_chunk_size of LitGPT's finetune scripts


@dataclass(frozen=True)
class Logits:
    saved: int          # kept across forward -> backward
    forward_peak: int   # all logits-related bytes alive at the end of forward
    backward_peak: int  # all logits-related bytes alive at the start of backward
    kept_by_loop: int = 0   # the model output a loop keeps referenced (custom-loop, LitGPT)


def logits(plan: Plan, arch: ModelArch, compute_bytes: int, stack: Stack) -> Logits:
    if not arch.causal_lm:
        return Logits(0, 0, 0)
    s, b, V = plan.seq_len, plan.micro_batch_size, arch.vocab_size
    # ProphetNetForCausalLM: lm_head over the ngram predicting streams (memory/blocks_prophetnet.py)
    streams = arch.prophetnet["ngram"] if arch.prophetnet is not None else 1
    n = s * b * V * streams
    shifted = (s - 1) * b * V
    c = compute_bytes
    raw = c * n                                  # lm_head output in the compute dtype
    if image_tokens(arch):
        # GIT's output Linear runs on the image tokens too, and GitForCausalLM.forward's own `logits[:, n_img:-1]
        # .contiguous()` copies the text's before the loss (memory/blocks_git.py): both alive with the raw logits
        raw += c * b * V * image_tokens(arch) + c * shifted
    o = 4 if stack.fabric_mixed else c           # Fabric's convert_output: the model's outputs cast to fp32
    upcast = 0 if c == 4 else 4 * n              # logits.float(): a copy unless already fp32
    kept = o * n if stack.loop_keeps_output else 0
    if plan.loss == "chunked" and stack.trainer == "torchtune" and stack.compile == "none":
        # CEWithChunkedOutputLoss uncompiled: each of the 8 bf16 chunks is upcast and its fp32 log_softmax
        # saved; the bf16 chunks live until the recipe's `del logits` (traced: tt-l1b-full-chunked)
        return Logits(saved=4 * n, forward_peak=raw + 4 * n + 4 * n // CHUNKS,
                      backward_peak=4 * n + 8 * n // CHUNKS, kept_by_loop=0)
    if plan.loss == "chunked" and stack.compile == "model+loss":
        # each chunk's compiled upcast + cross-entropy keeps its 16-bit input and two fp32 values a row (amax and
        # log-sum-exp) and writes the 16-bit gradient in one kernel: no chunk-sized fp32 tensor (traced:
        # tools/memtrace/compiled.py chunked_ce_compiled, inductor's generated code)
        rows = 8 * s * b
        return Logits(saved=raw + rows, forward_peak=raw + rows, backward_peak=raw + rows + raw // CHUNKS,
                      kept_by_loop=kept)
    if plan.loss == "chunked":
        return Logits(saved=raw, forward_peak=raw + 8 * n // CHUNKS, backward_peak=raw + 12 * n // CHUNKS,
                      kept_by_loop=kept)
    softcap = c * n if arch.final_softcap else 0   # Gemma 2: the 16-bit tanh output (traced: 14·s·b·V)
    if arch.looped is not None and plan.method == "full":
        # DoryLMHead.forward: `logits.float() * (logit_scale.float() * factor)` keeps the fp32 logits for the trained
        # logit_scale's gradient; a frozen scale keeps none (modeling_dory.py; traced: tools/memtrace/golden/oneoff/
        # dory-full-* and dory-lora-*)
        softcap = 4 * n
    if arch.final_softcap and arch.model_type in FP32_SOFTCAP:
        # xLSTMForCausalLM.forward caps `self.lm_head(...).float()`, BeamForCausalLM.forward `logits.float() /
        # final_logit_softcapping`: the tanh output they keep is fp32 (traced: tools/memtrace/moe_trace.py beam);
        # so does Inkling2ForCausalLM's `logit_softcap(lm_head(...).float())` (tools/memtrace/inkling_trace.py)
        softcap = 4 * n
    if stack.compile == "model+loss":
        lse = 4 * s * b
        return Logits(saved=raw + lse, forward_peak=raw + lse, backward_peak=raw + lse + raw, kept_by_loop=kept)
    path = stack.loss_path
    if path == "litgpt":
        # each chunk's log_softmax saved in the output dtype; under Fabric bf16-mixed the 16-bit chunks and
        # their fp32 casts coexist while convert_output runs. The loop's previous `logits` (kept_by_loop, counted
        # in every phase) lives until the new forward returns, so it meets the new chunks (and their casts) but
        # not the loss's log-softmaxes: the forward peak is the larger moment, less what kept_by_loop counts
        # (traced: lit-l1b-lora, lit-l1b-lora-mixed)
        chunk = LITGPT_CHUNK * b * V
        returning = kept + raw + (o * n if o != c else 0)
        fwd = max(returning, o * n + o * shifted) - kept
        return Logits(saved=o * shifted, forward_peak=fwd, backward_peak=o * shifted + 2 * o * chunk,
                      kept_by_loop=kept)
    if ((stacks(arch) is not None or arch.model_type in NO_UPCAST) and arch.model_type not in UPCAST_SEQ2SEQ
            and not plan.precision.endswith("-mixed")
            and c != 4 and path != "torchtune"):
        # encoder-decoders (T5, M2M100 ... *ForConditionalGeneration.forward: `CrossEntropyLoss()(lm_logits.view(-1,
        # V), labels.view(-1))`, no upcast, labels not shifted): without autocast the log-softmax is kept in the
        # logits' 16-bit dtype, and backward holds it, nll_loss's gradient and log_softmax_backward's output, 3·c·n
        # (traced: tools/memtrace/golden/seq2seq/*-full-pure-*). Under autocast cross_entropy runs in fp32, the
        # transformers 5 path below. XLM's XLMPredLayer.forward does the same (traced: tools/memtrace/golden/bert/xlm-*)
        return Logits(saved=c * n, forward_peak=raw + c * n, backward_peak=3 * c * n, kept_by_loop=kept)
    # `logits[..., :-1, :].contiguous()` copies only when b > 1: with one sequence the slice is already
    # contiguous (traced: the 4.45 / 4.48 rows of tools/memtrace/golden/stacks)
    shift_copy = 4 * shifted if b > 1 else 0
    if path == "hf445":
        lsm = 4 * shifted
        fwd = max(raw + 4 * n, 4 * n + shift_copy + lsm)
        return Logits(saved=lsm + softcap, forward_peak=fwd + softcap, backward_peak=lsm + softcap + 8 * shifted,
                      kept_by_loop=4 * n if stack.loop_keeps_output else 0)
    if path == "hf446":
        lsm = 4 * shifted
        return Logits(saved=lsm + softcap, forward_peak=raw + upcast + shift_copy + lsm + softcap,
                      backward_peak=lsm + softcap + 8 * shifted, kept_by_loop=kept)
    if path == "torchtune":
        return Logits(saved=4 * n, forward_peak=max(raw + upcast, 8 * n), backward_peak=12 * n, kept_by_loop=0)
    saved = 4 * n + softcap
    if arch.prophetnet is not None:
        # ProphetNetForCausalLM._compute_loss: `logits.transpose(0, 1).contiguous()` (a c·n copy), then
        # log_softmax(dtype=float32) (traced: tools/memtrace/golden/prophetnet, the step's peak at the log-softmax)
        raw += c * n
    return Logits(saved=saved, forward_peak=raw + upcast + saved, backward_peak=saved + 8 * n, kept_by_loop=kept)


def chunked_head_grads(plan: Plan, arch: ModelArch, compute_bytes: int, grad_bytes: int, stack: Stack) -> int:
    """Bytes beyond `backward_peak` while a trainable output projection back-propagates its chunks under the
    compiled chunk loss (single GPU, DDP). Autograd runs every chunk's loss backward first (those nodes are the
    newest), leaving the 16-bit logit gradients where the saved chunks were; then each chunk's projection: the
    second chunk's weight gradient is computed while the first's waits in the accumulation buffer, so two
    vocab x hidden gradients beside the gradients of the chunks not yet consumed (traced on FakeTensors with
    the compiled kernel's buffers: tools/memtrace/compiled.py chunked_head_backward)."""
    if not (plan.loss == "chunked" and stack.compile == "model+loss" and plan.method == "full" and arch.causal_lm
            and plan.framework in ("single", "ddp")):
        return 0
    chunk = compute_bytes * plan.seq_len * plan.micro_batch_size * arch.vocab_size // CHUNKS
    return max(0, 2 * grad_bytes * arch.vocab_size * arch.hidden_size - 2 * chunk)
