"""Vendor PyYAML's pure-Python package for the page: assets/vendor/pyyaml/yaml/*.py + files.json.

The page parses a pasted YAML config (axolotl, LLaMA-Factory, torchtune, accelerate) with the real PyYAML,
loaded into Pyodide only when a YAML file is pasted (assets/import.js). The files come from PyYAML's sdist
on PyPI through pip (``pip download --no-binary :all: --no-deps``): its ``lib/yaml/`` is pure Python (the
C extension ``_yaml`` is optional and is not shipped; ``yaml.__with_libyaml__`` is then False). Nothing
is fetched from a CDN when the page runs. Run by ``make vendor`` after scripts/vendor.py.
"""
import hashlib
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile

VERSION = "6.0.2"
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "vendor" / "pyyaml"


def main() -> int:
    index = OUT / "files.json"
    if index.exists() and json.loads(index.read_text()).get("version") == VERSION:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        sdist = next(pathlib.Path(a) for a in sys.argv[1:2]) if len(sys.argv) > 1 else None
        if sdist is None:
            try:
                # pip prepares the sdist's metadata in an isolated build environment (setuptools from the index)
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                                f"pyyaml=={VERSION}", "-d", tmp], check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            except (OSError, subprocess.CalledProcessError) as e:
                # a Python without pip (Debian's python3 before python3-pip): the page still builds; pasting
                # a YAML config then says the parser is missing, JSON configs import as before
                print(f"vendor_yaml.py: could not download PyYAML ({e}); the page will import JSON configs only",
                      file=sys.stderr)
                return 0
            sdist = next(pathlib.Path(tmp).glob("*.tar.gz"))
        files = []
        with tarfile.open(sdist) as tar:
            for m in tar.getmembers():
                parts = pathlib.PurePosixPath(m.name).parts
                if len(parts) == 4 and parts[1:3] == ("lib", "yaml") and parts[3].endswith(".py") and m.isfile():
                    data = tar.extractfile(m).read()
                    (OUT / "yaml").mkdir(parents=True, exist_ok=True)
                    (OUT / "yaml" / parts[3]).write_bytes(data)
                    files.append({"path": f"yaml/{parts[3]}", "bytes": len(data),
                                  "sha256": hashlib.sha256(data).hexdigest()})
    if not files:
        print("vendor_yaml.py: no lib/yaml/*.py in the sdist", file=sys.stderr)
        return 1
    index.write_text(json.dumps({"package": "PyYAML", "version": VERSION,
                                 "source": f"https://pypi.org/project/PyYAML/{VERSION}/ (sdist, lib/yaml)",
                                 "files": sorted(files, key=lambda f: f["path"])}, indent=1) + "\n")
    print(f"vendor_yaml.py: PyYAML {VERSION}, {len(files)} files, {sum(f['bytes'] for f in files)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
