"""Muse Spark (transformers 5.24 modeling_muse_spark.py MuseSparkForConditionalGeneration).

Language model (MuseSparkTextModel; MuseSparkTextConfig's defaults): embed_tokens (its embed_norm has no
weight); per layer self_attn q/k/v/o_proj (num_attention_heads / num_key_value_heads x head_dim,
attention_bias) and an output gate_proj (h -> heads x head_dim, no bias; qk_norm and o_norm carry no weight);
in ``sparse`` layers of mlp_layer_types (default: all) the MoE: gate (num_local_experts x h, fp32),
pre_expert_proj (h -> moe_hidden_size), pre_expert_norm, experts (gate_up (E, 2 x moe_intermediate_size,
moe_hidden_size), down (E, moe_hidden_size, moe_intermediate_size) and a post_expert_norm over
moe_hidden_size), post_expert_proj; else a SwiGLU mlp of intermediate_size; input_layernorm,
pre_feedforward_layernorm, post_feedforward_layernorm (weights over h; post_attention_layernorm has none) and the
two residual gates (h each). norm; lm_head (the class declares no tied weights: never tied).

Vision (MuseSparkVisionModel): patch_embedder (a Linear patch_temporal x 3 x patch_size^2 -> h without bias, a
pos_emb_height x pos_emb_width position table), ln_pre, layers of norm1 / norm2 LayerNorms, attn proj and
q/k/v_proj and mlp fc1 / fc2 (all biased), ln_post; vision_adapter fc1 (out_hidden_size ->
projector_hidden_size) and fc2, vision_projection (-> text width), no biases.
Audio (MuseSparkAudioModel): per stage i a patch_embedder (Linear hidden_sizes[i-1] (1 at i = 0) x
patch_sizes[i] -> hidden_sizes[i], biased, and an RMSNorm) and depths[i] conv blocks (a depthwise causal conv of
conv_kernel_size with bias, an RMSNorm, mlp fc1 / fc2 of int(width x mlp_ratio), biased); norm, proj (->
out_hidden_size, biased) and post_proj_norm.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch

TEXT = {"vocab_size": 202048, "hidden_size": 8192, "intermediate_size": 16384, "num_hidden_layers": 62,
        "num_attention_heads": 128, "num_key_value_heads": 16, "head_dim": 64, "moe_intermediate_size": 4096,
        "num_local_experts": 256, "num_experts_per_tok": 8, "moe_hidden_size": 4096}
VISION = {"patch_size": 14, "pos_emb_height": 32, "pos_emb_width": 32, "num_hidden_layers": 50, "hidden_size": 1536,
          "intermediate_size": 8960, "patch_temporal": 2}
SUPPORT = ("exact parameter count; activations traced (memory/blocks_muse_spark.py: output-gated attention, "
           "residual gates, three RMSNorms, the projected MoE; tools/memtrace/more_moe_trace.py)")
AUDIO = {"patch_sizes": [16, 6, 5, 4], "hidden_sizes": [256, 512, 1024, 2048], "depths": [2, 2, 2, 2],
         "conv_kernel_size": 7, "out_hidden_size": 8192}


def muse_spark_text(c: ConfigReader) -> ModelArch:
    g = lambda k: c.int(k, default=TEXT[k])   # noqa: E731 - the config class's default when left out
    h, n_layers, vocab, heads, kv, hd = (g("hidden_size"), g("num_hidden_layers"), g("vocab_size"),
                                         g("num_attention_heads"), g("num_key_value_heads"), g("head_dim"))
    inter, ei, mh = g("intermediate_size"), g("moe_intermediate_size"), g("moe_hidden_size")
    e = c.int("num_local_experts", "n_routed_experts", default=TEXT["num_local_experts"])
    kinds = c.cfg.get("mlp_layer_types")
    kinds = kinds if isinstance(kinds, list) else ["sparse"] * n_layers
    moe = MoE(num_experts=e, experts_per_token=g("num_experts_per_tok"), expert_intermediate=ei, shared_intermediate=0,
              dense_layers=sum(1 for k in kinds if k != "sparse"), router_fp32="cast")
    bias = c.bool("attention_bias", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    att = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
           Linear("self_attn.gate_proj", h, heads * hd), Linear("o_proj", heads * hd, h))
    sparse_lins = att + (Linear("pre_expert_proj", h, mh), Linear("gate_up_proj", mh, 2 * ei, e),
                         Linear("down_proj", ei, mh, e), Linear("post_expert_proj", mh, h))
    dense_lins = att + (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    for i in range(n_layers):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        b.qkv(a, h, heads, kv, hd, bias)
        b.linear(f"{a}.o_proj", heads * hd, h, "attention", bias)
        b.linear(f"{a}.gate_proj", h, heads * hd, "attention")
        if kinds[i] == "sparse":
            m = f"{p}.mlp"
            b.matrix(f"{m}.gate", "weight", (e, h), "router")
            b.linear(f"{m}.pre_expert_proj", h, mh, "routed_experts")
            b.norm(f"{m}.pre_expert_norm", mh)
            b.matrix(f"{m}.experts", "gate_up_proj", (e, 2 * ei, mh), "routed_experts")
            b.matrix(f"{m}.experts", "down_proj", (e, mh, ei), "routed_experts")
            b.norm(f"{m}.experts.post_expert_norm", mh)
            b.linear(f"{m}.post_expert_proj", mh, h, "routed_experts")
        else:
            b.swiglu(f"{p}.mlp", h, inter)
        for name in ("input_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
        b.param(f"{p}.post_attention_residual_gate", "gate", h, "norm")
        b.param(f"{p}.post_feedforward_residual_gate", "gate", h, "norm")
    b.norm("model.norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    per_layer = tuple(sparse_lins if k == "sparse" else dense_lins for k in kinds)
    arch = recurrent_arch(c, "muse_spark_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=False,
                          lins=per_layer[-1], heads=heads, kv=kv, hd=hd, inter=inter, moe=moe, family="llama",
                          what="", support=SUPPORT)
    # memory/blocks_muse_spark.py costs each layer from its own linears; MuseSparkForConditionalGeneration.forward
    # soft-caps the logits (`tanh(logits * output_multiplier / final_logit_softcapping)`, default 20.0)
    return replace(arch, gated_mlp=True, layer_linears=per_layer, dense_block_linears=dense_lins,
                   final_softcap=bool(c.cfg.get("final_logit_softcapping", 20.0)))


def muse_spark_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    g = lambda k: v.int(k, default=VISION[k])   # noqa: E731 - the class default when left out
    h, inter, p = g("hidden_size"), g("intermediate_size"), "model.vision_tower"
    b = TensorList()
    b.linear(f"{p}.patch_embedder.patch_embedding", g("patch_temporal") * 3 * g("patch_size") ** 2, h, "vision")
    b.matrix(f"{p}.patch_embedder.position_embedding_table", "weight", (g("pos_emb_height") * g("pos_emb_width"), h),
             "vision")
    b.norm(f"{p}.ln_pre", h, bias=True, component="vision")
    for i in range(g("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        b.norm(f"{q}.norm1", h, bias=True, component="vision")
        b.norm(f"{q}.norm2", h, bias=True, component="vision")
        for name in ("proj", "q_proj", "k_proj", "v_proj"):
            b.linear(f"{q}.attn.{name}", h, h, "vision", True)
        b.linear(f"{q}.mlp.fc1", h, inter, "vision", True)
        b.linear(f"{q}.mlp.fc2", inter, h, "vision", True)
    b.norm(f"{p}.ln_post", h, bias=True, component="vision")
    c = ConfigReader(cfg)
    proj = c.int("projector_hidden_size", default=4096)
    b.linear("model.vision_adapter.fc1", c.int("out_hidden_size", default=6144), proj, "projector")
    b.linear("model.vision_adapter.fc2", proj, proj, "projector")
    b.linear("model.vision_projection", proj, text_h, "projector")
    a = ConfigReader(cfg.get("audio_config") or {})
    lists = {k: list(a.cfg.get(k) or AUDIO[k]) for k in ("patch_sizes", "hidden_sizes", "depths")}
    ratio, k = float(a.cfg.get("mlp_ratio", 4.0)), a.int("conv_kernel_size", default=AUDIO["conv_kernel_size"])
    prev = 1
    for i in range(a.int("num_hidden_layers", default=len(lists["hidden_sizes"]))):
        w, q = lists["hidden_sizes"][i], f"model.audio_tower.layers.{i}"
        b.linear(f"{q}.patch_embedder.proj", prev * lists["patch_sizes"][i], w, "audio", True)
        b.norm(f"{q}.patch_embedder.norm", w, component="audio")
        for j in range(lists["depths"][i]):
            cb = f"{q}.conv_blocks.{j}"
            b.matrix(f"{cb}.conv", "weight", (w, 1, k), "audio")
            b.param(f"{cb}.conv", "bias", w, "audio")
            b.norm(f"{cb}.norm", w, component="audio")
            b.linear(f"{cb}.mlp.fc1", w, int(w * ratio), "audio", True)
            b.linear(f"{cb}.mlp.fc2", int(w * ratio), w, "audio", True)
        prev = w
    out = a.int("out_hidden_size", default=AUDIO["out_hidden_size"])
    b.norm("model.audio_tower.norm", prev, component="audio")
    b.linear("model.audio_tower.proj", prev, out, "audio", True)
    b.norm("model.audio_tower.post_proj_norm", out, component="audio")
    return b.tensors


MUSE_SPARK = {"muse_spark_text": muse_spark_text}
