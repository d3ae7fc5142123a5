"""TRL's KTOTrainer step in the engine (post/kto.py): B trained rows, not 2·B, and TRL < 1.15's copies of the
logits for its metrics, version-gated by `trainer_version`. The traces (golden/post/kto-*) are held by
tests/test_post_trace.py; here the engine's arithmetic is written out."""
from __future__ import annotations

import pytest

from zerocalc import Plan, estimate
from zerocalc.post.defaults import resolve
from zerocalc.post.kto import copies_before_reference, metrics_moment

V = 128_256      # Llama 3.2 1B's vocabulary


def _plan(method, b, version, kind="lora", trainer="trl", reference="auto"):
    return Plan.from_dict({
        "schema": 1, "model": "llama-3.2-1b", "gpu": "h100-sxm-80gb", "gpus_per_node": 1, "nodes": 1,
        "framework": "single", "optimizer": "adamw", "gradient_accumulation_steps": 1, "attention": "flash",
        "precision": "bf16-mixed", "activation_checkpointing": "none", "method": kind, "micro_batch_size": b,
        "seq_len": 512, "run": {"load": {"dtype": "fp32" if kind == "full" else "bf16"}},
        "post_training": {"trainer": trainer, "reference": reference, "method": method, "prompt_len": 256,
                          "completion_len": 256, "trainer_version": version}})


def _peaks(plan):
    ph = estimate(plan).to_dict()["run"]["phases"]
    return ph["step"]["peak_allocated_bytes"], ph["score"]["peak_allocated_bytes"]


def test_kto_trains_b_rows_dpo_2b():
    """KTO's KL completions are no-grad forwards of their own (TRL, LLaMA-Factory, ms-swift): the update step's
    rows are the B examples; OpenRLHF's KL half runs with autograd, 2·B rows."""
    assert resolve(_plan("kto", 4, "1.16.0")).rows == 4
    assert resolve(_plan("kto", 4, None, trainer="llamafactory")).rows == 4
    assert resolve(_plan("kto", 4, None, trainer="ms-swift")).rows == 4
    assert resolve(_plan("kto", 4, None, trainer="openrlhf")).rows == 8
    assert resolve(_plan("dpo", 4, "1.16.0")).rows == 8


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_fused_head_kto_of_two_examples_is_dpo_of_one_pair(kind):
    """TRL >= 1.15: no logits, no copies; 2 KTO examples and 1 DPO pair are both 2 rows x 512 (as traced)."""
    assert _peaks(_plan("kto", 2, "1.16.0", kind)) == _peaks(_plan("dpo", 1, "1.16.0", kind))


# B = 2 rows of 512 tokens, accelerate's fp32 copy of the logits (bf16 autocast): one copy of the B rows' logits
N_B = 4 * 2 * 512 * V
# the reference's own no-grad moment before TRL 1.11 (no kernel): its fp32 logits and one row's log_softmax,
# 4·2·512·V + 4·512·V, which is also the copy's moment L16 + L32 = 6·2·512·V
REF_OWN = N_B + 4 * 512 * V


@pytest.mark.parametrize("kind", ["full", "lora"])
@pytest.mark.parametrize("version,extra", [
    ("1.8.0", N_B),                            # 1.6-1.8: the policy's copies beside the reference's forward
    ("0.18.0", 3 * N_B - REF_OWN),             # 0.17-1.5: at the reference's end its logits + its and our copies
    ("0.16.0", 4 * N_B - REF_OWN),             # <= 0.16: and its KL logits, a local of `forward`
])
def test_before_1_9_the_copies_meet_the_reference_forward(kind, version, extra):
    """TRL < 1.9 (post/kto.py): the in-step score moment is DPO's of the same rows (1 pair = 2 KTO examples)
    plus what the copies add: 1.8.0 one n_B = 525,336,576 B; 0.18.0 3·n_B - (n_B + 4·512·V) = 788,004,864 B;
    0.16.0 4·n_B less the same = 1,313,341,440 B (above its 2·n_B during the reference's forward)."""
    assert (N_B, 3 * N_B - REF_OWN, 4 * N_B - REF_OWN) == (525_336_576, 788_004_864, 1_313_341_440)
    assert REF_OWN == 6 * 2 * 512 * V
    kto, dpo = _peaks(_plan("kto", 2, version, kind))[1], _peaks(_plan("dpo", 1, version, kind))[1]
    assert kto - dpo == extra
    assert copies_before_reference(resolve(_plan("kto", 2, version)).kto_copies, N_B, REF_OWN) == extra


def test_copies_without_a_reference_in_the_step():
    """Precomputed reference log-probs: the policy's copies alone (up to 0.16 its KL logits too)."""
    assert copies_before_reference("policy_copied", N_B, None) == N_B
    assert copies_before_reference("both_copied", N_B, None) == N_B
    assert copies_before_reference("kl_kept", N_B, None) == 2 * N_B


def test_metrics_moment_arithmetic():
    """TRL 1.9-1.14, B = 2, s = 512, C = 256, fp32 logits: the kernel's saved logits 4·2·512·V + 16 B per
    position, the reference's returned logits 4·2·512·V, the shifted rows' copies 4·2·511·V and the chosen row's
    masked completion 4·1·256·V."""
    saved = 4 * 2 * 512 * V + 16 * 1024
    kept = 4 * 2 * 512 * V
    got = metrics_moment(4, 2, 512, 256, V, kept, saved)
    assert got == saved + kept + 4 * 2 * 511 * V + 4 * 256 * V == 1_706_334_208
    assert metrics_moment(4, 3, 512, 256, V, 0, 0) == 4 * 3 * 511 * V + 4 * 2 * 256 * V   # ⌈3/2⌉ chosen rows


@pytest.mark.parametrize("version,want", [("1.16.0", ""), ("1.15.0", ""), ("1.14.2", "after_loss"),
                                          ("1.9.0", "after_loss"), ("1.8.0", "policy_copied"),
                                          ("1.6.0", "policy_copied"), ("1.5.0", "both_copied"),
                                          ("0.17.0", "both_copied"), ("0.16.0", "kl_kept"), ("0.9.6", "kl_kept")])
def test_copies_are_version_gated(version, want):
    assert resolve(_plan("kto", 2, version)).kto_copies == want


def test_other_trainers_copies():
    """LLaMA-Factory copies its fp32 chosen / rejected logits; ms-swift indexes per-row sums and OpenRLHF
    per-row log-probs: no copy; DPO none."""
    assert resolve(_plan("kto", 2, None, trainer="llamafactory")).kto_copies == "llamafactory"
    for trainer in ("ms-swift", "openrlhf"):
        assert resolve(_plan("kto", 2, None, trainer=trainer)).kto_copies == ""
    assert resolve(_plan("dpo", 2, "1.14.2")).kto_copies == ""


def test_llamafactory_copies_are_fp32_through_the_reference():
    """LLaMA-Factory's KTO score moment is its DPO's of the same rows (B = 2 rows of 256 + 256 tokens) plus, beside
    the reference's no-grad KL forward, the policy's fp32 copies and the reference's matched fp32 logits:
    2·4·2·512·V = 1,050,673,152 B (its own moment, the fp32 logits and their fp32 log_softmax 8·2·512·V, is
    the same size: at its end 3·n_B less that is smaller)."""
    kto = _peaks(_plan("kto", 2, None, trainer="llamafactory"))[1]
    dpo = _peaks(_plan("dpo", 1, None, trainer="llamafactory"))[1]
    assert kto - dpo == 2 * N_B == 1_050_673_152


@pytest.mark.parametrize("version,extra", [("1.14.2", N_B), ("0.19.0", N_B), ("1.16.0", 0)])
def test_precompute_keeps_the_first_logits_through_the_kl_forward(version, extra):
    """TRL < 1.15's `compute_ref_log_probs` holds the matched forward's logits while the KL forward runs: the
    precompute pass (score) of 2 KTO examples is DPO's of 1 pair (the same 2 rows) plus 4·2·512·V =
    525,336,576 B (accelerate's fp32 copy under bf16 autocast); nothing from 1.15 (log-probabilities only)."""
    kto = _peaks(_plan("kto", 2, version, reference="precomputed"))[1]
    dpo = _peaks(_plan("dpo", 1, version, reference="precomputed"))[1]
    assert kto - dpo == extra


def test_fused_head_reference_meets_what_the_policy_saved():
    """TRL >= 1.15 (DPO and KTO alike): the policy's tile and statistics die as its head's forward returns, so the
    in-step score moment holds the policy's saved head tensors (its bf16 compact hidden copy 2·N·h and fp32
    log-normaliser 4·N) and the reference's no-grad head (its copy, one bf16 tile 2·min(N, 4096)·32768 and the
    fp32 statistics 4·7·N): N = 2 rows x 256 completion positions = 512, h = 2048."""
    n, h = 2 * 256, 2048
    saved = 2 * n * h + 4 * n
    ref_own = 2 * n * h + 2 * n * 32768 + 4 * 7 * n
    assert (saved, ref_own) == (2_099_200, 35_665_920)
    ph = estimate(_plan("kto", 2, "1.16.0")).to_dict()["run"]["phases"]["score"]
    assert ph["components"]["logits"] == saved + ref_own == 37_765_120
