"""LFM3-VL's vision tower and projector (modeling_lfm3_vl.py, transformers 5.24), as ``model.vision_tower``
and ``model.multi_modal_projector``.

- Lfm3VlVisionModel: patch_embed, a Linear (in_channels x temporal_patch_size x patch_size^2 -> hidden_size,
  no bias); embedding_norm RMSNorm; ``num_hidden_layers`` Lfm3VlVisionLayer, each either a short
  convolution (``layer_types`` "conv": conv.in_proj hidden -> 3 x hidden, a depthwise conv.spatial_conv of
  conv_kernel_size^2 per channel, conv.out_proj; no biases) or attention (q_proj, k/v_proj over
  num_key_value_heads, out_proj, per-head q_norm / k_norm RMSNorms; no biases), then feed_forward w1 / w3 / w2
  (a gated MLP of ``intermediate_size``), operator_norm and ffn_norm RMSNorms;
- Lfm3VlMultiModalProjector: layer_norm (LayerNorm over the tower width), linear_1 from the tower width x
  spatial_merge_size^2 to projector_hidden_size, linear_2 to the text width (biased by projector_bias).
Defaults: Lfm3VlVisionConfig / Lfm3VlConfig (configuration_lfm3_vl.py).
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

LFM3_VL_VISION = {"hidden_size": 1024, "intermediate_size": 2560, "in_channels": 3, "patch_size": 16,
                  "spatial_merge_size": 2, "temporal_patch_size": 2, "num_hidden_layers": 14,
                  "num_attention_heads": 16, "num_key_value_heads": 8, "conv_kernel_size": 3}


def lfm3_vl_layer_types(n: int) -> list[str]:
    """Lfm3VlVisionConfig.__post_init__'s default: conv for the first two layers and every odd one."""
    return ["conv" if i < 2 or i % 2 else "full_attention" for i in range(n)]


def lfm3_vl_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=LFM3_VL_VISION[k])   # noqa: E731 - the class default when left out
    h, n, heads = get("hidden_size"), get("num_hidden_layers"), get("num_attention_heads")
    head_dim = h // heads
    kinds = v.cfg.get("layer_types") or lfm3_vl_layer_types(n)
    p = "model.vision_tower"
    b = TensorList()
    b.linear(f"{p}.patch_embed", get("in_channels") * get("temporal_patch_size") * get("patch_size") ** 2, h,
             "vision")
    b.norm(f"{p}.embedding_norm", h, component="vision")
    for i in range(n):
        q = f"{p}.layers.{i}"
        if kinds[i] == "conv":
            b.linear(f"{q}.conv.in_proj", h, 3 * h, "vision")
            b.matrix(f"{q}.conv.spatial_conv", "weight", (h, 1, get("conv_kernel_size"), get("conv_kernel_size")),
                     "vision")
            b.linear(f"{q}.conv.out_proj", h, h, "vision")
        else:
            kv = get("num_key_value_heads") * head_dim
            for name, d_out in (("q_proj", h), ("k_proj", kv), ("v_proj", kv), ("out_proj", h)):
                b.linear(f"{q}.self_attn.{name}", h, d_out, "vision")
            b.norm(f"{q}.self_attn.q_norm", head_dim, component="vision")
            b.norm(f"{q}.self_attn.k_norm", head_dim, component="vision")
        inter = get("intermediate_size")
        for name, d_in, d_out in (("w1", h, inter), ("w3", h, inter), ("w2", inter, h)):
            b.linear(f"{q}.feed_forward.{name}", d_in, d_out, "vision")
        b.norm(f"{q}.operator_norm", h, component="vision")
        b.norm(f"{q}.ffn_norm", h, component="vision")
    c = ConfigReader(cfg)
    m, proj, bias = "model.multi_modal_projector", c.int("projector_hidden_size", default=4096), c.bool(
        "projector_bias", True)
    b.norm(f"{m}.layer_norm", h, bias=True, component="projector")
    b.linear(f"{m}.linear_1", h * get("spatial_merge_size") ** 2, proj, "projector", bias)
    b.linear(f"{m}.linear_2", proj, text_h, "projector", bias)
    return b.tensors
