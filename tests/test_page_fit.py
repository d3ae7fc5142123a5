"""The "What fits" panel in Chromium, offline: options from the engine, Apply loads one into the form and
the figures change; every chart carries its text alternative. Plus the view data under CPython."""
import json
from urllib.parse import unquote

import pytest

from zerocalc import Plan, estimate

from app.fit_view import fit_call, fit_start, fit_step

READY = 120_000


def test_fit_view_rows_apply_their_fragment():
    v = fit_call({"plan": {}})
    assert len(v["rows"]) >= 3 and any(r["fits"] for r in v["rows"])
    for r in v["rows"][:4]:
        changed = json.loads(unquote(r["fragment"][len("#plan="):]))
        e = estimate(Plan.from_dict(changed), search_min_gpus=False)
        assert e.per_gpu.device_used == r["device_used_bytes"]
        assert r["gib"] == round(r["device_used_bytes"] / 2**30, 2)
    seq = v["charts"]["seq_len"]["points"]
    assert [p["x"] for p in seq] == sorted(p["x"] for p in seq)
    totals = [p["total_gib"] for p in seq]
    assert totals == sorted(totals)                    # memory never falls as the sequence grows
    assert [s["stage"] for s in v["charts"]["stages"]] == [0, 1, 2, 3]
    ck = [r for r in v["rows"] if r["changes"] == {"activation_checkpointing": "full"}][0]
    assert f"full activation checkpointing: {ck['gib']:.2f} GiB, fits, −{abs(ck['delta_pct']):.1f} % tokens/s" in v["advice"]


def _sliced(plan, slice_ms):
    v, answers = fit_start({"plan": plan, "slice_ms": slice_ms}), 1
    while v.get("pending"):
        v, answers = fit_step({"slice_ms": slice_ms}), answers + 1
    return v, answers


def test_the_sliced_re_plan_is_the_same_view():
    """fit_start / fit_step (what assets/fit.js sends, one slice while no edit is in flight) end on fit_call's view.
    With a zero budget every slice answers exactly one estimate, so the slices count the estimates."""
    fsdp = {"framework": "fsdp", "zero_stage": 3}
    for plan in ({}, fsdp):
        v, answers = _sliced(plan, 0)
        extra = {k: v.pop(k) for k in ("slices", "estimates", "fit_py_ms")}
        assert v == fit_call({"plan": plan})
        assert extra["slices"] == answers == extra["estimates"] > 30 and extra["fit_py_ms"] > 0
    # a new fit_start drops the unfinished re-plan: after one slice of the default plan, the FSDP plan's view
    assert fit_start({"plan": {}, "slice_ms": 0})["pending"]
    v, _ = _sliced(fsdp, 1000)
    assert v["slices"] == 1 and v["min_gpus"].keys() == {"2", "3"} and v["share"] == fit_call({"plan": fsdp})["share"]
    assert "fatal" in fit_step({})                    # finished: nothing left to step


pytest.importorskip("pytest_playwright")


@pytest.mark.browser
def test_apply_an_option_changes_form_and_figures(offline_page):
    page = offline_page
    page.goto(page.base + "/index.html")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)
    page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=60_000)
    rows = page.locator("#fit-rows tr")
    assert rows.count() >= 3
    assert page.locator("#fit-advice li", has_text="full activation checkpointing: ").count() == 1
    before = page.get_attribute("[data-out='per_gpu.device_used_bytes']", "data-bytes")
    # the full-checkpointing option: apply it
    row = page.locator("#fit-rows tr", has_text="activation_checkpointing = full").first
    want = int(row.locator("td.num").first.get_attribute("data-bytes"))
    n = int(page.get_attribute("html", "data-updates") or 0)
    runs = int(page.get_attribute("#fit", "data-runs"))
    row.get_by_role("button").click()
    page.wait_for_function(f"() => {{ const d = document.documentElement.dataset;"
                           f" return Number(d.updates || 0) > {n} && !d.pending && d.drawn === d.updates; }}",
                           timeout=30_000)
    assert page.locator("[name='activation_checkpointing']").input_value() == "full"
    after = page.get_attribute("[data-out='per_gpu.device_used_bytes']", "data-bytes")
    assert after != before and int(after) == want
    page.wait_for_function(f"() => Number(document.querySelector('#fit').dataset.runs) > {runs} && "
                           "document.querySelector('#fit').dataset.state === 'ready'", timeout=30_000)
    # the panel now plans from the applied plan: no option proposes full checkpointing again
    assert page.locator("#fit-rows tr", has_text="activation_checkpointing = full").count() == 0
    assert not page.js_errors and not page.blocked


@pytest.mark.browser
def test_charts_have_text_alternatives(offline_page):
    page = offline_page
    page.goto(page.base + "/index.html")
    page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=READY)
    charts = page.locator("#fit [data-fit-chart]")
    assert charts.count() == 5
    for i in range(5):
        c = charts.nth(i)
        svg = c.locator("svg[role='img']")
        assert svg.count() == 1
        assert svg.locator("title").first.text_content().strip()
        assert "GiB" in svg.locator("desc").text_content() or " s " in svg.locator("desc").text_content() + " "
        labelled = svg.get_attribute("aria-labelledby").split()
        assert len(labelled) == 2
        assert c.locator(".sr table tr").count() >= 2          # the visually hidden table
        assert c.locator("rect").count() >= 1
