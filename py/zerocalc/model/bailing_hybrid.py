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

The count is exact (tests/test_architectures.py). Activations: memory/blocks_kimi_linear.py (Kimi Linear's rule with
Bailing's forget gate, output gates and RoPE), each layer from its own linears (``layer_linears``), traced with fla's
chunk_kda and causal-conv1d stood in (tools/memtrace/kda_trace.py bailing_hybrid, tests/test_bailing_hybrid_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn, is_sparse, mla_attention, mla_spec
from .recurrent import recurrent_arch

SUPPORT = ("exact parameter count; activations traced (memory/blocks_kimi_linear.py: KDA with fla's chunk_kda "
           "and causal-conv1d stood in, gated MLA, MoE; tools/memtrace/kda_trace.py bailing_hybrid)")


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
    kda = (Linear("q_proj", h, q), Linear("k_proj", h, q), Linear("v_proj", h, q), Linear("f_proj", h, q),
           Linear("b_proj", h, lh), Linear("g_proj", h, q), Linear("o_proj", q, h))
    qk = mla["qk_nope"] + mla["qk_rope"]
    att = [Linear("q_a_proj", h, mla["q_lora_rank"]), Linear("q_b_proj", mla["q_lora_rank"], heads * qk)] \
        if mla["q_lora_rank"] else [Linear("q_proj", h, heads * qk)]
    att += [Linear("kv_a_proj_with_mqa", h, mla["kv_lora_rank"] + mla["qk_rope"]),
            Linear("kv_b_proj", mla["kv_lora_rank"], heads * (mla["qk_nope"] + mla["v_head"])),
            Linear("o_proj", heads * mla["v_head"], h), Linear("g_proj", h, heads)]
    si = moe.shared_intermediate
    sparse = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e), Linear("gate_proj", h, si),
              Linear("up_proj", h, si), Linear("down_proj", si, h))
    dense = (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    shapes: dict = {}
    per_layer = []
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        if kinds[i] == "full_attention":
            mla_attention(b, p, h, heads, mla, [], bias=bias)
            b.linear(f"{a}.g_proj", h, heads, "attention")
        else:
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
        deepseek_ffn(b, p, h, moe, inter, is_sparse(c, i, 2))
        lins = (tuple(att) if kinds[i] == "full_attention" else kda) + (sparse if is_sparse(c, i, 2) else dense)
        per_layer.append(shapes.setdefault(lins, lins))
    b.norm("model.norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    # memory/blocks_kimi_linear.py costs each layer from its own linears (the MLA layers as memory/blocks.py
    # llama_block's latent attention: arch.mla); head_dim: the rotary embedding's (qk_rope_head_dim), whose cos / sin
    # the head keeps
    arch = recurrent_arch(c, "bailing_hybrid", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=per_layer[-1],
                          heads=heads, kv=heads, hd=mla["qk_rope"], inter=inter, moe=moe, family="llama", what="",
                          support=SUPPORT)
    return replace(arch, layer_linears=tuple(per_layer), dense_block_linears=per_layer[0], mla=mla)


BAILING_HYBRID = {"bailing_hybrid": bailing_hybrid}
