"""T5Gemma 2 traced on FakeTensors (issue 20, item 3): transformers 5.24's T5Gemma2ForConditionalGeneration
(modeling_t5gemma2.py), built as AutoModelForSeq2SeqLM, fed text only (input_ids and labels; the decoder's input is
shift_right(labels)). Its SigLIP vision tower and multi_modal_projector are frozen (zerocalc's vision.trainable
default) and never run: no pixel_values. The fixtures (tools/memtrace/golden/t5gemma2/<id>.json, the layout of
tools/memtrace/seq2seq.py's) are what tests/test_t5gemma2_blocks.py holds the engine to
(memory/blocks_t5gemma2.py), within 3 %, without torch.

What differs from T5Gemma (v1, tools/memtrace/seq2seq.py t5gemma): Gemma 3's layer (q_norm / k_norm RMSNorms on the
heads, no softcapping), and the decoder has no separate cross-attention block: T5Gemma2MergedAttention projects the
encoder output with the layer's own k_proj / v_proj (and k_norm), concatenates them after the self-attention's
keys / values (torch.cat on the key axis: s + s_enc keys) and runs one attention over them under the merged mask
(the causal / sliding mask concatenated with the bidirectional encoder mask). `_supports_flash_attn = False`, so
every row is eager (SDPA would take the 4-D merged mask: not traced here).

Rows (2 + 2 layers, h 256, I 1024, 4 heads (2 kv), head_dim 64, s 256, b 2, layer_types sliding / full): full
bf16-pure with and without checkpointing, LoRA (the text stacks' q/k/v/o/gate/up/down) bf16-mixed with and without
checkpointing, full bf16-mixed.

    python -m tools.memtrace.t5gemma2_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.t5gemma2_trace t5gemma2-full   # only the ids starting with this
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "t5gemma2")

_TEXT = {"vocab_size": 32000, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "hidden_activation": "gelu_pytorch_tanh",
         "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1,
         "bos_token_id": 2, "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0,
         "query_pre_attn_scalar": 64, "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"],
         "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
         "final_logit_softcapping": None, "attn_logit_softcapping": None, "dropout_rate": 0.0}
# google/t5gemma-2-270m-270m's layout cut to 2 + 2 layers, h 256; a tiny SigLIP tower (64 px, patch 16: 16
# patches pooled to mm_tokens_per_image 4), frozen and never run
CONFIG = {"model_type": "t5gemma2", "is_encoder_decoder": True, "dropout_rate": 0.0, "attention_dropout": 0.0,
          "tie_word_embeddings": True, "vocab_size": 32000, "image_token_index": 256001, "eoi_token_index": 256000,
          "encoder": {"model_type": "t5gemma2_encoder", "mm_tokens_per_image": 4, "boi_token_index": 255999,
                      "eoi_token_index": 256000, "image_token_index": 256001, "tie_word_embeddings": True,
                      "text_config": {**_TEXT, "model_type": "t5gemma2_text"},
                      "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 128,
                                        "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2,
                                        "num_channels": 3, "image_size": 64, "patch_size": 16,
                                        "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
                                        "attention_dropout": 0.0, "vision_use_head": False}},
          "decoder": {**_TEXT, "model_type": "t5gemma2_decoder"}}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TOWER = ("vision_tower", "multi_modal_projector")


def _plan(suffix: str, method: str, precision: str, ckpt: str = "none") -> dict:
    return _p(f"t5gemma2-{suffix}", dict(CONFIG), method, precision, "eager", ckpt, mb=2, seq=256,
              lora={"targets": TARGETS})


def rows() -> list[dict]:
    return [_plan("full-pure-eager-s256-b2", "full", "bf16-pure"),
            _plan("full-pure-eager-gc-s256-b2", "full", "bf16-pure", "full"),
            _plan("lora-mixed-eager-s256-b2", "lora", "bf16-mixed"),
            _plan("lora-mixed-eager-gc-s256-b2", "lora", "bf16-mixed", "full"),
            _plan("full-mixed-eager-s256-b2", "full", "bf16-mixed")]


_PATCHED: list = []


def _patch() -> None:
    """Make the tracer build T5Gemma 2 as a seq2seq LM with its tower frozen and no adapters in it (in the worker
    process, once)."""
    if _PATCHED:
        return
    _PATCHED.append(True)
    import re  # noqa: PLC0415

    from . import build, plan, trace  # noqa: PLC0415
    orig_is = plan.is_encoder_decoder
    plan.is_encoder_decoder = lambda mt: mt == "t5gemma2" or orig_is(mt)
    orig_targets = build.lora_targets

    def lora_targets(p, cfg):
        if cfg.model_type == "t5gemma2":       # the text stacks only (the frozen tower has no adapters)
            return r"model\.(?:encoder\.text_model|decoder)\.layers\.\d+\..*\.(" + "|".join(
                map(re.escape, p.lora_targets)) + ")"
        return orig_targets(p, cfg)
    build.lora_targets = lora_targets
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        if cfg.model_type == "t5gemma2":
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            for part in TOWER:                    # vision.trainable "frozen": never run, no gradient
                getattr(base.model.encoder, part).requires_grad_(False)
        return model, cfg, dt
    trace.build_meta_model = build_meta
    from transformers.models.t5gemma2 import modeling_t5gemma2 as mt  # noqa: PLC0415

    def embed(self, input_ids):
        # T5Gemma2TextScaledWordEmbedding.forward less `input_embeddings[input_ids == eoi_token_index] = ...`: a
        # boolean index_put_ is a nonzero (data-dependent shape, which fake tensors refuse); the zeros batch holds
        # no eoi token, so the assignment writes nothing
        return mt.nn.Embedding.forward(self, input_ids) * self.embed_scale.to(self.weight.dtype)
    mt.T5Gemma2TextScaledWordEmbedding.forward = embed


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
