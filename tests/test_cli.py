"""The command line (`zerocalc estimate | presets | export`), in-process through zerocalc.cli.main and once
as a real subprocess (`python -m zerocalc`), against contracts/plan-v1.md.

Bad input must exit 2 with exactly one stderr line that names the plan key, never a traceback.
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys

import pytest

from zerocalc.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Ids of data/reference/models.json and gpus.json (the contract's preset lists) and data/presets/checkpoints.json,
# written out here.
MODEL_IDS = [
    "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-2-7b", "llama-2-13b",
    "llama-2-70b", "mistral-7b-v0.3", "mixtral-8x7b", "mistral-nemo-12b", "qwen2.5-0.5b", "qwen2.5-1.5b",
    "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "qwen3-0.6b", "qwen3-4b", "qwen3-8b", "qwen3-14b",
    "qwen3-32b", "qwen3-30b-a3b", "gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "gemma-3-1b", "gemma-3-4b",
    "gemma-3-12b", "gemma-3-27b", "phi-3-mini-4k", "phi-4", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b",
    "olmo-2-7b", "falcon-7b", "gpt2", "bert-base-uncased",
    # data/presets/checkpoints.json, appended after the reference's
    "qwen3-vl-8b-instruct", "llama-4-scout-17b-16e", "llama-4-maverick-17b-128e", "glm-4.5", "glm-4.5-air",
    "qwen2.5-vl-7b-instruct", "gemma-3-4b-it", "qwen3.5-27b", "mistral-small-3-24b", "gemma-4-31b-it",
]
GPU_IDS = [
    "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb", "t4", "a100-sxm4-40gb", "a100-sxm4-80gb",
    "a100-pcie-40gb", "a100-pcie-80gb", "a10", "a10g", "rtx-3090", "l4", "l40s", "rtx-4090", "rtx-6000-ada",
    "h100-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb", "h200-sxm-141gb", "h200-nvl-141gb", "gh200", "b200", "b300",
    "gb200", "rtx-5090", "mi250x", "mi300x", "mi325x", "gaudi2", "gaudi3",
]
COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters", "buffers",
              "runtime")
GIB = 1 << 30


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def estimate_json(capsys, *argv, **kw) -> dict:
    rc, out, err = run(capsys, "estimate", "--format", "json", *argv, **kw)
    assert rc == 0, err
    assert err == ""
    return json.loads(out)


def check_estimate_keys(d: dict) -> None:
    """The keys plan-v1.md promises, with their types."""
    pg = d["per_gpu"]
    assert set(COMPONENTS) <= set(pg["components"])
    for name, b in pg["components"].items():
        assert type(b) is int and b >= 0, name
    for k in ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes", "capacity_bytes"):
        assert type(pg[k]) is int and pg[k] > 0, k
    assert type(d["fits"]) is bool
    assert d["fits"] == d["run"]["fits"] == (d["run"]["device_used_bytes"] <= pg["capacity_bytes"])
    assert d["primary_driver"] in COMPONENTS
    for k in ("host_per_node_bytes", "tokens_per_step", "global_batch_size", "trainable_params", "total_params"):
        assert type(d[k]) is int and d[k] >= 0, k
    assert d["min_gpus"] is None or (type(d["min_gpus"]) is int and d["min_gpus"] >= 1)
    assert isinstance(d["warnings"], list)
    for w in d["warnings"]:
        assert isinstance(w["id"], str) and w["id"]
        assert w["severity"] in ("error", "warning", "info")
        assert isinstance(w["message"], str) and w["message"]
    assert sum(pg["components"].values()) == pg["device_used_bytes"]
    assert pg["peak_allocated_bytes"] <= pg["peak_reserved_bytes"] <= pg["device_used_bytes"]


def write_plan(tmp_path, d) -> str:
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(d) if not isinstance(d, str) else d)
    return str(p)


def assert_one_line_error(rc: int, out: str, err: str, *names: str) -> None:
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in names:
        assert n in lines[0], (n, lines[0])


# --- estimate ------------------------------------------------------------------------------------------


def test_estimate_json_default_plan(capsys):
    d = estimate_json(capsys)
    check_estimate_keys(d)
    # default plan: llama-3.1-8b, 4 x A100 80GB, micro 2, accumulation 4, seq 4096
    assert d["tokens_per_step"] == 4096 * 2 * 4 * 4 == 131_072
    assert d["global_batch_size"] == 2 * 4 * 4 == 32
    # Llama 3.1 8B: 8,030,261,248 parameters (the published count); full fine-tuning trains all of them
    assert d["total_params"] == d["trainable_params"] == 8_030_261_248
    # A100 SXM4 80GB: nvidia-smi reports 81920 MiB = 81920 * 2**20 bytes
    assert d["per_gpu"]["capacity_bytes"] == 81920 * 2 ** 20 == 85_899_345_920
    assert d["per_gpu"]["components"]["lora_adapters"] == 0


def test_estimate_table(capsys):
    rc, out, err = run(capsys, "estimate")
    assert rc == 0 and err == ""
    assert "Llama 3.1 8B" in out and "4 x NVIDIA A100 SXM4 80GB" in out and "ZeRO-2" in out
    for name in COMPONENTS:
        assert f"  {name} " in out
    for label in ("peak allocated", "peak reserved", "device used", "capacity"):
        assert label in out
    assert "   80.00" in out                    # capacity 80 GiB
    assert "tokens/step: 131,072" in out and "global batch: 32" in out
    assert ("FITS" in out) != ("OUT OF MEMORY" in out)


def test_table_numbers_match_json(capsys):
    d = estimate_json(capsys, "--model", "qwen2.5-0.5b", "--zero-stage", "3")
    rc, out, _ = run(capsys, "estimate", "--model", "qwen2.5-0.5b", "--zero-stage", "3")
    line = next(ln for ln in out.splitlines() if ln.startswith("device used"))
    assert float(line.split()[2]) == pytest.approx(d["per_gpu"]["device_used_bytes"] / GIB, abs=0.006)


def test_flags_override_the_plan_file(capsys, tmp_path):
    f = write_plan(tmp_path, {"model": "qwen2.5-0.5b", "zero_stage": 2, "micro_batch_size": 3})
    rc, out, _ = run(capsys, "estimate", "--plan", f)
    assert rc == 0 and "ZeRO-2" in out
    rc, out, _ = run(capsys, "estimate", "--plan", f, "--zero-stage", "3")
    assert rc == 0 and "ZeRO-3" in out and "ZeRO-2" not in out
    # keys the flags do not touch still come from the file: 4096 x 3 x 4 x 4 = 196,608
    d = estimate_json(capsys, "--plan", f, "--zero-stage", "3")
    assert d["tokens_per_step"] == 4096 * 3 * 4 * 4
    # the ds_config shows the stage directly
    rc, out, _ = run(capsys, "export", "--to", "ds", "--plan", f, "--zero-stage", "3")
    assert rc == 0 and json.loads(out)["zero_optimization"]["stage"] == 3
    rc, out, _ = run(capsys, "export", "--to", "ds", "--plan", f)
    assert json.loads(out)["zero_optimization"]["stage"] == 2


def test_flags_change_the_estimate(capsys):
    base = estimate_json(capsys, "--model", "qwen2.5-0.5b")
    assert base["model"]["total_params"] == 494_032_768    # Qwen2.5-0.5B, tied embeddings
    more = estimate_json(capsys, "--model", "qwen2.5-0.5b", "--micro-batch-size", "4", "--seq-len", "1024",
                         "--gpus-per-node", "8", "--nodes", "2")
    assert more["tokens_per_step"] == 1024 * 4 * 4 * 16
    assert more["global_batch_size"] == 4 * 4 * 16
    lora = estimate_json(capsys, "--model", "qwen2.5-0.5b", "--method", "lora", "--lora-rank", "8")
    assert 0 < lora["trainable_params"] < base["trainable_params"]
    assert lora["per_gpu"]["components"]["lora_adapters"] > 0


def test_plan_from_stdin(capsys, monkeypatch):
    d = estimate_json(capsys, "--plan", "-", stdin=json.dumps({"micro_batch_size": 1, "seq_len": 512}),
                      monkeypatch=monkeypatch)
    assert d["tokens_per_step"] == 512 * 1 * 4 * 4 == 8192


def test_plan_from_stdin_with_override(capsys, monkeypatch):
    rc, out, _ = run(capsys, "estimate", "--plan", "-", "--zero-stage", "3",
                     stdin='{"model": "gpt2", "zero_stage": 1}', monkeypatch=monkeypatch)
    header = out.splitlines()[0]
    assert rc == 0 and "GPT-2" in header and "ZeRO-3" in header


def test_set_deepspeed_overlap_comm(capsys):
    # ZeRO-2, bf16: the reduce bucket is 2 bytes x 5e8 elements = 1e9 bytes; overlap_comm keeps two
    # (stage_1_and_2.py) = 2e9 bytes
    off = estimate_json(capsys)
    on = estimate_json(capsys, "--set", "deepspeed.overlap_comm=true")
    assert off["per_gpu"]["deepspeed_buffers"]["ipg_bucket"] == 2 * 500_000_000
    assert on["per_gpu"]["deepspeed_buffers"]["ipg_bucket"] == 2 * 2 * 500_000_000
    assert "overlap-comm-doubles-bucket" in [w["id"] for w in on["warnings"]]
    assert "overlap-comm-doubles-bucket" not in [w["id"] for w in off["warnings"]]


def test_set_reaches_the_export(capsys):
    rc, out, _ = run(capsys, "export", "--to", "ds", "--set", "deepspeed.overlap_comm=true",
                     "--set", "deepspeed.reduce_bucket_size=200000000")
    z = json.loads(out)["zero_optimization"]
    assert z["overlap_comm"] is True and z["reduce_bucket_size"] == 200_000_000


def test_set_json_values_and_strings(capsys):
    # a JSON value (number) and a bare string (not JSON) both land in the plan
    d = estimate_json(capsys, "--set", "micro_batch_size=1", "--set", "model=gpt2", "--set", "seq_len=256")
    assert d["model"]["total_params"] == 124_439_808     # GPT-2 small, tied embeddings
    assert d["tokens_per_step"] == 256 * 1 * 4 * 4


# --- presets -------------------------------------------------------------------------------------------


def test_presets_models_lists_all_49(capsys):
    rc, out, err = run(capsys, "presets", "models")
    assert rc == 0 and err == ""
    ids = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
    assert len(MODEL_IDS) == 49
    assert ids == MODEL_IDS


def test_presets_gpus_lists_all_31(capsys):
    rc, out, err = run(capsys, "presets", "gpus")
    assert rc == 0 and err == ""
    ids = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
    assert len(GPU_IDS) == 31
    assert ids == GPU_IDS
    a100 = next(ln for ln in out.splitlines() if ln.startswith("a100-sxm4-80gb "))
    assert "80.00 GiB" in a100


# --- export ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("micro,gas,gpn,nodes", [(2, 4, 4, 1), (3, 5, 8, 2), (1, 1, 1, 1), (16, 2, 8, 16)])
def test_export_ds_batch_triple(capsys, micro, gas, gpn, nodes):
    rc, out, err = run(capsys, "export", "--to", "ds", "--micro-batch-size", str(micro),
                       "--gradient-accumulation-steps", str(gas), "--gpus-per-node", str(gpn), "--nodes", str(nodes))
    assert rc == 0 and err == ""
    cfg = json.loads(out)
    assert cfg["train_batch_size"] == micro * gas * gpn * nodes
    assert cfg["train_micro_batch_size_per_gpu"] == micro
    assert cfg["gradient_accumulation_steps"] == gas


def test_export_ds_default_is_2x4x4(capsys):
    rc, out, _ = run(capsys, "export", "--to", "ds")
    assert json.loads(out)["train_batch_size"] == 32


# --- bad input: exit 2, one line naming the key, no traceback ---------------------------------------------


@pytest.mark.parametrize("argv,names", [
    (["--micro-batch-size", "0"], ["micro_batch_size", "1"]),
    (["--micro-batch-size", "-3"], ["micro_batch_size"]),
    (["--seq-len", "abc"], ["seq_len", "integer", "abc"]),
    (["--seq-len", "2.5"], ["seq_len"]),
    (["--zero-stage", "4"], ["zero_stage", "0", "3"]),
    (["--framework", "megatron"], ["framework", "deepspeed", "fsdp", "ddp", "single"]),
    (["--model", "llama-9b"], ["model", "llama-9b"]),
    (["--gpu", "a100"], ["gpu", "a100"]),
    (["--framework", "single"], ["framework"]),                      # default cluster has 4 GPUs
    (["--framework", "fsdp", "--zero-stage", "1"], ["zero_stage"]),
    (["--framework", "ddp", "--offload-optimizer", "cpu"], ["offload_optimizer"]),
    (["--lora-rank", "0"], ["lora.rank"]),
    (["--quant-type", "nf3"], ["quantization.type", "nf4", "fp4", "int8"]),
    (["--set", "deepspeed.overlap_comm=maybe"], ["deepspeed.overlap_comm", "true or false"]),
    (["--set", "deepspeed.foo=1"], ["deepspeed.foo", "unknown key"]),
    (["--set", "deepspeed.sub_group_size=\"auto\""], ["deepspeed.sub_group_size"]),
    (["--set", "bogus=1"], ["bogus", "unknown key"]),
    (["--set", "novalue"], ["--set", "key=value"]),
])
@pytest.mark.parametrize("cmd", [["estimate"], ["estimate", "--format", "json"], ["export", "--to", "ds"]])
def test_bad_flag(capsys, cmd, argv, names):
    rc, out, err = run(capsys, *cmd, *argv)
    assert_one_line_error(rc, out, err, *names)


def test_malformed_json_file(capsys, tmp_path):
    f = write_plan(tmp_path, '{"zero_stage": 3,,}')
    rc, out, err = run(capsys, "estimate", "--plan", f)
    assert_one_line_error(rc, out, err, "plan", "JSON", "line 1")


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"llama-3.1-8b"', "null"])
def test_plan_file_not_an_object(capsys, tmp_path, text):
    rc, out, err = run(capsys, "estimate", "--plan", write_plan(tmp_path, text))
    assert_one_line_error(rc, out, err, "plan", "object")


def test_empty_plan_file(capsys, tmp_path):
    rc, out, err = run(capsys, "estimate", "--plan", write_plan(tmp_path, ""))
    assert_one_line_error(rc, out, err, "plan", "JSON")


def test_unknown_key_in_file(capsys, tmp_path):
    f = write_plan(tmp_path, {"model": "gpt2", "zero_stag": 3})
    rc, out, err = run(capsys, "estimate", "--plan", f)
    assert_one_line_error(rc, out, err, "zero_stag", "unknown key", "zero_stage")


def test_unknown_nested_key_in_file(capsys, tmp_path):
    f = write_plan(tmp_path, {"lora": {"rank": 8, "r": 8}})
    rc, out, err = run(capsys, "estimate", "--plan", f)
    assert_one_line_error(rc, out, err, "lora.r", "unknown key")


def test_bad_value_in_file(capsys, tmp_path):
    f = write_plan(tmp_path, {"micro_batch_size": 0})
    rc, out, err = run(capsys, "export", "--to", "ds", "--plan", f)
    assert_one_line_error(rc, out, err, "micro_batch_size")


def test_bad_file_value_fixed_by_flag(capsys, tmp_path):
    # the flag overrides the bad value before validation
    f = write_plan(tmp_path, {"micro_batch_size": 0})
    rc, _, err = run(capsys, "estimate", "--plan", f, "--micro-batch-size", "1")
    assert rc == 0, err


def test_missing_file(capsys, tmp_path):
    missing = str(tmp_path / "no-such-plan.json")
    rc, out, err = run(capsys, "estimate", "--plan", missing)
    assert_one_line_error(rc, out, err, "plan", "no-such-plan.json")


def test_malformed_stdin(capsys, monkeypatch):
    rc, out, err = run(capsys, "estimate", "--plan", "-", stdin="{not json", monkeypatch=monkeypatch)
    assert_one_line_error(rc, out, err, "plan", "JSON")


# --- the real entry point ---------------------------------------------------------------------------------


def _subprocess(*argv, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    return subprocess.run([sys.executable, "-m", "zerocalc", *argv], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_subprocess_estimate_json():
    r = _subprocess("estimate", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    d = json.loads(r.stdout)
    check_estimate_keys(d)
    assert d["global_batch_size"] == 32


def test_subprocess_stdin_and_bad_input():
    r = _subprocess("estimate", "--format", "json", "--plan", "-", stdin='{"model": "gpt2", "seq_len": 256}')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tokens_per_step"] == 256 * 2 * 4 * 4
    r = _subprocess("estimate", "--micro-batch-size", "0")
    assert_one_line_error(r.returncode, r.stdout, r.stderr, "micro_batch_size")


@pytest.mark.parametrize("argv", [["estimate", "--format", "xml"], ["presets", "tokenizers"], ["export"],
                                  ["frobnicate"], []])
def test_usage_errors_exit_2_without_traceback(capsys, argv):
    # argparse's own usage errors: exit 2, one stderr line saying what is wrong
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zerocalc: ")
