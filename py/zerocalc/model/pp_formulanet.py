"""PP-FormulaNet (transformers 5.24, modeling_pp_formulanet.py PPFormulaNetForConditionalGeneration), counted
whole: model.encoder = PPFormulaNetVisionModel, the SAM ViT-B encoder of GOT-OCR 2 (vision_more.py
got_ocr2_parts' tower, read over PPFormulaNetVisionConfig's defaults: 512-pixel images) with its own
multi_modal_projector (conv1 / conv2 of post_conv_*_channels, 3x3 without bias, linear_1 / linear_2 to the
decoder's width, biased); model.decoder = an MBart decoder (decoders.py "mbart" row) with its own lm_head
(_tied_weights_keys is empty). Checked against the meta-device build in tests/data/architectures.json.
Activations: the decoder's blocks as modelled; the SAM encoder's not modelled.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .decoders import bart_decoder
from .encdec import rebase, require_sub_configs
from .vision_sam import got_ocr2_parts

# PPFormulaNetVisionConfig (configuration_pp_formulanet.py): SAM ViT-B at 512 pixels, and its projector
VISION = {"image_size": 512, "output_channels": 256, "post_conv_in_channels": 256, "post_conv_mid_channels": 512,
          "post_conv_out_channels": 1024, "decoder_hidden_size": 512}
TOWER = "model.vision_tower"


def pp_formulanet(cfg: Mapping) -> ModelArch:
    require_sub_configs(cfg, "pp_formulanet", "vision_config", "text_config")
    vision = {**VISION, **cfg["vision_config"]}
    v = ConfigReader(vision)
    # got_ocr2_parts builds the SAM tower under model.vision_tower, then GOT's projector: the tower only
    sam = [t for t in got_ocr2_parts({"vision_config": vision}, 1) if t.name.startswith(TOWER + ".")]
    b = TensorList()
    m = "model.encoder.multi_modal_projector"
    c_in, mid, out = v.int("post_conv_in_channels"), v.int("post_conv_mid_channels"), v.int("post_conv_out_channels")
    b.matrix(f"{m}.conv1", "weight", (mid, c_in, 3, 3), "projector")
    b.matrix(f"{m}.conv2", "weight", (out, mid, 3, 3), "projector")
    b.linear(f"{m}.linear_1", out, out, "projector", bias=True)
    b.linear(f"{m}.linear_2", out, v.int("decoder_hidden_size"), "projector", bias=True)
    dec = bart_decoder(ConfigReader({**cfg["text_config"], "tie_word_embeddings": False}), "mbart")
    tower = rebase(tuple(sam), TOWER + ".", "model.encoder.")
    support = (dec.support if dec.support != "exact" else "exact parameter count; activations approximate") \
        + "; the SAM image encoder's activations not modelled"
    # the decoder's cross-attention runs here (over the projected image features): memory/blocks_seq2seq.py's
    # decoder layer, not blocks_bart.py's causal one
    return replace(dec, name=ConfigReader(cfg).str("name", "pp_formulanet"), model_type="pp_formulanet",
                   tensors=dec.tensors + tuple(replace(t, block="", layer=None) for t in tower + tuple(b.tensors)),
                   support=support, bart={**dec.bart, "decoder_only": False, "encoder_attn": "bart"})
