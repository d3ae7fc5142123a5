"""The image-to-text encoder-decoders traced on FakeTensors (issue 20, item 3), their vision side frozen as
zerocalc's vision.trainable default leaves a tower:

- "florence2": transformers 5.24's Florence2ForConditionalGeneration (modeling_florence2.py): the DaViT tower and
  multi_modal_projector frozen (no graph), their image features scattered into the BART encoder's input embeddings
  at the image_token_id placeholders (`inputs_embeds.masked_scatter(special_image_mask, image_features)`), the
  BART encoder / decoder (modeling_bart.py BartEncoderLayer / BartDecoderLayer, post-LN, layernorm_embedding), the
  loss through self.loss_function (ForCausalLMLoss with shift_labels=labels: fp32 upcast).
  The batch: input_ids (b, s) whose first n_img positions are image_token_id (n_img = the tower's (H/32)² + 1
  tokens: the plan's seq_len holds them, as it holds a LLaVA prompt's image tokens), labels (b, s), zero
  pixel_values (b, 3, H, H) in the weights' dtype, made once and kept, as input_ids are.

Rows (2 + 2 layers, d_model 256, ffn 1024, 4 heads, dropout 0.1, s 256, b 2): full bf16-pure FA2 with and
without checkpointing, LoRA bf16-mixed FA2 with and without checkpointing (PEFT's targets q_proj / v_proj),
full bf16-mixed eager. Fixtures: tools/memtrace/golden/vision_seq2seq/<id>.json, held by
tests/test_vision_seq2seq_blocks.py.

    python -m tools.memtrace.vision_seq2seq_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.vision_seq2seq_trace florence2- # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import _p, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "vision_seq2seq")

# florence-community/Florence-2-base's layout cut down: a 4-stage DaViT of one block a stage over a 384 px image
# (a 12 x 12 grid after the 32x stride: 144 + 1 pooled = 145 image tokens), a BART of 2 + 2 layers
FLORENCE2 = {"model_type": "florence2", "image_token_id": 7999, "tie_word_embeddings": True,
             "vision_config": {"depths": [1, 1, 1, 1], "embed_dim": [32, 64, 128, 256], "num_heads": [1, 2, 4, 8],
                               "num_groups": [1, 2, 4, 8], "projection_dim": 256, "window_size": 12,
                               "image_size": 384, "drop_path_rate": 0.1},
             "text_config": {"model_type": "bart", "vocab_size": 8000, "d_model": 256, "encoder_layers": 2,
                             "decoder_layers": 2, "encoder_ffn_dim": 1024, "decoder_ffn_dim": 1024,
                             "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                             "max_position_embeddings": 512, "dropout": 0.1, "attention_dropout": 0.0,
                             "activation_dropout": 0.0, "activation_function": "gelu", "pad_token_id": 1,
                             "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2,
                             "tie_word_embeddings": True}}
# google/pix2struct-base's layout cut down: a 2-layer vision encoder over 16 x 16 x 3 patches (768 + 2 row / column
# features each) and a 2-layer T5-style text decoder (gated gelu_new, dropout 0.1)
PIX2STRUCT = {"model_type": "pix2struct", "tie_word_embeddings": False,
              "vision_config": {"hidden_size": 256, "patch_embed_hidden_size": 768, "d_ff": 1024, "d_kv": 64,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "seq_len": 4096,
                                "dropout_rate": 0.0, "attention_dropout": 0.0, "dense_act_fn": "gelu_new"},
              "text_config": {"vocab_size": 8000, "hidden_size": 256, "d_kv": 64, "d_ff": 1024, "num_layers": 2,
                              "num_heads": 4, "dropout_rate": 0.1, "dense_act_fn": "gelu_new",
                              "tie_word_embeddings": False, "pad_token_id": 0, "decoder_start_token_id": 0}}
CONFIGS = {"florence2": FLORENCE2, "pix2struct": PIX2STRUCT}
TARGETS = {"florence2": ["q_proj", "v_proj"], "pix2struct": ["query", "value"]}
CLASSES = {"florence2": "Florence2ForConditionalGeneration", "pix2struct": "Pix2StructForConditionalGeneration"}
# what vision.trainable "frozen" freezes
TOWERS = {"florence2": ("model.vision_tower", "model.multi_modal_projector"), "pix2struct": ("encoder",)}
# no FlashAttention-2 path (`_supports_flash_attn = False`): every row eager
EAGER_ONLY = ("pix2struct",)
# Pix2StructPreTrainedModel does not set supports_gradient_checkpointing: gradient_checkpointing_enable raises
# ("Pix2StructForConditionalGeneration does not support activation checkpointing."): no checkpointed rows
NO_CKPT = ("pix2struct",)
# PEFT's targets inside the text side only (the frozen vision encoder's query / value get none: memory/vision.py
# tower_adapters)
SCOPES = {"pix2struct": r"decoder\..*\."}


def image_tokens(fam: str) -> int:
    """Florence-2's image tokens a sample: the DaViT grid after its four strided convs, plus the pooled token."""
    v = CONFIGS[fam]["vision_config"]
    grid = v["image_size"]
    for k, st, p in zip((7, 3, 3, 3), (4, 2, 2, 2), (3, 1, 1, 1)):
        grid = (grid + 2 * p - k) // st + 1
    return grid * grid + 1


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, seq: int, ckpt: str = "none") -> dict:
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=seq,
              lora={"targets": TARGETS[fam], "dropout": 0.05})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        a = "eager" if fam in EAGER_ONLY else "flash"
        out.append(_plan(fam, f"full-pure-{a}-s256-b2", "full", "bf16-pure", a, 256))
        if fam not in NO_CKPT:
            out.append(_plan(fam, f"full-pure-{a}-gc-s256-b2", "full", "bf16-pure", a, 256, "full"))
        out.append(_plan(fam, f"lora-mixed-{a}-s256-b2-drop", "lora", "bf16-mixed", a, 256))
        if fam not in NO_CKPT:
            out.append(_plan(fam, f"lora-mixed-{a}-gc-s256-b2-drop", "lora", "bf16-mixed", a, 256, "full"))
        out.append(_plan(fam, "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 256))
    return out


_PATCHED: list = []


def _patch() -> None:
    """Make the tracer build and feed the composites (in the worker process, once)."""
    import torch  # noqa: PLC0415
    if _PATCHED:
        return
    _PATCHED.append(True)

    from . import build, plan, trace  # noqa: PLC0415
    orig_is = plan.is_encoder_decoder
    plan.is_encoder_decoder = lambda mt: mt in CLASSES or orig_is(mt)
    orig_class = build.model_class

    class Direct:
        def __init__(self, name):
            self.name = name

        def from_config(self, cfg, **kw):
            import transformers  # noqa: PLC0415
            return getattr(transformers, self.name)._from_config(cfg, **kw)

    def model_class(p):
        if isinstance(p.model, dict) and p.model.get("model_type") in CLASSES:
            return Direct(CLASSES[p.model["model_type"]])
        return orig_class(p)
    build.model_class = model_class
    orig_targets = build.lora_targets

    def lora_targets(p, cfg):
        if cfg.model_type in SCOPES:
            return SCOPES[cfg.model_type] + "(" + "|".join(p.lora_targets) + ")"
        return orig_targets(p, cfg)
    build.lora_targets = lora_targets
    from transformers.models.florence2 import modeling_florence2 as mf  # noqa: PLC0415

    def placeholder_mask(self, input_ids, inputs_embeds, image_features):
        # Florence2Model.get_placeholder_mask less its count check (`.sum()` read back: data-dependent on fakes)
        return (input_ids == self.config.image_token_id).unsqueeze(-1)
    mf.Florence2Model.get_placeholder_mask = placeholder_mask
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        if cfg.model_type not in TOWERS:
            return model, cfg, dt
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        for part in TOWERS[cfg.model_type]:               # vision.trainable "frozen": no gradient
            base.get_submodule(part).requires_grad_(False)
        px = dt["base"]
        fwd = base.forward
        batch: list = []

        def forward(input_ids=None, labels=None, **kw):
            kw = {k: x for k, x in kw.items() if x is not None and k != "inputs_embeds"}
            if cfg.model_type == "pix2struct":
                if not batch:
                    # the processor's flattened patches (b, n, 2 + 3·16·16: row, column, pixels), n = seq_len, and
                    # its attention_mask of ones (float), in the weights' dtype / fp32
                    n, width = labels.shape[1], cfg.vision_config.patch_embed_hidden_size + 2
                    batch.append((torch.zeros(labels.shape[0], n, width, dtype=px),
                                  torch.ones(labels.shape[0], n, dtype=torch.float32)))
                fp, mask = batch[0]
                kw.pop("attention_mask", None)
                return fwd(flattened_patches=fp, attention_mask=mask, labels=labels, **kw)
            if not batch:
                # the batch, made in the first step's forward (inside the fake mode) and kept for the whole step
                v = cfg.vision_config
                n_img = image_tokens(cfg.model_type)
                ids = input_ids.clone()
                ids[:, :n_img] = cfg.image_token_id
                size = getattr(v, "image_size", 768)
                batch.append((ids, torch.zeros(labels.shape[0], 3, size, size, dtype=px)))
            ids, pv = batch[0]
            return fwd(input_ids=ids, pixel_values=pv, labels=labels, **kw)
        base.forward = forward
        return model, cfg, dt
    trace.build_meta_model = build_meta


def _worker(entry: dict) -> dict:
    _patch()
    from .grid import _worker as grid_worker  # noqa: PLC0415
    return grid_worker(entry)


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures([_worker(p) for p in todo], OUT)
