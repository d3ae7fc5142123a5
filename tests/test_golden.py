"""Every estimate of 470 frozen plans is byte-identical to tests/data/golden_estimates.json (scripts/golden.py):
a refactor moves no figure. Keys the golden file lacks (later, compatible additions) are not compared."""
import json
import pathlib

from zerocalc import Plan, estimate

from scripts.golden import GOLDEN, subset_diff


def test_golden_file_is_large_and_varied():
    rows = json.loads(GOLDEN.read_text())
    kinds = {r["id"].split(":")[0] for r in rows}
    assert len(rows) >= 400 and kinds >= {"public", "trace", "dsprobe", "fsdpprobe", "example", "random"}


def test_every_estimate_is_unchanged():
    bad = []
    for row in json.loads(pathlib.Path(GOLDEN).read_text()):
        diff = subset_diff(row["estimate"], estimate(Plan.from_dict(row["plan"])).to_dict())
        if diff:
            bad.append(f"{row['id']}: {'; '.join(diff[:3])}")
    assert not bad, f"{len(bad)} plans moved:\n" + "\n".join(bad[:20])
