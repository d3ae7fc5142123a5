"""Every key of the engine's post_training schema (plan-v1 Extension 7) travels through the page: a share link
that sets it to a valid non-default value fills the panel, nothing in it is reported unknown, the page's own share
link carries the engine's reading of the input's block, and the figures are the CPython engine's. The keys are
enumerated from postplan.py's dataclasses (what `parse_post_training` builds), so a key added there without a page
field fails `test_every_schema_key_is_in_a_group` until it has a value here and the page test then shows whether
the page carries it. One page load per group of keys (the browser is slow on the shared cores).

The vLLM sleep level's empty option says what the engine takes for it with the chosen trainer (verl: 1 up to 0.5,
2 from 0.6, while no generator block is sent: post/defaults.py `verl_sleep_level`); the figures of the plan with
the field empty equal those of the plan with that level written out."""
import json
from dataclasses import fields, is_dataclass
from urllib.parse import quote, unquote

import pytest

from zerocalc import Plan, PlanError
from zerocalc.postplan import PostTraining, parse_post_training

pytest.importorskip("pytest_playwright")

from test_page_browser import assert_shows, change, expected_figures, open_app  # noqa: E402

# Each group: a plan the engine accepts, setting its keys to values other than the schema's defaults.
GROUPS = {
    "trl-dpo-0.28": {"schema": 1, "method": "lora",
                     "post_training": {"method": "dpo", "trainer": "trl", "trainer_version": "0.28",
                                       "kernels": "torch", "prompt_len": 640, "completion_len": 384,
                                       "reference": "precomputed", "rpo_alpha": 0.5}},
    "trl-grpo-server": {"schema": 1,
                        "post_training": {"method": "grpo", "trainer": "trl", "num_generations": 4,
                                          "steps_per_generation": 2,
                                          "reward_model": {"model": "llama-3.2-1b", "placement": "own-gpus"},
                                          "generator": {"engine": "vllm", "mode": "server", "gpus": 2,
                                                        "tensor_parallel_size": 2, "enforce_eager": True,
                                                        "gpu_memory_utilization": 0.5}}},
    "verl-ppo-lora": {"schema": 1, "framework": "fsdp", "method": "lora", "attention": "flash",
                      "post_training": {"method": "ppo", "trainer": "verl",
                                        "value_model": {"model": "qwen2.5-0.5b", "placement": "cpu"},
                                        "generator": {"engine": "vllm", "sleep": 1, "layered_summon": True},
                                        "offload_between_updates": {"weights": True, "optimizer": True},
                                        "packing": {"remove_padding": True, "update_max_tokens": 4096,
                                                    "score_max_tokens": 2048, "score_micro_batch_size": 8}}},
    "trl-rloo-hf": {"schema": 1, "method": "lora",
                    "post_training": {"method": "rloo", "trainer": "trl", "generator": {"engine": "hf"}}},
}


def schema_keys() -> dict:
    """{dotted key under post_training: its default}: PostTraining's fields, and for those the parser turns into a
    block (Generator, RoleModel, Offload, Packing) the block's fields instead."""
    keys = {}
    for f in fields(PostTraining):
        try:
            block = getattr(parse_post_training({f.name: {}}), f.name)
        except PlanError:
            block = None
        if is_dataclass(block):
            keys.update({f"{f.name}.{g.name}": g.default for g in fields(type(block))})
        else:
            keys[f.name] = f.default
    return keys


def _at(d, dotted):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return False, None
        d = d[k]
    return True, d


def test_every_schema_key_is_in_a_group():
    keys = schema_keys()
    assert {"rpo_alpha", "generator.sleep", "packing.update_max_tokens", "reward_model.placement"} <= set(keys)
    for key, default in keys.items():
        values = [v for found, v in (_at(g["post_training"], key) for g in GROUPS.values()) if found]
        assert any(v != default for v in values), f"post_training.{key}: no group sets a non-default value"
    for name, g in GROUPS.items():                   # each group is a plan the engine accepts
        Plan.from_dict({k: v for k, v in g.items() if k != "schema"})


def _shared(page):
    return json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))


def _field_of(key):
    """The page's field for a dotted key: its own, or the JSON field holding its block (reward / critic)."""
    top = key.split(".", 1)[0]
    return key if top not in ("reward_model", "value_model") else top


@pytest.mark.parametrize("name", list(GROUPS))
def test_a_share_link_carries_every_key(offline_page, name):
    page = offline_page
    link = GROUPS[name]
    plan = {k: v for k, v in link.items() if k != "schema"}
    open_app(page, "#plan=" + quote(json.dumps(link)))
    err = page.locator("[data-error-for='plan']")
    assert err.is_hidden(), err.inner_text()                                  # no key reported unknown
    pt = _shared(page)["post_training"]
    assert pt == Plan.from_dict(plan).to_dict()["post_training"]              # the engine's reading of the input
    for key in schema_keys():
        found, v = _at(link["post_training"], key)
        if found:
            assert _at(pt, key) == (True, v), key
            f = _field_of(key)
            assert page.locator(f"[data-field='post_training.{f}']").is_visible(), f
    assert_shows(page, plan)
    assert page.locator("[data-error-for^='post_training']:visible").count() == 0
    if name == "trl-dpo-0.28":      # a bad rpo_alpha is named at its field; the other settings stay
        for bad in ("-1", "<b>x</b>"):
            change(page, lambda b=bad: page.fill("[name='post_training.rpo_alpha']", b))
            msg = page.locator("[data-error-for='post_training.rpo_alpha']")
            msg.wait_for(state="visible")
            assert msg.inner_text().strip()
            assert page.locator("[data-error-for='post_training.rpo_alpha'] b").count() == 0
            assert_shows(page, plan)                                          # the last good plan's figures
            assert page.input_value("[name='post_training.kernels']") == "torch"
    assert page.js_errors == [] and page.blocked == []


def _sleep_label(page):
    return page.eval_on_selector("[name='post_training.generator.sleep']", "s => s.options[0].textContent")


def test_the_sleep_default_says_what_the_engine_takes(offline_page):
    from app.render import SLEEP_DEFAULTS
    page = offline_page
    open_app(page)
    change(page, lambda: page.select_option("[name='post_training.method']", "grpo"))
    assert _sleep_label(page) == SLEEP_DEFAULTS["trl"]
    change(page, lambda: page.select_option("[name='post_training.trainer']", "verl"))
    cases = (("", "verl-2", 2), ("0.5", "verl-1", 1), ("0.6", "verl-2", 2))
    for version, label, level in cases:
        if page.input_value("[name='post_training.trainer_version']") != version:     # an unchanged field: no input
            change(page, lambda v=version: page.fill("[name='post_training.trainer_version']", v))
        assert _sleep_label(page) == SLEEP_DEFAULTS[label]
        assert label[-1] == str(level) and SLEEP_DEFAULTS[label].startswith(str(level))
        pt = {"method": "grpo", "trainer": "verl", **({"trainer_version": version} if version else {})}
        assert "generator" not in _shared(page)["post_training"] or _shared(page)["post_training"]["generator"] is None
        est = assert_shows(page, {"post_training": pt})
        written = expected_figures({"post_training": {**pt, "generator": {"engine": "vllm", "sleep": level}}})[1]
        assert est["per_gpu"] == written["per_gpu"]                           # the label's level is the engine's
    # another generator field sends a block: an unsaid sleep is still verl's own level (postplan.verl_sleep_level)
    change(page, lambda: page.fill("[name='post_training.generator.gpu_memory_utilization']", "0.6"))
    assert _sleep_label(page) == SLEEP_DEFAULTS["verl-2"]
    assert _shared(page)["post_training"]["generator"].get("sleep", 2) == 2
    change(page, lambda: page.fill("[name='post_training.generator.gpu_memory_utilization']", ""))
    assert _sleep_label(page) == SLEEP_DEFAULTS["verl-2"]
    for trainer in ("openrlhf", "ms-swift"):
        change(page, lambda t=trainer: page.select_option("[name='post_training.trainer']", t))
        assert _sleep_label(page) == SLEEP_DEFAULTS[trainer]
    # rpo_alpha is shown where the trainer reads it: DPO / IPO under ms-swift, LLaMA-Factory, TRL up to 0.28
    rpo = page.locator("[data-field='post_training.rpo_alpha']")
    change(page, lambda: page.fill("[name='post_training.trainer_version']", ""))
    change(page, lambda: page.select_option("[name='post_training.method']", "ipo"))
    assert rpo.is_visible()                                                   # ms-swift
    change(page, lambda: page.select_option("[name='post_training.trainer']", "trl"))
    assert rpo.is_hidden()                                                    # TRL 1.16, the default: no rpo_alpha
    change(page, lambda: page.fill("[name='post_training.trainer_version']", "0.28"))
    assert rpo.is_visible()
    change(page, lambda: page.fill("[name='post_training.rpo_alpha']", "1"))
    assert_shows(page, {"post_training": {"method": "ipo", "trainer": "trl", "trainer_version": "0.28",
                                          "rpo_alpha": 1}})
    assert page.js_errors == [] and page.blocked == []
