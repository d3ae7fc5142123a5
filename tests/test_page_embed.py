"""?embed=1 (issue 15, item 3), in Chromium, offline: the compact view for docs sites is at most 70 % of the
full page's height and never scrolls sideways at 640 px; it keeps the verdict, the breakdown and the key inputs
and drops the header, the FAQ and every section not marked data-embed; it posts each estimate to the embedding
page; the share section offers the <iframe> snippet."""
import html
import json
import re
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")

from test_page_browser import READY, assert_shows, open_app, settle  # noqa: E402
from zerocalc import Plan, estimate  # noqa: E402

pytestmark = pytest.mark.browser
HEIGHT_JS = "() => document.documentElement.scrollHeight"
WIDTH_JS = "() => document.documentElement.scrollWidth"
PLAN = {"schema": 1, "model": "qwen2.5-7b", "zero_stage": 3, "seq_len": 2048}


def test_embed_view_is_compact_and_fits_640px(offline_page):
    page = offline_page
    page.set_viewport_size({"width": 640, "height": 900})
    open_app(page, "#plan=" + quote(json.dumps(PLAN)))
    full = page.evaluate(HEIGHT_JS)
    page.goto(page.base + "/index.html?embed=1#plan=" + quote(json.dumps(PLAN)))
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    settle(page, 0)
    assert page.get_attribute("html", "data-embed") == "1"
    embed = page.evaluate(HEIGHT_JS)
    assert embed <= 0.7 * full, (embed, full)
    assert page.evaluate(WIDTH_JS) <= 640                           # no sideways scroll
    for kept in ("[data-out='fits']", "#stack", "#rows", "#f-model", "#f-gpu", "#f-gpus_per_node",
                 "[name='zero_stage'][value='3']", "#embed-open"):
        assert page.locator(kept).first.is_visible(), kept
    for gone in ("#reference", ".brand", "#config", "#share", "#checks", "footer", "#s-batch", "#s-lora"):
        assert not page.locator(gone).first.is_visible(), gone
    assert_shows(page, PLAN)
    # the full-page link is the same plan without ?embed
    href = page.get_attribute("#embed-open", "href")
    assert "embed" not in href.split("#")[0]
    assert Plan.from_dict(json.loads(unquote(href.split("#plan=", 1)[1]))) == Plan.from_dict(PLAN)
    page.set_viewport_size({"width": 390, "height": 800})
    assert page.evaluate(WIDTH_JS) <= 390
    assert page.js_errors == [] and page.blocked == []


HOST = """<!doctype html><meta charset="utf-8"><title>docs page</title>
<script>window.got = []; addEventListener("message", (e) => { if (e.data && e.data.type === "zerocalc:estimate") got.push(e.data); });</script>
<h1>Our training docs</h1><iframe id="zc" title="zerocalc" width="640" height="900" src="SRC"></iframe>"""


def test_embed_posts_the_estimate_to_the_parent(offline_page):
    page = offline_page
    page.goto(page.base + "/index.html#plan=" + quote(json.dumps(PLAN)))
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    settle(page, 0)
    snippet = page.input_value("#embed-snippet")
    m = re.fullmatch(r'<iframe src="([^"]+)" title="[^"]+" width="100%" height="\d+" loading="lazy"></iframe>', snippet)
    assert m, snippet
    src = html.unescape(m.group(1))
    assert "?embed=1#plan=" in src
    # the docs page, served at the site's origin by the test (the shared site folder stays untouched)
    page.route(page.base + "/embed-host.html",
               lambda r: r.fulfill(status=200, content_type="text/html", body=HOST.replace("SRC", src.replace(page.base, ""))))
    page.goto(page.base + "/embed-host.html")
    page.wait_for_function("() => window.got.length > 0", timeout=READY)
    msg = page.evaluate("() => window.got[window.got.length - 1]")
    assert msg["schema"] == 1 and msg["estimate"] == estimate(Plan.from_dict(PLAN)).to_dict()
    assert Plan.from_dict(msg["plan"]) == Plan.from_dict(PLAN) and msg["height"] > 0
    # an edit inside the frame posts the new estimate
    frame = page.frame_locator("#zc")
    frame.locator("[name='zero_stage'][value='2']").check()
    page.wait_for_function("() => window.got.some((m) => m.plan.zero_stage === 2)", timeout=30_000)
    msg = page.evaluate("() => window.got.find((m) => m.plan.zero_stage === 2)")
    assert msg["estimate"] == estimate(Plan.from_dict({**PLAN, "zero_stage": 2})).to_dict()
    assert page.js_errors == [] and page.blocked == []
