"""Hostile input stays harmless and faults say so (issue 15, items 5 and 6), in Chromium, offline.

- The built page carries a Content-Security-Policy that allows only its own origin (plus 'wasm-unsafe-eval'
  for Pyodide), and the page itself trips none of it: no inline script, no style attribute.
- 50 XSS payloads (tests/data/xss_payloads.txt) through every text input and textarea of the page, the share
  link and the config.json paste box: none executes (no dialog, no marker, no injected element, no console
  marker) and no request leaves the origin.
- Pasted configs and share links have size limits with a clear message.
- Each runtime file blocked in turn: a visible failure message within 2 s of the failure, the pre-rendered
  figures kept, the form and the share link still working.
"""
import json
import pathlib
import re
import time
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")
from playwright.sync_api import expect  # noqa: E402

from test_page_browser import FIGURES_JS, READY, expected_figures, open_app, settle  # noqa: E402
from zerocalc.presets import MODELS  # noqa: E402

pytestmark = pytest.mark.browser
PAYLOADS = [line for line in (pathlib.Path(__file__).parent / "data" / "xss_payloads.txt").read_text().splitlines()
            if line and not line.startswith("#")]

# Installed before any page script: CSP violations, and the markers a payload would set.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));
"""
# Elements or attributes only an injection could have made (the page has no inline handlers, frames, objects).
INJECTED_JS = """() => {
  const bad = [];
  for (const e of document.querySelectorAll('*')) {
    for (const a of e.attributes) if (/^on/i.test(a.name)) bad.push(e.tagName + ' ' + a.name);
    if (/^(IFRAME|OBJECT|EMBED|BASE|MARQUEE|VIDEO|AUDIO|FORM|ISINDEX|TEMPLATE)$/.test(e.tagName) && e.id !== 'plan') bad.push(e.tagName);
    if (e.tagName === 'A' && /^\\s*javascript:/i.test(e.getAttribute('href') || '')) bad.push('A javascript:');
  }
  for (const s of document.scripts) if (!s.src && s.type !== 'application/json') bad.push('inline SCRIPT');
  for (const i of document.images) if (!i.src.endsWith('/assets/icon.svg')) bad.push('IMG ' + i.src);
  if (document.querySelectorAll('head meta[http-equiv="refresh"], link[href*="evil"], style').length) bad.push('head injection');
  return bad;
}"""
FILL_ALL_JS = """(payload) => {
  const boxes = Array.from(document.querySelectorAll('textarea, input[type=text]'));
  for (const b of boxes) { b.value = payload; b.dispatchEvent(new Event('input', { bubbles: true })); }
  return boxes.length;
}"""
MARKERS_JS = "() => [window.__xss ?? null, window.__violations.filter((v) => !v.startsWith('wasm')).length]"


def _guarded(page):
    page.add_init_script(WATCH)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    marks = []
    page.on("console", lambda m: "XSS-MARK" in m.text and marks.append(m.text))
    return dialogs, marks


def _n(page) -> int:
    return int(page.get_attribute("html", "data-updates") or 0)


def _quiet(page, n_before, timeout=30_000):
    page.wait_for_function("(n) => { const d = document.documentElement.dataset;"
                           " return !d.pending && Number(d.updates || 0) > n && d.drawn === d.updates; }",
                           arg=n_before, timeout=timeout)


def test_csp_is_present_and_the_page_obeys_it(offline_page, site):
    text = (site / "index.html").read_text()
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert m, "no CSP meta tag"
    policy = dict((d.split()[0], d.split()[1:]) for d in m.group(1).split(";") if d.strip())
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'", "'wasm-unsafe-eval'"]      # no 'unsafe-inline', no 'unsafe-eval'
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert not any("http" in v for vals in policy.values() for v in vals)   # no other origin anywhere
    # the built HTML has no inline code, no inline handler, no style attribute (the CSP would block them)
    assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", text)
    assert not re.search(r"\sstyle=|\son[a-z]+=", text)
    page = offline_page
    _guarded(page)
    open_app(page)
    change_n = _n(page)
    page.fill("[name='seq_len']", "2048")
    _quiet(page, change_n)
    assert page.evaluate("window.__violations") == []
    assert page.js_errors == [] and page.blocked == []


def test_fifty_xss_payloads_are_inert(offline_page):
    page = offline_page
    dialogs, marks = _guarded(page)
    assert len(PAYLOADS) == 50
    open_app(page)
    n_boxes = 0
    for p in PAYLOADS:                                     # 1. every text input and textarea at once
        n = _n(page)
        n_boxes = page.evaluate(FILL_ALL_JS, p)
        _quiet(page, n)
    assert n_boxes >= 3                                    # share link, GPU name, config.json at least
    assert page.evaluate(INJECTED_JS) == []
    cfg = dict(MODELS["llama-3.2-1b"].hf_config)
    page.click("#paste-config summary") if not page.is_visible("[name='model_config_json']") else None
    for p in PAYLOADS:                                     # 2. the paste box: valid JSON carrying the payload
        n = _n(page)
        page.fill("[name='model_config_json']", json.dumps({**cfg, "name": p, p: p}))
        _quiet(page, n)
    assert page.inner_text("[data-view='model.name']") == PAYLOADS[-1]   # shown as text, verbatim
    assert page.evaluate(INJECTED_JS) == []
    for i, p in enumerate(PAYLOADS):                       # 3. share links: in names, keys, values and raw
        plan = {"schema": 1, "gpu": {"name": p, "memory_gib": 80}, "model": {**cfg, "name": p}, p: p,
                "lora": {"targets": [p]}, "framework": p}
        frag = "#plan=" + (quote(json.dumps(plan)) if i % 2 == 0 else quote(p))
        n = _n(page)
        page.evaluate("h => { location.hash = h; }", frag)
        _quiet(page, n)
        errs = " ".join(page.locator("[data-error-for]:not([hidden])").all_inner_texts())
        assert errs, frag                                  # each hostile link is reported, as text
    assert page.evaluate(INJECTED_JS) == []
    assert page.evaluate(MARKERS_JS) == [None, 0]
    assert dialogs == [] and marks == []
    assert page.blocked == []                              # nothing left for evil.example
    assert [e for e in page.js_errors if "XSS" in e] == []
    # the detector does see an injection (so the checks above can fail)
    page.evaluate("() => document.body.insertAdjacentHTML('beforeend', '<i onclick=\"x\"></i>')")
    assert page.evaluate(INJECTED_JS) == ["I onclick"]


def test_size_limits_on_pasted_configs_and_links(offline_page):
    page = offline_page
    open_app(page)
    page.click("#paste-config summary")
    big = json.dumps({"hidden_size": 4096, "pad": "x" * (300 * 1024)})
    page.fill("[name='model_config_json']", big)
    msg = page.locator("[data-error-for='model_config_json']")
    expect(msg).to_be_visible()
    assert "limit is 256 KiB" in msg.inner_text() and "301 KiB" in msg.inner_text()
    assert page.input_value("[name='model']") != "custom"                 # the model is unchanged
    n = _n(page)
    page.evaluate("h => { location.hash = h; }", "#plan=" + quote(json.dumps({"schema": 1, "pad": "y" * 70_000})))
    _quiet(page, n)
    assert "limit is 64 KiB" in page.inner_text("[data-error-for='plan']")


# the engine's files travel in one archive (assets/engine.zip, the files of pyscript.json)
RUNTIME_FILES = ["pyodide.asm.wasm", "pyodide.asm.mjs", "python_stdlib.zip", "pyodide-lock.json", "pyodide.mjs",
                 "assets/engine.zip"]


@pytest.mark.parametrize("blocked", RUNTIME_FILES)
def test_a_blocked_runtime_file_says_so_within_2_s(offline_page, blocked):
    page = offline_page
    hits = []

    def abort(route):
        hits.append(time.monotonic())
        route.abort()

    page.context.route(re.compile(".*/" + re.escape(blocked) + r"(\?.*)?$"), abort)
    page.goto(page.base + "/index.html#plan=" + quote(json.dumps({"schema": 1, "seq_len": 2048})))
    page.wait_for_selector("html[data-engine='failed'], html[data-engine='ready']", state="attached", timeout=READY)
    t_failed = time.monotonic()
    assert hits, f"{blocked} was never requested"
    assert page.get_attribute("html", "data-engine") == "failed"
    assert t_failed - hits[0] <= 2.0, f"{t_failed - hits[0]:.1f} s from the failure to the message"
    status = page.locator("#engine-status")
    expect(status).to_be_visible()
    assert "could not start" in status.inner_text()
    want, _ = expected_figures({})
    assert page.evaluate(FIGURES_JS) == want                               # the pre-rendered figures stay
    # the form and the share link keep working without an engine
    page.fill("[name='micro_batch_size']", "3")
    page.wait_for_function("() => document.querySelector('#share-url').value.includes('micro_batch_size')")
    plan = json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))
    assert plan["micro_batch_size"] == 3 and plan["seq_len"] == 2048
    assert page.get_attribute("html", "data-engine") == "failed"
    assert "could not start" in status.inner_text()
