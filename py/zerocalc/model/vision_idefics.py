"""IDEFICS (modeling_idefics.py IdeficsForVisionText2Text, transformers 5.24; IdeficsConfig's defaults), read from
its flat top-level config:

- the vision model (vision.py IdeficsVisionTransformer): a CLIP ViT whose width is ``embed_dim``
  (IdeficsVisionConfig: 224 px, patch 14, 32 layers, MLP 5120);
- with use_resampler, the perceiver resampler (perceiver.py): latents (resampler_n_latents x embed_dim),
  resampler_depth blocks of attention (LayerNorms context_layer_norm / latents_layer_norm, with
  qk_layer_norms_perceiver q/k LayerNorms over head_dim, q/k/v_proj to heads x head_dim and output_proj, no bias)
  and MLP (a LayerNorm, fc to 4 embed_dim and c_proj, no bias), a final LayerNorm;
- the language model: a Llama (IdeficsDecoderLayer) with embed_tokens and lm_head decoupled (additional_vocab_size
  more rows in additional_embedding / additional_fc), and num_hidden_layers // cross_layer_interval
  gated_cross_attn_layers: q/o_proj square, k/v_proj from embed_dim, no bias, with qk_layer_norms RMSNorms over
  head_dim, a Llama MLP, two RMSNorms, alpha_cross_attn / alpha_dense (1 each, or h with alpha_type "vector").
  Each gated layer is placed in the decoder block it runs before (block i x cross_layer_interval:
  ``gated_cross_layers``); its activations are memory/blocks_cross.py gated_layer's, over the vision states
  (vision.tokens_per_sample, beside the text). Its linears join that block's ``layer_linears``
  as ``gated_cross_attn.<leaf>`` (modeling_idefics.py IdeficsGatedCrossAttentionLayer: cross_attn =
  IdeficsAttention(is_cross_attention=True), mlp = IdeficsMLP), so LoRA adapts them where PEFT does (it matches
  a target against the module name's last segment: ``gated_cross_attn_layers.3.cross_attn.q_proj``); the block
  rules look linears up by their plain names and do not see them.
- IdeficsModel.__init__ ends with freeze_relevant_params: freeze_text_layers (IdeficsConfig's default True)
  freezes the decoder layers and the final norm (freeze_model: every module but those of the
  freeze_text_module_exceptions types, of which only "Linear" occurs in them) and embed_tokens' regular weight
  (IdeficsDecoupledEmbedding partially_freeze), freeze_lm_head (default False) lm_head's regular weight: those
  are ``config_frozen`` (no gradient, no optimizer state under method full; their layers save what a frozen
  block saves, memory/activations.py). freeze_vision_layers is left to vision.trainable.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from .arch import Linear
from .config import ConfigReader, TensorList
from .vision import vit

VISION = {"embed_dim": 768, "intermediate_size": 5120, "num_hidden_layers": 32, "image_size": 224, "patch_size": 14}
# the gated cross-attention layers' activations are traced (tools/memtrace/families.py idefics rows; memory/
# blocks_cross.py gated_layer) for a step fed the vision states; memory/vision.py plan_support says where a plan
# feeds none (IdeficsModel.forward requires them)
SUPPORT = "exact"


def _lin(b: TensorList, m: str, d_in: int, d_out: int, comp: str) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])


def _ln(b: TensorList, m: str, d: int, comp: str) -> None:
    b.param(m, "weight", d, comp)
    b.param(m, "bias", d, comp)


def _vision_width(cfg: Mapping) -> int:
    return ConfigReader(cfg.get("vision_config") or {}).int("embed_dim", "hidden_size", default=VISION["embed_dim"])


def idefics_parts(cfg: Mapping, text_h: int) -> list:
    vc = {**VISION, **(cfg.get("vision_config") or {})}
    vd = _vision_width(cfg)
    b = TensorList()
    vit(b, "model.vision_model", ConfigReader({**vc, "hidden_size": vd}), "clip_vision_model")
    if ConfigReader(cfg).bool("use_resampler", False):
        r = ConfigReader(cfg.get("perceiver_config") or {})
        heads, hd = r.int("resampler_n_heads", default=16), r.int("resampler_head_dim", default=96)
        p = "model.perceiver_resampler"
        b.matrix(p, "latents", (r.int("resampler_n_latents", default=64), vd), "projector")
        for i in range(r.int("resampler_depth", default=6)):
            a, m = f"{p}.blocks.{i}.0", f"{p}.blocks.{i}.1"
            _ln(b, f"{a}.context_layer_norm", vd, "projector")
            _ln(b, f"{a}.latents_layer_norm", vd, "projector")
            if r.bool("qk_layer_norms_perceiver", False):
                _ln(b, f"{a}.q_layer_norm", hd, "projector")
                _ln(b, f"{a}.k_layer_norm", hd, "projector")
            for name in ("q_proj", "k_proj", "v_proj"):
                _lin(b, f"{a}.{name}", vd, heads * hd, "projector")
            _lin(b, f"{a}.output_proj", heads * hd, vd, "projector")
            _ln(b, f"{m}.ln", vd, "projector")
            _lin(b, f"{m}.fc", vd, 4 * vd, "projector")
            _lin(b, f"{m}.c_proj", 4 * vd, vd, "projector")
        _ln(b, f"{p}.layer_norm", vd, "projector")
    return b.tensors


def idefics_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    skip = ("additional_vocab_size", "cross_layer_interval", "qk_layer_norms", "alpha_type", "use_resampler",
            "perceiver_config", "vision_config")
    arch = build({k: v for k, v in text.items() if k not in skip} | {"model_type": "llama"})
    c = ConfigReader(text)
    h, inter = arch.hidden_size, c.int("intermediate_size", default=11008)
    heads = c.int("num_attention_heads", default=32)
    hd, extra = h // heads, c.int("additional_vocab_size", default=0, lo=0)
    interval, n = c.int("cross_layer_interval", default=1), c.int("num_hidden_layers", default=32)
    vd = _vision_width(cfg or {})
    alpha = h if c.str("alpha_type", "float") == "vector" else 1
    first, out = {}, []
    for t in arch.tensors:
        if t.layer is not None and t.layer not in first:
            first[t.layer] = len(out)
        out.append(t)
    head_extra = []
    if extra:
        b = TensorList()
        b.matrix("model.embed_tokens.additional_embedding", "weight", (extra, h), "embedding")
        b.matrix("lm_head.additional_fc", "weight", (extra, h), "lm_head")
        head_extra = b.tensors
    for i in reversed(range(n // interval)):
        b, q = TensorList(), f"model.layers.{i * interval}.gated_cross_attn"
        for name, d_in, d_out in (("q_proj", h, h), ("k_proj", vd, h), ("v_proj", vd, h), ("o_proj", h, h)):
            _lin(b, f"{q}.cross_attn.{name}", d_in, d_out, "attention")
        if c.bool("qk_layer_norms", False):
            b.param(f"{q}.cross_attn.q_layer_norm", "weight", hd, "norm")
            b.param(f"{q}.cross_attn.k_layer_norm", "weight", hd, "norm")
        for name, d_in, d_out in (("gate_proj", h, inter), ("down_proj", inter, h), ("up_proj", h, inter)):
            _lin(b, f"{q}.mlp.{name}", d_in, d_out, "mlp")
        b.param(f"{q}.input_layernorm", "weight", h, "norm")
        b.param(f"{q}.post_attention_layernorm", "weight", h, "norm")
        b.param(q, "alpha_cross_attn", alpha, "attention")
        b.param(q, "alpha_dense", alpha, "attention")
        # its own FSDP wrap unit (IdeficsPreTrainedModel._no_split_modules lists IdeficsGatedCrossAttentionLayer,
        # which accelerate's default transformer_layer_cls_to_wrap takes), counted in the layer it runs before
        unit = f"model.gated_cross_attn_layers.{i}"
        out[first[i * interval]:first[i * interval]] = [replace(t, block=unit) for t in b.tensors]
    tensors = tuple(out) + tuple(head_extra)
    frozen = config_frozen(ConfigReader({**text, **(cfg or {})}), tensors)
    gated = arch.block_linears + gated_linears(h, vd, inter)
    per_layer = tuple(gated if i % interval == 0 and i // interval < n // interval else arch.block_linears
                      for i in range(arch.num_layers))
    return replace(arch, tensors=tensors, support=SUPPORT, config_frozen=frozen, layer_linears=per_layer,
                   gated_cross_layers=tuple(i * interval for i in range(n // interval)))


def gated_linears(h: int, vd: int, inter: int) -> tuple[Linear, ...]:
    """One IdeficsGatedCrossAttentionLayer's nn.Linears (q/o_proj h x h, k/v_proj from the vision width vd, the
    Llama MLP), named under ``gated_cross_attn.`` so a block rule's lookup by plain name never takes them."""
    dims = (("q_proj", h, h), ("k_proj", vd, h), ("v_proj", vd, h), ("o_proj", h, h),
            ("gate_proj", h, inter), ("down_proj", inter, h), ("up_proj", h, inter))
    return tuple(Linear(f"gated_cross_attn.{n}", d_in, d_out) for n, d_in, d_out in dims)


def config_frozen(c: ConfigReader, tensors: tuple) -> tuple[str, ...]:
    """The tensor names IdeficsModel.freeze_relevant_params / IdeficsForVisionText2Text freeze at construction."""
    frozen = []
    if c.bool("freeze_text_layers", True):
        keep_linears = "Linear" in (c.cfg.get("freeze_text_module_exceptions") or ())
        frozen += [t.name for t in tensors
                   if (t.layer is not None and ".gated_cross_attn." not in t.name and not (keep_linears and t.linear))
                   or t.name in ("model.norm.weight", "model.embed_tokens.weight")]
    if c.bool("freeze_lm_head", False):
        frozen.append("lm_head.weight")
    return tuple(frozen)
