"""MiniMax-M3-VL's vision tower and projector (modeling_minimax_m3_vl.py, transformers 5.24), as
``model.vision_tower`` and ``model.multi_modal_projector``.

- MiniMaxM3VLVisionModel ("CLIP-like ... Conv3d patch embed + 3D RoPE"): embeddings.proj Conv3d
  (hidden, num_channels x temporal_patch_size x patch_size^2, no bias), pre_layrnorm LayerNorm, then
  ``num_hidden_layers`` CLIP layers (self_attn k/v/q/out_proj, layer_norm1, mlp fc1/fc2, layer_norm2, all
  biased); no post-layernorm, no position table;
- MiniMaxM3VLMultiModalProjector: linear_1 (tower width -> projector_hidden_size) and linear_2 (-> text
  width), then merge_linear_1 (text width x spatial_merge_size^2 -> projector_hidden_size) and
  merge_linear_2 (-> text width), all biased.
Defaults: MiniMaxM3VLVisionConfig / MiniMaxM3VLConfig (configuration_minimax_m3_vl.py).
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vit_layers import clip_layers

MINIMAX_M3_VL_VISION = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_channels": 3,
                        "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2}


def minimax_m3_vl_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=MINIMAX_M3_VL_VISION[k])   # noqa: E731 - the class default when left out
    h, inter = get("hidden_size"), get("intermediate_size")
    p = "model.vision_tower"
    b = TensorList()
    b.matrix(f"{p}.embeddings.proj", "weight",
             (h, get("num_channels") * get("temporal_patch_size") * get("patch_size") ** 2), "vision")
    b.norm(f"{p}.pre_layrnorm", h, bias=True, component="vision")
    clip_layers(b, f"{p}.layers", get("num_hidden_layers"), h, inter)
    m, proj = "model.multi_modal_projector", ConfigReader(cfg).int("projector_hidden_size", default=6144)
    for name, d_in, d_out in (("linear_1", h, proj), ("linear_2", proj, text_h),
                              ("merge_linear_1", text_h * get("spatial_merge_size") ** 2, proj),
                              ("merge_linear_2", proj, text_h)):
        b.linear(f"{m}.{name}", d_in, d_out, "projector", bias=True)
    return b.tensors
