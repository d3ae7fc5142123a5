"""MiniMax-M3's language model, the text type ``minimax_m3_vl_text`` (transformers 5.24 modeling_minimax_m3_vl.py
MiniMaxM3VLForCausalLM; the composite minimax_m3_vl adds a vision tower, not modelled here). Per layer:

- self_attn: q/k/v/o (no biases), per-head q_norm / k_norm, and in the ``minimax_m3_sparse`` layers of layer_types
  a lightning indexer (q_proj h -> index_n_heads x index_head_dim, k_proj h -> index_head_dim, q_norm, k_norm);
- mlp: in the ``sparse`` layers of mlp_layer_types (default: all) gate (E x h, its e_score_correction_bias a
  buffer), experts (E, 2I, h) / (E, h, I) with I = intermediate_size, shared_experts (a fused gate_up_proj
  h -> 2 x shared_intermediate_size, down_proj); else a dense MLP of dense_intermediate_size;
- input_layernorm, post_attention_layernorm.
A checkpoint's sparse_attention_config (sparse_attention_freq, sparse_num_index_heads, sparse_index_dim) and
moe_layer_freq stand for layer_types, the index sizes and mlp_layer_types (MiniMaxM3VLTextConfig.__post_init__).
``model.norm``; lm_head tied with tie_word_embeddings (default off).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_minimax_m3.py, traced with full and
``minimax_m3_sparse`` layers (tools/memtrace/families.py minimax_m3 / minimax_m3sp, held within 3 % by
tests/test_family_grid.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def minimax_m3_text(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads, kv, hd = c.int("num_attention_heads"), c.int("num_key_value_heads", default=4), c.int("head_dim", default=128)
    e, inter = c.int("num_local_experts", default=128), c.int("intermediate_size", default=3072)
    si, di = c.int("shared_intermediate_size", default=3072), c.int("dense_intermediate_size", default=12288)
    sparse_cfg = c.cfg.get("sparse_attention_config") or {}
    ih = int(sparse_cfg.get("sparse_num_index_heads", c.int("index_n_heads", default=4)))
    idim = int(sparse_cfg.get("sparse_index_dim", c.int("index_head_dim", default=128)))
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        freq = sparse_cfg.get("sparse_attention_freq")
        kinds = ["minimax_m3_sparse" if f else "full_attention" for f in freq] if freq is not None \
            else ["full_attention"] * n_layers
    mlp_kinds = c.cfg.get("mlp_layer_types")
    if not isinstance(mlp_kinds, list):
        freq = c.cfg.get("moe_layer_freq")
        mlp_kinds = ["sparse" if f else "dense" for f in freq] if freq is not None else ["sparse"] * n_layers
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    per_layer: list = []
    shapes: dict = {}           # layers of one kind share one linears tuple (memory/activations.py caches by it)
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.linear(f"{a}.{name}", d_in, d_out, "attention")
        b.norm(f"{a}.q_norm", hd)
        b.norm(f"{a}.k_norm", hd)
        if kinds[i] == "minimax_m3_sparse":
            b.linear(f"{a}.indexer.q_proj", h, ih * idim, "attention")
            b.linear(f"{a}.indexer.k_proj", h, idim, "attention")
            b.norm(f"{a}.indexer.q_norm", idim)
            b.norm(f"{a}.indexer.k_norm", idim)
        if mlp_kinds[i] == "sparse":
            b.matrix(f"{p}.mlp.gate", "weight", (e, h), "router")
            b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, 2 * inter, h), "routed_experts")
            b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, inter), "routed_experts")
            b.linear(f"{p}.mlp.shared_experts.gate_up_proj", h, 2 * si, "shared_experts")
            b.linear(f"{p}.mlp.shared_experts.down_proj", si, h, "shared_experts")
        else:
            b.linear(f"{p}.mlp.gate_up_proj", h, 2 * di, "mlp")
            b.linear(f"{p}.mlp.down_proj", di, h, "mlp")
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        att = [Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
               Linear("o_proj", heads * hd, h)]
        mlp = ([Linear("gate_up_proj", h, 2 * inter, e), Linear("down_proj", inter, h, e),
                Linear("gate_up_proj", h, 2 * si), Linear("down_proj", si, h)] if mlp_kinds[i] == "sparse"
               else [Linear("gate_up_proj", h, 2 * di), Linear("down_proj", di, h)])
        if kinds[i] == "minimax_m3_sparse":
            # the indexer's projections (memory/blocks_minimax_m3.py reads a sparse layer off this one)
            att += [Linear("indexer.q_proj", h, ih * idim), Linear("indexer.k_proj", h, idim)]
        layer = tuple(att + mlp)
        per_layer.append(shapes.setdefault(layer, layer))
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h), Linear("gate_up_proj", h, 2 * si), Linear("down_proj", si, h))
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=4), expert_intermediate=inter,
              shared_intermediate=si, dense_layers=0)
    # memory/blocks_minimax_m3.py costs each layer from its own linears (traced, sparse-attention layers too)
    arch = recurrent_arch(c, "minimax_m3_vl_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          heads=heads, kv=kv, hd=hd, inter=si, moe=moe, family="llama", what="",
                          support="exact")
    return replace(arch, layer_linears=tuple(per_layer), dense_block_linears=per_layer[0])


MINIMAX_M3 = {"minimax_m3_vl_text": minimax_m3_text}
