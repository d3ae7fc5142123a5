"""Gemma 4's language model (transformers 5.24 modeling_gemma4.py Gemma4TextModel, Gemma4TextConfig's
defaults), a family of its own: per layer

- attention (Gemma4TextAttention): q_proj and q_norm over that layer's head_dim; unless the layer reuses an
  earlier layer's K/V (kv_sharing_modes "reuse": the last num_kv_shared_layers) k_norm, k_proj and v_proj
  (none where attention_k_eq_v on a full-attention layer; v_norm has no weight); o_proj; biases by
  attention_bias. The head_dim and kv heads of a layer come from ``per_layer_config`` (saved configs), or
  Gemma4TextConfig.__post_init__'s default: full-attention layers get global_head_dim (512) and, with
  attention_k_eq_v, num_global_key_value_heads;
- the gated MLP (Gemma4TextMLP: twice intermediate_size on kv-shared layers with use_double_wide_mlp),
  Gemma 2's four norms, with hidden_size_per_layer_input the per-layer input gate / projection / norm, and
  with enable_moe_block a router (proj, scale, per_expert_scale), fused experts and three more norms;

then ``norm``, and with per-layer inputs embed_tokens_per_layer (vocab_size_per_layer_input x layers x
hidden_size_per_layer_input), per_layer_model_projection and per_layer_projection_norm. A Gemma 4 (or
Gemma 4 Unified) composite without towers (Gemma4ForConditionalGeneration with vision_config and
audio_config null) is its language model and lm_head, tied by the top-level flag (default True).

Each layer's linears go to ``layer_linears`` (its head_dim, K/V projections or none, MLP width, per-layer input
gate), from which memory/blocks_gemma4.py costs its saved tensors layer by layer (traced: tools/memtrace/families.py
gemma4); the MoE block is not traced (``SUPPORT``)."""
from __future__ import annotations

from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList


# Gemma 4's MoE block (enable_moe_block: the dense MLP beside router and experts) has no traced rule yet
SUPPORT = ("exact parameter count; activations approximate (the MoE block is costed as a Gemma 4 dense block plus "
           "memory/blocks.py's routed experts; not traced)")


def _layer_types(c: ConfigReader, n: int) -> list:
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list) or len(kinds) < n:
        kinds = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    kinds = list(kinds[:n])
    kinds[-1] = "full_attention"      # __post_init__ forces the last layer to full attention
    return kinds


def _per_layer(c: ConfigReader, kinds: list, hd: int, kv: int) -> list[tuple[int, int]]:
    """(head_dim, kv heads) of each layer."""
    saved = c.cfg.get("per_layer_config")
    if isinstance(saved, Mapping):
        over = {int(k): v for k, v in saved.items() if isinstance(v, Mapping)}
    else:
        o = {"head_dim": c.int("global_head_dim", default=512)}
        if c.bool("attention_k_eq_v", False) and c.has("num_global_key_value_heads"):
            o["num_key_value_heads"] = c.int("num_global_key_value_heads")
        over = {i: o for i, k in enumerate(kinds) if k == "full_attention"}
    return [(int(over.get(i, {}).get("head_dim") or hd), int(over.get(i, {}).get("num_key_value_heads") or kv))
            for i in range(len(kinds))]


def _kv_reuse(c: ConfigReader, n: int) -> list[bool]:
    shared = c.int("num_kv_shared_layers", default=0, lo=0)
    return [i >= n - shared for i in range(n)]


def gemma4_text(c: ConfigReader, model_type: str = "gemma4_text", tied: bool | None = None,
                unified: bool = False) -> ModelArch:
    """``unified``: Gemma4UnifiedTextModel (modeling_gemma4_unified.py), the same block without per-layer
    inputs or the MoE block (Gemma4UnifiedTextConfig has neither field)."""
    h, n, vocab = c.int("hidden_size", default=2304), c.int("num_hidden_layers", default=30), c.int("vocab_size",
                                                                                                     default=262144)
    heads = c.int("num_attention_heads", default=8)
    kv, hd = c.int("num_key_value_heads", default=4), c.int("head_dim", default=256)
    inter = c.int("intermediate_size", default=9216)
    hpl = 0 if unified else c.int("hidden_size_per_layer_input", default=256, lo=0)
    bias, k_eq_v = c.bool("attention_bias", False), c.bool("attention_k_eq_v", False)
    double = c.bool("use_double_wide_mlp", False)
    moe_on = not unified and c.bool("enable_moe_block", False)
    e = c.int("num_experts", default=1) if moe_on else 0
    ei = c.int("moe_intermediate_size", default=inter) if moe_on else 0
    if tied is None:
        tied = c.bool("tie_word_embeddings", True)
    kinds = _layer_types(c, n)
    dims, reuse = _per_layer(c, kinds, hd, kv), _kv_reuse(c, n)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    lins: list[Linear] = []
    per_layer: list[tuple] = []
    interned: dict[tuple, tuple] = {}
    for i in range(n):
        p, (lhd, lkv) = f"model.layers.{i}", dims[i]
        a = f"{p}.self_attn"
        att = [Linear("q_proj", h, heads * lhd)]
        b.linear(f"{a}.q_proj", h, heads * lhd, "attention", bias=bias)
        b.norm(f"{a}.q_norm", lhd)
        if not reuse[i]:
            b.norm(f"{a}.k_norm", lhd)
            b.linear(f"{a}.k_proj", h, lkv * lhd, "attention", bias=bias)
            att.append(Linear("k_proj", h, lkv * lhd))
            if not (k_eq_v and kinds[i] != "sliding_attention"):
                b.linear(f"{a}.v_proj", h, lkv * lhd, "attention", bias=bias)
                att.append(Linear("v_proj", h, lkv * lhd))
        b.linear(f"{a}.o_proj", heads * lhd, h, "attention", bias=bias)
        att.append(Linear("o_proj", heads * lhd, h))
        w = inter * (2 if double and reuse[i] else 1)
        for name, d_in, d_out in (("gate_proj", h, w), ("up_proj", h, w), ("down_proj", w, h)):
            b.linear(f"{p}.mlp.{name}", d_in, d_out, "mlp")
            att.append(Linear(name, d_in, d_out))
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
        if hpl:
            b.linear(f"{p}.per_layer_input_gate", h, hpl, "other")
            b.linear(f"{p}.per_layer_projection", hpl, h, "other")
            b.norm(f"{p}.post_per_layer_input_norm", h)
        if moe_on:
            b.linear(f"{p}.router.proj", h, e, "router")
            b.param(f"{p}.router", "scale", h, "router")
            b.param(f"{p}.router", "per_expert_scale", e, "router")
            b.matrix(f"{p}.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
            b.matrix(f"{p}.experts", "down_proj", (e, h, ei), "routed_experts")
            att += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
            for name in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2", "pre_feedforward_layernorm_2"):
                b.norm(f"{p}.{name}", h)
        lins = att
        if hpl:
            att = att + [Linear("per_layer_input_gate", h, hpl), Linear("per_layer_projection", hpl, h)]
        # identical layers share one tuple: memory/activations.py costs each distinct tuple once
        per_layer.append(interned.setdefault(tuple(att), tuple(att)))
    b.norm("model.norm", h)
    if hpl:
        b.matrix("model.embed_tokens_per_layer", "weight",
                 (c.int("vocab_size_per_layer_input", default=262144), n * hpl), "embedding")
        b.linear("model.per_layer_model_projection", h, n * hpl, "other")
        b.norm("model.per_layer_projection_norm", hpl)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    moe = MoE(num_experts=e, experts_per_token=c.int("top_k_experts", default=1), expert_intermediate=ei,
              shared_intermediate=inter, dense_layers=0) if moe_on else None
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="gemma", hidden_size=h, num_layers=n,
        num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter, vocab_size=vocab,
        tied_embeddings=tied, max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=True, norm="rmsnorm",
        norms_per_layer=4, qk_norm="head", causal_lm=True, moe=moe, mla=None, attn_softcap=False,
        final_softcap=bool(c.cfg.get("final_logit_softcapping")), dropout=0.0, tensors=tuple(b.tensors),
        block_linears=tuple(lins), dense_block_linears=tuple(lins), layer_linears=tuple(per_layer),
        support=SUPPORT if moe_on else "exact")


def gemma4_without_towers(cfg: Mapping) -> ModelArch:
    """Gemma4ForConditionalGeneration whose vision_config and audio_config are null: the language model of
    text_config (Gemma4TextConfig's defaults when absent) and lm_head tied by the top-level flag."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), Mapping) else {}
    tied = cfg.get("tie_word_embeddings", True) is not False
    model_type = cfg.get("model_type", "gemma4")
    return gemma4_text(ConfigReader({**text, "name": cfg.get("name", model_type)}), model_type, tied,
                       unified=model_type == "gemma4_unified")


def gemma4_unified_text(c: ConfigReader) -> ModelArch:
    return gemma4_text(c, "gemma4_unified_text", unified=True)
