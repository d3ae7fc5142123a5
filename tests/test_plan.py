"""plan-v1 parsing (contracts/plan-v1.md): defaults, round trips, and one PlanError per bad value.

Every rejection must carry `.key` (the dotted plan key) and a message that names the key and what is
allowed, so the CLI and the page can show it as one line.
"""
from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest

from zerocalc import DEFAULT_PLAN, Plan, PlanError, estimate

# a model_type transformers builds that the engine still refuses (the list may only shrink, so read it)
REFUSALS = Path(__file__).parent / "data" / "architecture_refusals.json"
# a model_type the engine refuses by name: the checked-in refusals (a list that may only shrink, now empty), else
# one that no transformers release has
REFUSED_TYPE = (sorted(json.loads(REFUSALS.read_text())["refused"]) or ["not_a_transformers_type"])[0]

# The example of plan-v1.md, copied verbatim: it is documented as "every key with its default".
CONTRACT_EXAMPLE = {
    "schema": 1,
    "model": "llama-3.1-8b",
    "gpu": "a100-sxm4-80gb",
    "gpus_per_node": 4,
    "nodes": 1,
    "framework": "deepspeed",
    "zero_stage": 2,
    "offload_optimizer": "none",
    "offload_params": "none",
    "precision": "bf16-mixed",
    "optimizer": "adamw",
    "micro_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "seq_len": 4096,
    "activation_checkpointing": "none",
    "activation_offloading": False,
    "attention": "flash",
    "loss": "standard",
    "optimizer_in_backward": False,
    "method": "full",
    "deepspeed": {"reduce_bucket_size": 500000000, "overlap_comm": False, "contiguous_gradients": True,
                  "zero_init": True},
    "lora": {"rank": 16, "alpha": 32, "dropout": 0.05,
             "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
    "quantization": {"type": "nf4", "double_quant": True, "compute_dtype": "bf16"},
}
# Extension 1's example (plan-v1.md, "the defaults are today's stack"), and its new keys' defaults.
EXTENSION_1_DEFAULTS = {
    "stack": {"trainer": "hf-trainer", "transformers": "5", "peft_adapter_dtype": "auto", "kbit_prepare": "auto",
              "bitsandbytes": "current", "optimizer_impl": "auto", "compile": "none", "fsdp_version": 1,
              "cuda_context": "lazy"},
    "lora.modules_to_save": [], "quantization.bits": 4, "quantization.group_size": 128,
}

# A small Llama-style config.json (what a user pastes for a custom model).
TINY_LLAMA = {
    "name": "tiny-llama", "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 32000,
    "tie_word_embeddings": False, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
    "architectures": ["LlamaForCausalLM"],
}


def reject(d: dict) -> PlanError:
    with pytest.raises(PlanError) as ei:
        Plan.from_dict(d)
    return ei.value


def assert_rejected(d: dict, key: str, *allowed: str) -> PlanError:
    """Plan.from_dict(d) fails on `key`; str(e) starts with the key and names each of `allowed`."""
    e = reject(d)
    assert e.key == key, (d, e.key, str(e))
    text = str(e)
    assert text.startswith(f"{key}:"), text
    assert "\n" not in text and "Traceback" not in text
    for a in allowed:
        assert a in text, (a, text)
    return e


# --- defaults -----------------------------------------------------------------------------------------


def test_empty_plan_is_the_default_plan():
    assert Plan.from_dict({}) == Plan() == DEFAULT_PLAN


def test_defaults_equal_the_contract_example():
    d = Plan.from_dict({}).to_dict()
    for key, value in CONTRACT_EXAMPLE.items():
        if key == "deepspeed":
            continue   # the default plan gives no knob: DeepSpeed's own defaults apply (checked below)
        got = {k: v for k, v in d[key].items() if f"{key}.{k}" not in EXTENSION_1_DEFAULTS} \
            if isinstance(value, dict) else d[key]
        assert got == value, key
    assert set(d) == set(CONTRACT_EXAMPLE) | {"stack"}
    assert d["stack"] == EXTENSION_1_DEFAULTS["stack"]
    for dotted, value in EXTENSION_1_DEFAULTS.items():
        if "." in dotted:
            section, k = dotted.split(".")
            assert d[section][k] == value, dotted


def test_contract_example_deepspeed_knobs_are_deepspeeds_defaults():
    # The example spells out four knobs at DeepSpeed 0.19's defaults (runtime/zero/config.py:
    # reduce_bucket_size 5e8, contiguous_gradients True, overlap_comm None -> False below stage 3,
    # zero_init True). Spelling them out must change nothing in the estimate.
    explicit = Plan.from_dict(CONTRACT_EXAMPLE)
    assert dict(explicit.deepspeed) == CONTRACT_EXAMPLE["deepspeed"]
    assert explicit.to_dict() == {**Plan().to_dict(), "deepspeed": CONTRACT_EXAMPLE["deepspeed"]}
    assert estimate(explicit).to_dict() == estimate(Plan()).to_dict()


def test_default_attributes_are_named_as_the_contract_keys():
    p = Plan()
    assert (p.model, p.gpu, p.gpus_per_node, p.nodes, p.framework, p.zero_stage) == \
        ("llama-3.1-8b", "a100-sxm4-80gb", 4, 1, "deepspeed", 2)
    assert (p.micro_batch_size, p.gradient_accumulation_steps, p.seq_len) == (2, 4, 4096)
    assert (p.lora.rank, p.lora.alpha, p.lora.dropout) == (16, 32, 0.05)
    assert p.lora.targets == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert (p.quantization.type, p.quantization.double_quant, p.quantization.compute_dtype) == ("nf4", True, "bf16")
    assert p.world_size == 4


def test_world_size_is_gpus_per_node_times_nodes():
    assert Plan.from_dict({"gpus_per_node": 8, "nodes": 3}).world_size == 24


def test_missing_keys_take_defaults_and_given_keys_are_kept():
    p = Plan.from_dict({"zero_stage": 3, "lora": {"rank": 64}})
    assert p.zero_stage == 3 and p.micro_batch_size == 2
    assert p.lora.rank == 64 and p.lora.alpha == 32 and p.lora.dropout == 0.05


def test_whole_floats_are_integers():
    # JSON writers may emit 4.0 for 4; the value is the same integer
    p = Plan.from_dict({"micro_batch_size": 4.0, "seq_len": 2048.0})
    assert p.micro_batch_size == 4 and type(p.micro_batch_size) is int
    assert p.seq_len == 2048 and type(p.seq_len) is int


def test_plan_is_frozen_and_input_is_not_mutated():
    d = copy.deepcopy(CONTRACT_EXAMPLE)
    p = Plan.from_dict(d)
    assert d == CONTRACT_EXAMPLE
    with pytest.raises(Exception):
        p.zero_stage = 3          # frozen dataclass
    with pytest.raises(TypeError):
        p.deepspeed["overlap_comm"] = True   # read-only mapping


# --- round trips ----------------------------------------------------------------------------------------

ROUND_TRIP_PLANS = [
    {},
    CONTRACT_EXAMPLE,
    {"model": "qwen3-30b-a3b", "gpu": "h100-sxm-80gb", "gpus_per_node": 8, "nodes": 4, "zero_stage": 3,
     "offload_optimizer": "nvme", "offload_params": "cpu", "precision": "fp16-mixed", "optimizer": "adamw-8bit",
     "activation_checkpointing": "full", "activation_offloading": True, "attention": "eager", "loss": "chunked",
     "deepspeed": {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                   "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 123456789,
                   "stage3_max_reuse_distance": 0, "sub_group_size": 100000000, "zero_hpz_partition_size": 8,
                   "overlap_comm": True, "contiguous_gradients": False, "zero_init": False,
                   "gradient_clipping": 1.0}},
    {"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu", "method": "lora",
     "lora": {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "v_proj", "lm_head"]}},
    {"framework": "single", "gpus_per_node": 1, "method": "qlora", "precision": "bf16-pure",
     "optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, "gradient_accumulation_steps": 1,
     "quantization": {"type": "int8", "double_quant": False, "compute_dtype": "fp16"}},
    {"framework": "ddp", "zero_stage": 0, "optimizer": "adafactor", "precision": "fp32"},
    # custom model object (a whole pasted config.json: lists and nested objects included)
    {"model": TINY_LLAMA},
    {"model": {**TINY_LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "eos_token_id": [1, 2]}},
    {"model": {"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 1000,
               "n_positions": 512}},
    # custom GPUs
    {"gpu": {"name": "my card", "memory_gib": 24}},
    {"gpu": {"name": "fractional", "memory_gib": 23.5, "bf16_supported": False}},
    {"model": TINY_LLAMA, "gpu": {"name": "big", "memory_gib": 192}, "framework": "fsdp", "zero_stage": 2},
]


@pytest.mark.parametrize("d", ROUND_TRIP_PLANS, ids=range(len(ROUND_TRIP_PLANS)))
def test_round_trip(d):
    p = Plan.from_dict(d)
    out = p.to_dict()
    assert Plan.from_dict(out) == p
    # through JSON text too (the CLI file and the page's share link)
    assert Plan.from_dict(json.loads(json.dumps(out))) == p
    # to_dict names every key and is a fixed point
    assert set(out) == set(CONTRACT_EXAMPLE) | {"stack"}
    assert Plan.from_dict(out).to_dict() == out


def test_round_trip_keeps_custom_model_fields():
    p = Plan.from_dict({"model": TINY_LLAMA})
    m = p.to_dict()["model"]
    assert m == TINY_LLAMA
    assert p.model["hidden_size"] == 256


def test_round_trip_keeps_custom_gpu_fields():
    g = {"name": "fractional", "memory_gib": 23.5, "bf16_supported": False}
    assert Plan.from_dict({"gpu": g}).to_dict()["gpu"] == g


def test_custom_gpu_capacity_is_memory_gib_times_2_pow_30():
    # 23.5 GiB = 23.5 * 1,073,741,824 = 25,232,932,864 bytes
    est = estimate(Plan.from_dict({"model": TINY_LLAMA, "gpu": {"name": "x", "memory_gib": 23.5}}))
    assert est.to_dict()["per_gpu"]["capacity_bytes"] == 25_232_932_864


def test_lora_targets_deduplicated_in_order():
    p = Plan.from_dict({"lora": {"targets": ["v_proj", "q_proj", "v_proj"]}})
    assert p.lora.targets == ("v_proj", "q_proj")


def test_deepspeed_auto_allowed_for_the_three_hf_filled_knobs():
    knobs = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")
    p = Plan.from_dict({"zero_stage": 3, "deepspeed": {k: "auto" for k in knobs}})
    assert dict(p.deepspeed) == {k: "auto" for k in knobs}


def test_offload_params_below_stage_3_is_accepted_with_a_warning():
    # DeepSpeed itself accepts offload_param at ZeRO-2 and ignores it: a warning, not an error
    est = estimate(Plan.from_dict({"zero_stage": 2, "offload_params": "cpu"}))
    assert "offload-params-ignored" in [w["id"] for w in est.to_dict()["warnings"]]


# --- rejections: integers ------------------------------------------------------------------------------

# (key, dotted path) of every integer key with lower bound 1
INT_KEYS = [
    ("gpus_per_node", ("gpus_per_node",)),
    ("nodes", ("nodes",)),
    ("micro_batch_size", ("micro_batch_size",)),
    ("gradient_accumulation_steps", ("gradient_accumulation_steps",)),
    ("seq_len", ("seq_len",)),
    ("lora.rank", ("lora", "rank")),
    ("deepspeed.reduce_bucket_size", ("deepspeed", "reduce_bucket_size")),
    ("deepspeed.sub_group_size", ("deepspeed", "sub_group_size")),
    ("deepspeed.zero_hpz_partition_size", ("deepspeed", "zero_hpz_partition_size")),
]
# integer knobs where 0 is meaningful (no reuse, no persistence, ...)
INT0_KEYS = [
    ("deepspeed.stage3_prefetch_bucket_size", ("deepspeed", "stage3_prefetch_bucket_size")),
    ("deepspeed.stage3_max_live_parameters", ("deepspeed", "stage3_max_live_parameters")),
    ("deepspeed.stage3_max_reuse_distance", ("deepspeed", "stage3_max_reuse_distance")),
    ("deepspeed.stage3_param_persistence_threshold", ("deepspeed", "stage3_param_persistence_threshold")),
]


def nest(path: tuple, value) -> dict:
    d = value
    for p in reversed(path):
        d = {p: d}
    return d


def _range_in(text: str) -> tuple[int, int]:
    m = re.search(r"from (\d+) to (\d+)", text)
    assert m, f"message does not name the allowed range: {text}"
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("key,path", INT_KEYS, ids=[k for k, _ in INT_KEYS])
@pytest.mark.parametrize("bad", [0, -1, -4096, "huge", 10 ** 15, "4", "abc", True, False, 2.5, None, [4], {}])
def test_int_key_rejects(key, path, bad):
    if bad == "huge":
        # 1e12 is out of range for plan integers; DeepSpeed buffer knobs count elements and go to
        # 2**40 (1.0995e12), so there one past 1e12 is 1e13
        bad = 1e13 if key.startswith("deepspeed.") else 1e12
    e = assert_rejected(nest(path, bad), key)
    assert re.search(r"must be an? (integer|whole number) from 1 to \d+", str(e)), str(e)


@pytest.mark.parametrize("key,path", INT0_KEYS, ids=[k for k, _ in INT0_KEYS])
@pytest.mark.parametrize("bad", [-1, 1e30, "x", True, 0.5])
def test_int0_knob_rejects(key, path, bad):
    e = assert_rejected(nest(path, bad), key)
    assert re.search(r"must be an? (integer|whole number) from 0 to \d+", str(e)), str(e)


@pytest.mark.parametrize("key,path", INT0_KEYS, ids=[k for k, _ in INT0_KEYS])
def test_int0_knob_accepts_zero(key, path):
    Plan.from_dict({"zero_stage": 3, **nest(path, 0)})


@pytest.mark.parametrize("key,path", INT_KEYS + INT0_KEYS, ids=[k for k, _ in INT_KEYS + INT0_KEYS])
def test_int_range_in_message_is_true(key, path):
    """The range the message names is the range accepted: its ends parse, one past them does not."""
    lo, hi = _range_in(str(reject(nest(path, -1))))
    for ok in (lo, hi):
        Plan.from_dict(nest(path, ok))
    assert reject(nest(path, hi + 1)).key == key


def test_int_upper_bounds_allow_real_runs():
    # far beyond any run: 64 GPUs per node, thousands of nodes, 1M-token sequences, rank 1024
    Plan.from_dict({"gpus_per_node": 64, "nodes": 4096, "seq_len": 1 << 20, "micro_batch_size": 1024,
                    "gradient_accumulation_steps": 4096, "lora": {"rank": 1024}})


@pytest.mark.parametrize("bad", [-1, 4, 1e12, "2", True, 2.5, None])
def test_zero_stage_rejects(bad):
    assert_rejected({"zero_stage": bad}, "zero_stage", "0", "3")


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stage_accepts_0_to_3(stage):
    assert Plan.from_dict({"zero_stage": stage}).zero_stage == stage


# --- rejections: choices --------------------------------------------------------------------------------

CHOICES = {
    "framework": ("deepspeed", "fsdp", "ddp", "single"),
    "offload_optimizer": ("none", "cpu", "nvme"),
    "offload_params": ("none", "cpu", "nvme"),
    "precision": ("bf16-mixed", "fp16-mixed", "bf16-pure", "fp32"),
    "optimizer": ("adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit", "adafactor", "sgd", "lion"),
    "activation_checkpointing": ("none", "full", "selective"),
    "attention": ("flash", "sdpa", "eager"),
    "loss": ("standard", "chunked"),
    "method": ("full", "lora", "qlora"),
    "quantization.type": ("nf4", "fp4", "int8"),
    "quantization.compute_dtype": ("bf16", "fp16", "fp32"),
}


@pytest.mark.parametrize("key", list(CHOICES))
@pytest.mark.parametrize("bad", ["bogus", "", "auto", 1, 0, True, None, ["none"]])
def test_choice_key_rejects(key, bad):
    path = tuple(key.split("."))
    assert_rejected(nest(path, bad), key, *CHOICES[key])


@pytest.mark.parametrize("key", list(CHOICES))
def test_choice_key_is_case_sensitive(key):
    value = CHOICES[key][0].upper()
    assert_rejected(nest(tuple(key.split(".")), value), key, *CHOICES[key])


@pytest.mark.parametrize("key", list(CHOICES))
def test_choice_key_accepts_every_documented_value(key):
    for value in CHOICES[key]:
        d = nest(tuple(key.split(".")), value)
        if key == "framework" and value == "single":
            d["gpus_per_node"] = 1
        if key == "framework" and value == "fsdp":
            d["zero_stage"] = 3
        if key == "offload_optimizer" and value == "nvme":
            d["zero_stage"] = 3
        Plan.from_dict(d)


# --- rejections: booleans and numbers --------------------------------------------------------------------

BOOL_KEYS = ["activation_offloading", "optimizer_in_backward", "deepspeed.overlap_comm",
             "deepspeed.contiguous_gradients", "deepspeed.zero_init", "quantization.double_quant"]


@pytest.mark.parametrize("key", BOOL_KEYS)
@pytest.mark.parametrize("bad", ["true", "false", 1, 0, None, "yes", [True]])
def test_bool_key_rejects(key, bad):
    assert_rejected(nest(tuple(key.split(".")), bad), key, "true or false")


@pytest.mark.parametrize("key,lo,hi,bad", [
    ("lora.alpha", 0, None, -1), ("lora.alpha", 0, None, 1e12), ("lora.alpha", 0, None, "32"),
    ("lora.alpha", 0, None, True), ("lora.alpha", 0, None, math.inf), ("lora.alpha", 0, None, math.nan),
    ("lora.dropout", 0, None, -0.1), ("lora.dropout", 0, None, 1), ("lora.dropout", 0, None, 1.5),
    ("lora.dropout", 0, None, "0.1"), ("lora.dropout", 0, None, math.nan),
    ("deepspeed.gradient_clipping", 0, None, -1), ("deepspeed.gradient_clipping", 0, None, "1.0"),
    ("deepspeed.gradient_clipping", 0, None, True), ("deepspeed.gradient_clipping", 0, None, math.nan),
    ("deepspeed.gradient_clipping", 0, None, 1e12),
])
def test_number_key_rejects(key, lo, hi, bad):
    e = assert_rejected(nest(tuple(key.split(".")), bad), key, "number")
    assert re.search(r"from 0 to \d", str(e)), str(e)


def test_lora_dropout_accepts_zero_and_alpha_accepts_floats():
    p = Plan.from_dict({"lora": {"dropout": 0, "alpha": 0.5}})
    assert p.lora.dropout == 0 and p.lora.alpha == 0.5


@pytest.mark.parametrize("bad", ["q_proj", [], [1], [""], ["q proj"], ["q_proj;rm"], None, {"q_proj": 1}])
def test_lora_targets_reject(bad):
    e = assert_rejected({"lora": {"targets": bad}}, "lora.targets")
    assert "module name" in str(e)


# --- rejections: unknown keys, "auto", sections -----------------------------------------------------------


@pytest.mark.parametrize("key", ["zero_stag", "Model", "batch_size", "world_size", "fsdp", "trainable_params"])
def test_unknown_top_level_key(key):
    e = assert_rejected({key: 1}, key, "unknown key")
    # the message lists the allowed keys
    for known in ("model", "zero_stage", "micro_batch_size", "deepspeed", "quantization"):
        assert known in str(e)


@pytest.mark.parametrize("section,allowed", [
    ("deepspeed", ("reduce_bucket_size", "overlap_comm", "contiguous_gradients", "stage3_prefetch_bucket_size",
                   "stage3_max_live_parameters", "stage3_max_reuse_distance", "stage3_param_persistence_threshold",
                   "sub_group_size", "zero_hpz_partition_size", "gradient_clipping", "zero_init")),
    ("lora", ("rank", "alpha", "dropout", "targets")),
    ("quantization", ("type", "double_quant", "compute_dtype")),
])
@pytest.mark.parametrize("unknown", ["foo", "stage", "offload_optimizer", "r"])
def test_unknown_nested_key(section, allowed, unknown):
    assert_rejected({section: {unknown: 1}}, f"{section}.{unknown}", "unknown key", *allowed)


@pytest.mark.parametrize("section", ["deepspeed", "lora", "quantization"])
@pytest.mark.parametrize("bad", [5, "x", [1], True, None])
def test_section_must_be_object(section, bad):
    assert_rejected({section: bad}, section, "object")


@pytest.mark.parametrize("knob", ["overlap_comm", "contiguous_gradients", "zero_init", "sub_group_size",
                                  "stage3_max_live_parameters", "stage3_max_reuse_distance",
                                  "zero_hpz_partition_size"])
def test_auto_rejected_for_deepspeed_knobs_hf_does_not_fill(knob):
    assert_rejected({"deepspeed": {knob: "auto"}}, f"deepspeed.{knob}", "reduce_bucket_size",
                    "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


@pytest.mark.parametrize("key", ["micro_batch_size", "gradient_accumulation_steps", "seq_len", "zero_stage",
                                 "gpus_per_node"])
def test_auto_rejected_for_plan_integers(key):
    assert_rejected({key: "auto"}, key, "integer")


@pytest.mark.parametrize("key", ["precision", "optimizer", "framework"])
def test_auto_rejected_for_plan_choices(key):
    assert_rejected({key: "auto"}, key, *CHOICES[key])


@pytest.mark.parametrize("bad", [2, 0, "1", True, None])
def test_schema_must_be_1(bad):
    assert_rejected({"schema": bad}, "schema", "1")


@pytest.mark.parametrize("bad", [[], "llama-3.1-8b", 3, None])
def test_plan_must_be_an_object(bad):
    assert reject(bad).key == "plan"


# --- model and gpu ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["llama-9b", "Llama-3.1-8B", "", "meta-llama/Llama-3.1-8B"])
def test_unknown_model_preset(bad):
    assert_rejected({"model": bad}, "model", "presets models")


@pytest.mark.parametrize("bad", [3, True, None, ["llama-3.1-8b"]])
def test_model_wrong_type(bad):
    e = reject({"model": bad})
    assert e.key == "model"


def test_custom_model_missing_hidden_size():
    cfg = {k: v for k, v in TINY_LLAMA.items() if k != "hidden_size"}
    assert_rejected({"model": cfg}, "model.hidden_size", "required")


@pytest.mark.parametrize("field", ["num_hidden_layers", "num_attention_heads", "vocab_size"])
def test_custom_model_missing_required_field(field):
    cfg = {k: v for k, v in TINY_LLAMA.items() if k != field}
    assert_rejected({"model": cfg}, f"model.{field}", "required")


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                                   "intermediate_size", "num_key_value_heads"])
@pytest.mark.parametrize("bad", [0, -8, "256", True, 1.5, 1e15])
def test_custom_model_bad_field(field, bad):
    e = reject({"model": {**TINY_LLAMA, field: bad}})
    assert e.key == f"model.{field}"
    assert str(e).startswith(f"model.{field}:")


def test_custom_model_bad_bool_field():
    assert_rejected({"model": {**TINY_LLAMA, "tie_word_embeddings": "yes"}}, "model.tie_word_embeddings",
                        "true or false")


def test_custom_model_unsupported_type_names_supported_ones():
    assert_rejected({"model": {"model_type": REFUSED_TYPE, "hidden_size": 64}}, "model.model_type",
                        "llama", "gpt2")


@pytest.mark.parametrize("bad", ["a100", "A100-SXM4-80GB", "", "h100"])
def test_unknown_gpu_preset(bad):
    assert_rejected({"gpu": bad}, "gpu", "presets gpus")


def test_custom_gpu_without_memory_gib():
    assert_rejected({"gpu": {"name": "my card"}}, "gpu.memory_gib", "memory_gib")
    assert_rejected({"gpu": {}}, "gpu.memory_gib")


@pytest.mark.parametrize("bad", [0, -24, 0.5, "24", True, None, math.inf, 1e12])
def test_custom_gpu_bad_memory_gib(bad):
    assert_rejected({"gpu": {"name": "x", "memory_gib": bad}}, "gpu.memory_gib", "number")


def test_custom_gpu_bad_name_and_bf16_flag():
    assert_rejected({"gpu": {"name": 7, "memory_gib": 24}}, "gpu.name", "string")
    assert_rejected({"gpu": {"memory_gib": 24, "bf16_supported": "no"}}, "gpu.bf16_supported", "true or false")


@pytest.mark.parametrize("bad", [3, True, ["a100-sxm4-80gb"]])
def test_gpu_wrong_type(bad):
    assert reject({"gpu": bad}).key == "gpu"


# --- consistency -----------------------------------------------------------------------------------------


def test_single_with_two_gpus():
    e = assert_rejected({"framework": "single", "gpus_per_node": 2}, "framework", "ddp", "fsdp", "deepspeed")
    assert "2" in str(e)
    assert reject({"framework": "single", "gpus_per_node": 1, "nodes": 2}).key == "framework"
    assert Plan.from_dict({"framework": "single", "gpus_per_node": 1}).world_size == 1


@pytest.mark.parametrize("stage", [0, 1])
def test_fsdp_needs_stage_2_or_3(stage):
    assert_rejected({"framework": "fsdp", "zero_stage": stage}, "zero_stage", "2", "3")


@pytest.mark.parametrize("framework,extra", [("ddp", {}), ("single", {"gpus_per_node": 1})])
@pytest.mark.parametrize("key", ["offload_optimizer", "offload_params"])
@pytest.mark.parametrize("device", ["cpu", "nvme"])
def test_offload_needs_deepspeed_or_fsdp(framework, extra, key, device):
    assert_rejected({"framework": framework, key: device, **extra}, key, "deepspeed", "fsdp")


@pytest.mark.parametrize("key", ["offload_optimizer", "offload_params"])
def test_fsdp_offloads_to_cpu_only(key):
    assert_rejected({"framework": "fsdp", "zero_stage": 3, key: "nvme"}, key, "cpu")
    assert getattr(Plan.from_dict({"framework": "fsdp", "zero_stage": 3, key: "cpu"}), key) == "cpu"


@pytest.mark.parametrize("device", ["cpu", "nvme"])
def test_deepspeed_stage0_cannot_offload_optimizer(device):
    assert_rejected({"zero_stage": 0, "offload_optimizer": device}, "offload_optimizer", "1-3")


def test_with_changes_revalidates():
    p = Plan()
    assert p.with_changes(zero_stage=3).zero_stage == 3
    with pytest.raises(PlanError) as ei:
        p.with_changes(micro_batch_size=0)
    assert ei.value.key == "micro_batch_size"
