"""Plan keys the public validation set omits where its source states another value
(validation/public-corrections.json; the list and the reasons: validation/STACKS.md, "Plan problems").

`../shared` is read-only, so the corrections live here, each with the source's own line as evidence.
A correction's `set` only fills a key the record's plan leaves out (plan-v1's default would apply
otherwise); it never overrides a value the record states. A record entry's `replace` does, for a stated
value the source contradicts (a mapping fault): it names the published value under `was` and applies only
while the record still states exactly that, so a rebuilt public.json is never overridden silently.
`corrected_plan(record, corrections)` applies the record's source-group entry, then the record's own.
Pure: nothing here reads files except `load_corrections`.
"""
from __future__ import annotations

import copy
import json
import pathlib
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "validation" / "public-corrections.json"


def load_corrections(path: str | pathlib.Path = DEFAULT_PATH) -> dict:
    """Read {"schema": 1, "groups": {name: entry}, "records": {id: entry}}, entry = {"set": {...},
    "evidence": [...]} (a record entry may hold {"replace": {...}, "was": {...}} in place of or beside
    "set"), and check its shape."""
    data = json.loads(pathlib.Path(path).read_text())
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ValueError(f"{path}: schema must be 1")
    for part in ("groups", "records"):
        if not isinstance(data.get(part), dict):
            raise ValueError(f"{path}: {part} must be an object")
        for name, entry in data[part].items():
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: {part}.{name} must be an object")
            repl = entry.get("replace")
            if repl is not None:
                if part != "records" or not isinstance(repl, dict) or not repl:
                    raise ValueError(f"{path}: {part}.{name}.replace must be a non-empty object of a record entry")
                if not isinstance(entry.get("was"), dict) or set(entry["was"]) != set(repl):
                    raise ValueError(f"{path}: {part}.{name}.was must name the published value of every replaced key")
            if repl is None or "set" in entry:
                if not isinstance(entry.get("set"), dict) or not entry["set"]:
                    raise ValueError(f"{path}: {part}.{name}.set must be a non-empty object")
            if not isinstance(entry.get("evidence"), list) or not entry["evidence"]:
                raise ValueError(f"{path}: {part}.{name}.evidence must be a non-empty list")
    return data


def corrections_for(record: Mapping[str, Any], corrections: Mapping[str, Any]) -> dict:
    """The keys this record's plan gets: group entry, then record entry, minus what the plan states."""
    keys: dict = {}
    group = corrections.get("groups", {}).get(record["source_group"])
    if group:
        keys.update(group["set"])
    own = corrections.get("records", {}).get(record["id"])
    if own:
        keys.update(own.get("set", {}))
    return {k: v for k, v in keys.items() if k not in record["plan"]}


def replacements_for(record: Mapping[str, Any], corrections: Mapping[str, Any]) -> dict:
    """The stated values this record's source contradicts: the record entry's `replace`, each key only while
    the published plan still states the `was` value."""
    own = corrections.get("records", {}).get(record["id"]) or {}
    was = own.get("was", {})
    return {k: v for k, v in own.get("replace", {}).items() if k in was and record["plan"].get(k) == was[k]}


def corrected_plan(record: Mapping[str, Any], corrections: Mapping[str, Any]) -> dict:
    """A copy of the record's plan with its corrections filled in and its contradicted values replaced."""
    return {**copy.deepcopy(dict(record["plan"])), **corrections_for(record, corrections),
            **copy.deepcopy(replacements_for(record, corrections))}


__all__ = ["load_corrections", "corrections_for", "replacements_for", "corrected_plan", "DEFAULT_PATH"]
