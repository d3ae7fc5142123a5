"""Composites whose projector is a BLIP-2 Q-Former (modeling_blip_2.py Blip2QFormerModel), transformers 5.24.

- the Q-Former (Blip2QFormerConfig's defaults): a LayerNorm; layers of attention (query / key / value and
  output.dense, biased, and output.LayerNorm), a crossattention of the same shape with key / value from
  encoder_hidden_size in every cross_attention_frequency-th layer, intermediate_query (h -> intermediate_size)
  and output_query (back, with its LayerNorm), all biased; with use_qformer_text_input also intermediate /
  output for the text path;
- Granite 4 Vision (modeling_granite4_vision.py Granite4VisionModel): a CLIP tower, image_newline (text h), and
  one Granite4VisionWindowQFormerDownsampler per deepstack_layer_map entry (layerwise_projectors) plus four
  (spatial_projectors): a Q-Former, a LayerNorm over the vision width, ``query`` (query_side^2 x vision h) and
  ``image_positions`` (window_side^2 x vision h) from downsample_rate "query_side/window_side", and a biased
  out_linear to the text width. The language model is Granite's block (Granite4VisionTextDecoderLayer);
- BLIP-2 / InstructBLIP (-Video) (modeling_blip_2.py Blip2VisionModel, modeling_instructblip.py; their vision
  configs' defaults): class_embedding, positions (patches + 1) x h, biased patch Conv2d; layers of a fused qkv
  (its bias 3h when qkv_bias: q_bias, zeros, v_bias), a biased projection, layer_norm1/2 and biased fc1/fc2;
  post_layernorm; query_tokens (num_query_tokens x Q-Former h), the Q-Former (its encoder_hidden_size is the
  vision width: Blip2Config.__post_init__) and language_projection (Q-Former h -> text h, biased).
  InstructBLIP's Q-Former has embeddings (word and position embeddings, a LayerNorm; no final layernorm) and
  the text path's intermediate / output in every layer.
Each checked against the meta-device build in tests/data/architectures.json.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision import vit

QFORMER = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "cross_attention_frequency": 2,
           "encoder_hidden_size": 1408}


def _linear(b: TensorList, m: str, d_in: int, d_out: int, comp: str, bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def _ln(b: TensorList, m: str, d: int, comp: str) -> None:
    b.param(m, "weight", d, comp)
    b.param(m, "bias", d, comp)


def qformer(b: TensorList, p: str, q: ConfigReader, comp: str = "projector", final_norm: bool = True) -> int:
    """A Blip2QFormerModel under ``p`` (without its layernorm: InstructBlipQFormerModel's layers); returns its
    hidden size."""
    get = lambda k: q.int(k, default=QFORMER[k])   # noqa: E731
    h, inter, enc, freq = (get("hidden_size"), get("intermediate_size"), get("encoder_hidden_size"),
                           get("cross_attention_frequency"))
    if final_norm:
        _ln(b, f"{p}.layernorm", h, comp)
    for i in range(get("num_hidden_layers")):
        layer = f"{p}.encoder.layer.{i}"
        for att, kv_in in (("attention", h),) + ((("crossattention", enc),) if i % freq == 0 else ()):
            _linear(b, f"{layer}.{att}.attention.query", h, h, comp)
            _linear(b, f"{layer}.{att}.attention.key", kv_in, h, comp)
            _linear(b, f"{layer}.{att}.attention.value", kv_in, h, comp)
            _linear(b, f"{layer}.{att}.output.dense", h, h, comp)
            _ln(b, f"{layer}.{att}.output.LayerNorm", h, comp)
        for suffix in (("_query", "") if q.bool("use_qformer_text_input", False) else ("_query",)):
            _linear(b, f"{layer}.intermediate{suffix}.dense", h, inter, comp)
            _linear(b, f"{layer}.output{suffix}.dense", inter, h, comp)
            _ln(b, f"{layer}.output{suffix}.LayerNorm", h, comp)
    return h


def granite4_vision_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    b.param("model", "image_newline", text_h, "projector")
    vh = vit(b, "model.vision_tower", ConfigReader(cfg.get("vision_config") or {}), "clip_vision_model")
    query_side, window_side = (int(x) for x in c.str("downsample_rate", "1/4").split("/"))
    n = len(cfg.get("deepstack_layer_map") or ()) + 4
    for i in range(n):
        p = f"model.spatial_projectors.{i}"
        qformer(b, f"{p}.qformer", ConfigReader(cfg.get("qformer_config") or {}))
        _ln(b, f"{p}.norm", vh, "projector")
        b.matrix(p, "query", (query_side ** 2, vh), "projector")
        b.matrix(p, "image_positions", (window_side ** 2, vh), "projector")
        _linear(b, f"{p}.out_linear", vh, text_h, "projector")
    return b.tensors


BLIP2_VISION = {"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39, "image_size": 224,
                "patch_size": 14}


def _blip_vision(b: TensorList, p: str, v: ConfigReader) -> int:
    get = lambda k: v.int(k, default=BLIP2_VISION[k])   # noqa: E731
    h, inter = get("hidden_size"), get("intermediate_size")
    b.param(f"{p}.embeddings", "class_embedding", h, "vision")
    b.matrix(f"{p}.embeddings", "position_embedding", ((get("image_size") // get("patch_size")) ** 2 + 1, h), "vision")
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, 3 * get("patch_size") ** 2), "vision")
    b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.encoder.layers.{i}"
        _linear(b, f"{q}.self_attn.qkv", h, 3 * h, "vision", v.bool("qkv_bias", True))
        _linear(b, f"{q}.self_attn.projection", h, h, "vision")
        _ln(b, f"{q}.layer_norm1", h, "vision")
        _linear(b, f"{q}.mlp.fc1", h, inter, "vision")
        _linear(b, f"{q}.mlp.fc2", inter, h, "vision")
        _ln(b, f"{q}.layer_norm2", h, "vision")
    _ln(b, f"{p}.post_layernorm", h, "vision")
    return h


def blip2_parts(cfg: Mapping, text_h: int, instruct: bool = False) -> list:
    b = TensorList()
    vh = _blip_vision(b, "vision_model", ConfigReader(cfg.get("vision_config") or {}))
    q = ConfigReader({**(cfg.get("qformer_config") or {}), "encoder_hidden_size": vh,
                      **({"use_qformer_text_input": True} if instruct else {})})
    qh = q.int("hidden_size", default=QFORMER["hidden_size"])
    b.matrix("model", "query_tokens", (ConfigReader(cfg).int("num_query_tokens", default=32), qh), "projector")
    if instruct:
        b.matrix("qformer.embeddings.word_embeddings", "weight", (q.int("vocab_size", default=30522), qh), "projector")
        b.matrix("qformer.embeddings.position_embeddings", "weight",
                 (q.int("max_position_embeddings", default=512), qh), "projector")
        _ln(b, "qformer.embeddings.layernorm", qh, "projector")
    qformer(b, "qformer", q, final_norm=not instruct)
    _linear(b, "language_projection", qh, text_h, "projector")
    return b.tensors


def blip2_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """The activation shape of BLIP-2's ViT, Q-Former and language_projection (memory/vision_qformer.py), read by
    Blip2VisionConfig's / Blip2QFormerConfig's / Blip2Config's field names and defaults (modeling_blip_2.py
    Blip2ForConditionalGeneration.get_image_features: the ViT's last hidden state after post_layernorm, all its
    layers; the Q-Former's cross-attention in each layer i with i % cross_attention_frequency == 0; hidden
    dropout hidden_dropout_prob, 0.1 by default)."""
    v = ConfigReader(cfg.get("vision_config") or {})
    q = ConfigReader(cfg.get("qformer_config") or {})
    get = lambda k: v.int(k, default=BLIP2_VISION[k])   # noqa: E731
    qget = lambda k: q.int(k, default=QFORMER[k])   # noqa: E731
    layers, freq = qget("num_hidden_layers"), qget("cross_attention_frequency")
    return {"kind": "blip2", "hidden": get("hidden_size"), "inter": get("intermediate_size"),
            "heads": v.int("num_attention_heads", default=16), "layers_run": get("num_hidden_layers"),
            "patches": (get("image_size") // get("patch_size")) ** 2,
            "mlp_tensors": 3 if v.str("hidden_act", "gelu") == "quick_gelu" else 2,
            "q_hidden": qget("hidden_size"), "q_inter": qget("intermediate_size"),
            "q_heads": q.int("num_attention_heads", default=12), "q_layers": layers,
            "q_cross": sum(1 for i in range(layers) if i % freq == 0),
            "queries": ConfigReader(cfg).int("num_query_tokens", default=32),
            "q_dropout": (q.cfg.get("hidden_dropout_prob", 0.1) or 0) > 0, "text_hidden": text_h}
