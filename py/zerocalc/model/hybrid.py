"""Hybrid linear attention: the Gated DeltaNet layers of Qwen3-Next and Qwen3.5 (transformers 5.24
modeling_qwen3_next.py Qwen3NextGatedDeltaNet, modeling_qwen3_5.py Qwen3_5GatedDeltaNet), which replace
self-attention in the layers ``layer_types`` marks ``linear_attention`` (without layer_types: all but every
``full_attention_interval``-th, 4 by default). With nk / nv key / value heads of dk / dv dims
(linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim), key = nk·dk,
value = nv·dv, conv = 2·key + value:

- Qwen3-Next (fused): dt_bias (nv), A_log (nv), conv1d (conv, 1, linear_conv_kernel_dim), in_proj_qkvz
  (h -> 2·key + 2·value), in_proj_ba (h -> 2·nv), norm (dv, gated RMSNorm), out_proj (value -> h);
- Qwen3.5 (split): dt_bias, A_log, conv1d, norm, out_proj, in_proj_qkv (h -> conv), in_proj_z (h -> value),
  in_proj_b and in_proj_a (h -> nv each).

Their full-attention layers are gated: q_proj projects to 2 x heads x head_dim (query and its gate).
The parameters are exact (tests/test_architectures.py); the layer's activations: memory/deltanet.py (the
causal-conv1d and fla kernels' saves; traced for Qwen3-Next: tools/memtrace/ssm_trace.py qwen3_next)."""
from __future__ import annotations

from .arch import Linear, MoE
from .config import ConfigReader, TensorList


def is_linear_layer(c: ConfigReader, i: int, pattern: str = "") -> bool:
    """Layer ``i`` is linear attention: its layer_types entry, else the configuration class's default:
    all but every full_attention_interval-th (Qwen3-Next, Qwen3.5), or for ``pattern`` "alternate" the odd
    layers (MiniMaxConfig.__post_init__: full where (i + 1) % 2)."""
    kinds = c.cfg.get("layer_types")
    if isinstance(kinds, list) and i < len(kinds):
        return kinds[i] == "linear_attention"
    if pattern == "alternate":
        return (i + 1) % 2 == 0
    return (i + 1) % c.int("full_attention_interval", default=4) != 0


def lightning_attention(b: TensorList, p: str, h: int, heads: int, hd: int, out: list[Linear]) -> None:
    """MiniMax's linear attention (modeling_minimax.py MiniMaxLightningAttention): norm (RMSNorm over
    heads x head_dim), qkv_proj (h -> 3 x heads x head_dim), out_proj, output_gate (h -> heads x head_dim),
    no biases; its decay tables are buffers."""
    a, inner = f"{p}.self_attn", heads * hd
    b.norm(f"{a}.norm", inner)
    for name, d_in, d_out in (("qkv_proj", h, 3 * inner), ("out_proj", inner, h), ("output_gate", h, inner)):
        b.linear(f"{a}.{name}", d_in, d_out, "attention")
        out.append(Linear(name, d_in, d_out))


def deltanet_dims(c: ConfigReader) -> dict:
    """key = nk·dk, value = nv·dv and the head counts, for memory/deltanet.py."""
    nk, nv = c.int("linear_num_key_heads", default=16), c.int("linear_num_value_heads", default=32)
    dk, dv = c.int("linear_key_head_dim", default=128), c.int("linear_value_head_dim", default=128)
    return {"key": nk * dk, "value": nv * dv, "nk": nk, "nv": nv}


def gated_deltanet(b: TensorList, p: str, h: int, c: ConfigReader, fused: bool, out: list[Linear]) -> None:
    nk, nv = c.int("linear_num_key_heads", default=16), c.int("linear_num_value_heads", default=32)
    dk, dv = c.int("linear_key_head_dim", default=128), c.int("linear_value_head_dim", default=128)
    kern = c.int("linear_conv_kernel_dim", default=4)
    key, value = nk * dk, nv * dv
    conv = 2 * key + value
    a = f"{p}.linear_attn"
    b.param(a, "dt_bias", nv, "attention")
    b.param(a, "A_log", nv, "attention")
    b.matrix(f"{a}.conv1d", "weight", (conv, 1, kern), "attention")
    if fused:
        for name, d_out in (("in_proj_qkvz", 2 * key + 2 * value), ("in_proj_ba", 2 * nv)):
            b.linear(f"{a}.{name}", h, d_out, "attention")
            out.append(Linear(name, h, d_out))
        b.norm(f"{a}.norm", dv)
        b.linear(f"{a}.out_proj", value, h, "attention")
    else:
        b.norm(f"{a}.norm", dv)
        b.linear(f"{a}.out_proj", value, h, "attention")
        for name, d_out in (("in_proj_qkv", conv), ("in_proj_z", value), ("in_proj_b", nv), ("in_proj_a", nv)):
            b.linear(f"{a}.{name}", h, d_out, "attention")
            out.append(Linear(name, h, d_out))
    out.append(Linear("out_proj", value, h))


def lfm2_moe(c: ConfigReader):
    """LFM2-MoE (modeling_lfm2_moe.py Lfm2MoeForCausalLM): LFM2's layers with feed_forward of intermediate_size
    as is in the first num_dense_layers, then a sparse block (fused experts of moe_intermediate_size, then the
    gate; its expert_bias is a buffer)."""
    return lfm2(c, sparse=True)


def lfm2(c: ConfigReader, sparse: bool = False):
    """LFM2 (modeling_lfm2.py Lfm2ForCausalLM): per layer_types entry (default: full_attn_idxs attention, the
    rest ``conv``) a short convolution (conv: depthwise Conv1d of conv_L_cache, in_proj h -> 3h, out_proj;
    conv_bias) or GQA attention (q/k/v, out_proj, per-head q_layernorm/k_layernorm), a SwiGLU feed_forward
    w1/w3/w2 whose width block_auto_adjust_ff_dim makes 2/3 of intermediate_size (times
    block_ffn_dim_multiplier, rounded up to block_multiple_of), operator_norm and ffn_norm; embedding_norm
    after the last layer; the head tied by default. Activations: memory/ssm_blocks.py lfm2_layer (traced, LFM2-MoE's
    sparse layers too)."""
    from .arch import ModelArch
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), h // heads
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        full = c.cfg.get("full_attn_idxs") or list(range(n_layers))
        kinds = ["full_attention" if i in full else "conv" for i in range(n_layers)]
    inter = c.int("intermediate_size")
    if not sparse and c.bool("block_auto_adjust_ff_dim", True):
        inter = int(2 * inter / 3)
        mult = c.cfg.get("block_ffn_dim_multiplier", 1.0)
        if mult is not None:
            m = c.int("block_multiple_of", default=256)
            inter = m * ((int(mult * inter) + m - 1) // m)
    bias, tied = c.bool("conv_bias", False), c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    lins: list[Linear] = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if kinds[i] == "conv":
            b.matrix(f"{p}.conv.conv", "weight", (h, 1, c.int("conv_L_cache", default=3)), "attention")
            if bias:
                b.param(f"{p}.conv.conv", "bias", h, "attention")
            b.linear(f"{p}.conv.in_proj", h, 3 * h, "attention", bias=bias)
            b.linear(f"{p}.conv.out_proj", h, h, "attention", bias=bias)
        else:
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("out_proj", heads * hd, h)):
                b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention")
            b.norm(f"{p}.self_attn.q_layernorm", hd)
            b.norm(f"{p}.self_attn.k_layernorm", hd)
        if sparse and i >= c.int("num_dense_layers", default=2, lo=0):
            e, ei = c.int("num_experts"), c.int("moe_intermediate_size")
            b.matrix(f"{p}.feed_forward.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
            b.matrix(f"{p}.feed_forward.experts", "down_proj", (e, h, ei), "routed_experts")
            b.matrix(f"{p}.feed_forward.gate", "weight", (e, h), "router")
        else:
            for name, d_in, d_out in (("w1", h, inter), ("w3", h, inter), ("w2", inter, h)):
                b.linear(f"{p}.feed_forward.{name}", d_in, d_out, "mlp")
        b.norm(f"{p}.operator_norm", h)
        b.norm(f"{p}.ffn_norm", h)
        lins = [Linear("in_proj", h, 3 * h), Linear("out_proj", h, h), Linear("w1", h, inter), Linear("w3", h, inter),
                Linear("w2", inter, h)]
    b.norm("model.embedding_norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    # activations: memory/ssm_blocks.py lfm2_layer, each layer its kind's linears (tools/memtrace/ssm_trace.py lfm2,
    # lfm2_moe: the sparse layers' Lfm2MoeSparseMoeBlock as memory/blocks.py sparse_moe)
    mlp = (Linear("w1", h, inter), Linear("w3", h, inter), Linear("w2", inter, h))
    conv = (Linear("in_proj", h, 3 * h), Linear("out_proj", h, h))
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("out_proj", heads * hd, h))
    ssm = {"layout": "lfm2", "residual_fp32": False, "rope_dim": hd}
    n_dense = c.int("num_dense_layers", default=2, lo=0) if sparse else n_layers
    experts = ()
    if sparse:
        e, ei = c.int("num_experts"), c.int("moe_intermediate_size")
        experts = (Linear("experts.gate_up_proj", h, 2 * ei, e), Linear("experts.down_proj", ei, h, e))
        ssm["moe"] = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=4),
                         expert_intermediate=ei, shared_intermediate=0, dense_layers=0)
    kinds_lins = {(k, d): (conv if k == "conv" else attn) + (mlp if d else experts)
                  for k in ("conv", "attn") for d in (True, False)}
    ssm["layers"] = tuple(kinds_lins["conv" if kind == "conv" else "attn", i < n_dense]
                          for i, kind in enumerate(kinds))
    lins, dense = list(kinds_lins["conv", True]), kinds_lins["attn", True]
    return ModelArch(
        name=c.str("name", "lfm2"), model_type="lfm2_moe" if sparse else "lfm2", family="mamba", hidden_size=h, num_layers=n_layers,
        num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=True, norm="rmsnorm", norms_per_layer=2,
        qk_norm="head", causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False, dropout=0.0,
        tensors=tuple(b.tensors), block_linears=tuple(lins), dense_block_linears=dense,
        ssm=ssm)
