"""Composites with SAM's ViT (modeling_sam.py SamVisionEncoder; GOT-OCR 2 copies it as GotOcr2VisionEncoder),
transformers 5.24:

- the ViT: biased patch Conv2d, pos_embed (image/patch)^2 x h (use_abs_pos), layers of LayerNorms
  layer_norm1/2, qkv (qkv_bias) + biased proj, rel_pos_h / rel_pos_w (2 x window - 1, head_dim; the
  image/patch width in the global_attn_indexes layers; use_rel_pos), biased mlp lin1/lin2 of mlp_dim; the
  neck (conv1 1x1 and conv2 3x3 to output_channels, no bias, each with a channels-first LayerNorm);
- GOT-OCR 2 / PP-Chart2Table (modeling_got_ocr2.py GotOcr2MultiModalProjector): conv_upsampler1 (3x3, ->
  2 x output_channels) and conv_upsampler2 (3x3, -> text h), no bias, and one biased linear;
- DeepSeek-VL hybrid (modeling_deepseek_vl_hybrid.py DeepseekVLHybridModel): the SAM tower (high_res), a second
  neck (high_res_vision_neck) and high_res_vision_proj (3x3 convs to 2 x and 4 x output_channels, no bias), the
  scalar high_res_vision_alpha, a SigLIP tower with its head, and the aligner: vision_proj (vision h -> text
  h / 2), high_res_vision_proj (4 x output_channels -> text h / 2), proj (text h square), biased.
Each checked against the meta-device build in tests/data/architectures.json.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit

# SamVisionConfig / GotOcr2VisionConfig / PPChart2TableVisionConfig defaults
SAM = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
       "num_channels": 3, "image_size": 1024, "patch_size": 16, "window_size": 14, "mlp_dim": 3072}


def _linear(b: TensorList, m: str, d_in: int, d_out: int, comp: str = "projector", bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def _ln(b: TensorList, m: str, d: int, comp: str = "vision") -> None:
    b.param(m, "weight", d, comp)
    b.param(m, "bias", d, comp)


def _neck(b: TensorList, p: str, h: int, oc: int) -> None:
    b.matrix(f"{p}.conv1", "weight", (oc, h), "vision")
    _ln(b, f"{p}.layer_norm1", oc)
    b.matrix(f"{p}.conv2", "weight", (oc, oc * 9), "vision")
    _ln(b, f"{p}.layer_norm2", oc)


def sam_vit(b: TensorList, p: str, v: ConfigReader) -> tuple[int, int]:
    """SAM's ViT and its neck under ``p``; returns (hidden, output_channels)."""
    get = lambda k: v.int(k, default=SAM[k])   # noqa: E731
    h, oc, grid = get("hidden_size"), get("output_channels"), get("image_size") // get("patch_size")
    head_dim = h // get("num_attention_heads")
    b.matrix(f"{p}.patch_embed.projection", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.patch_embed.projection", "bias", h, "vision")
    if v.bool("use_abs_pos", True):
        b.matrix(p, "pos_embed", (grid * grid, h), "vision")
    glob = v.cfg.get("global_attn_indexes", (2, 5, 8, 11))
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        _ln(b, f"{q}.layer_norm1", h)
        _linear(b, f"{q}.attn.qkv", h, 3 * h, "vision", v.bool("qkv_bias", True))
        _linear(b, f"{q}.attn.proj", h, h, "vision")
        if v.bool("use_rel_pos", True):
            size = grid if i in glob else get("window_size")
            b.matrix(f"{q}.attn", "rel_pos_h", (2 * size - 1, head_dim), "vision")
            b.matrix(f"{q}.attn", "rel_pos_w", (2 * size - 1, head_dim), "vision")
        _ln(b, f"{q}.layer_norm2", h)
        _linear(b, f"{q}.mlp.lin1", h, get("mlp_dim"), "vision")
        _linear(b, f"{q}.mlp.lin2", get("mlp_dim"), h, "vision")
    _neck(b, f"{p}.neck", h, oc)
    return h, oc


def got_ocr2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    _, oc = sam_vit(b, "model.vision_tower", ConfigReader(cfg.get("vision_config") or {}))
    m = "model.multi_modal_projector"
    b.matrix(f"{m}.conv_upsampler1", "weight", (2 * oc, oc * 9), "projector")
    b.matrix(f"{m}.conv_upsampler2", "weight", (text_h, 2 * oc * 9), "projector")
    _linear(b, f"{m}.multimodal_projector", text_h, text_h)
    return b.tensors


def deepseek_vl_hybrid_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    b.param("model", "high_res_vision_alpha", 1, "vision")
    h, oc = sam_vit(b, "model.high_res_vision_model.vision_encoder",
                    ConfigReader(cfg.get("high_res_vision_config") or {}))
    _neck(b, "model.high_res_vision_neck", h, oc)
    b.matrix("model.high_res_vision_proj.conv1", "weight", (2 * oc, oc * 9), "vision")
    b.matrix("model.high_res_vision_proj.conv2", "weight", (4 * oc, 2 * oc * 9), "vision")
    vh = vit(b, "model.vision_model", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    _linear(b, "model.aligner.vision_proj", vh, text_h // 2)
    _linear(b, "model.aligner.high_res_vision_proj", 4 * oc, text_h // 2)
    _linear(b, "model.aligner.proj", text_h, text_h)
    return b.tensors


def got_ocr2_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """The activation shape of GOT-OCR 2.0's SAM ViT, neck and projector (memory/vision_sam.py), read by
    GotOcr2VisionConfig's field names and defaults (SAM above; global_attn_indexes (2, 5, 8, 11), use_rel_pos):
    width, heads, MLP width, the patch grid of one image_size tile, the window, which layers are global, the
    neck's output_channels, the text width the projector's convs reach."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=SAM[k])   # noqa: E731
    layers = get("num_hidden_layers")
    glob = set(v.cfg.get("global_attn_indexes", (2, 5, 8, 11)))
    return {"kind": "sam", "hidden": get("hidden_size"), "heads": get("num_attention_heads"),
            "inter": get("mlp_dim"), "grid": get("image_size") // get("patch_size"), "window": get("window_size"),
            "global_layers": sum(1 for i in range(layers) if i in glob),
            "window_layers": sum(1 for i in range(layers) if i not in glob),
            "rel_pos": v.bool("use_rel_pos", True), "channels": get("output_channels"), "text_hidden": text_h}
