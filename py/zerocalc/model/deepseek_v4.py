"""DeepSeek-V4 (transformers 5.24 modeling_deepseek_v4.py DeepseekV4DecoderLayer). Per layer:

- self_attn (DeepseekV4Attention, one shared KV head): q_a_proj (h -> q_lora_rank), q_a_norm, q_b_proj (-> heads x d),
  kv_proj (h -> d), kv_norm, the grouped output projection o_a_proj (DeepseekV4GroupedLinear: weight
  (o_groups x o_lora_rank, heads x d / o_groups)) and o_b_proj (o_groups x o_lora_rank -> h), a sink per head, and
  a compressor by layer_types: none in ``sliding_attention``; ``heavily_compressed_attention`` kv_proj / gate_proj
  (h -> d), position_bias (rate, d), kv_norm (d); ``compressed_sparse_attention`` the same at 2d plus its indexer
  (kv_proj / gate_proj h -> 2 x index_head_dim, position_bias, kv_norm, q_b_proj q_lora_rank -> index heads x dim,
  scorer.weights_proj h -> index heads). Rates: compress_rates (default 4 / 128);
- mlp (DeepseekV4SparseMoeBlock, every layer): gate (E x h; the hash router's tid2eid and the top-k router's
  correction bias are buffers), experts (E, 2I, h) / (E, h, I) and one shared_experts MLP of I (mlp_bias),
  I = moe_intermediate_size;
- input_layernorm, post_attention_layernorm; attn_hc / ffn_hc (fn ((2 + N) N, N h), base ((2 + N) N), scale (3),
  N = hc_mult).
``model.norm``, ``model.hc_head`` (hc_fn (N, N h), hc_base (N), hc_scale (1)); lm_head tied with tie_word_embeddings
(default off). layer_types default (DeepseekV4Config): two HCA layers, then CSA / HCA alternating; a legacy
compress_ratios list (0 / 4 / 128) stands for it.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_hyper.py, traced on fake tensors
(tools/memtrace/moe_trace.py deepseek_v4, tests/data/deepseek_v4_trace.json, tests/test_deepseek_v4_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch

RATIO = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}


def _compressor(b: TensorList, m: str, h: int, width: int, rate: int, norm: int) -> None:
    b.linear(f"{m}.kv_proj", h, width, "attention")
    b.linear(f"{m}.gate_proj", h, width, "attention")
    b.matrix(m, "position_bias", (rate, width), "attention")
    b.norm(f"{m}.kv_norm", norm)


def hyper_connection(b: TensorList, m: str, n: int, h: int) -> None:
    """A manifold-constrained hyper-connection (DeepseekV4HyperConnection, Glm5NextTextHyperConnection): fn
    ((2 + N) N, N h), base ((2 + N) N) and scale (3), N = hc_mult streams of width h."""
    b.matrix(m, "fn", ((2 + n) * n, n * h), "other")
    b.param(m, "base", (2 + n) * n, "other")
    b.param(m, "scale", 3, "other")


def deepseek_v4(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads, d, qr = c.int("num_attention_heads"), c.int("head_dim", default=512), c.int("q_lora_rank", default=1024)
    g, olr = c.int("o_groups", default=8), c.int("o_lora_rank", default=1024)
    ih, idim = c.int("index_n_heads", default=64), c.int("index_head_dim", default=128)
    e, ei, n = c.int("n_routed_experts", "num_local_experts"), c.int("moe_intermediate_size"), c.int("hc_mult", default=4)
    rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128, **(c.cfg.get("compress_rates") or {})}
    for kind, legacy in (("compressed_sparse_attention", "compress_rate_csa"), ("heavily_compressed_attention",
                                                                                 "compress_rate_hca")):
        if c.has(legacy):                    # DeepseekV4Config.__post_init__ folds the legacy scalars in
            rates[kind] = c.int(legacy)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        legacy = c.cfg.get("compress_ratios")
        kinds = [RATIO[r] for r in legacy] if isinstance(legacy, list) else \
            ["heavily_compressed_attention"] * min(n_layers, 2) + [
                "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
                for i in range(max(n_layers - 2, 0))]
    mlp_bias, tied = c.bool("mlp_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        b.param(a, "sinks", heads, "attention")
        b.linear(f"{a}.q_a_proj", h, qr, "attention")
        b.norm(f"{a}.q_a_norm", qr)
        b.linear(f"{a}.q_b_proj", qr, heads * d, "attention")
        b.linear(f"{a}.kv_proj", h, d, "attention")
        b.norm(f"{a}.kv_norm", d)
        b.linear(f"{a}.o_a_proj", heads * d // g, g * olr, "attention")
        b.linear(f"{a}.o_b_proj", g * olr, h, "attention")
        if kinds[i] == "heavily_compressed_attention":
            _compressor(b, f"{a}.compressor", h, d, rates[kinds[i]], d)
        elif kinds[i] == "compressed_sparse_attention":
            rate = rates[kinds[i]]
            _compressor(b, f"{a}.compressor", h, 2 * d, rate, d)
            _compressor(b, f"{a}.compressor.indexer", h, 2 * idim, rate, idim)
            b.linear(f"{a}.compressor.indexer.q_b_proj", qr, ih * idim, "attention")
            b.linear(f"{a}.compressor.indexer.scorer.weights_proj", h, ih, "attention")
        m = f"{p}.mlp"
        b.matrix(f"{m}.gate", "weight", (e, h), "router")
        b.matrix(f"{m}.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{m}.experts", "down_proj", (e, h, ei), "routed_experts")
        for name, d_in, d_out in (("gate_proj", h, ei), ("up_proj", h, ei), ("down_proj", ei, h)):
            b.linear(f"{m}.shared_experts.{name}", d_in, d_out, "shared_experts", bias=mlp_bias)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        for hc in ("attn_hc", "ffn_hc"):
            hyper_connection(b, f"{p}.{hc}", n, h)
    b.norm("model.norm", h)
    b.matrix("model.hc_head", "hc_fn", (n, n * h), "other")
    b.param("model.hc_head", "hc_base", n, "other")
    b.param("model.hc_head", "hc_scale", 1, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_a_proj", h, qr), Linear("kv_proj", h, d), Linear("q_b_proj", qr, heads * d),
            Linear("o_b_proj", g * olr, h), Linear("gate_proj", h, ei), Linear("up_proj", h, ei),
            Linear("down_proj", ei, h))
    k = c.int("num_experts_per_tok", default=6)
    moe = MoE(num_experts=e, experts_per_token=k, expert_intermediate=ei, shared_intermediate=ei, dense_layers=0)
    arch = recurrent_arch(c, "deepseek_v4", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          heads=heads, kv=1, hd=d, inter=ei, moe=moe,
                          what="compressed sparse attention, hyper connections and MoE are")
    # each layer's linears by its kind (memory/blocks_hyper.py reads the compressor's from them): the block's, the
    # routed experts (count E), and a compressor's kv_proj at d (HCA) or 2d (CSA) with the CSA indexer's
    experts = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e))
    by_kind = {"sliding_attention": lins + experts,
               "heavily_compressed_attention": lins + experts + (Linear("compressor.kv_proj", h, d),
                                                                 Linear("compressor.gate_proj", h, d)),
               "compressed_sparse_attention": lins + experts + (
                   Linear("compressor.kv_proj", h, 2 * d), Linear("compressor.gate_proj", h, 2 * d),
                   Linear("indexer.kv_proj", h, 2 * idim), Linear("indexer.gate_proj", h, 2 * idim),
                   Linear("indexer.q_b_proj", qr, ih * idim), Linear("indexer.weights_proj", h, ih))}
    hyper = {"hc_mult": n, "sinkhorn_iters": c.int("hc_sinkhorn_iters", default=20), "q_lora_rank": qr,
             "o_groups": g, "o_lora_rank": olr, "rope": c.int("qk_rope_head_dim", default=64),
             "index_heads": ih, "index_dim": idim, "index_topk": c.int("index_topk", default=512),
             "rates": rates}
    return replace(arch, hyper=hyper, layer_linears=tuple(by_kind[kinds[i]] for i in range(n_layers)),
                   support="exact")      # activations: memory/blocks_hyper.py (tests/test_deepseek_v4_blocks.py)


DEEPSEEK_V4 = {"deepseek_v4": deepseek_v4}
