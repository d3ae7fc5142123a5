"""The repository's copy of the published measurements (validation/public.json, see validation/README.md)
and of the reference data (data/reference/): present, well-formed, and usable without ../shared."""
import json
import pathlib

from zerocalc import Plan

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = json.loads((ROOT / "validation" / "public.json").read_text())
FIELDS = ["id", "source_group", "source_url", "plan", "measured_bytes", "metric", "outcome", "quality",
          "mapping_notes"]


def test_every_record_keeps_its_facts_and_nothing_else():
    for rec in RECORDS:
        assert list(rec) == FIELDS, rec.get("id")
        assert rec["source_url"].startswith("https://"), rec["id"]
        assert rec["mapping_notes"].strip(), rec["id"]
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)


def test_counts_as_the_readme_states():
    # validation/README.md: 106 records; 102 ok, 4 oom; 84 measured, 16 approximate, 6 unsupported
    assert len(RECORDS) == 106
    assert sum(r["outcome"] == "ok" for r in RECORDS) == 102
    assert sum(r["outcome"] == "oom" for r in RECORDS) == 4
    quality = [r["quality"] for r in RECORDS]
    assert (quality.count("measured"), quality.count("approximate"), quality.count("unsupported")) == (84, 16, 6)


def test_measured_value_only_for_runs_that_fit():
    for rec in RECORDS:
        assert rec["metric"] in {"allocated", "active", "reserved", "device_used", "unknown"}, rec["id"]
        if rec["outcome"] == "oom":
            assert rec["measured_bytes"] is None, rec["id"]
        else:
            assert isinstance(rec["measured_bytes"], int) and rec["measured_bytes"] > 0, rec["id"]


def test_every_plan_is_a_valid_plan():
    for rec in RECORDS:
        Plan.from_dict(rec["plan"])


def test_reference_copy_has_its_sources():
    models = json.loads((ROOT / "data" / "reference" / "models.json").read_text())["models"]
    gpus = json.loads((ROOT / "data" / "reference" / "gpus.json").read_text())["gpus"]
    assert all(m.get("source") for m in models)
    assert len(models) == 39 and len(gpus) == 31


def test_build_script_keeps_exactly_the_facts():
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_validation", ROOT / "scripts" / "build_validation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rec = {k: k for k in FIELDS} | {"extra_note": "dropped", "id": "r1"}
    assert list(mod.slim_record(rec)) == FIELDS and mod.slim_record(rec)["id"] == "r1"
    del rec["metric"]
    try:
        mod.slim_record(rec)
    except ValueError as e:
        assert "'metric'" in str(e) and "'r1'" in str(e)
    else:
        raise AssertionError("a record without metric must be refused")
