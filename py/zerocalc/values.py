"""Value checks for plan input: each raises PlanError naming the dotted key and what is allowed."""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Mapping

from .errors import PlanError

def check_int(key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(key, f"must be an integer from {lo} to {hi}, got {show(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise PlanError(key, f"must be a whole number from {lo} to {hi}, got {show(value)}")
        value = int(value)
    if not lo <= value <= hi:
        raise PlanError(key, f"must be an integer from {lo} to {hi}, got {show(value)}")
    return value


def check_number(key: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlanError(key, f"must be a number from {lo} to {hi}, got {show(value)}")
    if not lo <= value <= hi:
        raise PlanError(key, f"must be a number from {lo} to {hi}, got {show(value)}")
    return value


def check_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PlanError(key, f"must be true or false, got {show(value)}")
    return value


def check_choice(key: str, value: Any, allowed: tuple) -> Any:
    if isinstance(value, bool) or value not in allowed:
        raise PlanError(key, f"must be one of {', '.join(str(a) for a in allowed)}; got {show(value)}")
    return value


def show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_mapping(key: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise PlanError(key, f"must be an object, got {show(value)}")
    return value


def reject_unknown(prefix: str, data: Mapping, known) -> None:
    for k in data:
        if k not in known:
            name = f"{prefix}.{k}" if prefix else str(k)
            raise PlanError(name, f"unknown key (allowed: {', '.join(known)})")


def freeze(v: Any) -> Any:
    """A plan value made immutable: mappings read-only, lists tuples (recursively)."""
    if isinstance(v, Mapping):
        return MappingProxyType({k: freeze(x) for k, x in v.items()})
    if isinstance(v, list):
        return tuple(freeze(x) for x in v)
    return v


def thaw(v: Any) -> Any:
    """The inverse of ``freeze``: plain dicts and lists again (for JSON)."""
    if isinstance(v, Mapping):
        return {k: thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v
