"""The estimate table and the verdict for a plan of variable lengths (issue 21 item 4): reserved after 10 / 100 /
1000 / 10000 steps, and "fits for ~N steps, then fragmentation" when run.fragmentation_oom_step is set."""
import json

from app.view import verdict_text
from zerocalc import Plan, estimate
from zerocalc.cli import format_table, main

GIB = 1 << 30
VAR = {"model": "llama-3.1-8b", "gpu": "a100-sxm4-80gb", "seq_len": 8192, "micro_batch_size": 2, "method": "lora",
       "activation_checkpointing": "full", "attention": "flash", "loss": "chunked",
       "data": {"lengths": "padded-longest", "mean_len": 1500, "p99_len": 7000}}
# micro-batch 4 with the full fp32 logits: the longest batch of 100 steps still fits, its pinned cache does not
EDGE = {**VAR, "micro_batch_size": 4, "loss": "standard"}


def table(plan: dict) -> str:
    est = estimate(Plan.from_dict(plan))
    return format_table(est), est.to_dict()


def test_table_shows_reserved_over_steps():
    text, d = table(VAR)
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("reserved over the run"))
    assert lines[head].split()[4:] == ["10", "st", "100", "st", "1000", "st", "10000", "st"]
    row = lines[head + 1].split()
    assert row[0:2] == ["data.lengths", "padded-longest"]
    after = d["run"]["reserved_after_steps"]
    assert [float(x) for x in row[2:]] == [round(after[n] / GIB, 2) for n in ("10", "100", "1000", "10000")]
    assert float(row[2]) <= float(row[3]) <= float(row[4]) <= float(row[5])     # never decreases with steps
    assert "no fragmentation out-of-memory within 10000 steps" in text


def test_fixed_lengths_show_no_over_steps_block():
    text, _ = table({k: v for k, v in VAR.items() if k != "data"})
    assert "reserved over the run" not in text


def test_fragmentation_verdict_in_the_table():
    text, d = table(EDGE)
    n = d["run"]["fragmentation_oom_step"]
    assert n in (10, 100, 1000, 10000)
    assert f"FITS for ~{n} steps, then fragmentation: set expandable_segments or pack" in text
    assert f"fragmentation runs the device out by step {n}" in text
    # expandable segments unmap whole free pages: no fragmentation verdict
    text2, d2 = table({**EDGE, "allocator": {"expandable_segments": True}})
    assert d2["run"]["fragmentation_oom_step"] is None and "then fragmentation" not in text2


def test_cli_estimate_prints_it(tmp_path, capsys):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(EDGE))
    assert main(["estimate", "--plan", str(p)]) == 0
    assert "then fragmentation: set expandable_segments or pack" in capsys.readouterr().out


def _est(fits, oom, device=70 * GIB):
    step = {"device_used_bytes": device}
    return {"capacity_bytes": 80 * GIB, "fits": fits, "per_gpu": {"device_used_bytes": device},
            "run": {"device_used_bytes": device, "phases": {"step": step}, "fragmentation_oom_step": oom}}


def test_page_verdict():
    assert verdict_text(_est(True, 1000)) == "Fits for ~1000 steps, then fragmentation: set expandable_segments or pack"
    assert verdict_text(_est(True, None)) == "Fits with 10.00 GiB headroom"   # 80 - 70 GiB
    assert verdict_text(_est(False, 100, 82 * GIB)).startswith("Fits for ~100 steps, then fragmentation")
    assert verdict_text(_est(False, None, 82 * GIB)) == "Out of memory by 2.00 GiB"
