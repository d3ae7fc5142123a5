"""KTO's update step as the trainers' source runs it (contract plan-v1, Extension 7, method ``kto``): TRL's
KTOTrainer, LLaMA-Factory's, ms-swift's and OpenRLHF's.

- Rows (post/defaults.py `resolve`): the trained forward sees the B examples of the micro-batch, not 2·B. The KL
  term's mismatched completions (`KL_input_ids`, the completions cycled by one within the batch:
  `add_kl_completion_ids`, trl/trainer/kto_trainer.py 1.16.0) run a forward of their own under `torch.no_grad()`
  (`_compute_kl_logps`, called first in `_compute_loss`; in 0.x `forward` opens with the same no-grad block), and
  the reference runs its KL and its matched forward, B rows each, under no_grad after the policy's forward
  (`ref_KL_logps = self._compute_kl_logps(self.ref_model, batch)`, then `ref_outputs = self.ref_model(...)`, or
  both inside `use_adapter(...)` with PEFT). Read in the 1.16.0 and 1.14.2 wheels and at v0.9.6, v0.19.0, v1.5.0,
  v1.8.0 and v1.9.0. The policy's KL forward meets only the resident state (nothing of the step is saved yet), so
  it is never the step's moment; the reference's two B-row forwards are the in-step ``score`` window, as DPO's one
  forward of 2·B rows is. `loss_type="apo_zero_unpaired"` (`calculate_KL = False`) skips both KL forwards; it
  moves no moment here. Traced (tools/memtrace/post.py, golden/post/kto-*): the decoder forwards of the step are
  [policy no-grad B, policy grad B, reference no-grad B, reference no-grad B], with and without KTOConfig's
  default gradient checkpointing (golden/post/kto-*-ckpt-*). LLaMA-Factory's CustomKTOTrainer
  (train/kto/trainer.py `concatenated_forward`: `with torch.no_grad(): ... self.forward(model, batch,
  prefix="kl_")`, after the trained forward) and ms-swift's (swift/rlhf_trainers/kto_trainer.py
  `_compute_kl_logps` under no_grad, at 3602360) train B rows too. OpenRLHF's (openrlhf/trainer/kto_trainer.py
  `compute_model_logps_with_KL` at v0.9.5, the module removed after it) splits a batch of 2·B rows and runs the
  KL half with autograd; its result stays referenced to backward (the loss detaches only the mean): 2·B rows.
- The logits' metrics copies, TRL < 1.15 (`trainer_version`; from 1.15 the fused head returns no logits and the
  metric reads `outputs.mean_logits`, (B, s)):
  - before 1.9.0 (read at v0.9.6, v0.10.1, v0.16.0, v0.17.0, v0.19.0, v1.5.0, v1.6.0, v1.8.0): copies of the B rows'
    logits, c·B·s·V each (n_B below), alive through the reference's forward until the loss returns
    (`kto_logits_copies`, in the step's end-of-forward moment and in ``score``), as many as the release keeps:
    - up to 0.16.x `forward` makes the KL forward's logits a local (`KL_logits = model(...).logits` under
      no_grad, then the trained forward), so they live until `forward` returns, and ends with
      `chosen_logits = completion_logits[chosen_idx, ...]` / `rejected_logits`, returned to
      `get_batch_loss_metrics`; the reference runs the same `forward` (`self.forward(self.ref_model, batch)`):
      during its forward the policy's copies and its own KL logits (2·n_B), at its end its logits, its KL logits,
      its copies and the policy's (4·n_B);
    - 0.17-1.5.x: `_compute_kl_logps` frees the KL logits as it returns; the copies stay: 1·n_B during the
      reference's forward, 3·n_B at its end (its logits, its copies, the policy's);
    - 1.6-1.8.x: `_compute_loss` copies only the policy's (`outputs.logits.index_select(0, chosen_idx)`, before
      the reference's forward): 1·n_B (read only).
    Traced at 0.16.1 and 0.17.0 / 0.18.2 / 0.19.1 (golden/post/kto-*-trl016 ... trl019: the step's peak at the
    reference's `index` copies, with three / two fp32 (2, 512, V) logits and four (1, 512, V) copies alive).
    The term is what the moment holds above the reference's own no-grad logits (post/step.py).
  - 1.9.0-1.14.x: after the loss, `shift_logits.detach().index_select(0, chosen_idx)` and the rejected rows'
    (c·B·(s-1)·V together), then `chosen_logits[chosen_mask.bool()].mean(-1)`: a boolean-mask copy of the
    chosen rows' completion positions (c·⌈B/2⌉·C·V; the rejected rows' comes after it dies), while
    `ref_outputs.logits` (the reference's logits as returned: accelerate's fp32 copy, post/fp32out.py) and what
    the policy's log-prob code saved are alive; the reference's 16-bit logits died at its copy. That moment is
    after the reference's window, so it is a term of the step only (`kto_logits_metrics`: what it holds above
    the end-of-forward moment), not of ``score``. Traced for 1.14.2 (kto-l1b-{full,lora}-b2-s512-trl114: the
    step's peak at the `mean`, two fp32 (1, 511, V) `index_select` and a (511, V) `clone` beside two fp32
    (2, 512, V) `_to_copy`).
  - LLaMA-Factory's CustomKTOTrainer (train/kto/trainer.py `concatenated_forward`, at ff6d4d12e):
    `chosen_logits = target_logits[batch["kto_tags"]]` and `rejected_logits = target_logits[~...]`, boolean-mask
    copies of its fp32 logits (`forward`: `.logits.to(torch.float32)`), 4·B·s·V, returned to
    `get_batch_loss_metrics` and alive through the reference's `concatenated_forward`, whose matched logits are
    alive through its no-grad KL forward (2·n_B), then copied (3·n_B at its end). Read, not traced.
    ms-swift's `forward` (swift/rlhf_trainers/kto_trainer.py) indexes per-row logit sums
    (`get_per_token_logps(..., reduction='sum')`): no copy.
  - TRL < 1.15's precompute pass (`reference: precomputed`; `compute_ref_log_probs`, 1.14.2 wheel, v0.19.0):
    `completion_logits = model(...).logits`, then `KL_logits = model(...).logits`, then both scored: the first
    forward's logits, c·B·s·V, are alive through the KL forward (post/phases.py `score_phase`); from 1.15 both
    passes return per-token log-probabilities (B, s-1) only. Read, not traced (the tracer's data set is a few
    tokens long, and the precompute runs on it while the trainer is built).
  c is the logits' dtype as the loss reads them (4 with accelerate's output cast or LLaMA-Factory's fp32 cast,
  else the compute dtype).
"""
from __future__ import annotations

KL_FREED_SINCE = (0, 17, 0)                   # `_compute_kl_logps`: the KL logits die as it returns (v0.17.0)
POLICY_COPIES_ONLY_SINCE = (1, 6, 0)          # `_compute_loss` copies the policy's logits only (v1.6.0)
METRICS_COPIES_AFTER_LOSS_SINCE = (1, 9, 0)   # `shift_logits.detach().index_select` after the loss (v1.9.0)

KTO_METRICS = "kto_logits_metrics"            # the step's term that the in-step score window leaves out
# n_B multiples alive beside the reference's forward, and at its end with its own logits (0: no such moment)
BEFORE_REF = {"kl_kept": (2, 4), "both_copied": (1, 3), "policy_copied": (1, 0), "llamafactory": (2, 3)}


def copies_variant(trainer: str, version: tuple) -> str:
    """Which KTO release's copies (see the module docstring); "" for none (TRL >= 1.15 is decided by the caller)."""
    if trainer == "llamafactory":
        return "llamafactory"
    if trainer != "trl":
        return ""
    if version >= METRICS_COPIES_AFTER_LOSS_SINCE:
        return "after_loss"
    if version >= POLICY_COPIES_ONLY_SINCE:
        return "policy_copied"
    return "both_copied" if version >= KL_FREED_SINCE else "kl_kept"


def copies_before_reference(variant: str, n_b: int, ref_own: int | None) -> int:
    """The logits bytes the copies add to the reference's moment: ``held`` n_B beside its forward, or at its end
    ``end`` n_B (its own logits among them) less what its own moment holds; without a reference in the step
    (``ref_own`` None: precomputed) the policy's copies, and up to 0.16 its KL logits, at the end of forward."""
    held, end = BEFORE_REF[variant]
    if ref_own is None:
        return (2 if variant == "kl_kept" else 1) * n_b
    return max(held * n_b, end * n_b - ref_own)


def metrics_moment(c: int, rows: int, length: int, completion: int, vocab: int, ref_kept: int, saved: int) -> int:
    """TRL 1.9-1.14: the logits bytes alive at `chosen_logits[chosen_mask.bool()].mean(-1)`: what the policy's
    log-prob code saved, the reference's returned logits (``ref_kept``), the B shifted rows' index_select copies
    and the chosen rows' masked copy of their completion positions (half the batch, rounded up)."""
    copies = c * rows * max(length - 1, 1) * vocab
    masked = c * -(-rows // 2) * completion * vocab
    return saved + ref_kept + copies + masked
