"""The data box's pasted lengths (zerocalc.datasettings.histogram_from_lengths, app/data_view.normalise_lengths) and
the chart of reserved memory over the run (app/data_view.reserved_chart), under CPython: the code the page's
worker runs. Expected histograms are counted by hand in each test."""
import json
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from app import render, view
from app.data_view import reserved_chart
from zerocalc import Plan, PlanError
from zerocalc.datasettings import HISTOGRAM_BINS, histogram_from_lengths
from zerocalc.estimate import estimate

GIB = 2**30


@pytest.mark.parametrize("text", ["512, 1024\n2048 ; 512", "512 1024 2048 512", "[512, 1024, 2048, 512]",
                                  "512.0,1024,\r\n2048,512,"])
def test_a_list_of_lengths_is_counted(text):
    # 512 twice, 1024 once, 2048 once
    assert histogram_from_lengths(text, 4096) == [[512, 2], [1024, 1], [2048, 1]]


def test_lengths_over_seq_len_count_as_seq_len():
    # seq_len 1024: 2048 and 5000 are truncated to 1024, so 1024 counts three times
    assert histogram_from_lengths("100, 1024, 2048, 5000", 1024) == [[100, 1], [1024, 3]]
    assert histogram_from_lengths([[9000, 2], [10, 5]], 4096) == [[4096, 2], [10, 5]]


def test_a_histogram_and_a_counter_pass_as_given():
    assert histogram_from_lengths("[[512, 60], [2048, 30.5]]", 4096) == [[512, 60], [2048, 30.5]]
    assert histogram_from_lengths('{"2048": 3, "7": 1}', 4096) == [[7, 1], [2048, 3]]   # sorted by length
    assert histogram_from_lengths("  ", 4096) is None and histogram_from_lengths(None, 4096) is None


@pytest.mark.parametrize("bad, says", [
    ("1, 2, x", "item 3 ('x')"), ("[1, 2", "not valid JSON"), ("0", "item 1 ('0')"), ("1.5", "item 1 ('1.5')"),
    ("-4", "item 1 ('-4')"), ("{}", "is empty"), ("[]", "must be a list"), ('{"a": 1}', "key 'a'"),
    ("<img src=x onerror=alert(1)>", "item 1 ('<img')"), ("[true, 3]", "item 1 (True)"), ('"512"', "item 1"), ('"a": 2', "item 1")])
def test_bad_pastes_name_the_key(bad, says):
    with pytest.raises(PlanError) as e:
        histogram_from_lengths(bad, 4096)
    assert e.value.key == "data.histogram" and says in str(e.value)


def test_many_distinct_lengths_are_binned_keeping_the_mean_and_the_top():
    rng = random.Random(7)
    lengths = [min(4096, 1 + int(rng.lognormvariate(6.5, 0.9))) for _ in range(50_000)]
    h = histogram_from_lengths(lengths, 4096)
    assert len(h) <= HISTOGRAM_BINS < len(set(lengths))
    assert sum(w for _, w in h) == 50_000
    mean = sum(lengths) / len(lengths)
    assert abs(sum(x * w for x, w in h) / 50_000 - mean) < 0.5        # each bin sits at its samples' mean (rounded)
    assert h[-1] == [4096, lengths.count(4096)]                        # the longest length is a row of its own
    # log-spaced bins: ratio (4096 / min)^(1/255) per bin, so every length is within that ratio of its row's
    ratio = math.exp(math.log(4096 / min(lengths)) / (HISTOGRAM_BINS - 1))
    assert all(a < b for (a, _), (b, _) in zip(h, h[1:])) and ratio < 1.04
    Plan.from_dict({"seq_len": 4096, "data": {"lengths": "padded-longest", "histogram": h}})   # a valid plan


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9000), min_size=1, max_size=400), st.integers(64, 8192))
def test_counts_add_up_and_stay_within_seq_len(lengths, seq_len):
    h = histogram_from_lengths(", ".join(map(str, lengths)), seq_len)
    assert sum(w for _, w in h) == len(lengths)
    assert all(1 <= x <= seq_len for x, _ in h)
    assert max(x for x, _ in h) == min(max(lengths), seq_len)


def _data(lengths="padded-longest", **kw):
    return {"seq_len": 4096, "data": {"lengths": lengths, **kw}}


def test_view_turns_pasted_text_into_the_plans_histogram_and_share_link():
    v = view.compute({"plan": _data(histogram="100\n200, 5000")})
    assert v["errors"] == {}
    assert v["plan"]["data"]["histogram"] == [[100, 1], [200, 1], [4096, 1]]   # 5000 truncated at 4096
    share = json.loads(__import__("urllib.parse").parse.unquote(v["share"].split("=", 1)[1]))
    assert share["data"]["histogram"] == [[100, 1], [200, 1], [4096, 1]]


def test_a_bad_paste_is_named_and_the_rest_kept():
    good = view.compute({"plan": _data(mean_len=900)})["plan"]
    v = view.compute({"plan": {**_data(mean_len=900, histogram="1, 2, <b>x</b>"), "micro_batch_size": 1},
                      "good": good})
    assert set(v["errors"]) == {"data.histogram"} and "item 3 ('<b>x</b>')" in v["errors"]["data.histogram"]
    assert v["plan"]["micro_batch_size"] == 1 and v["plan"]["data"]["mean_len"] == 900
    assert v["plan"]["data"]["histogram"] is None
    # with a good histogram before it, the bad paste takes that one back
    good = view.compute({"plan": _data(histogram="300, 400")})["plan"]
    v = view.compute({"plan": _data(histogram="300, 400, nope"), "good": good})
    assert v["plan"]["data"]["histogram"] == [[300, 1], [400, 1]] and "data.histogram" in v["errors"]


def test_reserved_chart_reads_the_estimate():
    plan = {"seq_len": 4096, "micro_batch_size": 2, "data": {"lengths": "padding-free", "mean_len": 1024,
                                                              "p99_len": 4096}}
    v = view.compute({"plan": plan})
    est, chart = v["estimate"], v["reserved"]
    after = est["run"]["reserved_after_steps"]
    limit = est["capacity_bytes"] - (est["per_gpu"]["device_used_bytes"] - est["per_gpu"]["peak_reserved_bytes"])
    pts = [m for m in chart["marks"] if m["tag"] == "circle"]
    assert [(p["attrs"]["data-steps"], p["attrs"]["data-bytes"]) for p in pts] == list(after.items())
    assert [r[:3] for r in chart["table"]["rows"]] == [
        [f"{int(n):,}", f"{b / GIB:,.2f}", f"{limit / GIB:,.2f}"] for n, b in after.items()]
    # a higher reserve sits higher on the chart (smaller y), the limit line at the limit's height
    ys = {p["attrs"]["data-steps"]: p["attrs"]["cy"] for p in pts}
    order = sorted(after, key=lambda n: after[n])
    assert all(ys[a] >= ys[b] for a, b in zip(order, order[1:]))
    units = {m["attrs"].get("data-axis"): m["text"] for m in chart["marks"] if m["attrs"].get("data-axis")}
    assert "GiB" in units["y"] and "steps" in units["x"]
    oom = est["run"]["fragmentation_oom_step"]
    assert oom == 100                       # this plan: the engine's verdict, read back, not computed here
    assert v["out"]["fits"]["text"] == "Fits for ~100 steps, then fragmentation: set expandable_segments or pack"
    assert "by step 100" in chart["summary"] and "expandable_segments" in chart["summary"]
    assert [r[3] for r in chart["table"]["rows"]][1] == "fragmentation runs out here"


def test_fixed_lengths_chart_is_flat_and_escaped_when_rendered():
    v = view.compute({"plan": {}})
    after = v["estimate"]["run"]["reserved_after_steps"]
    assert len(set(after.values())) == 1 and "flat" in v["reserved"]["summary"]
    html = render.svg_marks(v["reserved"]["marks"]) + render.table_html(v["reserved"]["table"])
    assert html.count("<circle") == 4 and "<script" not in html


def test_chart_marks_are_only_svg_shapes():
    est = estimate(Plan.from_dict(_data(mean_len=700))).to_dict()
    chart = reserved_chart(est, "padded-longest")
    assert {m["tag"] for m in chart["marks"]} <= set(render.SVG_TAGS)


def test_the_box_says_what_it_read():
    """[[300, 2], [900, 1], [2048, 1]] at seq_len 2048, micro-batch 2: 4 samples, mean (600 + 900 + 2048) / 4 = 887;
    a typical batch pads to the 0.5^(1/2) = 0.707 quantile, 900 (cumulative 0.75), so 2 x 900 = 1,800 tokens; over
    1,000 steps the longest reaches 2,048: 4,096 tokens."""
    v = view.compute({"plan": {"seq_len": 2048, "data": {"lengths": "padded-longest", "histogram": "300\n900, 300\n5000"}}})
    text = v["view"]["data.summary"]["text"]
    for s in ("4 samples, mean 887", "longest 2,048 tokens", "typically 1,800 tokens", "1,000 steps 4,096"):
        assert s in text, s
    assert "seq_len long (4,096 tokens)" in view.compute({"plan": {}})["view"]["data.summary"]["text"]
