"""Kimi Linear (transformers 5.24 modeling_kimi_linear.py KimiLinearDecoderLayer): self_attn, mlp,
input_layernorm, post_attention_layernorm, where self_attn is

- in the ``full_attention`` layers DeepSeek-V2's multi-head latent attention (KimiLinearAttention: q_proj, or
  q_a_proj / q_a_layernorm / q_b_proj with q_lora_rank; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj;
  attention_bias on q_a, kv_a and o): moe.mla_attention;
- elsewhere Kimi Delta Attention (KimiLinearDeltaAttention): q/k/v (h -> heads x d), a depthwise conv1d over
  3 x heads x d (no bias), forget_gate (dt_bias (heads x d), A_log (1, 1, heads, 1), f_a_proj h -> d, f_b_proj
  d -> heads x d), b_proj (h -> heads), g_a_proj / g_b_proj (the same low-rank shape), a gated o_norm (d), o_proj;
  heads / d = linear_num_heads / linear_head_dim (or the checkpoint's linear_attn_config num_heads / head_dim /
  short_conv_kernel_size);

and mlp a SwiGLU MLP of intermediate_size in the ``dense`` layers of mlp_layer_types (default: the first
first_k_dense_replace = 1), else KimiLinearMoE: experts (E, 2I, h) / (E, h, I), the fp32 TopkRouter gate (E x h,
F.linear(x.type(float32), w.type(float32))) and shared_experts of num_shared_experts x moe_intermediate_size
(moe.moe_block's "deepseek" layout). layer_types default: full attention at every 4th layer after the first
(or the checkpoint's 1-indexed linear_attn_config full_attn_layers / kda_layers). lm_head never tied.

The count is exact (tests/test_architectures.py). Activations: traced (memory/blocks_kimi_linear.py, each layer
of its own kind through ``layer_linears``; tools/memtrace/kda_trace.py with fla's chunk_kda stood in).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn, is_sparse, mla_attention, mla_spec
from .recurrent import recurrent_arch


def _layer_types(c: ConfigReader, n: int, lac: dict) -> list:
    kinds = c.cfg.get("layer_types")
    if isinstance(kinds, list):
        return kinds
    if "full_attn_layers" in lac and "kda_layers" in lac:
        kinds = [None] * n
        for i in lac["full_attn_layers"]:
            kinds[i - 1] = "full_attention"
        for i in lac["kda_layers"]:
            kinds[i - 1] = "linear_attention"
        return kinds
    return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]


def kimi_linear(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=2304), c.int("vocab_size", default=163840)
    n_layers, heads = c.int("num_hidden_layers", default=27), c.int("num_attention_heads", default=32)
    inter, ei = c.int("intermediate_size", default=9216), c.int("moe_intermediate_size", default=1024)
    lac = c.cfg.get("linear_attn_config") or {}
    d = int(lac.get("head_dim", c.int("linear_head_dim", default=128)))
    lh = int(lac.get("num_heads", c.int("linear_num_heads", default=32)))
    kernel = int(lac.get("short_conv_kernel_size", c.int("linear_conv_kernel_dim", default=4)))
    kinds = _layer_types(c, n_layers, lac)
    e = c.int("num_experts", "num_local_experts", default=256)
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_token", "num_experts_per_tok", default=8),
              expert_intermediate=ei,
              shared_intermediate=c.int("num_shared_experts", "n_shared_experts", default=1, lo=0) * ei,
              dense_layers=sum(1 for i in range(n_layers) if not is_sparse(c, i, 1)), router_fp32="cast")
    mla = {**mla_spec(c), "indexer": None}
    # KimiLinearForCausalLM._tied_weights_keys = {}: the lm_head is never tied, whatever tie_word_embeddings says
    bias, tied = c.bool("attention_bias", False), False
    q = lh * d
    b = TensorList()
    kda_lins = (Linear("q_proj", h, q), Linear("k_proj", h, q), Linear("v_proj", h, q), Linear("f_a_proj", h, d),
                Linear("f_b_proj", d, q), Linear("b_proj", h, lh), Linear("g_a_proj", h, d), Linear("g_b_proj", d, q),
                Linear("o_proj", q, h))
    dense_lins, sparse_lins = ffn_lins(h, inter, moe)
    per_layer: dict = {}        # one tuple per layer kind (attention, sparse), shared by its layers
    layers = []
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        sparse = is_sparse(c, i, 1)
        if kinds[i] == "full_attention":
            out: list[Linear] = []
            mla_attention(b, p, h, heads, mla, out, bias=bias)
            attn = tuple(out)
        else:
            attn = kda_lins
            for name in ("q_proj", "k_proj", "v_proj"):
                b.linear(f"{a}.{name}", h, q, "attention")
            b.matrix(f"{a}.conv1d", "weight", (3 * q, 1, kernel), "attention")
            b.param(f"{a}.forget_gate", "dt_bias", q, "attention")
            b.matrix(f"{a}.forget_gate", "A_log", (1, 1, lh, 1), "attention")
            b.linear(f"{a}.forget_gate.f_a_proj", h, d, "attention")
            b.linear(f"{a}.forget_gate.f_b_proj", d, q, "attention")
            b.linear(f"{a}.b_proj", h, lh, "attention")
            b.linear(f"{a}.g_a_proj", h, d, "attention")
            b.linear(f"{a}.g_b_proj", d, q, "attention")
            b.norm(f"{a}.o_norm", d)
            b.linear(f"{a}.o_proj", q, h, "attention")
        deepseek_ffn(b, p, h, moe, inter, sparse)
        layers.append(per_layer.setdefault((attn, sparse), attn + (sparse_lins if sparse else dense_lins)))
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = recurrent_arch(c, "kimi_linear", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=layers[-1],
                          heads=heads, kv=heads, hd=c.int("head_dim", default=d), inter=inter, moe=moe, what="")
    return kda_arch(arch, mla, layers)


def ffn_lins(h: int, inter: int, moe: MoE) -> tuple[tuple[Linear, ...], tuple[Linear, ...]]:
    """A dense layer's SwiGLU linears and a sparse layer's (the fused experts, then the shared expert's), as
    memory/blocks.py sparse_moe reads them."""
    ei, e, si = moe.expert_intermediate, moe.num_experts, moe.shared_intermediate
    dense = (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    sparse = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)) + (
        (Linear("gate_proj", h, si), Linear("up_proj", h, si), Linear("down_proj", si, h)) if si else ())
    return dense, sparse


def kda_arch(arch: ModelArch, mla: dict, layers: list) -> ModelArch:
    """The traced ModelArch of a KDA / MLA hybrid (Kimi Linear, Ling 3): each layer's own linears, costed by
    memory/blocks_kimi_linear.py (llama_block with ``arch.mla`` for the full-attention layers, its KDA rule else)."""
    sparse = [x for x in layers if any(lin.count > 1 for lin in x)]
    return replace(arch, family="llama", gated_mlp=True, mla=mla, layer_linears=tuple(layers),
                   block_linears=(sparse or layers)[-1], dense_block_linears=layers[0],
                   support="exact parameter count; activations traced (memory/blocks_kimi_linear.py; "
                           "tools/memtrace/kda_trace.py)")


KIMI_LINEAR = {"kimi_linear": kimi_linear}
