"""scripts/post_fidelity.py: the README's post-training error table is the script's output on the records, and
the script's arithmetic (median, bias, OOM boundaries) is what the table says it is."""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.post_fidelity import README, RECORDS, readme_block, render, right_side, table  # noqa: E402


def test_readme_table_matches_the_data():
    block = readme_block(README.read_text())
    assert block is not None, "README lost its post-fidelity markers"
    assert block == render(json.loads(RECORDS.read_text())), "run: python scripts/post_fidelity.py --write"


def _row(trainer, method, error, fits=True, outcome="ok"):
    return {"id": f"{trainer}-{method}-{error}", "trainer": trainer, "method": method, "quality": "approximate",
            "error": error, "fits": fits, "outcome": outcome}


def test_table_arithmetic():
    rs = [_row("trl", "dpo", 0.10), _row("trl", "dpo", -0.30), _row("trl", "dpo", 0.20),
          _row("verl", "grpo", None, fits=True, outcome="oom"), _row("verl", "grpo", -0.05)]
    lines = table(rs).splitlines()
    # trl dpo: |errors| 0.10, 0.30, 0.20 -> median 20.0 %; p90 at k = 0.9*2 = 1.8 between 0.20 and 0.30 -> 28.0 %;
    # signed errors +0.10, -0.30, +0.20 -> median +10.0 %; three runs that ran, all predicted to fit: 3/3
    assert lines[2] == "| trl | dpo | 3 | 20.0% | 28.0% | +10.0% | 3/3 |"
    # verl grpo: one figure (-5 %); the OOM record predicted to fit is on the wrong side: 1/2
    assert lines[3] == "| verl | grpo | 1 | 5.0% | 5.0% | -5.0% | 1/2 |"
    # all: |errors| 0.05, 0.10, 0.20, 0.30 -> median 15.0 %; signed -0.30, -0.05, 0.10, 0.20 -> +2.5 %;
    # p90 at k = 2.7 between 0.20 and 0.30 -> 27.0 %; boundaries 4 of 5
    assert lines[4] == "| **all** |  | 4 | 15.0% | 27.0% | +2.5% | 4/5 |"


def test_right_side_counts_both_directions():
    assert right_side([_row("a", "b", None, fits=False, outcome="oom"), _row("a", "b", 0.0, fits=False)]) == (1, 2)
