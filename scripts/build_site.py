"""Build the deployable static folder _site/ (what `make serve` serves and GitHub Pages publishes).

    python3 scripts/build_site.py [--out DIR]     # after scripts/vendor.py; DIR defaults to _site/

_site/ holds: index.html with the default plan's figures pre-rendered by the CPython engine (so the
correct numbers are on screen at first paint, long before Pyodide is up), assets/ (CSS, JS, icon,
vendored runtime), py/ (the engine and the worker, the same files CPython imports), pyscript.json
whose `files` lists every module of py/zerocalc/ and py/app/ (generated here, so a new module ships
without editing a list), and .nojekyll.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from zerocalc import __version__  # noqa: E402
from app import render, view  # noqa: E402

SITE = ROOT / "_site"
PACKAGES = ("zerocalc", "app")          # shipped to the browser under py/
SHIP_SUFFIXES = (".py", ".json")
ASSET_SUFFIXES = (".css", ".js", ".svg", ".png", ".json", ".webmanifest")   # every page asset beside vendor/
# Slots replaced verbatim: everything in them is already escaped HTML or a number.
SLOT = re.compile(r"\{\{(\w+)\}\}")
# An empty element carrying data-out / data-view: filled with the figure's text (+ data-bytes).
FIGURE = re.compile(r'<(\w+)([^<>]*?)\sdata-(out|view)="([^"]+)"([^<>]*)></\1>')


def engine_files() -> dict[str, str]:
    """PyScript `files` map: ./py/<pkg>/<path> -> ./<pkg>/<path> (the worker's cwd is on sys.path)."""
    files = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / "py" / pkg).rglob("*")):
            if path.suffix in SHIP_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT / "py").as_posix()
                files[f"./py/{rel}"] = f"./{rel}"
    return files


# Bytecode for the browser, compiled by the vendored Pyodide itself (CPython 3.14 inside; our CPython
# cannot write its .pyc). Unchecked-hash .pyc files are used without looking at the source's mtime, which
# the files written into the worker's FS do not preserve. Saves ~0.3 s of compiling at every page load
# (import app.view + first estimate: 0.66 s -> 0.38 s in Node's Pyodide here).
PYC_JS = r"""
import { loadPyodide } from %(pyodide)s;
import fs from "node:fs";
import path from "node:path";
const [site, list] = process.argv.slice(-2);
const rels = JSON.parse(fs.readFileSync(list, "utf8"));
const py = await loadPyodide();
for (const rel of rels) {
  py.FS.mkdirTree("/home/pyodide/" + path.dirname(rel));
  py.FS.writeFile("/home/pyodide/" + rel, fs.readFileSync(path.join(site, "py", rel)));
}
py.globals.set("rels", py.toPy(rels));
const out = py.runPython(`
import py_compile
[py_compile.compile("/home/pyodide/" + r, doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)[len("/home/pyodide/"):]
 for r in rels]
`).toJs();
for (const rel of out) {
  fs.mkdirSync(path.join(site, "py", path.dirname(rel)), { recursive: true });
  fs.writeFileSync(path.join(site, "py", rel), py.FS.readFile("/home/pyodide/" + rel));
}
console.log(JSON.stringify(out));
"""


def compile_pyc(files: dict[str, str], site: pathlib.Path) -> dict[str, str]:
    """-> extra `files` entries for the .pyc of every shipped .py; {} (and a note) without node."""
    pyodide = ROOT / "node_modules" / "pyodide"
    vendored = json.loads((ROOT / "assets" / "vendor" / "manifest.json").read_text())["pyodide"]
    if os.environ.get("ZEROCALC_NO_PYC") or not shutil.which("node") or not (pyodide / "pyodide.mjs").exists():
        print("build_site.py: no node/pyodide here; shipping sources only (the page compiles them, ~0.3 s)")
        return {}
    if json.loads((pyodide / "package.json").read_text())["version"] != vendored:
        raise SystemExit("build_site.py: node_modules/pyodide differs from assets/vendor; run `make vendor`")
    rels = [src[len("./py/"):] for src in files if src.endswith(".py")]
    with tempfile.TemporaryDirectory() as tmp:
        script, lst = pathlib.Path(tmp) / "pyc.mjs", pathlib.Path(tmp) / "files.json"
        script.write_text(PYC_JS % {"pyodide": json.dumps((pyodide / "pyodide.mjs").as_uri())})
        lst.write_text(json.dumps(rels))
        res = subprocess.run(["node", str(script), str(site), str(lst)], capture_output=True, text=True, check=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return {f"./py/{rel}": f"./{rel}" for rel in out}


# Pyodide memory snapshot (experimental API of the pinned Pyodide, see package.json): boot the vendored runtime
# under node, import the engine and answer the default plan once (every module the page needs is then imported
# and initialised), and save the WebAssembly memory. The page's worker restores it instead of starting Python
# (assets/worker.js), and falls back to a normal boot if that fails. gzip: 30 MiB of memory, mostly zeros.
# Why 30 MiB (measured in Node, Pyodide 314.0.7, issue 25): it is Pyodide's initial memory; it never grows while the
# engine is imported and answers (HEAP8.length 31457280 at a bare boot and at the snapshot). In it: ~3.7 MiB of
# static data (the .wasm's data segments), ~9 MiB of zeros (the stack), a 13.8 MB heap (8.3 MB Pyodide's own boot,
# +4.6 MB importing the engine, +0.1 MB the default answer, ~0.9 MB free chunks) and ~3 MiB of zeros above it. gzip:
# a bare Pyodide's memory is 6.2 MB, the engine's 7.2 MB; gc and zeroed free chunks take that to 6.9 MB.
SNAPSHOT = "assets/engine.snapshot"
SNAP_JS = r"""
import { loadPyodide, version } from %(pyodide)s;
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
const [site, out] = process.argv.slice(-2);
const config = JSON.parse(fs.readFileSync(path.join(site, "pyscript.json"), "utf8"));
const py = await loadPyodide({ _makeSnapshot: true, env: { HOME: "/home/pyodide" } });
for (const [src, dst] of Object.entries(config.files)) {
  const p = "/home/pyodide/" + dst.replace(/^\.\//, "");
  py.FS.mkdirTree(path.dirname(p));
  py.FS.writeFile(p, fs.readFileSync(path.join(site, src)));
}
const call = py.pyimport("app.worker").call;
const answer = JSON.parse(call("compute", '{"plan": {}}'));
call.destroy();
if (answer.fatal) throw new Error(answer.fatal);
py.runPython("import gc, sys; gc.collect(); getattr(sys, '_clear_internal_caches', sys._clear_type_cache)()");
// Zero the heap's free chunks (garbage of freed objects, ~0.9 MB after the default answer): malloc every free chunk
// below the heap's top (best fit, largest sizes first), fill it with zeros, free them all. The memory must not grow.
const M = py._module, top = M._sbrk(0), size = M.HEAP8.length, held = [];
for (let s = 1 << 20; s >= 8; s >>= 1) {
  for (;;) {
    const p = M._malloc(s);
    if (!p) break;
    if (p + s > top) { M._free(p); break; }   // from the top chunk: no free chunk of this size is left
    M.HEAPU8.fill(0, p, p + s);
    held.push(p);
  }
}
for (const p of held) M._free(p);
if (M.HEAP8.length !== size) throw new Error("the wasm memory grew while zeroing free chunks");
const snap = py.makeMemorySnapshot();
fs.writeFileSync(out, zlib.gzipSync(snap, { level: 6 }));
console.log(JSON.stringify({ version, bytes: snap.length, figure: answer.out["per_gpu.device_used_bytes"].bytes }));
"""


def make_snapshot(site: pathlib.Path) -> dict | None:
    """-> {"version", "bytes", "figure"} of the snapshot written to site/assets/engine.snapshot, or None (and a
    note) without node or node_modules/pyodide: the page then boots Pyodide normally."""
    pyodide = ROOT / "node_modules" / "pyodide"
    if os.environ.get("ZEROCALC_NO_SNAPSHOT") or not shutil.which("node") or not (pyodide / "pyodide.mjs").exists():
        print("build_site.py: no node/pyodide here; no engine snapshot (the page boots Pyodide normally)")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        script = pathlib.Path(tmp) / "snap.mjs"
        script.write_text(SNAP_JS % {"pyodide": json.dumps((pyodide / "pyodide.mjs").as_uri())})
        res = subprocess.run(["node", str(script), str(site), str(site / SNAPSHOT)], capture_output=True, text=True)
    if res.returncode != 0:
        print("build_site.py: the engine snapshot failed (the page boots normally):\n" + res.stderr[-2000:])
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def fill_figures(html: str, v: dict) -> str:
    missing = []

    def sub(m: re.Match) -> str:
        tag, pre, kind, key, post = m.groups()
        fig = v["out" if kind == "out" else "view"].get(key)
        if fig is None:
            missing.append(f"data-{kind}={key}")
            return m.group(0)
        extra = f' data-bytes="{int(fig["bytes"])}"' if fig.get("bytes") is not None else ""
        return f'<{tag}{pre} data-{kind}="{key}"{extra}{post}>{render.e(fig["text"])}</{tag}>'

    out = FIGURE.sub(sub, html)
    if missing:
        raise SystemExit("build_site.py: no figure for " + ", ".join(sorted(set(missing))))
    return out


def render_page(template: str, versions: dict) -> tuple[str, dict]:
    v = view.compute({"plan": {}})
    p = v["plan"]
    slots = {
        "fits": "true" if v["fits"] else "false",
        "method": p["method"],
        "offloaded": "true" if v["offloaded"] else "false",
        "section_model": render.section_model(p),
        "section_zero": render.section_zero(p),
        "section_batch": render.section_batch(p),
        "section_lora": render.section_lora(p, v["targets"]),
        "section_software": render.section_software(p),
        "section_post": render.section_post(p),
        "stack": render.stack_segments(v["components"]),
        "run_chart": render.run_chart(v["run"]),
        "run_summary": render.e(v["run"]["summary"]),
        "run_peak": render.e(v["run"]["peak_text"]),
        "run_width": str(v["run"]["width"]),
        "run_height": str(v["run"]["height"]),
        "reserved_chart": render.svg_marks(v["reserved"]["marks"]),
        "reserved_summary": render.e(v["reserved"]["summary"]),
        "reserved_table": render.table_html(v["reserved"]["table"]),
        "reserved_width": str(v["reserved"]["width"]),
        "reserved_height": str(v["reserved"]["height"]),
        "capacity_pct": str(v["capacity_pct"]),
        "rows": render.component_rows(v["components"]),
        "oom_hidden": "hidden" if v["fits"] else "",
        "checklist": render.checklist(v["warnings"]),
        "ds_config": render.e(v["ds_config"]["text"]),
        "config_note": render.e(v["ds_config"]["note"]),
        "config_note_hidden": "" if v["ds_config"]["note"] else "hidden",
        "share": render.e(v["share"]),
        "presets": render.presets_json(),
        "version": render.e(__version__),
        "pyodide_version": render.e(versions.get("pyodide", "?")),
        "pyscript_version": render.e(versions.get("@pyscript/core", "?")),
    }
    unknown = sorted(set(SLOT.findall(template)) - set(slots))
    if unknown:
        raise SystemExit("build_site.py: template slots without a value: " + ", ".join(unknown))
    html = SLOT.sub(lambda m: slots[m.group(1)], template)
    return fill_figures(html, v), v


ENGINE_ARCHIVE = "assets/engine.zip"


def write_engine_archive(site: pathlib.Path, files: dict[str, str]) -> None:
    """Every engine file (the `files` map of pyscript.json: .py and their .pyc) in one zip, laid out as the
    worker's home directory wants them: the worker fetches one file instead of ~150 (stored, not deflated:
    most of it is bytecode and the server may compress the transfer)."""
    import zipfile
    with zipfile.ZipFile(site / ENGINE_ARCHIVE, "w", zipfile.ZIP_STORED) as z:
        for src, dst in sorted(files.items()):
            z.write(site / src[2:], dst[2:])


def build(site: pathlib.Path) -> dict:
    """Write the whole site into ``site`` (an empty or missing folder); returns the default view."""
    vendor = ROOT / "assets" / "vendor"
    versions = json.loads((vendor / "manifest.json").read_text())
    html, v = render_page((ROOT / "index.html").read_text(), versions)
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_text(html)
    (site / "assets" / "prerender.css").write_text(render.prerender_css(v["components"], v["capacity_pct"]))
    (site / ".nojekyll").write_text("")
    for path in sorted((ROOT / "assets").iterdir()):
        if path.is_file() and path.suffix in ASSET_SUFFIXES:
            shutil.copyfile(path, site / "assets" / path.name)
    shutil.copytree(vendor, site / "assets" / "vendor")
    files = engine_files()
    for src in files:
        dst = site / src[2:]
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / src[2:], dst)
    print("build_site.py: compiling the engine to .pyc in the vendored Pyodide (Node) ...", flush=True)
    files.update(compile_pyc(files, site))
    config = {"interpreter": "./assets/vendor/pyodide/pyodide.mjs", "files": files}
    (site / "pyscript.json").write_text(json.dumps(config, indent=1) + "\n")
    write_engine_archive(site, files)
    # The pre-rendered estimate, for tests and for anyone checking the page against the CLI.
    (site / "default-estimate.json").write_text(json.dumps(v["estimate"], indent=1, sort_keys=True) + "\n")
    print("build_site.py: making the engine snapshot in the vendored Pyodide (Node) ...", flush=True)
    snap = make_snapshot(site)
    if snap and snap["figure"] != v["estimate"]["per_gpu"]["device_used_bytes"]:
        raise SystemExit("build_site.py: the snapshot's engine disagrees with CPython on the default plan")
    v["snapshot"] = snap
    write_manifest(site)
    v["sw_version"] = write_service_worker(site)   # last: its list and hash cover every file written above
    v["n_files"] = len(files)
    return v


# Not precached: the service worker itself (the browser fetches it to look for a new deploy), and files only for
# people (.nojekyll).
NOT_PRECACHED = ("sw.js", ".nojekyll")


def precache(site: pathlib.Path) -> tuple[str, list[str]]:
    """-> (version, files): every file of the built site, relative to its root, and a version that is the
    SHA-256 (first 16 hex digits) of all their paths and contents, so any change to any file is a new version."""
    files, h = [], hashlib.sha256()
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        rel = path.relative_to(site).as_posix()
        if rel in NOT_PRECACHED:
            continue
        files.append(rel)
        h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16], files


def write_service_worker(site: pathlib.Path) -> str:
    """_site/sw.js from the template ./sw.js with this build's version and precache list; -> the version."""
    version, files = precache(site)
    text = (ROOT / "sw.js").read_text().replace("{{version}}", version).replace("{{files}}", json.dumps(files, indent=1))
    (site / "sw.js").write_text(text)
    return version


def write_manifest(site: pathlib.Path) -> None:
    """The web app manifest (installable page): name, start URL, colours and the committed PNG icons
    (scripts/make_icons.py rasterises assets/icon.svg)."""
    icons = [{"src": "assets/icon.svg", "sizes": "any", "type": "image/svg+xml"}]
    for size in (192, 512):
        if (site / "assets" / f"icon-{size}.png").exists():
            icons.append({"src": f"assets/icon-{size}.png", "sizes": f"{size}x{size}", "type": "image/png",
                          "purpose": "any"})
    manifest = {"name": "zerocalc — GPU memory planner", "short_name": "zerocalc",
                "description": "What each GPU and node holds when training an LLM with DeepSpeed ZeRO, FSDP, LoRA or QLoRA.",
                "start_url": "./index.html", "scope": "./", "display": "standalone",
                "background_color": "#f5f7fa", "theme_color": "#14263f", "icons": icons}
    (site / "manifest.webmanifest").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description="Build the static site.")
    ap.add_argument("--out", type=pathlib.Path, default=SITE, help="target folder (default: _site/)")
    out = ap.parse_args().out.resolve()
    if not (ROOT / "assets" / "vendor" / "manifest.json").exists():
        print("build_site.py: assets/vendor/ is missing; run `make vendor` first", file=sys.stderr)
        return 1
    # Build next to the target and swap it in, so a server (or a parallel test run) never sees half a site.
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        v = build(tmp / "site")
        old = tmp / "old"
        if out.exists():
            out.rename(old)
        (tmp / "site").rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"build_site.py: {where}/ ({size / 2**20:.1f} MiB, {v['n_files']} engine files incl. .pyc; "
          f"default plan pre-rendered: {v['out']['per_gpu.device_used_bytes']['text']} per GPU; "
          f"service worker version {v['sw_version']}; "
          + (f"engine snapshot {(out / SNAPSHOT).stat().st_size / 2**20:.1f} MiB gzip of {v['snapshot']['bytes'] / 2**20:.0f} MiB)"
             if v.get("snapshot") else "no engine snapshot)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
