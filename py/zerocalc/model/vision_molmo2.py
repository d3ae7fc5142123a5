"""Molmo 2 (modeling_molmo2.py Molmo2ForConditionalGeneration, transformers 5.24; the config classes' defaults):

- Molmo2VisionModel: positional_embedding (num_position_embeddings, by default (image_size / patch)^2 x h), a
  biased patch_embedding linear (patch^2 x channels -> h), layers of LayerNorms layer_norm1/2, q/k/v/o_proj
  (heads x head_dim, biased by attention_bias) and biased fc1/fc2; no final norm;
- Molmo2Adapter: image_pooling_2d, a Molmo2VisionAttention over h x len(vision_feature_layer) (q/k/v from that
  width, o back to h, attention_bias), and image_projector (gate/up h -> intermediate_size by mlp_bias, down to
  text_hidden_size without bias);
- Molmo2TextModel: embed_tokens of vocab_size + additional_vocab_size rows; Molmo2DecoderLayer is Qwen3's block
  with o_proj never biased (q/k/v by attention_bias) and q_norm / k_norm per head (qk_norm_type "qwen3") or over
  the whole projection ("olmo"); lm_head vocab_size x h. So it is built as a Qwen3 without biases and adjusted.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from .config import ConfigReader, TensorList

VISION = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 25, "num_attention_heads": 16,
          "head_dim": 72, "patch_size": 14, "num_channels": 3}
ADAPTER = {"hidden_size": 1152, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
           "intermediate_size": 18944, "text_hidden_size": 3584}
TEXT = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 151936, "additional_vocab_size": 128, "num_hidden_layers": 36, "intermediate_size": 12288,
        "max_position_embeddings": 36864, "rms_norm_eps": 1e-6}


def _lin(b: TensorList, m: str, d_in: int, d_out: int, bias: bool, comp: str) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def molmo2_parts(cfg: Mapping, text_h: int) -> list:
    v, a = ConfigReader(cfg.get("vision_config") or {}), ConfigReader(cfg.get("adapter_config") or {})
    get = lambda k: v.int(k, default=VISION[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    size = v.cfg.get("image_size") or [378, 378]
    n_pos = v.int("num_position_embeddings", default=(size[0] // get("patch_size")) * (size[1] // get("patch_size")))
    bias = v.bool("attention_bias", True)
    qd = get("num_attention_heads") * get("head_dim")
    kvd = v.int("num_key_value_heads", default=get("num_attention_heads")) * get("head_dim")
    b = TensorList()
    b.matrix(p, "positional_embedding", (n_pos, h), "vision")
    _lin(b, f"{p}.patch_embedding", get("patch_size") ** 2 * get("num_channels"), h, True, "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        for n in ("layer_norm1", "layer_norm2"):
            b.param(f"{q}.{n}", "weight", h, "vision")
            b.param(f"{q}.{n}", "bias", h, "vision")
        for name, d_out in (("q_proj", qd), ("k_proj", kvd), ("v_proj", kvd)):
            _lin(b, f"{q}.self_attn.{name}", h, d_out, bias, "vision")
        _lin(b, f"{q}.self_attn.o_proj", qd, h, bias, "vision")
        _lin(b, f"{q}.mlp.fc1", h, inter, True, "vision")
        _lin(b, f"{q}.mlp.fc2", inter, h, True, "vision")
    g = lambda k: a.int(k, default=ADAPTER[k])   # noqa: E731
    ah, m = g("hidden_size"), "model.multi_modal_projector"
    d_in = ah * len(a.cfg.get("vision_feature_layer") or [24, 18])
    abias = a.bool("attention_bias", True)
    aq, akv = g("num_attention_heads") * g("head_dim"), g("num_key_value_heads") * g("head_dim")
    for name, d_out in (("q_proj", aq), ("k_proj", akv), ("v_proj", akv)):
        _lin(b, f"{m}.image_pooling_2d.{name}", d_in, d_out, abias, "projector")
    _lin(b, f"{m}.image_pooling_2d.o_proj", aq, ah, abias, "projector")
    mbias = a.bool("mlp_bias", False)
    _lin(b, f"{m}.image_projector.gate_proj", ah, g("intermediate_size"), mbias, "projector")
    _lin(b, f"{m}.image_projector.up_proj", ah, g("intermediate_size"), mbias, "projector")
    _lin(b, f"{m}.image_projector.down_proj", g("intermediate_size"), g("text_hidden_size"), False, "projector")
    return b.tensors


def molmo2_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    cfg = {**TEXT, **{k: v for k, v in text.items() if v is not None}}
    c = ConfigReader(cfg)
    heads, kv, hd = c.int("num_attention_heads"), c.int("num_key_value_heads"), c.int("head_dim")
    olmo, bias = c.str("qk_norm_type", "qwen3") == "olmo", c.bool("attention_bias", False)
    arch = build({k: v for k, v in cfg.items() if k not in ("additional_vocab_size", "qk_norm_type", "norm_after")}
                 | {"model_type": "qwen3", "attention_bias": False})
    extra = c.int("additional_vocab_size", default=128, lo=0)
    out = []
    for t in arch.tensors:
        if t.component == "embedding" and t.layer is None and len(t.shape) == 2:
            t = replace(t, numel=t.numel + extra * t.shape[1], shape=(t.shape[0] + extra, t.shape[1]))
        elif olmo and t.name.endswith(("q_norm.weight", "k_norm.weight")):
            n = (heads if "q_norm" in t.name else kv) * hd
            t = replace(t, numel=n)
        out.append(t)
        if bias and t.linear in ("q_proj", "k_proj", "v_proj") and t.name.endswith(".weight"):
            out.append(replace(t, name=t.name[:-len("weight")] + "bias", numel=t.shape[0], linear="", shape=()))
    support = arch.support if not olmo else ("exact parameter count; activations approximate (the q/k RMSNorms over "
                                            "the whole projection are costed as Qwen3's per-head ones)")
    return replace(arch, tensors=tuple(out), support=support)
