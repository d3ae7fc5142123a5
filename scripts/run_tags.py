"""Run tags of the public validation set (issue 19): what each published run did besides its steady steps (the plan's
`run` block, plan-v1 Extension 5) and the measurement window its figure covers (validation/public-run.json).

`tagged_plan(record, tags)` returns the record's plan with the group's `run` merged in (a record override
replaces it); `window(record, tags)` is `whole-process` (compare the engine's run.*) or `per-log` (a peak over
training steps only: compare per_gpu, the steady step; also the answer for an untagged record). Pure: nothing
here reads files except `load_tags`.
"""
from __future__ import annotations

import copy
import json
import pathlib
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "validation" / "public-run.json"
WINDOWS = ("whole-process", "per-log")


def load_tags(path: str | pathlib.Path = DEFAULT_PATH) -> dict:
    tags = json.loads(pathlib.Path(path).read_text())
    if not isinstance(tags, dict) or tags.get("schema") != 1:
        raise ValueError(f"{path}: schema must be 1")
    for part in ("groups", "records"):
        for name, entry in tags.get(part, {}).items():
            if not isinstance(entry.get("run"), dict) or entry.get("window") not in WINDOWS:
                raise ValueError(f"{path}: {part}.{name} needs a run object and a window in {WINDOWS}")
            if not entry.get("evidence"):
                raise ValueError(f"{path}: {part}.{name}.evidence must cite the source")
    return tags


def _entry(record: Mapping[str, Any], tags: Mapping[str, Any]) -> Mapping | None:
    return tags.get("records", {}).get(record["id"]) or tags.get("groups", {}).get(record["source_group"])


def tagged_plan(record: Mapping[str, Any], tags: Mapping[str, Any]) -> dict:
    plan = copy.deepcopy(dict(record["plan"]))
    entry = _entry(record, tags)
    if entry and entry["run"]:
        plan["run"] = {**plan.get("run", {}), **copy.deepcopy(entry["run"])}
    return plan


def window(record: Mapping[str, Any], tags: Mapping[str, Any]) -> str:
    entry = _entry(record, tags)
    return entry["window"] if entry else "per-log"
