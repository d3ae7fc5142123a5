"""Gemma 4 with its towers (transformers 5.24 modeling_gemma4.py Gemma4ForConditionalGeneration with a
vision_config, as the Gemma 4 31B / 26B-A4B releases, and / or an audio_config): Gemma4Model's ``vision_tower``
(Gemma4VisionModel, Gemma4VisionConfig's defaults) and ``embed_vision`` (Gemma4MultimodalEmbedder), its
``audio_tower`` and ``embed_audio``, beside the language model of gemma4.py, the head tied by the top-level flag
(Gemma4Config.tie_word_embeddings, default True).

The tower (component "vision"):
- Gemma4VisionPatchEmbedder: input_proj (3·patch_size² -> hidden, no bias) and position_embedding_table
  (2 x position_embedding_size x hidden, the x and y tables);
- per Gemma4VisionEncoderLayer: Gemma4VisionAttention's q/k/v/o (Gemma4ClippableLinear: one unbiased
  linear; its clip bounds are buffers) over head_dim (default hidden / heads) with num_key_value_heads,
  q_norm and k_norm of head_dim (v_norm has no weight), Gemma4VisionMLP's gate/up/down, four RMSNorms;
- Gemma4VisionPooler has no weights; standardize's std_bias / std_scale are buffers.
The projector (component "projector"): embed_vision.embedding_projection (vision hidden -> text hidden, no
bias); its pre-projection RMSNorm has no weight (with_scale=False).

What the trained tower saves: memory/vision_gemma4.py, from ``gemma4_tower_spec`` (traced:
tools/memtrace/gemma4_vision_trace.py); frozen (the default ``vision.trainable``) it saves nothing.
An audio tower (Gemma4AudioModel, the E2B / E4B releases): ``gemma4_audio_parts``, its activations not traced.
Gemma 4 Unified's towers are not modelled: refused by name (model/__init__.py)."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .gemma4 import gemma4_without_towers


def gemma4_vision_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg["vision_config"])
    h, inter = v.int("hidden_size", default=768), v.int("intermediate_size", default=3072)
    n, heads = v.int("num_hidden_layers", default=16), v.int("num_attention_heads", default=12)
    kv, patch = v.int("num_key_value_heads", default=12), v.int("patch_size", default=16)
    hd = v.int("head_dim", default=64)
    b = TensorList()
    p = "model.vision_tower"
    b.linear(f"{p}.patch_embedder.input_proj", 3 * patch * patch, h, "vision")
    b.matrix(f"{p}.patch_embedder", "position_embedding_table",
             (2, v.int("position_embedding_size", default=10 * 1024), h), "vision")
    for i in range(n):
        q = f"{p}.encoder.layers.{i}"
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.linear(f"{q}.self_attn.{name}.linear", d_in, d_out, "vision")
        b.norm(f"{q}.self_attn.q_norm", hd, component="vision")
        b.norm(f"{q}.self_attn.k_norm", hd, component="vision")
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{q}.mlp.{name}.linear", d_in, d_out, "vision")
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{q}.{name}", h, component="vision")
    b.linear("model.embed_vision.embedding_projection", h, text_h, "projector")
    return b.tensors


def gemma4_tower_spec(cfg: Mapping) -> dict:
    """The activation shape of the tower (memory/vision_gemma4.py), Gemma4VisionConfig's names and defaults; the
    soft tokens an image from the top-level vision_soft_tokens_per_image (Gemma4ImageProcessor's max_soft_tokens,
    280), every layer run (get_image_features reads last_hidden_state)."""
    v = ConfigReader(cfg["vision_config"])
    tokens = ConfigReader(cfg).int("vision_soft_tokens_per_image", default=v.int("default_output_length", default=280))
    return {"kind": "gemma4", "hidden": v.int("hidden_size", default=768),
            "inter": v.int("intermediate_size", default=3072), "heads": v.int("num_attention_heads", default=12),
            "head_dim": v.int("head_dim", default=64), "layers_run": v.int("num_hidden_layers", default=16),
            "patch": v.int("patch_size", default=16), "pooling": v.int("pooling_kernel_size", default=3),
            "standardize": v.bool("standardize", False), "tokens_per_image": tokens}


def gemma4_audio_parts(cfg: Mapping, text_h: int) -> list:
    """Gemma4AudioModel (Gemma4AudioConfig's defaults), component "audio": subsample_conv_projection's two 3x3
    stride-2 convs (no bias) with their bias-free LayerNorms and input_proj_linear ((c0 // 4)·c1 -> hidden);
    per Gemma4AudioLayer two feed-forwards (ffw_layer_1 / _2 of 4·hidden, pre / post RMSNorms), the chunked
    attention's q/k/v/post, relative_k_proj and per_dim_scale (head_dim = hidden / heads), the light conv's
    linear_start (2·hidden), depthwise_conv1d (hidden x conv_kernel_size), linear_end and two RMSNorms, and
    norm_pre_attn / norm_post_attn / norm_out; output_proj (biased, output_proj_dims); rel_pos_enc has no
    weights. embed_audio.embedding_projection (output_proj_dims -> text hidden): component "projector"."""
    a = ConfigReader(cfg["audio_config"])
    h, n, heads = a.int("hidden_size", default=1024), a.int("num_hidden_layers", default=12), a.int(
        "num_attention_heads", default=8)
    c0, c1 = cfg["audio_config"].get("subsampling_conv_channels") or (128, 32)
    out, kernel = a.int("output_proj_dims", default=1536), a.int("conv_kernel_size", default=5)
    b, p = TensorList(), "model.audio_tower"
    for i, (c_in, c_out) in enumerate(((1, c0), (c0, c1))):
        b.matrix(f"{p}.subsample_conv_projection.layer{i}.conv", "weight", (c_out, c_in, 3, 3), "audio")
        b.norm(f"{p}.subsample_conv_projection.layer{i}.norm", c_out, component="audio")
    b.linear(f"{p}.subsample_conv_projection.input_proj_linear", (c0 // 4) * c1, h, "audio")
    for i in range(n):
        q = f"{p}.layers.{i}"
        for ff in ("feed_forward1", "feed_forward2"):
            b.linear(f"{q}.{ff}.ffw_layer_1.linear", h, 4 * h, "audio")
            b.linear(f"{q}.{ff}.ffw_layer_2.linear", 4 * h, h, "audio")
            b.norm(f"{q}.{ff}.pre_layer_norm", h, component="audio")
            b.norm(f"{q}.{ff}.post_layer_norm", h, component="audio")
        for name in ("q_proj", "k_proj", "v_proj", "post"):
            b.linear(f"{q}.self_attn.{name}.linear", h, h, "audio")
        b.linear(f"{q}.self_attn.relative_k_proj", h, h, "audio")
        b.param(f"{q}.self_attn", "per_dim_scale", h // heads, "audio")
        b.linear(f"{q}.lconv1d.linear_start.linear", h, 2 * h, "audio")
        b.linear(f"{q}.lconv1d.linear_end.linear", h, h, "audio")
        b.matrix(f"{q}.lconv1d.depthwise_conv1d", "weight", (h, 1, kernel), "audio")
        for name in ("lconv1d.pre_layer_norm", "lconv1d.conv_norm", "norm_pre_attn", "norm_post_attn", "norm_out"):
            b.norm(f"{q}.{name}", h, component="audio")
    b.linear(f"{p}.output_proj", h, out, "audio", bias=True)
    b.linear("model.embed_audio.embedding_projection", out, text_h, "projector")
    return b.tensors


def gemma4_with_towers(cfg: Mapping) -> ModelArch:
    """The vision tower and / or the audio tower beside the language model. The audio tower's activations are
    not traced: with an audio_config there is no tower_spec (memory/vision.py UNTRACED_TOWER marks a trained
    step approximate; a frozen one saves nothing, exact)."""
    arch = gemma4_without_towers(cfg)
    parts = (gemma4_vision_parts(cfg, arch.hidden_size) if isinstance(cfg.get("vision_config"), Mapping) else []) + (
        gemma4_audio_parts(cfg, arch.hidden_size) if isinstance(cfg.get("audio_config"), Mapping) else [])
    extra = [replace(t, block="", layer=None) for t in parts]
    audio = isinstance(cfg.get("audio_config"), Mapping)
    return replace(arch, tensors=tuple(extra) + arch.tensors, tower=None if audio else gemma4_tower_spec(cfg))
