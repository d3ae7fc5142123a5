"""Composites whose tower is one already modelled (vision.py, vision_qwen.py) or a single linear, with the
projector each modelling file registers (transformers 5.24):

- Cohere2 Vision (modeling_cohere2_vision.py Cohere2VisionMultiModalProjector): a SigLIP tower, the
  pixel-shuffled features (vision h x downsample_factor^2) through linear_1 to alignment_intermediate_size,
  SwiGLU, linear_2 from half of it to the text width, both biased; no LayerNorm (Aya Vision's has one);
- Fuyu (modeling_fuyu.py FuyuModel.vision_embed_tokens): no tower, one biased linear from a flattened patch
  (patch_size^2 x num_channels, read from the top-level config) to the text width.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit


def _linear(b: TensorList, m: str, d_in: int, d_out: int, comp: str = "projector", bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def cohere2_vision_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    d_in = vh * c.int("downsample_factor", default=2) ** 2
    mid = c.int("alignment_intermediate_size", default=36864)
    _linear(b, "model.multi_modal_projector.linear_1", d_in, mid)
    _linear(b, "model.multi_modal_projector.linear_2", mid // 2, text_h)
    return b.tensors


def fuyu_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    patch = c.int("patch_size", default=30)
    _linear(b, "model.vision_embed_tokens", patch * patch * c.int("num_channels", default=3), text_h, "vision")
    return b.tensors
