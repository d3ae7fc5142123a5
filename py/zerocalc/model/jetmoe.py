"""JetMoE (transformers 5.24 modeling_jetmoe.py JetMoeDecoderLayer): a mixture of attention heads and a mixture
of MLP experts in every layer, both of JetMoeParallelExperts (3-D weights, not nn.Linear: PEFT cannot target
them) routed by a JetMoeTopKGating ``router.layer`` (E x h, an nn.Linear):

- ``mlp`` (JetMoeMoE): bias (h), input_linear (E, 2I, h), output_linear (E, h, I), router.layer;
- input_layernorm, post_attention_layernorm (RMSNorm, h);
- ``self_attention`` (JetMoeAttention): experts (JetMoeMoA: bias (h), input_linear (E, kv x d, h) the query
  experts, output_linear (E, h, kv x d), router.layer), then kv_proj (h -> 2 x kv x d, no bias);
  kv = num_key_value_heads, d = kv_channels, E = num_local_experts; top-k = num_experts_per_tok
  (num_attention_heads = kv x top-k, JetMoeConfig.__post_init__).
``model.norm``; lm_head tied by default (tie_word_embeddings True).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_moe.py jetmoe_block, traced
(tools/memtrace/moe_trace.py jetmoe with a balanced router).
"""
from __future__ import annotations

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def jetmoe(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    e, k = c.int("num_local_experts", default=8), c.int("num_experts_per_tok", default=2)
    kv, d = c.int("num_key_value_heads", default=16), c.int("kv_channels", default=128)
    inter, tied = c.int("intermediate_size", default=5632), c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        _experts(b, f"{p}.mlp", h, e, 2 * inter, inter, "routed_experts")
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        _experts(b, f"{p}.self_attention.experts", h, e, kv * d, kv * d, "attention")
        b.linear(f"{p}.self_attention.kv_proj", h, 2 * kv * d, "attention")
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("kv_proj", h, 2 * kv * d), Linear("layer", h, e), Linear("input_linear", h, 2 * inter, e),
            Linear("output_linear", inter, h, e))
    moe = MoE(num_experts=e, experts_per_token=k, expert_intermediate=inter, shared_intermediate=0, dense_layers=0)
    return recurrent_arch(c, "jetmoe", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=kv * k,
                          kv=kv, hd=d, inter=inter, moe=moe,
                          what="mixture-of-attention and MoE block is", support="exact")


def _experts(b: TensorList, m: str, h: int, e: int, d_in_out: int, d_back: int, comp: str) -> None:
    """JetMoeMoE / JetMoeMoA: bias (h), input_linear (E, d_in_out, h), output_linear (E, h, d_back), router."""
    b.param(m, "bias", h, comp)
    b.matrix(f"{m}.input_linear", "weight", (e, d_in_out, h), comp)
    b.matrix(f"{m}.output_linear", "weight", (e, h, d_back), comp)
    b.linear(f"{m}.router.layer", h, e, "router")


JETMOE = {"jetmoe": jetmoe}
