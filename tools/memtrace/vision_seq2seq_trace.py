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

- "pix2struct": Pix2StructForConditionalGeneration (modeling_pix2struct.py): the vision encoder frozen, fed the
  processor's flattened patches (b, n, 2 + 3·16·16) with n = seq_len (the engine's one length for both sides) and a
  float attention_mask of ones; Pix2StructTextModel's T5-style decoder and its own CrossEntropyLoss (no upcast).
  PEFT's targets (query, value) scoped to the decoder (SCOPES): the frozen encoder's same-named linears get none.
- "udop": UdopForConditionalGeneration (modeling_udop.py): T5 stacks whose encoder appends the page image's 196
  patch embeddings to the s text tokens (combine_image_text_embeddings, made static for fake tensors: `combine`
  below) with 2-D layout embeddings and three relative biases; fed a zero bbox (b, s, 4) fp32, pixel_values in
  the weights' dtype and an int64 attention_mask of ones; its own CrossEntropyLoss (no upcast).

Rows (2 + 2 layers, d_model 256, ffn 1024, 4 heads, dropout 0.1, s 256, b 2): full bf16-pure FA2 with and
without checkpointing, LoRA bf16-mixed FA2 with and without checkpointing (PEFT's targets q_proj / v_proj; q / v;
query / value), full bf16-mixed eager. Pix2Struct and UDOP run eager only (`_supports_flash_attn = False`), Pix2Struct
without checkpointing (NO_CKPT), UDOP without LoRA + checkpointing (NO_PEFT_CKPT).
Fixtures: tools/memtrace/golden/vision_seq2seq/<id>.json, held by tests/test_vision_seq2seq_blocks.py.

    python -m tools.memtrace.vision_seq2seq_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.vision_seq2seq_trace florence2- # only the ids starting with this
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

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
# microsoft/udop-large's layout cut down: T5 stacks of 2 + 2 blocks (ReLU, dropout 0.1), a 224 px image of 16 px
# patches (196 patch embeddings appended to the encoder's s text tokens), the three relative biases
UDOP = {"model_type": "udop", "vocab_size": 8000, "d_model": 256, "d_kv": 64, "d_ff": 1024, "num_layers": 2,
        "num_decoder_layers": 2, "num_heads": 4, "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128, "dropout_rate": 0.1, "feed_forward_proj": "relu",
        "max_2d_position_embeddings": 1024, "image_size": 224, "patch_size": 16, "num_channels": 3,
        "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}
CONFIGS = {"florence2": FLORENCE2, "pix2struct": PIX2STRUCT, "udop": UDOP}
TARGETS = {"florence2": ["q_proj", "v_proj"], "pix2struct": ["query", "value"], "udop": ["q", "v"]}
CLASSES = {"florence2": "Florence2ForConditionalGeneration", "pix2struct": "Pix2StructForConditionalGeneration",
           "udop": "UdopForConditionalGeneration"}
# what vision.trainable "frozen" freezes
# (UDOP has no tower: its patch embedding is one conv of the encoder's input embeddings, trained with them)
TOWERS = {"florence2": ("model.vision_tower", "model.multi_modal_projector"), "pix2struct": ("encoder",),
          "udop": ()}
# no FlashAttention-2 path (`_supports_flash_attn = False`): every row eager
EAGER_ONLY = ("pix2struct", "udop")
# Pix2StructPreTrainedModel does not set supports_gradient_checkpointing: gradient_checkpointing_enable raises
# ("Pix2StructForConditionalGeneration does not support activation checkpointing."): no checkpointed rows
NO_CKPT = ("pix2struct",)
# UDOP under PEFT with checkpointing raises in transformers 5.24: enable_input_require_grads makes embed_tokens'
# output a leaf that requires grad, and combine_image_text_embeddings' `inputs_embeds += repeated_vision_embeds` is
# an in-place op on it (RuntimeError: a leaf Variable that requires grad is being used in an in-place operation)
NO_PEFT_CKPT = ("udop",)
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
        if fam not in NO_CKPT + NO_PEFT_CKPT:
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
    from transformers.models.udop import modeling_udop as mu  # noqa: PLC0415

    def combine(image_embeddings, inputs_embeds, bbox, visual_bbox, attention_mask=None, num_patches=14, max_len=0,
                image_size=224, patch_size=16):
        """modeling_udop.py combine_image_text_embeddings with its data-dependent steps made static (fake tensors
        cannot size a boolean selection): the same gather of each token's patch (its int64 index, b x s x d), the
        zeroing of the tokens without a box (`repeated[target_seg] = 0.0`: a bool mask, here masked_fill_), the
        in-place add, and every sample's patches (a real batch drops those its tokens cover and pads back with zeros
        to the patch count: the same n_patches rows), indexed (an int64 index of n_patches) and stacked; bbox,
        visual_bbox and the attention mask concatenated."""
        n = num_patches
        ox = torch.clip(torch.floor((bbox[:, :, 0] + bbox[:, :, 2]) / 2.0 * n).long(), 0, n - 1)
        oy = torch.clip(torch.floor((bbox[:, :, 1] + bbox[:, :, 3]) / 2.0 * n).long(), 0, n - 1) * n
        points = ox + oy
        bbox = bbox.to(torch.float64)
        target_seg = (bbox.mean(-1) == 0.0) | (bbox.mean(-1) == 1.0)
        rep = torch.gather(image_embeddings, 1, points.unsqueeze(-1).repeat(1, 1, image_embeddings.size(-1)))
        rep.masked_fill_(target_seg.unsqueeze(-1), 0.0)
        inputs_embeds += rep
        keep = torch.arange(image_embeddings.size(1), device=image_embeddings.device)
        patches = torch.stack([image_embeddings[i][keep] for i in range(image_embeddings.size(0))])
        if visual_bbox is None:
            visual_bbox = mu.get_visual_bbox(image_size=image_size, patch_size=patch_size)
            visual_bbox = visual_bbox.unsqueeze(0).repeat(image_embeddings.size(0), 1, 1).to(bbox)
        inputs_embeds = torch.cat([inputs_embeds, patches], 1)
        bbox = torch.cat([bbox, visual_bbox.to(bbox)], 1)
        if attention_mask is not None:
            attention_mask = torch.cat([attention_mask, torch.ones(attention_mask.size(0), patches.size(1),
                                                                   dtype=attention_mask.dtype)], 1)
        return inputs_embeds, bbox, attention_mask
    mu.combine_image_text_embeddings = combine

    def shift_right(self, input_ids):
        # UdopPreTrainedModel._shift_right less its closing `assert torch.all(shifted >= 0).item()` (read back)
        shifted = input_ids.new_zeros(input_ids.shape)
        shifted[..., 1:] = input_ids[..., :-1].clone()
        shifted[..., 0] = self.config.decoder_start_token_id
        return shifted.masked_fill_(shifted == -100, self.config.pad_token_id)
    mu.UdopPreTrainedModel._shift_right = shift_right
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
            if cfg.model_type == "udop":
                if not batch:
                    # the processor's batch: a bbox (b, s, 4) of normalised floats, the page image in the weights'
                    # dtype, an int64 attention_mask of ones
                    b_, s_ = labels.shape
                    batch.append((torch.zeros(b_, s_, 4), torch.zeros(b_, cfg.num_channels, cfg.image_size,
                                                                      cfg.image_size, dtype=px),
                                  torch.ones(b_, s_, dtype=torch.long)))
                bbox, pv, mask = batch[0]
                kw.pop("attention_mask", None)
                return fwd(input_ids=input_ids, bbox=bbox, pixel_values=pv, attention_mask=mask, labels=labels, **kw)
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


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
