"""The page as a newcomer sees it, in Chromium offline: at 1280 px the verdict and the breakdown stay in view
while the long form scrolls (the results column is sticky); on a phone the compact verdict bar follows; every
chart axis says its unit; the page ends at its footer."""
import pytest

pytest.importorskip("pytest_playwright")

READY = 120_000
# the fixed verdict bar on narrow screens: body's padding-bottom of 56 px (app.css) keeps the footer above it
MINI_BAR_PX = 56


def _open(page, width, height=800):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(page.base + "/index.html")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)


def _in_view(page, selector) -> bool:
    return page.evaluate("""(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }""", selector)


def _slack_after_footer(page) -> float:
    return page.evaluate("""() => document.scrollingElement.scrollHeight
        - (document.querySelector('footer').getBoundingClientRect().bottom + scrollY)""")


@pytest.mark.browser
def test_wide_screen_keeps_verdict_and_breakdown_in_view(offline_page):
    page = offline_page
    _open(page, 1280)
    page.evaluate("document.querySelector('#s-lora').scrollIntoView()")   # deep in the form: the cards are gone
    page.wait_for_timeout(100)
    assert not _in_view(page, ".cards .verdict")
    assert _in_view(page, "#breakdown .stack") and _in_view(page, "#breakdown .usage-verdict")
    card = page.text_content(".cards .verdict-text").strip()
    assert card and page.text_content("#breakdown .usage-verdict").strip() == card


@pytest.mark.browser
def test_narrow_screen_has_a_verdict_bar(offline_page):
    page = offline_page
    _open(page, 390)
    page.evaluate("document.querySelector('#s-software').scrollIntoView()")
    page.wait_for_timeout(100)
    assert _in_view(page, ".mini .mini-verdict")
    assert page.text_content(".mini .mini-verdict").strip() == page.text_content(".cards .verdict-text").strip()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_no_empty_screen_after_the_footer(offline_page, width):
    page = offline_page
    _open(page, width)
    page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=60_000)
    assert _slack_after_footer(page) <= (MINI_BAR_PX if width < 1000 else 0) + 1


@pytest.mark.browser
def test_every_chart_axis_says_its_unit(offline_page):
    page = offline_page
    _open(page, 1280)
    page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=60_000)
    axes = page.evaluate("""() => [...document.querySelectorAll('#fit svg.fit-svg')].map((s) => ({
        id: s.closest('[data-fit-chart]').dataset.fitChart,
        x: s.querySelector('text[data-axis=x]')?.textContent || '',
        y: s.querySelector('text[data-axis=y]')?.textContent || null }))""")
    by_id = {a["id"]: a for a in axes}
    assert {"seq_len", "micro_batch_size", "gpus", "step_split", "stages"} <= set(by_id)
    for chart in ("seq_len", "micro_batch_size", "gpus", "stages"):
        assert "GiB" in by_id[chart]["y"], chart
    assert "tokens" in by_id["seq_len"]["x"]
    assert "sequences" in by_id["micro_batch_size"]["x"]
    assert "GPUs" in by_id["gpus"]["x"]
    assert "seconds" in by_id["step_split"]["x"]
