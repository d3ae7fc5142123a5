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
from .blocks import Ctx, SavedSet, block_saved_bytes, gated_mlp, linear, rmsnorm, sparse_moe
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
    ss, t, h, gemma = SavedSet(), c.tokens, arch.hidden_size, True
    dl = arch.deltanet or {}
    y = rmsnorm(ss, c, "ln1", "resid", h, gemma)
    ins = [n for n in ("in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a") if n in lins]
    for name in ins:
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    c2 = replace(c, first_layer=False)
    e = 2 if c.autocast else c.e
    key, value, nk, nv = dl["key"], dl["value"], dl["nk"], dl["nv"]
    if not (c.first_layer and not c.train_base and not any(n in ads for n in ins)):
        ss.save("conv.x", e * t * (2 * key + value))
        ss.save("beta", e * t * nv)
        ss.save("g.softplus_in", 4 * t * nv)
        if c.train_base:
            ss.save("g.softplus_out", 4 * t * nv)
        delta_rule_saves(ss, t, e, key, value, nk, nv)
        # Qwen3NextRMSNormGated over (t·nv, dv) rows
        ss.save("gnorm.fp32", 4 * t * value)
        ss.save("gnorm.rsqrt", 4 * t * nv)
        prod = max(c.res, e)                     # weight (c.res) * hs.to(input_dtype) (e)
        if c.train_base:
            ss.save("gnorm.normed", e * t * value)
        ss.save("gnorm.weighted", prod * t * value)
        ss.save("gnorm.gate_fp32", 4 * t * value)
        ss.save("gnorm.silu", 4 * t * value)
    linear(ss, c2, "gnorm.out", e, lins["out_proj"], ads.get("out_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, gemma)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total
