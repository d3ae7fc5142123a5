"""The page's speed mechanisms (issue 25), in Chromium, offline. Timings are not asserted here (a loaded 2-core CI
box makes them flaky): scripts/bench_page.py measures them; these tests check the mechanisms that make them.

- The default plan's figures are in the HTML itself: with JavaScript off, the page shows the CPython engine's bytes.
- The "what fits" panel plans in its own worker (assets/worker.js?role=planner), restored from the same snapshot with
  the WebAssembly module the engine compiled (streaming compilation, once): with the planner's thread held busy, an
  edit's own figures still arrive, and the panel's answer is drawn only once no edit is in flight.
- The WebAssembly is compiled by streaming from the worker's first moment, beside the snapshot's download.
- Cold and repeat visits are driven the same way: the repeat visit (service worker installed, server stopped) boots
  from the snapshot in the service worker's cache (read by the worker from Cache Storage, with the .wasm and the
  engine archive), with both workers, and shows the CPython figures.
"""
import json
import shutil
from urllib.parse import quote

import pytest

pytest.importorskip("pytest_playwright")

from app import view  # noqa: E402
from test_page_browser import FIGURES_JS, READY, assert_shows, change, expected_figures, settle  # noqa: E402
from test_page_offline import Server  # noqa: E402

pytestmark = pytest.mark.browser
PLAN = {"schema": 1, "model": "qwen2.5-7b", "zero_stage": 3, "seq_len": 8192, "micro_batch_size": 1}
HOLD_MS = 4000   # how long a test holds the planner's thread


def _fit_ready(page, runs_above=0):
    page.wait_for_function("(n) => { const f = document.querySelector('#fit');"
                           " return f.dataset.state === 'ready' && Number(f.dataset.runs || 0) > n; }",
                           arg=runs_above, timeout=READY)


def _workers(page):
    """The page's workers by name (assets/engine.js names them; a worker the service worker serves has no query)."""
    return {w.evaluate("() => self.name"): w for w in page.workers}


def visit(page, url, plan, cached=0):
    """One visit, cold or repeat, checked the same way: the engine booted from the snapshot with the WebAssembly it
    compiled by streaming, the share link's figures equal the CPython engine's, the panel planned in its own
    worker from the same snapshot and module."""
    page.goto(url + "#plan=" + quote(json.dumps(plan)))
    page.wait_for_selector("html[data-engine='ready'], html[data-engine='failed']", state="attached", timeout=READY)
    assert page.get_attribute("html", "data-engine") == "ready", page.get_attribute("html", "data-engine-error")
    settle(page, 0)
    assert_shows(page, plan)
    assert page.get_attribute("html", "data-engine-boot") == "snapshot"
    times = json.loads(page.get_attribute("html", "data-engine-times"))
    assert times["wasm"] == "streamed" and times["role"] == "engine"
    assert times.get("cached", 0) == cached   # the .wasm, snapshot and archive read from Cache Storage by the worker
    _fit_ready(page)
    fit = page.locator("#fit")
    assert fit.get_attribute("data-worker") == "planner"
    planner = json.loads(fit.get_attribute("data-worker-times"))
    assert planner["role"] == "planner" and planner["wasm"] == "given"   # the engine's module, not compiled again
    assert {"zerocalc-engine", "zerocalc-planner"} <= set(_workers(page))
    return times


def test_default_figures_are_in_the_html_without_javascript(browser, server):
    ctx = browser.new_context(java_script_enabled=False, service_workers="block")
    try:
        page = ctx.new_page()
        page.goto(server + "/index.html")
        want, est = expected_figures({})
        shown = {}
        for el in page.locator("[data-out][data-bytes]").all():
            shown[el.get_attribute("data-out")] = int(el.get_attribute("data-bytes"))
        assert shown == want
        used = page.locator(".card.verdict [data-out='per_gpu.device_used_bytes']")
        assert used.inner_text() == view.compute({"plan": {}})["out"]["per_gpu.device_used_bytes"]["text"]
        assert used.is_visible()
        assert page.locator("#stack .seg").count() == len(est["per_gpu"]["components"])
    finally:
        ctx.close()


def test_an_edit_is_answered_while_the_planner_is_busy(offline_page):
    page = offline_page
    visit(page, page.base + "/index.html", PLAN)
    planner = _workers(page)["zerocalc-planner"]
    runs = int(page.get_attribute("#fit", "data-runs"))
    # hold the planner's thread, then ask it for a re-plan: it stays busy for HOLD_MS
    planner.evaluate(f"() => {{ setTimeout(() => {{ const t = Date.now(); while (Date.now() - t < {HOLD_MS}); }}, 0); }}")
    page.click("#fit-refresh")
    page.wait_for_selector("#fit[data-state='busy']", state="attached")
    change(page, lambda: page.fill("[name='micro_batch_size']", "2"))   # the engine's own worker answers
    assert page.get_attribute("#fit", "data-state") == "busy"          # ... while the re-plan still waits
    assert page.get_attribute("#fit", "data-runs") == str(runs)
    assert_shows(page, {**PLAN, "micro_batch_size": 2})
    _fit_ready(page, runs)                                             # and the re-plan lands afterwards
    assert not page.js_errors and not page.blocked


def test_the_panel_draws_only_when_no_edit_is_in_flight(offline_page):
    page = offline_page
    visit(page, page.base + "/index.html", PLAN)
    runs = int(page.get_attribute("#fit", "data-runs"))
    ms = page.get_attribute("#fit", "data-ms")
    page.evaluate("() => { document.documentElement.dataset.pending = 'true'; }")   # as app.js marks an edit in flight
    page.click("#fit-refresh")
    page.wait_for_function("(ms) => document.querySelector('#fit').dataset.ms !== ms", arg=ms, timeout=READY)
    page.wait_for_timeout(300)                                          # the answer is here: many frames pass
    assert page.get_attribute("#fit", "data-runs") == str(runs) and page.get_attribute("#fit", "data-state") == "busy"
    page.evaluate("() => { delete document.documentElement.dataset.pending; }")
    _fit_ready(page, runs)
    assert int(page.get_attribute("#fit", "data-deferred")) > 0
    assert float(page.get_attribute("#fit", "data-render-ms")) >= 0
    assert not page.js_errors and not page.blocked


def test_with_one_worker_the_panel_uses_the_engine(offline_page):
    """?planner=engine (the page before the planner worker, kept for scripts/bench_page.py --one-worker)."""
    page = offline_page
    page.goto(page.base + "/index.html?planner=engine")
    _fit_ready(page)
    assert page.get_attribute("#fit", "data-worker") == "engine"
    assert set(_workers(page)) == {"zerocalc-engine"}


@pytest.fixture
def sw_context(browser):
    ctx = browser.new_context(service_workers="allow", viewport={"width": 1366, "height": 900})
    yield ctx
    ctx.close()


def test_cold_then_repeat_visit_from_the_service_worker(sw_context, site, tmp_path):
    root = tmp_path / "site"
    shutil.copytree(site, root)
    srv = Server(root)
    errors = []
    page = sw_context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    visit(page, srv.base + "/index.html", PLAN)                       # cold
    page.wait_for_selector("html[data-offline='ready']", state="attached", timeout=READY)
    page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=30_000)
    cache = page.evaluate("() => caches.keys()")
    assert len(cache) == 1
    cached = page.evaluate("async (c) => (await (await caches.open(c)).keys()).map((r) => new URL(r.url).pathname)",
                           cache[0])
    assert {"/assets/engine.snapshot", "/assets/vendor/pyodide/pyodide.asm.wasm", "/assets/engine.zip"} <= set(cached)
    page.close()
    srv.stop()                                                         # from now on only the service worker answers
    served = []
    tab = sw_context.new_page()
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("response", lambda r: served.append((r.url.split("/", 3)[3], r.from_service_worker)))
    plan = {**PLAN, "micro_batch_size": 2}
    visit(tab, srv.base + "/index.html", plan, cached=3)               # repeat: the same checks, from the cache
    assert ("index.html", True) in served
    change(tab, lambda: tab.fill("[name='seq_len']", "4096"))
    assert_shows(tab, {**plan, "seq_len": 4096})
    assert tab.evaluate(FIGURES_JS)
    assert errors == []
