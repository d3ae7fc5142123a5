"""Software-stack tags of the public validation set (issue 13, "Data"): which trainer and library
versions each published run used, read from the source's own code, pins and dates
(validation/public-stack.json; the evidence and what stays uncertain: validation/STACKS.md).

`tagged_plan(record, tags)` returns the record's plan with a `stack` object (contract plan-v1,
Extension 1) merged in: the record's `source_group` tag first, then the record's own override. An
override value of `null` removes that key (the group's value does not apply to this record, e.g.
`optimizer_impl` on a run whose optimizer is not torch AdamW), so the trainer's `auto` applies.
Pure: nothing here reads files except `load_tags`.
"""
from __future__ import annotations

import copy
import json
import pathlib
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "validation" / "public-stack.json"


def load_tags(path: str | pathlib.Path = DEFAULT_PATH) -> dict:
    """Read a tags file ({"schema": 1, "groups": {...}, "records": {...}}) and check its shape."""
    tags = json.loads(pathlib.Path(path).read_text())
    if not isinstance(tags, dict) or tags.get("schema") != 1:
        raise ValueError(f"{path}: schema must be 1")
    for part in ("groups", "records"):
        if not isinstance(tags.get(part), dict):
            raise ValueError(f"{path}: {part} must be an object")
        for name, entry in tags[part].items():
            if not isinstance(entry, dict) or not isinstance(entry.get("stack"), dict):
                raise ValueError(f"{path}: {part}.{name}.stack must be an object")
            if not isinstance(entry.get("evidence"), list):
                raise ValueError(f"{path}: {part}.{name}.evidence must be a list")
    return tags


def stack_for(record: Mapping[str, Any], tags: Mapping[str, Any]) -> dict:
    """The merged stack object of one record: group tag, then record override (null removes a key)."""
    merged: dict = {}
    group = tags.get("groups", {}).get(record["source_group"])
    if group:
        merged.update(group["stack"])
    own = tags.get("records", {}).get(record["id"])
    if own:
        for key, value in own["stack"].items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return merged


def tagged_plan(record: Mapping[str, Any], tags: Mapping[str, Any]) -> dict:
    """The record's plan (a copy) with its stack tags merged into `plan["stack"]` (tags win over any
    stack the plan already has); a record without tags returns its plan unchanged."""
    plan = copy.deepcopy(dict(record["plan"]))
    stack = stack_for(record, tags)
    if stack:
        plan["stack"] = {**plan.get("stack", {}), **stack}
    return plan
