"""validation/public-stack.json (issue 13, Data): every tag names a real record or group, every tagged
plan is a valid plan-v1 plan, and every tag value carries evidence with a URL."""
import json
import pathlib
import sys

import pytest

from zerocalc import Plan

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from stack_tags import load_tags, stack_for, tagged_plan  # noqa: E402

RECORDS = json.loads((ROOT / "validation" / "public.json").read_text())
BY_ID = {r["id"]: r for r in RECORDS}
TAGS = load_tags(ROOT / "validation" / "public-stack.json")
STACK_KEYS = {"trainer", "transformers", "peft_adapter_dtype", "kbit_prepare", "bitsandbytes",
              "optimizer_impl", "compile", "fsdp_version", "cuda_context", "fsdp_embedding_units", "torch"}


def test_every_tagged_record_and_group_exists():
    assert set(TAGS["records"]) <= set(BY_ID)
    assert set(TAGS["groups"]) <= {r["source_group"] for r in RECORDS}


def test_every_group_is_tagged_with_a_trainer():
    groups = {r["source_group"] for r in RECORDS}
    assert groups == set(TAGS["groups"])
    for name, entry in TAGS["groups"].items():
        assert entry["stack"].get("trainer"), name


@pytest.mark.parametrize("rid", sorted(BY_ID))
def test_every_tagged_plan_parses(rid):
    plan = tagged_plan(BY_ID[rid], TAGS)
    parsed = Plan.from_dict(plan)
    stack = stack_for(BY_ID[rid], TAGS)
    for key, value in stack.items():
        got = getattr(parsed.stack, key)
        assert got == (str(value) if key == "transformers" else value), (rid, key)


def _entries():
    for part in ("groups", "records"):
        for name, entry in TAGS[part].items():
            yield f"{part}.{name}", entry


def test_every_tag_value_has_evidence_with_a_url_and_a_quote():
    for where, entry in _entries():
        assert set(entry["stack"]) <= STACK_KEYS, where
        assert entry["evidence"], where
        for ev in entry["evidence"]:
            assert ev["url"].startswith("https://"), where
            assert ev["quote"].strip() and ev["fact"].strip(), where
        facts = " ".join(ev["fact"] for ev in entry["evidence"]).lower()
        for key, value in entry["stack"].items():
            # each key is named in a fact of its own entry (trainer facts say "trainer <value>")
            assert key.replace("_", " ") in facts.replace("_", " ") or (
                key == "trainer" and "trainer" in facts), (where, key)
            if value is None:
                assert "not applicable" in facts, (where, key)


def test_merge_group_then_record_override_and_null_removes():
    rec = {"id": "x", "source_group": "g", "plan": {"schema": 1, "stack": {"compile": "model"}}}
    tags = {"groups": {"g": {"stack": {"trainer": "torchtune", "optimizer_impl": "fused"}, "evidence": []}},
            "records": {"x": {"stack": {"optimizer_impl": None, "fsdp_version": 2}, "evidence": []}}}
    assert tagged_plan(rec, tags)["stack"] == {"compile": "model", "trainer": "torchtune", "fsdp_version": 2}
    assert rec["plan"]["stack"] == {"compile": "model"}           # the record is not changed
    assert tagged_plan({"id": "y", "source_group": "h", "plan": {"schema": 1}}, tags) == {"schema": 1}


def test_fidelity_applies_the_tags_to_every_scored_record():
    sys.path.insert(0, str(ROOT))
    from scripts import fidelity
    plain = fidelity.public_rows(ROOT / "validation" / "public.json")
    tagged = fidelity.public_rows(ROOT / "validation" / "public.json", TAGS)
    assert [r["id"] for r in tagged] == [r["id"] for r in plain]
    assert len(tagged) == sum(r["quality"] != "unsupported" for r in RECORDS)
