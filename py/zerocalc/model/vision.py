"""Vision towers and projectors of the composite models that are modelled, as transformers 5.24 registers
them (tower, projector, language model, lm_head). The tower's tensors carry the component ``vision`` and
the projector's ``projector`` and sit outside the language model's numbered blocks (``block`` ""), so the
terms that walk decoder layers (FSDP units, ZeRO-3 prefetch, LoRA) see only the language model.

- CLIP ViT (modeling_clip.py CLIPVisionTransformer: class_embedding, patch Conv2d without bias, positions
  (patches + 1), pre_layrnorm, layers of k/v/q/out_proj + layer_norm1 + fc1/fc2 + layer_norm2, all biased,
  post_layernorm), CLIPVisionConfig's defaults;
- SigLIP ViT (modeling_siglip.py SiglipVisionTransformer: biased patch Conv2d, positions (patches),
  layers of layer_norm1 + k/v/q/out_proj + layer_norm2 + fc1/fc2, post_layernorm and, with
  ``vision_use_head``, the attention-pooling head: probe, nn.MultiheadAttention, layernorm, MLP),
  SiglipVisionConfig's defaults;
- LLaVA's projector (modeling_llava.py LlavaMultiModalProjector: linear_1 from the tower width times the
  number of feature layers to the text width, GELU, linear_2; biased by multimodal_projector_bias);
- Gemma 3's projector (modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight
  (vision h, text h) and mm_soft_emb_norm, an RMSNorm over the vision width).
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

CLIP = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 224,
        "patch_size": 32, "num_channels": 3}
SIGLIP = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 224,
          "patch_size": 16, "num_channels": 3}
TOWER_DEFAULTS = {"clip_vision_model": CLIP, "siglip_vision_model": SIGLIP}


def _vit(b: TensorList, p: str, v: ConfigReader, kind: str) -> int:
    d = TOWER_DEFAULTS[kind]
    h = v.int("hidden_size", default=d["hidden_size"])
    inter = v.int("intermediate_size", default=d["intermediate_size"])
    n = v.int("num_hidden_layers", default=d["num_hidden_layers"])
    patch = v.int("patch_size", default=d["patch_size"])
    ch = v.int("num_channels", default=d["num_channels"])
    patches = (v.int("image_size", default=d["image_size"]) // patch) ** 2

    def ln(m: str) -> None:
        b.param(m, "weight", h, "vision")
        b.param(m, "bias", h, "vision")

    def lin(m: str, d_in: int, d_out: int) -> None:
        b.matrix(m, "weight", (d_out, d_in), "vision", m.rsplit(".", 1)[-1])
        b.param(m, "bias", d_out, "vision")

    clip = kind == "clip_vision_model"
    if clip:
        b.param(f"{p}.embeddings", "class_embedding", h, "vision")
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, ch * patch * patch), "vision")
    if not clip:
        b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    b.matrix(f"{p}.embeddings.position_embedding", "weight", (patches + clip, h), "vision")
    if clip:
        ln(f"{p}.pre_layrnorm")
    for i in range(n):
        q = f"{p}.encoder.layers.{i}"
        if not clip:
            ln(f"{q}.layer_norm1")
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            lin(f"{q}.self_attn.{name}", h, h)
        ln(f"{q}.layer_norm1" if clip else f"{q}.layer_norm2")
        lin(f"{q}.mlp.fc1", h, inter)
        lin(f"{q}.mlp.fc2", inter, h)
        if clip:
            ln(f"{q}.layer_norm2")
    ln(f"{p}.post_layernorm")
    if not clip and v.bool("vision_use_head", True):
        b.param(f"{p}.head", "probe", h, "vision")
        b.matrix(f"{p}.head.attention", "in_proj_weight", (3 * h, h), "vision")
        b.param(f"{p}.head.attention", "in_proj_bias", 3 * h, "vision")
        lin(f"{p}.head.attention.out_proj", h, h)
        ln(f"{p}.head.layernorm")
        lin(f"{p}.head.mlp.fc1", h, inter)
        lin(f"{p}.head.mlp.fc2", inter, h)
    return h


def tower_kind(cfg: Mapping, allowed: tuple[str, ...]) -> str | None:
    kind = (cfg.get("vision_config") or {}).get("model_type")
    return kind if kind in allowed else None


def llava_parts(cfg: Mapping, text_h: int, newline: bool = False) -> list:
    """LLaVA (1.5): CLIP tower + two-layer projector; LLaVA-NeXT (modeling_llava_next.py) adds the learned
    ``image_newline`` (text hidden size) after them."""
    b = TensorList()
    v = ConfigReader(cfg["vision_config"])
    vh = _vit(b, "model.vision_tower", v, "clip_vision_model")
    layers = cfg.get("vision_feature_layer", -2)
    n_feat = len(layers) if isinstance(layers, list) else 1
    bias = cfg.get("multimodal_projector_bias", True) is not False
    for name, d_in, d_out in (("linear_1", vh * n_feat, text_h), ("linear_2", text_h, text_h)):
        m = f"model.multi_modal_projector.{name}"
        b.matrix(m, "weight", (d_out, d_in), "projector", name)
        if bias:
            b.param(m, "bias", d_out, "projector")
    if newline:
        b.param("model", "image_newline", text_h, "projector")
    return b.tensors


def gemma3_parts(cfg: Mapping, text_h: int) -> list:
    """Gemma 3: SigLIP tower + projection matrix and soft-embedding RMSNorm."""
    b = TensorList()
    vh = _vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    b.matrix("model.multi_modal_projector", "mm_input_projection_weight", (vh, text_h), "projector")
    b.param("model.multi_modal_projector.mm_soft_emb_norm", "weight", vh, "projector")
    return b.tensors


def paligemma_parts(cfg: Mapping, text_h: int) -> list:
    """PaliGemma (modeling_paligemma.py): SigLIP tower + one biased linear to ``projection_dim``
    (PaliGemmaConfig copies its projection_dim, 2048 by default, into the vision config)."""
    b = TensorList()
    v = ConfigReader(cfg["vision_config"])
    vh = _vit(b, "model.vision_tower", v, "siglip_vision_model")
    d_out = v.int("projection_dim", default=ConfigReader(cfg).int("projection_dim", default=2048))
    b.matrix("model.multi_modal_projector.linear", "weight", (d_out, vh), "projector", "linear")
    b.param("model.multi_modal_projector.linear", "bias", d_out, "projector")
    return b.tensors
