"""LFM3 (transformers 5.24 modeling_lfm3.py Lfm3DecoderLayer): LFM2's layers with sliding attention and sandwich
norms. Per ``layer_types`` entry (Lfm3Config's default: full attention at i % 4 == 2, sliding at i % 4 == 0 past 0,
else conv) either self_attn (q/k/v/o with attention_bias, per-head q_norm / k_norm, and with use_attention_gate
a g_proj h -> heads, no bias) or the short conv (depthwise conv (h, 1, conv_L_cache), in_proj h -> 3h, out_proj,
conv_bias on all three); then feed_forward w1 / w3 / w2, operator_norm, ffn_norm and with use_sandwich_norm
post_operator_norm, post_ffn_norm. ``model.embedding_norm`` after the layers; lm_head tied by default.

The count is exact (tests/test_architectures.py). Activations: memory/ssm_blocks.py lfm2_layer (traced:
tools/memtrace/ssm_trace.py lfm3, tests/data/lfm3_trace.json).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def lfm3(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=4), c.int("head_dim", default=128)
    inter = c.int("intermediate_size", default=7680)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        kinds = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
                 for i in range(n_layers)]
    att_bias, conv_bias = c.bool("attention_bias", False), c.bool("conv_bias", False)
    gate, sandwich = c.bool("use_attention_gate", True), c.bool("use_sandwich_norm", True)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if kinds[i] != "conv":
            a = f"{p}.self_attn"
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=att_bias)
            b.norm(f"{a}.q_norm", hd)
            b.norm(f"{a}.k_norm", hd)
            if gate:
                b.linear(f"{a}.g_proj", h, heads, "attention")
        else:
            b.matrix(f"{p}.conv.conv", "weight", (h, 1, c.int("conv_L_cache", default=3)), "attention")
            if conv_bias:
                b.param(f"{p}.conv.conv", "bias", h, "attention")
            b.linear(f"{p}.conv.in_proj", h, 3 * h, "attention", bias=conv_bias)
            b.linear(f"{p}.conv.out_proj", h, h, "attention", bias=conv_bias)
        for name, d_in, d_out in (("w1", h, inter), ("w3", h, inter), ("w2", inter, h)):
            b.linear(f"{p}.feed_forward.{name}", d_in, d_out, "mlp")
        for name in ("operator_norm", "ffn_norm") + (("post_operator_norm", "post_ffn_norm") if sandwich else ()):
            b.norm(f"{p}.{name}", h)
    b.norm("model.embedding_norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    mlp = (Linear("w1", h, inter), Linear("w3", h, inter), Linear("w2", inter, h))
    lins = (Linear("in_proj", h, 3 * h), Linear("out_proj", h, h)) + mlp
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h)) + ((Linear("g_proj", h, heads),) if gate else ()) + mlp
    # activations: memory/ssm_blocks.py lfm2_layer with the gate and sandwich norms (tools/memtrace/ssm_trace.py
    # lfm3); Lfm3RotaryEmbedding returns fp32 cos / sin, one pair per attention layer type
    types = {kind for kind in kinds[:n_layers] if kind != "conv"}
    ssm = {"layout": "lfm2", "residual_fp32": False, "sandwich": sandwich, "rope_dim": hd, "rope_bytes": 4,
           "rope_tables": len(types), "layers": tuple(lins if kind == "conv" else attn for kind in kinds[:n_layers])}
    arch = recurrent_arch(c, "lfm3", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=kv, hd=hd, inter=inter, what="", support="exact")
    return replace(arch, gated_mlp=True, ssm=ssm, dense_block_linears=attn)


LFM3 = {"lfm3": lfm3}
