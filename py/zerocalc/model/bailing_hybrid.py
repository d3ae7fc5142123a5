"""Bailing Hybrid / Ling 3 (transformers 5.24 modeling_bailing_hybrid.py BailingHybridDecoderLayer): self_attn, mlp,
input_layernorm, post_attention_layernorm, where self_attn is

- in the ``full_attention`` layers DeepSeek-V2's multi-head latent attention (BailingHybridAttention: q_proj, or
  q_a_proj / q_a_layernorm / q_b_proj with q_lora_rank; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj;
  attention_bias on q_a, kv_a and o; moe.mla_attention) and the head-wise output gate g_proj (h -> heads);
- elsewhere BailingHybridDeltaAttention: q/k/v (h -> heads x d), a depthwise conv1d over 3 x heads x d (no bias),
  forget_gate (A_log (heads), dt_bias (heads x d), f_proj h -> heads x d), b_proj (h -> heads), a gated o_norm
  (d), o_proj, g_proj (h -> heads x d), no biases;

and mlp a SwiGLU MLP of intermediate_size in the ``dense`` layers of mlp_layer_types (default: the first
first_k_dense_replace = 2), else BailingHybridMoE: experts (E, 2I, h) / (E, h, I), the fp32 router (E x h,
F.linear(x.type(float32), w.type(float32)); e_score_correction_bias a buffer) and shared_experts of
n_shared_experts x moe_intermediate_size (moe.moe_block's "deepseek" layout). layer_types default: full attention
where (i + 1) % layer_group_size == 0. lm_head never tied (BailingHybridForCausalLM._tied_weights_keys is empty).

BailingHybridConfig.__post_init__ sets linear_head_dim = head_dim (class default 128), linear_num_heads =
num_attention_heads, linear_conv_kernel_dim = short_conv_kernel_size, and then head_dim = qk_rope_head_dim: a
saved config.json holds linear_head_dim and the rewritten head_dim (64), and the saved linear_* fields win when
the config is read back (PreTrainedConfig.__post_init__ sets the remaining kwargs after the class's own), so they
are read first here. The MTP layers (num_nextn_predict_layers) are not built.

The count is exact (tests/test_architectures.py). Activations: traced (memory/blocks_kimi_linear.py, each layer
of its own kind through ``layer_linears``: kimi_linear.kda_arch; tools/memtrace/kda_trace.py bailing_hybrid).
"""
from __future__ import annotations

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .kimi_linear import ffn_lins, kda_arch
from .moe import deepseek_ffn, is_sparse, mla_attention, mla_spec
from .recurrent import recurrent_arch


def bailing_hybrid(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=2560), c.int("vocab_size", default=157184)
    n_layers, heads = c.int("num_hidden_layers", default=42), c.int("num_attention_heads", default=32)
    inter, ei = c.int("intermediate_size", default=6144), c.int("moe_intermediate_size", default=768)
    d = c.int("linear_head_dim", "head_dim", default=128)
    lh = c.int("linear_num_heads", "num_attention_heads", default=32)
    kernel = c.int("linear_conv_kernel_dim", "short_conv_kernel_size", default=4)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        group = c.int("layer_group_size", default=6)
        kinds = ["full_attention" if (i + 1) % group == 0 else "linear_attention" for i in range(n_layers)]
    e = c.int("num_experts", "num_local_experts", default=512)
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_token", "num_experts_per_tok", default=8),
              expert_intermediate=ei,
              shared_intermediate=c.int("num_shared_experts", "n_shared_experts", default=1, lo=0) * ei,
              dense_layers=sum(1 for i in range(n_layers) if not is_sparse(c, i, 2)), router_fp32="cast")
    mla = {**mla_spec(c), "indexer": None}
    bias, tied = c.bool("attention_bias", False), False
    q = lh * d
    b = TensorList()
    kda_lins = (Linear("q_proj", h, q), Linear("k_proj", h, q), Linear("v_proj", h, q), Linear("f_proj", h, q),
                Linear("b_proj", h, lh), Linear("g_proj", h, q), Linear("o_proj", q, h))
    dense_lins, sparse_lins = ffn_lins(h, inter, moe)
    per_layer: dict = {}        # one tuple per layer kind (attention, sparse), shared by its layers
    layers = []
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        sparse = is_sparse(c, i, 2)
        if kinds[i] == "full_attention":
            out: list[Linear] = []
            mla_attention(b, p, h, heads, mla, out, bias=bias)
            b.linear(f"{a}.g_proj", h, heads, "attention")
            attn = (*out, Linear("g_proj", h, heads))
        else:
            attn = kda_lins
            for name in ("q_proj", "k_proj", "v_proj"):
                b.linear(f"{a}.{name}", h, q, "attention")
            b.matrix(f"{a}.conv1d", "weight", (3 * q, 1, kernel), "attention")
            b.param(f"{a}.forget_gate", "A_log", lh, "attention")
            b.param(f"{a}.forget_gate", "dt_bias", q, "attention")
            b.linear(f"{a}.forget_gate.f_proj", h, q, "attention")
            b.linear(f"{a}.b_proj", h, lh, "attention")
            b.norm(f"{a}.o_norm", d)
            b.linear(f"{a}.o_proj", q, h, "attention")
            b.linear(f"{a}.g_proj", h, q, "attention")
        deepseek_ffn(b, p, h, moe, inter, sparse)
        layers.append(per_layer.setdefault((attn, sparse), attn + (sparse_lins if sparse else dense_lins)))
    b.norm("model.norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = recurrent_arch(c, "bailing_hybrid", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=layers[-1],
                          heads=heads, kv=heads, hd=c.int("head_dim", default=d), inter=inter, moe=moe, what="")
    return kda_arch(arch, mla, layers)


BAILING_HYBRID = {"bailing_hybrid": bailing_hybrid}
