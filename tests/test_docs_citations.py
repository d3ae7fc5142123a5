"""Every citation `docs/<note>.md §<n>` in the repository names a note that exists and a section it has,
so a reader sent to docs/ finds the place (the notes keep the section numbers the code cites)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
CITE = re.compile(r"(?<![\w/.])docs/([a-z0-9-]+\.md)((?:\s*(?:§|, §|-§|-)\s*[0-9]+[a-z]?(?:\.[0-9]+)?)*)")
SECTION = re.compile(r"[0-9]+[a-z]?(?:\.[0-9]+)?")


def _sources():
    for pattern in ("*.py", "*.md", "*.js", "*.html"):
        for path in ROOT.rglob(pattern):
            rel = path.relative_to(ROOT).parts
            if rel[0] in {".git", "node_modules", "_site"} or rel[0].startswith(".venv") or "vendor" in rel:
                continue
            yield path


def _headings(note: pathlib.Path) -> set[str]:
    """'## 3. Title' -> '3', '### 3.2 Title' -> '3.2', '### 1g. Title' -> '1g'."""
    out = set()
    for line in note.read_text().splitlines():
        m = re.match(r"#{2,4} ([0-9]+[a-z]?(?:\.[0-9]+)?)\.? ", line)
        if m:
            out.add(m.group(1))
    return out


def test_every_docs_citation_resolves():
    seen, bad = 0, []
    for path in _sources():
        for m in CITE.finditer(path.read_text(errors="replace")):
            note = ROOT / "docs" / m.group(1)
            if not note.is_file():
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)} (no such note)")
                continue
            seen += 1
            heads = _headings(note)
            for sec in SECTION.findall(m.group(2)):
                if sec not in heads:
                    bad.append(f"{path.relative_to(ROOT)}: {m.group(0)} (no section {sec})")
    assert not bad, "\n".join(bad)
    assert seen >= 20   # tools/, tests/, scripts/ cite the notes about two dozen times


def test_headings_parse_as_cited():
    # hand-checked: docs/tracer.md has §1g and §3, docs/deepspeed.md §2.8, docs/deepspeed-cpu.md §3.2
    assert {"1g", "3"} <= _headings(ROOT / "docs" / "tracer.md")
    assert "2.8" in _headings(ROOT / "docs" / "deepspeed.md")
    assert "3.2" in _headings(ROOT / "docs" / "deepspeed-cpu.md")
