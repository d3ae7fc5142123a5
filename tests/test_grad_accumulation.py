"""Gradient accumulation on one GPU: the earlier micro-steps' gradients are resident through the next micro-step's
forward and its whole backward (HF Trainer `_run_epoch`: `model.zero_grad()` only after `optimizer.step()` on the
sync micro-step, transformers 5.24 trainer.py), so no backward moment is without them.

Hand-computed: the same plan at gradient_accumulation_steps 2 and 1 differs only in the gradients alive at each
moment (activations, logits and states do not depend on it), so each phase's difference is written out here.
Traced: tools/memtrace/golden/moments/ (python -m tools.memtrace.moments), held by the engine within 1 %.
"""
import json
import pathlib

import pytest

from zerocalc import Plan, estimate

# Llama 3.2 1B: tied embedding / lm_head
P = 1_235_814_400                 # every parameter
V, H, I, KV = 128_256, 2048, 8192, 512
HEAD = V * H                      # the tied embedding / lm_head weight, 262,668,288
NORM = H                          # the final norm
LAYER0 = 2 * H * H + 2 * H * KV + 3 * H * I + 2 * H     # q, o; k, v; gate, up, down; two norms: 60,821,504
LORA = 16 * 16 * ((H + H) + 2 * (H + KV) + (H + H) + 3 * (H + I))   # r 16, 7 targets, 16 layers: 11,272,192
FP32 = 4                          # bf16-mixed: fp32 parameters, so fp32 gradients


def _phases(method="full", ga=1, ckpt="full"):
    d = {"model": "llama-3.2-1b", "gpu": "h200-sxm-141gb", "framework": "single", "gpus_per_node": 1, "nodes": 1,
         "precision": "bf16-mixed", "optimizer": "adamw", "micro_batch_size": 1, "gradient_accumulation_steps": ga,
         "seq_len": 2048, "activation_checkpointing": ckpt, "attention": "flash", "method": method}
    if method == "lora":
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.0,
                     "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
    return estimate(Plan.from_dict(d)).to_dict()["per_gpu"]["phases"]


def test_hand_counts_match_the_model():
    assert 16 * LAYER0 + HEAD + NORM == P
    assert LAYER0 == 60_821_504 and LORA == 11_272_192


def test_full_fine_tune_keeps_every_gradient_through_backward():
    one, two = _phases(ga=1), _phases(ga=2)
    # forward and the loss: none at gas 1, all P accumulated at gas 2
    assert two["fwd"] - one["fwd"] == FP32 * P
    assert two["loss_bwd"] - one["loss_bwd"] == FP32 * P
    # top layer's recompute: gas 1 has the head's only (the norm's and the tied weight's lm_head part, waiting in
    # its AccumulateGrad input buffer); gas 2 has all P in .grad plus that waiting lm_head part
    assert two["recompute_top"] - one["recompute_top"] == FP32 * (P + HEAD) - FP32 * (HEAD + NORM)
    # bottom layer's recompute: gas 1 lacks layer 0's gradients (the embedding's is lm_head's, tied); gas 2 lacks
    # none and holds the waiting lm_head part besides
    assert two["recompute"] - one["recompute"] == FP32 * (P + HEAD) - FP32 * (P - LAYER0)
    # end of backward: the embedding's part and lm_head's, beside the accumulated .grad (gas 1: lm_head's is .grad)
    assert two["bwd_end"] - one["bwd_end"] == FP32 * HEAD
    # the step sees the same gradients either way
    assert two["step"] == one["step"]


def test_lora_adapter_gradients_are_there_at_the_top_layer():
    one, two = _phases("lora", 1), _phases("lora", 2)
    assert two["recompute_top"] - one["recompute_top"] == FP32 * LORA
    assert two["recompute"] == one["recompute"]       # at the bottom layer they all exist either way
    assert two["fwd"] - one["fwd"] == FP32 * LORA


def test_without_checkpointing_only_the_end_of_backward_moves():
    one, two = _phases(ga=1, ckpt="none"), _phases(ga=2, ckpt="none")
    assert two["loss_bwd"] - one["loss_bwd"] == FP32 * P
    assert two["bwd_end"] - one["bwd_end"] == FP32 * HEAD


MOMENTS = sorted((pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "moments")
                 .glob("*.json"))
WORKSPACE = 32 * 2**20     # the cuBLAS workspace on an sm 9.0 GPU (memory/runtime.py), which a trace does not see
# the engine's moments each traced one spans (tools/memtrace/moments.py): the segment after the last recompute
# is layer 0's backward (the engine's recompute moment holds its temporaries) and then the embedding's (bwd_end)
ENGINE_PHASES = {"recompute_top": ("recompute_top",), "recompute_last": ("recompute",),
                 "end_of_backward": ("recompute", "bwd_end")}


def _engine(eng: dict, moment: str) -> int:
    return max(eng[ph] for ph in ENGINE_PHASES[moment] if ph in eng) - WORKSPACE
# moments the engine does not hold yet, with the mechanism (strict xfails)
KNOWN = {
    ("l1b-lora-mixed-gc-ga2", "recompute_top"):
        "the recomputed LoRA layer holds 0.342 GiB traced against the engine's recompute_layer 0.223 GiB "
        "(memory/blocks.py), at gas 1 too (every LoRA / QLoRA checkpointed grid plan's recompute is 5-11 % low)",
    ("l1b-lora-mixed-gc-ga2", "recompute_last"): "the same recomputed LoRA layer (memory/blocks.py)",
    ("l1b-lora-mixed-gc-ga2", "end_of_backward"): "the same recomputed LoRA layer, in layer 0's backward",
}


def test_the_moments_fixture_is_there():
    assert {p.stem for p in MOMENTS} >= {"l1b-full-mixed-gc-ga2", "l1b-lora-mixed-gc-ga2", "l1b-full-mixed-ga2"}


@pytest.mark.parametrize("path", MOMENTS, ids=[p.stem for p in MOMENTS])
def test_engine_within_1_percent_of_each_traced_moment(path):
    row = json.loads(path.read_text())
    eng = estimate(Plan.from_dict(row["plan"])).to_dict()["per_gpu"]["phases"]
    miss = []
    for moment, traced in row["moments"].items():
        if (row["id"], moment) in KNOWN:
            continue
        got = _engine(eng, moment)
        if abs(got - traced) > 0.01 * traced:
            miss.append(f"{moment}: trace {traced / 2**30:.3f} engine {got / 2**30:.3f} GiB")
    assert not miss, miss


@pytest.mark.parametrize("key", sorted(KNOWN), ids=["-".join(k) for k in sorted(KNOWN)])
def test_known_moment_gaps_are_still_gaps(key, request):
    request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[key]))
    row = json.loads((MOMENTS[0].parent / f"{key[0]}.json").read_text())
    got = _engine(estimate(Plan.from_dict(row["plan"])).to_dict()["per_gpu"]["phases"], key[1])
    traced = row["moments"][key[1]]
    assert abs(got - traced) <= 0.01 * traced
