"""Boot from a Pyodide memory snapshot (issue 15, item 1), in Chromium, offline: scripts/build_site.py saves the
engine's memory (assets/engine.snapshot); the page restores it (data-engine-boot="snapshot") and shows the same
figures as a normal boot (?boot=normal) and as the CPython engine; a missing or corrupt snapshot falls back to a
normal boot, and says so."""
import gzip
import json
from urllib.parse import quote

import pytest

pytest.importorskip("pytest_playwright")

from test_page_browser import FIGURES_JS, READY, assert_shows, change, settle  # noqa: E402

pytestmark = pytest.mark.browser
PLAN = {"schema": 1, "model": "llama-3.1-70b", "zero_stage": 3, "gpus_per_node": 8, "method": "lora", "seq_len": 2048}


def _open(page, query, plan):
    page.goto(page.base + "/index.html" + query + "#plan=" + quote(json.dumps(plan)))
    page.wait_for_selector("html[data-engine='ready'], html[data-engine='failed']", state="attached", timeout=READY)
    assert page.get_attribute("html", "data-engine") == "ready"
    settle(page, 0)


def test_snapshot_is_built(site):
    data = (site / "assets" / "engine.snapshot").read_bytes()
    assert data[:2] == b"\x1f\x8b"                             # gzip
    raw = gzip.decompress(data)
    assert raw[:4] == b"\x00snp" and len(raw) > 16 * 2**20     # Pyodide's snapshot header, then its memory


def test_snapshot_boot_equals_normal_boot(offline_page):
    page = offline_page
    seen = {}
    for query in ("", "?boot=normal"):
        _open(page, query, PLAN)
        seen[query] = (page.get_attribute("html", "data-engine-boot"), page.evaluate(FIGURES_JS),
                       page.inner_text("[data-export='ds_config']"))
        assert_shows(page, PLAN)
        change(page, lambda: page.fill("[name='micro_batch_size']", "3"))   # and a plan the snapshot never saw
        assert_shows(page, {**PLAN, "micro_batch_size": 3})
        change(page, lambda: page.select_option("[name='gpu']", "h100-sxm-80gb"))
        assert_shows(page, {**PLAN, "micro_batch_size": 3, "gpu": "h100-sxm-80gb"})
        seen[query] += (page.evaluate(FIGURES_JS),)
    assert seen[""][0] == "snapshot" and seen["?boot=normal"][0] == "normal"
    assert seen[""][1:] == seen["?boot=normal"][1:]
    assert page.js_errors == [] and page.blocked == []


@pytest.mark.parametrize("bad", ["missing", "corrupt"])
def test_a_bad_snapshot_falls_back_to_a_normal_boot(offline_page, bad):
    page = offline_page
    if bad == "missing":
        page.context.route("**/assets/engine.snapshot", lambda r: r.fulfill(status=404, body="no"))
    else:
        body = gzip.compress(b"\x00" * 2**20 * 20)
        page.context.route("**/assets/engine.snapshot", lambda r: r.fulfill(status=200, body=body,
                                                                             content_type="application/octet-stream"))
    _open(page, "", PLAN)
    assert page.get_attribute("html", "data-engine-boot") == "normal"
    assert_shows(page, PLAN)
