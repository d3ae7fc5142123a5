"""Models on a SAM ViT-B image encoder (transformers 5.24), counted whole; sub-configs read by their own field
names over their config classes' defaults. Checked against the meta-device builds in
tests/data/architectures.json.

- the tower (GotOcr2VisionEncoder, PPFormulaNetVisionModel): patch_embed.projection (Conv2d, biased), pos_embed
  (1 x image/patch x image/patch x hidden) when use_abs_pos; layers of layer_norm1, attn.qkv (qkv_bias) / proj,
  rel_pos_h / rel_pos_w (2·size - 1 x head_dim, size the window, or image/patch in the global_attn_indexes
  layers) when use_rel_pos, layer_norm2, mlp lin1 / lin2 (mlp_dim); the neck conv1 (1x1, hidden ->
  output_channels) and conv2 (3x3) without bias, each followed by a channels-first LayerNorm.
- got_ocr2 / pp_chart2table (modeling_got_ocr2.py GotOcr2ForConditionalGeneration): multi_modal_projector
  conv_upsampler1 (output_channels -> 2x, 3x3), conv_upsampler2 (-> text hidden, 3x3) without bias and
  multimodal_projector (biased linear); the text_config's language model (Qwen2) built by model_from_config under
  model.language_model, lm_head at the top, tied by the top-level tie_word_embeddings.
- pp_formulanet (modeling_pp_formulanet.py PPFormulaNetForConditionalGeneration): the tower's
  multi_modal_projector conv1 / conv2 (post_conv_*_channels, 3x3, no bias), linear_1 / linear_2 (-> the
  decoder's width); model.decoder an MBart decoder (decoders.py "mbart" row) with its own lm_head
  (_tied_weights_keys is empty).
Activations: the language model's / decoder's blocks as modelled; the tower's not modelled.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .decoders import bart_decoder
from .encdec import rebase, require_sub_configs

# GotOcr2VisionConfig / PPFormulaNetVisionConfig (configuration_got_ocr2.py, configuration_pp_formulanet.py)
SAM_B = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
         "num_channels": 3, "image_size": 1024, "patch_size": 16, "qkv_bias": True, "use_abs_pos": True,
         "use_rel_pos": True, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "mlp_dim": 3072}
FORMULANET_VISION = {**SAM_B, "image_size": 512, "post_conv_in_channels": 256, "post_conv_mid_channels": 512,
                     "post_conv_out_channels": 1024, "decoder_hidden_size": 512}
TOWER_NOTE = "; the SAM image encoder's activations not modelled"


def sam_vit(b: TensorList, p: str, cfg: Mapping, defaults: Mapping = SAM_B) -> ConfigReader:
    v = ConfigReader({**defaults, **cfg})
    h, n, heads, patch = v.int("hidden_size"), v.int("num_hidden_layers"), v.int("num_attention_heads"), \
        v.int("patch_size")
    grid, window, mlp, out = v.int("image_size") // patch, v.int("window_size", lo=0), v.int("mlp_dim"), \
        v.int("output_channels")
    glob = v.cfg.get("global_attn_indexes") or []

    def lin(m: str, d_in: int, d_out: int, bias: bool = True) -> None:
        b.linear(m, d_in, d_out, "vision", bias=bias)

    def ln(m: str, dim: int) -> None:
        b.norm(m, dim, bias=True, component="vision")

    if v.bool("use_abs_pos", True):
        b.matrix(p, "pos_embed", (1, grid, grid, h), "vision")
    b.matrix(f"{p}.patch_embed.projection", "weight", (h, v.int("num_channels"), patch, patch), "vision")
    b.param(f"{p}.patch_embed.projection", "bias", h, "vision")
    for i in range(n):
        q = f"{p}.layers.{i}"
        ln(f"{q}.layer_norm1", h)
        lin(f"{q}.attn.qkv", h, 3 * h, v.bool("qkv_bias", True))
        lin(f"{q}.attn.proj", h, h)
        if v.bool("use_rel_pos", True):
            size = grid if i in glob or not window else window
            for axis in ("h", "w"):
                b.matrix(f"{q}.attn", f"rel_pos_{axis}", (2 * size - 1, h // heads), "vision")
        ln(f"{q}.layer_norm2", h)
        lin(f"{q}.mlp.lin1", h, mlp)
        lin(f"{q}.mlp.lin2", mlp, h)
    b.matrix(f"{p}.neck.conv1", "weight", (out, h, 1, 1), "vision")
    ln(f"{p}.neck.layer_norm1", out)
    b.matrix(f"{p}.neck.conv2", "weight", (out, out, 3, 3), "vision")
    ln(f"{p}.neck.layer_norm2", out)
    return v


def got_ocr2(cfg: Mapping, build) -> ModelArch:
    model_type = cfg["model_type"]
    require_sub_configs(cfg, model_type, "vision_config", "text_config")
    top = ConfigReader(cfg)
    tied = top.bool("tie_word_embeddings", True)
    lm = build({**cfg["text_config"], "tie_word_embeddings": tied, "name": top.str("name", model_type)})
    b = TensorList()
    v = sam_vit(b, "model.vision_tower", cfg["vision_config"])
    out, th = v.int("output_channels"), lm.hidden_size
    m = "model.multi_modal_projector"
    b.matrix(f"{m}.conv_upsampler1", "weight", (2 * out, out, 3, 3), "projector")
    b.matrix(f"{m}.conv_upsampler2", "weight", (th, 2 * out, 3, 3), "projector")
    b.linear(f"{m}.multimodal_projector", th, th, "projector", bias=True)
    text = tuple(t for t in lm.tensors if t.name.startswith("model."))
    head = tuple(t for t in lm.tensors if not t.name.startswith("model."))
    return replace(lm, model_type=model_type, support=_support(lm.support),
                   tensors=tuple(replace(t, block="", layer=None) for t in b.tensors)
                   + rebase(text, "model.", "model.language_model.") + head)


def pp_formulanet(cfg: Mapping) -> ModelArch:
    require_sub_configs(cfg, "pp_formulanet", "vision_config", "text_config")
    b = TensorList()
    v = sam_vit(b, "model.encoder", cfg["vision_config"], FORMULANET_VISION)
    m = "model.encoder.multi_modal_projector"
    c_in, mid, out = v.int("post_conv_in_channels"), v.int("post_conv_mid_channels"), v.int("post_conv_out_channels")
    b.matrix(f"{m}.conv1", "weight", (mid, c_in, 3, 3), "projector")
    b.matrix(f"{m}.conv2", "weight", (out, mid, 3, 3), "projector")
    b.linear(f"{m}.linear_1", out, out, "projector", bias=True)
    b.linear(f"{m}.linear_2", out, v.int("decoder_hidden_size"), "projector", bias=True)
    dec = bart_decoder(ConfigReader({**cfg["text_config"], "tie_word_embeddings": False}), "mbart")
    return replace(dec, name=ConfigReader(cfg).str("name", "pp_formulanet"), model_type="pp_formulanet",
                   tensors=dec.tensors + tuple(replace(t, block="", layer=None) for t in b.tensors),
                   support=_support(dec.support))


def _support(text: str) -> str:
    return (text if text != "exact" else "exact parameter count; activations approximate") + TOWER_NOTE


SAM = ("got_ocr2", "pp_chart2table")
