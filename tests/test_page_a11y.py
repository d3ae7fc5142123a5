"""Everyone (issue 15, item 4), in Chromium, offline: axe-core finds 0 violations in the light and in the dark
theme; the theme follows prefers-color-scheme and a remembered toggle; every control is reachable by keyboard
with a visible focus ring; print styles; the breakdown as CSV and as a PNG chart.
axe-core is the npm devDependency of package.json (node_modules/axe-core/axe.min.js)."""
import csv
import io
import json
import pathlib
import struct

import pytest

pytest.importorskip("pytest_playwright")

from test_page_browser import expected_figures, open_app  # noqa: E402
from zerocalc import DEFAULT_PLAN, estimate  # noqa: E402

pytestmark = pytest.mark.browser
ROOT = pathlib.Path(__file__).resolve().parents[1]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
GIB = 2**30


def axe_violations(page, within="document"):
    if not AXE.exists():
        pytest.fail("node_modules/axe-core is missing: run `npm ci` (package.json devDependencies)")
    # evaluate(), not a <script> tag: the page's CSP admits no injected script, and DevTools evaluation is not
    # subject to it (the page's own policy stays on for everything else).
    page.evaluate(AXE.read_text() + "\n;0")
    res = page.evaluate(f"async () => (await axe.run({within}, {{ resultTypes: ['violations'] }})).violations"
                        ".map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ') + ': ' + n.failureSummary) }))")
    return res


def wait_until_settled(page):
    """The form's answer is on screen and the "what fits" panel has planned from that same plan: its search runs
    after the address bar follows an answer and dims its table while busy, which on a loaded machine overlapped an
    axe run (a CI run measured the dimmed rows' contrast, 3.55:1)."""
    page.wait_for_function("""() => { const f = document.querySelector('#fit'), u = document.querySelector('#share-url').value;
        return !document.documentElement.dataset.pending && f.dataset.state === 'ready'
            && u.slice(u.indexOf('#')) === f.dataset.share; }""", timeout=60_000)


def bg(page, sel="body"):
    return page.evaluate("(s) => getComputedStyle(document.querySelector(s)).backgroundColor", sel)


def luminance(rgb: str) -> float:
    r, g, b = [int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_axe_light_and_dark_no_violations(offline_page):
    page = offline_page
    open_app(page)
    page.fill("[name='micro_batch_size']", "64")        # an OOM plan: the alert and error colours are on screen too
    page.wait_for_selector("#oom:not([hidden])")
    page.click("#paste-config summary")
    wait_until_settled(page)
    assert luminance(bg(page, ":root")) > 0.8
    assert axe_violations(page) == []
    page.click("#theme-toggle")
    assert page.get_attribute("html", "data-theme") == "dark"
    assert luminance(bg(page, ":root")) < 0.2 and luminance(bg(page, "#breakdown")) < 0.2
    wait_until_settled(page)
    assert axe_violations(page) == []
    # while the panel re-plans, its previous answer stays on screen, and readable
    page.evaluate("() => { const f = document.querySelector('#fit'); f.dataset.state = 'busy'; f.setAttribute('aria-busy', 'true'); }")
    assert axe_violations(page, within="document.querySelector('#fit')") == []
    assert page.js_errors == [] and page.blocked == []


def test_theme_follows_the_system_and_the_toggle_is_remembered(offline_page):
    page = offline_page
    page.emulate_media(color_scheme="dark")
    open_app(page)
    assert page.get_attribute("html", "data-theme") is None
    assert luminance(bg(page, ":root")) < 0.2                      # prefers-color-scheme: dark
    assert page.get_attribute("#theme-toggle", "aria-pressed") == "true"
    page.click("#theme-toggle")                                   # -> light, remembered
    assert luminance(bg(page, ":root")) > 0.8
    page.reload()
    page.wait_for_selector("#theme-toggle")
    assert page.get_attribute("html", "data-theme") == "light" and luminance(bg(page, ":root")) > 0.8
    page.goto(page.base + "/index.html?embed=1&theme=dark")        # an embedding page picks the theme
    assert page.get_attribute("html", "data-theme") == "dark" and luminance(bg(page, ":root")) < 0.2
    page.emulate_media(media="print", color_scheme="dark")         # print is light, without the controls
    page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
    assert luminance(bg(page, ":root")) > 0.8
    assert not page.is_visible("#download-csv") and not page.is_visible("#share")


FOCUS_JS = """() => { const e = document.activeElement; if (!e || e === document.body) return null;
  const s = getComputedStyle(e);
  return { id: e.id || e.name || e.tagName, tag: e.tagName, outline: s.outlineStyle, width: parseFloat(s.outlineWidth) }; }"""


def test_every_control_is_reachable_by_keyboard_with_visible_focus(offline_page):
    page = offline_page
    open_app(page)
    want = page.evaluate("""() => Array.from(document.querySelectorAll('button, select, textarea, input, summary, [tabindex="0"]'))
      .filter((e) => e.offsetParent !== null && !e.disabled && !(e.type === 'radio' && !e.checked)
              && !e.closest('details:not([open]) > :not(summary)')).length""")   # a closed <details>: its summary
    seen, order = set(), []
    page.focus("body")
    for _ in range(400):
        page.keyboard.press("Tab")
        f = page.evaluate(FOCUS_JS)
        if f is None:
            continue
        key = page.evaluate("() => { const e = document.activeElement; return Array.from(document.querySelectorAll('*')).indexOf(e); }")
        if key in seen:
            break
        seen.add(key)
        order.append(f)
        assert f["outline"] != "none" and f["width"] >= 2, f      # a visible focus ring on every stop
    assert len(order) >= want, (len(order), want)
    tags = {f["tag"] for f in order}
    assert {"BUTTON", "SELECT", "INPUT", "SUMMARY"} <= tags
    # and the keyboard operates them: Space on the theme toggle, arrow keys on the ZeRO stage radios
    page.focus("#theme-toggle")
    page.keyboard.press("Space")
    assert page.get_attribute("html", "data-theme") in ("dark", "light")
    page.focus("[name='zero_stage']:checked")
    page.keyboard.press("ArrowRight")
    assert page.eval_on_selector("[name='zero_stage']:checked", "e => e.value") != str(DEFAULT_PLAN.zero_stage)


def test_breakdown_downloads_as_csv_and_png(offline_page, tmp_path):
    page = offline_page
    open_app(page)
    want, est = expected_figures({})
    with page.expect_download() as d:
        page.click("#download-csv")
    path = tmp_path / "b.csv"
    d.value.save_as(path)
    assert d.value.suggested_filename == "zerocalc-breakdown.csv"
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    comps = {r["component"]: int(r["bytes"]) for r in rows}
    pg = est["per_gpu"]
    for k, v in pg["components"].items():
        assert comps[k] == v
        row = next(r for r in rows if r["component"] == k)
        assert row["GiB"] == f"{v / GIB:,.2f}"                  # GiB = 2**30, as on screen
    assert comps["device_used_bytes"] == pg["device_used_bytes"] and comps["capacity_bytes"] == pg["capacity_bytes"]
    with page.expect_download() as d:
        page.click("#download-png")
    png = tmp_path / "b.png"
    d.value.save_as(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert w == 1920 and h > 400
    assert page.js_errors == [] and page.blocked == []
