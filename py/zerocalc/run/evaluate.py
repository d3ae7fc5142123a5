"""Evaluation and generation during training: the ``eval`` and ``generate`` phases.

The eval forward runs under `torch.no_grad()` on the resident state plus what a forward gathers (ZeRO-3's
parameters, FSDP's root unit: run/view.py), at the eval batch b_e and length s_e. Its peak is the larger of
- the loss moment: the loss path's logits at the end of forward (memory/logits.py `forward_peak`, the same
  rule as training's: transformers 5 `ForCausalLMLoss` keeps the 16-bit logits, their fp32 upcast and the
  fp32 log_softmax, 10·b_e·s_e·V bytes) plus the final hidden states the model still references;
- inside a layer: the no-grad MLP's three intermediate-wide tensors (act(gate), up, their product) plus the
  residual stream and its norm, e·t·(3·I + 2·h).
LitGPT's `validate()` (litgpt @01fe959 litgpt/finetune/lora.py, under `@torch.no_grad()`) calls `model(input_ids)`
without `lm_head_chunk_size` and `chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:], chunk_size=0)`: the logits, the shifted reshape copy (none at batch 1) and a 16-bit log_softmax,
3 x the logits (in fp32 under Fabric's bf16-mixed, whose convert_output upcasts outputs); the training loop's
`logits` are still bound meanwhile (the view's resident `logits_kept_by_loop`; traced: golden/run lit-l1b-*-val).
torchtune's chunked loss under no_grad keeps one chunk's fp32 copy and log_softmax at a time (`eval_logits_bytes`).
HF `compute_metrics` without `preprocess_logits_for_metrics` (transformers 5.24 trainer.py `evaluation_loop`:
`pad_across_processes`, `gather_function`,
then `EvalLoopContainer.add` -> `nested_concat` -> `torch.cat`): every eval step's logits of all ranks are
kept on each GPU; the concat of step k holds the old k-1 steps, the new k-step tensor and this step's logits:
2·k·c with c = N·b_e·s_e·V·2 (the int64 labels kept beside them, 8·N·b_e·s_e a step, are not counted).
`eval_accumulation_steps` a moves them to the host every a steps (`to_cpu_and_numpy`, k <= a) and then calls
`torch.cuda.empty_cache()`. `argmax` keeps int64 token ids instead.
HF's eval loop does not call `torch.cuda.empty_cache()` otherwise (`torch_empty_cache_steps` defaults to None):
the eval's segments stay reserved for the rest of the run.
Generation (`predict_with_generate`, TRL's completion callbacks, LitGPT's example after each validation with
`model.set_kv_cache(batch_size=1)` at `max_seq_length`): a KV cache of
2·L·n_kv·d_h·b_g·(prompt + new) 16-bit bytes; under ZeRO-3 TRL gathers the whole model for it
(trl/models/utils.py `_unwrap_model_for_generation`: `GatheredParameters(model.parameters())`).
"""
from __future__ import annotations

from dataclasses import replace

from ..memory.logits import CHUNKS, logits
from ..units import ceil_div
from .phase import Phase, phase
from .view import RunView


def _forward_resident(v: RunView) -> dict:
    return v.by_component(v.state + v.forward_extra)


def eval_logits_bytes(v: RunView, b: int, s: int) -> int:
    """Logits-related bytes alive at the eval loss (no grad), batch b, length s."""
    si, arch = v.si, v.si.arch
    if not arch.causal_lm:
        return 0
    e = 2 if si.dt.autocast else si.dt.compute
    if v.run.eval.unchunked_head:
        o = 4 if si.stack.fabric_mixed else e
        return o * b * s * arch.vocab_size + litgpt_eval_copies(b) * o * b * (s - 1) * arch.vocab_size
    if v.plan.loss == "chunked" and si.stack.trainer == "torchtune" and si.stack.compile == "none":
        # torchtune's `validate` (@bd2a0fc recipes/full_finetune_distributed.py: `_loss_step` under torch.no_grad())
        # through CEWithChunkedOutputLoss (0.6.1 modules/loss/ce_chunked_output_loss.py: `F.cross_entropy(
        # logits_chunk.float(), ...)` per chunk): nothing is saved, so one chunk's fp32 upcast and log_softmax live
        # at a time beside the 16-bit chunks (traced: tools/memtrace/golden/run tt-l1b-*-s1024-b2-val, 3·b·s·V)
        n = b * s * arch.vocab_size
        return e * n + 8 * n // CHUNKS
    lg = logits(replace(v.plan, micro_batch_size=b, seq_len=s), arch, e, si.stack)
    return lg.forward_peak


def eval_phase(v: RunView) -> Phase | None:
    ev = v.run.eval
    if ev is None:
        return None
    arch, si, n = v.si.arch, v.si, v.plan.world_size
    b, s = ev.batch, ev.seq
    e = 2 if si.dt.autocast else si.dt.compute
    t = b * s
    hidden = e * t * arch.hidden_size
    loss_moment = eval_logits_bytes(v, b, s) + hidden
    layer_moment = e * t * (3 * arch.intermediate_size + 2 * arch.hidden_size)
    kept, note = 0, f"eval forward at batch {b}"
    empties = False
    pinned = 0                   # kept logits: allocated across batches, their blocks serve no later request
    one_batch = loss_moment
    if ev.logits != "loss-only" and arch.causal_lm:
        steps = ceil_div(ev.samples, b * n) if ev.samples else 1
        k = min(steps, ev.accumulation_steps) if ev.accumulation_steps else steps
        c = n * t * arch.vocab_size * 2
        if ev.logits == "accumulate":
            pinned = k * c
            loss_moment += (k - 1) * c
            kept = 2 * k * c
            note += f", {k} steps of logits kept on the GPU"
        else:
            ids = 8 * n * t
            kept = c + k * ids
            loss_moment += (k - 1) * ids
        empties = ev.accumulation_steps is not None
    host = eval_host(v, b, s)
    peak = max(loss_moment, layer_moment, kept)
    comp = "activations" if layer_moment >= max(loss_moment, kept) else "logits"
    if not arch.causal_lm:
        largest = e * t * arch.intermediate_size
    elif ev.unchunked_head:
        largest = (4 if si.stack.fabric_mixed else e) * t * arch.vocab_size       # LitGPT: no fp32 upcast
    else:
        largest = 4 * t * arch.vocab_size                                          # the fp32 logits
    # segments: the loss moment's (as loss-only) plus the concatenated logits', which stay allocated while the next
    # batch's loss runs, so the blocks the loss frees never serve them (traced: l1b-full-pure-s512-eval-accumulate,
    # 2 batches: reserved = the step's + 10·b·s·V + the 2-batch concat 2·c)
    segments = max(peak, one_batch + pinned)
    return phase("eval", _forward_resident(v), {comp: peak}, transient=segments, empties_cache=empties, note=note,
                 largest=largest, host=host, fresh=litgpt_fresh_segments(v, b, s, segments))


SEGMENT_ROUND = 2 << 20       # CUDACachingAllocator kRoundLarge: a large segment is its request rounded up to 2 MiB


def litgpt_eval_copies(b: int) -> int:
    """Logits-sized tensors LitGPT's `validate` makes beside the logits: `chunked_cross_entropy(logits[..., :-1, :],
    ..., chunk_size=0)` reshapes the slice to (b·(s-1), V), a copy unless b is 1 (a (1, s-1, V) slice of a
    contiguous (1, s, V) tensor is contiguous, so the reshape is a view), then the 16-bit log_softmax (traced:
    golden/run lit-l1b-lora-s2048-b1-val holds the logits and the log_softmax only)."""
    return 2 if b > 1 else 1


def litgpt_fresh_segments(v: RunView, b: int, s: int, transient: int) -> int | None:
    """The new segments LitGPT's later validations open beside the step's (None: not LitGPT's LoRA finetune).
    `fit()` (litgpt 0.5.13 finetune/lora.py) runs a sanity `validate(..., max_iters=2)` before the first step, so
    the logits-sized tensors of `validate` (E = o·b·(s-1)·V each; three, two at b 1) get segments of their own; the steps
    (lm_head chunked by 128 positions, no tensor as large as E) serve their activations from them and free them
    again, but the chunks of the logits the loop keeps bound (`logits`, K bytes) land in their free remainders:
    at the next validation the segments holding a kept chunk have no whole E-sized block left, and that many
    E-sized requests take fresh segments. The kept chunks straddle ceil(K / E) + 1 of them (CUDACachingAllocator
    best fit into the remainders the step's freed activations leave): traced by the allocator replay of
    tools/memtrace/recipe_run.py at b2 s1024 (golden/run lit-l1b-lora-s1024-b2-val), b1 s2048 and b4 s512
    (chunks of 62.6, 31.3 and 125.2 MiB): in each, two of the 502 MiB segments hold the kept chunks and the
    validation reserves 2 x 502 MiB more than the step (golden/run lit-l1b-lora-s*-val). LitGPT's full finetune (unchunked head) frees E-sized
    logits and gradients every step, so the cached blocks serve the validation (the `largest` rule)."""
    si, arch = v.si, v.si.arch
    if si.stack.trainer != "litgpt" or v.plan.method == "full" or not arch.causal_lm or not v.run.eval.unchunked_head:
        return None
    o = 4 if si.stack.fabric_mixed else (2 if si.dt.autocast else si.dt.compute)
    e_seg = ceil_div(o * b * (s - 1) * arch.vocab_size, SEGMENT_ROUND) * SEGMENT_ROUND
    kept = sum(t.nbytes for t in v.state if t.name == "logits_kept_by_loop")
    polluted = min(1 + litgpt_eval_copies(b), ceil_div(kept, e_seg) + 1) if kept else 0
    return min(transient, polluted * e_seg)


def eval_host(v: RunView, b: int, s: int) -> int:
    """Host bytes of the kept predictions (transformers 5.24 trainer_pt_utils.py `EvalLoopContainer.to_cpu_and_numpy`
    -> `nested_numpify`: `t.cpu()`, bf16 -> `t.to(torch.float32)`, `.numpy()`; then `nested_concat` of the numpy
    arrays, `np.concatenate`): per eval step of N·b·s tokens, the logits in fp32 (4·V B a token) and the int64
    labels (8 B), or with `argmax` the int64 ids and labels. At the peak: all K steps' arrays and the 16-bit host
    copy the conversion starts from (one block of K steps: `eval_accumulation_steps` unset or >= K); with
    `eval_accumulation_steps` a < K, the last concat, which holds the old arrays, the new block and their
    concatenation: twice the arrays. The per-step losses (4 B a sample) are not counted. Loss-only: nothing kept.
    Traced (tools/memtrace/golden/run l1b-full-pure-s512-eval-accumulate: the fp32 arrays and labels; on a CPU rank
    `.cpu()` copies nothing, so the trace holds no 16-bit copy)."""
    ev, arch, n = v.run.eval, v.si.arch, v.plan.world_size
    if ev.logits == "loss-only" or not arch.causal_lm:
        return 0
    tokens = n * b * s
    steps = ceil_div(ev.samples, b * n) if ev.samples else 1
    concat = ev.accumulation_steps is not None and steps > ev.accumulation_steps
    if ev.logits == "argmax":
        kept = steps * tokens * (8 + 8)
        return 2 * kept if concat else kept
    kept = steps * tokens * (4 * arch.vocab_size + 8)
    if concat:
        return 2 * kept
    e = 2 if v.si.dt.autocast else v.si.dt.compute
    return kept + (steps * tokens * arch.vocab_size * e if e != 4 else 0)


def generate_phase(v: RunView) -> Phase | None:
    g = v.run.generate
    if g is None or not v.si.arch.causal_lm:
        return None
    plan, si, arch = v.plan, v.si, v.si.arch
    e = 2 if si.dt.autocast else si.dt.compute
    length = g.prompt + g.new_tokens if si.stack.trainer != "litgpt" else plan.seq_len
    kv = 2 * arch.num_layers * arch.kv_dim * g.batch * length * e
    extra = {"activations": kv + 4 * 2 * g.batch * arch.vocab_size}
    note = f"generation: KV cache for batch {g.batch} x {length} tokens"
    if plan.framework == "deepspeed" and plan.zero_stage == 3:
        whole = 2 * (si.trainable.numel + (si.frozen_numel if plan.method != "full" else 0))
        extra["weights"] = whole
        note += ", whole model gathered (ZeRO-3)"
    return phase("generate", _forward_resident(v), extra, transient=kv, note=note)
