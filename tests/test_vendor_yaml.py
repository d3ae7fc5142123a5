"""scripts/vendor_yaml.py takes PyYAML's pure-Python modules from a wheel (no build) or an sdist, the same files."""
import importlib.util
import io
import pathlib
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("vendor_yaml", ROOT / "scripts" / "vendor_yaml.py")
vendor_yaml = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vendor_yaml)

MODULES = {"__init__.py": b"__version__ = '6.0.2'\n", "cyaml.py": b"from _yaml import CParser\n"}


def _wheel(path: pathlib.Path) -> pathlib.Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in MODULES.items():
            z.writestr(f"yaml/{name}", data)
        z.writestr("yaml/_yaml.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")   # the C extension: not shipped
        z.writestr("_yaml/__init__.py", b"from yaml._yaml import *\n")          # its shim: not shipped
        z.writestr("PyYAML-6.0.2.dist-info/RECORD", b"")
    return path


def _sdist(path: pathlib.Path) -> pathlib.Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {**{f"lib/yaml/{n}": d for n, d in MODULES.items()},
                           "lib/_yaml/__init__.py": b"", "yaml/_yaml.pyx": b"# cython\n"}.items():
            info = tarfile.TarInfo(f"PyYAML-6.0.2/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_wheel_gives_the_pure_python_modules_only(tmp_path):
    assert vendor_yaml._yaml_sources(_wheel(tmp_path / "PyYAML-6.0.2-cp311-cp311-x.whl")) == MODULES


def test_wheel_and_sdist_give_the_same_files(tmp_path):
    wheel = vendor_yaml._yaml_sources(_wheel(tmp_path / "p.whl"))
    sdist = vendor_yaml._yaml_sources(_sdist(tmp_path / "PyYAML-6.0.2.tar.gz"))
    assert wheel == sdist == MODULES


def test_download_asks_pip_for_a_wheel_never_a_build():
    # --only-binary with one fixed platform tag: pip fetches a file and builds nothing (the sdist route compiled Cython)
    src = (ROOT / "scripts" / "vendor_yaml.py").read_text()
    assert '"--only-binary", ":all:"' in src and "--no-binary" not in src
    assert "--platform" in vendor_yaml.WHEEL_TAG
