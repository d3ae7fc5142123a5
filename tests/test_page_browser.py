"""The page in Chromium, offline: what it shows equals the CPython engine, for the default plan and
after changes; the OOM alert; bad values; inputs made before the engine is ready; share links.
Each test boots Pyodide once (a few seconds); ~1 minute in all on 2 cores."""
import json
import time
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")
from playwright.sync_api import expect  # noqa: E402

from zerocalc import Plan  # noqa: E402
from zerocalc.estimate import estimate  # noqa: E402
from zerocalc.exports.ds_config import ds_config  # noqa: E402
from zerocalc.presets import MODELS  # noqa: E402

import pathlib  # noqa: E402

ARTIFACTS = pathlib.Path(__file__).resolve().parents[1] / "test-artifacts"

pytestmark = pytest.mark.browser
READY = 120_000   # ms; a cold Pyodide boot takes 3-8 s here, more on a loaded CI box

FIGURES_JS = """() => { const out = {};
  for (const e of document.querySelectorAll('[data-out][data-bytes]')) out[e.dataset.out] = Number(e.dataset.bytes);
  return out; }"""


def open_app(page, fragment=""):
    page.goto(page.base + "/index.html" + fragment)
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    settle(page, 0 if fragment else -1)   # an untouched default page is ready without a first answer


def settle(page, after: int):
    # a function, not an expression string: the page's CSP forbids the eval Playwright would use for one
    # ... and its charts, table and share link drawn (they follow the figures a frame or more later: assets/app.js)
    page.wait_for_function("(after) => { const d = document.documentElement.dataset;"
                           " return Number(d.updates || 0) > after && !d.pending && d.drawn === d.updates; }",
                           arg=after, timeout=30_000)


def change(page, action):
    """Do one input action and wait until the engine's answer is on screen."""
    n = int(page.get_attribute("html", "data-updates") or 0)
    action()
    settle(page, n)


def expected_figures(plan_dict):
    est = estimate(Plan.from_dict(plan_dict)).to_dict()
    pg = est["per_gpu"]
    want = {f"per_gpu.{k}": pg[k] for k in ("device_used_bytes", "capacity_bytes", "peak_allocated_bytes",
                                             "peak_reserved_bytes")}
    want.update({f"per_gpu.components.{k}": v for k, v in pg["components"].items()})
    want["host_per_node_bytes"] = est["host_per_node_bytes"]
    return want, est


def assert_shows(page, plan_dict):
    want, est = expected_figures(plan_dict)
    assert page.evaluate(FIGURES_JS) == want
    assert page.inner_text("[data-out='tokens_per_step']") == f"{est['tokens_per_step']:,}"
    assert page.locator("#stack .seg").count() == len(est["per_gpu"]["components"])
    return est


def test_default_page_equals_engine_offline(offline_page):
    page = offline_page
    # before the engine: the pre-rendered numbers are already the engine's
    page.goto(page.base + "/index.html")
    assert page.get_attribute("html", "data-engine") == "loading"
    want, est = expected_figures({})
    assert page.evaluate(FIGURES_JS) == want
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    est = assert_shows(page, {})
    assert json.loads(page.inner_text("[data-export='ds_config']")) == ds_config(Plan.from_dict({}))
    assert page.locator("#checklist li[data-warning]").count() == len(est["warnings"])
    expect(page.locator("#oom")).to_be_visible() if not est["fits"] else expect(page.locator("#oom")).to_be_hidden()
    # the in-browser engine agrees: a no-op edit recomputes the default plan in Pyodide
    change(page, lambda: page.fill("[name='micro_batch_size']", "2"))
    assert_shows(page, {})
    assert json.loads(page.inner_text("[data-export='ds_config']")) == ds_config(Plan.from_dict({}))
    # nothing left the machine, nothing failed, and the guard really blocks
    assert page.blocked == [] and page.js_errors == []
    assert page.evaluate("fetch('https://cdn.jsdelivr.net/npm/pyodide').then(() => true, () => false)") is False
    # stopped by the page's CSP (connect-src 'self') before the network, or else by the test's guard
    assert page.blocked in ([], ["https://cdn.jsdelivr.net/npm/pyodide"])
    page.screenshot(path=str(ARTIFACTS / "page-wide.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(ARTIFACTS / "page-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390   # no sideways scrolling


def test_changing_inputs_updates_everything(offline_page):
    page = offline_page
    open_app(page)
    plan = {}
    change(page, lambda: page.select_option("[name='model']", "qwen2.5-7b"))
    plan["model"] = "qwen2.5-7b"
    assert_shows(page, plan)
    assert page.inner_text("[data-view='model.name']") == MODELS["qwen2.5-7b"].name
    change(page, lambda: page.select_option("[name='gpu']", "h100-sxm-80gb"))
    plan["gpu"] = "h100-sxm-80gb"
    assert_shows(page, plan)
    change(page, lambda: page.check("[name='zero_stage'][value='3']"))
    plan["zero_stage"] = 3
    assert_shows(page, plan)
    change(page, lambda: page.fill("[name='micro_batch_size']", "4"))
    plan["micro_batch_size"] = 4
    assert_shows(page, plan)
    change(page, lambda: page.check("[name='method'][value='lora']"))
    plan["method"] = "lora"
    change(page, lambda: page.uncheck("[name='lora.targets'][value='down_proj']"))
    plan["lora"] = {"targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"]}
    change(page, lambda: page.fill("[name='lora.rank']", "64"))
    plan["lora"]["rank"] = 64
    est = assert_shows(page, plan)
    assert page.inner_text("#plan [data-out='trainable_params']") == _count(est["trainable_params"])
    assert json.loads(page.inner_text("[data-export='ds_config']")) == ds_config(Plan.from_dict(plan))
    # the share link holds exactly this plan
    link = page.input_value("#share-url")
    assert Plan.from_dict(json.loads(unquote(link.split("#plan=", 1)[1]))) == Plan.from_dict(plan)
    # a custom GPU: seeded with the previous preset's capacity, then edited
    page.select_option("[name='gpu']", "custom")
    # the H100 SXM preset reports 81,559 MiB = 79.647 GiB (nvidia-smi), not the marketed 80 GB
    assert float(page.input_value("[name='gpu.memory_gib']")) == 81_559 / 1024
    change(page, lambda: page.fill("[name='gpu.memory_gib']", "24"))
    plan["gpu"] = {"name": "My GPU", "memory_gib": 24}
    assert_shows(page, plan)
    # GPT-2's checkboxes carry GPT-2's module names
    change(page, lambda: page.select_option("[name='model']", "gpt2"))
    names = page.eval_on_selector_all("[name='lora.targets']", "els => els.map(e => e.value)")
    assert set(names) == {"c_attn", "c_proj", "c_fc"}
    assert page.js_errors == [] and [u for u in page.blocked] == []


def _count(n):
    for size, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M")):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,}"


def test_oom_plan_shows_alert_and_driver(offline_page):
    page = offline_page
    open_app(page)
    plan = {"model": "llama-3.1-70b", "zero_stage": 0}
    # 70.55 B params x 2 B (bf16 weights) = 141 GB > 80 GiB before anything else: cannot fit
    assert MODELS["llama-3.1-70b"].params_total * 2 > 80 * 2**30
    change(page, lambda: page.select_option("[name='model']", "llama-3.1-70b"))
    change(page, lambda: page.check("[name='zero_stage'][value='0']"))
    est = assert_shows(page, plan)
    assert est["fits"] is False
    expect(page.locator("#oom")).to_be_visible()
    from app.view import LABELS
    assert page.inner_text("#oom [data-out='primary_driver']") == LABELS.get(est["primary_driver"], est["primary_driver"])
    assert page.inner_text("#oom [data-out='min_gpus']") == ("none" if est["min_gpus"] is None else str(est["min_gpus"]))
    assert page.inner_text("[data-out='fits']").startswith("Out of memory by")
    page.screenshot(path=str(ARTIFACTS / "page-oom.png"))


@pytest.mark.parametrize("bads", [("0", "-1", "1e12", "abc")])
def test_bad_values_are_reported_next_to_the_field(offline_page, bads):
    page = offline_page
    open_app(page)
    change(page, lambda: page.fill("[name='seq_len']", "2048"))
    for bad in bads:
        change(page, lambda: page.fill("[name='micro_batch_size']", bad))
        msg = page.locator("[data-error-for='micro_batch_size']")
        expect(msg).to_be_visible()
        assert "micro_batch_size" in msg.inner_text(), bad
        assert page.input_value("[name='micro_batch_size']") == bad          # what the user typed stays
        assert_shows(page, {"seq_len": 2048})                                  # the rest still applies
    change(page, lambda: page.fill("[name='micro_batch_size']", "1"))
    expect(page.locator("[data-error-for='micro_batch_size']")).to_be_hidden()
    assert_shows(page, {"seq_len": 2048, "micro_batch_size": 1})
    # a malformed config.json: message by the paste box, model unchanged, user text never parsed as HTML
    page.click("#paste-config summary")
    page.fill("[name='model_config_json']", '{"hidden_size": 4096, <img src=x onerror="window.pwned=1">')
    msg = page.locator("[data-error-for='model_config_json']")
    expect(msg).to_be_visible()
    assert "config.json" in msg.inner_text()
    assert page.locator("img[src='x']").count() == 0 and not page.evaluate("window.pwned")
    assert_shows(page, {"seq_len": 2048, "micro_batch_size": 1})          # the model is unchanged
    # a good config.json becomes the model
    cfg = {**MODELS["llama-3.2-1b"].hf_config, "name": "pasted"}
    change(page, lambda: page.fill("[name='model_config_json']", json.dumps(cfg)))
    expect(msg).to_be_hidden()
    assert_shows(page, {"seq_len": 2048, "micro_batch_size": 1, "model": {**cfg}})
    assert page.input_value("[name='model.hidden_size']") == str(cfg["hidden_size"])
    # a bad custom dimension is named next to its own field
    change(page, lambda: page.fill("[name='model.num_hidden_layers']", "-2"))
    expect(page.locator("[data-error-for='model.num_hidden_layers']")).to_be_visible()
    assert page.js_errors == []


def test_inputs_made_before_the_engine_is_ready_are_applied(offline_page):
    page = offline_page
    held = []

    def hold(route):   # keep the wasm back until the user has typed
        held.append(route)

    page.context.route("**/pyodide.asm.wasm", hold)
    page.goto(page.base + "/index.html")
    page.fill("[name='micro_batch_size']", "1")
    page.fill("[name='seq_len']", "1024")
    page.check("[name='zero_stage'][value='3']")
    assert page.get_attribute("html", "data-engine") == "loading"
    expect(page.locator("body")).to_have_attribute("data-stale", "true")
    deadline = time.time() + 60
    while not held and time.time() < deadline:
        page.wait_for_timeout(100)
    assert held, "the worker never asked for pyodide.asm.wasm"
    for r in held:
        r.continue_()
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    settle(page, 0)
    assert_shows(page, {"micro_batch_size": 1, "seq_len": 1024, "zero_stage": 3})
    assert page.input_value("[name='seq_len']") == "1024"


def test_share_link_opens_the_plan_and_reports_bad_keys(offline_page):
    page = offline_page
    shared = {"schema": 1, "model": "qwen2.5-7b", "zero_stage": 3, "micro_batch_size": 0, "seq_len": 8192}
    open_app(page, "#plan=" + quote(json.dumps(shared)))
    assert page.input_value("[name='model']") == "qwen2.5-7b"
    assert page.is_checked("[name='zero_stage'][value='3']")
    expect(page.locator("[data-error-for='micro_batch_size']")).to_be_visible()
    assert_shows(page, {"model": "qwen2.5-7b", "zero_stage": 3, "seq_len": 8192})
    assert page.js_errors == []


def test_share_link_pasted_into_the_same_tab_replaces_the_plan(offline_page):
    page = offline_page
    open_app(page, "#plan=" + quote(json.dumps({"schema": 1, "zero_stage": 3, "seq_len": 1024})))
    assert_shows(page, {"zero_stage": 3, "seq_len": 1024})
    n = int(page.get_attribute("html", "data-updates"))
    page.evaluate("h => { location.hash = h; }", "#plan=" + quote(json.dumps({"schema": 1, "nodes": 2})))
    settle(page, n)
    assert_shows(page, {"nodes": 2})          # stage and seq_len are back to the defaults
    assert page.is_checked("[name='zero_stage'][value='2']")


def test_engine_that_cannot_start_says_so_and_keeps_the_figures(offline_page):
    page = offline_page
    page.context.route("**/assets/engine.zip", lambda route: route.abort())   # the engine files, one archive
    page.goto(page.base + "/index.html")
    page.wait_for_selector("html[data-engine='failed']", state="attached", timeout=READY)
    assert "could not start" in page.inner_text("#engine-status")
    want, _ = expected_figures({})
    assert page.evaluate(FIGURES_JS) == want


def test_a_deflated_engine_archive_still_boots(offline_page, site, tmp_path):
    """assets/worker.js writes the stored engine.zip's entries into Pyodide's file system itself; an archive it
    cannot read that way (here every entry deflated) goes to pyodide.unpackArchive, and the share link's figures
    are the engine's all the same, on both boots."""
    import zipfile

    deflated = tmp_path / "engine.zip"
    with zipfile.ZipFile(site / "assets" / "engine.zip") as src, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    body = deflated.read_bytes()
    page = offline_page
    served = []

    def deflated_archive(route):
        served.append(route.request.url)
        route.fulfill(body=body, content_type="application/zip")

    page.context.route("**/assets/engine.zip", deflated_archive)
    for boot in ("?nosw", "?boot=normal&nosw"):      # nosw: no service worker answers from its cache
        page.goto(page.base + "/index.html" + boot + "#plan=" + quote(json.dumps({"schema": 1, "zero_stage": 3})))
        page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
        assert_shows(page, {"zero_stage": 3})
    # one request per page load from the engine's worker, plus one from the planner's if it started before the next load
    assert 2 <= len(served) <= 4 and page.js_errors == [] and page.blocked == []


def test_pyscript_runtime_variant_runs_the_same_engine(offline_page):
    """index.html?runtime=pyscript: the same worker.py and `files` map, run by PyScript's PyWorker."""
    page = offline_page
    page.goto(page.base + "/index.html?runtime=pyscript")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    settle(page, -1)
    change(page, lambda: page.fill("[name='seq_len']", "2048"))
    assert_shows(page, {"seq_len": 2048})
    assert page.blocked == []


def test_fp8_select_reaches_the_engine_and_a_gpu_without_fp8_is_named(offline_page):
    """plan-v1 Extension 9 on the page: the "FP8 linears" select is the plan's `fp8`; on the default A100
    (compute capability 8.0, no fp8 tensor cores) the engine refuses it next to the field and keeps the rest."""
    page = offline_page
    open_app(page)
    change(page, lambda: page.select_option("[name='fp8']", "rowwise"))
    msg = page.locator("[data-error-for='fp8']")
    expect(msg).to_be_visible()
    assert "fp8" in msg.inner_text()
    assert_shows(page, {})                                                    # the figures stay the last good plan's
    change(page, lambda: page.select_option("[name='gpu']", "h100-sxm-80gb"))
    expect(msg).to_be_hidden()
    plan = {"gpu": "h100-sxm-80gb", "fp8": "rowwise"}
    est = assert_shows(page, plan)
    bf16 = estimate(Plan.from_dict({"gpu": "h100-sxm-80gb"})).to_dict()
    assert est["step"]["time_s"] < bf16["step"]["time_s"]                     # fp8 GEMMs at the fp8 peak
    assert page.inner_text("[data-view='step.time']") == f"{est['step']['time_s']:.3g}"
    link = page.input_value("#share-url")
    assert Plan.from_dict(json.loads(unquote(link.split("#plan=", 1)[1]))) == Plan.from_dict(plan)
    assert page.js_errors == []
