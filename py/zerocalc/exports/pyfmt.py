"""Python source literals for the generated snippets (TrainingArguments, LoraConfig)."""
from __future__ import annotations


def py_literal(v) -> str:
    """A value as Python source: strings double-quoted, dicts and lists recursively, the rest by repr."""
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(py_literal(x) for x in v) + "]"
    return repr(v)
