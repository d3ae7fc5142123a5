"""Property tests of the engine over random valid plans (hypothesis).

What must hold for every plan, whatever the model:
(a) every byte figure is a finite non-negative integer; the components add up to the nvidia-smi figure;
    allocated <= reserved <= device used;
(b) at a sharding stage (DeepSpeed ZeRO 1-3, FSDP) doubling the GPUs (W -> 2W, W >= 2) never raises
    per-GPU memory (1 -> 2 adds the NCCL buffers, a deliberate term, so W starts at 2);
(c) offloading the optimizer to the CPU (DeepSpeed ZeRO 1-3) never raises the peak allocated bytes;
(d) activation checkpointing (full or selective) never saves more than no checkpointing;
(e) fits == (device used <= capacity); min_gpus, when given, fits when the plan is re-estimated there.

The search is derandomized so CI is stable; ZEROCALC_PROPERTY_EXAMPLES=2000 runs a deeper random search.
Counterexamples found so far are pinned with @example on xfail(strict=True) tests and written up in
the xfail reasons below (each is DeepSpeed/bitsandbytes/autograd behaviour the engine models on purpose).
"""
from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from zerocalc import Plan, estimate
from zerocalc.memory.inputs import step_inputs
from zerocalc.plan import (ATTENTIONS, CHECKPOINTING, COMPUTE_DTYPES, LOSSES, METHODS, OPTIMIZERS, PRECISIONS,
                           QUANT_TYPES)

EXAMPLES = int(os.environ.get("ZEROCALC_PROPERTY_EXAMPLES", "200"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Small and medium presets (dense Llama-lineage, Gemma, Phi-3 fused, MoE, GPT-2/BERT/Falcon classic blocks)
PRESETS = ["qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b", "gemma-3-1b", "gemma-2-2b", "phi-3-mini-4k", "gpt2",
           "bert-base-uncased", "falcon-7b", "llama-3.1-8b", "qwen3-30b-a3b", "olmo-2-7b"]
CUSTOM_MODELS = [
    {"name": "tiny-llama", "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
     "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 32000},
    {"name": "tied-llama", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
     "intermediate_size": 1536, "vocab_size": 50000, "tie_word_embeddings": True},
    {"name": "tiny-moe", "model_type": "qwen3_moe", "hidden_size": 512, "num_hidden_layers": 4,
     "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1024,
     "moe_intermediate_size": 256, "num_experts": 16, "num_experts_per_tok": 4, "vocab_size": 32000},
    {"name": "tiny-gpt2", "model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 8000,
     "n_positions": 1024},
]
GPU_IDS = ["v100-sxm2-32gb", "t4", "a100-sxm4-40gb", "a100-sxm4-80gb", "a10g", "rtx-4090", "l40s", "h100-sxm-80gb",
           "h200-sxm-141gb", "b200", "mi300x", "gaudi2"]
CUSTOM_GPUS = [{"name": "24 GiB card", "memory_gib": 24}, {"name": "odd", "memory_gib": 11.5, "bf16_supported": False}]
TARGETS = [["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], ["q_proj", "v_proj"],
           ["q_proj", "k_proj", "v_proj", "o_proj", "lm_head"], ["c_attn", "c_proj", "query", "value"]]
WORLDS = [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (4, 4), (8, 16)]


def models():
    return st.sampled_from(PRESETS) | st.sampled_from(CUSTOM_MODELS)


def gpus():
    return st.sampled_from(GPU_IDS) | st.sampled_from(CUSTOM_GPUS)


def knobs():
    return st.fixed_dictionaries({}, optional={
        "reduce_bucket_size": st.sampled_from(["auto", 50_000_000, 200_000_000, 500_000_000]),
        "overlap_comm": st.booleans(),
        "contiguous_gradients": st.booleans(),
        "stage3_prefetch_bucket_size": st.sampled_from(["auto", 0, 50_000_000]),
        "stage3_param_persistence_threshold": st.sampled_from(["auto", 0, 100_000, 10_000_000]),
        "stage3_max_live_parameters": st.sampled_from([100_000_000, 1_000_000_000]),
        "stage3_max_reuse_distance": st.sampled_from([0, 1_000_000_000]),
        "sub_group_size": st.sampled_from([100_000_000, 1_000_000_000]),
        "zero_init": st.booleans(),
    })


@st.composite
def plans(draw, frameworks=("deepspeed", "fsdp", "ddp", "single"), stages=(0, 1, 2, 3), worlds=WORLDS) -> dict:
    """A plan-v1 dict that obeys the plan's consistency rules (plan.py _check_consistency)."""
    framework = draw(st.sampled_from(frameworks))
    if framework == "single":
        gpn, nodes = 1, 1
    else:
        gpn, nodes = draw(st.sampled_from(worlds))
    if framework == "fsdp":
        stage = draw(st.sampled_from([s for s in stages if s in (2, 3)]))
    else:
        stage = draw(st.sampled_from(stages))
    off_opt = off_par = "none"
    if framework == "deepspeed":
        if stage >= 1:
            off_opt = draw(st.sampled_from(["none", "none", "cpu", "nvme"]))
        if stage == 3:
            off_par = draw(st.sampled_from(["none", "none", "cpu", "nvme"]))
    elif framework == "fsdp":
        off_opt = draw(st.sampled_from(["none", "none", "cpu"]))
        off_par = draw(st.sampled_from(["none", off_opt]))
    method = draw(st.sampled_from(METHODS))
    d = {
        "model": draw(models()),
        "gpu": draw(gpus()),
        "gpus_per_node": gpn,
        "nodes": nodes,
        "framework": framework,
        "zero_stage": stage,
        "offload_optimizer": off_opt,
        "offload_params": off_par,
        "precision": draw(st.sampled_from(PRECISIONS)),
        "optimizer": draw(st.sampled_from(OPTIMIZERS)),
        "micro_batch_size": draw(st.integers(1, 8)),
        "gradient_accumulation_steps": draw(st.sampled_from([1, 1, 2, 4, 8])),
        "seq_len": draw(st.integers(128, 8192)),
        "activation_checkpointing": draw(st.sampled_from(CHECKPOINTING)),
        "activation_offloading": draw(st.booleans()),
        "attention": draw(st.sampled_from(ATTENTIONS)),
        "loss": draw(st.sampled_from(LOSSES)),
        "optimizer_in_backward": framework == "single" and draw(st.booleans()),
        "method": method,
        "deepspeed": draw(knobs()) if framework == "deepspeed" else {},
        "lora": {"rank": draw(st.sampled_from([1, 4, 8, 16, 64, 256])), "alpha": 16,
                 "dropout": draw(st.sampled_from([0.0, 0.05, 0.1])), "targets": draw(st.sampled_from(TARGETS))},
        "quantization": {"type": draw(st.sampled_from(QUANT_TYPES)), "double_quant": draw(st.booleans()),
                         "compute_dtype": draw(st.sampled_from(COMPUTE_DTYPES))},
    }
    d["stack"] = draw(stacks(d))
    if d["activation_checkpointing"] == "selective-op" and d["stack"]["trainer"] != "torchtitan":
        d["activation_checkpointing"] = "full"
    if d["quantization"]["type"] == "gptq" and (d["stack"]["trainer"] in ("torchtune", "litgpt", "torchtitan")
                                                or d["precision"] == "fp32"):
        d["quantization"]["type"] = "nf4"
    Plan.from_dict(d)          # the strategy must only produce valid plans
    return d


@st.composite
def stacks(draw, d):
    """A software stack the plan's framework and method can run (stack.py refuses the others)."""
    trainers = ["hf-trainer", "custom-loop"]
    if d["framework"] in ("single", "fsdp"):
        trainers += ["torchtune", "litgpt"] + (["torchtitan"] if d["method"] == "full" else [])
    trainer = draw(st.sampled_from(trainers))
    own = trainer in ("torchtune", "litgpt", "torchtitan")
    out = {"trainer": trainer, "transformers": "5" if own else draw(st.sampled_from(["5", "4.46", "4.45"])),
           "peft_adapter_dtype": draw(st.sampled_from(["auto", "fp32", "base"])),
           "kbit_prepare": draw(st.sampled_from(["auto", True, False, "trl-bf16"])),
           "bitsandbytes": "current" if trainer in ("torchtune", "torchtitan") else
           draw(st.sampled_from(["current", "0.42"])),
           "compile": draw(st.sampled_from(["none", "model", "model+loss"])),
           "cuda_context": draw(st.sampled_from(["lazy", "eager"]))}
    if d["optimizer"] == "adamw" and d["framework"] != "deepspeed":
        out["optimizer_impl"] = draw(st.sampled_from(["auto", "fused", "foreach", "single-tensor"]))
    if d["framework"] == "fsdp":
        out["fsdp_version"] = draw(st.sampled_from([1, 2]))
    return out


def est_dict(d: dict) -> dict:
    return estimate(Plan.from_dict(d)).to_dict()


def byte_figures(out: dict) -> dict[str, int]:
    """Every byte count of the estimate: keys ending in _bytes and the per-term maps."""
    pg = out["per_gpu"]
    figs = {f"per_gpu.{k}": v for k, v in pg.items() if k.endswith("_bytes")}
    figs["per_gpu.host_bytes"] = pg["host_bytes"]
    for section in ("components", "phases", "detail", "deepspeed_buffers", "host_detail"):
        figs.update({f"per_gpu.{section}.{k}": v for k, v in pg[section].items()})
    figs.update({k: v for k, v in out.items() if k.endswith("_bytes") and k != "headroom_bytes"})
    figs["gpu.capacity_bytes"] = out["gpu"]["capacity_bytes"]
    return figs


# --- (a) byte figures are sane and add up ------------------------------------------------------------------


@SETTINGS
@given(plans())
def test_byte_figures_are_non_negative_ints_and_add_up(d):
    out = est_dict(d)
    for name, v in byte_figures(out).items():
        assert type(v) is int, (name, v)
        assert v >= 0 and math.isfinite(v), (name, v)
    pg = out["per_gpu"]
    assert sum(pg["components"].values()) == pg["device_used_bytes"]
    assert pg["peak_allocated_bytes"] <= pg["peak_reserved_bytes"] <= pg["device_used_bytes"]
    # the peak is the largest phase, and it is the one named
    assert pg["peak_allocated_bytes"] == max(pg["phases"].values()) == pg["phases"][pg["peak_phase"]]
    assert out["headroom_bytes"] == pg["capacity_bytes"] - pg["device_used_bytes"]
    for k in ("tokens_per_step", "global_batch_size", "trainable_params", "total_params"):
        assert type(out[k]) is int and out[k] >= 0, k
    assert out["global_batch_size"] == d["micro_batch_size"] * d["gradient_accumulation_steps"] * \
        d["gpus_per_node"] * d["nodes"]
    assert out["tokens_per_step"] == out["global_batch_size"] * d["seq_len"]
    assert out["trainable_params"] <= out["total_params"]


# --- (b) more GPUs never raise per-GPU memory at a sharding stage --------------------------------------------


def doubled(d: dict, via_nodes: bool) -> dict:
    if via_nodes or d["gpus_per_node"] * 2 > 64:
        return {**d, "nodes": d["nodes"] * 2}
    return {**d, "gpus_per_node": d["gpus_per_node"] * 2}


# bitsandbytes keeps 32-bit states for tensors under min_8bit_size = 4096 elements
# (bitsandbytes/optim/optimizer.py); at ZeRO-1/2 the optimizer sees one flat partition per rank, so when
# doubling the GPUs shrinks the partition below 4096 elements its states grow from ~2 to 8 bytes per element.
# The most that can add is 32-bit states for a whole sub-4096 partition: 2 x 4 x 4096 bytes.
BNB_THRESHOLD_ALLOWANCE = 2 * 4 * 4096
EIGHT_BIT = ("adamw-8bit", "paged-adamw-8bit")

# Counterexample found by hypothesis ("doubling GPUs"): LoRA rank 1 adapters,
# ZeRO-1, 16 -> 32 GPUs, adamw-8bit: per-GPU peak allocated rises by 4,552 bytes.
DOUBLING_8BIT_COUNTEREXAMPLE = {
    "model": {"name": "tied-llama", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
              "intermediate_size": 1536, "vocab_size": 50000, "tie_word_embeddings": True},
    "gpu": "v100-sxm2-32gb", "gpus_per_node": 8, "nodes": 2, "framework": "deepspeed", "zero_stage": 1,
    "precision": "bf16-pure", "optimizer": "adamw-8bit", "micro_batch_size": 1, "gradient_accumulation_steps": 1,
    "seq_len": 128, "method": "lora",
    "lora": {"rank": 1, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "lm_head"]},
}


def _doubling_increase(d: dict, via_nodes: bool) -> dict[str, int]:
    w, w2 = est_dict(d), est_dict(doubled(d, via_nodes))
    note(f"W: phases {w['per_gpu']['phases']} detail {w['per_gpu']['detail']}")
    note(f"2W: phases {w2['per_gpu']['phases']} detail {w2['per_gpu']['detail']}")
    rise = {k: w2["per_gpu"][k] - w["per_gpu"][k]
            for k in ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")}
    # paged optimizer states: with more room more of them stay resident, so compare the demand
    # (resident + paged out to the host), which is what shrinks
    rise["device_used_bytes"] += (w2["per_gpu"]["host_detail"].get("paged_evicted", 0)
                                  - w["per_gpu"]["host_detail"].get("paged_evicted", 0))
    return rise


@SETTINGS
@given(plans(frameworks=("deepspeed", "fsdp"), stages=(1, 2, 3), worlds=[w for w in WORLDS if w[0] * w[1] >= 2]),
       st.booleans())
def test_doubling_gpus_never_raises_per_gpu_memory(d, via_nodes):
    """Strictly for every optimizer but bitsandbytes 8-bit; within the documented 4096-element
    threshold effect for those (the strict form is the xfail test below)."""
    allowance = BNB_THRESHOLD_ALLOWANCE if d["optimizer"] in EIGHT_BIT else 0
    rise = _doubling_increase(d, via_nodes)
    assert rise["peak_allocated_bytes"] <= allowance, rise
    # reserved = allocated + 6 % allocator cache (memory/runtime.py), device used adds fixed terms
    assert rise["peak_reserved_bytes"] <= allowance + allowance * 6 // 100 + 1, rise
    assert rise["device_used_bytes"] <= allowance + allowance * 6 // 100 + 1, rise


@pytest.mark.xfail(strict=True, reason="bitsandbytes min_8bit_size: a ZeRO-1/2 partition shrinking below 4096 "
                   "elements switches its Adam states from 8-bit to 32-bit, so 2W GPUs can hold a few KiB more "
                   "than W: real bitsandbytes behaviour, kept in the model")
@SETTINGS
@example(DOUBLING_8BIT_COUNTEREXAMPLE, False)
@given(plans(frameworks=("deepspeed", "fsdp"), stages=(1, 2, 3), worlds=[w for w in WORLDS if w[0] * w[1] >= 2]),
       st.booleans())
def test_doubling_gpus_never_raises_per_gpu_memory_strict(d, via_nodes):
    rise = _doubling_increase(d, via_nodes)
    assert max(rise.values()) <= 0, rise


@SETTINGS
@given(plans(), st.sampled_from([("adamw-8bit", "paged-adamw-8bit"), ("paged-adamw-32bit", "paged-adamw-32bit")]))
def test_paged_states_never_cause_an_out_of_memory(d, pair):
    """CUDA managed memory is paged out to the host when the GPU is full: a paged optimizer fits
    whenever the same states inside the allocator would, and never shows more than the GPU holds."""
    unpaged, paged = (est_dict({**d, "optimizer": o}) for o in pair)
    pg = paged["per_gpu"]
    if unpaged["fits"]:
        assert paged["fits"]
    if paged["fits"]:
        assert pg["device_used_bytes"] <= pg["capacity_bytes"]
    assert pg["peak_allocated_bytes"] <= unpaged["per_gpu"]["peak_allocated_bytes"]


# --- (c) optimizer offload never raises the peak allocated bytes ----------------------------------------------


# Counterexample ("optimizer offload"): Gemma 2 2B, ZeRO-2, 32 GPUs, gas 1.
# With the optimizer on the CPU, DeepSpeed still allocates on each GPU a 16-bit staging buffer of the largest
# parameter (stage_1_and_2.py temp_grad_buffer_for_gpu_offload: the 256k x 2304 embedding, 1.18 GB), more
# than the 1/32 partition of master weights and Adam states it moves off the GPU.
OFFLOAD_COUNTEREXAMPLE = {
    "model": "gemma-2-2b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "nodes": 4, "framework": "deepspeed",
    "zero_stage": 2, "optimizer": "adamw", "micro_batch_size": 1, "gradient_accumulation_steps": 1,
    "seq_len": 1024, "activation_checkpointing": "full",
}


def _offload_pair(d: dict) -> tuple[dict, dict]:
    on_gpu = est_dict({**d, "offload_optimizer": "none"})
    offloaded = est_dict({**d, "offload_optimizer": "cpu"})
    note(f"none: phases {on_gpu['per_gpu']['phases']} detail {on_gpu['per_gpu']['detail']}")
    note(f"cpu:  phases {offloaded['per_gpu']['phases']} detail {offloaded['per_gpu']['detail']}")
    return on_gpu, offloaded


@pytest.mark.xfail(strict=True, reason="ZeRO-Offload keeps a GPU staging buffer of the largest parameter "
                   "(and an fp64 norm copy at ZeRO-1/2): with many GPUs and a large embedding it outweighs the "
                   "partition it offloads: real DeepSpeed behaviour (stage_1_and_2.py offload buffers), kept in the model")
@SETTINGS
@example(OFFLOAD_COUNTEREXAMPLE)
@given(plans(frameworks=("deepspeed",), stages=(1, 2, 3)))
def test_cpu_optimizer_offload_never_raises_peak_allocated(d):
    on_gpu, offloaded = _offload_pair(d)
    assert offloaded["per_gpu"]["peak_allocated_bytes"] <= on_gpu["per_gpu"]["peak_allocated_bytes"]


@SETTINGS
@example(OFFLOAD_COUNTEREXAMPLE)
@given(plans(frameworks=("deepspeed",), stages=(1, 2, 3)))
def test_cpu_optimizer_offload_adds_at_most_its_own_gpu_buffers(d):
    """What offload puts on the GPU is bounded by its own staging buffers: every other term only shrinks."""
    on_gpu, offloaded = _offload_pair(d)
    bufs = offloaded["per_gpu"]["deepspeed_buffers"]
    # GPU buffers only the offload plan has (staging buffer, grad clones, fp32 slices, ...)
    before = on_gpu["per_gpu"]["deepspeed_buffers"]
    own = sum(v for k, v in bufs.items() if not k.startswith("host.") and k not in before)
    # fp64 norm copies exist with and without offload; count the part offload adds
    own += max(0, bufs.get("fp64_norm_copy", 0) - before.get("fp64_norm_copy", 0))
    base = on_gpu["per_gpu"]["peak_allocated_bytes"]
    if d["optimizer"].startswith("paged"):
        # paged states are outside the allocator on the GPU, so offloading them frees no allocated bytes
        base += on_gpu["per_gpu"]["detail"].get("optimizer_states", 0)
    assert offloaded["per_gpu"]["peak_allocated_bytes"] <= base + own
    # and the optimizer states and fp32 master weights leave the GPU
    for k in ("fp32_master", "optimizer_states"):
        assert bufs.get(k, 0) == 0, k
        assert offloaded["per_gpu"]["detail"].get(k, 0) == 0, k
    assert offloaded["per_gpu"]["components"]["optimizer_states"] == 0 or d["method"] != "full"
    if offloaded["trainable_params"] > 0:   # LoRA targets that match no module train nothing
        assert offloaded["per_gpu"]["host_bytes"] > 0


@SETTINGS
@given(plans(frameworks=("deepspeed",), stages=(1, 2, 3), worlds=[(1, 1), (2, 1), (4, 1), (8, 1)]))
def test_cpu_optimizer_offload_helps_full_finetuning_with_adam_on_one_node(d):
    # Up to 8 GPUs the offloaded partition (fp32 master + two Adam states: 12 bytes x P/8 or more) is at
    # least 1.5 P bytes, more than the largest-parameter staging buffer (2 bytes x at most P/2 for these
    # models) plus, at ZeRO-1/2, its fp64 norm copy
    d = {**d, "method": "full", "optimizer": "adamw", "precision": "bf16-mixed"}
    on_gpu, offloaded = _offload_pair(d)
    assert offloaded["per_gpu"]["peak_allocated_bytes"] <= on_gpu["per_gpu"]["peak_allocated_bytes"]


# --- (d) checkpointing never saves more ------------------------------------------------------------------------


@SETTINGS
@given(plans(), st.sampled_from(["full", "selective"]))
def test_checkpointing_never_saves_more_activations(d, mode):
    none = estimate(Plan.from_dict({**d, "activation_checkpointing": "none"}))
    ckpt = estimate(Plan.from_dict({**d, "activation_checkpointing": mode}))
    # what autograd keeps from forward to backward (memory/activations.py)
    a_none, a_ckpt = step_inputs(none.plan).acts, step_inputs(ckpt.plan).acts
    assert a_ckpt.saved_total <= a_none.saved_total
    assert a_ckpt.stack_saved <= a_none.stack_saved
    # and the saved set as the estimate shows it at the end of forward
    f_none = none.per_gpu.phase_allocated["fwd"]
    f_ckpt = ckpt.per_gpu.phase_allocated["fwd"]
    assert f_ckpt <= f_none


# Counterexample ("checkpointing at the peak"): a small model whose step without
# checkpointing peaks at the end of backward (no activation left); with full checkpointing the peak becomes the
# recompute of the first layer on top of the same end-of-backward state, so the activations *at the peak* go
# from 0 to one layer's worth (the none case models no backward temporaries for its last layer).
CHECKPOINT_PEAK_COUNTEREXAMPLE = {
    "model": "qwen2.5-0.5b", "framework": "single", "gpus_per_node": 1, "seq_len": 128, "micro_batch_size": 1,
    "optimizer": "adamw", "method": "full", "gradient_accumulation_steps": 1,
}


@pytest.mark.xfail(strict=True, reason="with full checkpointing the recompute phase (end-of-backward state + one "
                   "recomputed layer) can be the peak where no checkpointing peaks at bwd_end with no activations; "
                   "the saved-activation property holds (test above); the peak one does not, by design")
@SETTINGS
@example(CHECKPOINT_PEAK_COUNTEREXAMPLE, "full")
@given(plans(), st.sampled_from(["full", "selective"]))
def test_checkpointing_never_raises_activations_at_the_peak(d, mode):
    none = est_dict({**d, "activation_checkpointing": "none"})["per_gpu"]
    ckpt = est_dict({**d, "activation_checkpointing": mode})["per_gpu"]
    note(f"none: {none['peak_phase']} {none['phases']} {none['detail']}")
    note(f"{mode}: {ckpt['peak_phase']} {ckpt['phases']} {ckpt['detail']}")
    assert ckpt["components"]["activations"] <= none["components"]["activations"]
    assert ckpt["peak_allocated_bytes"] <= none["peak_allocated_bytes"]


@SETTINGS
@given(plans())
def test_full_checkpointing_keeps_one_input_per_layer(d):
    # HF gradient_checkpointing keeps each decoder layer's input: layers x tokens x hidden x residual bytes,
    # which is never more than what the layers save without it
    full = estimate(Plan.from_dict({**d, "activation_checkpointing": "full", "activation_offloading": False}))
    arch = full.arch
    tokens = d["seq_len"] * d["micro_batch_size"]
    llama_like = arch.family in ("llama", "gemma", "t5")
    # GPT-2 and BERT also keep the embedding output (their embedding dropout / LayerNorm makes a new tensor beside
    # layer 0's input); Falcon's embedding output is layer 0's input (traced:
    # tools/memtrace/golden/families/falcon-full-pure-flash-gc-s1024-b2)
    inputs = arch.num_layers + (1 if arch.model_type in ("gpt2", "bert") else 0)
    extra = 0
    if d["attention"] == "eager":
        # the 4-D (b, 1, s, s) mask is a checkpoint input too: bool in the Llama lineage (two for Gemma's
        # sliding/global layers), additive 16-bit in GPT-2/BERT (traced)
        extra = (2 if arch.family == "gemma" else 1) * (1 if llama_like else 2) * d["seq_len"] ** 2 * d["micro_batch_size"]
    acts = step_inputs(full.plan).acts
    # bitsandbytes < 0.43.2 under non-reentrant checkpointing keeps every 4-bit layer's input beside the layer
    # inputs (ctx.tensors; 0 when reentrant or bitsandbytes is current)
    stack = acts.stack_saved - extra - acts.quant_inputs
    if (d["method"] == "qlora" and d["stack"].get("kbit_prepare") == "trl-bf16" and d["precision"].startswith("bf16")
            and not (d["framework"] == "fsdp" and d["precision"] == "bf16-mixed")):
        # TRL's bf16 embedding: layer 0's input 2 B, the others' fp32 (FSDP's bf16 MixedPrecision: all 16-bit)
        stack += 2 * tokens * arch.hidden_size
    per_elem = stack // (inputs * tokens * arch.hidden_size)
    assert stack == inputs * tokens * arch.hidden_size * per_elem
    assert per_elem in (2, 4)


# --- (e) verdicts ----------------------------------------------------------------------------------------------


def at_world(d: dict, gpus: int) -> dict:
    """The plan at `gpus` GPUs the way min_gpus counts them: first more GPUs per node, then more nodes."""
    gpn = d["gpus_per_node"]
    if gpus <= gpn:
        return {**d, "gpus_per_node": gpus, "nodes": 1}
    assert gpus % gpn == 0, (gpus, gpn)
    return {**d, "nodes": gpus // gpn}


@SETTINGS
@given(plans())
def test_run_fits_agrees_with_the_run_peaks(d):
    """run_fits (the min_gpus probes' shortcut) says what run_peaks(...).fits says, at the plan's own layout
    and on one GPU, without building the phases' figures."""
    from zerocalc.estimate import step_inputs_for, whole_run
    from zerocalc.post import post_phases
    from zerocalc.run import run_fits
    for dd in (d, at_world(d, 1)):
        p = Plan.from_dict(dd)
        pg, view, run = whole_run(p, step_inputs_for(p), p.gpu_spec)
        assert run_fits(view, pg.device_used, post_phases(view, None)) == run.fits, dd


@SETTINGS
@given(plans())
def test_fits_and_min_gpus(d):
    out = est_dict(d)
    pg = out["per_gpu"]
    assert out["fits"] == out["run"]["fits"] == (out["run"]["device_used_bytes"] <= pg["capacity_bytes"])
    assert out["run"]["fits"] <= (pg["device_used_bytes"] <= pg["capacity_bytes"])     # the step is a phase
    world = d["gpus_per_node"] * d["nodes"]
    m = out["min_gpus"]
    if out["fits"]:
        assert m is not None and 1 <= m <= world, (m, world)
    if m is None:
        return
    if d["framework"] == "single":
        assert m == 1
        return
    re = est_dict(at_world(d, m))
    note(f"min_gpus {m}: device_used {re['per_gpu']['device_used_bytes']} capacity {pg['capacity_bytes']}")
    assert re["fits"], m
    if d["framework"] in ("deepspeed", "fsdp") and d["zero_stage"] >= 1 and 1 < m <= d["gpus_per_node"]:
        # below it, within the node, it does not fit
        assert not est_dict(at_world(d, m - 1))["fits"], m
