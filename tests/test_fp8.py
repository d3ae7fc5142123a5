"""plan-v1 Extension 9, ``fp8``: torchao Float8Linear for the block linears (memory/fp8.py, step/ops.py).

Hand-computed on Llama 3.1 8B (hidden 4096, kv 1024, MLP 14336, 32 layers) on an H100 SXM (989.5 bf16 and
1979 fp8 dense TFLOP/s, 3350 GB/s, MAMF 792.1 TFLOP/s) at micro batch 1 x 8192 tokens.
"""
from __future__ import annotations

import io
import json
import pathlib
from contextlib import redirect_stderr, redirect_stdout

import pytest

from zerocalc import Plan, PlanError, estimate
from zerocalc.cli import main

DATA = pathlib.Path(__file__).parent / "data"
BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "gpus_per_node": 8, "micro_batch_size": 1,
        "seq_len": 8192}
T = 8192
# (d_in, d_out) of one Llama 3.1 8B block's linears: q, k, v, o, gate, up, down
LINEARS = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]


@pytest.mark.parametrize("d, needle", [
    ({"fp8": "e4m3"}, "none, tensorwise, rowwise"),
    ({"fp8": True}, "none, tensorwise, rowwise"),
    ({"fp8": "tensorwise"}, "no fp8 tensor cores"),                           # the default GPU is an A100
    ({"fp8": "rowwise", "gpu": "h100-sxm-80gb", "method": "lora"}, "method full"),
    ({"fp8": "rowwise", "gpu": "h100-sxm-80gb", "precision": "fp16-mixed"}, "bf16"),
    ({"fp8": "rowwise", "gpu": {"name": "x", "memory_gib": 80}}, "fp8_dense_tflops"),
])
def test_bad_fp8_names_the_key(d, needle):
    with pytest.raises(PlanError) as e:
        Plan.from_dict(d)
    assert e.value.key == "fp8" and needle in str(e.value)


def test_cli_exits_2_naming_fp8(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({**BASE, "fp8": "fp4"}))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["estimate", "--plan", str(f)])
    assert rc == 2 and out.getvalue() == "" and "fp8" in err.getvalue() and "Traceback" not in err.getvalue()


def test_written_only_when_set():
    assert "fp8" not in Plan.from_dict(BASE).to_dict()
    p = Plan.from_dict({**BASE, "fp8": "tensorwise"})
    assert p.to_dict()["fp8"] == "tensorwise" and Plan.from_dict(p.to_dict()) == p
    # a custom GPU carrying its fp8 rate is accepted
    assert Plan.from_dict({"fp8": "rowwise", "gpu": {"name": "x", "memory_gib": 80, "fp8_dense_tflops": 900}})


def test_traced_float8linear_saves_what_a_bf16_linear_saves():
    """The fixture (tools/fp8trace/saved.py, torchao 0.18.0): 256 tokens x 512 -> 1024, bf16 input
    2 * 256 * 512 = 262,144 B and the bf16 weight 2 * 512 * 1024 = 1,048,576 B, for every recipe."""
    rows = json.loads((DATA / "fp8_saved.json").read_text())["rows"]
    assert [r["recipe"] for r in rows] == ["bf16", "tensorwise", "rowwise"]
    assert all(r["saved_bytes"] == 262_144 + 1_048_576 for r in rows)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_memory_adds_one_linears_backward_casts(recipe):
    """Saved activations unchanged; the MLP's gate (4096 -> 14336) is the largest backward cast set: grad_output
    twice, the input and the weight, 1 B each: 8192 * (2 * 14336 + 4096) + 4096 * 14336 = 327,155,712 B."""
    base = estimate(Plan.from_dict(BASE)).per_gpu
    fp8 = estimate(Plan.from_dict({**BASE, "fp8": recipe})).per_gpu
    casts = 8192 * (2 * 14336 + 4096) + 4096 * 14336
    assert casts == 327_155_712
    assert fp8.phase_allocated["bwd_end"] - base.phase_allocated["bwd_end"] == casts
    for ph in ("fwd", "loss_bwd", "step"):
        assert fp8.phase_allocated[ph] == base.phase_allocated[ph], ph


def _rate(peak_tflops: float, d: int) -> float:
    """kernels.py: peak x MAMF ratio (792.1 / 989.5) x 0.9 sustained x 0.85 on Hopper x d / (d + 128)."""
    return peak_tflops * 1e12 * (792.1 / 989.5) * 0.9 * 0.85 * d / (d + 128)


def test_step_gemms_at_the_fp8_peak_and_casts_memory_bound():
    """Every block linear is compute-bound here, so its forward GEMM takes half as long at 1979 as at 989.5
    TFLOP/s; its forward casts read the input and the weight twice in bf16 and write them once in fp8 (5 B per
    element) at 0.65 of 3350 GB/s; the lm_head GEMM, attention and the rest are unchanged."""
    base = estimate(Plan.from_dict(BASE)).step
    fp8 = estimate(Plan.from_dict({**BASE, "fp8": "tensorwise"})).step
    bf16_fwd = 32 * sum(2 * T * i * o / _rate(989.5, min(T, i, o)) for i, o in LINEARS)
    fp8_fwd = 32 * sum(2 * T * i * o / _rate(1979, min(T, i, o)) for i, o in LINEARS)
    assert fp8_fwd == pytest.approx(bf16_fwd / 2, rel=1e-12)
    assert base.micro.forward.gemm_s - fp8.micro.forward.gemm_s == pytest.approx(bf16_fwd - fp8_fwd, rel=1e-9)
    casts = 32 * sum(5 * (T * i + i * o) for i, o in LINEARS)
    assert fp8.micro.forward.memory_s - base.micro.forward.memory_s == pytest.approx(casts / (3350e9 * 0.65),
                                                                                     rel=1e-9)
    assert fp8.micro.forward.attention_s == base.micro.forward.attention_s
    # the breakdown carries it: less GEMM, more memory-bound time, the parts still summing to time_s
    b, b0 = fp8.breakdown(), base.breakdown()
    assert b["gemm_s"] < b0["gemm_s"] and b["memory_bound_s"] > b0["memory_bound_s"]
    assert sum(b.values()) == pytest.approx(fp8.time_s, rel=1e-12)
    assert any("fp8" in n and "1979" in n for n in fp8.notes)
