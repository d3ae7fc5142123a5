"""The one-off grid: small configs of causal-LM types whose block is their own (issue 20, item 3), traced on
FakeTensors as tools/memtrace/families.py traces the families. The fixtures (tools/memtrace/golden/oneoff/<id>.json:
the plan, the component bytes at the peak, the saved activations at forward end) are what
tests/test_oneoff_grid.py holds the engine to, within 3 %, without torch.

- hrm_text (modeling_hrm_text.py HrmTextForCausalLM): two stacks of 2 layers, H_cycles 2, L_cycles 2 with
  L_bp_cycles [1] (the first L pass of each high cycle runs under torch.no_grad), 4 heads of 128, the sigmoid
  attention gate, weightless RMSNorms: 2 x (1 + 1) x 2 = 8 layer calls keep their graph.
- dory (modeling_dory.py DoryForCausalLM): 4 nGPT layers (1 input, 2 recurrent run twice, 1 output: 6 layer
  calls), sliding (window 256) and full attention alternating, 4 heads of 128 with 2 KV heads, the L2 norms,
  learned scales and the fp32 logit scale.

Each gets a full bf16 row with FlashAttention-2's profile, a bf16-mixed LoRA row with adapter dropout, an
fp32-weight autocast row with eager attention and a full bf16 row with gradient checkpointing.

    python -m tools.memtrace.oneoff            # trace all rows and (re)write the fixtures (make trace-oneoff)
    python -m tools.memtrace.oneoff hrm_text-  # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import GPU, run_grid, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "oneoff")

CONFIGS = {
    "hrm_text": {"model_type": "hrm_text", "hidden_size": 512, "intermediate_size": 1536, "num_attention_heads": 4,
                 "head_dim": 128, "num_layers_per_stack": 2, "H_cycles": 2, "L_cycles": 2, "L_bp_cycles": [1],
                 "vocab_size": 32000, "max_position_embeddings": 2048, "attention_dropout": 0.0,
                 "tie_word_embeddings": False},
    "dory": {"model_type": "dory", "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 4, "n_input_layers": 1,
             "n_output_layers": 1, "n_recurrent_loops": 2, "vocab_size": 32000, "max_position_embeddings": 4096,
             "sliding_window": 256,
             "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
             "attention_dropout": 0.0, "tie_word_embeddings": False},
}
TARGETS = {fam: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] for fam in CONFIGS}


# what every row shares; each row adds (id suffix, method, precision, attention, micro-batch, seq_len, checkpointing)
BASE = {"schema": 1, "gpu": GPU, "framework": "single", "gpus_per_node": 1, "nodes": 1, "zero_stage": 0,
        "optimizer": "adamw", "gradient_accumulation_steps": 1, "loss": "standard"}
ROWS = (("full-pure-flash-s512-b2", "full", "bf16-pure", "flash", 2, 512, "none"),
        ("lora-mixed-flash-s1024-b2", "lora", "bf16-mixed", "flash", 2, 1024, "none"),
        ("full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 2, 256, "none"),
        ("full-pure-flash-gc-s1024-b2", "full", "bf16-pure", "flash", 2, 1024, "full"))
KEYS = ("method", "precision", "attention", "micro_batch_size", "seq_len", "activation_checkpointing")


def rows() -> list[dict]:
    out = []
    for fam, cfg in CONFIGS.items():
        for suffix, *spec in ROWS:
            row = {"id": f"{fam}-{suffix}", **BASE, "model": dict(cfg), **dict(zip(KEYS, spec))}
            if row["method"] == "lora":
                row["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.05, "targets": TARGETS[fam]}
            out.append(row)
    return out


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=1), OUT)
