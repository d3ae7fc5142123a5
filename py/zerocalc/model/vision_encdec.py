"""Image-to-text models whose text side is a BERT-lineage decoder with cross-attention (transformers 5.24), counted
whole: the vision tower (component "vision", outside the blocks, as model/composite.py files towers) and the
text decoder of model/encoders.py. Sub-configs are read by their own field names over their config classes'
defaults (a config.json keeps only the fields that differ). Checked against the meta-device builds in
tests/data/architectures.json. Activations: the text decoder's BERT block (not traced); the tower's activations
are not modelled (model_support says so).

- blip (modeling_blip.py BlipForConditionalGeneration): vision_model = BlipVisionModel (class_embedding,
  patch_embedding conv with bias, position_embedding of (image_size / patch_size)² + 1 rows; layers of
  self_attn.qkv (fused, biased) and projection, layer_norm1/2, mlp fc1/fc2; post_layernorm), text_decoder =
  BlipTextLMHeadModel (encoders.py "blip_text_model"; its head tied to its word embeddings unless both the
  top-level and the text config's tie_word_embeddings are false).
- vision-encoder-decoder (modeling_vision_encoder_decoder.py VisionEncoderDecoderModel): encoder =
  AutoModel of a "vit" config (ViTModel: cls_token, position_embeddings, patch_embeddings.projection;
  layers q/k/v_proj (qkv_bias), o_proj, layernorm_before/after, mlp fc1/fc2; layernorm; pooler.dense to
  pooler_output_size), decoder = the *ForCausalLM of a BERT-lineage config with cross-attention, and
  enc_to_dec_proj when the widths differ without cross_attention_hidden_size. A missing sub-config is the
  config class's default (VisionEncoderDecoderConfig: ViT, and BERT as a decoder). Other towers are refused.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..errors import PlanError
from .arch import ModelArch
from .config import ConfigReader, TensorList
from .encdec import SIDES, head_as_other, rebase
from .encoders import encoder_lm

SUPPORT = ("exact parameter count; activations approximate (the text decoder costed as the BERT block of "
           "memory/blocks.py, not traced; the vision tower's activations not modelled); LoRA adapters on the "
           "crossattention not counted")

# BlipVisionConfig / BlipTextConfig (configuration_blip.py), ViTConfig (configuration_vit.py), BertConfig
BLIP_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 384,
               "patch_size": 16, "num_channels": 3}
BLIP_TEXT = {"vocab_size": 30524, "hidden_size": 768, "encoder_hidden_size": 768, "intermediate_size": 3072,
             "num_hidden_layers": 12, "num_attention_heads": 8, "max_position_embeddings": 512}
VIT = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 224,
       "patch_size": 16, "num_channels": 3}
BERT = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}


def _patches(v: ConfigReader, d: Mapping) -> int:
    size, patch = v.cfg.get("image_size", d["image_size"]), v.int("patch_size", default=d["patch_size"])
    hw = size if isinstance(size, (list, tuple)) and len(size) == 2 else (size, size)
    return (int(hw[0]) // patch) * (int(hw[1]) // patch)


def _tower_layer(b: TensorList, q: str, h: int, inter: int, attn: tuple, norms: tuple[str, str]) -> None:
    """One pre-norm ViT layer: the attention's (name, d_out) linears, two LayerNorms, mlp fc1/fc2, all biased."""
    ln1, ln2 = norms
    for name, d_out, bias in attn:
        b.matrix(f"{q}.{name}", "weight", (d_out, h), "vision", name.rsplit(".", 1)[-1])
        if bias:
            b.param(f"{q}.{name}", "bias", d_out, "vision")
    for ln in (ln1, ln2):
        b.param(f"{q}.{ln}", "weight", h, "vision")
        b.param(f"{q}.{ln}", "bias", h, "vision")
    b.matrix(f"{q}.mlp.fc1", "weight", (inter, h), "vision", "fc1")
    b.param(f"{q}.mlp.fc1", "bias", inter, "vision")
    b.matrix(f"{q}.mlp.fc2", "weight", (h, inter), "vision", "fc2")
    b.param(f"{q}.mlp.fc2", "bias", h, "vision")


def blip_vision(b: TensorList, p: str, cfg: Mapping) -> int:
    v = ConfigReader({**BLIP_VISION, **cfg})
    h, inter, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    patch, ch = v.int("patch_size"), v.int("num_channels")
    b.param(f"{p}.embeddings", "class_embedding", h, "vision")
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, ch * patch * patch), "vision")
    b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    b.matrix(f"{p}.embeddings", "position_embedding", (_patches(v, BLIP_VISION) + 1, h), "vision")
    for i in range(n):
        _tower_layer(b, f"{p}.encoder.layers.{i}", h, inter,
                     (("self_attn.qkv", 3 * h, True), ("self_attn.projection", h, True)),
                     ("layer_norm1", "layer_norm2"))
    b.param(f"{p}.post_layernorm", "weight", h, "vision")
    b.param(f"{p}.post_layernorm", "bias", h, "vision")
    return h


def vit_model(b: TensorList, p: str, cfg: Mapping) -> int:
    v = ConfigReader({**VIT, **cfg})
    h, inter, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    patch, ch, qkv_bias = v.int("patch_size"), v.int("num_channels"), v.bool("qkv_bias", True)
    b.matrix(f"{p}.embeddings", "cls_token", (1, 1, h), "vision")
    b.matrix(f"{p}.embeddings", "position_embeddings", (1, _patches(v, VIT) + 1, h), "vision")
    b.matrix(f"{p}.embeddings.patch_embeddings.projection", "weight", (h, ch, patch, patch), "vision")
    b.param(f"{p}.embeddings.patch_embeddings.projection", "bias", h, "vision")
    for i in range(n):
        _tower_layer(b, f"{p}.layers.{i}", h, inter,
                     tuple((f"attention.{x}", h, qkv_bias) for x in ("q_proj", "k_proj", "v_proj"))
                     + (("attention.o_proj", h, True),), ("layernorm_before", "layernorm_after"))
    b.param(f"{p}.layernorm", "weight", h, "vision")
    b.param(f"{p}.layernorm", "bias", h, "vision")
    pooled = v.int("pooler_output_size", default=h)
    b.matrix(f"{p}.pooler.dense", "weight", (pooled, h), "vision", "dense")
    b.param(f"{p}.pooler.dense", "bias", pooled, "vision")
    return h


def blip(cfg: Mapping) -> ModelArch:
    vision, text = cfg.get("vision_config") or {}, cfg.get("text_config") or {}
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        raise PlanError("model.vision_config", "model_type 'blip' needs mapping vision_config / text_config")
    b = TensorList()
    blip_vision(b, "vision_model", vision)
    # tied unless both the top-level and the text config say tie_word_embeddings false (meta builds: the
    # composite's _tied_weights_keys tie by the top-level flag, BlipTextLMHeadModel's by its own)
    tied = ConfigReader(cfg).bool("tie_word_embeddings", True) or ConfigReader(text).bool("tie_word_embeddings", True)
    dec = encoder_lm(ConfigReader({**BLIP_TEXT, "is_decoder": True, **text, "tie_word_embeddings": tied}),
                     "blip_text_model")
    return _whole(cfg, "blip", b, dec, "text_decoder.")


def vision_encoder_decoder(cfg: Mapping) -> ModelArch:
    enc = dict(cfg.get("encoder") or {"model_type": "vit"})
    dec = dict(cfg.get("decoder") or {"model_type": "bert", **BERT})
    if enc.get("model_type") != "vit":
        raise PlanError("model.encoder.model_type", f"model_type 'vision-encoder-decoder' with a "
                        f"{enc.get('model_type')!r} encoder is not modelled; modelled: 'vit'")
    if dec.get("model_type") not in SIDES:
        raise PlanError("model.decoder.model_type", f"model_type 'vision-encoder-decoder' with a "
                        f"{dec.get('model_type')!r} decoder is not modelled; modelled: " + ", ".join(sorted(SIDES)))
    if dec["model_type"] == "bert":
        dec = {**BERT, **dec}
    b = TensorList()
    h_enc = vit_model(b, "encoder", enc)
    dc = ConfigReader({**dec, "is_decoder": True, "add_cross_attention": True})
    decoder = encoder_lm(dc, dec["model_type"])
    if h_enc != decoder.hidden_size and not dc.has("cross_attention_hidden_size"):
        b.linear("enc_to_dec_proj", h_enc, decoder.hidden_size, "other", bias=True)
    return _whole(cfg, "vision-encoder-decoder", b, decoder, "decoder.")


def _whole(cfg: Mapping, model_type: str, tower: TensorList, text: ModelArch, prefix: str) -> ModelArch:
    """The tower's tensors (outside the blocks) before the text model's, renamed under ``prefix``."""
    extra = tuple(replace(t, block="", layer=None) for t in tower.tensors)
    return replace(text, name=ConfigReader(cfg).str("name", model_type), model_type=model_type,
                   tensors=extra + rebase(head_as_other(text.tensors), "", prefix), support=SUPPORT)


VISION_ENCDEC = {"blip": blip, "vision-encoder-decoder": vision_encoder_decoder}
