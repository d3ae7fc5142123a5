"""Inkling's language model, the text type ``inkling_text`` (transformers 5.24 modeling_inkling.py InklingForCausalLM;
the composite inkling types add towers, not modelled here). Per layer (``hybrid`` or ``hybrid_sliding``; default
sliding except every 6th, or the layers in local_layer_ids):

- self_attn: q/k/v/o and r_proj (h -> heads x d_rel), no biases, with the sliding layers' swa_num_attention_heads /
  swa_num_key_value_heads / swa_head_dim; depthwise k_sconv / v_sconv over the kv width (kernel sconv_kernel_size =
  conv_kernel_size, no bias), per-head q_norm / k_norm, rel_logits_proj.proj (d_rel, rel_extent; sliding layers:
  sliding_window_size);
- mlp: in the ``sparse`` layers of mlp_layer_types (default: from dense_mlp_idx = 0 on) gate (routed + shared experts
  x h, a global_scale), experts (E, 2I, h) / (E, h, I), shared_experts gate/up (S, I, h), down (S, h, I); else a
  SwiGLU MLP of intermediate_size with a global_scale. A checkpoint's dense_intermediate_size makes
  intermediate_size the experts' width (InklingTextConfig.__post_init__);
- input_layernorm, post_attention_layernorm, attn_sconv / mlp_sconv (h, 1, conv_kernel_size).
The embedding carries an embed_norm; ``model.norm``; lm_head never tied (_tied_weights_keys is empty).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_inkling.py inkling_layer, one
linears tuple per layer kind (sliding / full attention, dense / sparse MLP), held to the trace of
tools/memtrace/inkling_trace.py (tests/test_inkling_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


SUPPORT = ("exact parameter count; activations traced (memory/blocks_inkling.py, tools/memtrace/inkling_trace.py) "
           "under eager attention: the relative-logits bias has no FlashAttention path")


def inkling_text(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads, kv, hd = c.int("num_attention_heads"), c.int("num_key_value_heads", default=8), c.int("head_dim", default=128)
    sw = (c.int("swa_num_attention_heads", default=64), c.int("swa_num_key_value_heads", default=16),
          c.int("swa_head_dim", default=128))
    d_rel, window, extent = c.int("d_rel", default=16), c.int("sliding_window_size", default=512), c.int("rel_extent", default=1024)
    ck = c.int("conv_kernel_size", "sconv_kernel_size", default=4)
    inter, ei = c.int("intermediate_size", default=24576), c.int("moe_intermediate_size", default=3072)
    if c.has("dense_intermediate_size"):
        inter, ei = c.int("dense_intermediate_size"), inter
    e, s = c.int("n_routed_experts", default=256), c.int("n_shared_experts", default=2, lo=0)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        ids = c.cfg.get("local_layer_ids")
        local = set(ids) if ids is not None else {i for i in range(n_layers) if (i + 1) % 6}
        kinds = ["hybrid_sliding" if i in local else "hybrid" for i in range(n_layers)]
    mlp_kinds = c.cfg.get("mlp_layer_types")
    if not isinstance(mlp_kinds, list):
        dense = c.int("dense_mlp_idx", default=0, lo=0)
        mlp_kinds = ["dense" if i < dense else "sparse" for i in range(n_layers)]
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    b.norm("model.embed_tokens.embed_norm", h)
    for i in range(n_layers):
        p, sliding = f"model.layers.{i}", kinds[i] == "hybrid_sliding"
        nh, nkv, d = sw if sliding else (heads, kv, hd)
        a = f"{p}.self_attn"
        for name, d_in, d_out in (("q_proj", h, nh * d), ("k_proj", h, nkv * d), ("v_proj", h, nkv * d),
                                  ("r_proj", h, nh * d_rel), ("o_proj", nh * d, h)):
            b.linear(f"{a}.{name}", d_in, d_out, "attention")
        for name in ("k_sconv", "v_sconv"):
            b.matrix(f"{a}.{name}.conv1d", "weight", (nkv * d, 1, ck), "attention")
        b.norm(f"{a}.q_norm", d)
        b.norm(f"{a}.k_norm", d)
        b.matrix(f"{a}.rel_logits_proj", "proj", (d_rel, window if sliding else extent), "attention")
        m = f"{p}.mlp"
        if mlp_kinds[i] == "sparse":
            b.matrix(f"{m}.gate", "weight", (e + s, h), "router")
            b.param(f"{m}.gate", "global_scale", 1, "router")
            b.matrix(f"{m}.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
            b.matrix(f"{m}.experts", "down_proj", (e, h, ei), "routed_experts")
            for name, shape in (("gate_proj", (s, ei, h)), ("up_proj", (s, ei, h)), ("down_proj", (s, h, ei))):
                b.matrix(f"{m}.shared_experts", name, shape, "shared_experts")
        else:
            b.swiglu(f"{m}", h, inter)
            b.param(m, "global_scale", 1, "mlp")
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        for name in ("attn_sconv", "mlp_sconv"):
            b.matrix(f"{p}.{name}.conv1d", "weight", (h, 1, ck), "other")
    b.norm("model.norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    layer_lins = []
    for i in range(n_layers):
        nh, nkv, d = sw if kinds[i] == "hybrid_sliding" else (heads, kv, hd)
        attn = (Linear("q_proj", h, nh * d), Linear("k_proj", h, nkv * d), Linear("v_proj", h, nkv * d),
                Linear("r_proj", h, nh * d_rel), Linear("o_proj", nh * d, h))
        mlp = (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)) if mlp_kinds[i] == "sparse" \
            else (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
        layer_lins.append(attn + mlp)
    # one tuple per layer kind, shared by the layers of that kind (memory/activations.py caches by identity)
    kinds_seen: dict = {}
    layer_lins = [kinds_seen.setdefault((kinds[i], mlp_kinds[i], lins), lins) for i, lins in enumerate(layer_lins)]
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=6), expert_intermediate=ei,
              shared_intermediate=s * ei, dense_layers=0)
    sparse = next((x for x, k in zip(layer_lins, mlp_kinds) if k == "sparse"), layer_lins[-1])
    dense = next((x for x, k in zip(layer_lins, mlp_kinds) if k != "sparse"), sparse)
    arch = recurrent_arch(c, "inkling_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=False, lins=sparse,
                          heads=heads, kv=kv, hd=hd, inter=inter, moe=moe, what="")
    return replace(arch, family="llama", gated_mlp=True, block_linears=sparse, dense_block_linears=dense,
                   layer_linears=tuple(layer_lins), support=SUPPORT)


INKLING = {"inkling_text": inkling_text}
