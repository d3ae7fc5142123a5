"""Post-training ground truth: the checked-in traces of TRL's real DPO and KTO steps and GRPO update step on fake
tensors (tools/memtrace/golden/post/*-trl*.json, written by tools/memtrace/postgrid.py) and TRL's ZeRO reference on CPU
ranks (golden/post/ds-ref-model.json, tools/dsprobe/refmodel.py); docs/tracer.md §11.

Pure Python: no TRL, torch or DeepSpeed at test time. Two kinds of checks:
- the traces against the mechanisms written out by hand (resident weights, reference copies, the (2·B, s, V)
  logits of TRL < 1.15 and their absence from 1.15 on, ZeRO-3 sharding of the reference), so a regenerated
  fixture that lost a mechanism fails here;
- the engine: each traced phase's `max_memory_allocated` (the allocator replay's) against
  `estimate(plan).to_dict()["run"]["phases"][phase]["peak_allocated_bytes"]` within 3 %; where it is not yet,
  a strict xfail names the per-term delta (ENGINE_OFF); skipped while the engine has no post-training phases.
"""
from __future__ import annotations

import glob
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tools", "memtrace", "golden", "post")
TRACES = sorted(glob.glob(os.path.join(GOLDEN, "*-trl*.json")))

# Llama 3.2 1B (models.json / its HF config): tied embedding, V, and the LoRA parameters of peft's defaults used
# by the tracer (r 16 on all 7 projections): per layer r·(in + out) for q 2048+2048, k 2048+512, v 2048+512,
# o 2048+2048, gate 2048+8192, up 2048+8192, down 8192+2048 = 16·(4096·2 + 2560·2 + 10240·3) = 704,512; 16 layers
P_1B = 1_235_814_400
V = 128_256
N_LORA = 16 * 16 * (4096 * 2 + 2560 * 2 + 10240 * 3)
assert N_LORA == 11_272_192
# the small Llama of docs/deepspeed-cpu.md the reference probe runs
P_SMALL = 6_965_504
TOL = 0.03
SCALARS = 64      # a few 0-d tensors a trainer makes while it is built count as set-up storages


def _load(path):
    with open(path) as f:
        return json.load(f)


def _fx(rid):
    path = os.path.join(GOLDEN, rid + ".json")
    if not os.path.exists(path):
        pytest.skip(f"{rid}.json not generated (make trace-post)")
    return _load(path)


def _ids():
    return [os.path.basename(p)[:-5] for p in TRACES]


def test_fixtures_exist_with_versions_and_command():
    assert len(TRACES) >= 16
    for path in TRACES:
        fx = _load(path)
        pt = fx["plan"]["post_training"]
        assert pt["trainer"] == "trl" and pt["method"] in ("dpo", "grpo", "kto")
        assert pt["trainer_version"] == fx["versions"]["trl"]
        assert fx["id"].endswith("trl" + "".join(fx["versions"]["trl"].split(".")[:2]))
        assert "postgrid --only" in fx["command"]
        assert {"step", "score"} <= set(fx["phases"])
        for ph in fx["phases"].values():
            # the replay's blocks cover the tensors (512 B rounding); segments cover blocks
            assert ph["peak_bytes"] <= ph["peak_allocated_bytes"] <= ph["peak_reserved_bytes"]
            assert ph["peak_bytes"] >= fx["resident_bytes"]


@pytest.mark.parametrize("ver", ["trl116", "trl114", "trl017", "trl018", "trl019"])
def test_full_dpo_resident_is_fp32_policy_fp32_reference_and_adamw(ver):
    """TRL builds models in fp32 unless model_init_kwargs says otherwise, and the reference with the policy's
    kwargs: 4P + 4P of weights (+ the 256 B rotary buffer each), and fused AdamW's two fp32 moments 8P (+ a 4 B
    step per tensor) resident before the step; nothing else."""
    r = _fx(f"dpo-l1b-full-s512-{ver}")["resident"]
    assert r["weights"] == 4 * P_1B
    assert 4 * P_1B <= r["reference_weights"] <= 4 * P_1B + 1024
    assert 8 * P_1B <= r["optimizer_states"] <= 8 * P_1B + 4 * 200
    assert r["gradients"] == r["activations"] == r["lora_adapters"] == 0


@pytest.mark.parametrize("rid", ["dpo-l1b-lora-s512", "grpo-l1b-lora-g4-s512"])
@pytest.mark.parametrize("ver", ["trl116", "trl114", "trl017", "trl018", "trl019"])
def test_lora_reference_costs_no_weights(rid, ver):
    """With PEFT the reference is the base with the adapter disabled (`use_adapter(model, None)`): no second
    copy. Resident: the bf16 base 2P, the fp32 adapters 4·N, their AdamW moments 8·N."""
    fx = _fx(f"{rid}-{ver}")
    r = fx["resident"]
    assert r["reference_weights"] == 0
    assert 2 * P_1B <= r["weights"] <= 2 * P_1B + SCALARS
    assert r["lora_adapters"] == 4 * N_LORA
    assert 8 * N_LORA <= r["optimizer_states"] <= 8 * N_LORA + 4 * 500
    assert fx["trainable_params"] == N_LORA
    for ph in fx["phases"].values():
        assert ph["components"]["reference_weights"] == 0


@pytest.mark.parametrize("ver", ["trl116", "trl114", "trl017", "trl018", "trl019"])
def test_grpo_full_reference_is_a_replica_in_the_policy_dtype(ver):
    """GRPOTrainer builds the reference itself (create_model_from_path with dtype = self.model.dtype): an fp32
    replica beside the fp32 policy."""
    fx = _fx(f"grpo-l1b-full-g4-s512-{ver}")
    assert 4 * P_1B <= fx["resident"]["weights"] <= 4 * P_1B + SCALARS
    assert 4 * P_1B <= fx["resident"]["reference_weights"] <= 4 * P_1B + 1024
    if ver == "trl116":
        assert fx["ref_model_kwargs"]["dtype"] == "torch.float32"


def _logits(ph):
    return [(shape, dtype, n) for _, shape, dtype, n in ph["logits_at_peak"]]


@pytest.mark.parametrize("rid", ["dpo-l1b-full-s512", "dpo-l1b-lora-s512", "grpo-l1b-full-g4-s512",
                                 "grpo-l1b-lora-g4-s512"])
def test_trl_116_never_holds_the_logits(rid):
    """TRL >= 1.15 scores through `fused_lm_head=True` (tiles of 4096 tokens x 32768 vocabulary): no storage of
    the (rows, s, V) logits' size is alive at any phase's peak."""
    fx = _fx(f"{rid}-trl116")
    for name, ph in fx["phases"].items():
        assert ph["components"]["logits"] == 0, name
        assert ph["logits_at_peak"] == [], name


def test_trl_114_dpo_holds_the_logits_of_2b_rows():
    """TRL 1.14 DPO: one forward of the 2·B = 2 rows [chosen, rejected] of s = 512 tokens, `outputs.logits` in full.
    The policy runs under accelerate's autocast with `convert_outputs_to_fp32` (Trainer's accelerator.prepare):
    the lm_head's bf16 logits come back as an fp32 copy, 2·B·s·V·4 = 525,336,576 B, which the GPU's Triton
    log-prob kernel (`_LogProbEntropyFunction`) saves for backward. The reference forward (score) runs over that
    kept copy and makes its own bf16 (2·512, V) logits, 2·512·V·2 = 262,668,288 B, then its own fp32 copy: with
    LoRA the reference is the same wrapped model, so at the score's peak both fp32 copies and the bf16 output are
    alive, 2·525,336,576 + 262,668,288 = 1,313,341,440 B; the full model's separate reference is caught before
    its copy, 525,336,576 + 262,668,288 = 788,004,864 B."""
    B, s = 1, 512
    fp32 = 2 * B * s * V * 4
    bf16 = 2 * B * s * V * 2
    assert (fp32, bf16) == (525_336_576, 262_668_288)
    lora = _fx("dpo-l1b-lora-s512-trl114")["phases"]["score"]
    assert lora["components"]["logits"] == 2 * fp32 + bf16 == 1_313_341_440
    assert sorted(n for _, _, n in _logits(lora)) == [bf16, fp32, fp32]
    full = _fx("dpo-l1b-full-s512-trl114")["phases"]["score"]
    assert full["components"]["logits"] == fp32 + bf16 == 788_004_864
    assert ([2, 512, V], "float32", fp32) in _logits(full)
    # what 1.16's fused head does not hold: the score phase is lower by more than the bf16 logits
    for kind in ("full", "lora"):
        old = _fx(f"dpo-l1b-{kind}-s512-trl114")["phases"]["score"]["peak_bytes"]
        new = _fx(f"dpo-l1b-{kind}-s512-trl116")["phases"]["score"]["peak_bytes"]
        assert old - new >= bf16, kind


def test_trl_114_grpo_scores_only_the_completion():
    """TRL 1.14 GRPO: `logits_to_keep = completion_len + 1`, so the logits are (B, C + 1, V) for B = 4
    completions of C = 384 tokens, none of the 128 prompt positions; fp32 after accelerate's output cast:
    4·385·V·4 = 790,056,960 B. Score (reference, no grad): the bf16 lm_head output (4·385, V), 395,028,480 B,
    beside its fp32 copy. Update step: the kept fp32 copy plus the one fp32 gradient the Triton kernel's backward
    writes (`empty_like` of the shifted (4, 384, V) logits), 788,004,864 B: 1,578,061,824 B."""
    B, C = 4, 384
    fp32 = B * (C + 1) * V * 4
    bf16 = B * (C + 1) * V * 2
    grad = B * C * V * 4
    assert (fp32, bf16, grad) == (790_056_960, 395_028_480, 788_004_864)
    for kind in ("full", "lora"):
        fx = _fx(f"grpo-l1b-{kind}-g4-s512-trl114")
        sc = fx["phases"]["score"]
        assert sc["components"]["logits"] == fp32 + bf16, kind
        assert sorted(n for _, _, n in _logits(sc)) == [bf16, fp32], kind
        step = fx["phases"]["step"]
        assert step["components"]["logits"] == fp32 + grad == 1_578_061_824, kind
        assert ([B, C, V], "float32", grad) in _logits(step), kind


@pytest.mark.parametrize("rid", [i for i in _ids() if i.startswith("kto-")])
def test_kto_forwards_b_rows_and_its_kl_rows_without_grad(rid):
    """TRL's KTOTrainer `_compute_loss`: the policy's KL forward under no_grad (`_compute_kl_logps`), the trained
    forward of the B = 2 matched rows, then the reference's KL and matched forwards under no_grad (the reference
    model, or the policy with its adapter disabled): four decoder forwards of 2 x 512, one with autograd; never
    the 2·B = 4 rows the engine used to count."""
    fx = _fx(rid)
    ref = "reference" if rid.startswith("kto-l1b-full") else "policy"
    assert fx["forwards"] == [["policy", False, 2, 512], ["policy", True, 2, 512], [ref, False, 2, 512],
                              [ref, False, 2, 512]]


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_trl_116_kto_of_2_examples_is_dpo_of_1_pair(kind):
    """With the fused head (no logits) KTO's B = 2 examples train the same 2 rows x 512 tokens as DPO's one pair
    (2·B = 2 rows): the KL forwards add no moment (the policy's meets only the resident state, the reference's
    two are sequential and free their activations layer by layer), so the phases' peaks agree to 0.1 %."""
    for phase in ("step", "score"):
        kto = _fx(f"kto-l1b-{kind}-b2-s512-trl116")["phases"][phase]["peak_allocated_bytes"]
        dpo = _fx(f"dpo-l1b-{kind}-s512-trl116")["phases"][phase]["peak_allocated_bytes"]
        assert kto == pytest.approx(dpo, rel=0.001), phase


def test_trl_114_kto_metrics_copies_after_the_loss():
    """TRL 1.14 KTO, after the loss: `shift_logits.detach().index_select(0, chosen_idx)` and the rejected rows'
    (one row each of B = 2: fp32 (1, 511, V), 4·511·V = 262,155,264 B apiece), then `chosen_logits[chosen_mask.
    bool()]`, a (511, V) fp32 copy (the traced mask selects every shifted position), its `.mean(-1)` the step's
    peak; alive beside them the policy's fp32 logits (saved by the kernel) and the reference's `ref_outputs.
    logits`, 2 x 4·2·512·V = 2 x 525,336,576 B. The LoRA score peak is the reference's copy (both fp32 copies and
    its bf16 logits, 2·512·V·2 = 262,668,288 B): the step is above it by the three copies less the bf16 logits,
    3·262,155,264 - 262,668,288 = 523,797,504 B (+ a few small tensors)."""
    row = 4 * 511 * V
    fp32 = 4 * 2 * 512 * V
    bf16 = 2 * 2 * 512 * V
    assert (row, fp32, bf16) == (262_155_264, 525_336_576, 262_668_288)
    for kind in ("full", "lora"):
        step = _fx(f"kto-l1b-{kind}-b2-s512-trl114")["phases"]["step"]
        assert step["at"] == {"op": "mean", "step_phase": "forward"}, kind
        assert sorted(n for _, _, n in _logits(step)) == [fp32, fp32], kind
        assert step["components"]["activations"] >= 3 * row, kind
    fx = _fx("kto-l1b-lora-b2-s512-trl114")
    d = fx["phases"]["step"]["peak_bytes"] - fx["phases"]["score"]["peak_bytes"]
    assert 3 * row - bf16 == 523_797_504
    assert 0 <= d - (3 * row - bf16) < 2**16


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_trl_0x_kto_copies_of_the_logits(kind):
    """TRL 0.17-0.19 KTO `forward` ends with `completion_logits[chosen_idx, ...]` and the rejected rows' (list
    indexing: a copy, one fp32 (1, 512, V) row each of B = 2, 4·512·V = 262,668,288 B), for the policy and for
    the reference (`self.forward(self.ref_model, batch)`): the step's peak is the reference's copies, beside both
    models' fp32 logits (accelerate's copy, 4·2·512·V = 525,336,576 B each) and the policy's copies:
    2 x 525,336,576 + 4 x 262,668,288 = 2,101,346,304 B. Up to 0.16 `forward` also keeps the KL forward's logits
    (a local until it returns): the reference's, one more 525,336,576 B at the same moment."""
    row, fp32 = 4 * 512 * V, 4 * 2 * 512 * V
    assert (row, fp32, 2 * fp32 + 4 * row) == (262_668_288, 525_336_576, 2_101_346_304)
    for ver, whole in (("trl017", 2), ("trl018", 2), ("trl019", 2), ("trl016", 3)):
        step = _fx(f"kto-l1b-{kind}-b2-s512-{ver}")["phases"]["step"]
        assert step["at"] == {"op": "index", "step_phase": "forward"}, ver
        assert sorted(n for _, _, n in _logits(step)) == [row] * 4 + [fp32] * whole, ver
    d = (_fx(f"kto-l1b-{kind}-b2-s512-trl016")["phases"]["step"]["peak_bytes"]
         - _fx(f"kto-l1b-{kind}-b2-s512-trl017")["phases"]["step"]["peak_bytes"])
    assert abs(d - fp32) < 2**16          # a few small tensors either way


def test_checkpointed_kto_reference_meets_no_autocast_cache():
    """KTOConfig's default gradient checkpointing, full fine-tuning of the fp32 policy under bf16 autocast: the
    checkpointed layers keep only their inputs, and autocast's cache of bf16 weight copies (2P, which the engine
    holds during the policy's forward: `autocast_cache_forward`) is cleared as the policy's autocast-wrapped
    forward returns, so the reference's window starts from the resident state plus the checkpoint inputs (and
    the head's), under resident + 2P / 8, and peaks under resident + 2P / 4: far below the 2P cache."""
    fx = _fx("kto-l1b-full-b2-s512-ckpt-trl116")
    sc = fx["phases"]["score"]
    assert sc["start_bytes"] - fx["resident_bytes"] < 2 * P_1B // 8
    assert sc["peak_bytes"] - fx["resident_bytes"] < 2 * P_1B // 4


def test_trl_017_grpo_divides_the_logits_by_the_temperature_out_of_place():
    """TRL 0.17 GRPO `_get_per_token_logps`: `model(..., logits_to_keep=C + 1).logits` (accelerate's fp32 copy,
    4·385·V·4 = 790,056,960 B), `[:, :-1]`, then `logits / self.temperature`, a new fp32 (4, 384, V),
    788,004,864 B, made while the copy is alive: the score's peak holds both, 1,578,061,824 B (1.14 holds the
    copy and its bf16 source, 1,185,085,440 B). The copy then dies (nothing saves it), and the update step's
    backward peak holds the quotient (saved by the per-row logsumexp) and the stacked per-row gradients, two
    fp32 (4, 384, V), beside one more of gather's gradient (a temporary here)."""
    B, C = 4, 384
    copy, quotient = B * (C + 1) * V * 4, B * C * V * 4
    assert (copy, quotient) == (790_056_960, 788_004_864)
    for kind in ("full", "lora"):
        fx = _fx(f"grpo-l1b-{kind}-g4-s512-trl017")
        sc = fx["phases"]["score"]
        assert sc["components"]["logits"] == copy + quotient == 1_578_061_824, kind
        assert sorted(_logits(sc)) == sorted([([B, C + 1, V], "float32", copy), ([B, C, V], "float32", quotient)])
        step = fx["phases"]["step"]
        assert step["components"]["logits"] == 2 * quotient, kind
        assert ([B, C, V], "float32", quotient) in _logits(step) and ([B, C + 1, V], "float32", copy) not in \
            _logits(step), kind


def test_trl_018_grpo_scores_the_reference_inside_the_step():
    """TRL 0.18 GRPO: `_compute_loss` runs the policy's `_get_per_token_logps` (its quotient, 788,004,864 B, saved
    by the per-row logsumexp; its fp32 copy died), then the reference's under no_grad: at the reference's
    division the step holds every saved activation, the policy's quotient, the reference's fp32 copy of
    (4, 385, V), 790,056,960 B, and its own quotient: 2,366,066,688 B of logits-sized tensors, the step's peak."""
    B, C = 4, 384
    copy, quotient = B * (C + 1) * V * 4, B * C * V * 4
    for kind in ("full", "lora"):
        fx = _fx(f"grpo-l1b-{kind}-g4-s512-trl018")
        sc, step = fx["phases"]["score"], fx["phases"]["step"]
        assert sc["components"]["logits"] == copy + 2 * quotient == 2_366_066_688, kind
        assert sc["components"]["activations"] > 4 * 2**30, kind
        assert sc["peak_bytes"] == step["peak_bytes"], kind
        old = _fx(f"grpo-l1b-{kind}-g4-s512-trl017")
        assert sc["peak_bytes"] - old["phases"]["score"]["peak_bytes"] > 4 * 2**30, kind


def test_trl_017_dpo_keeps_the_fp32_copy_of_the_whole_rows():
    """TRL 0.17 DPO `concatenated_forward`: `selective_log_softmax(logits, labels)` over the whole rows (labels
    rolled, no slice): the fp32 copy of the (2, 512, V) logits, 525,336,576 B, is what the per-row logsumexp
    saves. Backward peak: that copy plus the per-row backward of one row's logsumexp and of the gather, four
    fp32 (512, V) tensors, 4 x 262,668,288 B: 12·2·512·V in all = 1,576,009,728 B, the engine's 4n + 8n'
    for n = n' (post/logprobs.py) with gather_backward's zeros filled in place (tracker.py `_scatter_into_zeros`).
    The reference pass (score) holds the policy's saved copy, its own, and the metrics' boolean-mask copy of the
    chosen rows' logits, (512, V) fp32."""
    n = 2 * 512 * V
    for kind in ("full", "lora"):
        fx = _fx(f"dpo-l1b-{kind}-s512-trl017")
        step = fx["phases"]["step"]
        assert ([2, 512, V], "float32", 4 * n) in _logits(step), kind
        assert step["components"]["logits"] == 12 * n == 1_576_009_728, kind
        assert not any(op in ("scatter_add", "new_zeros") for op, *_ in step["logits_at_peak"]), kind
    lora = _fx("dpo-l1b-lora-s512-trl017")["phases"]["score"]
    assert lora["components"]["logits"] == 2 * 4 * n + 4 * n // 2


def test_trl_019_grpo_scores_the_reference_over_the_whole_generation_batch():
    """TRL 0.19 GRPO calls the reference's `_get_per_token_logps` without batch_size: with GA 2 (steps_per_
    generation 2) the 8 completions of the generation batch go through one forward, fp32 copy of (8, 385, V) and
    quotient (8, 384, V): 8·385·V·4 + 8·384·V·4 = 3,156,123,648 B, twice the GA 1 trace's. The update runs two
    micro-steps of 4: the second's backward peak holds the first's fp32 gradients, 4P."""
    fx = _fx("grpo-l1b-full-g4-ga2-s512-trl019")
    assert fx["plan"]["gradient_accumulation_steps"] == 2
    sc = fx["phases"]["score"]
    assert sc["components"]["logits"] == 8 * 385 * V * 4 + 8 * 384 * V * 4 == 3_156_123_648
    assert sc["components"]["logits"] == 2 * _fx("grpo-l1b-full-g4-s512-trl019")["phases"]["score"]["components"][
        "logits"]
    step = fx["phases"]["step"]
    assert 4 * P_1B <= step["components"]["gradients"] <= 4 * P_1B + SCALARS


def test_trl_019_dpo_reference_returns_every_hidden_state():
    """TRL 0.19 DPO `concatenated_forward` sets output_hidden_states=True: the reference's no-grad forward keeps
    the embedding output and the 16 layers' outputs, 17 x (2, 512, 2048), to its logits moment. LoRA (bf16 base):
    bf16 and accelerate's fp32 copy of each, 17·2·512·2048·6 = 213,909,504 B more activations than 0.18 at the
    score's peak; full fine-tuning (fp32 residual stream, no copies): 16 of 17·2·512·2048·4 (the last is the
    lm_head's input, alive anyway), 134,217,728 B. Same logits, same step peak (backward)."""
    for kind, extra in (("lora", 17 * 2 * 512 * 2048 * 6), ("full", 16 * 2 * 512 * 2048 * 4)):
        new, old = (_fx(f"dpo-l1b-{kind}-s512-{v}")["phases"] for v in ("trl019", "trl018"))
        grown = new["score"]["components"]["activations"] - old["score"]["components"]["activations"]
        assert grown == pytest.approx(extra, abs=2**16), kind      # a few small tensors besides
        assert new["score"]["components"]["logits"] == old["score"]["components"]["logits"], kind
        assert new["step"]["peak_bytes"] == old["step"]["peak_bytes"], kind


def test_dpo_score_runs_inside_the_step_and_grpo_score_before_it():
    """DPO's reference forward runs inside `_compute_loss`, over the policy forward's saved activations: its
    window starts above the resident bytes; so does TRL 0.18 GRPO's (`_compute_loss`, after the policy's
    `_get_per_token_logps`). GRPO otherwise scores before the update (`_generate_and_score_completions`): its
    window starts at the resident bytes (+ the batch's ids)."""
    for path in TRACES:
        fx = _load(path)
        sc = fx["phases"]["score"]
        if fx["plan"]["post_training"]["method"] in ("dpo", "kto") or fx["versions"]["trl"].startswith("0.18."):
            assert sc["start_bytes"] > fx["resident_bytes"] + 10 * 2**20, fx["id"]
            assert sc["peak_bytes"] <= fx["phases"]["step"]["peak_bytes"], fx["id"]
        else:
            assert sc["start_bytes"] - fx["resident_bytes"] < 2**20, fx["id"]


def test_zero3_reference_is_sharded_and_zero2_replicated():
    """TRL's prepare_deepspeed: stage 3 keeps the reference's bf16 parameters sharded over the ranks (2P / N per
    rank, a few bytes of partition padding), any other stage becomes stage 0, a full 2P replica per rank."""
    fx = _load(os.path.join(GOLDEN, "ds-ref-model.json"))
    assert fx["model"]["hidden_size"] == 256 and fx["world"] == 2
    N = fx["world"]
    for case in ("z3", "z3-zeroinit"):
        for r in fx["cases"][case]["ranks"]:
            assert r["engine_config_stage"] == 3 and r["params"] == P_SMALL
            assert 2 * P_SMALL // N <= r["resident_bytes"] <= 2 * P_SMALL // N + 1024, case
            # one no-grad forward gathers layer by layer: above the shard, below a replica plus the batch
            assert r["resident_bytes"] < r["score_peak_bytes"] < 2 * P_SMALL + 4 * 2**20
    for r in fx["cases"]["z2"]["ranks"]:
        assert r["engine_config_stage"] == 0
        assert 2 * P_SMALL <= r["resident_bytes"] <= 2 * P_SMALL + 1024
    # zero.Init builds the shards directly; without it the full model exists until initialize partitions it
    assert fx["cases"]["z3-zeroinit"]["ranks"][0]["built_bytes"] < 2 * P_SMALL
    assert fx["cases"]["z3"]["ranks"][0]["built_bytes"] >= 2 * P_SMALL


# -- the engine against the traces --------------------------------------------------------------------------

def _engine_phases(plan):
    from zerocalc import Plan, estimate  # noqa: PLC0415
    from zerocalc.errors import PlanError  # noqa: PLC0415
    try:
        p = Plan.from_dict(plan)
    except PlanError as e:
        pytest.skip(f"the engine does not accept post_training yet: {e}")
    run = estimate(p).to_dict().get("run") or {}
    if not run.get("phases"):
        pytest.skip("the engine has no run.phases for post-training plans yet")
    return run["phases"]


# Where the engine is outside 3 % of a trace, per term: held as strict xfails (an XPASS fails). None now: the
# last seven closed with two mechanisms, read from the source, not fitted:
# - accelerate's `convert_outputs_to_fp32` (post/fp32out.py): TRL 1.14's logits reach the kernel as an fp32 copy
#   (DPO LoRA step -7.2 % -> +0.5 %, GRPO LoRA step -8.6 % -> +0.5 %, GRPO scores -3.6 / -19.8 % -> +0.2 / +1.1 %);
# - TRL's `disable_dropout` (DPOConfig default True, post/defaults.py): no LoRA dropout masks in DPO, 1 B per
#   adapter input element, (6h + I) per token per layer = 0.31 GiB at 2 x 512 tokens (DPO LoRA +7.7 % -> +0.4 %).
#   Not an attention artefact: the tracer's attention is the FA2 profile (build.py flash_attention_forward,
#   no s^2 tensor) in DPO and GRPO alike.
ENGINE_OFF: dict = {}


def _cases(phase, prefix=""):
    out = []
    for rid in _ids():
        if not rid.startswith(prefix):
            continue
        why = ENGINE_OFF.get((rid, phase))
        out.append(pytest.param(rid, marks=pytest.mark.xfail(reason=why, strict=True)) if why else rid)
    return out


@pytest.mark.parametrize("rid", _cases("step"))
def test_engine_update_step_within_3_percent(rid):
    fx = _fx(rid)
    ph = _engine_phases(fx["plan"])
    got, want = ph["step"]["peak_allocated_bytes"], fx["phases"]["step"]["peak_allocated_bytes"]
    assert got == pytest.approx(want, rel=TOL), (rid, got / 2**30, want / 2**30)


@pytest.mark.parametrize("rid", _cases("score"))
def test_engine_score_within_3_percent(rid):
    fx = _fx(rid)
    ph = _engine_phases(fx["plan"])
    if "score" not in ph:
        pytest.skip("the engine has no score phase for this plan")
    got, want = ph["score"]["peak_allocated_bytes"], fx["phases"]["score"]["peak_allocated_bytes"]
    assert got == pytest.approx(want, rel=TOL), (rid, got / 2**30, want / 2**30)


def test_engine_resident_terms_match_the_traces():
    """What the engine holds in the GRPO score phase that is not transient (weights with the reference, LoRA
    adapters and their optimizer moments, optimizer states) equals the trace's resident bytes to 0.1 %: the
    placement and dtype rules (TRL fp32 reference replica, adapter-disabled reference) agree exactly."""
    for rid in [i for i in _ids() if i.startswith("grpo")]:
        fx = _fx(rid)
        comps = _engine_phases(fx["plan"])["score"]["components"]
        held = sum(comps.get(k, 0) for k in ("weights", "optimizer_states", "lora_adapters", "gradients"))
        assert held == pytest.approx(fx["resident_bytes"], rel=0.001), rid


def _small_plan(stage, method, reference):
    from tools.dsprobe.spec import SMALL_LLAMA  # noqa: PLC0415  (a dict: no torch import)
    return {"schema": 1, "model": {"name": "small-llama", **SMALL_LLAMA}, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2,
            "nodes": 1, "framework": "deepspeed", "zero_stage": stage, "precision": "bf16-mixed", "optimizer": "adamw",
            "micro_batch_size": 2, "gradient_accumulation_steps": 1, "seq_len": 64, "activation_checkpointing": "none",
            "attention": "flash", "method": "full", "run": {"load": {"dtype": "bf16"}},
            "post_training": {"method": method, "trainer": "trl", "prompt_len": 32, "completion_len": 32,
                              "reference": reference}}


@pytest.mark.parametrize("stage,case", [(3, "z3"), (3, "z3-zeroinit"), (2, "z2")])
def test_engine_reference_term_matches_the_probe(stage, case):
    """The engine's reference weights on one rank (a DPO plan's step weights minus the same plan as SimPO, which
    has no reference) against the bytes TRL's prepare_deepspeed leaves on each CPU rank, to 0.1 %: ZeRO-3 2P/N,
    ZeRO-2 (stage 0) 2P."""
    fx = _load(os.path.join(GOLDEN, "ds-ref-model.json"))
    with_ref = _engine_phases(_small_plan(stage, "dpo", "model"))["step"]["components"]["weights"]
    without = _engine_phases(_small_plan(stage, "simpo", "none"))["step"]["components"]["weights"]
    for r in fx["cases"][case]["ranks"]:
        assert with_ref - without == pytest.approx(r["resident_bytes"], rel=0.001), (case, with_ref - without)
