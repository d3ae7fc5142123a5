"""Composites whose tower is one already modelled (vision.py, vision_qwen.py) or a single linear, with the
projector each modelling file registers (transformers 5.24):

- Cohere2 Vision (modeling_cohere2_vision.py Cohere2VisionMultiModalProjector): a SigLIP tower, the
  pixel-shuffled features (vision h x downsample_factor^2) through linear_1 to alignment_intermediate_size,
  SwiGLU, linear_2 from half of it to the text width, both biased; no LayerNorm (Aya Vision's has one);
- Fuyu (modeling_fuyu.py FuyuModel.vision_embed_tokens): no tower, one biased linear from a flattened patch
  (patch_size^2 x num_channels, read from the top-level config) to the text width;
- HyperCLOVA X Vision V2 (modeling_hyperclovax_vision_v2.py): a Qwen2.5-VL tower (vision_qwen.py, its merger
  to out_hidden_size) and ``projector``, one biased linear to the text width;
- VideoLLaMA 3 (modeling_video_llama_3.py): a SigLIP-layer tower with rotary positions (no table, no head) and
  VideoLlama3Projector.readout: two biased linears, vision h -> text h -> text h;
- Idefics2 (modeling_idefics2.py): a SigLIP-layer tower without head; the connector's modality_projection
  (Idefics2MLP, no biases: gate/up vision h -> the text intermediate_size, down -> text h) and
  perceiver_resampler (latents n x H; resampler_depth layers of RMSNorms input_latents_norm,
  input_context_norm, post_attention_layernorm, q/o (resampler_n_heads x resampler_head_dim), k/v
  (num_key_value_heads x head_dim), an Idefics2MLP of 4H; a final RMSNorm), H the text width
  (Idefics2Config.__post_init__ sets the perceiver's hidden_size to it);
- GOT-OCR 2 / PP-Chart2Table (modeling_got_ocr2.py GotOcr2VisionEncoder): SAM's ViT: biased patch Conv2d,
  pos_embed (image/patch)^2 x h, layers of LayerNorms, qkv (qkv_bias) + biased proj, rel_pos_h / rel_pos_w
  (2 x window - 1, head_dim; the image/patch width in the global_attn_indexes layers), biased lin1/lin2 of
  mlp_dim; the neck (conv1 1x1 and conv2 3x3 to output_channels, no bias, each with a LayerNorm); projector
  conv_upsampler1 (3x3, -> 2 x output_channels) and conv_upsampler2 (3x3, -> text h), no bias, and one biased
  linear.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit
from .vision_qwen import QWEN2_5_VL, qwen_visual


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


def hyperclovax_vision_v2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    b.tensors.extend(qwen_visual(cfg, "2.5"))
    out = ConfigReader(cfg.get("vision_config") or {}).int("out_hidden_size", default=QWEN2_5_VL["out_hidden_size"])
    _linear(b, "model.projector", out, text_h)
    return b.tensors


def video_llama_3_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg.get("vision_config") or {}), "video_llama_3_vision")
    _linear(b, "model.projector.readout.0", vh, text_h)
    _linear(b, "model.projector.readout.2", text_h, text_h)
    return b.tensors


def _gated(b: TensorList, m: str, d_in: int, inter: int, d_out: int) -> None:
    _linear(b, f"{m}.gate_proj", d_in, inter, bias=False)
    _linear(b, f"{m}.up_proj", d_in, inter, bias=False)
    _linear(b, f"{m}.down_proj", inter, d_out, bias=False)


def idefics2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg.get("vision_config") or {}), "idefics2_vision")
    text_inter = ConfigReader(cfg.get("text_config") or {}).int("intermediate_size", default=14336)   # MistralConfig
    m = "model.connector"
    _gated(b, f"{m}.modality_projection", vh, text_inter, text_h)
    r = ConfigReader(cfg.get("perceiver_config") or {})
    heads, hd = r.int("resampler_n_heads", default=16), r.int("resampler_head_dim", default=96)
    kv = r.int("num_key_value_heads", default=4)
    p = f"{m}.perceiver_resampler"
    b.matrix(p, "latents", (r.int("resampler_n_latents", default=64), text_h), "projector")
    for i in range(r.int("resampler_depth", default=3)):
        q = f"{p}.layers.{i}"
        for n in ("input_latents_norm", "input_context_norm", "post_attention_layernorm"):
            b.param(f"{q}.{n}", "weight", text_h, "projector")
        _linear(b, f"{q}.self_attn.q_proj", text_h, heads * hd, bias=False)
        _linear(b, f"{q}.self_attn.k_proj", text_h, kv * hd, bias=False)
        _linear(b, f"{q}.self_attn.v_proj", text_h, kv * hd, bias=False)
        _linear(b, f"{q}.self_attn.o_proj", heads * hd, text_h, bias=False)
        _gated(b, f"{q}.mlp", text_h, 4 * text_h, text_h)
    b.param(f"{p}.norm", "weight", text_h, "projector")
    return b.tensors


# GotOcr2VisionConfig / PPChart2TableVisionConfig (configuration_got_ocr2.py, configuration_pp_chart2table.py)
SAM = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
       "num_channels": 3, "image_size": 1024, "patch_size": 16, "window_size": 14, "mlp_dim": 3072}


def got_ocr2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=SAM[k])   # noqa: E731
    h, p, oc, grid = get("hidden_size"), "model.vision_tower", get("output_channels"), get("image_size") // get("patch_size")
    head_dim = h // get("num_attention_heads")
    ln = lambda m, d: (b.param(m, "weight", d, "vision"), b.param(m, "bias", d, "vision"))   # noqa: E731
    b.matrix(f"{p}.patch_embed.projection", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.patch_embed.projection", "bias", h, "vision")
    if v.bool("use_abs_pos", True):
        b.matrix(p, "pos_embed", (grid * grid, h), "vision")
    glob = v.cfg.get("global_attn_indexes", (2, 5, 8, 11))
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        ln(f"{q}.layer_norm1", h)
        _linear(b, f"{q}.attn.qkv", h, 3 * h, "vision", v.bool("qkv_bias", True))
        _linear(b, f"{q}.attn.proj", h, h, "vision")
        if v.bool("use_rel_pos", True):
            size = grid if i in glob else get("window_size")
            b.matrix(f"{q}.attn", "rel_pos_h", (2 * size - 1, head_dim), "vision")
            b.matrix(f"{q}.attn", "rel_pos_w", (2 * size - 1, head_dim), "vision")
        ln(f"{q}.layer_norm2", h)
        _linear(b, f"{q}.mlp.lin1", h, get("mlp_dim"), "vision")
        _linear(b, f"{q}.mlp.lin2", get("mlp_dim"), h, "vision")
    b.matrix(f"{p}.neck.conv1", "weight", (oc, h), "vision")
    ln(f"{p}.neck.layer_norm1", oc)
    b.matrix(f"{p}.neck.conv2", "weight", (oc, oc * 9), "vision")
    ln(f"{p}.neck.layer_norm2", oc)
    m = "model.multi_modal_projector"
    b.matrix(f"{m}.conv_upsampler1", "weight", (2 * oc, oc * 9), "projector")
    b.matrix(f"{m}.conv_upsampler2", "weight", (text_h, 2 * oc * 9), "projector")
    _linear(b, f"{m}.multimodal_projector", text_h, text_h)
    return b.tensors
