"""Exports write the allocator's env var and the collator settings the plan's data block asks for (issue 21
item 4), and they import back to the same plan keys."""
import pytest

from zerocalc import Plan
from zerocalc.exports import launch_text, run_export, training_arguments_kwargs, trainer_yaml
from zerocalc.exports.data_args import alloc_conf
from zerocalc.imports import import_config

BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "framework": "ddp", "gpus_per_node": 2,
        "seq_len": 4096, "method": "lora"}


def plan(**kw):
    return Plan.from_dict({**BASE, **kw})


@pytest.mark.parametrize("alloc,trainer,want", [
    ({}, "hf-trainer", None),
    ({"expandable_segments": True}, "hf-trainer", "expandable_segments:True"),
    ({"expandable_segments": True}, "torchtune", None),           # torchtune's recipes set it themselves
    ({"expandable_segments": False}, "torchtune", "expandable_segments:False"),
    ({"max_split_size_mb": 128}, "hf-trainer", "max_split_size_mb:128"),
    ({"expandable_segments": True, "max_split_size_mb": 256}, "torchtune",
     "expandable_segments:True,max_split_size_mb:256"),
])
def test_alloc_conf(alloc, trainer, want):
    assert alloc_conf(plan(allocator=alloc, stack={"trainer": trainer}, framework="single", gpus_per_node=1)) == want


def test_launch_snippet_exports_the_env_var():
    text = launch_text(plan(allocator={"expandable_segments": True}))
    lines = text.splitlines()
    env = lines.index("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert env < min(i for i, l in enumerate(lines) if l.startswith("torchrun"))   # set before launching
    assert "PYTORCH_CUDA_ALLOC_CONF" not in launch_text(plan())


def test_hf_snippet_empty_cache_and_collator():
    p = plan(allocator={"empty_cache_every": 100, "expandable_segments": True},
             data={"lengths": "padding-free", "mean_len": 700})
    assert training_arguments_kwargs(p)["torch_empty_cache_steps"] == 100
    text = run_export(p, "hf")
    assert "torch_empty_cache_steps=100," in text
    assert "padding_free=True" in text
    assert "# launch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    assert "packing=True" in run_export(plan(data={"lengths": "fixed", "mean_len": 700}), "hf")
    plain = run_export(plan(), "hf")
    assert "torch_empty_cache_steps" not in plain and "padding_free" not in plain and "packing" not in plain


@pytest.mark.parametrize("target,key", [("axolotl", "sample_packing"), ("llamafactory", "packing")])
@pytest.mark.parametrize("lengths,want", [("fixed", True), ("padded-longest", False)])
def test_trainer_yaml_packing_round_trips(target, key, lengths, want):
    p = {**BASE, "framework": "single", "gpus_per_node": 1,
         "data": {"lengths": lengths, "mean_len": 700, "p99_len": 3000}}
    text = trainer_yaml(p, target)
    assert f"{key}: {'true' if want else 'false'}" in text
    res = import_config(text, p)
    assert Plan.from_dict(res.plan).data.lengths == lengths
    assert any(a["key"] == key and a["plan_key"] == "data.lengths" for a in res.applied)


def test_trainer_yaml_without_data_writes_no_packing():
    p = {**BASE, "framework": "single", "gpus_per_node": 1}
    assert "sample_packing" not in trainer_yaml(p, "axolotl")
    assert "packing" not in trainer_yaml(p, "llamafactory")


def test_llamafactory_empty_cache_round_trips():
    p = {**BASE, "framework": "single", "gpus_per_node": 1, "allocator": {"empty_cache_every": 25}}
    text = trainer_yaml(p, "llamafactory")
    assert "torch_empty_cache_steps: 25" in text
    assert Plan.from_dict(import_config(text, p).plan).allocator.empty_cache_every == 25
