"""The page's post-training field (plan-v1 Extension 7) in Chromium, offline: a GRPO block typed into it gives
the engine's figures, the run chart gains the sync / generate / score phases, a bad value names its key, and a
share link carries the block."""
import json

import pytest

pytest.importorskip("pytest_playwright")

from tests.test_page_browser import READY, assert_shows, change, open_app  # noqa: E402

pytestmark = pytest.mark.browser

GRPO = {"method": "grpo", "num_generations": 8, "completion_len": 512,
        "generator": {"engine": "vllm", "gpu_memory_utilization": 0.3, "sleep": 2}}


def test_post_training_field_adds_the_rollout_phases(offline_page):
    page = offline_page
    open_app(page)
    change(page, lambda: page.fill("[name='post_training']", json.dumps(GRPO)))
    assert_shows(page, {"post_training": GRPO})
    phases = page.eval_on_selector_all("[data-phase]", "els => els.map(e => e.dataset.phase)")
    assert {"sync", "generate", "score", "step"} <= set(phases)
    # TRL: 3 generations do not divide micro 2 x 4 GPUs x 4 steps = 32: the key is named, the figures stay
    change(page, lambda: page.fill("[name='post_training']", json.dumps({**GRPO, "num_generations": 3})))
    assert "num_generations" in page.inner_text("[data-error-for='post_training']")


def test_share_link_carries_post_training(offline_page):
    page = offline_page
    plan = {"post_training": {"method": "dpo", "prompt_len": 256, "completion_len": 256}}
    open_app(page, "#plan=" + json.dumps(plan))
    assert json.loads(page.input_value("[name='post_training']")) == plan["post_training"]
    assert_shows(page, plan)
