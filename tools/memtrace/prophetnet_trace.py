"""ProphetNet traced on FakeTensors (issue 20, item 3): transformers 5.24's ProphetNetForCausalLM
(modeling_prophetnet.py), the class the engine counts for model_type "prophetnet" (model/classic_more.py: the
default config's mapping is causal_lm), built as AutoModelForCausalLM and fed input_ids and labels. The fixtures
(tools/memtrace/golden/prophetnet/<id>.json, the layout of tools/memtrace/seq2seq.py's) are what
tests/test_prophetnet_blocks.py holds the engine to (memory/blocks_prophetnet.py), within 3 %, without torch.

What the step runs (ProphetNetDecoder.forward): the main stream (word + position embeddings) and `ngram`
predicting streams (ngram_embeddings[i] + the next position's embedding) concatenated to (b, (1 + ngram)·s, h),
embeddings_layer_norm, dropout, then every ProphetNetDecoderLayer over all 1 + ngram streams:
ProphetNetNgramSelfAttention (the main stream's causal attention with its relative position bias, each predicting
stream attending to the main stream's keys and its own: s x 2s scores), the cross-attention skipped (no encoder
states: registered, never run, no gradient), the feed-forward. ProphetNetForCausalLM.forward puts lm_head over the
ngram predicting streams only and _compute_loss takes `logits.transpose(0, 1).contiguous()` and an fp32
log_softmax over ngram·b·s rows. ProphetNet has no attention interface (its own einsum attention): every row eager.

Rows (2 layers, h 256, ffn 1024, 4 heads, ngram 2, 32 buckets, dropout / attention / activation dropout 0.1,
vocab 8000, s 256, b 2): full bf16-pure with and without checkpointing, LoRA (query_proj / value_proj, which also
name the never-run cross_attn's) bf16-mixed with and without checkpointing, full bf16-mixed.

    python -m tools.memtrace.prophetnet_trace            # trace all rows and (re)write the fixtures
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "prophetnet")

# microsoft/prophetnet-large-uncased's layout cut to 2 layers, h 256
CONFIG = {"model_type": "prophetnet", "is_encoder_decoder": True, "activation_dropout": 0.1,
          "activation_function": "gelu", "vocab_size": 8000, "hidden_size": 256, "encoder_ffn_dim": 1024,
          "num_encoder_layers": 2, "num_encoder_attention_heads": 4, "decoder_ffn_dim": 1024,
          "num_decoder_layers": 2, "num_decoder_attention_heads": 4, "attention_dropout": 0.1, "dropout": 0.1,
          "max_position_embeddings": 512, "init_std": 0.02, "add_cross_attention": True, "ngram": 2,
          "num_buckets": 32, "relative_max_distance": 128, "disable_ngram_loss": False, "eps": 0.0,
          "is_decoder": False, "tie_word_embeddings": True, "pad_token_id": 0, "bos_token_id": 1,
          "eos_token_id": 2, "decoder_start_token_id": 0}
TARGETS = ["query_proj", "value_proj"]


def _plan(suffix: str, method: str, precision: str, ckpt: str = "none") -> dict:
    return _p(f"prophetnet-{suffix}", dict(CONFIG), method, precision, "eager", ckpt, mb=2, seq=256,
              lora={"targets": TARGETS})


def rows() -> list[dict]:
    return [_plan("full-pure-eager-s256-b2", "full", "bf16-pure"),
            _plan("full-pure-eager-gc-s256-b2", "full", "bf16-pure", "full"),
            _plan("lora-mixed-eager-s256-b2", "lora", "bf16-mixed"),
            _plan("lora-mixed-eager-gc-s256-b2", "lora", "bf16-mixed", "full"),
            _plan("full-mixed-eager-s256-b2", "full", "bf16-mixed")]


_PATCHED: list = []


def _patch() -> None:
    if _PATCHED:
        return
    _PATCHED.append(True)
    from . import trace  # noqa: PLC0415
    orig_never = trace.never_run

    def never_run(cfg, name, images=False):
        # ProphetNetDecoderLayer runs cross_attn only `if encoder_hidden_states is not None`: a causal LM's step
        # gives it no gradient, so the warm-up step gives it no optimizer state, as torch AdamW in a real run
        if cfg.model_type == "prophetnet" and not cfg.is_encoder_decoder and ".cross_attn" in name:
            return True
        return orig_never(cfg, name, images)
    trace.never_run = never_run


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
