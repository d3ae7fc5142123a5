"""Format detection by structure (with a confidence and the evidence), the per-key report, and the import
classes of issue 24 (LLaMA-Factory v1 layout, torchtune builder names by pattern, HF/LLaMA-Factory fsdp lists and
strings, single-process-only options, GPTQ bases, FSDP's fp32 upcast). Expectations written from the trainers'
sources cited inline, never from the importer's output."""
import json
import os
import subprocess
import sys

import pytest

from zerocalc.imports import ConfigImportError, detect_format, import_config, parse_text, report_lines
from zerocalc.imports.report import KINDS, kind_of
from zerocalc.imports.torchtune import preset_for_builder

HERE = os.path.dirname(__file__)
REAL = os.path.join(HERE, "data", "configs", "real")


def read(name):
    with open(os.path.join(REAL, name), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- detection


def test_trl_yaml_with_lora_r_and_load_in_4bit_is_not_axolotl():
    # alignment-handbook recipe: TRL ModelConfig's lora_r / load_in_4bit beside TrainingArguments names
    d = detect_format(parse_text(read("handbook__zephyr-7b-beta__sft__config_qlora.yaml")))
    assert d["format"] == "trl" and d["confidence"] >= 0.8 and not d["ambiguous"]
    assert all(c["format"] != "axolotl" for c in d["candidates"])


def test_two_keys_alone_do_not_make_axolotl():
    # the old rule took any two of axolotl's key names (lora_r + load_in_4bit) for axolotl
    d = detect_format(parse_text("use_peft: true\nlora_r: 16\nload_in_4bit: true\nper_device_train_batch_size: 4\n"))
    assert d["format"] == "trl"


def test_file_matching_two_formats_says_so():
    # axolotl's base_model + datasets list AND TrainingArguments / TRL names: both structures are there
    text = ("base_model: Qwen/Qwen3-8B\ndatasets:\n  - path: a\n    type: alpaca\nsequence_len: 2048\n"
            "per_device_train_batch_size: 4\nnum_train_epochs: 1\nlr_scheduler_type: cosine\nuse_peft: true\n"
            "max_seq_length: 2048\ndataset_text_field: text\n")
    d = detect_format(parse_text(text))
    assert d["ambiguous"] and {c["format"] for c in d["candidates"][:2]} == {"axolotl", "trl"}
    assert all(c["evidence"] for c in d["candidates"][:2])
    res = import_config(text, {})
    assert any(w["id"] == "import-format-ambiguous" for w in res.warnings)
    assert res.to_dict()["report"]["ambiguous"] is True


@pytest.mark.parametrize("name,fmt", [
    ("llamafactory__v1__train_lora_sft.yaml", "llamafactory"), ("torchtune__qwen3__8B_lora.yaml", "torchtune"),
    ("handbook__accelerate_configs__zero3.yaml", "accelerate"), ("deepspeed__llamafactory__ds_z0_config.json", "ds_config"),
    ("axolotl__llama-2__gptq-lora.yml", "axolotl"), ("llamafactory__extras__galore__llama3_full_sft.yaml", "llamafactory"),
])
def test_detection_confident_on_real_files(name, fmt):
    d = detect_format(parse_text(read(name)))
    assert d["format"] == fmt and d["confidence"] >= 0.75 and not d["ambiguous"], d


def test_nothing_recognisable_is_refused():
    with pytest.raises(ConfigImportError, match="not a format zerocalc reads"):
        detect_format({"model_name": "t5", "epochs": 3})


# ---------------------------------------------------------------- the report


def test_every_key_named_and_no_effect_listed_as_such():
    res = import_config(read("axolotl__llama-2__gptq-lora.yml"), {})
    rep = res.to_dict()["report"]
    assert rep["format"] == "axolotl" and rep["confidence"] >= 0.75
    cfg = parse_text(read("axolotl__llama-2__gptq-lora.yml"))
    named = {a["key"].split(".")[0].split(":")[0] for a in res.applied} | {n["key"].split(".")[0] for n in
                                                                             res.not_represented}
    assert set(cfg) <= named
    no_effect = {n["key"] for n in rep["unmapped"]["no_effect"]}
    assert {"learning_rate", "lr_scheduler", "logging_steps", "warmup_ratio"} <= no_effect
    assert "float16" in {a["key"] for a in rep["mapped"]} | {n["key"] for n in rep["unmapped"]["read"]}
    assert set(rep["unmapped"]) == set(KINDS)


def test_kinds_from_reasons():
    assert kind_of({"reason": "no memory effect"}) == "no_effect"
    assert kind_of({"reason": "changes memory but zerocalc does not model it (x)"}) == "not_modelled"
    assert kind_of({"reason": "not read: zerocalc knows no memory effect of this option"}) == "unknown"
    assert kind_of({"reason": "empty: the trainer's default"}) == "empty"
    assert kind_of({"reason": "not a zerocalc preset; the plan keeps model x"}) == "not_mapped"


def test_report_lines_start_with_format_and_confidence():
    lines = report_lines(import_config(read("torchtune__qwen3__8B_lora.yaml"), {}))
    assert lines[0].startswith("format: torchtune (confidence 0.")
    assert any(line.startswith("mapped: ") for line in lines)
    assert "not in the plan: optimizer.lr (no memory effect)" in lines


def test_cli_prints_format_confidence_and_every_unmapped_key():
    env = {**os.environ, "PYTHONPATH": os.path.join(HERE, "..", "py")}
    r = subprocess.run([sys.executable, "-m", "zerocalc", "import", "--config",
                        os.path.join(REAL, "handbook__zephyr-7b-beta__sft__config_qlora.yaml")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "qlora"
    err = r.stderr.splitlines()
    assert err[0].startswith("format: trl (confidence ")
    for key in ("learning_rate", "chat_template", "dataset_mixture", "hub_model_id"):
        assert any(line.startswith(f"not in the plan: {key} (") for line in err), key


# ---------------------------------------------------------------- the classes


def test_llamafactory_v1_sections_read():
    # examples/v1/train_lora/train_lora_sft.yaml: peft_config lora r 16 / alpha 32 / dropout 0.05 / all,
    # dist_config fsdp2 (FSDP2Engine: reshard_after_forward true -> fully sharded)
    p = import_config(read("llamafactory__v1__train_lora_sft.yaml"), {}).plan
    assert (p["method"], p["lora"]["rank"], p["lora"]["alpha"], p["framework"], p["stack"]["fsdp_version"],
            p["zero_stage"]) == ("lora", 16, 32, "fsdp", 2, 3)


def test_llamafactory_v1_unknown_section_key_named():
    text = "model: Qwen/Qwen3-0.6B\ndist_config:\n  name: fsdp2\n  mystery_knob: 3\nmicro_batch_size: 2\n"
    res = import_config(text, {})
    assert res.format == "llamafactory" and res.plan["micro_batch_size"] == 2
    assert "dist_config.mystery_knob" in {n["key"] for n in res.not_represented}


@pytest.mark.parametrize("builder,preset", [
    # names from torchtune's own builder lists (torchtune/models/{qwen3,qwen2_5,llama3_3,...}/__init__.py __all__)
    ("qwen3_0_6b_instruct", "qwen3-0.6b"), ("qwen3_4b_base", "qwen3-4b"), ("qwen3_14b_instruct", "qwen3-14b"),
    ("qwen3_32b", "qwen3-32b"), ("qwen2_5_1_5b_base", "qwen2.5-1.5b"), ("qwen2_5_72b_instruct", "qwen2.5-72b"),
    ("llama3_3_70b", "llama-3.1-70b"),   # llama3_3/_model_builders.py: llama3_3_70b = llama3_1_70b
    ("llama3_2_3b", "llama-3.2-3b"), ("llama2_13b", "llama-2-13b"), ("gemma2_27b", "gemma-2-27b"),
    ("phi3_mini", "phi-3-mini-4k"), ("phi4_14b", "phi-4"),
    ("qwen2_5_3b", None), ("llama3_8b", None), ("mistral_7b", None),  # no preset of that exact model
])
def test_torchtune_builder_names_by_pattern(builder, preset):
    assert preset_for_builder(builder) == preset


def test_torchtune_lora_builder_for_qwen3():
    res = import_config("model:\n  _component_: torchtune.models.qwen3.lora_qwen3_1_7b_instruct\n  lora_rank: 8\n"
                        "optimizer:\n  _component_: torch.optim.AdamW\n", {"model": "qwen3-8b"})
    # Qwen3-1.7B is no zerocalc preset: named, the plan keeps its model
    assert res.plan["method"] == "lora" and res.plan["model"] == "qwen3-8b"
    assert "model._component_" in {n["key"] for n in res.not_represented}


def test_torchtune_single_device_without_header_comment():
    text = "\n".join(line for line in read("torchtune__qwen3__0.6B_lora_single_device.yaml").splitlines()
                     if not line.lstrip().startswith("#"))
    p = import_config(text, {"gpus_per_node": 8}).plan   # output_dir .../lora_single_device names the recipe
    assert (p["framework"], p["gpus_per_node"]) == ("single", 1)


@pytest.mark.parametrize("text", [
    "model_name_or_path: Qwen/Qwen3-8B\nstage: sft\nfinetuning_type: full\nbf16: true\nfsdp:\n  - full_shard\n  - auto_wrap\n",
    '{"output_dir": "o", "per_device_train_batch_size": 1, "bf16": true, "fsdp": "full_shard auto_wrap"}',
])
def test_fsdp_list_and_string_give_fsdp(text):
    p = import_config(text, {}).plan
    # full_shard = FULL_SHARD (ZeRO-3 like); full fine-tune in bf16 under accelerate's FSDP: fp32 masters
    assert (p["framework"], p["zero_stage"], p["precision"]) == ("fsdp", 3, "bf16-mixed")


@pytest.mark.parametrize("text,key", [
    ("model_name_or_path: Qwen/Qwen3-8B\nstage: sft\nfinetuning_type: full\nuse_galore: true\ngalore_layerwise: true\n",
     "galore_layerwise"),
    ('{"output_dir": "o", "per_device_train_batch_size": 1, "optim": "galore_adamw_8bit_layerwise"}', "optim"),
])
def test_layerwise_optimizers_single_gpu(text, key):
    res = import_config(text, {"gpus_per_node": 8})
    assert (res.plan["framework"], res.plan["gpus_per_node"], res.plan["nodes"]) == ("single", 1, 1)
    assert any(w["id"] == "import-single-process" for w in res.warnings)
    assert any(a["key"] == key and a["plan_key"] == "framework" for a in res.applied)


def test_galore_without_layerwise_stays_distributed():
    res = import_config("model_name_or_path: Qwen/Qwen3-8B\nstage: sft\nfinetuning_type: full\nuse_galore: true\n",
                        {"gpus_per_node": 8})
    assert res.plan["framework"] == "ddp"


@pytest.mark.parametrize("text", [
    "base_model: TheBloke/Llama-2-7B-GPTQ\ngptq: true\nadapter: lora\n",
    "base_model: TheBloke/Llama-2-7B-GPTQ\nadapter: lora\n",
    "model_name_or_path: TheBloke/Llama-2-7B-GPTQ\nstage: sft\nfinetuning_type: lora\n",
    "model_name_or_path: TheBloke/Llama-2-7B-GPTQ\nuse_peft: true\nper_device_train_batch_size: 1\n",
])
def test_gptq_base_is_qlora_on_gptq(text):
    res = import_config(text, {})
    q = res.plan["quantization"]
    assert (res.plan["method"], q["type"], q["bits"], q["group_size"], res.plan["model"]) == \
        ("qlora", "gptq", 4, 128, "llama-2-7b")
    assert any(w["id"] == "import-gptq-assumed" for w in res.warnings)


def test_bf16_full_under_fsdp1_is_mixed_and_single_gpu_stays_pure():
    fsdp = "base_model: meta-llama/Llama-3.1-8B\nbf16: true\nfsdp:\n  - full_shard\n  - auto_wrap\n"
    assert import_config(fsdp, {}).plan["precision"] == "bf16-mixed"   # Accelerator.prepare_model upcast
    ddp = "base_model: meta-llama/Llama-3.1-8B\nbf16: true\n"
    assert import_config(ddp, {}).plan["precision"] == "bf16-pure"     # loaded in bf16, no fp32 copy


def test_gptq_config_json_quantization_config():
    # a GPTQ checkpoint's config.json as optimum writes it: quantization_config {quant_method gptq, bits, group_size}
    from zerocalc.imports import apply_model_config
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
           "quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 64, "desc_act": False}}
    p = apply_model_config(json.dumps(cfg), {"method": "lora"})
    assert (p["method"], p["quantization"]["type"], p["quantization"]["bits"], p["quantization"]["group_size"]) == \
        ("qlora", "gptq", 8, 64)


# ---------------------------------------------------------------- no tracebacks on mangled real files

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_FILES = sorted(f for f in os.listdir(REAL) if f.endswith((".yaml", ".yml", ".json")))
_ODD = st.sampled_from([None, True, 0, -1, 2.5, "", "auto", "lora", [], {}, [1, 2], {"name": 5}, {"_component_": 3},
                        {"name": "deepspeed", "config_file": 3}, {"name": "bnb", "quantization_bit": "x"}, 10 ** 9])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(_FILES), data=st.data())
def test_mangled_real_files_refuse_with_a_key_or_import(name, data):
    """Any value swapped into a real file: an import, or one ConfigImportError naming a key, never a traceback."""
    cfg = dict(parse_text(read(name)))
    for _ in range(data.draw(st.integers(1, 3))):
        k = data.draw(st.sampled_from(sorted(cfg)))
        if isinstance(cfg[k], dict) and cfg[k] and data.draw(st.booleans()):
            cfg[k] = {**cfg[k], data.draw(st.sampled_from(sorted(cfg[k]))): data.draw(_ODD)}
        else:
            cfg[k] = data.draw(_ODD)
    try:
        res = import_config(cfg, {})
    except ConfigImportError as e:
        assert e.key and "\n" not in str(e)
        return
    assert res.report["format"] == res.format
