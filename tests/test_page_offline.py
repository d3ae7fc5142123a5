"""Offline and installable (issue 15, item 2), in Chromium with service workers allowed: the first visit
precaches the site; with the server down a second visit works with any share link; a new deploy (new content
hash) replaces the old cache cleanly, after the page's "Reload"; the manifest's icons exist.

Service workers bypass Playwright routing, so these tests use their own browser context (service workers
allowed, no route guard) and their own server on a copy of the built site, which they stop and change. The page's
CSP (connect-src 'self') keeps every request on the origin."""
import functools
import http.server
import json
import shutil
import struct
import threading
from urllib.parse import quote

import pytest

pytest.importorskip("pytest_playwright")

from conftest import _Handler  # noqa: E402
from scripts import build_site  # noqa: E402
from test_page_browser import READY, assert_shows, settle  # noqa: E402

pytestmark = pytest.mark.browser


class Server:
    """A stoppable http.server on a copy of the site."""

    def __init__(self, root):
        handler = type("H", (_Handler,), {"extensions_map": {**_Handler.extensions_map,
                                                              ".webmanifest": "application/manifest+json"}})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def sw_context(browser):
    """A context where the page's service worker may register (conftest's browser_context_args block them)."""
    ctx = browser.new_context(service_workers="allow", viewport={"width": 1366, "height": 900})
    yield ctx
    ctx.close()


def _wait_offline_ready(page):
    page.wait_for_selector("html[data-offline='ready']", state="attached", timeout=READY)
    page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=30_000)


def _caches(page):
    return sorted(page.evaluate("() => caches.keys()"))


def test_second_visit_with_the_server_down_works_with_any_share_link(sw_context, site, tmp_path):
    root = tmp_path / "site"
    shutil.copytree(site, root)
    v1, files = build_site.precache(root)
    assert {"index.html", "assets/app.js", "assets/vendor/pyodide/pyodide.asm.wasm", "pyscript.json",
            "manifest.webmanifest"} <= set(files)
    srv = Server(root)
    page = sw_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(srv.base + "/index.html")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    _wait_offline_ready(page)
    assert _caches(page) == [f"zerocalc-{v1}"]
    n_cached = page.evaluate("async (c) => (await (await caches.open(c)).keys()).length", f"zerocalc-{v1}")
    assert n_cached == len(files)

    # a new deploy: one changed file -> new version; the open page is offered a reload, then only v2 is cached
    idx = root / "index.html"
    idx.write_text(idx.read_text().replace("an estimate, not a measurement", "an estimate (v2), not a measurement"))
    v2 = build_site.write_service_worker(root)
    assert v2 != v1
    page.evaluate("() => navigator.serviceWorker.getRegistration().then((r) => r.update())")
    page.wait_for_selector("#sw-update:not([hidden])", timeout=60_000)
    assert "(v2)" not in page.inner_text("footer")                 # the open tab keeps its version meanwhile
    with page.expect_navigation(timeout=60_000):
        page.click("#sw-reload")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    assert "(v2)" in page.inner_text("footer")
    page.wait_for_function("(v) => caches.keys().then((k) => k.length === 1 && k[0] === 'zerocalc-' + v)", arg=v2,
                           timeout=30_000, polling=200)

    # the server goes away; a new tab opens share links (full page and embed) from the cache alone
    srv.stop()
    plan = {"schema": 1, "model": "qwen2.5-7b", "zero_stage": 3, "seq_len": 1024}
    for query in ("", "?embed=1"):
        tab = sw_context.new_page()
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(srv.base + "/index.html" + query + "#plan=" + quote(json.dumps(plan)))
        tab.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
        settle(tab, 0)
        assert_shows(tab, plan)
        assert "(v2)" in tab.inner_text("footer") or query
        tab.close()
    assert errors == []


def test_manifest_and_icons(site):
    m = json.loads((site / "manifest.webmanifest").read_text())
    assert m["start_url"] == "./index.html" and m["display"] == "standalone" and m["short_name"] == "zerocalc"
    pngs = [i for i in m["icons"] if i["type"] == "image/png"]
    assert {i["sizes"] for i in pngs} == {"192x192", "512x512"}
    for icon in pngs:
        data = (site / icon["src"]).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = struct.unpack(">II", data[16:24])
        assert f"{w}x{h}" == icon["sizes"]
    assert '<link rel="manifest" href="./manifest.webmanifest">' in (site / "index.html").read_text()


def test_precache_version_is_a_content_hash(site, tmp_path):
    root = tmp_path / "s"
    shutil.copytree(site, root)
    v, files = build_site.precache(root)
    assert "sw.js" not in files and len(v) == 16
    assert json.dumps(files, indent=1) in (site / "sw.js").read_text() and f'"{v}"' in (site / "sw.js").read_text()
    (root / "assets" / "app.css").write_text((root / "assets" / "app.css").read_text() + "\n")
    assert build_site.precache(root)[0] != v                      # any byte changed -> a new version
