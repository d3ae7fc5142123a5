"""The page's view model (py/app/view.py) under CPython: the same code the browser worker runs."""
import json
from urllib.parse import unquote

import pytest

from app import view, worker
from zerocalc import DEFAULT_PLAN, Plan
from zerocalc.estimate import estimate


def test_gib_is_binary_and_labelled():
    # 80 GiB = 80 * 1024**3 = 85,899,345,920 bytes; 1.5 GiB = 1,610,612,736 bytes.
    assert view.gib(85_899_345_920) == "80.00 GiB"
    assert view.gib(1_610_612_736) == "1.50 GiB"
    assert view.gib(80 * 10**9) == "74.51 GiB"   # 80e9 / 2**30 = 74.505...


def test_counts():
    assert view.count(8_030_261_248) == "8.03 B"
    assert view.count(41_943_040) == "41.94 M"
    assert view.count(65_536) == "65,536"


def test_default_view_equals_engine():
    v = view.compute({"plan": {}})
    est = estimate(DEFAULT_PLAN).to_dict()
    assert v["estimate"] == est
    assert v["errors"] == {}
    pg = est["per_gpu"]
    assert v["out"]["per_gpu.device_used_bytes"]["bytes"] == pg["device_used_bytes"]
    assert v["out"]["per_gpu.capacity_bytes"]["bytes"] == pg["capacity_bytes"]
    # every component of the estimate gets a bar, in bytes, with its share of the components' sum
    total = sum(pg["components"].values())
    assert {c["key"] for c in v["components"]} == set(pg["components"])
    for c in v["components"]:
        assert c["bytes"] == pg["components"][c["key"]]
        assert c["share"] == f"{100 * c['bytes'] / total:.1f}%"
    verdict = v["out"]["fits"]["text"]
    margin = pg["capacity_bytes"] - est["run"]["device_used_bytes"]      # the headroom of the whole run
    if est["fits"]:
        assert verdict == f"Fits with {margin / 2**30:,.2f} GiB headroom"
    else:
        assert verdict == f"Out of memory by {-margin / 2**30:,.2f} GiB"


@pytest.mark.parametrize("bad", [0, -3, 1e12, "abc", "", 2.5])
def test_bad_value_is_reported_by_key_and_the_rest_kept(bad):
    v = view.compute({"plan": {"micro_batch_size": bad, "seq_len": 2048, "zero_stage": 3}})
    assert set(v["errors"]) == {"micro_batch_size"}
    assert "micro_batch_size" in v["errors"]["micro_batch_size"]
    # the bad key takes the default (2); the other settings still apply
    assert v["plan"]["micro_batch_size"] == 2
    assert v["plan"]["seq_len"] == 2048 and v["plan"]["zero_stage"] == 3
    expected = Plan.from_dict({"seq_len": 2048, "zero_stage": 3})
    assert v["estimate"] == estimate(expected).to_dict()


def test_bad_value_falls_back_to_last_good():
    good = Plan.from_dict({"micro_batch_size": 8}).to_dict()
    v = view.compute({"plan": {"micro_batch_size": "eight", "nodes": 2}, "good": good})
    assert v["plan"]["micro_batch_size"] == 8 and v["plan"]["nodes"] == 2


def test_several_bad_fields_each_get_a_message():
    v = view.compute({"plan": {"micro_batch_size": 0, "nodes": -1, "lora": {"rank": "x", "alpha": 16}}})
    assert set(v["errors"]) == {"micro_batch_size", "nodes", "lora.rank"}
    assert v["plan"]["lora"]["alpha"] == 16   # the good sibling of the bad nested key is kept


def test_bad_custom_model_dimension_names_the_field():
    v = view.compute({"plan": {"model": {"model_type": "llama", "hidden_size": -4, "num_hidden_layers": 2,
                                         "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10}}})
    assert any(k.startswith("model") for k in v["errors"])
    assert v["plan"]["model"] == DEFAULT_PLAN.model


def test_share_fragment_round_trips_through_plan_from_dict():
    plan = Plan.from_dict({"model": "qwen2.5-7b", "zero_stage": 3, "method": "lora", "seq_len": 8192})
    frag = view.share_fragment(plan)
    assert frag.startswith("#plan=")
    assert Plan.from_dict(json.loads(unquote(frag[len("#plan="):]))) == plan
    assert view.share_fragment(DEFAULT_PLAN) == "#plan={%22schema%22:1}"


def test_fragment_quoting_matches_urllib():
    from urllib.parse import quote
    text = '{"model":{"name":"Mé & co <x>","hidden_size":64},"lora":{"targets":["q_proj"]}} %'
    assert view._quote(text) == quote(text, safe=":,{}[]-._~")


def test_lora_targets_follow_the_model():
    v = view.compute({"plan": {"model": "gpt2", "method": "lora"}})
    # GPT-2's block linears (transformers modeling_gpt2.py): c_attn, c_proj (attention and MLP), c_fc
    assert set(v["targets"]) == {"c_attn", "c_proj", "c_fc"}
    assert set(v["plan"]["lora"]["targets"]) == {"c_attn", "c_proj", "c_fc"}
    v = view.compute({"plan": {"method": "lora", "lora": {"targets": ["q_proj", "v_proj"]}}})
    assert v["plan"]["lora"]["targets"] == ["q_proj", "v_proj"]


def test_ds_config_pane_uses_the_exporter_or_says_why_not():
    v = view.compute({"plan": {}})
    cfg = json.loads(v["ds_config"]["text"])
    # default plan: micro 2 x accumulation 4 x 4 GPUs = 32 sequences per step
    assert cfg["train_micro_batch_size_per_gpu"] == 2
    assert cfg["gradient_accumulation_steps"] == 4
    assert cfg["zero_optimization"]["stage"] == 2
    v = view.compute({"plan": {"framework": "fsdp"}})
    assert v["ds_config"]["text"] == "" and "fsdp" in v["ds_config"]["note"]


def test_worker_answers_json_and_reports_engine_failures_as_text():
    out = json.loads(worker.compute(json.dumps({"plan": {"micro_batch_size": 1}})))
    assert out["plan"]["micro_batch_size"] == 1
    out = json.loads(worker.compute("not json"))
    assert "fatal" in out


def test_run_chart_and_verdict_name_the_phase():
    """A LoRA step that fits a 24 GiB card, evaluated at HF's default eval batch 8, which does not: the verdict names
    the evaluation and the eval batch that fits; the chart has one bar per phase, the eval bar over capacity."""
    plan = {"framework": "single", "gpus_per_node": 1, "method": "lora", "micro_batch_size": 1, "seq_len": 2048,
            "activation_checkpointing": "full", "gpu": "rtx-4090", "run": {"eval": {}}}
    v = view.compute({"plan": plan})
    est = v["estimate"]
    assert v["out"]["fits"]["text"].startswith("Fits the step, runs out at the first evaluation: "
                                                "set per_device_eval_batch_size ≤ ")
    bars = {b["key"]: b for b in v["run"]["bars"]}
    assert list(bars) == list(est["run"]["phases"])
    assert bars["eval"]["over"] and bars["eval"]["peak"] and not bars["step"]["over"]
    # heights are proportional to the bytes (the tallest bar, the eval, fills the plot)
    assert bars["eval"]["h"] == 110
    assert abs(bars["step"]["h"] / bars["eval"]["h"] - bars["step"]["bytes"] / bars["eval"]["bytes"]) < 1e-3
    assert "Eval 37.35 GiB (over capacity)" in v["run"]["summary"]
    assert v["view"]["oom.needed"]["bytes"] == est["run"]["device_used_bytes"]

