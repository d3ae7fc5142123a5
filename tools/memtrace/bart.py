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
Traced beside them (MORE): whisper, biogpt, xglm, blenderbot, blenderbot-small, plbart, mvp and trocr, each a shipped
checkpoint's switches (BioGPT and XGLM decoder-only with scaled embeddings, Whisper's decoder as WhisperForCausalLM,
Blenderbot pre-LN, Blenderbot-Small post-LN); XGLM, MVP and TrOCR run their own eager attention (OWN_ATTENTION).
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
def _bart(model_type: str, d: int, heads: int, ffn: int, vocab: int, drops: tuple, scale: bool, **extra) -> dict:
    """A BART-config layout (configuration_bart.py's field names) over _COMMON: both stacks' widths alike, GELU,
    `drops` = (dropout, attention_dropout, activation_dropout)."""
    return {"model_type": model_type, **_COMMON, "d_model": d, "encoder_attention_heads": heads,
            "decoder_attention_heads": heads, "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "vocab_size": vocab,
            "activation_function": "gelu", "dropout": drops[0], "attention_dropout": drops[1],
            "activation_dropout": drops[2], "scale_embedding": scale, **extra}


# the BART-layer decoders traced beside those four (issue 20): each a shipped checkpoint's layer switches at 4
# layers, its positions table long enough for s 1024 (blenderbot's 128 and whisper's 448 rows are the shipped
# lengths; the layer does not depend on them), vocabularies as shipped except XGLM's 256008 (32000 here)
MORE = {
    # openai/whisper-base's decoder (WhisperForCausalLM: modeling_whisper.py WhisperDecoder, pre-LN, GELU, learned
    # positions, final layer_norm, no embed scale), dropouts 0 as shipped
    "whisper": {"model_type": "whisper", "d_model": 512, "encoder_layers": 4, "decoder_layers": 4,
                "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
                "decoder_ffn_dim": 2048, "vocab_size": 51865, "max_target_positions": 1024,
                "max_source_positions": 1500, "num_mel_bins": 80, "activation_function": "gelu", "dropout": 0.0,
                "attention_dropout": 0.0, "activation_dropout": 0.0, "encoder_layerdrop": 0.0,
                "decoder_layerdrop": 0.0, "scale_embedding": False, "pad_token_id": 50257,
                "decoder_start_token_id": 50258, "tie_word_embeddings": True},
    # microsoft/biogpt's layout (modeling_biogpt.py BioGptDecoderLayer: pre-LN, GELU, scaled embedding, learned
    # positions offset 2, final layer_norm), hidden_dropout_prob / attention_probs_dropout_prob 0.1 as shipped
    "biogpt": {"model_type": "biogpt", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
               "intermediate_size": 4096, "vocab_size": 42384, "max_position_embeddings": 1024,
               "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
               "activation_dropout": 0.0, "layerdrop": 0.0, "scale_embedding": True, "pad_token_id": 1,
               "tie_word_embeddings": True},
    # facebook/xglm-564M's layout (modeling_xglm.py XGLMDecoderLayer: pre-LN, GELU, scaled embedding, sinusoidal
    # buffer, final layer_norm), dropout / attention_dropout 0.1 as shipped
    "xglm": {"model_type": "xglm", "d_model": 1024, "num_layers": 4, "attention_heads": 16, "ffn_dim": 4096,
             "vocab_size": 32000, "max_position_embeddings": 2048, "activation_function": "gelu", "dropout": 0.1,
             "attention_dropout": 0.1, "activation_dropout": 0.0, "layerdrop": 0.0, "scale_embedding": True,
             "pad_token_id": 1, "tie_word_embeddings": True},
    # facebook/blenderbot-400M-distill's layer (modeling_blenderbot.py BlenderbotDecoderLayer: pre-LN, GELU, learned
    # positions, final layer_norm, scaled embedding), d_model 1280, 32 heads
    "blenderbot": _bart("blenderbot", 1280, 32, 5120, 8008, (0.1, 0.0, 0.0), True, pad_token_id=0),
    # facebook/blenderbot_small-90M's layer (post-LN with layernorm_embedding, GELU)
    "blenderbot-small": _bart("blenderbot-small", 512, 16, 2048, 54944, (0.1, 0.0, 0.0), True, pad_token_id=0),
    # uclanlp/plbart-base's layer (BART's: post-LN, layernorm_embedding, GELU, scaled embedding)
    "plbart": _bart("plbart", 768, 12, 3072, 50005, (0.1, 0.1, 0.0), True),
    # RUCAIBox/mvp's layer (BART-large's, use_prompt false)
    "mvp": _bart("mvp", 1024, 16, 4096, 50267, (0.1, 0.1, 0.1), False, use_prompt=False),
    # microsoft/trocr-base-handwritten's decoder (modeling_trocr.py TrOCRDecoderLayer: post-LN, learned positions
    # offset 2, layernorm_embedding, GELU)
    "trocr": {"model_type": "trocr", "d_model": 1024, "decoder_layers": 4, "decoder_attention_heads": 16,
              "decoder_ffn_dim": 4096, "vocab_size": 50265, "max_position_embeddings": 1024,
              "activation_function": "gelu", "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
              "decoder_layerdrop": 0.0, "scale_embedding": False, "use_learned_position_embeddings": True,
              "layernorm_embedding": True, "pad_token_id": 1, "tie_word_embeddings": True},
    # google/bigbird-pegasus-large-arxiv's decoder (modeling_bigbird_pegasus.py BigBirdPegasusDecoderLayer: pre-LN,
    # full attention without biases, gelu_new, final layer_norm, scaled embedding)
    "bigbird_pegasus": _bart("bigbird_pegasus", 1024, 16, 4096, 96103, (0.1, 0.0, 0.0), True, use_bias=False,
                             activation_function="gelu_new", attention_type="original_full", pad_token_id=0),
}
CONFIGS.update(MORE)
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


# XGLM's, MVP's and TrOCR's attention is their own code (modeling_xglm.py XGLMAttention, modeling_mvp.py MvpAttention,
# modeling_trocr.py TrOCRAttention: no attention interface, no _supports_flash_attn, so transformers refuses
# flash_attention_2): their rows run eager where the others run the FA2 profile
OWN_ATTENTION = ("xglm", "mvp", "trocr")


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        for suffix, method, precision, attention, mb, seq, ckpt in ROWS:
            if fam in OWN_ATTENTION:
                suffix, attention = suffix.replace("flash", "eager"), "eager"
            out.append({"id": f"{fam}-{suffix}", **_plan(fam, method, precision, attention, mb, seq, ckpt)})
    return out


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=1), OUT)
