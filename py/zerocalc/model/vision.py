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
# Siglip2VisionConfig (configuration_siglip2.py): a patch Linear of the same size as SigLIP's Conv2d and
# ``num_patches`` learned positions (resized at run time) instead of (image_size / patch_size)^2
SIGLIP2 = {**SIGLIP, "num_patches": 256}
# PaddleOCRVisionConfig (configuration_paddleocr_vl.py): a SigLIP tower without the pooling head
PADDLEOCR = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "image_size": 384,
             "patch_size": 14, "num_channels": 3, "head": False}
# MiniCPMV4_6VisionConfig (configuration_minicpmv4_6.py): SigLIP's defaults, no pooling head
MINICPMV4_6 = {**SIGLIP, "head": False}
# Idefics3VisionConfig (configuration_idefics3.py; SmolVLM's copies it): a SigLIP layer stack without head
IDEFICS3 = {**SIGLIP, "hidden_size": 1152, "image_size": 224, "patch_size": 32, "head": False}
# Idefics2VisionConfig (configuration_idefics2.py): SigLIP's layers, patch 32, no head
IDEFICS2 = {**SIGLIP, "patch_size": 32, "head": False}
# VideoLlama3VisionConfig (configuration_video_llama_3.py; modeling_video_llama_3.py VideoLlama3VisionModel):
# SigLIP's layers with 2-D rotary positions instead of a position table, no head
VIDEO_LLAMA_3 = {**SIGLIP, "head": False, "positions": False}
# GraniteDoclingVisionConfig (configuration_granite_docling.py): SigLIP's layers at 512 px, no head
GRANITE_DOCLING = {**SIGLIP, "image_size": 512, "head": False}
# Cosmos3EdgeVisionConfig (configuration_cosmos3_edge.py): SigLIP 2's linear patch and num_patches positions, no head
COSMOS3_EDGE = {**SIGLIP2, "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "head": False}
# Phi4MultimodalVisionConfig (configuration_phi4_multimodal.py): a SigLIP ViT with its head at 448 px, patch 14
PHI4_MULTIMODAL = {**SIGLIP, "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                   "image_size": 448, "patch_size": 14}
TOWER_DEFAULTS = {"phi4_multimodal_vision": PHI4_MULTIMODAL, "granite_docling_vision": GRANITE_DOCLING, "cosmos3_edge_vision": COSMOS3_EDGE, "clip_vision_model": CLIP, "idefics2_vision": IDEFICS2, "video_llama_3_vision": VIDEO_LLAMA_3, "siglip_vision_model": SIGLIP, "siglip2_vision_model": SIGLIP2,
                  "idefics3_vision": IDEFICS3, "smolvlm_vision": IDEFICS3,
                  "paddleocr_vl_vision": PADDLEOCR, "minicpmv4_6_vision": MINICPMV4_6}


def vit(b: TensorList, p: str, v: ConfigReader, kind: str) -> int:
    d = TOWER_DEFAULTS[kind]
    h = v.int("hidden_size", default=d["hidden_size"])
    inter = v.int("intermediate_size", default=d["intermediate_size"])
    n = v.int("num_hidden_layers", default=d["num_hidden_layers"])
    patch = v.int("patch_size", default=d["patch_size"])
    ch = v.int("num_channels", default=d["num_channels"])
    patches = (v.int("num_patches", default=d["num_patches"]) if "num_patches" in d
               else (v.int("image_size", default=d["image_size"]) // patch) ** 2)

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
    if d.get("positions", True):
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
    if not clip and d.get("head", True) and v.bool("vision_use_head", True):
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
    vh = vit(b, "model.vision_tower", v, "clip_vision_model")
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
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    b.matrix("model.multi_modal_projector", "mm_input_projection_weight", (vh, text_h), "projector")
    b.param("model.multi_modal_projector.mm_soft_emb_norm", "weight", vh, "projector")
    return b.tensors


def lfm2_vl_parts(cfg: Mapping, text_h: int) -> list:
    """LFM2-VL (modeling_lfm2_vl.py Lfm2VlMultiModalProjector): a SigLIP 2 tower, then the pixel-unshuffled
    features (vision h x downsample_factor^2) through an optional LayerNorm (projector_use_layernorm),
    linear_1 to projector_hidden_size and linear_2 to the text width (both biased by projector_bias);
    Lfm2VlConfig's defaults."""
    b = TensorList()
    c = ConfigReader(cfg)
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip2_vision_model")
    d_in = vh * c.int("downsample_factor", default=2) ** 2
    mid, bias = c.int("projector_hidden_size", default=2560), c.bool("projector_bias", True)
    if c.bool("projector_use_layernorm", True):
        b.param("model.multi_modal_projector.layer_norm", "weight", d_in, "projector")
        b.param("model.multi_modal_projector.layer_norm", "bias", d_in, "projector")
    for name, i, o in (("linear_1", d_in, mid), ("linear_2", mid, text_h)):
        m = f"model.multi_modal_projector.{name}"
        b.matrix(m, "weight", (o, i), "projector", name)
        if bias:
            b.param(m, "bias", o, "projector")
    return b.tensors


def paddleocr_vl_parts(cfg: Mapping, text_h: int) -> list:
    """PaddleOCR-VL (modeling_paddleocr_vl.py PaddleOCRVisionModel + PaddleOCRProjector): a SigLIP tower
    without head ((image_size / patch_size)^2 positions), then pre_norm LayerNorm over the tower width,
    linear_1 (merged width = vision h x spatial_merge_size^2, square) and linear_2 to the text width, biased."""
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    vh = vit(b, "model.visual.vision_model", v, "paddleocr_vl_vision")
    merged = vh * v.int("spatial_merge_size", default=2) ** 2
    b.param("model.projector.pre_norm", "weight", vh, "projector")
    b.param("model.projector.pre_norm", "bias", vh, "projector")
    for name, i, o in (("linear_1", merged, merged), ("linear_2", merged, text_h)):
        b.matrix(f"model.projector.{name}", "weight", (o, i), "projector", name)
        b.param(f"model.projector.{name}", "bias", o, "projector")
    return b.tensors


def minicpmv4_6_parts(cfg: Mapping, text_h: int) -> list:
    """MiniCPM-V 4.6 (modeling_minicpmv4_6.py): a SigLIP tower without head, its ``vit_merger``
    (MiniCPMV4_6ViTWindowAttentionMerger: biased k/v/q/out_proj, layer_norm1, then over the window
    (h x window_kernel_size area) pre_norm, linear_1 to intermediate_size x area, linear_2 back to h), and
    ``merger.mlp``: merger_times MiniCPMV4_6DownsampleMLP (pre_norm over 4h, linear_1 4h square, linear_2 to
    h, the last one to the text width), all biased."""
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    vh = vit(b, "model.vision_tower", v, "minicpmv4_6_vision")
    win = cfg["vision_config"].get("window_kernel_size", (2, 2))
    area = win[0] * win[1]
    inter = v.int("intermediate_size", default=MINICPMV4_6["intermediate_size"])

    def lin(m: str, d_in: int, d_out: int, comp: str) -> None:
        b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
        b.param(m, "bias", d_out, comp)

    def ln(m: str, d: int, comp: str) -> None:
        b.param(m, "weight", d, comp)
        b.param(m, "bias", d, comp)

    m = "model.vision_tower.vit_merger"
    for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
        lin(f"{m}.self_attn.{name}", vh, vh, "vision")
    ln(f"{m}.layer_norm1", vh, "vision")
    ln(f"{m}.pre_norm", vh * area, "vision")
    lin(f"{m}.linear_1", vh * area, inter * area, "vision")
    lin(f"{m}.linear_2", inter * area, vh, "vision")
    times = ConfigReader(cfg).int("merger_times", default=1)
    for j in range(times):
        q = f"model.merger.mlp.{j}"
        ln(f"{q}.pre_norm", 4 * vh, "projector")
        lin(f"{q}.linear_1", 4 * vh, 4 * vh, "projector")
        lin(f"{q}.linear_2", 4 * vh, text_h if j == times - 1 else vh, "projector")
    return b.tensors


MUSE_GLIMMER = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 50, "patch_size": 14,
                "patch_temporal": 2, "pos_emb_height": 32, "pos_emb_width": 32}


def muse_glimmer_parts(cfg: Mapping, text_h: int) -> list:
    """Muse Glimmer (modeling_muse_glimmer.py, MuseGlimmerVisionConfig's defaults): patch_embedding linear
    (patch_temporal x 3 x patch_size^2 -> h, no bias), position_embedding_table (pos_emb_height x
    pos_emb_width), ln_pre, layers of LayerNorm norm1/norm2, biased proj/q/k/v and fc1/fc2, ln_post; the
    vision_adapter fc1 (out_hidden_size -> projector_hidden_size) and fc2 (square) and vision_projection to
    the text width, no biases (MuseGlimmerConfig's defaults)."""
    b = TensorList()
    v, c = ConfigReader(cfg.get("vision_config") or {}), ConfigReader(cfg)
    get = lambda k: v.int(k, default=MUSE_GLIMMER[k])   # noqa: E731
    p, h, inter = "model.vision_tower", get("hidden_size"), get("intermediate_size")

    def lin(m: str, d_in: int, d_out: int, bias: bool, comp: str = "vision") -> None:
        b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
        if bias:
            b.param(m, "bias", d_out, comp)

    def ln(m: str) -> None:
        b.param(m, "weight", h, "vision")
        b.param(m, "bias", h, "vision")

    lin(f"{p}.patch_embedder.patch_embedding", get("patch_temporal") * 3 * get("patch_size") ** 2, h, False)
    b.matrix(f"{p}.patch_embedder.position_embedding_table", "weight",
             (get("pos_emb_height") * get("pos_emb_width"), h), "vision")
    ln(f"{p}.ln_pre")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        ln(f"{q}.norm1")
        ln(f"{q}.norm2")
        for name in ("proj", "q_proj", "k_proj", "v_proj"):
            lin(f"{q}.attn.{name}", h, h, True)
        lin(f"{q}.mlp.fc1", h, inter, True)
        lin(f"{q}.mlp.fc2", inter, h, True)
    ln(f"{p}.ln_post")
    out, mid = c.int("out_hidden_size", default=6144), c.int("projector_hidden_size", default=4096)
    lin("model.vision_adapter.fc1", out, mid, False, "projector")
    lin("model.vision_adapter.fc2", mid, mid, False, "projector")
    lin("model.vision_projection", mid, text_h, False, "projector")
    return b.tensors


def paligemma_parts(cfg: Mapping, text_h: int) -> list:
    """PaliGemma (modeling_paligemma.py): SigLIP tower + one biased linear to ``projection_dim``
    (PaliGemmaConfig copies its projection_dim, 2048 by default, into the vision config)."""
    b = TensorList()
    v = ConfigReader(cfg["vision_config"])
    vh = vit(b, "model.vision_tower", v, "siglip_vision_model")
    d_out = v.int("projection_dim", default=ConfigReader(cfg).int("projection_dim", default=2048))
    b.matrix("model.multi_modal_projector.linear", "weight", (d_out, vh), "projector", "linear")
    b.param("model.multi_modal_projector.linear", "bias", d_out, "projector")
    return b.tensors


LLAMA4 = {"hidden_size": 768, "intermediate_size": 5632, "num_hidden_layers": 34, "image_size": 448, "patch_size": 14,
          "num_channels": 3, "vision_output_dim": 7680, "projector_input_dim": 4096, "projector_output_dim": 4096}


def llama4_parts(cfg: Mapping, text_h: int) -> list:
    """Llama 4 (modeling_llama4.py Llama4VisionModel + Llama4MultiModalProjector): class_embedding,
    positional_embedding_vlm (patches + 1), an unfolded patch linear (no bias), layernorm_pre/post, layers of
    biased q/k/v/o + fc1/fc2 with biased input/post_attention LayerNorms, the pixel-shuffle adapter's fc1
    (intermediate_size -> projector_input_dim) and fc2 (projector_output_dim square), no biases; projector
    linear_1 (vision_output_dim -> text h, multi_modal_projector_bias)."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=LLAMA4[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "vision_model"
    b = TensorList()

    def ln(m: str) -> None:
        b.param(m, "weight", h, "vision")
        b.param(m, "bias", h, "vision")

    def lin(m: str, d_in: int, d_out: int, bias: bool = True, comp: str = "vision") -> None:
        b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
        if bias:
            b.param(m, "bias", d_out, comp)

    b.param(p, "class_embedding", h, "vision")
    b.matrix(p, "positional_embedding_vlm", ((get("image_size") // get("patch_size")) ** 2 + 1, h), "vision")
    lin(f"{p}.patch_embedding.linear", get("num_channels") * get("patch_size") ** 2, h, bias=False)
    ln(f"{p}.layernorm_pre")
    ln(f"{p}.layernorm_post")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.model.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            lin(f"{q}.self_attn.{name}", h, h)
        lin(f"{q}.mlp.fc1", h, inter)
        lin(f"{q}.mlp.fc2", inter, h)
        ln(f"{q}.input_layernorm")
        ln(f"{q}.post_attention_layernorm")
    lin(f"{p}.vision_adapter.mlp.fc1", inter, get("projector_input_dim"), bias=False)
    lin(f"{p}.vision_adapter.mlp.fc2", get("projector_output_dim"), get("projector_output_dim"), bias=False)
    lin("multi_modal_projector.linear_1", get("vision_output_dim"), text_h,
        bias=bool(v.cfg.get("multi_modal_projector_bias", False)), comp="projector")
    return b.tensors


PIXTRAL = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "patch_size": 16, "num_channels": 3}


def mistral3_parts(cfg: Mapping, text_h: int) -> list:
    """Mistral 3 (modeling_pixtral.py PixtralVisionModel + modeling_mistral3.py Mistral3MultiModalProjector):
    patch_conv (no bias), ln_pre, layers of attention_norm, a gated feed_forward, k/v/q/o_proj and ffn_norm,
    no biases, RMSNorms; projector: norm (vision h), patch_merger.merging_layer (h x merge^2 -> h), linear_1
    (-> text h) and linear_2, biased by multimodal_projector_bias."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=PIXTRAL[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    b = TensorList()
    b.matrix(f"{p}.patch_conv", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.ln_pre", "weight", h, "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.transformer.layers.{i}"
        b.param(f"{q}.attention_norm", "weight", h, "vision")
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.matrix(f"{q}.feed_forward.{name}", "weight", (d_out, d_in), "vision", name)
        for name in ("k_proj", "v_proj", "q_proj", "o_proj"):
            b.matrix(f"{q}.attention.{name}", "weight", (h, h), "vision", name)
        b.param(f"{q}.ffn_norm", "weight", h, "vision")
    m, merge = "model.multi_modal_projector", ConfigReader(cfg).int("spatial_merge_size", default=2)
    bias = cfg.get("multimodal_projector_bias", False) is True
    b.param(f"{m}.norm", "weight", h, "projector")
    b.matrix(f"{m}.patch_merger.merging_layer", "weight", (h, h * merge * merge), "projector", "merging_layer")
    for name, d_in in (("linear_1", h), ("linear_2", text_h)):
        b.matrix(f"{m}.{name}", "weight", (text_h, d_in), "projector", name)
        if bias:
            b.param(f"{m}.{name}", "bias", text_h, "projector")
    return b.tensors


def pixtral_tower_spec(cfg: Mapping, text_h: int, breaks: bool) -> dict | None:
    """The activation shape of a Pixtral tower and its patch-merger projector (memory/vision_pixtral.py), read by
    PixtralVisionConfig's field names and defaults (modeling_pixtral.py: head_dim = hidden_size / heads) and
    Mistral3Config's / LightOnOcrConfig's (spatial_merge_size 2; Mistral 3's vision_feature_layer -1,
    hidden_states[k] being layer k - 1's output; LightOnOCR reads the last hidden state). ``breaks``: the
    processor puts a row-break token after each row of merged tokens (Mistral 3's PixtralProcessor). A list of
    feature layers (concatenated before a merging_layer sized for one) is not modelled: None."""
    v = ConfigReader(cfg.get("vision_config") or {})
    feature = cfg.get("vision_feature_layer", -1)
    if not isinstance(feature, int):
        return None
    layers = v.int("num_hidden_layers", default=PIXTRAL["num_hidden_layers"])
    h, heads = v.int("hidden_size", default=PIXTRAL["hidden_size"]), v.int("num_attention_heads", default=16)
    run = layers + 1 + feature if feature < 0 else feature
    return {"kind": "pixtral", "hidden": h, "inter": v.int("intermediate_size", default=PIXTRAL["intermediate_size"]),
            "heads": heads, "head_dim": h // heads, "layers_run": max(0, min(layers, run)),
            "merge": ConfigReader(cfg).int("spatial_merge_size", default=2), "breaks": breaks, "text_hidden": text_h}


INTERNVL = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "image_size": 448,
            "patch_size": 14, "num_channels": 3}


def internvl_parts(cfg: Mapping, text_h: int, qkv_bias_default: bool = False) -> list:
    """InternVL (modeling_internvl.py InternVLVisionModel + InternVLMultiModalProjector): cls_token, absolute
    positions (patches + 1), biased patch Conv2d; layers of lambda_1/lambda_2 (layer scale), q/k/v
    (attention_bias), projection_layer (biased), [q_norm/k_norm RMSNorm(h) with use_qk_norm], biased fc1/fc2,
    layernorm_before/after (layer_norm: weight + bias, rms_norm: weight); a final LayerNorm unless
    use_mean_pooling; projector: LayerNorm over h / downsample_ratio^2, linear_1 (-> text h), linear_2, biased.
    Qianfan-OCR (modeling_qianfan_ocr.py) registers the same tower and projector, attention_bias True by default."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=INTERNVL[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    size, patch = v.cfg.get("image_size", 448), v.cfg.get("patch_size", 14)
    size = size if isinstance(size, (list, tuple)) else (size, size)
    patch = patch if isinstance(patch, (list, tuple)) else (patch, patch)
    ln_bias = v.cfg.get("norm_type", "layer_norm") == "layer_norm"
    b = TensorList()
    b.param(f"{p}.embeddings", "cls_token", h, "vision")
    if v.bool("use_absolute_position_embeddings", True):
        b.matrix(f"{p}.embeddings", "position_embeddings", ((size[0] // patch[0]) * (size[1] // patch[1]) + 1, h),
                 "vision")
    b.matrix(f"{p}.embeddings.patch_embeddings.projection", "weight", (h, get("num_channels") * patch[0] * patch[1]),
             "vision")
    b.param(f"{p}.embeddings.patch_embeddings.projection", "bias", h, "vision")
    qkv_bias = v.bool("attention_bias", qkv_bias_default)
    for i in range(get("num_hidden_layers")):
        q = f"{p}.encoder.layer.{i}"
        b.param(q, "lambda_1", h, "vision")
        b.param(q, "lambda_2", h, "vision")
        for name in ("q_proj", "k_proj", "v_proj"):
            b.matrix(f"{q}.attention.{name}", "weight", (h, h), "vision", name)
            if qkv_bias:
                b.param(f"{q}.attention.{name}", "bias", h, "vision")
        b.matrix(f"{q}.attention.projection_layer", "weight", (h, h), "vision", "projection_layer")
        b.param(f"{q}.attention.projection_layer", "bias", h, "vision")
        if v.bool("use_qk_norm", False):
            b.param(f"{q}.attention.q_norm", "weight", h, "vision")
            b.param(f"{q}.attention.k_norm", "weight", h, "vision")
        for name, d_in, d_out in (("fc1", h, inter), ("fc2", inter, h)):
            b.matrix(f"{q}.mlp.{name}", "weight", (d_out, d_in), "vision", name)
            b.param(f"{q}.mlp.{name}", "bias", d_out, "vision")
        for name in ("layernorm_before", "layernorm_after"):
            b.param(f"{q}.{name}", "weight", h, "vision")
            if ln_bias:
                b.param(f"{q}.{name}", "bias", h, "vision")
    if not v.bool("use_mean_pooling", True):
        b.param(f"{p}.layernorm", "weight", h, "vision")
        b.param(f"{p}.layernorm", "bias", h, "vision")
    m = "model.multi_modal_projector"
    ratio = cfg.get("downsample_ratio", 0.5)
    d = h * int(1 / ratio) ** 2
    b.param(f"{m}.layer_norm", "weight", d, "projector")
    b.param(f"{m}.layer_norm", "bias", d, "projector")
    for name, d_in in (("linear_1", d), ("linear_2", text_h)):
        b.matrix(f"{m}.{name}", "weight", (text_h, d_in), "projector", name)
        b.param(f"{m}.{name}", "bias", text_h, "projector")
    return b.tensors


def internvl_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """The activation shape of InternVL's tower and projector (memory/vision_internvl.py), read from the config
    by InternVLVisionConfig's / InternVLConfig's field names and defaults: width, MLP width, heads, the layers
    that vision_feature_layer depends on (hidden_states[k] is layer k - 1's output; -1 is the last hidden
    state, through the final LayerNorm unless use_mean_pooling), patches per tile, the norm, q/k norms, the
    GELU (one kernel; QuickGELU keeps two tensors), the pixel-shuffle factor."""
    v = ConfigReader(cfg.get("vision_config") or {})
    size, patch = v.cfg.get("image_size", 448), v.cfg.get("patch_size", 14)
    size = size if isinstance(size, (list, tuple)) else (size, size)
    patch = patch if isinstance(patch, (list, tuple)) else (patch, patch)
    layers = v.int("num_hidden_layers", default=INTERNVL["num_hidden_layers"])
    feature = cfg.get("vision_feature_layer", -1)
    run = layers + 1 + feature if feature < 0 else feature
    return {"kind": "internvit", "hidden": v.int("hidden_size", default=INTERNVL["hidden_size"]),
            "inter": v.int("intermediate_size", default=INTERNVL["intermediate_size"]),
            "heads": v.int("num_attention_heads", default=16), "layers_run": max(0, min(layers, run)),
            "patches": (size[0] // patch[0]) * (size[1] // patch[1]),
            "norm": "rmsnorm" if v.cfg.get("norm_type", "layer_norm") == "rms_norm" else "layernorm",
            "qk_norm": v.bool("use_qk_norm", False),
            "final_norm": feature == -1 and not v.bool("use_mean_pooling", True),
            "act_tensors": 2 if v.str("hidden_act", "gelu") == "quick_gelu" else 1,
            "shuffle": int(1 / cfg.get("downsample_ratio", 0.5)), "text_hidden": text_h}
