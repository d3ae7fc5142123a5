"""GLM-5.3-Flash (transformers 5.24 modeling_glm5_next.py Glm5NextForConditionalGeneration): a vision tower
``model.visual`` beside a hybrid language model ``model.language_model``.

Language model (Glm5NextTextModel; Glm5NextTextConfig's defaults), per layer by layer_types (default: indexed
attention at i % 4 == 3, linear attention elsewhere; "full_attention" reads as indexed):
- linear_attention (Glm5NextTextLinearAttention): q/k/v_proj (h -> linear_num_heads x linear_head_dim = Q),
  a depthwise conv1d (3Q, 1, linear_conv_kernel_dim) without bias, forget_gate (dt_bias Q, A_log per head,
  f_a_proj h -> head_dim, f_b_proj head_dim -> Q), b_proj (h -> heads), g_a_proj / g_b_proj (h -> head_dim
  -> Q), o_norm (head_dim), o_proj (Q -> h); no biases;
- indexed_attention (Glm5NextTextAttention): MLA with a q latent (moe.mla_attention; attention_bias on q_a,
  kv_a, o) and, in ``full`` layers of indexer_types, the DSA indexer (wq_b, wk, a biased k_norm, weights_proj)
  with index_kpool_compress_ape (index_kpool, index_head_dim) and index_kpool_compress_gate (index_head_dim, h);
- mlp: a SwiGLU MLP in ``dense`` layers of mlp_layer_types (default: the first 3), else experts, the fp32 gate
  and shared_experts (moe.deepseek_ffn); input_layernorm, post_attention_layernorm; attn_hc and ffn_hc
  (deepseek_v4.hyper_connection, N = hc_mult).
``norm``; the hyper head (an unweighted mean) has no parameters; lm_head untied by default (the composite's
tie_word_embeddings).

Vision (Glm5NextVisionModel; Glm5NextVisionConfig's defaults): a biased Conv3d patch_embed; ``depth`` blocks of
RMSNorm norm1 / norm2, attn (qkv, proj, biased by attention_bias; per-head q_norm / k_norm) and a gated mlp
(gate/up/down, biased by attention_bias); merger (proj out_hidden_size -> itself, post_projection_norm
LayerNorm, a gated MLP of projection_intermediate_size, no biases); downsample (a biased Conv2d hidden ->
out_hidden_size of spatial_merge_size^2); post_layernorm RMSNorm.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_glm5_next.py, each layer from its own
linears (``layer_linears``), the hyper connections' dims in ``hyper``; traced fed text only with fla's chunk_kda,
causal-conv1d and the no-grad indexer stood in (tools/memtrace/glm5_next_trace.py, tests/test_glm5_next_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .deepseek_v4 import hyper_connection
from .moe import deepseek_ffn, mla_attention
from .recurrent import recurrent_arch

TEXT = {"vocab_size": 154880, "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 2048,
        "num_hidden_layers": 45, "num_attention_heads": 64, "n_shared_experts": 1, "n_routed_experts": 288,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 0, "v_head_dim": 256, "qk_nope_head_dim": 256,
        "num_experts_per_tok": 8, "index_head_dim": 128, "index_n_heads": 32, "linear_head_dim": 128,
        "linear_num_heads": 64, "linear_conv_kernel_dim": 4, "hc_mult": 4, "index_kpool": 16}
VISION = {"depth": 24, "hidden_size": 1024, "num_heads": 16, "in_channels": 3, "patch_size": 14,
          "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 1536, "intermediate_size": 4096,
          "projection_intermediate_size": 10240}


SUPPORT = ("exact parameter count; activations traced (memory/blocks_glm5_next.py: hyper connections, KDA with fla's "
           "chunk_kda stood in, NoPE MLA under the top-k mask, clamped SwiGLU MoE; tools/memtrace/glm5_next_trace.py)")


def _layer_types(c: ConfigReader, n: int) -> tuple[list, list, list]:
    """Glm5NextTextConfig.__post_init__'s layer_types, mlp_layer_types and indexer_types (index_topk_pattern or
    the index_topk_freq / index_skip_topk_offset schedule)."""
    kinds = c.cfg.get("layer_types")
    kinds = kinds if isinstance(kinds, list) else ["linear_attention" if i % 4 != 3 else "indexed_attention"
                                                   for i in range(n)]
    kinds = ["indexed_attention" if k == "full_attention" else k for k in kinds]
    mlp = c.cfg.get("mlp_layer_types")
    mlp = mlp if isinstance(mlp, list) else ["dense"] * min(3, n) + ["sparse"] * (n - 3)
    index, pattern = c.cfg.get("indexer_types"), c.cfg.get("index_topk_pattern")
    if not isinstance(index, list):
        if pattern is not None:
            index = [{"F": "full", "S": "shared"}[x] for x in pattern] if isinstance(pattern, str) else list(pattern)
        else:
            freq, offset = max(c.int("index_topk_freq", default=1), 1), c.int("index_skip_topk_offset", default=2, lo=0)
            index = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    return kinds, mlp, index


def glm5_next_text(c: ConfigReader) -> ModelArch:
    g = lambda k: c.int(k, default=TEXT[k], lo=0)   # noqa: E731 - the config class's default when left out
    h, n_layers, vocab, heads = g("hidden_size"), g("num_hidden_layers"), g("vocab_size"), g("num_attention_heads")
    inter, ei, n = g("intermediate_size"), g("moe_intermediate_size"), g("hc_mult")
    lq, ld, ih, idim = g("linear_num_heads") * g("linear_head_dim"), g("linear_head_dim"), g("index_n_heads"), g("index_head_dim")
    mla = {"q_lora_rank": g("q_lora_rank"), "kv_lora_rank": g("kv_lora_rank"), "qk_nope": g("qk_nope_head_dim"),
           "qk_rope": g("qk_rope_head_dim"), "v_head": g("v_head_dim")}
    kinds, mlp, index = _layer_types(c, n_layers)
    moe = MoE(num_experts=c.int("n_routed_experts", "num_local_experts", default=TEXT["n_routed_experts"]),
              experts_per_token=g("num_experts_per_tok"), expert_intermediate=ei,
              shared_intermediate=g("n_shared_experts") * ei,
              dense_layers=sum(1 for k in mlp[:n_layers] if k != "sparse"), router_fp32="cast")
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    nh, si = g("linear_num_heads"), moe.shared_intermediate
    kda = (Linear("q_proj", h, lq), Linear("k_proj", h, lq), Linear("v_proj", h, lq), Linear("f_a_proj", h, ld),
           Linear("f_b_proj", ld, lq), Linear("b_proj", h, nh), Linear("g_a_proj", h, ld), Linear("g_b_proj", ld, lq),
           Linear("o_proj", lq, h))
    qk = mla["qk_nope"] + mla["qk_rope"]
    att = (Linear("q_a_proj", h, mla["q_lora_rank"]), Linear("q_b_proj", mla["q_lora_rank"], heads * qk),
           Linear("kv_a_proj_with_mqa", h, mla["kv_lora_rank"] + mla["qk_rope"]),
           Linear("kv_b_proj", mla["kv_lora_rank"], heads * (mla["qk_nope"] + mla["v_head"])),
           Linear("o_proj", heads * mla["v_head"], h))
    sparse = (Linear("gate_up_proj", h, 2 * ei, moe.num_experts), Linear("down_proj", ei, h, moe.num_experts),
              Linear("gate_proj", h, si), Linear("up_proj", h, si), Linear("down_proj", si, h))
    dense = (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    shapes: dict = {}
    per_layer = []
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        if kinds[i] == "linear_attention":
            for name in ("q_proj", "k_proj", "v_proj"):
                b.linear(f"{a}.{name}", h, lq, "attention")
            b.matrix(f"{a}.conv1d", "weight", (3 * lq, 1, g("linear_conv_kernel_dim")), "attention")
            b.param(f"{a}.forget_gate", "dt_bias", lq, "attention")
            b.param(f"{a}.forget_gate", "A_log", g("linear_num_heads"), "attention")
            for m in ("forget_gate.f", "g"):
                b.linear(f"{a}.{m}_a_proj", h, ld, "attention")
                b.linear(f"{a}.{m}_b_proj", ld, lq, "attention")
                if m == "forget_gate.f":
                    b.linear(f"{a}.b_proj", h, g("linear_num_heads"), "attention")
            b.norm(f"{a}.o_norm", ld)
            b.linear(f"{a}.o_proj", lq, h, "attention")
        else:
            full = index[i] != "shared"
            mla_attention(b, p, h, heads, {**mla, "indexer": (ih, idim) if full else None}, [], bias=bias)
            if full:
                b.matrix(f"{a}.indexer", "index_kpool_compress_ape", (g("index_kpool"), idim), "attention")
                b.matrix(f"{a}.indexer", "index_kpool_compress_gate", (idim, h), "attention")
        deepseek_ffn(b, p, h, moe, inter, mlp[i] == "sparse")
        for hc in ("attn_hc", "ffn_hc"):
            hyper_connection(b, f"{p}.{hc}", n, h)
        lins = (kda if kinds[i] == "linear_attention" else att) + (sparse if mlp[i] == "sparse" else dense)
        per_layer.append(shapes.setdefault(lins, lins))
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = recurrent_arch(c, "glm5_next_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied,
                          lins=per_layer[-1], heads=heads, kv=heads, hd=mla["v_head"], inter=inter, moe=moe,
                          family="llama", what="", support=SUPPORT)
    # memory/blocks_glm5_next.py: each layer from its own linears; the hyper connections (memory/blocks_hyper.py's
    # hyper_connection, the checkpointed (b, s, N, h) stream)
    hyper = {"hc_mult": n, "sinkhorn_iters": c.int("hc_sinkhorn_iters", default=20, lo=1)}
    return replace(arch, layer_linears=tuple(per_layer), dense_block_linears=per_layer[0], mla=mla, hyper=hyper)


def glm5_next_visual(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    g = lambda k: v.int(k, default=VISION[k])   # noqa: E731 - the class default when left out
    h, inter, out, merge = g("hidden_size"), g("intermediate_size"), g("out_hidden_size"), g("spatial_merge_size")
    bias, p = v.bool("attention_bias", True), "model.visual"
    b = TensorList()
    b.matrix(f"{p}.patch_embed.proj", "weight", (h, g("in_channels") * g("temporal_patch_size") * g("patch_size") ** 2),
             "vision")
    b.param(f"{p}.patch_embed.proj", "bias", h, "vision")
    for i in range(g("depth")):
        q = f"{p}.blocks.{i}"
        b.norm(f"{q}.norm1", h, component="vision")
        b.norm(f"{q}.norm2", h, component="vision")
        b.linear(f"{q}.attn.qkv", h, 3 * h, "vision", bias)
        b.linear(f"{q}.attn.proj", h, h, "vision", bias)
        b.norm(f"{q}.attn.q_norm", h // g("num_heads"), component="vision")
        b.norm(f"{q}.attn.k_norm", h // g("num_heads"), component="vision")
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{q}.mlp.{name}", d_in, d_out, "vision", bias)
    m = f"{p}.merger"
    b.linear(f"{m}.proj", out, out, "projector")
    b.norm(f"{m}.post_projection_norm", out, bias=True, component="projector")
    b.swiglu(m, out, g("projection_intermediate_size"), "projector")
    b.matrix(f"{p}.downsample", "weight", (out, h, merge, merge), "projector")
    b.param(f"{p}.downsample", "bias", out, "projector")
    b.norm(f"{p}.post_layernorm", h, component="vision")
    return b.tensors


GLM5_NEXT = {"glm5_next_text": glm5_next_text}
