"""The page's "data" box (issue 21 item 4, plan-v1 Extension 6): the collator, mean / p99 lengths and the allocator,
named by their dotted plan keys, reach the engine; a share link carrying them fills the box back; empty fields
send nothing (a default page's plan has no data block)."""
import json
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")

from zerocalc import Plan  # noqa: E402
from test_page_browser import assert_shows, change, open_app  # noqa: E402

pytestmark = pytest.mark.browser
VAR = {"seq_len": 4096, "data": {"lengths": "padded-longest", "mean_len": 900, "p99_len": 3000},
       "allocator": {"expandable_segments": True}}


def shared_plan(page) -> dict:
    return json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))


def test_data_box_reaches_the_engine_and_the_share_link(offline_page):
    page = offline_page
    open_app(page)
    assert "data" not in shared_plan(page) and "allocator" not in shared_plan(page)
    page.click("#data-box summary")
    change(page, lambda: page.fill("[name='seq_len']", "4096"))
    change(page, lambda: page.fill("[name='data.mean_len']", "900"))
    change(page, lambda: page.fill("[name='data.p99_len']", "3000"))
    change(page, lambda: page.select_option("[name='data.lengths']", "padded-longest"))
    change(page, lambda: page.select_option("[name='allocator.expandable_segments']", "true"))
    assert_shows(page, VAR)
    plan = Plan.from_dict(shared_plan(page))
    assert plan == Plan.from_dict(VAR)
    # padded-longest without a mean length: the engine names the key beside its field
    change(page, lambda: page.fill("[name='data.mean_len']", ""))
    assert "data.mean_len" in page.inner_text("[data-error-for='data.mean_len']")


def test_share_link_fills_the_data_box(offline_page):
    page = offline_page
    open_app(page, "#plan=" + quote(json.dumps({"schema": 1, **VAR})))
    assert page.input_value("[name='data.lengths']") == "padded-longest"
    assert page.input_value("[name='data.mean_len']") == "900"
    assert page.input_value("[name='data.p99_len']") == "3000"
    assert page.input_value("[name='data.histogram']") == ""
    assert page.input_value("[name='allocator.expandable_segments']") == "true"
    assert_shows(page, VAR)


FRAG = {"seq_len": 4096, "micro_batch_size": 2, "data": {"lengths": "padding-free", "mean_len": 1024, "p99_len": 4096}}


def _chart(page) -> dict:
    return page.evaluate("""() => ({
        pts: [...document.querySelectorAll('#reserved-marks circle')].map((c) => [c.dataset.steps, Number(c.dataset.bytes)]),
        rows: [...document.querySelectorAll('#reserved-table tr')].map((r) => [...r.cells].map((c) => c.textContent)),
        x: document.querySelector('#reserved-marks text[data-axis=x]').textContent,
        y: document.querySelector('#reserved-marks text[data-axis=y]').textContent,
        desc: document.querySelector('#reserved-desc').textContent })""")


def test_pasted_lengths_become_the_histogram_and_bad_ones_are_named(offline_page):
    page = offline_page
    open_app(page)
    page.click("#data-box summary")
    change(page, lambda: page.fill("[name='seq_len']", "2048"))
    change(page, lambda: page.select_option("[name='data.lengths']", "padded-longest"))
    # newline- and comma-separated, as printed from datasets: 300 twice, 900 once, 2048 (truncated 5000) once
    change(page, lambda: page.fill("[name='data.histogram']", "300\n900, 300\n5000"))
    want = {"seq_len": 2048, "data": {"lengths": "padded-longest", "histogram": [[300, 2], [900, 1], [2048, 1]]}}
    assert shared_plan(page)["data"]["histogram"] == [[300, 2], [900, 1], [2048, 1]]
    assert_shows(page, want)
    assert page.input_value("[name='data.histogram']") == "300\n900, 300\n5000"   # the box keeps what was typed
    assert "4 samples, mean 887" in page.inner_text("#data-summary")   # (600 + 900 + 2048) / 4, said under the box
    # a JSON list from datasets
    change(page, lambda: page.fill("[name='data.histogram']", "[300, 300, 2048]"))
    assert shared_plan(page)["data"]["histogram"] == [[300, 2], [2048, 1]]
    # bad input: named, shown as text, the last good histogram and every other setting kept
    payload = "300, <img src=x onerror=window.__xss=1>"
    change(page, lambda: page.fill("[name='data.histogram']", payload))
    msg = page.inner_text("[data-error-for='data.histogram']")
    assert "data.histogram" in msg and "item 2 ('<img')" in msg
    assert page.locator("#data-box img, [data-error-for] *").count() == 0
    assert page.evaluate("() => window.__xss") is None
    plan = shared_plan(page)
    assert plan["seq_len"] == 2048 and plan["data"]["histogram"] == [[300, 2], [2048, 1]]
    assert_shows(page, {"seq_len": 2048, "data": {"lengths": "padded-longest", "histogram": [[300, 2], [2048, 1]]}})
    change(page, lambda: page.fill("[name='data.histogram']", "[[300, 2], [2048"))
    assert "not valid JSON" in page.inner_text("[data-error-for='data.histogram']")
    # too much pasted text: refused before the engine, with the sizes
    change(page, lambda: page.fill("[name='data.histogram']", "1024, " * 400_000))
    msg = page.inner_text("[data-error-for='data.histogram']")
    assert "the limit is 2,048 KiB" in msg and "2,344 KiB" in msg      # 6 × 400,000 characters = 2,343.75 KiB


def test_reserved_chart_and_the_fragmentation_verdict(offline_page):
    page = offline_page
    open_app(page)
    fixed = _chart(page)                  # the default plan: fixed lengths, one reserve at every step count
    assert len(fixed["pts"]) == 4 and len({b for _, b in fixed["pts"]}) == 1 and "flat" in fixed["desc"]
    open_app(page, "#plan=" + quote(json.dumps({"schema": 1, **FRAG})))
    est = Plan.from_dict(FRAG)
    from zerocalc.estimate import estimate
    e = estimate(est).to_dict()
    after = e["run"]["reserved_after_steps"]
    c = _chart(page)
    assert c["pts"] == [[n, b] for n, b in after.items()]
    assert [r[:2] for r in c["rows"][1:]] == [[f"{int(n):,}", f"{b / 2**30:,.2f}"] for n, b in after.items()]
    assert "GiB" in c["y"] and "steps" in c["x"]
    n = e["run"]["fragmentation_oom_step"]
    assert n == 100
    assert page.inner_text("[data-out='fits']") == \
        "Fits for ~100 steps, then fragmentation: set expandable_segments or pack"
    assert "by step 100" in c["desc"]
    # expandable segments: no ratchet, no fragmentation verdict
    page.click("#data-box summary")
    change(page, lambda: page.select_option("[name='allocator.expandable_segments']", "true"))
    assert "fragmentation" not in page.inner_text("[data-out='fits']")


def test_share_link_round_trips_the_allocator_and_a_histogram(offline_page):
    page = offline_page
    plan = {"schema": 1, "seq_len": 2048,
            "data": {"lengths": "padded-longest", "histogram": [[300, 2], [2048, 1]]},
            "allocator": {"expandable_segments": False, "max_split_size_mb": 128, "empty_cache_every": 50}}
    open_app(page, "#plan=" + quote(json.dumps(plan)))
    assert page.input_value("[name='allocator.max_split_size_mb']") == "128"
    assert page.input_value("[name='allocator.empty_cache_every']") == "50"
    assert page.input_value("[name='allocator.expandable_segments']") == "false"
    assert json.loads(page.input_value("[name='data.histogram']")) == [[300, 2], [2048, 1]]
    back = shared_plan(page)
    assert Plan.from_dict(back) == Plan.from_dict(plan)
    assert_shows(page, plan)
    # a bad allocator value names its key; the histogram and the rest stay
    page.click("#data-box summary")
    change(page, lambda: page.fill("[name='allocator.max_split_size_mb']", "10"))
    assert "allocator.max_split_size_mb" in page.inner_text("[data-error-for='allocator.max_split_size_mb']")
    assert shared_plan(page)["data"]["histogram"] == [[300, 2], [2048, 1]]
