"""validation/public-run.json (issue 19): every group of the public set says what its run did besides the steady
steps (a plan-v1 `run` block) and which window its figure covers, each with evidence (a URL and a quote); every
run-tagged plan parses; whole-process records are scored against the run's peak, per-log ones against the step."""
import json
import pathlib
import sys

import pytest

from zerocalc import Plan, estimate

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.fidelity import predict  # noqa: E402
from scripts.run_tags import WINDOWS, load_tags, tagged_plan, window  # noqa: E402

RECORDS = json.loads((ROOT / "validation" / "public.json").read_text())
TAGS = load_tags(ROOT / "validation" / "public-run.json")


def test_every_group_has_a_window_and_evidence():
    assert {r["source_group"] for r in RECORDS} == set(TAGS["groups"])
    for name, entry in TAGS["groups"].items():
        assert entry["window"] in WINDOWS, name
        for ev in entry["evidence"]:
            assert ev["url"].startswith("https://") and ev["quote"].strip() and ev["fact"].strip(), name


@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_every_run_tagged_plan_parses(rec):
    Plan.from_dict(tagged_plan(rec, TAGS))


def test_windows_pick_the_figure():
    rec = next(r for r in RECORDS if r["source_group"].startswith("LitGPT resource") and r["outcome"] == "ok")
    assert window(rec, TAGS) == "whole-process"
    d = estimate(Plan.from_dict(rec["plan"])).to_dict()
    assert predict(rec, "whole-process")[0] == d["run"]["peak_allocated_bytes"]
    assert predict(rec, "per-log")[0] == d["per_gpu"]["peak_allocated_bytes"]
    tt = next(r for r in RECORDS if r["source_group"].startswith("torchtune"))
    assert window(tt, TAGS) == "per-log"


def test_record_entries_cite_and_the_jan_2024_full_rows_build_on_the_gpu():
    """A record's entry replaces its group's: it cites as a group does; torchtune's Jan 2024 full-finetune rows
    (full_finetune.py built the fp32 model on each GPU before FSDP1 wrapped it) carry run.load.on_device_build,
    the LoRA rows (built on meta) do not, and a per-log nvidia-smi figure of such a row is the step beside the
    build's cached segments: per_gpu's device_used plus what run.reserved_after_steps holds beyond the step."""
    for name, entry in TAGS["records"].items():
        assert entry["window"] in WINDOWS and entry["evidence"], name
        for ev in entry["evidence"]:
            assert ev["url"].startswith("https://") and ev["quote"].strip() and ev["fact"].strip(), name
    jan = [r for r in RECORDS if r["source_group"] == "torchtune README (Jan 2024, nvidia-smi)"]
    built = {r["id"] for r in jan if (tagged_plan(r, TAGS).get("run", {}).get("load") or {}).get("on_device_build")}
    assert built == {r["id"] for r in jan if r["plan"]["method"] == "full"} and len(built) == 2
    rec = next(r for r in jan if r["id"] in built)
    plan = tagged_plan(rec, TAGS)
    d = estimate(Plan.from_dict(plan)).to_dict()
    beside = d["run"]["reserved_after_steps"]["10"] - d["per_gpu"]["peak_reserved_bytes"]
    assert beside > 0
    assert predict({**rec, "plan": plan}, "per-log")[0] == d["per_gpu"]["device_used_bytes"] + beside
    assert predict(rec, "per-log")[0] == estimate(Plan.from_dict(rec["plan"])).to_dict()["per_gpu"]["device_used_bytes"]
