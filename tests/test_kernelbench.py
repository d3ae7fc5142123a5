"""tools/kernelbench: the device script runs end to end at toy sizes (--smoke) and writes every part."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


def test_smoke_run_writes_every_part(tmp_path):
    from tools.kernelbench.__main__ import main
    out = tmp_path / "rates.json"
    assert main(["--smoke", "--out", str(out), "--seconds", "60"]) == 0
    res = json.loads(out.read_text())
    assert res["smoke"] is True
    for part in ("gemm", "attention", "memory", "adamw"):
        assert isinstance(res[part], list) and res[part], part
    g = res["gemm"][0]
    assert g["tflops"] == pytest.approx(2 * g["m"] * g["k"] * g["n"] / g["s"] / 1e12)
    assert {m["op"] for m in res["memory"]} == {"copy", "add", "rmsnorm_fp32"}
    assert all(m["gb_s"] > 0 for m in res["memory"]) and res["launch"]["us_per_kernel"] > 0


def test_refuses_full_run_without_cuda(tmp_path, capsys):
    from tools.kernelbench.__main__ import main
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["--out", str(tmp_path / "x.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().out
