"""The update step's log-probability buffers, per trainer: what replaces the SFT cross-entropy's logits terms
(memory/logits.py) when the loss is a preference or policy-gradient loss over per-token log-probabilities.

R rows, T logit positions, V the vocabulary; n = R·T·V, n' = R·(T-1)·V (the shifted slice); c = the logits'
dtype (2 under bf16 autocast or a 16-bit module, 4 in fp32).
- TRL (and ms-swift, which subclasses it): `selective_log_softmax` (trl/trainer/utils.py). 16-bit logits: a
  loop over rows, `F.log_softmax(row_logits)` then `gather`; with autograd each row's log_softmax output is
  saved for backward (log_softmax's backward reads its output), so the loop saves c·n' in all (the per-row
  loop lowers the peak only under no_grad: modelscope/twinkle PR #283). End of forward: the logits c·n plus
  the saved rows c·n'. Start of backward: the saved rows, their gradients stacked by `unbind`'s backward
  (c·n') and the slice's zero-filled gradient of the logits (c·n): c·n + 2·c·n' at most, taken as the moment
  the stacked gradient is copied into the slice (the saved rows are freed one by one before it).
  fp32 logits: `gather` plus a per-row `logsumexp`; the graph keeps the logits (4n); the backward holds the
  per-row logsumexp gradients and their stack by `unbind`'s backward, then that stack beside gather's
  zero-filled gradient, two fp32 tensors of the shifted shape beside the logits (4n + 8n'). aten's
  `gather_backward` (TensorAdvancedIndexing.cpp) fills the zeros with `scatter_add_` in place, unless
  `areAnyTensorSubclassLike` is true, which it is for every tensor while a dispatch mode is active: under the
  tracer's FakeTensorMode it takes the out-of-place `scatter_add`, a third fp32 tensor (posttrace's TRL 1.14.2
  CPU runs listed `new_zeros`, `scatter_add` and `stack` of (rows, s-1, V) fp32: 4n + 12n'). A real run has no
  dispatch mode: checked on CPU eager with torch 2.13's profiler, TRL 0.17's branch on (4, 64, 8192) fp32
  logits peaks 3 x 4·R·T·V above its input in eager and 4x under a pass-through TorchDispatchMode.
- OpenRLHF from v0.7.0: `output["logits"].to(torch.float32)` (openrlhf/models/actor.py) then `log_probs_from_logits`
  (flash-attn's fused cross-entropy, which saves its fp32 input): forward c·n + 4n, saved 4n, backward 4n + 4n
  (the fp32 gradient) + c·n (its cast back). Older releases (`trainer_version`, post/defaults.py
  `openrlhf_logits`), read at OpenRLHF's tags:
  - up to v0.5.5 (`16bit`; 6a13d95 = 0.3.7.post3, v0.4.0, v0.5.5): no cast; DPO's `_get_batch_logps`
    (trainer/dpo_trainer.py) and `log_probs_from_logits` (models/utils.py) run `F.log_softmax` over the shifted
    slice `logits[:, :-1, :]` in the logits' dtype, then `gather`. The log_softmax output (c·n') is saved; the
    logits die when `concatenated_forward` returns (nothing saves them: the slice is a view, lm_head saves its
    input). Forward c·n + c·n'; backward: gather's zero-filled gradient, the saved output and log_softmax's
    backward output (3c·n'), then the slice's zero-filled c·n beside the c·n' gradient. (Up to v0.4.4
    `Actor.forward` also ran `log_probs_from_logits` and dropped the result when `return_output`: the same
    c·n + c·n', one after the other.)
  - v0.5.6 - v0.5.x (`fp32-log-softmax`; 86827444 "Fix logits dtype"): `output["logits"] = output["logits"]
    .to(torch.float32)` replaces the 16-bit logits (c·n + 4n at the cast), then the same log_softmax in fp32:
    saved 4n', forward max(c·n + 4n, 4n + 4n'), backward 12n' (the three fp32 tensors above).
  - v0.6.x (`fp32-logsumexp`): the cast, then `gather` and a per-row `logsumexp` (models/utils.py at v0.6.0,
    TRL's fp32 branch below): saved 4n, forward c·n + 4n, backward 4n + 8n'.
  The policy update of PPO / GRPO (online) up to v0.5.x keeps the model output besides: `action_log_probs,
  output = self.actor(..., return_output=True)` in PPOTrainer.training_step_actor (trainer/ppo_trainer.py at
  v0.3.8, v0.4.0, v0.5.0, v0.5.6) holds `output` (its logits: c·n, or the fp32 4n from v0.5.6) through backward,
  where DPO's `concatenated_forward` drops it: saved and backward gain that tensor (v0.6's logsumexp saves the
  logits anyway).
- LLaMA-Factory: `.logits.to(torch.float32)` (train/dpo/trainer.py `concatenated_forward`) then
  `torch.gather(logits.log_softmax(-1), ...)` (train/trainer_utils.py `get_batch_logps`): the fp32 copy and the
  fp32 log_softmax (8n) at the end of forward; backward: the saved log_softmax, gather's zero-filled fp32
  gradient and log_softmax's backward output (12n), then the 16-bit cast.
- verl: `logprobs_from_logits` on flash-attn's fused cross-entropy (verl/utils/torch_functional.py): the
  logits kept (c·n), their gradient (c·n).
  With ``packing.remove_padding`` (`use_remove_padding`, dp_actor.py `_forward_micro_batch` at v0.4.1 ...
  v0.7.0) the micro-batch is one packed row of N real tokens and `logits_rmpad = output.logits.squeeze(0)`
  (N, V) covers every one of them, prompt included (not only the response slice); `div_(temperature)` in place,
  then `logprobs_from_logits(logits_rmpad, input_ids_rmpad_rolled, inplace_backward=not calculate_entropy)`:
  the logits are contiguous, so flash-attn's `cross_entropy_loss` saves them as they are (`ctx.save_for_backward
  (logits, lse, labels)`) and its backward writes the gradient into them (`dlogits = logits if
  ctx.inplace_backward else torch.empty_like(logits)`, flash_attn/ops/triton/cross_entropy.py): c·N·V saved, at
  the end of forward and at the backward peak (`verl_packed_buffers`); with the update's entropy (verl < 0.4,
  `calculate_entropy`) the gradient is a tensor of its own, c·N·V more. The padded path makes the response
  slice (a view of the whole logits) and keeps the numbers above. The per-token fp32 losses and lse (8N bytes)
  are left out.
- Fused (``loss: chunked``): Liger's fused linear preference and GRPO losses (TRL `use_liger_kernel`:
  `LigerFusedLinearDPOLoss`, `LigerFusedLinearGRPOLoss`) run lm_head and the log-softmax chunk by chunk and
  never hold the whole logits: one chunk's 16-bit logits and fp32 log-softmax (and, in backward, its gradient)
  at a time, taken as 1/8 of the rows (not traced).
- TRL 1.11-1.14 on a CUDA GPU: `selective_log_softmax` / `selective_log_softmax_and_entropy` take TRL's Triton
  kernel (trl/kernels/logprob_entropy.py `_LogProbEntropyFunction`, read in the 1.14.2 wheel; absent at 1.10.0.dev0,
  f2cd577: the release that added it was not read, 1.11-1.13 are taken as 1.14) whenever the logits are on CUDA
  (`_supports_trl_loss_kernel`): it saves the logits (c·n) and four fp32 per-token figures (16 B per position),
  and its backward writes `grad_logits = torch.empty_like(logits)` (c·n'), which the slice's backward copies into
  a zero-filled c·n once the saved logits are released: c·n + c·n' at most. (On CPU it falls back to the torch
  code: a fp32 copy and three fp32 backward buffers, which the CPU traces show.)
- TRL >= 1.15 (`trainer_version`; the default, 1.16): every trainer calls `model(..., fused_lm_head=True)`
  (trl/trainer/utils.py `add_fused_lm_head`, trl/kernels/chunked_logprob.py `ChunkedLogProbFunction`): the
  head is projected in tiles of `TOKEN_CHUNK_SIZE` 4096 tokens x `_CHUNKED_LOGPROB_CHUNK_SIZE` 32768 vocabulary
  into one reused 16-bit buffer, and only the N labelled positions are scored on a GPU (`compact`:
  `hidden_states[mask]`, a c·N·h copy that backward reads). Saved: that copy and the fp32 log-normaliser (4N).
  Backward: `grad_hidden` fp32 (4·N·h), the tile buffer, and `grad_weight` fp32 (4·V·h) when the head trains.
  No (rows, s, V) tensor exists (read from the TRL 1.16.0 wheel).
- TRL's torch fallbacks (``kernels: torch``: no Triton, as on CPU, where posttrace's traces run them): from 1.15
  `_forward_tile` / `_backward_tile` score every position (N = rows x (s-1), `compact` is off) and hold fp32
  copies of the tile T = min(N, 4096) x min(V, 32768): forward z, z - max and its exp (12T bytes beside the
  16-bit buffer's 2T), backward y, z, log_p, p, grad, the target mask (1 B) and its fp32 cast and the
  difference (29T beside 2T), counted in trl/kernels/chunked_logprob.py (1.16.0). In 1.11-1.14 DPO's
  `selective_log_softmax_and_entropy` fallback upcasts the logits to fp32 and takes the fp32 branch above (the
  reference's scoring too); GRPO's `selective_log_softmax` keeps the 16-bit per-row loop.
- The chosen rows' NLL of TRL's ORPO, CPO and SimPO (and ms-swift's, which subclass them): ORPOTrainer always
  and CPOTrainer with `cpo_alpha` != 0 (CPOConfig default 1.0 at v0.11.4 and at f2cd577, trl/experimental/cpo/
  cpo_config.py; ms-swift's `cpo_alpha` 1.0, swift/arguments/rlhf_args.py, its SimPO is TRL's CPOTrainer with
  loss_type simpo) run `cross_entropy_loss(all_logits[:len_chosen], ...)` on the same logits:
  `logits[..., :-1, :].contiguous()` then `nn.CrossEntropyLoss`, whose log_softmax output of the B chosen rows
  (c·B·(T-1)·V, in the logits' dtype) is saved for backward beside what the preference loss keeps (`nll`). The
  `.contiguous()` copy (B >= 2 rows) dies as the function returns, before get_batch_logps' own, larger moment.
  Checked on CPU eager (torch 2.13 profiler, fp32 logits, B = 1 pair): TRL 0.11.4's CPO loss code with
  cpo_alpha 1 holds 0.5 c·R·T·V more than with 0 saved, at the end of forward and at the backward peak.
- ms-swift's DPO up to 3.5.x (post/defaults.py `rpo_cross_entropy`, `trainer_version`): `get_nll_loss` makes the
  chosen rows' shifted logits contiguous and runs `nn.CrossEntropyLoss` on them (v3.4.1 under `rpo_alpha`,
  v3.5.0 always): the same saved log_softmax of the B chosen rows (`chosen_nll`), and for the reference too (its
  `concatenated_forward` is the same function, not guarded); from v3.6.0 none.
- DPO's ``rpo_alpha`` in TRL up to 0.28 (post/defaults.py `rpo_cross_entropy`): `concatenated_forward` runs,
  after `selective_log_softmax`, `F.cross_entropy(torch.flatten(logits[:num_examples, :-1], end_dim=1), ...)`
  (trl/trainer/dpo_trainer.py v0.28.0 lines 1706-1714, the same from v0.20.0; v0.12.0-v0.19 slice
  `logits[:num_examples]`, B·V more, ignored): the chosen NLL above, whose log_softmax output c·B·(T-1)·V is saved.
  The slice is not contiguous, so `flatten` copies it (c·B·(T-1)·V) for the length of the call: the policy's
  moment c·n + c·n' + 2e (e the output) stays under its backward peak + e, so only the saved output is counted.
  The reference's `concatenated_forward` (under no_grad, `is_ref_model=True`, not guarded) runs it too: the
  copy and the output beside its logits, c·n + 2e, where the per-row loop's one row has died.
- TRL's GRPO from v0.16.0 and its GRPO-style RLOO from v0.22.0, up to v0.29.x (`trainer_version`; post/defaults.py
  `temperature_copy`): `_get_per_token_logps` divides the shifted completion logits by the sampling temperature
  out of place, `logits = logits / self.temperature` (grpo_trainer.py v0.16.0 line 598, v0.19.1 line 872, still
  at v0.29.0; rloo_trainer.py v0.22.0 line 758), before `selective_log_softmax`: a c·n' tensor made while the
  (fp32 copy of the) logits c·n are alive (c·n + c·n'), with autograd or under no_grad (the reference and old
  log-probabilities); then the logits die (a division by a number saves nothing), and the per-row loop reads the
  quotient, so the backward is the one above with the quotient saved instead of the logits (c·n' for c·n).
  v1.0.0 divides in place (`logits.div_(self.temperature)`, #5254, c49f3753e), 1.11+ inside the kernel; v0.15
  and before do not divide. Traced: golden/post/grpo-l1b-*-trl017.json (`div` (4, 384, V) fp32 beside the
  `_to_copy` (4, 385, V) at the score peak).
- TRL's DPO 0.19.0-0.28.x (post/defaults.py `returns_hidden_states`): `concatenated_forward` asks the model for
  `output_hidden_states=True` (dpo_trainer.py v0.19.0 line 1482), so the forward returns the embedding output and
  every layer's output, L + 1 tensors of (R, T, h) in the residual stream's dtype r, and accelerate's
  `convert_outputs_to_fp32` (post/fp32out.py) copies each 16-bit one to fp32. In the reference's no-grad pass
  they would have died layer by layer; now all are alive at its logits moment: (L + 1)·R·T·h·(r + 4 if the
  copy is made, else r). (The policy's are its saved layer inputs already; their fp32 copies die with
  `outputs` when `concatenated_forward` returns, before the reference runs.) Traced: golden/post/
  dpo-l1b-lora-s512-trl019.json's score window, 17 x (2, 512, 2048) bf16 and fp32 more than at 0.18.
A reward model (scalar head) and a critic have no vocabulary-wide tensor: their logits terms are zero. Except
LLaMA-Factory's reward model (post/models.py `value_head_arch`): TRL's `AutoModelForCausalLMWithValueHead.forward`
(trl/models/modeling_value_head.py, the same at v0.9.6, v0.18.0 and v0.24.0) runs the whole causal LM with
`output_hidden_states=True`, takes `base_model_output.logits` and `if lm_logits.dtype != torch.float32:
lm_logits = lm_logits.float()` before returning `(lm_logits, loss, value)`; PairwiseTrainer.compute_loss keeps
only the values (`_, _, values = model(...)`, train/rm/trainer.py). So the 16-bit logits and their fp32 copy
meet as the forward returns (c·n + 4n; 4n when the logits are fp32 already), and nothing of them is saved or
reaches backward (`value_head_logits`). The value head's `nn.Dropout(summary_dropout_prob)` (0.1 when the
config has none) keeps its mask and output beside the final hidden state (post/step.py).
"""
from __future__ import annotations

from ..memory.logits import Logits


FUSED_CHUNKS = 8
CHOSEN_NLL = ("orpo", "cpo", "simpo")   # TRL ORPOTrainer always, CPOTrainer's cpo_alpha 1.0 by default
TOKEN_CHUNK = 4096          # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE
VOCAB_CHUNK = 32768         # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE
STATS = 7                   # fp32 per-token running statistics of the forward (running_max, sum_exp, ...)


def kernel_buffers(rows: int, positions: int, vocab: int, c: int) -> Logits:
    """TRL 1.11-1.14's Triton log-prob kernel over the materialised logits (see the module docstring)."""
    n = rows * positions * vocab
    shifted = rows * max(positions - 1, 1) * vocab
    stats = 16 * rows * positions
    return Logits(saved=c * n + stats, forward_peak=c * n + stats, backward_peak=c * n + c * shifted)


def fused_head_buffers(labelled: int, vocab: int, hidden: int, c: int, head_trains: bool) -> Logits:
    """TRL >= 1.15's chunked log-prob head over ``labelled`` positions (see the module docstring)."""
    tile = c * min(labelled, TOKEN_CHUNK) * min(vocab, VOCAB_CHUNK)
    saved = c * labelled * hidden + 4 * labelled
    return Logits(saved=saved, forward_peak=saved + tile + 4 * STATS * labelled,
                  backward_peak=saved + 4 * labelled * hidden + tile + (4 * vocab * hidden if head_trains else 0))


def tile_bytes(positions: int, vocab: int) -> int:
    """Elements of one tile of TRL's chunked head: min(N, 4096) x min(V, 32768)."""
    return min(positions, TOKEN_CHUNK) * min(vocab, VOCAB_CHUNK)


def fused_head_torch(positions: int, vocab: int, hidden: int, c: int, head_trains: bool) -> Logits:
    """TRL >= 1.15's chunked head on its torch fallback (see the module docstring): fp32 tile temporaries."""
    t = tile_bytes(positions, vocab)
    saved = c * positions * hidden + 4 * positions
    return Logits(saved=saved, forward_peak=saved + c * t + 12 * t + 4 * STATS * positions,
                  backward_peak=saved + 4 * positions * hidden + c * t + 29 * t
                  + (4 * vocab * hidden if head_trains else 0))


def upcast_buffers(rows: int, positions: int, vocab: int, c: int) -> Logits:
    """TRL 1.11-1.14's DPO fallback: the 16-bit logits copied to fp32, then the fp32 branch. Its backward stays
    at the traced 4n + 12n': the 1.14 fallback's code was not read here, so whether it takes the same
    `gather_backward` (whose third tensor is the tracer's dispatch mode's, see the module docstring) is open."""
    n = rows * positions * vocab
    shifted = rows * max(positions - 1, 1) * vocab
    cast = 0 if c == 4 else c * n
    return Logits(saved=4 * n, forward_peak=cast + 4 * n, backward_peak=4 * n + 12 * shifted)


def fused_head_no_grad(labelled: int, vocab: int, hidden: int, c: int) -> int:
    """The same head under no_grad (the reference, the old log-probabilities): the copy, the tile, the stats."""
    return c * labelled * hidden + c * min(labelled, TOKEN_CHUNK) * min(vocab, VOCAB_CHUNK) + 4 * STATS * labelled


def policy_logprob_buffers(trainer: str, rows: int, positions: int, vocab: int, c: int,
                           fused: bool = False, path: str = "", keeps_output: bool = False) -> Logits:
    """The log-probability buffers of the policy's update forward and backward (see the module docstring)."""
    n = rows * positions * vocab
    shifted = rows * max(positions - 1, 1) * vocab
    if fused:
        chunk = (c + 4) * n // FUSED_CHUNKS
        return Logits(saved=0, forward_peak=chunk, backward_peak=chunk + c * n // FUSED_CHUNKS)
    if trainer in ("trl", "ms-swift"):
        if c == 4:       # eager gather_backward: scatter_add_ in place (see the module docstring)
            return Logits(saved=4 * n, forward_peak=4 * n, backward_peak=4 * n + 8 * shifted)
        return Logits(saved=c * shifted, forward_peak=c * n + c * shifted, backward_peak=c * n + 2 * c * shifted)
    if trainer == "openrlhf":
        cast = 0 if c == 4 else c * n
        if path == "16bit":
            kept = c * n if keeps_output else 0          # PPO's training_step_actor holds `output`
            return Logits(saved=c * shifted + kept, forward_peak=c * n + c * shifted,
                          backward_peak=max(3 * c * shifted, c * n + c * shifted) + kept)
        if path == "fp32-log-softmax":
            kept = 4 * n if keeps_output else 0
            return Logits(saved=4 * shifted + kept, forward_peak=max(cast + 4 * n, 4 * n + 4 * shifted),
                          backward_peak=max(12 * shifted, 4 * n + cast) + kept)
        if path == "fp32-logsumexp":
            return Logits(saved=4 * n, forward_peak=cast + 4 * n, backward_peak=4 * n + 8 * shifted)
        return Logits(saved=4 * n, forward_peak=cast + 4 * n, backward_peak=8 * n + cast)
    if trainer == "llamafactory":
        cast = 0 if c == 4 else c * n
        return Logits(saved=4 * n, forward_peak=max(cast + 4 * n, 8 * n), backward_peak=12 * n)
    return Logits(saved=c * n, forward_peak=c * n, backward_peak=2 * c * n)          # verl


def reference_forward_bytes(trainer: str, rows: int, positions: int, vocab: int, c: int, fused: bool = False,
                            path: str = "") -> int:
    """The reference's no-grad logits while it scores the batch: TRL keeps its logits (c·n) and one row's
    log_softmax at a time (`selective_log_softmax` under `torch.no_grad()`, dpo_trainer.py `compute_loss`);
    OpenRLHF its fp32 copy beside them (up to v0.5.5 its 16-bit log_softmax); LLaMA-Factory the fp32 copy and
    the fp32 log_softmax (`compute_reference_log_probs` -> `concatenated_forward`)."""
    n = rows * positions * vocab
    row = positions * vocab
    if fused:
        return (c + 4) * n // FUSED_CHUNKS
    if trainer in ("trl", "ms-swift"):
        return c * n + c * row
    if trainer == "openrlhf":
        shifted = rows * max(positions - 1, 1) * vocab
        if path == "16bit":
            return c * n + c * shifted            # the logits and the log_softmax output (see above)
        if path == "fp32-log-softmax":
            return max((0 if c == 4 else c * n) + 4 * n, 4 * n + 4 * shifted)
        return (0 if c == 4 else c * n) + 4 * n
    if trainer == "llamafactory":
        return max((0 if c == 4 else c * n) + 4 * n, 8 * n)
    return c * n


def value_head_logits(rows: int, positions: int, vocab: int, c: int) -> Logits:
    """LLaMA-Factory's reward model: the logits it computes and drops (see the module docstring)."""
    n = rows * positions * vocab
    return Logits(saved=0, forward_peak=c * n + (0 if c == 4 else 4 * n), backward_peak=0)


def reference_chosen_nll(ref: int, pairs: int, positions: int, vocab: int, c: int) -> int:
    """The reference's no-grad logits moment with TRL <= 0.28's rpo_alpha cross-entropy (see the module
    docstring): its logits beside the chosen rows' flattened copy and their log_softmax, or ``ref`` if larger."""
    extra = c * pairs * max(positions - 1, 1) * vocab
    return max(ref, c * 2 * pairs * positions * vocab + 2 * extra)


def temperature_copy_bytes(rows: int, positions: int, vocab: int, c: int) -> int:
    """TRL 0.16-0.29 GRPO's out-of-place temperature division (see the module docstring): the logits and their
    shifted quotient, c·n + c·n'."""
    return c * rows * positions * vocab + c * rows * max(positions - 1, 1) * vocab


def hidden_states_bytes(layers: int, rows: int, positions: int, hidden: int, residual: int, cast: bool) -> int:
    """TRL 0.19-0.28 DPO's returned hidden states in a no-grad pass (see the module docstring)."""
    return (layers + 1) * rows * positions * hidden * (residual + (4 if cast and residual < 4 else 0))


def chosen_nll(lg: Logits, pairs: int, positions: int, vocab: int, c: int) -> Logits:
    """The chosen rows' NLL (ORPO / CPO / SimPO, see the module docstring): its saved log_softmax of the B chosen
    rows' shifted logits, alive from the end of forward through the backward peak."""
    extra = c * pairs * max(positions - 1, 1) * vocab
    return Logits(saved=lg.saved + extra, forward_peak=lg.forward_peak + extra,
                  backward_peak=lg.backward_peak + extra, kept_by_loop=lg.kept_by_loop)


def verl_entropy_bytes(rows: int, completion: int, vocab: int) -> int:
    """verl's entropy beside the logits in the actor's old-log-prob pass, in every release read: up to 0.3.x
    `_forward_micro_batch` always computes it (dp_actor.py v0.3.0.post1; `compute_log_prob` drops it:
    `_, log_probs = ...`); from 0.4.0 fsdp_workers.py `compute_log_prob` asks for it,
    `self.actor.compute_log_prob(data=data, calculate_entropy=True)` (#1100 "Move entropy to compute log probs",
    25b0f22; v0.7.0 / b178a3c `calculate_entropy = not is_lora`, false only for the LoRA reference pass). Without remove-padding, dp_actor.py `_forward_micro_batch` calls `verl_F.entropy_from_logits(logits)`
    eagerly on the response slice (rows, completion, V) inside `torch.autocast(dtype=torch.bfloat16)`
    (torch_functional.py: `pd = softmax(logits)`; `logsumexp(logits) - sum(pd * logits)`): softmax, logsumexp and
    sum are on autocast's fp32 list, so pd is fp32 and `pd * logits` promotes to fp32: two fp32 tensors of the
    slice at once (logsumexp's fp32 cast and its `self - maxes` before them are as large). The remove-padding
    path runs `torch.compile(entropy_from_logits)` (use_torch_compile, default true), fused: nothing of that size
    (not counted: ``packing.remove_padding``, post/phases.py)."""
    return 2 * 4 * rows * completion * vocab


def verl_packed_buffers(tokens: int, vocab: int, c: int, inplace: bool = True) -> Logits:
    """verl's remove-padding log-probs over one packed row of ``tokens`` (see the module docstring): the logits
    saved by flash-attn's cross-entropy, their gradient written in place (``inplace``) or beside them."""
    n = tokens * vocab
    return Logits(saved=c * n, forward_peak=c * n, backward_peak=c * n if inplace else 2 * c * n)


def verl_update_entropy(lg: Logits, rows: int, completion: int, vocab: int) -> Logits:
    """verl's entropy in the update step, under autograd: up to 0.3.x always (dp_actor.py v0.3.0.post1
    `_forward_micro_batch` returns `entropy, log_probs` whatever `entropy_coeff`, default 0.001, and
    `update_policy` backpropagates `pg_loss - entropy_loss * entropy_coeff`); from 0.4.0 only with
    `entropy_coeff != 0` (v0.4.1 `if entropy_coeff != 0: calculate_entropy = True`; v0.7.0 also
    `actor.calculate_entropy`), default 0, which the plan cannot say. `entropy_from_logits` on the bf16 response
    slice under autocast, n = rows x completion x V; traced on FakeTensors with CUDA's autocast lists
    (tools/memtrace/cuda_autocast.py): it saves the fp32 softmax output and logsumexp's fp32 input (8n, kept
    to backward), its forward peaks at 12n (the fp32 product beside them), and its backward holds 18n of fp32
    / bf16 temporaries beside the 8n saved before the slice's gradient is formed. Counted as 8n saved and at the
    end of forward, and 26n on top of the log-probabilities' own backward peak (the two branches' order is
    autograd's: an upper bound)."""
    n = rows * completion * vocab
    return Logits(saved=lg.saved + 8 * n, forward_peak=lg.forward_peak + 8 * n,
                  backward_peak=lg.backward_peak + 26 * n, kept_by_loop=lg.kept_by_loop)
