"""HY-V4 (transformers 5.24 modeling_hy_v4.py HYV4DecoderLayer): DeepSeek-V3.2's sparse attention with hyper
connections. Per layer:

- self_attn (HYV4Attention): MLA (q_a_proj / q_a_layernorm / q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm,
  kv_b_proj, o_proj; attention_bias on q_a, kv_a and o), the lightning indexer (wq_b, wk, a biased k_norm,
  weights_proj; index_n_heads x index_head_dim) only in the ``full`` layers of indexer_types (default: layer 0
  and every 4th after layer 1), an output gate_proj (h -> heads x v_head_dim) and a sink per head;
- mlp: a SwiGLU MLP in the ``dense`` layers of mlp_layer_types (default: the first), else experts, the fp32
  TopkRouter gate and n_shared_experts x moe_intermediate_size shared_experts (moe.moe_block "deepseek");
- input_layernorm, post_attention_layernorm; attn_hc and ffn_hc (HYV4HyperConnection: fn (2N, N x h), base (2N),
  scale (2), N = hc_mult).
``model.norm``, ``model.hc_head`` (hc_fn (N, N x h), hc_base (N), hc_scale (1)); lm_head tied with
tie_word_embeddings (default off).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_hy_v4.py, traced on fake tensors
(tools/memtrace/hy_v4_trace.py, tests/data/hy_v4_trace.json, tests/test_hy_v4_blocks.py); ``layer_linears`` gives
each layer its MLP's kind (dense, or the shared expert beside the routed experts), ``hyper`` the stream count
(memory/activations.py's hyper-connected stack and head).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn, is_sparse, mla_attention, mla_spec
from .recurrent import recurrent_arch


def hy_v4(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads, inter = c.int("num_attention_heads"), c.int("intermediate_size")
    ei, n = c.int("moe_intermediate_size"), c.int("hc_mult", default=4)
    mla = mla_spec(c)
    index = (c.int("index_n_heads", default=16), c.int("index_head_dim", default=128))
    kinds = c.cfg.get("indexer_types")
    if not isinstance(kinds, list):
        kinds = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n_layers)]
    moe = MoE(num_experts=c.int("n_routed_experts", "num_local_experts"),
              experts_per_token=c.int("num_experts_per_tok", default=8), expert_intermediate=ei,
              shared_intermediate=c.int("n_shared_experts", default=1, lo=0) * ei,
              dense_layers=sum(1 for i in range(n_layers) if not is_sparse(c, i, 1)), router_fp32="cast")
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        b.param(a, "sinks", heads, "attention")
        mla_attention(b, p, h, heads, {**mla, "indexer": index if kinds[i] == "full" else None}, [], bias=bias)
        b.linear(f"{a}.gate_proj", h, heads * mla["v_head"], "attention")
        deepseek_ffn(b, p, h, moe, inter, is_sparse(c, i, 1))
        for hc in ("attn_hc", "ffn_hc"):
            b.matrix(f"{p}.{hc}", "fn", (2 * n, n * h), "other")
            b.param(f"{p}.{hc}", "base", 2 * n, "other")
            b.param(f"{p}.{hc}", "scale", 2, "other")
    b.norm("model.norm", h)
    b.matrix("model.hc_head", "hc_fn", (n, n * h), "other")
    b.param("model.hc_head", "hc_base", n, "other")
    b.param("model.hc_head", "hc_scale", 1, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    qk = mla["qk_nope"] + mla["qk_rope"]
    lins = (Linear("q_a_proj", h, mla["q_lora_rank"]), Linear("kv_a_proj_with_mqa", h, mla["kv_lora_rank"] + mla["qk_rope"]),
            Linear("q_b_proj", mla["q_lora_rank"], heads * qk), Linear("o_proj", heads * mla["v_head"], h),
            Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    arch = recurrent_arch(c, "hy_v4", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=heads, hd=mla["v_head"], inter=inter, moe=moe,
                          what="sparse latent attention, hyper connections and MoE are")
    # each layer's linears (memory/blocks_hy_v4.py): the MLA's (q_b_proj a·(nope + rope) wide, kv_b_proj
    # a·(nope + v)),
    # the attention's output gate (scoped: the MLP's gate_proj is another module), then the dense MLP's or the
    # routed experts (count E) and the shared expert's
    attn = (Linear("q_a_proj", h, mla["q_lora_rank"]),
            Linear("kv_a_proj_with_mqa", h, mla["kv_lora_rank"] + mla["qk_rope"]),
            Linear("q_b_proj", mla["q_lora_rank"], heads * qk),
            Linear("kv_b_proj", mla["kv_lora_rank"], heads * (mla["qk_nope"] + mla["v_head"])),
            Linear("self_attn.gate_proj", h, heads * mla["v_head"]), Linear("o_proj", heads * mla["v_head"], h))
    dense = attn + (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    shared = moe.shared_intermediate
    sparse = attn + (Linear("gate_up_proj", h, 2 * ei, moe.num_experts), Linear("down_proj", ei, h, moe.num_experts),
                     Linear("shared_experts.gate_proj", h, shared), Linear("shared_experts.up_proj", h, shared),
                     Linear("shared_experts.down_proj", shared, h))
    hyper = {"hc_mult": n, "rope": mla["qk_rope"], "q_lora_rank": mla["q_lora_rank"],
             "kv_lora_rank": mla["kv_lora_rank"], "qk_nope": mla["qk_nope"], "v_head": mla["v_head"],
             "index_topk": c.int("index_topk", default=2048), "indexer_full": tuple(k == "full" for k in kinds)}
    return replace(arch, hyper=hyper, support=SUPPORT,
                   layer_linears=tuple(sparse if is_sparse(c, i, 1) else dense for i in range(n_layers)))


SUPPORT = ("exact parameter count; activations traced (memory/blocks_hy_v4.py: hyper-connected streams, the "
           "output-gated MLA with sinks under eager, clamped experts, the fp32 lm_head; tools/memtrace/hy_v4_trace.py)")


HY_V4 = {"hy_v4": hy_v4}
