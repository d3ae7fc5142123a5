"""The page's speed mechanisms (issue 25), in Chromium, offline. Timings are not asserted here (a loaded 2-core CI
box makes them flaky): scripts/bench_page.py measures them; these tests check the mechanisms that make them.

- The default plan's figures are in the HTML itself: with JavaScript off, the page shows the CPython engine's bytes.
- The "what fits" panel plans in its own worker (assets/worker.js?role=planner), restored from the same snapshot with
  the WebAssembly module the engine compiled (streaming compilation, once): with the planner's thread held busy, an
  edit's own figures still arrive, and the panel's answer is drawn only once no edit is in flight.
- The WebAssembly is compiled by streaming from the worker's first moment, beside the snapshot's download.
- Cold and repeat visits are driven the same way: the repeat visit (service worker installed, server stopped) boots
  from the snapshot in the service worker's cache (read by the worker from Cache Storage, with the engine archive;
  the .wasm is fetched, so the service worker answers it: Chromium keeps WebAssembly code only for a fetched
  Response), with both workers, and shows the CPython figures.
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
    assert times.get("cached", 0) == cached   # the snapshot and archive read from Cache Storage by the worker
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


def test_the_panel_plans_and_draws_only_when_no_edit_is_in_flight(offline_page):
    page = offline_page
    visit(page, page.base + "/index.html", PLAN)
    runs = int(page.get_attribute("#fit", "data-runs"))
    ms = page.get_attribute("#fit", "data-ms")
    page.evaluate("() => { document.documentElement.dataset.pending = 'true'; }")   # as app.js marks an edit in flight
    page.click("#fit-refresh")
    page.wait_for_timeout(600)                                          # many frames pass: the re-plan waits
    assert page.get_attribute("#fit", "data-ms") == ms                  # ... not even sent to the planner
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
    visit(tab, srv.base + "/index.html", plan, cached=2)               # repeat: the same checks, from the cache
    assert ("index.html", True) in served
    # the .wasm is fetched (the service worker answers it from its cache), not read by caches.match(): Chromium
    # keeps compiled WebAssembly only for a Response that came from fetch() (README, "Repeat visits")
    assert ("assets/vendor/pyodide/pyodide.asm.wasm", True) in served, served
    change(tab, lambda: tab.fill("[name='seq_len']", "4096"))
    assert_shows(tab, {**plan, "seq_len": 4096})
    assert tab.evaluate(FIGURES_JS)
    assert errors == []


# Records, in the page, the order in which an answer reaches the DOM: "figures" when <html data-updates> changes
# (with the verdict's bytes at that moment), "chart" when the run chart's bars are redrawn, "drawn" when
# <html data-drawn> changes. With again=true the user types again (seq_len 4096) the moment the first figures land,
# in the same task: an edit is in flight before the first answer could draw anything.
ORDER_JS = """(again) => {
  const html = document.documentElement, log = window.__order = [];
  let held = false;
  new MutationObserver((records) => { for (const r of records) {
    if (r.target === html && r.attributeName === "data-updates") {
      log.push(["figures", html.dataset.updates,
                document.querySelector("[data-out='per_gpu.device_used_bytes']").dataset.bytes]);
      if (again && !held) { held = true; const f = document.querySelector("[name='seq_len']");
        f.value = "4096"; f.dispatchEvent(new Event("input", { bubbles: true })); }
    } else if (r.target === html && r.attributeName === "data-drawn") log.push(["drawn", html.dataset.drawn]);
    else if (r.type === "childList") log.push(["chart", html.dataset.updates]);
  } }).observe(html, { attributes: true, attributeFilter: ["data-updates", "data-drawn"] });
  new MutationObserver(() => log.push(["chart", html.dataset.updates]))
    .observe(document.querySelector("#run-bars"), { childList: true });
}"""


def _used(plan):
    return str(expected_figures(plan)[0]["per_gpu.device_used_bytes"])


def test_an_edits_figures_reach_the_dom_before_its_charts(offline_page):
    """The figures are written in the worker's message task; the run chart, the checklist, the config and the
    share link follow in later frames (assets/app.js apply / drawRest)."""
    page = offline_page
    visit(page, page.base + "/index.html", PLAN)
    n = int(page.get_attribute("html", "data-updates"))
    page.evaluate(ORDER_JS, False)
    change(page, lambda: page.fill("[name='micro_batch_size']", "4"))
    plan = {**PLAN, "micro_batch_size": 4}
    log = [tuple(e) for e in page.evaluate("window.__order")]
    kinds = [e[0] for e in log]
    assert kinds[0] == "figures" and log[0] == ("figures", str(n + 1), _used(plan)), log   # new bytes, first
    assert "chart" in kinds and kinds.index("chart") > 0                                   # the chart after them
    assert log[-1] == ("drawn", str(n + 1))
    assert page.text_content("#run-desc") == view.compute({"plan": plan})["run"]["summary"]
    assert_shows(page, plan)
    assert not page.js_errors and not page.blocked


def test_a_newer_edit_replaces_an_older_answers_drawing(offline_page):
    """An edit typed the moment an answer's figures land: that answer's charts wait (an edit is in flight), the
    newer answer's figures land next and the older drawing is abandoned: none of its pieces reach the DOM."""
    page = offline_page
    visit(page, page.base + "/index.html", PLAN)
    n = int(page.get_attribute("html", "data-updates"))
    page.evaluate(ORDER_JS, True)
    change(page, lambda: page.fill("[name='micro_batch_size']", "2"))   # then seq_len 4096, typed by ORDER_JS
    page.wait_for_function("(n) => document.documentElement.dataset.drawn === String(n + 2)", arg=n, timeout=READY)
    plan = {**PLAN, "micro_batch_size": 2, "seq_len": 4096}
    log = [tuple(e) for e in page.evaluate("window.__order")]
    assert [e for e in log if e[0] == "figures"] == [("figures", str(n + 1), _used({**PLAN, "micro_batch_size": 2})),
                                                     ("figures", str(n + 2), _used(plan))], log
    assert ("drawn", str(n + 1)) not in log                                   # the older drawing was abandoned
    assert all(e[1] == str(n + 2) for e in log if e[0] == "chart")            # every redraw is the newer answer's
    assert log[-1] == ("drawn", str(n + 2))
    assert page.text_content("#run-desc") == view.compute({"plan": plan})["run"]["summary"]
    assert_shows(page, plan)
    assert not page.js_errors and not page.blocked
