"""Configs in, shared parts: the import result, the error that names the key, JSON and value reading."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

from ..errors import PlanError
from ..plan import Plan, as_plan

class ConfigImportError(ValueError):
    """A pasted config cannot be imported; ``key`` names the offending key (dotted path)."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass
class ImportResult:
    plan: dict                                          # the new full plan-v1 dict
    applied: list = field(default_factory=list)         # {key, plan_key, value}: read into the plan
    not_represented: list = field(default_factory=list)  # {key, value, reason}: not in the plan
    warnings: list = field(default_factory=list)        # {id, severity, message}
    format: str | None = None                           # the format read (import_config sets it)
    detection: dict | None = None                       # detect.detect_format's answer (None: format given)
    report: dict | None = None                          # report.build_report: the per-key report (import_config)

    def to_dict(self) -> dict:
        return {"plan": self.plan, "applied": self.applied, "not_represented": self.not_represented,
                "warnings": self.warnings, "format": self.format, "detection": self.detection,
                "report": self.report}


NO_EFFECT = "no memory effect"
NOT_MODELLED = "changes memory but zerocalc does not model it"


def base_plan_dict(plan) -> dict:
    """The full plan-v1 dict an import starts from (a Plan, or a plan-v1 mapping validated first)."""
    return as_plan(plan).to_dict()


def parse_json(text, what: str) -> dict:
    """A JSON object from text (or a dict, copied); errors name ``what`` and the position."""
    if isinstance(text, dict):
        return copy.deepcopy(text)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ConfigImportError(what, f"expected JSON text or an object, got {type(text).__name__}")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigImportError(what, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(obj, dict):
        raise ConfigImportError(what, f"expected a JSON object at the top, got {type(obj).__name__}")
    return obj


def read_int(key, v, minimum=0, allow_auto=False):
    if allow_auto and v == "auto":
        return "auto"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigImportError(key, "expected an integer" + (' or "auto"' if allow_auto else "") + f", got {v!r}")
    if isinstance(v, float):
        if not v.is_integer():
            raise ConfigImportError(key, f"expected an integer, got {v!r}")
        v = int(v)
    if v < minimum:
        raise ConfigImportError(key, f"must be >= {minimum}, got {v}")
    return v


def read_bool(key, v, allow_auto=False):
    if allow_auto and v == "auto":
        return "auto"
    if not isinstance(v, bool):
        raise ConfigImportError(key, "expected true or false" + (' or "auto"' if allow_auto else "") + f", got {v!r}")
    return v


def read_obj(key, v):
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigImportError(key, f"expected an object, got {type(v).__name__}")
    return v


def validate_plan_dict(p: dict) -> None:
    """Let the engine's Plan check an imported plan; errors keep the config's key."""
    try:
        Plan.from_dict(p)
    except PlanError as e:
        key = e.key
        if key == "deepspeed.gradient_clipping":
            key = "gradient_clipping"
        elif key.startswith("deepspeed."):
            key = "zero_optimization." + key[len("deepspeed."):]
        raise ConfigImportError(key, e.message) from None
