"""The per-key report of an import: what format was detected (with its confidence and evidence), which file
keys were mapped to plan keys, and every file key that was not, grouped by why.

One report for the CLI (``report_lines``: stderr), the Python API (``ImportResult.to_dict()["report"]``) and
the page's config drop box (assets/import.js renders the same dict as text). Kinds of unmapped keys:

- ``no_effect``: read, deliberately without effect on memory (learning rate, logging, data, saving...);
- ``not_modelled``: changes memory, but zerocalc does not model it (named so the user knows the estimate
  leaves it out);
- ``not_mapped``: read and understood, not turned into a plan key, with the reason (a model that is not a
  preset, a setting another key overrides, a recipe loss read as cross-entropy...);
- ``unknown``: not read: zerocalc knows no memory effect of this option;
- ``empty``: set to null / empty: the trainer's default applies;
- ``read``: read together with other keys, it sets no plan key of its own (``fp16: false`` beside ``bf16``).
"""
from __future__ import annotations

from .common import NO_EFFECT, NOT_MODELLED

KINDS = ("no_effect", "not_modelled", "not_mapped", "unknown", "empty", "read")
KIND_LABEL = {"no_effect": "no memory effect", "not_modelled": "not modelled", "not_mapped": "not mapped",
              "unknown": "not read", "empty": "empty (trainer default)", "read": "read, no plan key of its own"}
READ_ONLY = "read: it sets no plan key of its own (the keys mapped above decide)"


def kind_of(item: dict) -> str:
    """The kind of a ``not_represented`` item, from its reason (an explicit ``kind`` wins)."""
    if item.get("kind") in KINDS:
        return item["kind"]
    r = str(item.get("reason", ""))
    if r.startswith("not read"):
        return "unknown"
    if r.startswith(NO_EFFECT) or r in ("DeepSpeed's default",) or "no memory effect" in r.split(";")[0]:
        return "no_effect"
    if r.startswith(NOT_MODELLED):
        return "not_modelled"
    if r.startswith("empty"):
        return "empty"
    if r.startswith("read:"):
        return "read"
    return "not_mapped"


def _named(key: str, names) -> bool:
    return any(n == key or n.startswith((key + ".", key + ":", key + " ")) for n in names)


def name_every_key(cfg: dict, res) -> None:
    """Every top-level key of the file that no applied / not_represented item names gets one (kind ``read``
    or ``empty``): nothing the file sets is dropped silently."""
    names = [a["key"] for a in res.applied] + [n["key"] for n in res.not_represented]
    for k, v in cfg.items():
        if _named(k, names):
            continue
        empty = v is None or v == "" or v == [] or v == {}
        res.not_represented.append({"key": k, "value": v, "reason": "empty: the trainer's default" if empty
                                    else READ_ONLY, "kind": "empty" if empty else "read"})


def build_report(res) -> dict:
    """ImportResult -> {"format", "confidence", "ambiguous", "candidates", "mapped", "defaults",
    "unmapped": {kind: [{"key", "value", "reason"}]}, "counts"}."""
    det = res.detection or {}
    mapped = [a for a in res.applied if not a.get("default")]
    defaults = [a for a in res.applied if a.get("default")]
    unmapped = {k: [] for k in KINDS}
    for n in res.not_represented:
        unmapped[kind_of(n)].append({"key": n["key"], "value": n.get("value"), "reason": n.get("reason")})
    return {"format": res.format, "confidence": det.get("confidence"), "ambiguous": det.get("ambiguous", False),
            "candidates": det.get("candidates", []),
            "mapped": [{"key": a["key"], "plan_key": a["plan_key"], "value": a["value"]} for a in mapped],
            "defaults": [{"key": a["key"], "plan_key": a["plan_key"], "value": a["value"]} for a in defaults],
            "unmapped": unmapped,
            "counts": {"mapped": len(mapped), "defaults": len(defaults),
                       **{k: len(v) for k, v in unmapped.items()}}}


def report_lines(res) -> list:
    """The report as the CLI prints it on stderr: format and confidence, other candidates, counts, then one
    line per unmapped key (``not in the plan: KEY (reason)``)."""
    rep = build_report(res)
    lines = []
    best = rep["candidates"][0] if rep["candidates"] else {"evidence": []}
    conf = f"confidence {rep['confidence']:.2f}" if rep["confidence"] is not None else "given"
    ev = "; ".join(best.get("evidence", [])[:4])
    lines.append(f"format: {rep['format']} ({conf}{': ' + ev if ev else ''})")
    for c in rep["candidates"][1:]:
        lines.append(f"{'also matches' if rep['ambiguous'] else 'also considered'}: {c['format']} "
                     f"(score {c['score']:.2f}: {'; '.join(c['evidence'][:3])}"
                     f"{'; against: ' + '; '.join(c['against'][:2]) if c.get('against') else ''})")
    c = rep["counts"]
    lines.append(f"mapped: {c['mapped']} keys from the file, {c['defaults']} trainer defaults; not in the plan: "
                 + ", ".join(f"{c[k]} {KIND_LABEL[k]}" for k in KINDS if c[k]))
    for n in res.not_represented:
        lines.append(f"not in the plan: {n['key']} ({n['reason']})")
    return lines
