"""Inkling 2's vision tower (transformers 5.24 modeling_inkling2.py Inkling2VisionModel; Inkling 2 Loop builds
the same from its inkling2_vision config), ``model.vision_tower``, with Inkling2VisionConfig's defaults:
embeddings (class_embedding and cls_position_embedding of h, patch_embedding a Linear num_channels x
patch_size^2 -> h without bias, position_embedding posemb_grid_size^2 x h), pre_layernorm, num_hidden_layers
layer-scaled ViT layers (vit_layers.layer_scaled_vit; intermediate_size defaults to int(h x mlp_ratio)) and the
merger: linear_1 (h x spatial_merge_size^2 -> projection_hidden_dim), linear_2 (-> text_hidden_size, the vision
config's own field, 4608 when left out: Inkling 2 Loop's 2304 is its sub-config default only where vision_config
is absent, SubConfigSpec.create_subconfig), biased by projector_bias.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vit_layers import layer_scaled_vit

INKLING2_VISION = {"hidden_size": 1024, "num_hidden_layers": 23, "num_channels": 3, "patch_size": 20,
                   "spatial_merge_size": 2, "posemb_grid_size": 32, "projection_hidden_dim": 4096,
                   "text_hidden_size": 4608}


def inkling2_parts(cfg: Mapping, text_h: int) -> list:
    raw = cfg.get("vision_config") or {}
    v = ConfigReader({"patch_size": raw.get("native_patch_size"), "spatial_merge_size": raw.get("adapter_merge_size"),
                      **{k: x for k, x in raw.items() if x is not None}})
    g = lambda k: v.int(k, default=INKLING2_VISION[k])   # noqa: E731 - the class default when left out
    h = g("hidden_size")
    inter = v.int("intermediate_size", default=int(h * float(raw.get("mlp_ratio", 4.0))))
    p = "model.vision_tower"
    b = TensorList()
    b.param(f"{p}.embeddings", "class_embedding", h, "vision")
    b.param(f"{p}.embeddings", "cls_position_embedding", h, "vision")
    b.linear(f"{p}.embeddings.patch_embedding", g("num_channels") * g("patch_size") ** 2, h, "vision")
    b.matrix(f"{p}.embeddings.position_embedding", "weight", (g("posemb_grid_size") ** 2, h), "vision")
    b.norm(f"{p}.pre_layernorm", h, bias=True, component="vision")
    layer_scaled_vit(b, f"{p}.layers", g("num_hidden_layers"), h, inter)
    bias, proj = v.bool("projector_bias", False), g("projection_hidden_dim")
    b.linear(f"{p}.merger.linear_1", h * g("spatial_merge_size") ** 2, proj, "projector", bias)
    b.linear(f"{p}.merger.linear_2", proj, g("text_hidden_size"), "projector", bias)
    return b.tensors
