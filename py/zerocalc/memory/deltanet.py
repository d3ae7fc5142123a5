"""The tensors autograd saves in a Gated DeltaNet layer (Qwen3-Next, Qwen3.5: model/hybrid.py) as it trains on a
GPU, where transformers runs the causal-conv1d and flash-linear-attention (fla) kernels.

transformers 5.24 modeling_qwen3_next.py Qwen3NextGatedDeltaNet.forward: in_proj_qkvz and in_proj_ba read the
input norm's output; q, k, v are cat into mixed_qkv, which `causal_conv1d_fn` (the hub kernel of causal-conv1d,
silu inside) convolves: CausalConv1dFn keeps its input x (causal_conv1d_interface.py ctx.save_for_backward(x,
weight, bias, ...)), 2·key + value per token. beta = b.sigmoid() (kept, the kernel's beta) and g =
-A_log.float().exp() * softplus(a.float() + dt_bias) (softplus keeps its fp32 input; the product its fp32
softplus output when A_log trains). `torch_chunk_gated_delta_rule` is the hub kernel "chunk_gated_delta_rule" of
fla: fla/ops/gated_delta_rule/chunk.py ChunkGatedDeltaRuleFunction.forward, with use_qk_l2norm_in_kernel, keeps
``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, initial_state, cu_seqlens)``: the l2-normed q and k
(new tensors in q's dtype; key per token each) and their fp32 rstd (one per head and token), v made contiguous
by input_guard (value per token), g after chunk_local_cumsum (fp32, one per value head and token), beta, and
solve_tril's A in k's dtype, 64 per value head and token (the chunk size); h, w, u and the output are
recomputed in backward. Qwen3NextRMSNormGated (PyTorch) then keeps the fp32 copy of the output, the fp32 rsqrt
per value head and token, the normalised tensor in the input's dtype (for its weight's gradient), weight times
it, silu's fp32 gate and silu's output; out_proj keeps the 16-bit result. Traced with the kernels stood in
(tools/memtrace/ssm_trace.py qwen3_next and qwen3_5_text, tests/data/qwen3_next_trace.json, qwen3_5_trace.json:
activations within 2.1 % in the full, bf16-mixed, LoRA and checkpointed rows). Qwen3.5's split projections
(modeling_qwen3_5.py Qwen3_5GatedDeltaNet: in_proj_qkv's output is mixed_qkv, in_proj_z / in_proj_b / in_proj_a)
feed the same kernels. The block norms (Qwen3NextRMSNorm, Qwen3_5RMSNorm) are Gemma's formula.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, block_saved_bytes, gated_mlp, linear, rmsnorm, sparse_moe
from .lora import Adapter

CHUNK = 64          # fla chunk_gated_delta_rule_fwd: chunk_size 64, solve_tril's A is (b, s, Hv, 64)


def delta_rule_saves(ss: SavedSet, t: int, e: int, key: int, value: int, nk: int, nv: int) -> None:
    """What ChunkGatedDeltaRuleFunction keeps besides beta (the sigmoid's output): q, k, v in e bytes, the
    fp32 q / k rstd, the fp32 cumulative g and A (e bytes, CHUNK per value head and token)."""
    ss.save("delta.q", e * t * key)
    ss.save("delta.k", e * t * key)
    ss.save("delta.qk_rstd", 2 * 4 * t * nk)
    ss.save("delta.v", e * t * value)
    ss.save("delta.g", 4 * t * nv)
    ss.save("delta.A", e * t * nv * CHUNK)


def mixer_saves(ss: SavedSet, c: Ctx, dl) -> None:
    """The Gated DeltaNet between its input projections and out_proj / o_proj (dims ``dl``: key, value, nk, nv):
    causal-conv1d's input, beta (and OLMo Hybrid's `beta * 2.0` under neg_eigval, the kernel's beta), g's softplus
    (its fp32 input; its fp32 output when A_log trains), fla's saves, then Qwen3NextRMSNormGated /
    OlmoHybridRMSNormGated over (t·nv, dv) rows: the fp32 copy of the kernel's output, the fp32 rsqrt per row, the
    normalised tensor in the input's dtype (for the weight's gradient), weight times it, the gate's fp32 copy and
    silu's output."""
    t, e = c.tokens, 2 if c.autocast else c.e
    key, value, nk, nv = dl["key"], dl["value"], dl["nk"], dl["nv"]
    ss.save("conv.x", e * t * (2 * key + value))
    ss.save("beta", e * t * nv)
    if dl.get("neg_eigval"):
        ss.save("beta2", e * t * nv)
    ss.save("g.softplus_in", 4 * t * nv)
    if c.train_base:
        ss.save("g.softplus_out", 4 * t * nv)
    delta_rule_saves(ss, t, e, key, value, nk, nv)
    ss.save("gnorm.fp32", 4 * t * value)
    ss.save("gnorm.rsqrt", 4 * t * nv)
    if dl.get("gnorm_fp32"):
        # LaraMiniRMSNormGated (modeling_lara_mini.py): `self.weight.to(torch.float32) * hidden_states` on the fp32
        # normalised tensor, kept for the weight's gradient, and the fp32 product the gate's mul keeps (traced)
        if c.train_base:
            ss.save("gnorm.normed", 4 * t * value)
        ss.save("gnorm.weighted", 4 * t * value)
    else:
        if c.train_base:
            ss.save("gnorm.normed", e * t * value)
        ss.save("gnorm.weighted", max(c.res, e) * t * value)     # weight (c.res) * hs.to(input_dtype) (e)
    ss.save("gnorm.gate_fp32", 4 * t * value)
    ss.save("gnorm.silu", 4 * t * value)


def gated_deltanet_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Qwen3NextDecoderLayer with linear_attention: input_layernorm, the Gated DeltaNet above, residual add,
    post_attention_layernorm, the MLP (dense or sparse, as blocks.py llama_block). A full-attention layer is
    blocks.py's llama_block."""
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    # Qwen3NextRMSNorm (input / post-attention / q / k norms) is Gemma's: `output * (1.0 + self.weight.float())` keeps
    # the fp32 normalised tensor (traced: the bf16 rows)
    if "out_proj" not in lins:
        return block_saved_bytes(replace(arch, family="gemma"), c, linears, adapters)
    experts = {lin.name for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    ss, h, gemma = SavedSet(), arch.hidden_size, True
    dl = arch.deltanet or {}
    y = rmsnorm(ss, c, "ln1", "resid", h, gemma)
    ins = [n for n in ("in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a") if n in lins]
    for name in ins:
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    c2 = replace(c, first_layer=False)
    e = 2 if c.autocast else c.e
    if not (c.first_layer and not c.train_base and not any(n in ads for n in ins)):
        mixer_saves(ss, c, dl)
    linear(ss, c2, "gnorm.out", e, lins["out_proj"], ads.get("out_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, gemma)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def olmo_hybrid_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """OLMo Hybrid (transformers 5.24 modeling_olmo_hybrid.py). Every norm is OlmoHybridRMSNorm, OLMo 2's
    `(self.weight * hidden_states).to(input_dtype)`: the fp32 copy, rsqrt and the fp32 normalised tensor the
    weight's gradient needs (blocks.py rmsnorm's gemma formula without a weight copy), then a new 16-bit output.

    OlmoHybridLinearAttentionDecoderLayer: input_layernorm, then OlmoHybridGatedDeltaNet.forward: q/k/v_proj, a_proj,
    b_proj and g_proj read the norm's output; `torch.cat([q, k, v])` is causal_conv1d_fn's input (CausalConv1dFn
    keeps it: 2·key + value per token); beta = b.sigmoid() (kept) times 2.0 under linear_allow_neg_eigval (the
    product is the kernel's beta); g = -A_log.float().exp() * softplus(a.float() + dt_bias) as Qwen3-Next's; fla's
    chunk_gated_delta_rule (delta_rule_saves); o_norm = OlmoHybridRMSNormGated over value heads with g_proj's
    output as the gate (Qwen3NextRMSNormGated's saves); o_proj; residual; post_attention_layernorm; the SwiGLU.

    OlmoHybridAttentionDecoderLayer is OLMo 2's post-norm block: q/k/v from the residual stream, q_norm / k_norm over
    the whole projections (this norm), RoPE in fp32 where the config has rope_theta (its fp32 cos / sin: the head,
    ssm_blocks.py ssm_final_norm), attention, o_proj, post_attention_layernorm on its output, the SwiGLU on the
    residual sum, post_feedforward_layernorm. Traced: tests/data/olmo_hybrid_trace.json."""
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    ss, h = SavedSet(), arch.hidden_size
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False)
    if "a_proj" not in lins:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear(ss, c, "resid", c.res, lins[name], ads.get(name))
        q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
        rmsnorm(ss, c2, "q_norm", "q", q_dim, True, x_bytes=e)
        rmsnorm(ss, c2, "k_norm", "k", kv_dim, True, x_bytes=e)
        out = attention_core(ss, c, arch, "attn", q_dim, kv_dim)
        linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
        rmsnorm(ss, c2, "post_attn_norm", "o_out", h, True, x_bytes=e)
        gated_mlp(ss, c2, "mlp", "resid2", c.res, lins, ads, lins["down_proj"].d_in)
        rmsnorm(ss, c2, "post_ff_norm", "mlp_out", h, True, x_bytes=e)
        return ss.total
    dl = arch.ssm["deltanet"]
    y = rmsnorm(ss, c, "ln1", "resid", h, True)
    ins = ("q_proj", "k_proj", "v_proj", "a_proj", "b_proj", "g_proj")
    for name in ins:
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    if not (c.first_layer and not c.train_base and not any(n in ads for n in ins)):
        mixer_saves(ss, c, dl)
    linear(ss, c2, "gnorm.out", e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, True)
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total
