"""The page's "Import your config" box in Chromium, offline: paste a real axolotl YAML (PyYAML loaded from
the site itself on first use), see what was mapped and what was not, apply it and see the form change;
bad YAML and an oversized paste give one clear line."""
import os

import pytest

pytest.importorskip("pytest_playwright")
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.browser
READY = 120_000
DATA = os.path.join(os.path.dirname(__file__), "data", "configs")


def open_app(page):
    page.goto(page.base + "/index.html")
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)


def test_paste_axolotl_yaml_maps_and_applies(offline_page):
    page = offline_page
    open_app(page)
    with open(os.path.join(DATA, "axolotl", "llama-3__lora-1b.yml"), encoding="utf-8") as f:
        text = f.read()
    page.fill("#import-text", text)
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_attribute("data-state", "ok", timeout=30_000)
    assert page.get_attribute("#import-result", "data-format") == "axolotl"
    mapped = page.locator("#import-mapped li").all_text_contents()
    unmapped = page.locator("#import-unmapped li").all_text_contents()
    # from the file: base_model NousResearch/Llama-3.2-1B, adapter lora, lora_r 16, sequence_len 2048
    assert "base_model → model = llama-3.2-1b" in mapped
    assert "adapter → method = lora" in mapped
    assert "lora_r → lora.rank = 16" in mapped
    assert "sequence_len → seq_len = 2048" in mapped
    assert any(u.startswith("learning_rate: no memory effect") for u in unmapped)
    assert any(u.startswith("datasets: ") for u in unmapped)
    # PyYAML came from the site (assets/vendor/pyyaml), nothing from elsewhere
    assert page.blocked == []
    page.click("#import-apply")
    expect(page.locator("#f-model")).to_have_value("llama-3.2-1b", timeout=30_000)
    expect(page.locator("[name='seq_len']")).to_have_value("2048")
    expect(page.locator("[name='method']:checked, select[name='method']").first).to_have_value("lora")
    expect(page.locator("[name='lora.rank']")).to_have_value("16")
    assert page.js_errors == []


def test_bad_yaml_and_oversized_paste(offline_page):
    page = offline_page
    open_app(page)
    page.fill("#import-text", "base_model: x\nlora_r: [16\n")
    page.click("#import-run")
    status = page.locator("#import-status")
    expect(status).to_have_attribute("data-state", "error", timeout=30_000)
    assert "not valid YAML" in status.text_content() and "line" in status.text_content()
    page.evaluate("document.querySelector('#import-text').value = 'a: 1\\n'.repeat(70000)")
    page.click("#import-run")
    expect(status).to_contain_text("over 200 KB are refused")
    assert page.js_errors == []
