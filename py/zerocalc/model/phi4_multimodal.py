"""Phi-4-multimodal's towers (transformers 5.24 modeling_phi4_multimodal.py), as
``model.embed_tokens_extend`` beside a Phi-3 language model (fused qkv_proj and gate_up_proj; the config is
flat: the text fields at the top level, Phi4MultimodalConfig's defaults).

- image_embed (Phi4MultimodalImageEmbedding): img_processor, a SigLIP ViT with its attention-pooling head
  (vision.vit; Phi4MultimodalVisionConfig's defaults), img_projection_up (vision width -> h) and
  img_projection_down (h -> h), both biased, and the learned global_img_feature_extensor /
  sub_img_feature_extensor (vision width each);
- audio_embed (Phi4MultimodalAudioEmbedding): encoder (Phi4MultimodalAudioModel): embed, a NeMo conv
  subsampling (a Conv2d 1 -> nemo_conv_channels C of 3x3, then log2(time_reduction) - 1 times a depthwise 3x3
  and a pointwise 1x1 Conv2d, all biased; out: C x nemo_final_size -> hidden), relative_attention_bias_layer
  (an Embedding of bias_max_distance buckets, doubled unless bias_symmetric, x heads) and ``num_blocks``
  conformer layers: feed_forward_in (LayerNorm, gate_up_proj h -> 2 x intermediate, down_proj), self_attn
  (q/k/v/o_proj), conv (layer_norm, glu.ext_pw_conv_1d h -> 2 x ext_pw_out_channel with b1 / b2,
  dw_sep_conv_1d: depthwise dw_conv (h x depthwise_multiplier, kernel_size) and pw_conv to
  depthwise_separable_out_channel, ext_pw_conv_1d h -> ext_pw_out_channel), feed_forward_out, layer_norm_att,
  layer_norm; every linear and conv biased. Then up_proj_for_speech / down_proj_for_speech and
  up_proj_for_vision_speech / down_proj_for_vision_speech (audio width x downsample_rate -> h -> h, biased).
The mean/variance normalisation holds buffers only. nemo_final_size: Phi4MultimodalAudioConfig.__post_init__
halves input_size (floor((n - 1) / 2 + 1)) log2(time_reduction) times.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit

PHI4_AUDIO = {"hidden_size": 1024, "intermediate_size": 1536, "num_blocks": 24, "num_attention_heads": 16,
              "ext_pw_out_channel": 1024, "depthwise_separable_out_channel": 1024, "depthwise_multiplier": 1,
              "kernel_size": 3, "input_size": 80, "time_reduction": 8, "bias_max_distance": 1000,
              "nemo_conv_channels": 1024, "downsample_rate": 1}
# Phi4MultimodalConfig's text defaults (a flat config.json keeps only the fields that differ)
PHI4_TEXT = {"vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072}


def _conv(b: TensorList, m: str, shape: tuple) -> None:
    """A biased Conv1d / Conv2d of weight ``shape`` (out, in / groups, kernel...)."""
    b.matrix(m, "weight", shape, "audio")
    b.param(m, "bias", shape[0], "audio")


def _audio_encoder(b: TensorList, p: str, a: ConfigReader) -> int:
    get = lambda k: a.int(k, default=PHI4_AUDIO[k])   # noqa: E731 - the class default when left out
    h, inter, ch = get("hidden_size"), get("intermediate_size"), get("nemo_conv_channels")
    steps, final = 0, get("input_size")
    while (1 << (steps + 1)) <= get("time_reduction"):
        steps, final = steps + 1, (final - 1) // 2 + 1
    _conv(b, f"{p}.embed.conv.0", (ch, 1, 3, 3))
    for j in range(steps - 1):
        _conv(b, f"{p}.embed.conv.{2 + 3 * j}", (ch, 1, 3, 3))
        _conv(b, f"{p}.embed.conv.{3 + 3 * j}", (ch, ch, 1, 1))
    b.linear(f"{p}.embed.out", ch * final, h, "audio", bias=True)
    buckets = get("bias_max_distance") * (1 if a.bool("bias_symmetric", False) else 2)
    b.matrix(f"{p}.relative_attention_bias_layer.bias_values", "weight", (buckets, get("num_attention_heads")),
             "audio")
    ext, dw = get("ext_pw_out_channel"), h * get("depthwise_multiplier")

    def feed_forward(m: str) -> None:
        b.norm(f"{m}.layer_norm", h, bias=True, component="audio")
        b.linear(f"{m}.gate_up_proj", h, 2 * inter, "audio", bias=True)
        b.linear(f"{m}.down_proj", inter, h, "audio", bias=True)

    for i in range(get("num_blocks")):
        q = f"{p}.encoders.{i}"
        feed_forward(f"{q}.feed_forward_in")
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            b.linear(f"{q}.self_attn.{name}", h, h, "audio", bias=True)
        b.norm(f"{q}.conv.layer_norm", h, bias=True, component="audio")
        _conv(b, f"{q}.conv.glu.ext_pw_conv_1d", (2 * ext, h, 1))
        b.param(f"{q}.conv.glu", "b1", ext, "audio")
        b.param(f"{q}.conv.glu", "b2", ext, "audio")
        _conv(b, f"{q}.conv.dw_sep_conv_1d.dw_conv", (dw, 1, get("kernel_size")))
        _conv(b, f"{q}.conv.dw_sep_conv_1d.pw_conv", (get("depthwise_separable_out_channel"), dw, 1))
        _conv(b, f"{q}.conv.ext_pw_conv_1d", (ext, h, 1))
        feed_forward(f"{q}.feed_forward_out")
        b.norm(f"{q}.layer_norm_att", h, bias=True, component="audio")
        b.norm(f"{q}.layer_norm", h, bias=True, component="audio")
    return h * get("downsample_rate")


def phi4_multimodal_parts(cfg: Mapping, text_h: int) -> list:
    p = "model.embed_tokens_extend"
    b = TensorList()
    vh = vit(b, f"{p}.image_embed.img_processor", ConfigReader(cfg.get("vision_config") or {}), "phi4_multimodal_vision")
    b.linear(f"{p}.image_embed.img_projection_up", vh, text_h, "projector", bias=True)
    b.linear(f"{p}.image_embed.img_projection_down", text_h, text_h, "projector", bias=True)
    b.param(f"{p}.image_embed", "global_img_feature_extensor", vh, "projector")
    b.param(f"{p}.image_embed", "sub_img_feature_extensor", vh, "projector")
    ah = _audio_encoder(b, f"{p}.audio_embed.encoder", ConfigReader(cfg.get("audio_config") or {}))
    for kind in ("speech", "vision_speech"):
        b.linear(f"{p}.audio_embed.up_proj_for_{kind}", ah, text_h, "projector", bias=True)
        b.linear(f"{p}.audio_embed.down_proj_for_{kind}", text_h, text_h, "projector", bias=True)
    return b.tensors
