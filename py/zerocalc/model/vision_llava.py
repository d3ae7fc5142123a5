"""More LLaVA-style composites (transformers 5.24): a CLIP / SigLIP ViT (vision.py ``vit``) and a projector of
linears, as each modelling file registers them. Sources: modeling_llava_onevision.py (SigLIP without head,
LLaVA's two-layer projector, image_newline), modeling_vipllava.py (CLIP, projector_layernorm over the
concatenated vision_feature_layer states, linear_1 / linear_2), modeling_video_llava.py (two CLIP towers,
image_tower and video_tower, LLaVA's projector), modeling_aya_vision.py (SigLIP, pixel-shuffled features
through a LayerNorm and a SwiGLU projector: linear_1 to alignment_intermediate_size (the text width unless
set), linear_2 from half of it), modeling_idefics3.py / modeling_smolvlm.py (a SigLIP-shaped vision_model
without head, connector.modality_projection.proj from vision h x scale_factor^2, no bias), modeling_deepseek_vl.py (SigLIP with its
head, the aligner's linear1 / linear2 to the text width). Each checked
against the meta-device build in tests/data/architectures.json."""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit


def _linear(b: TensorList, m: str, d_in: int, d_out: int, bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), "projector", m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, "projector")


def _n_feat(cfg: Mapping, default) -> int:
    layers = cfg.get("vision_feature_layer", default)
    return len(layers) if isinstance(layers, list) else 1


def _llava_projector(b: TensorList, cfg: Mapping, d_in: int, text_h: int) -> list:
    """LlavaMultiModalProjector: linear_1 (d_in -> text h), GELU, linear_2, biased by multimodal_projector_bias."""
    bias = cfg.get("multimodal_projector_bias", True) is not False
    _linear(b, "model.multi_modal_projector.linear_1", d_in, text_h, bias)
    _linear(b, "model.multi_modal_projector.linear_2", text_h, text_h, bias)
    return b.tensors


def llava_onevision_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    b.param("model", "image_newline", text_h, "projector")
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    return _llava_projector(b, cfg, vh * _n_feat(cfg, -1), text_h)


def vipllava_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "clip_vision_model")
    d_in = vh * _n_feat(cfg, [-2, -5, -8, -11, 6])
    b.param("model.multi_modal_projector.projector_layernorm", "weight", d_in, "projector")
    b.param("model.multi_modal_projector.projector_layernorm", "bias", d_in, "projector")
    _linear(b, "model.multi_modal_projector.linear_1", d_in, text_h)
    _linear(b, "model.multi_modal_projector.linear_2", text_h, text_h)
    return b.tensors


def video_llava_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg["vision_config"])
    vh = vit(b, "model.video_tower", v, "clip_vision_model")
    vit(b, "model.image_tower", v, "clip_vision_model")
    return _llava_projector(b, cfg, vh * _n_feat(cfg, -2), text_h)


def aya_vision_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    d_in = vh * c.int("downsample_factor", default=2) ** 2
    mid = c.int("alignment_intermediate_size", default=text_h)
    b.param("model.multi_modal_projector.layernorm", "weight", d_in, "projector")
    b.param("model.multi_modal_projector.layernorm", "bias", d_in, "projector")
    _linear(b, "model.multi_modal_projector.linear_1", d_in, mid)
    _linear(b, "model.multi_modal_projector.linear_2", mid // 2, text_h)
    return b.tensors


def idefics3_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg["vision_config"]), "idefics3_vision")
    scale = ConfigReader(cfg).int("scale_factor", default=2)
    _linear(b, "model.connector.modality_projection.proj", vh * scale * scale, text_h, bias=False)
    return b.tensors


def deepseek_vl_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    _linear(b, "model.aligner.linear1", vh, text_h)
    _linear(b, "model.aligner.linear2", text_h, text_h)
    return b.tensors
