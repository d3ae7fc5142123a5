"""The page's "Paste a crash log" box in Chromium, offline: a real OOM log pasted into the textarea is read
by the engine worker (py/app/doctor.py) and its kind, numbers and findings appear, equal to the CPython doctor;
the log is shown as text, never as HTML; an oversize log gets the size message; nothing leaves 127.0.0.1."""
import json
import pathlib
from urllib.parse import quote

import pytest

pytest.importorskip("pytest_playwright")

from zerocalc import Plan  # noqa: E402
from zerocalc.doctor import diagnose  # noqa: E402

pytestmark = pytest.mark.browser
READY = 120_000
LOGS = pathlib.Path(__file__).parent / "data" / "logs"


def open_page(page, fragment=""):
    page.goto(page.base + "/index.html" + fragment)
    page.wait_for_selector("html[data-engine='ready']", state="attached", timeout=READY)


def diagnose_in_page(page, text):
    page.fill("textarea[name=crash_log]", text)
    page.click("#doctor-run")
    page.wait_for_function("() => ['done','failed','too-large'].includes(document.getElementById('doctor').dataset.state)",
                           timeout=30_000)


def test_real_oom_log_with_the_share_link_plan(offline_page):
    page = offline_page
    plan = {"gpu": "rtx-4090", "gpus_per_node": 1, "framework": "single", "model": "llama-3.2-1b", "method": "lora"}
    open_page(page, "#plan=" + quote(json.dumps(plan)))
    text = (LOGS / "lerf-73.txt").read_text(encoding="utf-8")
    # a line that would be markup if it were ever inserted as HTML
    text += "\n<img src=x id=injected onerror=\"document.title='pwned'\">"
    diagnose_in_page(page, text)
    want = diagnose(text, Plan.from_dict(plan)).to_dict()
    assert page.get_attribute("#doctor", "data-state") == "done"
    assert page.get_attribute("[data-doctor=kind]", "data-value") == "cuda_oom" == want["kind"]
    # the phase, its run phase and the words for it, as the doctor read them
    assert page.get_attribute("[data-doctor=phase]", "data-value") == want["phase"]
    assert page.get_attribute("[data-doctor=phase]", "data-run-phase") == want["run_phase"]
    # 3.00 GiB requested, 23.65 GiB total, as printed in the log; the page carries the doctor's exact bytes
    for key in ("tried_to_allocate_bytes", "gpu_total_bytes", "allocated_bytes", "reserved_unallocated_bytes",
                "free_bytes"):
        assert int(page.get_attribute(f"[data-doctor={key}]", "data-bytes")) == want[key]
    assert page.inner_text("[data-doctor=tried_to_allocate_bytes]") == "3.00 GiB"
    assert page.inner_text("[data-doctor=gpu_total_bytes]") == "23.65 GiB"
    assert page.get_attribute("[data-doctor=fragmentation]", "data-value") == "true"
    ids = page.eval_on_selector_all("[data-finding]", "els => els.map(e => e.dataset.finding)")
    assert ids == [f["id"] for f in want["findings"]]
    assert "fragmentation" in ids and "other_process" in ids
    assert "expandable_segments:True" in page.inner_text("[data-finding=fragmentation]")
    assert "Read against the current plan." == page.inner_text("#doctor-msg")
    assert page.locator("#injected").count() == 0 and page.title() != "pwned"
    assert page.blocked == [] and page.js_errors == []


def test_oversize_log_gets_the_message(offline_page):
    page = offline_page
    open_page(page)
    diagnose_in_page(page, "x" * (201 * 1024))
    assert page.get_attribute("#doctor", "data-state") == "too-large"
    assert "paste at most 200 KB" in page.inner_text("#doctor-msg")
    assert page.locator("#doctor-out > *").count() == 0
    assert page.blocked == [] and page.js_errors == []


def test_plan_changes_apply_to_the_plan(offline_page):
    """llamafactory-7532 (an OOM in the optimizer step) against the share link's plan (micro batch 4 x 4096 tokens,
    which does not fit 80 GiB): the proposed change is applied through the share link and the form shows it."""
    page = offline_page
    plan = {"micro_batch_size": 4}
    open_page(page, "#plan=" + quote(json.dumps(plan)))
    text = (LOGS / "llamafactory-7532.txt").read_text(encoding="utf-8")
    diagnose_in_page(page, text)
    want = diagnose(text, Plan.from_dict(plan)).to_dict()
    assert want["plan_changes"]
    shown = page.eval_on_selector_all("[data-doctor=plan-changes] li", "els => els.map(e => e.textContent)")
    assert shown == [f"{k} = {v}" for k, v in want["plan_changes"].items()]
    assert page.locator("[data-doctor=fragmentation]").count() == 0     # the excerpt prints no cache figure
    page.click("#doctor-apply")
    key, value = next(iter(want["plan_changes"].items()))
    page.wait_for_function(f"() => decodeURIComponent(location.hash).includes('\"{key}\":')", timeout=30_000)
    # every proposed key reaches its form control (radio, select or text input)
    for key, value in want["plan_changes"].items():
        page.wait_for_function(f"() => [...document.querySelectorAll('#plan [name=\"{key}\"]')]"
                               f".some(el => (el.type !== 'radio' || el.checked) && el.value === '{value}')",
                               timeout=30_000)
    assert page.blocked == [] and page.js_errors == []


def test_the_phase_shows_as_text(offline_page):
    """A hand-made eval crash: the page names the phase in words with its run phase and the deciding frame; a
    frame name that would be markup stays text."""
    page = offline_page
    open_page(page)
    text = ('  File "/x/trainer.py", line 10, in evaluate\n    output = eval_loop(\n'
            '  File "/x/trainer.py", line 11, in prediction_step\n    outputs = model(**inputs)\n'
            '  File "/x/y.py", line 12, in <b>bold</b>\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.99 GiB of which 1.00 GiB is free.")
    diagnose_in_page(page, text)
    want = diagnose(text).to_dict()
    assert want["phase"] == "eval"
    assert page.get_attribute("[data-doctor=phase]", "data-value") == "eval"
    assert page.get_attribute("[data-doctor=phase]", "data-run-phase") == "eval"
    assert page.inner_text("[data-doctor=phase]") == "evaluation (run phase eval, from prediction_step)"
    assert page.locator("#doctor-out b", has_text="bold").count() == 0
    assert page.blocked == [] and page.js_errors == []
