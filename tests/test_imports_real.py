"""The real-config corpus (tests/data/configs/real/, sources in SOURCES.md): configs taken from the trainers'
own repositories (axolotl, LLaMA-Factory incl. its v1 layout, torchtune, alignment-handbook / TRL recipes,
accelerate and DeepSpeed configs), none of them in the other import tests. Expected plan keys are in
expected.py, written by hand from the files.

Must show (issue 24): >= 98 % of the expected keys right, 0 refusals, 0 tracebacks, the format detected,
every key the file sets named in the report (mapped, or not mapped with its reason).
Run ``python tests/test_imports_real.py`` for the per-file table."""
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "data", "configs", "real")
sys.path.insert(0, REAL)
from expected import EXPECTED  # noqa: E402

from zerocalc.imports import ConfigImportError, import_config  # noqa: E402


def _get(plan, dotted):
    cur = plan
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return "<absent>"
        cur = cur[part]
    return cur


def _loader(ref):
    """A DeepSpeed path a file names, looked up beside it (the CLI does the same)."""
    p = os.path.join(REAL, os.path.basename(ref))
    return open(p, encoding="utf-8").read() if os.path.isfile(p) else None


def run_corpus():
    """-> (rows, totals): per file its format, right/total keys, misses, refusal or traceback, unnamed keys."""
    rows = []
    for name, (fmt, keys) in sorted(EXPECTED.items()):
        text = open(os.path.join(REAL, name), encoding="utf-8").read()
        row = {"file": name, "format": None, "expected_format": fmt, "right": 0, "total": len(keys) + 1,
               "misses": [], "refused": None, "traceback": None, "unnamed": []}
        try:
            res = import_config(text, {})
        except ConfigImportError as e:
            row["refused"] = str(e)
            rows.append(row)
            continue
        except Exception:  # noqa: BLE001 - the corpus counts tracebacks
            row["traceback"] = traceback.format_exc()
            rows.append(row)
            continue
        row["format"] = res.format
        row["right"] += res.format == fmt
        if res.format != fmt:
            row["misses"].append(("(format)", res.format, fmt))
        for k, v in keys.items():
            got = _get(res.plan, k)
            if got == v:
                row["right"] += 1
            else:
                row["misses"].append((k, got, v))
        row["unnamed"] = unnamed_keys(text, res)
        rows.append(row)
    return rows


def unnamed_keys(text, res):
    """Top-level keys the file sets that appear neither in ``applied`` nor in ``not_represented``."""
    from zerocalc.imports import parse_text
    from zerocalc.imports.cmdline import looks_like_command, parse_command
    if looks_like_command(text):               # a command line: its options and Hydra sections
        cmd = parse_command(text)
        cfg = {**cmd.options, **cmd.overrides, **{k.split(".")[0]: v for k, v in cmd.unresolved.items()}}
    else:
        cfg = parse_text(text)
    named = [a["key"] for a in res.applied] + [n["key"] for n in res.not_represented]
    out = []
    for k in cfg:
        if not any(n == k or n.startswith((k + ".", k + ":", k + " ")) for n in named):
            out.append(k)
    return out


def totals(rows):
    right = sum(r["right"] for r in rows)
    total = sum(r["total"] for r in rows)
    return {"right": right, "total": total, "share": right / total,
            "refused": sum(r["refused"] is not None for r in rows),
            "tracebacks": sum(r["traceback"] is not None for r in rows),
            "unnamed": sum(len(r["unnamed"]) for r in rows)}


def test_real_corpus():
    rows = run_corpus()
    t = totals(rows)
    misses = [(r["file"], m) for r in rows for m in r["misses"]]
    assert t["tracebacks"] == 0, [r["traceback"] for r in rows if r["traceback"]]
    assert t["refused"] == 0, [(r["file"], r["refused"]) for r in rows if r["refused"]]
    assert t["unnamed"] == 0, [(r["file"], r["unnamed"]) for r in rows if r["unnamed"]]
    assert t["share"] >= 0.98, (t, misses)


def test_sources_name_every_file():
    src = open(os.path.join(REAL, "SOURCES.md"), encoding="utf-8").read()
    for name in EXPECTED:
        assert f"`{name}`" in src, name


if __name__ == "__main__":
    rows = run_corpus()
    for r in rows:
        flag = "REFUSED " + r["refused"] if r["refused"] else "TRACEBACK" if r["traceback"] else ""
        print(f"{r['right']:3d}/{r['total']:3d} {r['format'] or '-':17s} {r['file']} {flag}")
        for m in r["misses"]:
            print(f"        {m[0]}: got {m[1]!r}, expected {m[2]!r}")
        if r["unnamed"]:
            print(f"        unnamed: {r['unnamed']}")
    t = totals(rows)
    print(f"keys right {t['right']}/{t['total']} = {100 * t['share']:.1f} %, refused {t['refused']}, "
          f"tracebacks {t['tracebacks']}, keys not named {t['unnamed']}")
