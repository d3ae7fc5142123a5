"""tests/data/validation/post_training.json: published post-training memory readings as plans (the format of
../shared/validation/public.json, plus `quote`, the sentence the figure comes from). Pure data checks: every
record names its source and the figure, and is tagged honestly; nothing here compares the engine to them."""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "data", "validation", "post_training.json")
METRICS = {"allocated", "active", "reserved", "device_used", "unknown"}
METHODS = {"dpo", "ipo", "orpo", "simpo", "kto", "cpo", "rm", "ppo", "grpo", "rloo"}


def _records():
    with open(PATH) as f:
        return json.load(f)


def test_records_are_sourced_and_tagged():
    recs = _records()
    assert len(recs) >= 10
    assert len({r["id"] for r in recs}) == len(recs)
    for r in recs:
        assert r["source_url"].startswith("https://github.com/"), r["id"]
        assert r["quote"].strip(), r["id"]
        assert r["metric"] in METRICS, r["id"]
        assert r["quality"] in ("measured", "approximate", "unsupported"), r["id"]
        assert r["outcome"] in ("ok", "oom"), r["id"]
        assert (r["measured_bytes"] is None) == (r["outcome"] == "oom"), r["id"]
        assert len(r["mapping_notes"]) > 80, r["id"]
        pt = r["plan"]["post_training"]
        assert pt["method"] in METHODS and pt["trainer"] in ("trl", "openrlhf", "verl", "llamafactory", "ms-swift")
        # DPO-family and RL plans: the update step's sequence is prompt + completion
        assert r["plan"]["seq_len"] == pt["prompt_len"] + pt["completion_len"], r["id"]


def test_figures_match_their_quotes():
    """The bytes are the quoted figure in the quoted unit (GiB = 2^30, MiB = 2^20, GB = 1e9): read back. A decimal
    figure is rounded to whole bytes; a record's `quote_unit` names the unit a source really printed where its label
    says otherwise (a notebook printing max_memory_reserved() / 1024**3 as "GB"), with the code that shows it."""
    import re
    for r in _records():
        if r["measured_bytes"] is None:
            continue
        # a bare "G" (ms-swift 2.x headers: "# Memory usage: 40G") names no unit: it counts only through quote_unit
        m = re.findall(r"(\d+(?:\.\d+)?)\s?(GiB|MiB|GB|G(?![A-Za-z]))", r["quote"])
        assert m, r["id"]
        unit = {"GiB": 2**30, "MiB": 2**20, "GB": 10**9}
        relabel = r.get("quote_unit") or {}
        if relabel:
            assert "1024" in relabel["why"], r["id"]
        got = {round(float(v) * unit[relabel.get(u, u)]) for v, u in m if relabel.get(u, u) in unit}
        assert r["measured_bytes"] in got, r["id"]


def test_lengths_come_from_their_source():
    """Where a record names the source of its lengths (a dataset's token statistics, a reporter's sentence), the
    quoted maximum, capped by the run's own limit, is the plan's longest prompt (or prompt + completion)."""
    import re
    seen = 0
    for r in _records():
        ls = r.get("lengths_source")
        if ls is None:
            continue
        seen += 1
        assert ls["url"].startswith("https://github.com/"), r["id"]
        assert str(ls["max_tokens"]) in re.findall(r"\d+", ls["quote"]), r["id"]
        pt = r["plan"]["post_training"]
        got = pt["prompt_len"] + pt["completion_len"] if ls["applies_to"] == "prompt+completion" else pt["prompt_len"]
        assert got == min(ls["max_tokens"], ls.get("cap", ls["max_tokens"])), r["id"]
    assert seen >= 8


def test_ms_swift_dpo_rows_are_the_datasets_longest():
    """shareAI-Llama3-DPO-zh-en-emoji's longest row is 1801 tokens (ms-swift's dataset table), under the scripts'
    --max_length 2048 and 8192: the DPO/SimPO plans' rows are 1801 tokens (900 + 901), not max_length."""
    recs = {r["id"]: r for r in _records()}
    for rid in ("swift_dpo_lora_qwen25_7b", "swift_dpo_full_qwen25_7b_z3_padded", "swift_simpo_full_qwen25_3b_z2"):
        assert recs[rid]["plan"]["seq_len"] == 900 + 901, rid
