"""Image-to-text models of the BLIP / encoder-decoder kind (transformers 5.24), counted whole: the vision tower
(component "vision", outside the blocks, as model/composite.py files towers), a Q-Former (component
"projector") where there is one (BLIP-2 and InstructBLIP are composite.py's, vision_qformer.py), and the text side: a BERT-lineage decoder with cross-attention
(model/encoders.py) or a language model built by model_from_config. Sub-configs are read by their own field
names over their config classes' defaults (a config.json keeps only the fields that differ). Checked against
the meta-device builds in tests/data/architectures.json. Activations: blip, vision-encoder-decoder (with a
post-LayerNorm BERT decoder) and git are traced with their tower frozen (vision.trainable's default):
memory/blocks_bert_cross.py (each decoder layer's ``layer_linears`` carry the crossattention's query / key / value /
dense, so PEFT's adapters on them are counted) and memory/blocks_git.py, tools/memtrace/bert_cross_trace.py; a
trained tower's activations are not modelled (model_support says so); pix2struct's decoder is traced with its vision
encoder frozen (memory/blocks_vision_seq2seq.py, tools/memtrace/vision_seq2seq_trace.py).

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
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .encdec import POST_LN_SIDES, SIDES, cross_linears, head_as_other, rebase
from .encoders import encoder_lm
from .vision import vit

SUPPORT = ("exact parameter count; activations approximate (the text decoder costed as the post-LayerNorm BertLayer "
           "of memory/blocks_bert_cross.py, traced with a BERT decoder; this decoder's own layer or width not traced; "
           "the vision tower's activations not modelled)")

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


def blip_vision(b: TensorList, p: str, cfg: Mapping, defaults: Mapping = BLIP_VISION) -> int:
    """BlipVisionModel; Blip2VisionModel (and InstructBLIP's) is the same but for its qkv, a bias-free nn.Linear
    given one (q_bias, 0, v_bias) parameter of 3·hidden when qkv_bias: the same count."""
    v = ConfigReader({**defaults, **cfg})
    h, inter, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    patch, ch = v.int("patch_size"), v.int("num_channels")
    b.param(f"{p}.embeddings", "class_embedding", h, "vision")
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, ch * patch * patch), "vision")
    b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    b.matrix(f"{p}.embeddings", "position_embedding", (_patches(v, defaults) + 1, h), "vision")
    qkv_bias = v.bool("qkv_bias", True)
    for i in range(n):
        _tower_layer(b, f"{p}.encoder.layers.{i}", h, inter,
                     (("self_attn.qkv", 3 * h, qkv_bias), ("self_attn.projection", h, True)),
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
    whole = _whole(cfg, "blip", b, dec, "text_decoder.")
    kv = ConfigReader({**BLIP_TEXT, **text}).int("encoder_hidden_size")
    return replace(whole, layer_linears=(cross_linears(dec, kv),) * dec.num_layers, support=SUPPORT_BLIP)


# the BLIP ViT frozen (vision.trainable's default: it saves nothing) and BlipTextLMHeadModel's decoder
SUPPORT_BLIP = ("exact parameter count; activations traced (memory/blocks_bert_cross.py; "
                "tools/memtrace/bert_cross_trace.py; a trained BLIP vision model's activations not modelled)")


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
    whole = _whole(cfg, "vision-encoder-decoder", b, decoder, "decoder.")
    if dec["model_type"] not in POST_LN_SIDES or h_enc != decoder.hidden_size:
        return replace(whole, layer_linears=(cross_linears(decoder),) * decoder.num_layers)
    return replace(whole, layer_linears=(cross_linears(decoder),) * decoder.num_layers, support=SUPPORT_VED)


# the ViT encoder frozen (vision.trainable's default: it saves nothing) and a post-LayerNorm BERT decoder
SUPPORT_VED = ("exact parameter count; activations traced (memory/blocks_bert_cross.py; "
               "tools/memtrace/bert_cross_trace.py; a trained ViT encoder's activations not modelled)")


def _whole(cfg: Mapping, model_type: str, tower: TensorList, text: ModelArch, prefix: str) -> ModelArch:
    """The tower's tensors (outside the blocks) before the text model's, renamed under ``prefix``."""
    extra = tuple(replace(t, block="", layer=None) for t in tower.tensors)
    return replace(text, name=ConfigReader(cfg).str("name", model_type), model_type=model_type,
                   tensors=extra + rebase(head_as_other(text.tensors), "", prefix), support=SUPPORT)


# GitVisionConfig / GitConfig (configuration_git.py)
GIT_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 224,
              "patch_size": 16, "num_channels": 3}
GIT_TEXT = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 3072, "max_position_embeddings": 1024, "tie_word_embeddings": False}


def git(cfg: Mapping) -> ModelArch:
    """GitForCausalLM (modeling_git.py): git.embeddings (word, position, LayerNorm), git.image_encoder (a CLIP
    vision tower: vision.py), git.encoder (BERT post-LN layers), git.visual_projection (Linear vision -> hidden
    with bias, LayerNorm), img_temporal_embedding (num_image_with_embedding x vision hidden) when set, and
    ``output`` (hidden -> vocab with its bias; the weight tied to the words by tie_word_embeddings)."""
    vision = cfg.get("vision_config") or {}
    if not isinstance(vision, Mapping):
        raise PlanError("model.vision_config", "model_type 'git' needs a mapping vision_config")
    c = ConfigReader({**GIT_TEXT, **{k: v for k, v in cfg.items() if k != "vision_config"}})
    text = encoder_lm(c, "git", base_model=True)           # no pooler (encoders.NO_POOLER), no head
    b = TensorList()
    vh = vit(b, "git.image_encoder.vision_model", ConfigReader({**GIT_VISION, **vision}), "clip_vision_model")
    h, vocab = text.hidden_size, text.vocab_size
    b.linear("git.visual_projection.visual_projection.0", vh, h, "projector", bias=True)
    b.param("git.visual_projection.visual_projection.1", "weight", h, "projector")
    b.param("git.visual_projection.visual_projection.1", "bias", h, "projector")
    frames = c.cfg.get("num_image_with_embedding")
    for i in range(frames if isinstance(frames, int) and not isinstance(frames, bool) else 0):
        b.matrix("git.img_temporal_embedding", str(i), (1, 1, vh), "vision")
    head = TensorList()
    tied = c.bool("tie_word_embeddings", False)
    if not tied:
        head.matrix("output", "weight", (vocab, h), "lm_head", "output")
    head.param("output", "bias", vocab, "lm_head")
    extra = tuple(replace(t, block="", layer=None) for t in b.tensors)
    return replace(text, name=c.str("name", "git"), model_type="git", tied_embeddings=tied,
                   tensors=extra + text.tensors + tuple(head.tensors), support=SUPPORT_GIT)


SUPPORT_GIT = ("exact parameter count; activations traced (memory/blocks_git.py: the image tokens inside the text "
               "layers; tools/memtrace/bert_cross_trace.py; a trained CLIP tower's activations not modelled)")


# Pix2StructVisionConfig / Pix2StructTextConfig (configuration_pix2struct.py)
PIX2STRUCT_VISION = {"hidden_size": 768, "patch_embed_hidden_size": 768, "d_ff": 2048, "d_kv": 64,
                     "num_hidden_layers": 12, "num_attention_heads": 12, "seq_len": 4096}
PIX2STRUCT_TEXT = {"vocab_size": 50244, "hidden_size": 768, "d_kv": 64, "d_ff": 2048, "num_layers": 12,
                   "num_heads": 12, "relative_attention_num_buckets": 32}


def _qkvo(h: int, inner: int) -> tuple:
    return ("query", h, inner), ("key", h, inner), ("value", h, inner), ("output", inner, h)


def pix2struct_vision(b: TensorList, p: str, cfg: Mapping, component: str, defaults: Mapping = PIX2STRUCT_VISION,
                      fields: tuple[str, str, str] = ("d_ff", "d_kv", "seq_len")) -> int:
    """Pix2StructVisionModel: embeddings.patch_projection (patch_embed_hidden_size -> hidden, biased), row /
    column embedders (seq_len rows); layers of attention query/key/value/output (heads·d_kv, no bias), the gated
    mlp wi_0/wi_1/wo and two weight-only LayerNorms; a final layernorm."""
    v = ConfigReader({**defaults, **cfg})
    ff_field, kv_field, rows_field = fields           # Kosmos-2.5 names them intermediate_size, head_dim, ...
    h, ff, n = v.int("hidden_size"), v.int(ff_field), v.int("num_hidden_layers")
    inner = v.int("num_attention_heads") * v.int(kv_field)
    b.linear(f"{p}.embeddings.patch_projection", v.int("patch_embed_hidden_size"), h, component, bias=True)
    for name in ("row_embedder", "column_embedder"):
        b.matrix(f"{p}.embeddings.{name}", "weight", (v.int(rows_field), h), component)
    for i in range(n):
        q = f"{p}.encoder.layer.{i}"
        for name, d_in, d_out in _qkvo(h, inner):
            b.matrix(f"{q}.attention.{name}", "weight", (d_out, d_in), component, name)
        for name, d_in, d_out in (("wi_0", h, ff), ("wi_1", h, ff), ("wo", ff, h)):
            b.matrix(f"{q}.mlp.{name}", "weight", (d_out, d_in), component, name)
        b.param(f"{q}.pre_mlp_layer_norm", "weight", h, component)
        b.param(f"{q}.pre_attention_layer_norm", "weight", h, component)
    b.param(f"{p}.layernorm", "weight", h, component)
    return h


def pix2struct(cfg: Mapping) -> ModelArch:
    """Pix2StructForConditionalGeneration: encoder = Pix2StructVisionModel, decoder = Pix2StructTextModel (T5
    blocks of query/key/value/output self_attention with the relative bias in block 0, encoder_decoder_attention,
    gated mlp.DenseReluDense wi_0/wi_1/wo, weight-only LayerNorms; final_layer_norm; lm_head tied to embed_tokens
    by the text config's tie_word_embeddings)."""
    vision, text = cfg.get("vision_config") or {}, cfg.get("text_config") or {}
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        raise PlanError("model.vision_config", "model_type 'pix2struct' needs mapping vision_config / text_config")
    b = TensorList()
    pix2struct_vision(b, "encoder", vision, "vision")
    t = ConfigReader({**PIX2STRUCT_TEXT, **text})
    h, ff, n, heads = t.int("hidden_size"), t.int("d_ff"), t.int("num_layers"), t.int("num_heads")
    vocab, inner = t.int("vocab_size"), heads * t.int("d_kv")
    d = TensorList()
    d.matrix("decoder.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n):
        q = f"decoder.layer.{i}"
        for att in ("self_attention", "encoder_decoder_attention"):
            for name, d_in, d_out in _qkvo(h, inner):
                d.matrix(f"{q}.{att}.attention.{name}", "weight", (d_out, d_in), "attention", name)
            if i == 0 and att == "self_attention":
                d.matrix(f"{q}.{att}.attention.relative_attention_bias", "weight",
                         (t.int("relative_attention_num_buckets"), heads), "attention")
            d.norm(f"{q}.{att}.layer_norm", h)
        for name, d_in, d_out in (("wi_0", h, ff), ("wi_1", h, ff), ("wo", ff, h)):
            d.linear(f"{q}.mlp.DenseReluDense.{name}", d_in, d_out, "mlp")
        d.norm(f"{q}.mlp.layer_norm", h)
    d.norm("decoder.final_layer_norm", h)
    tied = t.bool("tie_word_embeddings", False)
    if not tied:
        d.matrix("decoder.lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    blk = (Linear("query", h, inner), Linear("key", h, inner), Linear("value", h, inner), Linear("output", inner, h),
           Linear("wi_0", h, ff), Linear("wi_1", h, ff), Linear("wo", ff, h))
    # each layer's linears for PEFT: the self_attention's, the encoder_decoder_attention's (the same leaf names, so
    # the same targets adapt them) and the gated MLP's
    cross = tuple(Linear(f"encoder_decoder_attention.{x.name}", x.d_in, x.d_out) for x in blk[:4])
    layer = blk[:4] + cross + blk[4:]
    drop = text.get("dropout_rate", 0.1)
    return ModelArch(
        name=ConfigReader(cfg).str("name", "pix2struct"), model_type="pix2struct", family="gpt2", hidden_size=h,
        num_layers=n, num_heads=heads, num_kv_heads=heads, head_dim=inner // heads, intermediate_size=ff,
        vocab_size=vocab, tied_embeddings=tied, max_positions=None, gated_mlp=True, norm="rmsnorm",
        norms_per_layer=3, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool) else 0.0,
        tensors=tuple(replace(x, block="", layer=None) for x in b.tensors) + tuple(d.tensors), block_linears=blk,
        dense_block_linears=blk, layer_linears=(layer,) * n, support=SUPPORT_PIX2STRUCT)


SUPPORT_PIX2STRUCT = ("exact parameter count; activations traced (memory/blocks_vision_seq2seq.py: T5 decoder "
                      "blocks over seq_len flattened patches; tools/memtrace/vision_seq2seq_trace.py; eager only, no "
                      "checkpointing in transformers; a trained vision encoder's activations not modelled); LoRA "
                      "adapters PEFT's target names also put on the vision encoder not counted")


VISION_ENCDEC = {"blip": blip, "vision-encoder-decoder": vision_encoder_decoder, "git": git,
                 "pix2struct": pix2struct}
