"""The BART-lineage causal decoders (issue 20, item 3): BartForCausalLM and its siblings (MBart, Marian, Pegasus
...ForCausalLM), which the engine counts as the decoder cut from the encoder-decoder (model/decoders.py), their
real transformers 5.24 training step traced on FakeTensors as AutoModelForCausalLM (plan.py is_encoder_decoder is
false for these). The fixtures (tools/memtrace/golden/bart/<id>.json, families.py's layout) are what
tests/test_bart_grid.py holds the engine to (memory/blocks_bart.py).

The layer switches these four cover (modeling_<x>.py *DecoderLayer / *Decoder):
- bart (facebook/bart-base): post-LayerNorm (`residual + x` then the norm), layernorm_embedding, learned positions
  with offset 2, GELU, dropout 0.1;
- mbart (facebook/mbart-large-cc25): pre-LayerNorm, layernorm_embedding and a final layer_norm, scaled embedding;
- marian (Helsinki-NLP/opus-mt-en-de): post-LayerNorm, sinusoidal table, swish, scaled embedding, no embedding norm;
- pegasus (google/pegasus-large): pre-LayerNorm, sinusoidal table, ReLU, final layer_norm, activation and attention
  dropout 0.1.
Each is 4 layers at a small width, rows as families.py's: full bf16 with FA2's profile, LoRA bf16-mixed at s 1024
(adapter dropout), full bf16-mixed eager, full bf16 with checkpointing and LoRA bf16-mixed eager with
checkpointing; the config's dropouts as shipped.

    python -m tools.memtrace.bart            # trace all rows and (re)write the fixtures (make trace-bart)
    python -m tools.memtrace.bart pegasus-   # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import GPU, run_grid, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "bart")

_COMMON = {"encoder_layers": 4, "decoder_layers": 4, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
           "max_position_embeddings": 1024, "pad_token_id": 1, "tie_word_embeddings": True}
CONFIGS = {
    "bart": {"model_type": "bart", **_COMMON, "d_model": 768, "encoder_attention_heads": 12,
             "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "vocab_size": 50265,
             "activation_function": "gelu", "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
             "scale_embedding": False},
    "mbart": {"model_type": "mbart", **_COMMON, "d_model": 1024, "encoder_attention_heads": 16,
              "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "vocab_size": 32000,
              "activation_function": "gelu", "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
              "scale_embedding": True},
    "marian": {"model_type": "marian", **_COMMON, "d_model": 512, "encoder_attention_heads": 8,
               "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048, "vocab_size": 58101,
               "decoder_vocab_size": 58101, "activation_function": "swish", "dropout": 0.1,
               "attention_dropout": 0.0, "activation_dropout": 0.0, "scale_embedding": True, "pad_token_id": 58100},
    "pegasus": {"model_type": "pegasus", **_COMMON, "d_model": 1024, "encoder_attention_heads": 16,
                "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
                "vocab_size": 96103, "activation_function": "relu", "dropout": 0.1, "attention_dropout": 0.1,
                "activation_dropout": 0.1, "scale_embedding": True, "pad_token_id": 0},
}
TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]


def _plan(fam: str, method: str, precision: str, attention: str, mb: int, seq: int, ckpt: str = "none") -> dict:
    d = {"schema": 1, "model": dict(CONFIGS[fam]), "gpu": GPU, "framework": "single", "gpus_per_node": 1,
         "nodes": 1, "zero_stage": 0, "precision": precision, "optimizer": "adamw", "micro_batch_size": mb,
         "gradient_accumulation_steps": 1, "seq_len": seq, "activation_checkpointing": ckpt,
         "attention": attention, "loss": "standard", "method": method}
    if method == "lora":
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.05, "targets": TARGETS}
    return d


# (id suffix, method, precision, attention, micro-batch, seq_len, checkpointing): families.py's four rows and
# LoRA under checkpointing (PEFT's enable_input_require_grads: the embedding output needs a gradient)
ROWS = (("full-pure-flash-s512-b2", "full", "bf16-pure", "flash", 2, 512, "none"),
        ("lora-mixed-flash-s1024-b2", "lora", "bf16-mixed", "flash", 2, 1024, "none"),
        ("full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 2, 256, "none"),
        ("full-pure-flash-gc-s1024-b2", "full", "bf16-pure", "flash", 2, 1024, "full"),
        ("lora-mixed-eager-gc-s256-b2", "lora", "bf16-mixed", "eager", 2, 256, "full"))


def rows() -> list[dict]:
    return [{"id": f"{fam}-{suffix}", **_plan(fam, *spec)} for fam in CONFIGS for suffix, *spec in ROWS]


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=1), OUT)
