"""OLMo Hybrid (transformers 5.24 modeling_olmo_hybrid.py): per ``layer_types`` entry (OlmoHybridConfig's default:
full attention every 4th layer, at least the last one) either

- OlmoHybridAttentionDecoderLayer: OLMo 2's block: self_attn q/k/v/o (attention_bias), q_norm / k_norm over the
  whole projection, mlp (gate/up/down), post_attention_layernorm and post_feedforward_layernorm (norm after
  each sublayer), or
- OlmoHybridLinearAttentionDecoderLayer: mlp, input_layernorm, post_attention_layernorm and linear_attn, a Gated
  DeltaNet: q/k (h -> key heads x key dim), v and g (h -> value heads x value dim), a/b (h -> value heads), o_proj,
  a depthwise conv1d (2 key + value dims, kernel linear_conv_kernel_dim, no bias), A_log and dt_bias (value heads)
  and a gated o_norm over the value head dim. Defaults: key / value heads = num_attention_heads, key dim
  int(0.75 h / key heads), value dim 2 x key dim.
``model.norm``; lm_head untied by default.

The count is exact (tests/test_architectures.py). Activations: memory/deltanet.py olmo_hybrid_layer (the causal-conv1d
and fla kernels' saved sets, traced: tools/memtrace/ssm_trace.py olmo_hybrid).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import llama_lins, recurrent_arch


def olmo_hybrid(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), c.int("head_dim", default=h // heads)
    inter, bias = c.int("intermediate_size"), c.bool("attention_bias", False)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n_layers)]
        if "full_attention" not in kinds:
            kinds[-1] = "full_attention"
    nk, nv = c.int("linear_num_key_heads", default=heads), c.int("linear_num_value_heads", default=heads)
    dk = c.int("linear_key_head_dim", default=int(0.75 * h / nk))
    dv = c.int("linear_value_head_dim", default=2 * dk)
    kernel, tied = c.int("linear_conv_kernel_dim", default=4), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")

    def mlp(p: str) -> None:
        b.swiglu(f"{p}.mlp", h, inter)

    for i, kind in enumerate(kinds[:n_layers]):
        p = f"model.layers.{i}"
        if kind == "linear_attention":
            mlp(p)
            b.norm(f"{p}.input_layernorm", h)
            b.norm(f"{p}.post_attention_layernorm", h)
            a = f"{p}.linear_attn"
            for name, d_out in (("q_proj", nk * dk), ("k_proj", nk * dk), ("v_proj", nv * dv), ("a_proj", nv),
                                ("b_proj", nv), ("g_proj", nv * dv)):
                b.linear(f"{a}.{name}", h, d_out, "attention")
            b.linear(f"{a}.o_proj", nv * dv, h, "attention")
            b.matrix(f"{a}.conv1d", "weight", (2 * nk * dk + nv * dv, 1, kernel), "attention")
            b.param(a, "A_log", nv, "attention")
            b.param(a, "dt_bias", nv, "attention")
            b.norm(f"{a}.o_norm", dv)
        else:
            a = f"{p}.self_attn"
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=bias)
            b.norm(f"{a}.q_norm", heads * hd)
            b.norm(f"{a}.k_norm", kv * hd)
            mlp(p)
            b.norm(f"{p}.post_attention_layernorm", h)
            b.norm(f"{p}.post_feedforward_layernorm", h)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = llama_lins(h, heads, kv, hd, inter)
    # activations: memory/deltanet.py olmo_hybrid_layer, each layer its kind's linears (tools/memtrace/ssm_trace.py
    # olmo_hybrid, tests/data/olmo_hybrid_trace.json)
    mlp = lins[4:]
    linear = tuple(Linear(name, h, d_out) for name, d_out in (
        ("q_proj", nk * dk), ("k_proj", nk * dk), ("v_proj", nv * dv), ("a_proj", nv), ("b_proj", nv),
        ("g_proj", nv * dv))) + (Linear("o_proj", nv * dv, h),) + mlp
    ssm = {"layout": "olmo_hybrid", "residual_fp32": False, "fp32_norm": "product",
           "deltanet": {"key": nk * dk, "value": nv * dv, "nk": nk, "nv": nv,
                        "neg_eigval": c.bool("linear_allow_neg_eigval", True)},
           "layers": tuple(linear if kind == "linear_attention" else lins for kind in kinds[:n_layers])}
    rope = c.cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope.get("rope_theta") is not None:
        # OlmoHybridModel builds rotary_emb only then ("Released ckpt don't use any ROPE")
        ssm |= {"rope_dim": hd, "rope_bytes": 4}
    arch = recurrent_arch(c, "olmo_hybrid", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          heads=heads, kv=kv, hd=hd, inter=inter, what="", support="exact")
    return replace(arch, gated_mlp=True, ssm=ssm)


OLMO_HYBRID = {"olmo_hybrid": olmo_hybrid}
