"""validation/public-corrections.json: every correction names a real record or group, fills only a key the
published plan omits, keeps the plan valid, and carries the source's own line as evidence."""
import json
import pathlib
import sys

import pytest

from zerocalc import Plan

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from plan_corrections import corrected_plan, corrections_for, load_corrections, replacements_for  # noqa: E402

RECORDS = json.loads((ROOT / "validation" / "public.json").read_text())
BY_ID = {r["id"]: r for r in RECORDS}
FIXES = load_corrections(ROOT / "validation" / "public-corrections.json")


def test_every_entry_names_a_record_or_group_and_cites_a_quote():
    assert set(FIXES["records"]) <= set(BY_ID)
    assert set(FIXES["groups"]) <= {r["source_group"] for r in RECORDS}
    for part in ("groups", "records"):
        for name, entry in FIXES[part].items():
            for ev in entry["evidence"]:
                assert ev["url"].startswith("https://github.com/"), name
                assert ev["quote"].strip() and ev["fact"].strip(), name


def test_a_correction_only_fills_keys_the_published_plan_omits():
    for rid, entry in FIXES["records"].items():
        assert not set(entry.get("set", {})) & set(BY_ID[rid]["plan"]), rid
    for rec in RECORDS:
        got = corrections_for(rec, FIXES)
        assert not set(got) & set(rec["plan"]), rec["id"]


@pytest.mark.parametrize("rid", sorted(r["id"] for r in RECORDS if corrections_for(r, FIXES)))
def test_every_corrected_plan_parses_with_the_value(rid):
    plan = Plan.from_dict(corrected_plan(BY_ID[rid], FIXES))
    for key, value in corrections_for(BY_ID[rid], FIXES).items():
        assert getattr(plan, key) == value, (rid, key)


def test_group_then_record_and_a_stated_key_wins():
    rec = {"id": "x", "source_group": "g", "plan": {"schema": 1, "micro_batch_size": 2}}
    fixes = {"groups": {"g": {"set": {"gradient_accumulation_steps": 1, "micro_batch_size": 8}, "evidence": []}},
             "records": {"x": {"set": {"gradient_accumulation_steps": 64}, "evidence": []}}}
    assert corrected_plan(rec, fixes) == {"schema": 1, "micro_batch_size": 2, "gradient_accumulation_steps": 64}
    assert rec["plan"] == {"schema": 1, "micro_batch_size": 2}          # the record is not changed


def test_litgpt_single_device_accumulation_is_128_over_the_micro_batch():
    # finetune/lora.py at 0cc02afa: batch_size = 128, gradient_accumulation_iters = batch_size // micro_batch_size
    assert corrections_for(BY_ID["litgpt_rt_lora1gpu_phi-15_none_mb4"], FIXES) == {"gradient_accumulation_steps": 32}
    assert corrections_for(BY_ID["litgpt_rt_lora1gpu_phi-15_none_mb1"], FIXES) == {"gradient_accumulation_steps": 128}


def test_a_replacement_names_the_published_value_and_applies_only_while_the_record_states_it():
    for rid, entry in FIXES["records"].items():
        for key, was in entry.get("was", {}).items():
            assert BY_ID[rid]["plan"][key] == was, (rid, key)      # public.json still says what `was` quotes
            assert corrected_plan(BY_ID[rid], FIXES)[key] == entry["replace"][key], (rid, key)
    fixes = {"groups": {}, "records": {"x": {"replace": {"optimizer": "sgd"}, "was": {"optimizer": "adamw"},
                                             "evidence": []}}}
    rec = {"id": "x", "source_group": "g", "plan": {"schema": 1, "optimizer": "adamw"}}
    assert corrected_plan(rec, fixes) == {"schema": 1, "optimizer": "sgd"}
    moved = {**rec, "plan": {"schema": 1, "optimizer": "adafactor"}}      # the record changed: no override
    assert replacements_for(moved, fixes) == {} and corrected_plan(moved, fixes)["optimizer"] == "adafactor"


def test_a_replacement_without_its_published_value_is_refused(tmp_path):
    bad = {"schema": 1, "groups": {}, "records": {"x": {"replace": {"optimizer": "sgd"}, "evidence": [{"q": 1}]}}}
    (tmp_path / "c.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="was"):
        load_corrections(tmp_path / "c.json")


def test_torchtune_4x4090_full_row_trains_with_the_sgd_of_the_config_it_was_measured_with():
    # README a95c6b931 adds 12.01 GB with full_finetune_distributed.yaml, whose optimizer is torch.optim.SGD there
    plan = Plan.from_dict(corrected_plan(BY_ID["tt_l2_7b_full_4x4090"], FIXES))
    assert plan.optimizer == "sgd"
