"""ZAYA1 (transformers 5.24 modeling_zaya.py ZayaDecoderLayer). Per layer:

- self_attn: o_proj, qkv_proj (ZayaCCAProjection, compressed convolutional attention: q_proj (h -> heads x d),
  k_proj (h -> kv x d), v_proj_current / v_proj_delayed (h -> kv x d / 2 each), all with attention_bias; then over
  C = (heads + kv) x d channels a depthwise conv (C, 1, cca_time0) and a grouped conv (C, C / (heads + kv),
  cca_time1), both biased), qk_norm (a temp per kv head);
- mlp: gate (ZayaRouter: down_proj h -> router_hidden_size with bias, router_states_scale after layer 0, router_mlp
  = norm, fc1 / fc2 (biased), out_proj to experts + 1 skip class; balancing_biases a buffer), experts (E, 2I, h) /
  (E, h, I), I = moe_intermediate_size;
- input_layernorm, post_attention_layernorm, post_attention_residual_scale and post_mlp_residual_scale (four h
  vectors each).
``model.norm``, the model's input_hidden_states_scale / bias; lm_head (lm_head_bias) tied by default.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_zaya.py, traced
(tools/memtrace/more_moe_trace.py zaya, tests/test_zaya_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


SUPPORT = ("exact parameter count; activations traced (memory/blocks_zaya.py: compressed convolutional attention, "
           "the fp32 residual stream's scalings, the router MLP, grouped_mm experts; tools/memtrace/more_moe_trace.py)")


def zaya(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads, kv, d = c.int("num_attention_heads"), c.int("num_key_value_heads"), c.int("head_dim", default=128)
    e, ei, rh = c.int("num_experts"), c.int("moe_intermediate_size"), c.int("router_hidden_size", default=256)
    t0, t1 = c.int("cca_time0", default=2), c.int("cca_time1", default=2)
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", True)
    ch = (heads + kv) * d
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a, q = f"{p}.self_attn", f"{p}.self_attn.qkv_proj"
        b.linear(f"{a}.o_proj", heads * d, h, "attention", bias=bias)
        for name, d_out in (("q_proj", heads * d), ("k_proj", kv * d), ("v_proj_current", kv * d // 2),
                            ("v_proj_delayed", kv * d // 2)):
            b.linear(f"{q}.{name}", h, d_out, "attention", bias=bias)
        for name, shape in (("conv_qk_depthwise", (ch, 1, t0)), ("conv_qk_grouped", (ch, ch // (heads + kv), t1))):
            b.matrix(f"{q}.{name}", "weight", shape, "attention")
            b.param(f"{q}.{name}", "bias", ch, "attention")
        b.param(f"{a}.qk_norm", "temp", kv, "attention")
        g = f"{p}.mlp.gate"
        b.linear(f"{g}.down_proj", h, rh, "router", bias=True)
        if i:
            b.param(g, "router_states_scale", rh, "router")
        b.norm(f"{g}.router_mlp.norm", rh)
        b.linear(f"{g}.router_mlp.fc1", rh, rh, "router", bias=True)
        b.linear(f"{g}.router_mlp.fc2", rh, rh, "router", bias=True)
        b.linear(f"{g}.router_mlp.out_proj", rh, e + 1, "router")
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, ei), "routed_experts")
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        for scale in ("post_attention_residual_scale", "post_mlp_residual_scale"):
            for name in ("hidden_states_scale", "hidden_states_bias", "residual_scale", "residual_bias"):
                b.param(f"{p}.{scale}", name, h, "other")
    b.norm("model.norm", h)
    b.param("model", "input_hidden_states_scale", h, "other")
    b.param("model", "input_hidden_states_bias", h, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    if c.bool("lm_head_bias", False):
        b.param("lm_head", "bias", vocab, "lm_head")
    # memory/blocks_zaya.py: the router's linears under their module paths (its down_proj is not the experts')
    lins = (Linear("q_proj", h, heads * d), Linear("k_proj", h, kv * d), Linear("v_proj_current", h, kv * d // 2),
            Linear("v_proj_delayed", h, kv * d // 2), Linear("o_proj", heads * d, h), Linear("gate.down_proj", h, rh),
            Linear("router_mlp.fc1", rh, rh), Linear("router_mlp.fc2", rh, rh),
            Linear("router_mlp.out_proj", rh, e + 1),
            Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e))
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=1), expert_intermediate=ei,
              shared_intermediate=0, dense_layers=0)
    arch = recurrent_arch(c, "zaya", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads, kv=kv,
                          hd=d, inter=ei, moe=moe, family="llama", what="", support=SUPPORT)
    return replace(arch, gated_mlp=True)


ZAYA = {"zaya": zaya}
