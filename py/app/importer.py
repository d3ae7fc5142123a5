"""The page's "Import your config" box: pasted text -> the plan it describes, what was mapped and what not.

Runs in the Pyodide worker (app.worker CALLS["import_config"]) and under CPython. A YAML paste needs
PyYAML: assets/import.js fetches the vendored pure-Python package (assets/vendor/pyyaml, from the PyPI
wheel) the first time and sends its files with the request; they are written to the in-memory file
system and put on sys.path once. The answer's ``hash`` is the page's share-link fragment of the
imported plan (``#plan=`` + URL-encoded plan-v1 JSON of the keys that differ from the default).
"""
import os
import sys

MAX_BYTES = 200 * 1024  # as zerocalc.imports.MAX_BYTES (checked there too)
YAML_DIR = "/tmp/zerocalc-pyyaml"


def _install_yaml(files):
    """Write the vendored PyYAML files ({"yaml/x.py": text}) and make ``import yaml`` find them."""
    for rel, text in files.items():
        if not rel.startswith("yaml/") or ".." in rel or not rel.endswith(".py"):
            continue
        path = os.path.join(YAML_DIR, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if YAML_DIR not in sys.path:
        sys.path.insert(0, YAML_DIR)
    import importlib
    importlib.invalidate_caches()


def yaml_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("yaml") is not None


def share_hash(plan: dict) -> str:
    """The share-link fragment of the imported plan (the same as the page's own: app.view.share_fragment)."""
    from zerocalc import Plan
    from app.view import share_fragment
    return share_fragment(Plan.from_dict(plan))


def import_view(request: dict) -> dict:
    """{"text", "plan" (current plan-v1 dict or null), "yaml_files" (optional)} -> {"format", "plan", "hash",
    "applied", "not_represented", "warnings", "detection", "report" (zerocalc/imports/report.py: the per-key
    report the CLI prints)} or {"error"} (one line) / {"needs_yaml": true}.
    The importers are imported here, on the first import, so the worker's start-up does not pay for them."""
    from zerocalc.imports import ConfigImportError, import_config, is_json
    from zerocalc.plan import PlanError
    text = request.get("text")
    if not isinstance(text, str) or not text.strip():
        return {"error": "Paste a config file first."}
    if len(text.encode("utf-8")) > MAX_BYTES:
        return {"error": f"The pasted config is {len(text.encode('utf-8')) // 1024} KB; configs over "
                         f"{MAX_BYTES // 1024} KB are refused."}
    if request.get("yaml_files"):
        _install_yaml(request["yaml_files"])
    from zerocalc.imports.cmdline import looks_like_command
    if not is_json(text) and not yaml_available() and not looks_like_command(text):   # a command needs no YAML
        return {"needs_yaml": True}
    plan = request.get("plan") if isinstance(request.get("plan"), dict) else {}
    try:
        try:
            res = import_config(text, plan, what=request.get("name") or "config")
        except PlanError as e:  # the current plan itself is bad: import over the default plan
            del e
            res = import_config(text, {}, what=request.get("name") or "config")
    except ConfigImportError as e:
        return {"error": str(e)}
    return {"format": res.format, "plan": res.plan, "hash": share_hash(res.plan), "applied": res.applied,
            "not_represented": res.not_represented, "warnings": res.warnings, "detection": res.detection,
            "report": res.report}
