"""DBRX (modeling_dbrx.py DbrxForCausalLM, transformers 5.24): ``transformer.wte``; blocks of
norm_attn_norm (norm_1, attn.Wqkv fused to d + 2·kv_n_heads·head_dim, attn.out_proj, norm_2: LayerNorms
without bias, linears without bias) and ffn (router.layer E x d, experts.mlp w1 / v1 / w2 each stored as one
(E·ffn_hidden_size, d) matrix); ``transformer.norm_f``; an untied lm_head. Sizes from d_model, n_heads,
n_layers and the nested attn_config (kv_n_heads) / ffn_config (ffn_hidden_size, moe_num_experts,
moe_top_k)."""
from __future__ import annotations

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList


def dbrx(c: ConfigReader) -> ModelArch:
    d = c.int("d_model")
    heads, n_layers, vocab = c.int("n_heads"), c.int("n_layers"), c.int("vocab_size")
    attn = ConfigReader(c.cfg.get("attn_config") or {})
    ffn = ConfigReader(c.cfg.get("ffn_config") or {})
    kv = attn.int("kv_n_heads", default=1)
    hd = d // heads
    inter = ffn.int("ffn_hidden_size", default=3584)
    e, k = ffn.int("moe_num_experts", default=4), ffn.int("moe_top_k", default=1)
    tied = c.bool("tie_word_embeddings", False)
    qkv = d + 2 * kv * hd
    b = TensorList()
    b.matrix("transformer.wte", "weight", (vocab, d), "embedding")
    for i in range(n_layers):
        p = f"transformer.blocks.{i}"
        b.norm(f"{p}.norm_attn_norm.norm_1", d)
        b.linear(f"{p}.norm_attn_norm.attn.Wqkv", d, qkv, "attention")
        b.linear(f"{p}.norm_attn_norm.attn.out_proj", d, d, "attention")
        b.norm(f"{p}.norm_attn_norm.norm_2", d)
        b.matrix(f"{p}.ffn.router.layer", "weight", (e, d), "router")
        for name in ("w1", "v1", "w2"):
            b.matrix(f"{p}.ffn.experts.mlp", name, (e * inter, d), "routed_experts")
    b.norm("transformer.norm_f", d)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, d), "lm_head", "lm_head")
    lins = (Linear("Wqkv", d, qkv), Linear("out_proj", d, d), Linear("gate_up_proj", d, 2 * inter, e),
            Linear("down_proj", inter, d, e))
    return ModelArch(
        name=c.str("name", "dbrx"), model_type="dbrx", family="dbrx", hidden_size=d, num_layers=n_layers,
        num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter, vocab_size=vocab,
        tied_embeddings=tied, max_positions=c.cfg.get("max_seq_len"), gated_mlp=True, norm="layernorm",
        norms_per_layer=2, qk_norm="", causal_lm=True,
        moe=MoE(num_experts=e, experts_per_token=k, expert_intermediate=inter, shared_intermediate=0, dense_layers=0),
        mla=None, attn_softcap=False, final_softcap=False, dropout=0.0, tensors=tuple(b.tensors),
        block_linears=lins, dense_block_linears=lins,
        support="exact")
