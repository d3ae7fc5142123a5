"""Copy the runtime files the page loads from node_modules/ into assets/vendor/.

Run after `npm ci` (the Makefile's `vendor` target does both). Only the files the browser fetches
are copied (docs/page-runtime.md §3, "Files actually fetched at runtime"): Pyodide's five runtime files and
PyScript's dist chunks (`*.js`, `*.css`; no source maps). A manifest.json records versions, sizes
and sha256 so a build can be traced back to package-lock.json.
"""
import hashlib
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules"
OUT = ROOT / "assets" / "vendor"

# Pyodide: loadPyodide() always needs these five (docs/page-runtime.md §1 and §6, pitfall 4); nothing else is fetched.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json")


def _version(pkg: pathlib.Path) -> str:
    return json.loads((pkg / "package.json").read_text())["version"]


def _copy(src: pathlib.Path, dst_dir: pathlib.Path, manifest: list) -> None:
    dst = dst_dir / src.name
    shutil.copyfile(src, dst)
    data = dst.read_bytes()
    manifest.append({"path": str(dst.relative_to(OUT)), "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest()})


def main() -> int:
    pyodide = NODE / "pyodide"
    pyscript = NODE / "@pyscript" / "core"
    missing = [p for p in (pyodide, pyscript) if not (p / "package.json").exists()]
    if missing:
        print("vendor.py: run `npm ci` first; missing " + ", ".join(map(str, missing)), file=sys.stderr)
        return 1
    if OUT.exists():
        shutil.rmtree(OUT)
    files: list = []
    (OUT / "pyodide").mkdir(parents=True)
    for name in PYODIDE_FILES:
        _copy(pyodide / name, OUT / "pyodide", files)
    # PyScript chunk names carry content hashes, so copy the whole dist/ minus source maps.
    (OUT / "pyscript").mkdir(parents=True)
    for src in sorted((pyscript / "dist").iterdir()):
        if src.suffix in (".js", ".css"):
            _copy(src, OUT / "pyscript", files)
    manifest = {"pyodide": _version(pyodide), "@pyscript/core": _version(pyscript), "files": files}
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f["bytes"] for f in files)
    print(f"vendor.py: {len(files)} files, {total / 2**20:.1f} MiB -> {OUT.relative_to(ROOT)}/ "
          f"(pyodide {manifest['pyodide']}, @pyscript/core {manifest['@pyscript/core']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
