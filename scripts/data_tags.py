"""Data tags of the public validation set (issue 21): how each published run's batches were shaped and how many
steps its memory figure covers (validation/public-data.json: plan-v1 Extension 6 `data` / `allocator`, the
truncation length, the steps; each value cited).

`tagged_plan(record, tags)` returns the record's plan with the group's (or the record's own) `data`, `allocator`
and `seq_len` merged in; `steps_count(record, tags)` is the engine's run.reserved_after_steps count nearest to the
source's steps on a log scale, or None for an untagged record. Pure: nothing here reads files except `load_tags`.
"""
from __future__ import annotations

import copy
import json
import math
import pathlib
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "validation" / "public-data.json"
COUNTS = (10, 100, 1000, 10000)   # memory/fragmentation.STEPS


def load_tags(path: str | pathlib.Path = DEFAULT_PATH) -> dict:
    tags = json.loads(pathlib.Path(path).read_text())
    if not isinstance(tags, dict) or tags.get("schema") != 1:
        raise ValueError(f"{path}: schema must be 1")
    for part in ("groups", "records"):
        for name, e in tags.get(part, {}).items():
            if not isinstance(e.get("data"), dict) or not isinstance(e.get("allocator"), dict):
                raise ValueError(f"{path}: {part}.{name} needs data and allocator objects")
            if not isinstance(e.get("steps"), int) or e["steps"] < 1:
                raise ValueError(f"{path}: {part}.{name}.steps must be a positive integer")
            if not e.get("evidence"):
                raise ValueError(f"{path}: {part}.{name}.evidence must cite the source")
    return tags


def entry(record: Mapping[str, Any], tags: Mapping[str, Any]) -> Mapping | None:
    return tags.get("records", {}).get(record["id"]) or tags.get("groups", {}).get(record["source_group"])


def tagged_plan(record: Mapping[str, Any], tags: Mapping[str, Any]) -> dict:
    plan = copy.deepcopy(dict(record["plan"]))
    e = entry(record, tags)
    if not e:
        return plan
    if e.get("seq_len"):
        plan["seq_len"] = e["seq_len"]
    if e["data"].get("lengths", "fixed") != "fixed":
        plan["data"] = copy.deepcopy(e["data"])
    if e["allocator"]:
        plan["allocator"] = {**plan.get("allocator", {}), **copy.deepcopy(e["allocator"])}
    return plan


def steps_count(record: Mapping[str, Any], tags: Mapping[str, Any]) -> str | None:
    """The run.reserved_after_steps key nearest to the source's steps on a log scale."""
    e = entry(record, tags)
    if not e:
        return None
    return str(min(COUNTS, key=lambda c: abs(math.log10(c) - math.log10(e["steps"]))))
