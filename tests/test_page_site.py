"""The built site (_site/, scripts/build_site.py) without a browser: shipped files, no foreign origin,
and the pre-rendered default figures equal the CPython engine's estimate of the default plan."""
import html
import json
import pathlib
import re
from dataclasses import fields
from html.parser import HTMLParser

import pytest

from zerocalc import DEFAULT_PLAN, Plan
from zerocalc.estimate import estimate
from zerocalc.stack import StackSettings
from zerocalc.datasettings import AllocatorSettings, DataSettings
from zerocalc.plan import DEEPSPEED_KNOBS, LoraSettings, QuantSettings
from zerocalc.presets import MODELS, GPUS

ROOT = pathlib.Path(__file__).resolve().parents[1]
GIB = 2**30


class Page(HTMLParser):
    """Collects data-out/data-view figures, form controls and the ds_config pane of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.figures, self.controls, self.stack, self.options = [], [], [], []
        self.export = None
        self._open = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-out" in a or "data-view" in a or a.get("data-export") == "ds_config":
            self._open = {"tag": tag, "attrs": a, "text": ""}
        if tag in ("input", "select", "textarea"):
            self.controls.append((tag, a))
        if tag == "option":
            self.options.append(a)

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if self._open is not None and tag == self._open["tag"]:
            if self._open["attrs"].get("data-export") == "ds_config":
                self.export = self._open["text"]
            else:
                self.figures.append(self._open)
            self._open = None


@pytest.fixture(scope="module")
def page(site):
    p = Page()
    p.feed((site / "index.html").read_text())
    return p


def test_every_engine_module_is_shipped(site):
    config = json.loads((site / "pyscript.json").read_text())
    want = {f"./{p.relative_to(ROOT).as_posix()}" for pkg in ("zerocalc", "app")
            for p in (ROOT / "py" / pkg).rglob("*") if p.suffix in (".py", ".json") and "__pycache__" not in p.parts}
    pyc = {src for src in config["files"] if src.endswith(".pyc")}
    assert set(config["files"]) - pyc == want
    if pyc:   # bytecode compiled by the vendored Pyodide (3.14): one per module, next to its source
        assert {f"{p.rsplit('/__pycache__/', 1)[0]}/{p.rsplit('/', 1)[1].split('.')[0]}.py" for p in pyc} \
            == {w for w in want if w.endswith(".py")}
        assert all(".cpython-314.pyc" in p or ".cpython-3" in p for p in pyc)
    assert "./py/zerocalc/presets/models.json" in want and "./py/zerocalc/presets/gpus.json" in want
    for src, dst in config["files"].items():
        if src not in pyc:
            assert (site / src[2:]).read_bytes() == (ROOT / src[2:]).read_bytes()
        assert dst == "./" + src[len("./py/"):]          # lands on the worker's sys.path as zerocalc/...
    assert (site / config["interpreter"][2:]).is_file()
    assert (site / ".nojekyll").exists()


def test_nothing_comes_from_another_origin(site):
    for name in ("index.html", "assets/app.js", "assets/app.css"):
        text = (site / name).read_text()
        assert not re.search(r"""(src|href|import|url)\s*[=(]\s*["']?(https?:)?//""", text), name
    # the vendored runtime is local and complete
    manifest = json.loads((site / "assets/vendor/manifest.json").read_text())
    for f in manifest["files"]:
        assert (site / "assets/vendor" / f["path"]).stat().st_size == f["bytes"]


def test_prerendered_figures_equal_the_engine(page):
    est = estimate(DEFAULT_PLAN).to_dict()
    pg = est["per_gpu"]
    expected_bytes = {f"per_gpu.{k}": pg[k] for k in ("device_used_bytes", "capacity_bytes",
                                                       "peak_allocated_bytes", "peak_reserved_bytes")}
    expected_bytes.update({f"per_gpu.components.{k}": v for k, v in pg["components"].items()})
    expected_bytes["host_per_node_bytes"] = est["host_per_node_bytes"]
    seen = {}
    for f in page.figures:
        key = f["attrs"].get("data-out")
        if key is None:
            continue
        seen.setdefault(key, []).append(f)
    for key, value in expected_bytes.items():
        assert key in seen, key
        for f in seen[key]:
            assert int(f["attrs"]["data-bytes"]) == value, key
            assert f["text"] == f"{value / GIB:,.2f} GiB", key     # GiB = 2**30, two decimals
    assert seen["tokens_per_step"][0]["text"] == f"{est['tokens_per_step']:,}"
    assert seen["global_batch_size"][0]["text"] == f"{est['global_batch_size']:,}"
    # default plan: 2 micro x 4 accumulation x 4 GPUs x 4096 tokens = 131,072 tokens per step
    assert est["tokens_per_step"] == 2 * 4 * 4 * 4096
    # every figure carries an estimate key the view knows (no empty placeholders left behind)
    assert all(f["text"].strip() for f in page.figures)


def test_prerendered_ds_config_is_the_exporters(page):
    from zerocalc.exports.ds_config import ds_config
    assert json.loads(html.unescape(page.export)) == ds_config(DEFAULT_PLAN)


def _plan_keys():
    keys = {f.name for f in fields(Plan)}
    keys |= {f"deepspeed.{k}" for k in DEEPSPEED_KNOBS}
    keys |= {f"lora.{f.name}" for f in fields(LoraSettings)}
    keys |= {f"quantization.{f.name}" for f in fields(QuantSettings)}
    keys |= {"gpu.name", "gpu.memory_gib"}
    keys |= {f"stack.{f.name}" for f in fields(StackSettings)}
    keys |= {"network.gbps_per_gpu", "network.kind"}
    keys |= {f"data.{f.name}" for f in fields(DataSettings)} | {f"allocator.{f.name}" for f in fields(AllocatorSettings)}
    from zerocalc.postplan import Generator, Offload, Packing, PostTraining      # plan-v1 Extension 7
    keys |= {f"post_training.{f.name}" for f in fields(PostTraining)}
    keys |= {f"post_training.generator.{f.name}" for f in fields(Generator)}
    keys |= {f"post_training.offload_between_updates.{f.name}" for f in fields(Offload)}
    keys |= {f"post_training.packing.{f.name}" for f in fields(Packing)}
    return keys


def test_every_input_is_named_by_its_plan_key(page):
    keys = _plan_keys()
    names = {a["name"] for _, a in page.controls if a.get("name")}
    # not plan keys: the config.json box, the doctor's log box, the import box (text and file)
    for name in names - {"model_config_json", "crash_log", "import_config_text", "import_config_file"}:
        if name.startswith("model."):
            # config.json fields of a custom model: each one is accepted by Plan.from_dict
            cfg = {**MODELS["llama-3.2-1b"].hf_config}
            assert name[len("model."):] in cfg or name == "model.model_type", name
        else:
            assert name in keys, name
    for _, a in page.controls:   # share-link/readers rely on these: no id-only controls
        if a.get("type") not in ("radio", "checkbox") and a.get("id", "").startswith("f-"):
            assert a.get("name"), a


def test_form_defaults_are_the_default_plan(page):
    d = DEFAULT_PLAN.to_dict()
    values = {}
    for tag, a in page.controls:
        if tag == "input" and a.get("type") == "text" and a.get("name") in d:
            values[a["name"]] = a.get("value")
        if tag == "input" and a.get("type") == "radio" and "checked" in a:
            values[a["name"]] = a["value"]
    for key in ("gpus_per_node", "nodes", "micro_batch_size", "gradient_accumulation_steps", "seq_len",
                "zero_stage", "method"):
        assert values[key] == str(d[key]), key
    selected = {a["value"] for a in page.options if "selected" in a}
    for key in ("model", "gpu", "framework", "precision", "optimizer", "offload_optimizer",
                "activation_checkpointing", "attention", "loss"):
        assert d[key] in selected, key


def test_every_preset_is_offered(page):
    values = {a["value"] for a in page.options}
    assert set(MODELS) <= values and set(GPUS) <= values
