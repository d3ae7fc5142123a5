"""Mistral Large 4's language model (transformers 5.24 modeling_mistral_large4.py MistralLarge4TextModel,
MistralLarge4TextConfig; GLM-MoE-DSA's sparse latent attention without a q latent). Per layer:

- self_attn (MistralLarge4TextAttention): kv_a_proj_with_mqa (h -> kv_lora_rank + the layer's rope dims,
  attention_bias) and kv_a_layernorm, both absent in a layer that reuses another's latent KV
  (kv_source_layers[i] != i); kv_b_proj (kv_lora_rank -> heads x (the layer's nope dims + v_head_dim)); o_proj
  (attention_bias); the indexer in ``full`` layers of indexer_types (wq_b h -> index_n_heads x index_head_dim,
  wk, a biased LayerNorm k_norm, weights_proj, a biased LayerNorm q_input_norm over h, softmax_scaling scale and
  bias per index head); q_proj (h -> heads x (qk_nope + qk_rope)); softmax_scaling (scale, bias per head).
  A NoPE layer (no_rope_layers[i] == 0; default every 4th) moves its rope dims into the nope part;
- mlp: a SwiGLU MLP in ``dense`` layers of mlp_layer_types (default: the first first_k_dense_replace), else
  experts (fused gate_up / down), the fp32 gate and shared_experts of moe_intermediate_size x n_shared_experts
  (moe.moe_block "deepseek");
- input_layernorm, post_attention_layernorm.
``model.norm``; the rotary embedding's learned ``alpha`` (qk_rope_head_dim / 2: inv_freq's length, head_dim
being the rope slice); lm_head untied by default. Defaults: MistralLarge4TextConfig.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_mistral_large4.py, traced
(tools/memtrace/families.py mistral_large4, held within 3 % by tests/test_family_grid.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn, is_sparse
from .recurrent import recurrent_arch

DEFAULTS = {"vocab_size": 204800, "hidden_size": 6144, "intermediate_size": 24576, "moe_intermediate_size": 6144,
            "num_hidden_layers": 72, "num_attention_heads": 64, "n_shared_experts": 1, "n_routed_experts": 128,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 64,
            "num_experts_per_tok": 4, "index_head_dim": 128, "index_n_heads": 32, "first_k_dense_replace": 1}


def _per_layer(c: ConfigReader, key: str, n: int, default: list) -> list:
    v = c.cfg.get(key)
    return v if isinstance(v, list) and len(v) >= n else default


def mistral_large4_text(c: ConfigReader) -> ModelArch:
    g = lambda k: c.int(k, default=DEFAULTS[k], lo=0)   # noqa: E731 - the config class's default when left out
    h, n_layers, vocab, heads = g("hidden_size"), g("num_hidden_layers"), g("vocab_size"), g("num_attention_heads")
    inter, ei, rank = g("intermediate_size"), g("moe_intermediate_size"), g("kv_lora_rank")
    nope, rope, vd = g("qk_nope_head_dim"), g("qk_rope_head_dim"), g("v_head_dim")
    ih, idim = g("index_n_heads"), g("index_head_dim")
    # MistralLarge4TextConfig.__post_init__: NoPE every 4th layer, every layer its own KV, the indexer everywhere
    uses_rope = _per_layer(c, "no_rope_layers", n_layers, [int((i + 1) % 4 != 0) for i in range(n_layers)])
    source = _per_layer(c, "kv_source_layers", n_layers, list(range(n_layers)))
    kinds = _per_layer(c, "indexer_types", n_layers, ["full"] * n_layers)
    moe = MoE(num_experts=c.int("n_routed_experts", "num_local_experts", default=DEFAULTS["n_routed_experts"]),
              experts_per_token=g("num_experts_per_tok"), expert_intermediate=ei,
              shared_intermediate=g("n_shared_experts") * ei,
              dense_layers=sum(1 for i in range(n_layers) if not is_sparse(c, i, g("first_k_dense_replace"))),
              router_fp32="cast")
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    per_layer: list = []
    shapes: dict = {}           # layers of one kind share one linears tuple (memory/activations.py caches by it)
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        r = rope if uses_rope[i] else 0
        if source[i] == i:
            b.linear(f"{a}.kv_a_proj_with_mqa", h, rank + r, "attention", bias=bias)
            b.norm(f"{a}.kv_a_layernorm", rank)
        b.linear(f"{a}.kv_b_proj", rank, heads * (nope + rope - r + vd), "attention")
        b.linear(f"{a}.o_proj", heads * vd, h, "attention", bias=bias)
        if kinds[i] != "shared":
            x = f"{a}.indexer"
            b.linear(f"{x}.wq_b", h, ih * idim, "attention")
            b.linear(f"{x}.wk", h, idim, "attention")
            b.norm(f"{x}.k_norm", idim, bias=True)
            b.linear(f"{x}.weights_proj", h, ih, "attention")
            b.norm(f"{x}.q_input_norm", h, bias=True)
            b.param(f"{x}.softmax_scaling", "scale", ih, "attention")
            b.param(f"{x}.softmax_scaling", "bias", ih, "attention")
        b.linear(f"{a}.q_proj", h, heads * (nope + rope), "attention")
        b.param(f"{a}.softmax_scaling", "scale", heads, "attention")
        b.param(f"{a}.softmax_scaling", "bias", heads, "attention")
        sparse = is_sparse(c, i, g("first_k_dense_replace"))
        deepseek_ffn(b, p, h, moe, inter, sparse)
        att = [Linear("q_proj", h, heads * (nope + rope))]
        if source[i] == i:
            att.append(Linear("kv_a_proj_with_mqa", h, rank + r))
        att += [Linear("kv_b_proj", rank, heads * (nope + rope - r + vd)), Linear("o_proj", heads * vd, h)]
        if sparse:
            mlp = [Linear("gate_up_proj", h, 2 * ei, moe.num_experts), Linear("down_proj", ei, h, moe.num_experts),
                   Linear("gate_proj", h, moe.shared_intermediate), Linear("up_proj", h, moe.shared_intermediate),
                   Linear("down_proj", moe.shared_intermediate, h)]
        else:
            mlp = [Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h)]
        lins = tuple(att + mlp)
        per_layer.append(shapes.setdefault(lins, lins))
    b.norm("model.norm", h)
    b.param("model.rotary_emb", "alpha", rope // 2, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = recurrent_arch(c, "mistral_large4_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied,
                          lins=per_layer[-1], heads=heads, kv=heads, hd=vd, inter=inter, moe=moe, family="llama",
                          what="", support="exact")
    # memory/blocks_mistral_large4.py costs each layer from its own linears; the logits are soft-capped
    # (MistralLarge4ForConditionalGeneration.forward: tanh(logits / final_logit_softcapping), default 30.0)
    # the latent dims and the DSA indexer's top-k (memory/blocks_mistral_large4.py checkpointed_topk)
    mla = {"q_lora_rank": None, "kv_lora_rank": rank, "qk_nope": nope, "qk_rope": rope, "v_head": vd,
           "index_topk": c.int("index_topk", default=2048, lo=1)}
    return replace(arch, layer_linears=tuple(per_layer), dense_block_linears=per_layer[0], mla=mla,
                   final_softcap=bool(c.cfg.get("final_logit_softcapping", 30.0)))

MISTRAL_LARGE4 = {"mistral_large4_text": mistral_large4_text}
