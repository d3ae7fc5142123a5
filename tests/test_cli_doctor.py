"""`zerocalc doctor --log FILE|- [--plan FILE] --format json|table` (plan-v1 Extension 3), in-process through
zerocalc.cli.main and once as a real subprocess. Bad input exits 2 with one stderr line, never a traceback."""
from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys

from zerocalc.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"
KEYS = {"kind", "phase", "gpu_total_bytes", "tried_to_allocate_bytes", "allocated_bytes",
        "reserved_unallocated_bytes", "free_bytes", "device", "fragmentation", "findings", "plan_changes"}


def run(capsys, *argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_has_the_contract_keys(capsys):
    rc, out, err = run(capsys, "doctor", "--log", str(LOGS / "pytorch-35901.txt"), "--format", "json")
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert KEYS <= set(d)
    # 10.84 GiB requested on a 23.65 GiB GPU, as printed
    assert d["kind"] == "cuda_oom" and d["device"] == "GPU 0"
    assert abs(d["tried_to_allocate_bytes"] - 10.84 * 2 ** 30) <= 0.005 * 2 ** 30
    assert abs(d["gpu_total_bytes"] - 23.65 * 2 ** 30) <= 0.005 * 2 ** 30
    assert d["fragmentation"] is True       # 12.53 - 1.06 = 11.47 GiB cached >= 10.84 GiB asked
    assert d["plan_changes"] == {}


def test_stdin_and_table(capsys, monkeypatch):
    text = (LOGS / "llamafactory-7396.txt").read_text(encoding="utf-8")
    rc, out, err = run(capsys, "doctor", "--log", "-", stdin=text, monkeypatch=monkeypatch)
    assert rc == 0 and err == ""
    assert "kind: nccl_timeout" in out and "device: rank 0" in out
    assert "ALLREDUCE seq 1580" in out and "600000 ms" in out


def test_with_a_plan(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "a100-sxm4-80gb", "micro_batch_size": 4,
                                "seq_len": 4096}))
    rc, out, err = run(capsys, "doctor", "--log", str(LOGS / "llamafactory-7532.txt"), "--plan", str(plan),
                       "--format", "json")
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert d["phase"] == "step" and d["device"] == "GPU 5"
    assert any(f["id"] == "estimate_vs_log" or f["id"] == "estimate_phase" for f in d["findings"])
    assert d["plan_changes"]                    # this plan does not fit 80 GiB: a change is proposed
    from zerocalc import Plan
    Plan.from_dict({**json.loads(plan.read_text()), **d["plan_changes"]})


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    rc, out, err = run(capsys, "doctor", "--log", str(tmp_path / "missing.txt"))
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("zerocalc: log: cannot read")
    binary = tmp_path / "b.log"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    rc, out, err = run(capsys, "doctor", "--log", str(binary))
    assert rc == 2 and err.startswith("zerocalc: log: not UTF-8") and err.count("\n") == 1
    bad_plan = tmp_path / "p.json"
    bad_plan.write_text('{"micro_batch_size": 0}')
    rc, out, err = run(capsys, "doctor", "--log", str(LOGS / "pytorch-35901.txt"), "--plan", str(bad_plan))
    assert rc == 2 and "micro_batch_size" in err and err.count("\n") == 1
    rc, out, err = run(capsys, "doctor")
    assert rc == 2 and err.count("\n") == 1 and "--log" in err


def test_subprocess():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    p = subprocess.run([sys.executable, "-m", "zerocalc", "doctor", "--log", str(LOGS / "deepspeed-3232.txt"),
                        "--format", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["kind"] == "host_oom" and d["findings"][0]["id"] == "host_oom_killed"
