"""Saved tensors of ZAYA1's decoder layer (transformers 5.24 modeling_zaya.py ZayaDecoderLayer).

ZayaModel.forward carries the residual stream in fp32 (`(...).to(torch.float32)` after the input scaling) and each
norm reads `residual.to(norm.weight.dtype)`. With t = b·s tokens, a query and kv key/value heads of d dims,
C = (a + kv)·d conv channels, r = router_hidden_size and R = t·k routed rows, in the 16-bit compute dtype unless
said:
- ZayaRMSNorm (input_layernorm, post_attention_layernorm, the router MLP's norm) is Llama's (memory/blocks.py
  rmsnorm over its input's dtype);
- ZayaCCAProjection: q_proj, k_proj, v_proj_current and v_proj_delayed read input_layernorm's output; the
  concatenated q/k, left-padded by (cca_time0 - 1) + (cca_time1 - 1), is conv_qk_depthwise's input and its output
  conv_qk_grouped's (ConvolutionBackward keeps its input whether or not the weight trains: LoRA too); the query
  and key sums (conv output plus the residual paths) are ZayaQKNorm's inputs, which keeps them with the L2 norm,
  its reciprocal and the scale (per head and token, 16 bits) for q and k, and under full fine-tuning the normed key
  (the temp's gradient); the partial rotary embedding concatenates new q and k, which FA2 keeps with the value (the
  current and delayed halves concatenated), its output and the fp32 logsumexp; o_proj reads the output's
  contiguous copy;
- ZayaResidualScaling (twice): `(hidden + bias) * scale + (residual + bias) * scale`: when the scales train the
  16-bit and the fp32 (the stream's) sums;
- ZayaRouter: down_proj (h -> r); after layer 0 `router_states * router_states_scale` keeps the previous layer's
  (t, r) states when the scale trains; the router MLP (norm, fc1, GELU, fc2, GELU, out_proj): GELU's inputs always,
  fc1's / fc2's / out_proj's inputs when they train; the (E + 1)-way softmax, int64 top-k and the skip mask;
- ZayaExperts through transformers' grouped_mm (integrations/moe.py): the gathered rows and the product when the
  experts train, gate_up's output, SiLU's, down's output (the 16-bit routing weights' factor), the weights and three
  int64 permutation indices per row.
Layer 0 under full fine-tuning also holds the model's input scaling's sum (the scale's gradient).

Traced: tools/memtrace/more_moe_trace.py zaya (tests/data/zaya_trace.json, tests/test_zaya_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, linear, rmsnorm
from .lora import Adapter

MODEL_TYPES = ("zaya",)


def conv_kernels(arch: ModelArch) -> tuple[int, int]:
    """(cca_time0, cca_time1), from the convolutions' weight shapes."""
    k = {t.name.rsplit(".", 2)[-2]: t.shape[-1] for t in arch.tensors
         if t.name.endswith(("conv_qk_depthwise.weight", "conv_qk_grouped.weight")) and t.layer == 0}
    return k["conv_qk_depthwise"], k["conv_qk_grouped"]


def zaya_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    h, t, d, moe = arch.hidden_size, c.tokens, arch.head_dim, arch.moe
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
    a, kvh = q_dim // d, kv_dim // d
    if c.first_layer and c.train_base:
        ss.save("input_scaling", e * t * h)
    y = rmsnorm(ss, c, "ln1", "resid16", h, x_bytes=c.res)
    for name in ("q_proj", "k_proj", "v_proj_current", "v_proj_delayed"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    if not (c.first_layer and not c.train_base) or any(n in ads for n in ("q_proj", "k_proj")):
        ch, (k0, k1) = (q_dim + kv_dim) * c.batch, conv_kernels(arch)
        ss.save("cca.padded", e * ch * (c.seq + k0 - 1 + k1 - 1))
        ss.save("cca.depthwise", e * ch * (c.seq + k1 - 1))
        ss.save("qk_norm.in", e * t * (q_dim + kv_dim))
        ss.save("qk_norm.stats", 3 * e * t * (a + kvh))
    if c.train_base:
        ss.save("qk_norm.key", e * t * kv_dim)
    out = attention_core(ss, c2, replace(arch, family="llama", num_heads=a), "attn", q_dim, kv_dim)
    linear(ss, c2, f"{out}.copy", e, lins["o_proj"], ads.get("o_proj"))
    if c.train_base:
        ss.save("rs1.hidden", e * t * h)
        ss.save("rs1.residual", 4 * t * h)
    y2 = rmsnorm(ss, c2, "ln2", "resid2_16", h, x_bytes=c.res)
    rh = lins["gate.down_proj"].d_out
    linear(ss, c2, y2, c.res, lins["gate.down_proj"], ads.get("gate.down_proj"))
    if c.train_base and not c.first_layer:
        ss.save("router.prev_states", e * t * rh)
    yr = rmsnorm(ss, c2, "router_norm", "router_states", rh, x_bytes=e)
    linear(ss, c2, yr, e, lins["router_mlp.fc1"], ads.get("router_mlp.fc1"))
    ss.save("router.fc1_out", e * t * rh)
    linear(ss, c2, "router.gelu1", e, lins["router_mlp.fc2"], ads.get("router_mlp.fc2"))
    ss.save("router.fc2_out", e * t * rh)
    linear(ss, c2, "router.gelu2", e, lins["router_mlp.out_proj"], ads.get("router_mlp.out_proj"))
    rows, ie = t * moe.experts_per_token, moe.expert_intermediate
    ss.save("router.softmax", e * t * (moe.num_experts + 1) + 8 * rows + rows)
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    em = c.res                                    # grouped_mm in the experts' weight dtype (memory/blocks.py)
    if trained:
        ss.save("moe.gathered", em * rows * h)
    ss.save("moe.gate_up", em * rows * 2 * ie)
    ss.save("moe.act", em * rows * ie)
    if trained:
        ss.save("moe.prod", em * rows * ie)
    ss.save("moe.expert_out", em * rows * h)
    ss.save("moe.routing", e * rows + 24 * rows)
    if c.train_base:
        ss.save("rs2.hidden", e * t * h)
        ss.save("rs2.residual", 4 * t * h)
    return ss.total
