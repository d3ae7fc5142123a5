"""A.X K2 (transformers 5.24 modeling_axk2.py AXK2DecoderLayer): self_attn, mlp, input_layernorm,
post_attention_layernorm, where

- self_attn (AXK2Attention) is DeepSeek-V3.2's MLA without q_b_proj: q_a_proj (h -> q_lora_rank, attention_bias),
  q_a_layernorm, the fused q_gate_proj (2 x q_lora_rank -> heads x (qk_nope + qk_rope + v_head), no bias),
  kv_a_proj_with_mqa (attention_bias), kv_a_layernorm, kv_b_proj, o_proj (attention_bias), and in every layer the
  DSA indexer (moe.mla_attention's: wq_b, wk, a biased LayerNorm k_norm, weights_proj);
- mlp is a SwiGLU MLP of intermediate_size in the ``dense`` layers of mlp_layer_types, else AXK2MoE: experts
  (E, 2I, h) / (E, h, I), the fp32 router (n_routed_experts x h; e_score_correction_bias a buffer) and
  shared_experts of n_shared_experts x moe_intermediate_size (moe.moe_block's "deepseek" layout);
  AXK2Config.__post_init__'s default: sparse where i >= first_k_dense_replace (1) and i % moe_layer_freq (1) == 0;
- input_layernorm is AXK2GatedRMSNorm (norm (h) and the gate mlp fc1 h -> gated_norm_rank, fc2 back, no bias);
  post_attention_layernorm the same in sparse layers, a plain RMSNorm in dense ones.

``model.norm``; lm_head untied by default. The count is exact (tests/test_architectures.py). Activations:
memory/blocks_axk2.py, traced under eager attention (the only path that runs), which ``support`` says.
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import moe_block
from .recurrent import recurrent_arch


SUPPORT = ("exact parameter count; activations traced (memory/blocks_axk2.py, tools/memtrace/axk2_trace.py) under "
           "eager attention, the only path that runs: AXK2 has no FA2 support (_supports_flash_attn = False) and "
           "its indexer reads attention_mask[:, 0], None under SDPA in transformers 5.24; a flash or sdpa plan is "
           "costed as eager); full, LoRA, full checkpointing and bf16-mixed steps within 3 %")


def _sparse(c: ConfigReader, n: int) -> list[bool]:
    kinds = c.cfg.get("mlp_layer_types")
    if isinstance(kinds, list):
        return [k == "sparse" for k in kinds[:n]]
    first, freq = c.int("first_k_dense_replace", default=1, lo=0), c.int("moe_layer_freq", default=1)
    return [i >= first and i % freq == 0 for i in range(n)]


def axk2(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=2048), c.int("vocab_size", default=163840)
    n_layers, heads = c.int("num_hidden_layers", default=48), c.int("num_attention_heads", default=32)
    inter, ei = c.int("intermediate_size", default=5120), c.int("moe_intermediate_size", default=512)
    qr, kvr = c.int("q_lora_rank", default=384), c.int("kv_lora_rank", default=128)
    rope, nope, vh = (c.int("qk_rope_head_dim", default=32), c.int("qk_nope_head_dim", default=64),
                      c.int("v_head_dim", default=64))
    ih, idim = c.int("index_n_heads", default=16), c.int("index_head_dim", default=128)
    rank = c.int("gated_norm_rank", default=16)
    sparse = _sparse(c, n_layers)
    e = c.int("n_routed_experts", "num_local_experts", default=128)
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=8), expert_intermediate=ei,
              shared_intermediate=c.int("n_shared_experts", default=1, lo=0) * ei,
              dense_layers=sum(1 for s in sparse if not s), router_fp32="cast")
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    qg = heads * (nope + rope + vh)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")

    def gated_norm(m: str) -> None:
        b.norm(f"{m}.norm", h)
        b.linear(f"{m}.mlp.fc1", h, rank, "other")
        b.linear(f"{m}.mlp.fc2", rank, h, "other")

    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        b.linear(f"{a}.q_a_proj", h, qr, "attention", bias=bias)
        b.norm(f"{a}.q_a_layernorm", qr)
        b.linear(f"{a}.q_gate_proj", 2 * qr, qg, "attention")
        b.linear(f"{a}.kv_a_proj_with_mqa", h, kvr + rope, "attention", bias=bias)
        b.norm(f"{a}.kv_a_layernorm", kvr)
        b.linear(f"{a}.kv_b_proj", kvr, heads * (nope + vh), "attention")
        b.linear(f"{a}.o_proj", heads * vh, h, "attention", bias=bias)
        x = f"{a}.indexer"
        b.linear(f"{x}.wq_b", qr, ih * idim, "attention")
        b.linear(f"{x}.wk", h, idim, "attention")
        b.norm(f"{x}.k_norm", idim, bias=True)
        b.linear(f"{x}.weights_proj", h, ih, "attention")
        if sparse[i]:
            moe_block(b, p, h, moe, "deepseek", [])
        else:
            b.swiglu(f"{p}.mlp", h, inter)
        gated_norm(f"{p}.input_layernorm")
        if sparse[i]:
            gated_norm(f"{p}.post_attention_layernorm")
        else:
            b.norm(f"{p}.post_attention_layernorm", h)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_a_proj", h, qr), Linear("q_gate_proj", 2 * qr, qg), Linear("kv_a_proj_with_mqa", h, kvr + rope),
            Linear("kv_b_proj", kvr, heads * (nope + vh)), Linear("o_proj", heads * vh, h),
            Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    arch = recurrent_arch(c, "axk2", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=heads, hd=nope + rope, inter=inter, moe=moe, what="", support=SUPPORT)
    # the sparse layers' linears as DeepSeek-V3's (model/moe.py): the routed experts (count E), then the shared ones
    routed = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e))
    si = moe.shared_intermediate
    shared = (Linear("gate_proj", h, si), Linear("up_proj", h, si), Linear("down_proj", si, h)) if si else ()
    return replace(arch, block_linears=lins[:5] + routed + shared)


AXK2 = {"axk2": axk2}
