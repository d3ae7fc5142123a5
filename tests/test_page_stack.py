"""The page's Training software panel (plan-v1 Extension 1): choosing a trainer recomputes the figures the way the
CPython engine does, and the share link carries the stack keys both ways."""
import json
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")

from test_page_browser import assert_shows, change, open_app  # noqa: E402


def test_choosing_the_training_software_recomputes_and_shares(offline_page):
    page = offline_page
    open_app(page)
    change(page, lambda: page.select_option("[name='stack.trainer']", "custom-loop"))
    assert_shows(page, {"stack": {"trainer": "custom-loop"}})          # the loop keeps the logits: more memory
    page.locator("#software-advanced summary").click()
    change(page, lambda: page.select_option("[name='stack.transformers']", "4.45"))
    assert_shows(page, {"stack": {"trainer": "custom-loop", "transformers": "4.45"}})
    plan = json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))
    assert plan["stack"]["trainer"] == "custom-loop" and plan["stack"]["transformers"] == "4.45"
    assert page.js_errors == [] and page.blocked == []


def test_a_share_link_with_a_stack_fills_the_panel(offline_page):
    page = offline_page
    shared = {"schema": 1, "framework": "single", "gpus_per_node": 1, "method": "qlora",
              "stack": {"trainer": "litgpt", "bitsandbytes": "0.42", "kbit_prepare": True},
              "lora": {"modules_to_save": ["lm_head"]}, "network": {"gbps_per_gpu": 100}}
    open_app(page, "#plan=" + quote(json.dumps(shared)))
    assert page.input_value("[name='stack.trainer']") == "litgpt"
    assert page.input_value("[name='stack.bitsandbytes']") == "0.42"
    assert page.input_value("[name='stack.kbit_prepare']") == "true"
    assert page.input_value("[name='lora.modules_to_save']") == "lm_head"
    assert page.input_value("[name='network.gbps_per_gpu']") == "100"
    assert_shows(page, {k: v for k, v in shared.items() if k != "schema"})
    assert page.locator("[data-error-for='plan']").is_hidden()
    assert page.js_errors == [] and page.blocked == []


def test_fsdp_embedding_units_checkbox_recomputes_and_round_trips(offline_page):
    """torchtune's custom_sharded_layers on an FSDP2 plan: a share link carrying it ticks the box and shows the
    engine's figures; unticking frees nothing from the root any more (the engine's figures again) and the share
    link drops the key (omitted while false)."""
    page = offline_page
    units = {"schema": 1, "model": "llama-3.1-70b", "framework": "fsdp", "zero_stage": 3, "gpus_per_node": 8,
             "activation_checkpointing": "full", "stack": {"trainer": "torchtune", "fsdp_embedding_units": True}}
    open_app(page, "#plan=" + quote(json.dumps(units)))
    assert page.is_checked("[name='stack.fsdp_embedding_units']")
    assert_shows(page, {k: v for k, v in units.items() if k != "schema"})
    page.locator("#software-advanced summary").click()
    change(page, lambda: page.uncheck("[name='stack.fsdp_embedding_units']"))
    held = {**units, "stack": {"trainer": "torchtune"}}
    assert_shows(page, {k: v for k, v in held.items() if k != "schema"})
    plan = json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))
    assert plan["stack"].get("fsdp_embedding_units", False) is False and plan["stack"]["trainer"] == "torchtune"
    assert page.js_errors == [] and page.blocked == []
