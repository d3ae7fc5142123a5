"""Vendor PyYAML's pure-Python package for the page: assets/vendor/pyyaml/yaml/*.py + files.json.

The page parses a pasted YAML config (axolotl, LLaMA-Factory, torchtune, accelerate) with the real PyYAML,
loaded into Pyodide only when a YAML file is pasted (assets/import.js). The files come from PyYAML's wheel on
PyPI through pip, taken as a file and never installed or built: ``pip download --only-binary :all: --no-deps``
for one fixed platform tag, so nothing compiles (the sdist route made pip build Cython from source for the
sdist's build requirements: 379 s on a fresh 2-core machine). A wheel's ``yaml/*.py`` are the sdist's
``lib/yaml/*.py``, byte for byte; the wheel's C extension (``yaml/_yaml*.so``, ``_yaml/``) is not shipped, so
``yaml.__with_libyaml__`` is False in the page. Nothing is fetched from a CDN when the page runs. Run by
``make vendor`` after scripts/vendor.py; ``python scripts/vendor_yaml.py FILE`` takes a local wheel or sdist.
"""
import hashlib
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile

VERSION = "6.0.2"
# Any one platform's wheel will do (its yaml/*.py do not depend on the platform); this tag exists for 6.0.2.
WHEEL_TAG = ("--platform", "manylinux_2_17_x86_64", "--python-version", "3.11", "--implementation", "cp",
             "--abi", "cp311")
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "vendor" / "pyyaml"


def _yaml_sources(archive: pathlib.Path) -> dict[str, bytes]:
    """The package's pure-Python modules, name -> bytes: ``yaml/*.py`` of a wheel or ``*/lib/yaml/*.py`` of an sdist."""
    out = {}
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as whl:
            for name in whl.namelist():
                parts = pathlib.PurePosixPath(name).parts
                if len(parts) == 2 and parts[0] == "yaml" and parts[1].endswith(".py"):
                    out[parts[1]] = whl.read(name)
        return out
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            parts = pathlib.PurePosixPath(m.name).parts
            if len(parts) == 4 and parts[1:3] == ("lib", "yaml") and parts[3].endswith(".py") and m.isfile():
                out[parts[3]] = tar.extractfile(m).read()
    return out


def _download(tmp: str) -> pathlib.Path | None:
    print(f"vendor_yaml.py: fetching the PyYAML {VERSION} wheel from the package index (no build) ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary", ":all:", "--no-deps",
                        *WHEEL_TAG, f"pyyaml=={VERSION}", "-d", tmp], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        # a Python without pip (Debian's python3 before python3-pip), or no index: the page still builds;
        # pasting a YAML config then says the parser is missing, JSON configs import as before
        detail = getattr(e, "stderr", "") or e
        print(f"vendor_yaml.py: could not download PyYAML ({str(detail).strip()[-300:]}); "
              "the page will import JSON configs only", file=sys.stderr)
        return None
    return next(pathlib.Path(tmp).glob("*.whl"))


def main() -> int:
    index = OUT / "files.json"
    if index.exists() and json.loads(index.read_text()).get("version") == VERSION:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        archive = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else _download(tmp)
        if archive is None:
            return 0
        sources = _yaml_sources(archive)
        kind = "wheel, yaml/" if archive.suffix == ".whl" else "sdist, lib/yaml"
    if not sources:
        print(f"vendor_yaml.py: no yaml/*.py in {archive.name}", file=sys.stderr)
        return 1
    (OUT / "yaml").mkdir(parents=True, exist_ok=True)
    files = []
    for name, data in sorted(sources.items()):
        (OUT / "yaml" / name).write_bytes(data)
        files.append({"path": f"yaml/{name}", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    index.write_text(json.dumps({"package": "PyYAML", "version": VERSION,
                                 "source": f"https://pypi.org/project/PyYAML/{VERSION}/ ({kind}, pure Python)",
                                 "files": files}, indent=1) + "\n")
    print(f"vendor_yaml.py: PyYAML {VERSION}, {len(files)} files, {sum(f['bytes'] for f in files)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
