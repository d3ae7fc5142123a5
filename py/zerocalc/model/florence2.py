"""Florence-2 (transformers 5.24, modeling_florence2.py Florence2ForConditionalGeneration), counted whole: the
DaViT vision tower, the multi-modal projector and a BART language model (seq2seq.py), read from config.json by
their own field names over Florence2VisionConfig's defaults. Checked against the meta-device build in
tests/data/architectures.json (and an untied variant).

- vision_tower (Florence2VisionBackbone): per stage s a convs.s ConvEmbed (Conv2d in -> embed_dim[s] of
  patch_size[s], biased; a LayerNorm over the input width when patch_prenorm[s], else over embed_dim[s]) and
  depths[s] blocks, each a spatial_block (window_attn) and a channel_block (channel_attn) of the same tensors:
  two depthwise 3x3 Conv2d (biased), two LayerNorms, qkv (embed -> 3·embed, qkv_bias) and proj (biased), ffn
  fc1 / fc2 (embed x mlp_ratio, biased).
- multi_modal_projector: image_projection (embed_dim[-1] -> projection_dim, no bias), image_proj_norm, the
  image_position_embed row / column tables (max_position_embeddings x half the last width; the temporal
  embedding is a cosine buffer).
- language_model: BartModel (shared, positions of max + 2 rows, layernorm_embedding) under
  model.language_model, its embed_tokens tied to shared by the text config's tie_word_embeddings; lm_head at
  the top, tied to shared by the top-level tie_word_embeddings.
Activations: the BART layers by memory/blocks_seq2seq.py bart_block (arch.bart: post-LN, layernorm_embedding), the
pixel_values and the image tokens' scatter mask by memory/blocks_vision_seq2seq.py, traced on Florence-2 with its
tower frozen (tools/memtrace/vision_seq2seq_trace.py); a trained tower's and projector's by memory/vision_davit.py.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..errors import PlanError
from .arch import ModelArch
from .config import ConfigReader, TensorList
from .seq2seq import BART_MODEL, seq2seq

VISION = {"in_channels": 3, "depths": [1, 1, 9, 1], "patch_size": [7, 3, 3, 3],
          "patch_prenorm": [False, True, True, True], "embed_dim": [128, 256, 512, 1024], "mlp_ratio": 4.0, "qkv_bias": True, "projection_dim": 1024,
          "max_position_embeddings": 50, "patch_stride": [4, 2, 2, 2], "patch_padding": [3, 1, 1, 1],
          "num_heads": [4, 8, 16, 32], "window_size": 12}
# Florence2Processor resizes every image to 768 x 768 (its CLIPImageProcessor's size): 24 x 24 + 1 = 577 tokens
IMAGE_SIZE = 768
# BartConfig's defaults (configuration_bart.py)
BART = {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
        "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
        "d_model": 1024}
SUPPORT = ("exact parameter count; activations traced (memory/blocks_vision_seq2seq.py with memory/blocks_seq2seq.py's "
           "BART layer; tools/memtrace/vision_seq2seq_trace.py; the image tokens inside seq_len; a trained DaViT "
           "tower's by memory/vision_davit.py)")


def davit_tower_spec(v: Mapping) -> dict:
    """The activation shape of the DaViT tower and projector (memory/vision_davit.py), read by
    Florence2VisionConfig's field names over its defaults (VISION); the image side from ``image_size`` where a
    config gives one, else the processor's 768."""
    return {"kind": "davit", "depths": list(v["depths"]), "dims": list(v["embed_dim"]), "heads": list(v["num_heads"]),
            "kernels": list(v["patch_size"]), "strides": list(v["patch_stride"]), "paddings": list(v["patch_padding"]),
            "window": int(v["window_size"]), "mlp_ratio": float(v["mlp_ratio"]),
            "projection": int(v["projection_dim"]), "image_size": int(v.get("image_size", IMAGE_SIZE))}


def davit(b: TensorList, p: str, v: Mapping) -> int:
    dims, depths, kernels, prenorm = v["embed_dim"], v["depths"], v["patch_size"], v["patch_prenorm"]
    if not all(isinstance(x, list) and len(x) == len(dims) for x in (depths, kernels, prenorm)):
        raise PlanError("model.vision_config.embed_dim", "model_type 'florence2' needs per-stage lists of one length")
    ratio, qkv_bias = float(v["mlp_ratio"]), bool(v["qkv_bias"])

    def lin(m: str, d_in: int, d_out: int, bias: bool = True) -> None:
        b.linear(m, d_in, d_out, "vision", bias=bias)

    def ln(m: str, dim: int) -> None:
        b.norm(m, dim, bias=True, component="vision")

    c_in = int(v["in_channels"])
    for s, (e, k) in enumerate(zip(dims, kernels)):
        b.matrix(f"{p}.convs.{s}.conv", "weight", (e, c_in, k, k), "vision")
        b.param(f"{p}.convs.{s}.conv", "bias", e, "vision")
        ln(f"{p}.convs.{s}.norm", c_in if prenorm[s] else e)
        c_in = e
    for s, (e, depth) in enumerate(zip(dims, depths)):
        hidden = int(e * ratio)
        for j in range(depth):
            for half, attn in (("spatial_block", "window_attn"), ("channel_block", "channel_attn")):
                q = f"{p}.blocks.{s}.{j}.{half}"
                for conv, norm, part in (("conv1", "norm1", attn), ("conv2", "norm2", "ffn")):
                    b.matrix(f"{q}.{conv}", "weight", (e, 1, 3, 3), "vision")
                    b.param(f"{q}.{conv}", "bias", e, "vision")
                    ln(f"{q}.{norm}", e)
                    if part == "ffn":
                        lin(f"{q}.ffn.fc1", e, hidden)
                        lin(f"{q}.ffn.fc2", hidden, e)
                    else:
                        lin(f"{q}.{attn}.qkv", e, 3 * e, qkv_bias)
                        lin(f"{q}.{attn}.proj", e, e)
    return dims[-1]


def florence2(cfg: Mapping) -> ModelArch:
    vision, text = cfg.get("vision_config") or {}, cfg.get("text_config") or {}
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        raise PlanError("model.vision_config", "model_type 'florence2' needs mapping vision_config / text_config")
    v = {**VISION, **vision}
    b = TensorList()
    width = davit(b, "model.vision_tower", v)
    proj, rows = int(v["projection_dim"]), int(v["max_position_embeddings"])
    m = "model.multi_modal_projector"
    b.matrix(f"{m}.image_projection", "weight", (proj, width), "projector", "image_projection")
    b.param(f"{m}.image_proj_norm", "weight", proj, "projector")
    b.param(f"{m}.image_proj_norm", "bias", proj, "projector")
    b.matrix(f"{m}.image_position_embed.row_embeddings", "weight", (rows, width // 2), "projector")
    b.matrix(f"{m}.image_position_embed.column_embeddings", "weight", (rows, width - width // 2), "projector")
    # meta builds: BartModel ties its embed_tokens to shared by the text config's tie_word_embeddings, the top
    # level ties lm_head by its own
    lm = seq2seq(ConfigReader({**BART, **text}), "bart", {**BART_MODEL, "base": "model.language_model"})
    tied = ConfigReader(cfg).bool("tie_word_embeddings", True)
    head = TensorList()
    if not tied:
        head.matrix("lm_head", "weight", (lm.vocab_size, lm.hidden_size), "lm_head", "lm_head")
    extra = tuple(replace(t, block="", layer=None) for t in b.tensors)
    return replace(lm, name=ConfigReader(cfg).str("name", "florence2"), model_type="florence2", tied_embeddings=tied,
                   tensors=extra + tuple(t for t in lm.tensors if t.name != "lm_head.weight") + tuple(head.tensors),
                   support=SUPPORT, tower=davit_tower_spec(v))
