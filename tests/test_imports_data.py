"""Importers read the data's lengths and the allocator's settings (issue 21 item 4, plan-v1 Extension 6):
packing -> data.lengths fixed, TRL padding_free -> padding-free (when the plan has lengths), HF
torch_empty_cache_steps -> allocator.empty_cache_every, PYTORCH_CUDA_ALLOC_CONF -> allocator.*; every such key
leaves the report's "not mapped" list once it is mapped."""
import json

import pytest

from zerocalc import Plan
from zerocalc.imports import ConfigImportError, import_config

BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "seq_len": 4096}
WITH_LENGTHS = {**BASE, "data": {"lengths": "fixed", "mean_len": 900, "p99_len": 3000}}


def data(res):
    return Plan.from_dict(res.plan).data


def alloc(res):
    return Plan.from_dict(res.plan).allocator


def mapped(res):
    return {a["key"]: (a["plan_key"], a["value"]) for a in res.report["mapped"]}


def unmapped_keys(res, kind=None):
    kinds = [kind] if kind else list(res.report["unmapped"])
    return {n["key"] for k in kinds for n in res.report["unmapped"][k]}


def trl(**kw):
    return json.dumps({"model_name_or_path": "meta-llama/Llama-3.1-8B", "max_length": 4096,
                       "dataset_text_field": "text", **kw})


def test_trl_packing_is_fixed_length():
    res = import_config(trl(packing=True, padding_free=True), WITH_LENGTHS)
    assert data(res).lengths == "fixed"
    assert mapped(res)["packing"] == ("data.lengths", "fixed")
    assert "packing" not in unmapped_keys(res)
    assert "padding_free" in unmapped_keys(res, "read")


def test_trl_padding_free_needs_the_lengths():
    res = import_config(trl(padding_free=True), WITH_LENGTHS)
    assert (data(res).lengths, data(res).mean_len, data(res).p99_len) == ("padding-free", 900, 3000)
    assert mapped(res)["padding_free"] == ("data.lengths", "padding-free")
    bare = import_config(trl(padding_free=True), BASE)
    assert data(bare).lengths == "fixed"          # the plan keeps fixed: no lengths to go on
    item = [n for n in bare.report["unmapped"]["not_mapped"] if n["key"] == "padding_free"]
    assert item and "data.mean_len" in item[0]["reason"]


def test_trl_packing_off_pads_to_the_longest():
    res = import_config(trl(packing=False), WITH_LENGTHS)
    assert data(res).lengths == "padded-longest"


def test_hf_empty_cache_steps_and_group_by_length():
    cfg = json.dumps({"per_device_train_batch_size": 2, "torch_empty_cache_steps": 50, "group_by_length": True,
                      "output_dir": "out"})
    res = import_config(cfg, BASE, fmt="hf-training-args")
    assert alloc(res).empty_cache_every == 50
    assert mapped(res)["torch_empty_cache_steps"] == ("allocator.empty_cache_every", 50)
    assert "group_by_length" in unmapped_keys(res, "not_modelled")   # no longer "no memory effect"


@pytest.mark.parametrize("text,exp,split", [
    ("expandable_segments:True", True, None),
    ("expandable_segments:False,max_split_size_mb:128", False, 128),
    (" max_split_size_mb:512 , expandable_segments:True ", True, 512),
])
def test_alloc_conf_in_an_env_block(text, exp, split):
    cfg = json.dumps({"per_device_train_batch_size": 2, "output_dir": "out",
                      "env": {"PYTORCH_CUDA_ALLOC_CONF": text, "NCCL_DEBUG": "INFO"}})
    res = import_config(cfg, BASE, fmt="hf-training-args")
    assert alloc(res).expandable_segments is exp
    assert alloc(res).max_split_size_mb == split
    assert "env.PYTORCH_CUDA_ALLOC_CONF:expandable_segments" in mapped(res)
    assert "env.NCCL_DEBUG" in unmapped_keys(res, "unknown")


def test_alloc_conf_other_options_are_named():
    cfg = json.dumps({"per_device_train_batch_size": 2,
                      "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6,expandable_segments:True"})
    res = import_config(cfg, BASE, fmt="hf-training-args")
    assert alloc(res).expandable_segments is True
    assert "PYTORCH_CUDA_ALLOC_CONF:garbage_collection_threshold" in unmapped_keys(res, "not_modelled")


@pytest.mark.parametrize("bad,key", [
    ("expandable_segments:yes", "PYTORCH_CUDA_ALLOC_CONF:expandable_segments"),
    ("max_split_size_mb:10", "PYTORCH_CUDA_ALLOC_CONF:max_split_size_mb"),   # AllocatorConfig.cpp: >= 20
    ("expandable_segments", "PYTORCH_CUDA_ALLOC_CONF"),
])
def test_bad_alloc_conf_names_the_key(bad, key):
    cfg = json.dumps({"per_device_train_batch_size": 2, "PYTORCH_CUDA_ALLOC_CONF": bad})
    with pytest.raises(ConfigImportError) as e:
        import_config(cfg, BASE, fmt="hf-training-args")
    assert e.value.key == key


AXO = ("base_model: meta-llama/Llama-3.1-8B\nsequence_len: 4096\nmicro_batch_size: 2\n"
       "gradient_accumulation_steps: 1\nadapter: lora\nlora_r: 16\nlora_alpha: 32\nlora_target_linear: true\n")


@pytest.mark.parametrize("extra,plan,lengths", [
    ("sample_packing: true\n", BASE, "fixed"),
    ("sample_packing: false\npad_to_sequence_len: true\n", WITH_LENGTHS, "fixed"),
    ("sample_packing: false\n", WITH_LENGTHS, "padded-longest"),
])
def test_axolotl_packing(extra, plan, lengths):
    res = import_config(AXO + extra, plan)
    assert res.format == "axolotl"
    assert data(res).lengths == lengths
    assert "sample_packing" not in unmapped_keys(res, "not_mapped")


LF = ("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
      "cutoff_len: 4096\ntemplate: llama3\n")


@pytest.mark.parametrize("extra,lengths,key", [
    ("packing: true\n", "fixed", "packing"),
    ("neat_packing: true\n", "fixed", "neat_packing"),
    ("packing: false\n", "padded-longest", "packing"),
])
def test_llamafactory_packing(extra, lengths, key):
    res = import_config(LF + extra + "torch_empty_cache_steps: 10\n", WITH_LENGTHS)
    assert res.format == "llamafactory"
    assert data(res).lengths == lengths
    assert mapped(res)[key] == ("data.lengths", lengths)
    assert alloc(res).empty_cache_every == 10


def test_no_data_keys_keep_the_plan():
    res = import_config(trl(), WITH_LENGTHS)
    assert res.plan["data"] == {"lengths": "fixed", "mean_len": 900, "p99_len": 3000, "histogram": None}
    assert "allocator" not in res.plan          # omitted at its defaults, as Plan.to_dict writes it
