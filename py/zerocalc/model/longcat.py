"""LongCat-Flash (transformers 5.24 modeling_longcat_flash.py LongcatFlashDecoderLayer), num_layers layers (a
config's num_hidden_layers sets num_layers = num_hidden_layers // 2) of:

- mlp (LongcatFlashMoE): experts with gate_up_proj for the routed and the zero-compute experts ((E + Z, 2I, h),
  I = expert_ffn_hidden_size) and down_proj for the routed ones only ((E, h, I)), then router.classifier
  ((E + Z) x h, router_bias) whose e_score_correction_bias is a buffer;
- self_attn: two MLA blocks (q_a_proj / q_a_layernorm / q_b_proj to heads x qk_head_dim, kv_a_proj_with_mqa,
  kv_a_layernorm, kv_b_proj, o_proj; attention_bias on q_a, kv_a and o);
- mlps: two SwiGLU MLPs of ffn_hidden_size; input_layernorm and post_attention_layernorm, two of each.
``model.norm``; lm_head tied with tie_word_embeddings (default off).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_moe.py longcat_block, traced
(tools/memtrace/moe_trace.py longcat_flash, tests/test_longcat_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def longcat_flash(c: ConfigReader) -> ModelArch:
    h, vocab, heads = c.int("hidden_size"), c.int("vocab_size"), c.int("num_attention_heads")
    n_layers = c.int("num_hidden_layers", default=0, lo=0) // 2 or c.int("num_layers", default=28)
    inter = c.int("ffn_hidden_size", "intermediate_size", default=12288)
    ei = c.int("expert_ffn_hidden_size", "moe_intermediate_size", default=2048)
    e = c.int("n_routed_experts", "num_local_experts", default=512)
    # `config.zero_expert_num or 0`: an explicit null is no zero experts, an absent field the class default
    z = c.int("zero_expert_num", default=0, lo=0) if "zero_expert_num" in c.cfg else 256
    qr, kvr = c.int("q_lora_rank", default=1536), c.int("kv_lora_rank", default=512)
    nope, rope, vd = c.int("qk_nope_head_dim", default=128), c.int("qk_rope_head_dim", default=64), c.int("v_head_dim", default=128)
    qk = c.int("qk_head_dim", default=nope + rope)
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e + z, 2 * ei, h), "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, ei), "routed_experts")
        b.linear(f"{p}.mlp.router.classifier", h, e + z, "router", bias=c.bool("router_bias", False))
        for j in (0, 1):
            a = f"{p}.self_attn.{j}"
            b.linear(f"{a}.q_a_proj", h, qr, "attention", bias=bias)
            b.norm(f"{a}.q_a_layernorm", qr)
            b.linear(f"{a}.q_b_proj", qr, heads * qk, "attention")
            b.linear(f"{a}.kv_a_proj_with_mqa", h, kvr + rope, "attention", bias=bias)
            b.norm(f"{a}.kv_a_layernorm", kvr)
            b.linear(f"{a}.kv_b_proj", kvr, heads * (nope + vd), "attention")
            b.linear(f"{a}.o_proj", heads * vd, h, "attention", bias=bias)
        for j in (0, 1):
            b.swiglu(f"{p}.mlps.{j}", h, inter)
        for name in ("input_layernorm", "post_attention_layernorm"):
            for j in (0, 1):
                b.norm(f"{p}.{name}.{j}", h)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_a_proj", h, qr), Linear("kv_a_proj_with_mqa", h, kvr + rope), Linear("q_b_proj", qr, heads * qk),
            Linear("kv_b_proj", kvr, heads * (nope + vd)), Linear("o_proj", heads * vd, h), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    moe = MoE(num_experts=e, experts_per_token=c.int("moe_topk", "num_experts_per_tok", default=12),
              expert_intermediate=ei, shared_intermediate=0, dense_layers=0, router_fp32="cast", zero_experts=z)
    arch = recurrent_arch(c, "longcat_flash", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          heads=heads, kv=heads, hd=vd, inter=inter, moe=moe, what="")
    # memory/blocks_moe.py longcat_block: each sublayer is the Llama block's MLA path (DeepSeek-V3's rule) and a
    # SwiGLU MLP, the RMSNorms the Llama lineage's; rope cos / sin of qk_rope_head_dim (the config's head_dim)
    experts = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e))
    # each sublayer's linears under its own prefix (LoRA adapters on both; memory/lora.py matches the leaf name)
    sublayers = tuple(Linear(f"{mod}.{j}.{lin.name}", lin.d_in, lin.d_out)
                      for j in (0, 1) for lin in lins
                      for mod in ("mlps" if lin.name in ("gate_proj", "up_proj", "down_proj") else "self_attn",))
    mla = {"indexer": None, "q_lora_rank": qr, "kv_lora_rank": kvr, "qk_nope": nope, "qk_rope": rope, "v_head": vd}
    return replace(arch, family="llama", gated_mlp=True, mla=mla, head_dim=c.int("head_dim", default=rope),
                   block_linears=sublayers + experts, dense_block_linears=sublayers + experts,
                   support="exact parameter count; activations traced (tools/memtrace/moe_trace.py longcat_flash, "
                           "the zero-compute experts' share of the routed slots as a balanced router gives it: "
                           "Z / (E + Z); memory/blocks_moe.py longcat_block, memory/recompute_locals.py)")


LONGCAT = {"longcat_flash": longcat_flash}
