"""The page's post-training panel (plan-v1 Extension 7, issue 22): the form sends a post_training block only when a
method is chosen and only the fields that are filled; the figures are the CPython engine's; the run panel shows the
phases side by side (generate / score / sync / step) and names the one that sets the peak; a share link carries the
block both ways, the generator included. Nothing typed is inserted as HTML."""
import json
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("pytest_playwright")

from test_page_browser import assert_shows, change, open_app  # noqa: E402


def _shared(page):
    return json.loads(unquote(page.input_value("#share-url").split("#plan=", 1)[1]))


def test_no_method_sends_no_block(offline_page):
    page = offline_page
    open_app(page)
    change(page, lambda: page.fill("[name='post_training.prompt_len']", "300"))   # a length alone: still SFT
    assert "post_training" not in _shared(page)
    assert_shows(page, {})
    assert page.js_errors == [] and page.blocked == []


def test_grpo_with_colocated_vllm_shows_the_phases_and_the_peak(offline_page):
    page = offline_page
    open_app(page)
    # 4 GPUs x micro 2 x steps 4 (the default accumulation) = 32 completions: divisible by 8 generations
    change(page, lambda: page.select_option("[name='post_training.method']", "grpo"))
    change(page, lambda: page.fill("[name='post_training.num_generations']", "8"))
    change(page, lambda: page.select_option("[name='post_training.generator.engine']", "vllm"))
    change(page, lambda: page.fill("[name='post_training.generator.gpu_memory_utilization']", "0.4"))
    change(page, lambda: page.select_option("[name='post_training.generator.sleep']", "2"))
    want = {"post_training": {"method": "grpo", "num_generations": 8,
                              "generator": {"engine": "vllm", "gpu_memory_utilization": 0.4, "sleep": 2}}}
    pt = _shared(page)["post_training"]          # the engine's full block: the empty fields stayed the defaults
    assert (pt["method"], pt["num_generations"], pt["prompt_len"], pt["reference"]) == ("grpo", 8, None, "auto")
    assert {k: pt["generator"][k] for k in ("engine", "gpu_memory_utilization", "sleep")} == want["post_training"]["generator"]
    est = assert_shows(page, want)                                          # the CPython engine's estimate dict
    phases = page.eval_on_selector_all("#run-bars g[data-phase]", "gs => gs.map(g => g.dataset.phase)")
    assert phases == list(est["run"]["phases"])
    assert {"generate", "sync", "score", "step"} <= set(phases)
    assert page.locator("#run-bars g.ph-peak").get_attribute("data-phase") == est["run"]["peak_phase"]
    assert page.inner_text("#run-peak").startswith("Peak: ")
    assert page.js_errors == [] and page.blocked == []


def test_a_bad_value_is_named_next_to_its_field(offline_page):
    page = offline_page
    open_app(page)
    change(page, lambda: page.select_option("[name='post_training.method']", "grpo"))
    change(page, lambda: page.fill("[name='post_training.num_generations']", "7"))   # 32 % 7 != 0
    err = page.locator("[data-error-for='post_training.num_generations']")
    err.wait_for(state="visible")
    assert "divide" in err.inner_text()
    assert page.js_errors == []


def test_a_share_link_with_post_training_fills_the_panel(offline_page):
    page = offline_page
    shared = {"schema": 1, "method": "lora",
              "post_training": {"method": "dpo", "trainer": "trl", "prompt_len": 640, "completion_len": 384,
                                "reference": "adapter-disabled", "trainer_version": "1.14", "kernels": "torch"}}
    open_app(page, "#plan=" + quote(json.dumps(shared)))
    assert page.input_value("[name='post_training.method']") == "dpo"
    assert page.input_value("[name='post_training.trainer']") == "trl"
    assert page.input_value("[name='post_training.trainer_version']") == "1.14"
    assert page.input_value("[name='post_training.kernels']") == "torch"
    assert page.input_value("[name='post_training.prompt_len']") == "640"
    assert page.input_value("[name='post_training.reference']") == "adapter-disabled"
    assert_shows(page, {k: v for k, v in shared.items() if k != "schema"})
    pt = _shared(page)["post_training"]
    assert {k: pt[k] for k in shared["post_training"]} == shared["post_training"]
    assert page.locator("[data-error-for='plan']").is_hidden()
    # a generator in the link fills its fields; text in a field is shown as text
    gen = {"schema": 1, "post_training": {"method": "ppo", "trainer": "verl",
                                          "value_model": {"model": None, "placement": "same-gpus"},
                                          "generator": {"engine": "vllm", "gpu_memory_utilization": 0.5,
                                                        "sleep": 1, "tensor_parallel_size": 2}}}
    open_app(page, "#plan=" + quote(json.dumps(gen)))
    assert page.input_value("[name='post_training.generator.sleep']") == "1"
    assert page.input_value("[name='post_training.generator.tensor_parallel_size']") == "2"
    assert json.loads(page.input_value("[name='post_training.value_model']")) == gen["post_training"]["value_model"]
    assert page.locator("[data-error-for='plan']").is_hidden()                  # nothing in the link was ignored
    g = _shared(page)["post_training"]["generator"]
    assert {k: g[k] for k in gen["post_training"]["generator"]} == gen["post_training"]["generator"]
    change(page, lambda: page.fill("[name='post_training.prompt_len']", "<b>x</b>"))
    err = page.locator("[data-error-for='post_training.prompt_len']")
    err.wait_for(state="visible")
    assert page.locator("[data-error-for='post_training.prompt_len'] b").count() == 0
    assert page.js_errors == [] and page.blocked == []


def test_drop_box_reads_a_verl_command_and_fills_the_panel(offline_page):
    """The real verl script (tests/data/configs/real): format verl, the Hydra overrides in the per-key report, and
    applying it fills the post-training panel (rollout.n 5 -> generations, gpu_memory_utilization 0.6)."""
    import os
    from playwright.sync_api import expect
    page = offline_page
    open_app(page)
    path = os.path.join(os.path.dirname(__file__), "data", "configs", "real", "verl__grpo_trainer__run_qwen2-7b.sh")
    page.fill("#import-text", open(path, encoding="utf-8").read())
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_attribute("data-state", "ok", timeout=30_000)
    assert page.get_attribute("#import-result", "data-format") == "verl"
    mapped = page.locator("#import-mapped li").all_text_contents()
    assert "actor_rollout_ref.rollout.n → post_training.num_generations = 5" in mapped
    page.click("#import-apply")
    expect(page.locator("[name='post_training.method']")).to_have_value("grpo", timeout=30_000)
    expect(page.locator("[name='post_training.num_generations']")).to_have_value("5")
    expect(page.locator("[name='post_training.generator.gpu_memory_utilization']")).to_have_value("0.6")
    expect(page.locator("[name='post_training.trainer']")).to_have_value("verl")
    assert page.js_errors == [] and page.blocked == []


def _verl_lora_command():
    """The real verl LoRA GRPO script (tests/data/configs/real, SOURCES.md) with the actor's param_offload on and
    use_dynamic_bsz with a 6144-token budget in place of its ppo_micro_batch_size_per_gpu: it then sets every
    key of post_training.packing and offload_between_updates the page has fields for, and layered_summon."""
    import os
    path = os.path.join(os.path.dirname(__file__), "data", "configs", "real",
                        "verl__grpo_trainer__run_qwen2_5-3b_gsm8k_grpo_lora.sh")
    text = open(path, encoding="utf-8").read()
    text = text.replace("actor.fsdp_config.param_offload=False", "actor.fsdp_config.param_offload=True")
    return text.replace("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40 \\",
                        "actor_rollout_ref.actor.use_dynamic_bsz=True \\\n"
                        "    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=6144 \\")


def test_drop_box_fills_packing_offload_and_layered_summon(offline_page):
    """use_remove_padding, use_dynamic_bsz + ppo_max_token_len_per_gpu, param_offload and rollout.layered_summon
    land in their fields (shown: trainer verl, vLLM, LoRA), and the figures are the engine's for the imported plan."""
    from playwright.sync_api import expect
    from app.importer import import_view
    page = offline_page
    open_app(page)
    assert page.locator("[data-field='post_training.packing']").is_hidden()       # trainer TRL: not shown
    assert page.locator("[data-field='post_training.generator.layered_summon']").is_hidden()
    text = _verl_lora_command()
    want = json.loads(unquote(import_view({"text": text, "plan": {}})["hash"].split("#plan=", 1)[1]))
    assert want["post_training"]["packing"] == {"remove_padding": True, "update_max_tokens": 6144,
                                                "score_max_tokens": 6144, "score_micro_batch_size": None}
    page.fill("#import-text", text)
    page.click("#import-run")
    expect(page.locator("#import-status")).to_have_attribute("data-state", "ok", timeout=30_000)
    n = int(page.get_attribute("html", "data-updates") or 0)
    page.click("#import-apply")
    expect(page.locator("[name='post_training.trainer']")).to_have_value("verl", timeout=30_000)
    from test_page_browser import settle
    settle(page, n)
    assert page.is_checked("[name='post_training.packing.remove_padding']")
    assert page.input_value("[name='post_training.packing.update_max_tokens']") == "6144"
    assert page.input_value("[name='post_training.packing.score_max_tokens']") == "6144"
    assert page.input_value("[name='post_training.packing.score_micro_batch_size']") == ""
    assert page.is_checked("[name='post_training.offload_between_updates.weights']")
    assert not page.is_checked("[name='post_training.offload_between_updates.optimizer']")
    assert page.is_checked("[name='post_training.generator.layered_summon']")
    for f in ("post_training.packing", "post_training.offload_between_updates", "post_training.generator.layered_summon"):
        assert page.locator(f"[data-field='{f}']").is_visible(), f
    assert page.locator("[data-error-for='plan']").is_hidden()                  # nothing in the link was ignored
    assert_shows(page, {k: v for k, v in want.items() if k != "schema"})
    pt = _shared(page)["post_training"]
    assert (pt["packing"], pt["offload_between_updates"]) == (want["post_training"]["packing"],
                                                             want["post_training"]["offload_between_updates"])
    assert pt["generator"]["layered_summon"] is True
    # a bad budget (below prompt 512 + completion 1024) is named at its field; the other settings stay
    change(page, lambda: page.fill("[name='post_training.packing.update_max_tokens']", "1000"))
    err = page.locator("[data-error-for='post_training.packing.update_max_tokens']")
    err.wait_for(state="visible")
    assert "1536" in err.inner_text()
    assert_shows(page, {k: v for k, v in want.items() if k != "schema"})        # the last good plan's figures
    change(page, lambda: page.fill("[name='post_training.packing.update_max_tokens']", "<i>x</i>"))
    assert page.locator("[data-error-for='post_training.packing.update_max_tokens'] i").count() == 0
    assert page.js_errors == [] and page.blocked == []


def test_a_share_link_with_packing_and_offload_reproduces_the_plan(offline_page):
    page = offline_page
    shared = {"schema": 1, "framework": "fsdp", "method": "lora",
              "post_training": {"method": "grpo", "trainer": "verl", "num_generations": 4,
                                "generator": {"engine": "vllm", "layered_summon": True},
                                "offload_between_updates": {"weights": False, "optimizer": True},
                                "packing": {"remove_padding": True, "update_max_tokens": 8192,
                                            "score_max_tokens": None, "score_micro_batch_size": 16}}}
    open_app(page, "#plan=" + quote(json.dumps(shared)))
    assert page.locator("[data-error-for='plan']").is_hidden()                  # every key has its field
    assert page.is_checked("[name='post_training.packing.remove_padding']")
    assert page.input_value("[name='post_training.packing.update_max_tokens']") == "8192"
    assert page.input_value("[name='post_training.packing.score_micro_batch_size']") == "16"
    assert page.is_checked("[name='post_training.offload_between_updates.optimizer']")
    assert not page.is_checked("[name='post_training.offload_between_updates.weights']")
    assert page.is_checked("[name='post_training.generator.layered_summon']")
    plan = {k: v for k, v in shared.items() if k != "schema"}
    assert_shows(page, plan)
    pt = _shared(page)["post_training"]
    assert pt["packing"] == shared["post_training"]["packing"]
    assert pt["offload_between_updates"] == shared["post_training"]["offload_between_updates"]
    assert pt["generator"]["layered_summon"] is True
    # the page's own link, opened afresh, is the same plan
    link = page.input_value("#share-url").split("#", 1)[1]
    open_app(page, "#" + link)
    assert _shared(page) == json.loads(unquote(link.split("plan=", 1)[1]))
    assert_shows(page, plan)
    # another trainer: the verl-only fields that hold values stay in view, the first one the engine refuses
    # (the generator is checked first) with its message, and the figures stay the last good plan's
    change(page, lambda: page.select_option("[name='post_training.trainer']", "trl"))
    err = page.locator("[data-error-for='post_training.generator.layered_summon']")
    err.wait_for(state="visible")
    assert "verl" in err.inner_text()
    for f in ("post_training.packing", "post_training.offload_between_updates", "post_training.generator.layered_summon"):
        assert page.locator(f"[data-field='{f}']").is_visible(), f
    assert_shows(page, plan)
    change(page, lambda: page.select_option("[name='post_training.trainer']", "verl"))
    assert err.is_hidden()
    assert_shows(page, plan)
    # unticking the boxes and emptying the budgets sends no block: the plan without them
    for name in ("packing.remove_padding", "offload_between_updates.optimizer", "generator.layered_summon"):
        change(page, lambda n=name: page.uncheck(f"[name='post_training.{n}']"))
    for name in ("update_max_tokens", "score_micro_batch_size"):
        change(page, lambda n=name: page.fill(f"[name='post_training.packing.{n}']", ""))
    pt = _shared(page)["post_training"]
    assert "packing" not in pt and pt["offload_between_updates"] is None and "layered_summon" not in pt["generator"]
    plain = json.loads(json.dumps(plan))
    for k in ("packing", "offload_between_updates"):
        del plain["post_training"][k]
    del plain["post_training"]["generator"]["layered_summon"]
    assert_shows(page, plain)
    assert page.js_errors == [] and page.blocked == []
