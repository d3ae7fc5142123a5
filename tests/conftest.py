"""Shared fixtures. The browser section serves a fresh build of the site (what `make site` writes to
_site/) on a loopback port of its own, and drives Debian's Chromium (or Playwright's own browser where
/usr/bin/chromium is missing, e.g. on GitHub's runners) with every non-loopback request aborted.
Recipe and pitfalls: docs/page-runtime.md."""
from __future__ import annotations

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading
from urllib.parse import urlparse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = ROOT / "_site"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# No --headless / --user-data-dir: Playwright adds both itself (docs/page-runtime.md §2).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions"]
# Harmless console noise: PyScript's worker notes that SharedArrayBuffer is unavailable (no COOP/COEP on
# GitHub Pages; the worker only computes, so it needs none).
ALLOWED_CONSOLE = ("SharedArrayBuffer", "Atomics")


# ---- the built site ------------------------------------------------------------------------------------

def build_site(out: pathlib.Path = SITE) -> pathlib.Path:
    """Build the site from the working tree (scripts/build_site.py), so the tests test the current code."""
    if not (ROOT / "assets" / "vendor" / "manifest.json").exists():
        if not shutil.which("npm"):
            pytest.fail("assets/vendor/ is missing and npm is not installed: run `make vendor`")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True)
        subprocess.run([sys.executable, "scripts/vendor.py"], cwd=ROOT, check=True)
    subprocess.run([sys.executable, "scripts/build_site.py", "--out", str(out)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return out


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript"}

    def log_message(self, *args):   # quiet
        pass


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> pathlib.Path:
    """A private build of the site for this test session: what `make site` puts in _site/, built from
    the current tree, and safe from another run rebuilding _site/ meanwhile."""
    return build_site(tmp_path_factory.mktemp("zerocalc") / "_site")


@pytest.fixture(scope="session")
def server(site):
    """http://127.0.0.1:<free port> serving _site/ from a thread of this process."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


# ---- Playwright overrides (only when pytest-playwright is installed) -------------------------------------

try:
    import pytest_playwright  # noqa: F401
    HAVE_PLAYWRIGHT = True
except ImportError:
    HAVE_PLAYWRIGHT = False

if HAVE_PLAYWRIGHT:
    @pytest.fixture(scope="session")
    def browser_type_launch_args(browser_type_launch_args):
        args = {**browser_type_launch_args, "args": CHROMIUM_ARGS}
        if pathlib.Path(CHROMIUM).exists():
            args["executable_path"] = CHROMIUM
        return args

    @pytest.fixture(scope="session")
    def browser_context_args(browser_context_args):
        # A service worker's fetches would bypass context.route; the page registers none anyway.
        return {**browser_context_args, "service_workers": "block", "viewport": {"width": 1366, "height": 900}}

    @pytest.fixture
    def offline_page(page, server):
        """A page where every request that is not to 127.0.0.1 is aborted and recorded (workers too:
        the route is on the context). page.blocked: aborted URLs; page.js_errors: errors seen."""
        blocked: list[str] = []

        def guard(route):
            url = route.request.url
            if url.startswith(("data:", "blob:")) or urlparse(url).hostname in ("127.0.0.1", "localhost"):
                route.continue_()
            else:
                blocked.append(url)
                route.abort()

        page.context.route("**/*", guard)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and not any(a in m.text for a in ALLOWED_CONSOLE)
                and errors.append(m.text))
        page.blocked = blocked
        page.js_errors = errors
        page.base = server
        ARTIFACTS.mkdir(exist_ok=True)
        return page
