"""torchtune's and LitGPT's whole runs (tools/memtrace/recipe_run.py: torchtune 0.6.1 / litgpt 0.5.13 on fake
tensors; fixtures tools/memtrace/golden/run/{tt,lit}-*-val.json), checked against the mechanisms written out by
hand. The engine's figures for the same fixtures are held within 3 % by tests/test_run_trace_grid.py (allocated
per phase, host bytes per save and eval).

All four run Llama 3.2 1B in bf16 at b 2, s 1024, V 128256: n = b·s·V = 262,668,288 logits, a validation of two
batches at the training batch after step 2, then the save.
"""
from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
V, B, S, L, H = 128256, 2, 1024, 16, 2048
N = B * S * V
P_TIED = 1_235_814_400                 # torchtune ties the embedding and the output
P_UNTIED = P_TIED + V * H              # LitGPT's Llama-3.2-1B config has its own lm_head
Q_DIM, KV_DIM = 32 * 64, 8 * 64
# LoRA r 16 on q, k, v, o, gate, up, down: r x (in + out) per matrix and layer
ADAPTERS = 16 * ((H + Q_DIM) + 2 * (H + KV_DIM) + (Q_DIM + H) + 3 * (H + 8192)) * L


def _fx(name):
    path = os.path.join(HERE, "..", "tools", "memtrace", "golden", "run", name + ".json")
    if not os.path.exists(path):
        pytest.skip(f"{name}.json not generated (make trace-run)")
    with open(path) as f:
        return json.load(f)


def test_adapter_count():
    assert ADAPTERS == 11_272_192


@pytest.mark.parametrize("name", ["tt-l1b-full-chunked-s1024-b2-val", "tt-l1b-lora-chunked-s1024-b2-val"])
def test_torchtune_validation_keeps_one_chunk_upcast(name):
    """torchtune's validate runs `_loss_step` under no_grad: the 8 bf16 output chunks (2n) and one chunk's fp32
    upcast and log_softmax (2 x 4n/8): 3n over the resident state, no saved upcasts (training's forward holds 6.5n)."""
    ev = _fx(name)["phases"]["eval"]
    excess = ev["peak_bytes"] - ev["start_bytes"]
    assert 3 * N <= excess <= 3 * N * 1.001
    assert ev["components"]["logits"] == 3 * N


def test_torchtune_full_save_permutes_q_and_k_on_the_device():
    """0.6.1's single-device save hands the device state dict to tune_to_hf: every q_proj (2048 x 2048) and k_proj
    (512 x 2048) is copied by `_permute` before the shard is written: 16 x 2048 x (2048 + 512) x 2 B on the device;
    the host holds the safetensors shard, 2 P_tied, and torch.save's largest storage (the 2 x V x h embedding moment)
    is smaller."""
    sv = _fx("tt-l1b-full-chunked-s1024-b2-val")["phases"]["save"]
    assert sv["peak_bytes"] - sv["start_bytes"] == 2 * L * H * (Q_DIM + KV_DIM) == 167_772_160
    assert sv["host_bytes"] == 2 * P_TIED


def test_torchtune_lora_save_merges_a_host_copy():
    """The LoRA recipe's save (save_adapter_weights_only False): the whole state dict `.cpu()`'d (2 P_tied + the
    adapters), merged in place, the adapters deleted from it, while the adapters' own `.to("cpu")` copies stay in
    the checkpoint dict; then save_file serialises the merged shard (2 P_tied) beside it. Nothing new on the device."""
    sv = _fx("tt-l1b-lora-chunked-s1024-b2-val")["phases"]["save"]
    assert sv["host_bytes"] == 2 * (2 * P_TIED) + 2 * ADAPTERS
    assert sv["peak_bytes"] - sv["start_bytes"] < 2**20


@pytest.mark.parametrize("name", ["lit-l1b-full-s1024-b2-val", "lit-l1b-lora-s1024-b2-val"])
def test_litgpt_validate_meets_the_loops_logits(name):
    """LitGPT's validate after step 2: the training loop's `logits` are still bound (2n in bf16; LoRA's list of
    lm_head chunks, its last one a shifted view), beside validate's own unchunked logits (2n), the shifted reshape
    copy and the bf16 log_softmax (2 x 2·b·(s-1)·V)."""
    ev = _fx(name)["phases"]["eval"]
    shifted = B * (S - 1) * V
    assert ev["components"]["logits"] == 2 * N + 2 * N + 2 * 2 * shifted


def test_litgpt_validate_at_batch_1_makes_no_shifted_copy():
    """At b 1, s 2048 the slice logits[..., :-1, :] of a contiguous (1, s, V) tensor is contiguous, so
    chunked_cross_entropy's reshape is a view: the loop's logits (2·s·V), validate's logits (2·s·V) and the bf16
    log_softmax (2·(s-1)·V) only."""
    ev = _fx("lit-l1b-lora-s2048-b1-val")["phases"]["eval"]
    assert ev["components"]["logits"] == 2 * 2048 * V + 2 * 2048 * V + 2 * 2047 * V


@pytest.mark.parametrize("name", ["lit-l1b-full-s1024-b2-val", "lit-l1b-lora-s1024-b2-val"])
def test_litgpt_init_holds_the_model_alone(name):
    """Before the first step no loop variable exists and AdamW's states are lazy: init = the loaded model."""
    ph = _fx(name)["phases"]
    assert ph["init"]["peak_bytes"] - ph["load"]["peak_bytes"] < 2**20
    assert ph["init"]["components"]["logits"] == 0


def test_litgpt_full_save_serialises_into_memory_twice():
    """fabric.save -> lightning `_atomic_save`: torch.save of the model (2 P_untied) and the bf16 AdamW moments
    (4 P_untied, + a 4 B step per parameter tensor) into a BytesIO, then `getvalue()` copies the buffer: twice."""
    sv = _fx("lit-l1b-full-s1024-b2-val")["phases"]["save"]
    one = 2 * P_UNTIED + 4 * P_UNTIED
    assert 2 * one <= sv["host_bytes"] <= 2 * one + 2 * 4 * 200
    assert sv["peak_bytes"] == sv["start_bytes"]


def test_litgpt_lora_save_copies_the_adapters():
    sv = _fx("lit-l1b-lora-s1024-b2-val")["phases"]["save"]
    assert sv["host_bytes"] == 2 * ADAPTERS


@pytest.mark.parametrize("name", ["lit-l1b-full-s1024-b2-val", "lit-l1b-lora-s1024-b2-val"])
def test_litgpt_generate_example_holds_a_batch_1_kv_cache(name):
    """generate_example after the validation: `set_kv_cache(batch_size=1)` over max_seq_length (k and v per layer,
    bf16: 2 x 16 x 8·64 x 1024 x 2 B), the bool mask cache (1024² B), and at the first sample the 32-token prompt's
    bf16 logits and the fp32 probabilities of the last position; the loop's training logits are still bound."""
    g = _fx(name)["phases"]["generate"]
    kv = 2 * L * KV_DIM * 1 * S * 2
    want = kv + S * S + 32 * V * 2 + 4 * V
    assert want <= g["peak_bytes"] - g["start_bytes"] <= want + 1024
    assert g["components"]["logits"] == 2 * N
