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
