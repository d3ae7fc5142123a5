"""The doctor on a second set of real logs: tests/data/logs/real/ (public GitHub threads, none of them in
tests/data/logs/index.json), with the kind and the phase written by hand from reading each log before running the doctor.

Targets (issue 19 item 6): kind right on >= 95 % of the logs, phase right on >= 80 % of the logs whose frames
show one. Measured on the 57 logs: main's doctor before issue 19 37/57 kinds (64.9 %) and 13/27 phases (48.1 %);
this doctor 56/57 (98.2 %) and 26/27 (96.3 %). The last four logs (unsloth-1667, dnabert2-134, careamics-941,
textgen-4557) were collected after the rules were written: 3/4 kinds and 3/4 phases; textgen-4557 ("cuda out of
memmory", no error line) stays unread. Two more (isaac-gr00t-162, llava-1152: late OOMs with more cached than asked,
issue 21) came after: both read as cuda_oom, 58/59 kinds.
"""
from __future__ import annotations

import collections
import json
import pathlib

import pytest

from zerocalc.doctor import diagnose
from zerocalc.doctor.phase import RUN_PHASES, STEP_MOMENTS

DATA = pathlib.Path(__file__).parent / "data" / "logs"
REAL = json.loads((DATA / "real" / "sources.json").read_text(encoding="utf-8"))["logs"]
OLD = json.loads((DATA / "index.json").read_text(encoding="utf-8"))["logs"]
KINDS = {"cuda_oom", "host_oom", "nccl_timeout", "nccl_error", "other", "none"}


def text(e):
    return (DATA / "real" / f"{e['id']}.txt").read_text(encoding="utf-8")


RESULTS = {e["id"]: diagnose(text(e)).to_dict() for e in REAL}


def test_the_set_is_sourced_and_apart_from_the_old_one():
    assert len(REAL) >= 40
    assert len({e["id"] for e in REAL}) == len(REAL)
    assert {e["source_url"] for e in REAL}.isdisjoint({e["source_url"] for e in OLD})
    files = {p.stem for p in (DATA / "real").glob("*.txt")}
    assert files == {e["id"] for e in REAL}
    for e in REAL:
        assert e["source_url"].startswith("https://github.com/" + e["repository"] + "/"), e["id"]
        assert e["kind"] in KINDS and e["phase"] in set(RUN_PHASES) | set(STEP_MOMENTS) | {"unknown"}


def test_the_set_covers_every_kind_and_phase():
    assert {e["kind"] for e in REAL} == KINDS
    assert {e["phase"] for e in REAL} >= set(RUN_PHASES) | set(STEP_MOMENTS)
    kinds = collections.Counter(e["kind"] for e in REAL)
    assert kinds["cuda_oom"] >= 15 and kinds["nccl_timeout"] >= 10


def test_kind_and_phase_targets():
    kind_ok = [e["id"] for e in REAL if RESULTS[e["id"]]["kind"] == e["kind"]]
    shown = [e for e in REAL if e["phase"] != "unknown"]
    phase_ok = [e["id"] for e in shown if RESULTS[e["id"]]["phase"] == e["phase"]]
    print(f"kind {len(kind_ok)}/{len(REAL)}, phase {len(phase_ok)}/{len(shown)}")
    assert len(kind_ok) >= 0.95 * len(REAL)
    assert len(phase_ok) >= 0.80 * len(shown)


@pytest.mark.parametrize("e", REAL, ids=[e["id"] for e in REAL])
def test_each_result_is_well_formed(e):
    d = RESULTS[e["id"]]
    assert d["run_phase"] == ("step" if d["phase"] in STEP_MOMENTS else d["phase"])
    if d["kind"] != "none":
        assert d["findings"], "every recognised log gets a finding"
    if d["phase"] != "unknown":
        assert any(f["id"] == "phase" for f in d["findings"])
    if e["phase"] != "unknown" and d["phase"] == e["phase"]:
        assert d["phase_evidence"], "the frame or label that decided is named"
    for f in d["findings"]:
        assert set(f) == {"id", "severity", "message"} and f["severity"] in ("info", "warning", "error")
