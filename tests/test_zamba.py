"""Zamba 2's shared transformer block (model/zamba.py), counted by hand from modeling_zamba2.py.

Default Zamba2Config: h = 2560, 54 layers of which 9 hybrid, one shared block (num_mem_blocks = 1), attention over
2h = 5120 with 32 heads of 160, MLP of 4h = 10240, adapter_rank 128, no attention adapters.
  shared block: q, k, v 3 * 5120*5120 = 78,643,200; o 5120*2560 = 13,107,200; gate_up 2560*20480 = 52,428,800;
                down 10240*2560 = 26,214,400; norms 5120 + 2560 = 7,680;
                9 gate_up adapters 9 * (2560*128 + 128*20480) = 26,542,080          -> 196,943,360
The block is tied across the hybrid layers only when tie_word_embeddings is on
(PreTrainedModel.get_expanded_tied_weights_keys returns nothing otherwise): untied, each of the 9 hybrid layers
keeps its own copy, and the lm_head (32000 x 2560 = 81,920,000) is a matrix of its own.
"""
from __future__ import annotations

import json
from pathlib import Path

from zerocalc.model import model_from_config

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}


def test_zamba2_shared_block_counted_once_when_tied_else_per_hybrid_layer():
    cfg = ROWS["default:zamba2"]["config"]
    block = 3 * 5120 * 5120 + 5120 * 2560 + 2560 * 20480 + 10240 * 2560 + 5120 + 2560 + 9 * (2560 * 128 + 128 * 20480)
    assert block == 196_943_360
    tied = model_from_config(cfg).total_params
    assert tied == ROWS["default:zamba2"]["hf_params"]
    untied = model_from_config({**cfg, "tie_word_embeddings": False}).total_params
    assert untied - tied == 8 * block + 32000 * 2560
