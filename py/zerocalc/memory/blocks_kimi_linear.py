"""Saved tensors of Kimi Linear's decoder layer (transformers 5.24 modeling_kimi_linear.py KimiLinearDecoderLayer)
as it trains on a GPU, where KDA runs the causal-conv1d and flash-linear-attention (fla) kernels.

A ``full_attention`` layer is DeepSeek-V3's latent attention with the router / experts / shared expert or the
dense SwiGLU: memory/blocks.py llama_block with ``arch.mla`` (held to tests/data/mla_trace.json). A
``linear_attention`` layer (KimiLinearDeltaAttention.forward), with t tokens, H heads of d (q = H·d) and e the
16-bit compute dtype:

- input_layernorm (Llama's RMSNorm, blocks.py rmsnorm); q/k/v_proj, forget_gate.f_a_proj, b_proj and g_a_proj read
  its output, f_b_proj reads f_a's (t, d) output, g_b_proj g_a's;
- ``torch.cat([q, k, v])`` is causal_conv1d_fn's input, kept by CausalConv1dFn (e·t·3q);
- KimiLinearForgetGate: ``g = f_b.float() + dt_bias.float()``, ``torch.log(1.0 + torch.exp(g))`` keeps exp's fp32
  output and log's fp32 input (1 + exp), torch.where its bool ``g > 20`` mask, ``-exp(A_log) * softplus`` the
  (1, 1, H, 1) -exp(A_log) and, when A_log trains, the fp32 softplus (and exp keeps exp(A_log));
- beta = sigmoid(b_proj) (e·t·H, kept by the sigmoid and by the kernel);
- fla's ChunkKDAFunction (fla 0.5.2 fla/ops/kda/chunk.py; tools/memtrace/kda_trace.py KdaStandIn): the l2-normed q
  and k (e·t·q each) and their fp32 rstd (4·t·H each), v's contiguous copy (e·t·q), the fp32 chunk-cumsum of g and
  g itself (4·t·q each), Aqk and Akk (e·t·H·64 each);
- KimiLinearRMSNormGated over (t·H, d) rows: the fp32 copy of the kernel output, the fp32 rsqrt per row, the fp32
  normalised tensor when the weight trains, the fp32 copy of the weight (16-bit weights only), the product with the
  weight (the gate's mul keeps it when the gate needs a gradient), sigmoid's fp32 output; o_proj reads the e-byte
  result.

Then post_attention_layernorm and the dense SwiGLU or the MoE (blocks.py gated_mlp / sparse_moe with the fp32
router copy).

Ling 3 (modeling_bailing_hybrid.py) differs where its linears say so: BailingHybridDeltaAttention has a full-rank
forget_gate.f_proj and output gate g_proj (h -> q, both reading input_layernorm's output) and, under kda_safe_gate
(the default), ``lower_bound * sigmoid(A_log.exp() * gate_input)`` (the mul keeps exp(A_log) and, when A_log
trains, the fp32 gate_input; the sigmoid its fp32 output), cast by ``gate.to(hidden_states.dtype)``: the kernel's g
is in the norm output's dtype; BailingHybridAttention gates the MLA output per head with
``torch.sigmoid(g_proj(x).float()).to(x.dtype)`` (the fp32 sigmoid, its cast kept by the mul; its RoPE's two
(t, 64) 16-bit cos / sin copies are left out: 0.4 % of that layer).

Traced: tools/memtrace/kda_trace.py kimi_linear / bailing_hybrid (tests/data/kimi_linear_trace.json,
bailing_hybrid_trace.json; tests/test_kimi_linear_blocks.py, test_bailing_hybrid_blocks.py): activations within
2.5 % in every row.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, gated_mlp, linear, llama_block, rmsnorm, sparse_moe
from .lora import Adapter

MODEL_TYPES = ("kimi_linear", "bailing_hybrid")
CHUNK = 64          # fla chunk_kda: chunk_size 64, Aqk / Akk are (b, s, H, 64)
KDA_INPUTS = ("q_proj", "k_proj", "v_proj", "f_a_proj", "f_proj", "b_proj", "g_a_proj", "g_proj")
GATES = ("f_a_proj", "f_b_proj", "f_proj", "b_proj", "g_a_proj", "g_b_proj", "g_proj")


def kda_saves(ss: SavedSet, c: Ctx, q: int, nh: int, d: int, qkv_grad: bool, gate_grad: bool, safe: bool = False,
              g_bytes: int = 4) -> None:
    """KimiLinearDeltaAttention / BailingHybridDeltaAttention between the input projections and o_proj (the module
    docstring's list). ``qkv_grad``: the q/k/v projections' outputs need a gradient; ``gate_grad``: the gate
    branches' do; ``safe``: Ling 3's sigmoid forget gate; ``g_bytes``: the kernel's g (Kimi's fp32 gate; Ling 3's
    `gate.to(hidden_states.dtype)`, the norm output's dtype)."""
    t, e = c.tokens, 2 if c.autocast else c.e
    if qkv_grad:
        ss.save("conv.x", e * t * 3 * q)
    if safe:
        # BailingHybridForgetGate (kda_safe_gate): `lower_bound * sigmoid(A_log.exp() * gate_input)`: the mul keeps
        # exp(A_log) (fp32, H) and, when A_log trains, the fp32 gate_input; sigmoid its fp32 output
        if gate_grad:
            ss.save("fgate.exp_a", 4 * nh)
            ss.save("fgate.sigmoid", 4 * t * q)
        if c.train_base:
            ss.save("fgate.exp_a", 4 * nh)
            ss.save("fgate.gate_input", 4 * t * q)
    else:
        if gate_grad:
            ss.save("fgate.exp", 4 * t * q)
            ss.save("fgate.log_in", 4 * t * q)
            ss.save("fgate.mask", t * q)
            ss.save("fgate.neg_decay", 4 * nh)
        if c.train_base:
            ss.save("fgate.exp_a", 4 * nh)
            ss.save("fgate.softplus", 4 * t * q)
    ss.save("beta", e * t * nh)
    if not (qkv_grad or gate_grad):
        return
    # fla ChunkKDAFunction.forward's save_for_backward
    ss.save("kda.q", e * t * q)
    ss.save("kda.k", e * t * q)
    ss.save("kda.qk_rstd", 2 * 4 * t * nh)
    ss.save("kda.v", e * t * q)
    ss.save("kda.g_cumsum", 4 * t * q)
    ss.save("kda.g", g_bytes * t * q)
    ss.save("kda.Aqk_Akk", 2 * e * t * nh * CHUNK)
    # KimiLinearRMSNormGated: fp32 norm, weight in fp32, sigmoid(gate.float()), the product back in e bytes
    ss.save("onorm.fp32", 4 * t * q)
    ss.save("onorm.rsqrt", 4 * t * nh)
    if c.train_base:
        ss.save("onorm.normed", 4 * t * q)
    if c.e != 4:
        ss.save("onorm.weight_fp32", 4 * d)
    if gate_grad:
        ss.save("onorm.weighted", 4 * t * q)
    ss.save("onorm.sigmoid", 4 * t * q)


def kimi_linear_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes: llama_block for the MLA layers, the KDA list above for the others."""
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    upstream = not (c.first_layer and not c.train_base)
    if "b_proj" not in lins:
        total = llama_block(arch, c, linears, adapters)
        if "g_proj" in lins:
            # BailingHybridAttention: `torch.sigmoid(g_proj(x).float()).to(x.dtype)` per head and token: sigmoid's
            # fp32 output, its copy in the norm output's dtype (the same tensor when that is fp32) kept by the mul
            t, nh = c.tokens, lins["g_proj"].d_out
            if upstream or "g_proj" in ads:
                total += 4 * t * nh
            total += (0 if c.res == 4 else c.res * t * nh)
        return total
    experts = {lin.name for lin in linears if lin.count > 1}
    ss, h = SavedSet(), arch.hidden_size
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False)
    y = rmsnorm(ss, c, "ln1", "resid", h)
    for name in KDA_INPUTS:
        if name in lins:
            linear(ss, c, y, c.res, lins[name], ads.get(name))
    for name, src in (("f_b_proj", "fa.out"), ("g_b_proj", "ga.out")):
        if name in lins:
            linear(ss, c, src, e, lins[name], ads.get(name))
    qkv_grad = upstream or any(n in ads for n in ("q_proj", "k_proj", "v_proj"))
    gate_grad = upstream or any(n in ads for n in GATES)
    safe = "f_proj" in lins
    d = lins["q_proj"].d_out // lins["b_proj"].d_out
    kda_saves(ss, c, lins["q_proj"].d_out, lins["b_proj"].d_out, d, qkv_grad, gate_grad, safe,
              c.res if safe else 4)
    linear(ss, c2, "onorm.out", e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total
