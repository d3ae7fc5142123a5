"""Doge (transformers 5.24 modeling_doge.py DogeDecoderLayer): input_layernorm; self_attn = q/k/v (attention_bias),
the dynamic mask's A (kv heads) and dt_proj (kv x d -> kv, attention_bias), o_proj, per-head q_norm / k_norm;
input_residual (h); post_attention_layernorm; the MLP: gate/up/down (mlp_bias), or with is_moe DogeCDMoE, the same
three as a shared expert plus router_gate (h -> 2 x floor(sqrt(E)), no bias) and the retrieval experts'
down_embed / up_embed (E x h embeddings); post_attention_residual (h). ``model.norm``; lm_head untied by default.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_doge.py's layer (Llama's with per-head
q/k norms, the dynamic mask, the learned residual scales and the CDMoE; traced: tools/memtrace/own_blocks_trace.py
doge).
"""
from __future__ import annotations

import math
from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def doge(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), c.int("head_dim", default=h // heads)
    inter = c.int("intermediate_size")
    att_bias, mlp_bias = c.bool("attention_bias", False), c.bool("mlp_bias", False)
    moe, e = c.bool("is_moe", False), c.int("num_experts", default=16384)
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        b.norm(f"{p}.input_layernorm", h)
        b.qkv(a, h, heads, kv, hd, att_bias)
        b.param(a, "A", kv, "attention")
        b.linear(f"{a}.dt_proj", kv * hd, kv, "attention", bias=att_bias)
        b.linear(f"{a}.o_proj", heads * hd, h, "attention", bias=att_bias)
        b.norm(f"{a}.q_norm", hd)
        b.norm(f"{a}.k_norm", hd)
        b.param(p, "input_residual", h, "other")
        b.norm(f"{p}.post_attention_layernorm", h)
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{p}.mlp.{name}", d_in, d_out, "mlp", bias=mlp_bias)
        if moe:
            b.linear(f"{p}.mlp.router_gate", h, 2 * math.floor(math.sqrt(e)), "router")
            b.matrix(f"{p}.mlp.down_embed", "weight", (e, h), "routed_experts")
            b.matrix(f"{p}.mlp.up_embed", "weight", (e, h), "routed_experts")
        b.param(p, "post_attention_residual", h, "other")
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("dt_proj", kv * hd, kv), Linear("o_proj", heads * hd, h), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    if moe:
        # DogeCDMoE's router_gate, and its retrieval experts as one h -> 2·num_experts_per_tok pseudo-linear: the
        # two per-token matmuls over the k picked down_embed / up_embed rows (their multiply-adds for step/flops.py;
        # memory/blocks_doge.py reads k off it); no nn.Linear of that name exists, so no LoRA target matches it
        k = c.int("num_experts_per_tok", default=64)
        lins += (Linear("router_gate", h, 2 * math.floor(math.sqrt(e))), Linear("retrieval_experts", h, 2 * k))
    arch = recurrent_arch(c, "doge", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=kv, hd=hd, inter=inter, what="dynamic-mask attention block is", family="llama")
    # memory/blocks_doge.py: a Llama-lineage layer with per-head q/k norms (traced: tools/memtrace/
    # own_blocks_trace.py doge)
    return replace(arch, gated_mlp=True, qk_norm="head", support=TRACED)


TRACED = "exact parameter count; activations traced (memory/blocks_doge.py; tools/memtrace/own_blocks_trace.py)"
DOGE = {"doge": doge}
