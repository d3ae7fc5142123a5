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


def test_drop_box_shows_the_per_key_report(offline_page):
    """The same per-key report as `zerocalc import`: detected format + confidence with its evidence, counts per
    kind, every unmapped key by name with its kind; user text reaches the page as text only."""
    page = offline_page
    open_app(page)
    with open(os.path.join(DATA, "real", "handbook__zephyr-7b-beta__sft__config_qlora.yaml"), encoding="utf-8") as f:
        text = f.read()
    # a key whose name and value look like markup must come back as text, never as elements
    text = text.rstrip("\n") + '\nzz_probe: "<img src=x onerror=alert(1)>"\n'
    page.fill("#import-text", text)
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_attribute("data-state", "ok", timeout=30_000)
    # an alignment-handbook TRL recipe with lora_r / load_in_4bit: TRL, not axolotl
    assert page.get_attribute("#import-result", "data-format") == "trl"
    assert "(confidence 0." in page.locator("#import-status").text_content()
    detect = page.locator("#import-detect").text_content()
    assert detect.startswith("Detected format: trl (confidence 0.") and "per_device_train_batch_size" in detect
    counts = page.locator("#import-counts").text_content()
    assert "mapped from the file" in counts and "no memory effect" in counts
    mapped = page.locator("#import-mapped li").all_text_contents()
    # from the file: use_peft + load_in_4bit -> qlora, lora_r 16, max_seq_length 2048, per_device_train_batch_size 4
    assert "load_in_4bit → method = qlora" in mapped
    assert "lora_r → lora.rank = 16" in mapped
    assert "max_seq_length → seq_len = 2048" in mapped
    items = page.locator("#import-unmapped li")
    by_key = {t.split(":")[0]: items.nth(i).get_attribute("data-kind") for i, t in enumerate(items.all_text_contents())}
    for key in ("learning_rate", "chat_template", "dataset_mixture", "hub_model_id", "output_dir"):
        assert by_key.get(key) == "no_effect", key
    assert by_key.get("model_name_or_path") == "not_mapped"   # Mistral-7B-v0.1: no preset, named
    assert by_key.get("zz_probe") == "unknown"
    probe = [t for t in items.all_text_contents() if t.startswith("zz_probe")]
    assert probe and "<img" not in probe[0]   # the value is not echoed; the key is text
    assert page.locator("#import-result img").count() == 0
    assert page.blocked == [] and page.js_errors == []
