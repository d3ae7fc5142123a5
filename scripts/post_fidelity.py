"""The README's post-training error table: the engine against the published post-training records.

    python scripts/post_fidelity.py            # print the table
    python scripts/post_fidelity.py --write    # rewrite the README's block between the post-fidelity markers
    python scripts/post_fidelity.py --check    # exit 1 when the README's block is not this output

Records: tests/data/validation/post_training.json (format and tags in tests/test_post_validation_data.py). Each
plan is estimated and the prediction matching the record's metric is taken over the whole run (every phase:
`run.*`, since a rollout can set the peak), as scripts/fidelity.py does for whole-process figures. Records tagged
`unsupported` are left out; nothing is tuned per record. Grouped by trainer x method: n (records with a
figure), median and p90 of |error|, bias (median signed error), and the OOM boundaries on the right side (an
`oom` record predicted not to fit, an `ok` record predicted to fit: both counted, figure or not).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT))

from scripts.fidelity import _fmt, predict, summarize  # noqa: E402

RECORDS = ROOT / "tests" / "data" / "validation" / "post_training.json"
README = ROOT / "README.md"
BEGIN = "<!-- post-fidelity:begin (scripts/post_fidelity.py --write) -->"
END = "<!-- post-fidelity:end -->"


def rows(records: list[dict]) -> list[dict]:
    out = []
    for rec in records:
        if rec["quality"] == "unsupported":
            continue
        pred, fits = predict(rec, "whole-process")
        meas = rec["measured_bytes"]
        pt = rec["plan"]["post_training"]
        out.append({"id": rec["id"], "trainer": pt["trainer"], "method": pt["method"], "quality": rec["quality"],
                    "error": (pred - meas) / meas if meas else None, "fits": fits, "outcome": rec["outcome"]})
    return out


def right_side(rs: list[dict]) -> tuple[int, int]:
    """(boundaries on the right side, boundaries): an OOM predicted not to fit, a run that ran predicted to fit."""
    return sum(1 for r in rs if r["fits"] == (r["outcome"] == "ok")), len(rs)


def table(rs: list[dict]) -> str:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rs:
        groups.setdefault((r["trainer"], r["method"]), []).append(r)
    lines = ["| trainer | method | n | median abs err | p90 abs err | bias | OOM boundary right |",
             "|---|---|---|---|---|---|---|"]

    def line(trainer: str, method: str, g: list[dict]) -> str:
        s = summarize(g)
        med = "-" if s["n"] == 0 else _fmt(s["median_abs"]).lstrip("+")
        p90 = "-" if s["n"] == 0 else _fmt(s["p90_abs"]).lstrip("+")
        bias = "-" if s["n"] == 0 else _fmt(s["bias"])
        ok, n = right_side(g)
        return f"| {trainer} | {method} | {s['n']} | {med} | {p90} | {bias} | {ok}/{n} |"

    for (trainer, method), g in sorted(groups.items()):
        lines.append(line(trainer, method, g))
    lines.append(line("**all**", "", rs))
    return "\n".join(lines)


def render(records: list[dict]) -> str:
    rs = rows(records)
    n_approx = sum(1 for r in rs if r["quality"] == "approximate")
    note = (f"{len(rs)} records ({n_approx} approximate), `unsupported` ones left out; error = "
            "(predicted - measured) / measured, the prediction matching each record's metric over the whole run.")
    return f"{BEGIN}\n{table(rs)}\n\n{note}\n{END}"


def readme_block(text: str) -> str | None:
    i, j = text.find(BEGIN), text.find(END)
    return None if i < 0 or j < 0 else text[i:j + len(END)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    block = render(json.loads(RECORDS.read_text()))
    text = README.read_text()
    old = readme_block(text)
    if a.check:
        return 0 if old == block else 1
    if a.write:
        if old is None:
            print("README has no post-fidelity markers", file=sys.stderr)
            return 2
        README.write_text(text.replace(old, block))
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
