"""Saved tensors of DeepSeek-V4's decoder layers (transformers 5.24 modeling_deepseek_v4.py DeepseekV4DecoderLayer):
hyper-connected residual streams around a shared-KV attention with a compressor, and clamped SwiGLU experts.

With t tokens (b sequences of s), hidden h, N = hc_mult streams, a heads of d dims, r rope dims, e the 16-bit
compute dtype, the ops and what each keeps for backward (traced on fake tensors: tools/memtrace/moe_trace.py
deepseek_v4, tests/data/deepseek_v4_trace.json, held within 3 % by tests/test_deepseek_v4_blocks.py):

- DeepseekV4HyperConnection (attn_hc, ffn_hc; fp32 parameters): `hidden_streams.view(b, s, -1).float()` is an
  fp32 copy of the (b, s, N, h) stream that DeepseekV4UnweightedRMSNorm's square keeps with its rsqrt; the normed
  fp32 tensor is F.linear(·, fn.float())'s input; its (2 + N)·N outputs per token, the sigmoids of pre and post,
  pre + eps, the comb softmax and the Sinkhorn loop's 2·iters - 1 divisions (each its N×N numerator and N-wide
  denominator) are fp32; `pre.unsqueeze(-1) * hidden_streams` keeps the 16-bit stream;
- the residual mix `post.to(dtype).unsqueeze(-1) * out.unsqueeze(-2) + matmul(comb.to(dtype).T, streams)` keeps
  the sublayer's output and the 16-bit post and comb;
- DeepseekV4RMSNorm (fp32 weight, `(self.weight * hidden_states).to(input_dtype)`): the fp32 upcast, rsqrt and the
  fp32 normalised tensor (memory/blocks.py rmsnorm with the fp32 product); input_layernorm, q_a_norm, kv_norm,
  post_attention_layernorm and the compressors' kv_norm;
- DeepseekV4Attention: q_a_proj / kv_proj keep the normed input, q_b_proj q_a_norm's output; q_b_norm (unweighted,
  per head) keeps the fp32 copy of q, its rsqrt in fp32 and 16 bits and q itself; apply_rotary_pos_emb's
  repeat_interleave'd cos and sin (b·s·r each) are kept by the q, kv and output rotations; FA2 keeps the rotated
  q, the one shared KV head over s + the compressed entries, the output and the logsumexp; o_a_proj
  (DeepseekV4GroupedLinear: a bmm) keeps the regrouped copy of the rotated output, o_b_proj its output;
- DeepseekV4HCACompressor (rate m, W = s // m windows): kv_proj's output, the fp32 softmax of the gates and its
  16-bit copy over the W·m usable tokens, kv_norm over W entries, the rotations of W entries;
  DeepseekV4CSACompressor: the same over its (b, W, 2m, d) overlap layout, whose zero-filled kv tensor the product
  keeps instead of kv_proj's output; its DeepseekV4Indexer keeps nothing past the forward (its graph ends in
  `topk(...).indices`, which no gradient reaches, so what its ops save dies with it);
- DeepseekV4TopKRouter: F.linear keeps the normed input; sqrtsoftplus keeps the logits and the sqrt (e·t·E each),
  top-k its int64 indices, the gathered weights and their sum; DeepseekV4Experts under grouped_mm (t·k routed
  rows): the gathered input and the product (when the experts train), the gate_up output, both clamps, SiLU, the
  down output and the gathered routing weights, the int64 permutation indices (24 bytes per row) and the int32
  offsets; the shared DeepseekV4MLP: both projections' outputs, both clamps, SiLU, and the product (down_proj's
  input, when it trains).

Under autocast over fp32 weights (bf16-mixed) the stream is fp32 (its `.float()` copies are the stream itself),
each linear reading it keeps autocast's 16-bit copy, F.linear(·, fn) a 16-bit copy of the normed input, the mix's
matmul 16-bit copies of comb and the stream, and the grouped_mm experts run in fp32 (traced: the -mixed rows).

Outside the layers (`hyper_outside`): the embedding expanded to N streams (layer 0's stream), DeepseekV4HyperHead
(the fp32 copy and normed tensor of the last stream, its sigmoid mix) and model.norm with its fp32 product.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, linear, rmsnorm
from .blocks_qwen4_exp import QWEN4_HYPER
from .blocks_hy_v4 import MODEL_TYPES as HY_V4, hy_v4_mix_temps, hy_v4_moment, hy_v4_outside
from .blocks_glm5_next import GLM5_HYPER
from .lora import Adapter

# other hyper-connected families, each its own (hyper_outside, mix_backward_temps, hc_backward_moment)
OTHERS = {**QWEN4_HYPER, **{t: (hy_v4_outside, hy_v4_mix_temps, hy_v4_moment) for t in HY_V4}, **GLM5_HYPER}


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _e16(c: Ctx) -> int:
    """A projection's output: 16 bits under autocast, else the compute dtype."""
    return 2 if c.autocast else c.e


def hyper_connection(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, stream: str) -> None:
    """One DeepseekV4HyperConnection over the (t, N, h) stream `stream`, in the residual dtype (fp32 under autocast
    over fp32 weights, where `.float()` is the stream itself): the module docstring's list. Under autocast
    F.linear(·, fn.float()) keeps autocast's 16-bit copy of the normed input and gives 16-bit mixes."""
    hy, t, h = arch.hyper, c.tokens, arch.hidden_size
    n, iters = hy["hc_mult"], hy["sinkhorn_iters"]
    if c.first_layer and not c.train_base:
        return                                   # the embedding's streams need no gradient under LoRA
    ss.save(stream, c.res * t * n * h)
    if c.res != 4:
        ss.save(f"{key}.fp32", 4 * t * n * h)
    ss.save(f"{key}.rsqrt", 4 * t)
    if c.train_base:
        ss.save(f"{key}.normed", (2 if c.autocast else 4) * t * n * h)   # F.linear(·, fn)'s input
    fp32 = n * n + 3 * n + (2 * iters - 1) * (n * n + n)   # comb softmax, sigmoids, pre + eps, Sinkhorn
    # F.linear's (2 + N)·N outputs, kept by the products with the scale parameter when it trains
    mixes = (2 if c.autocast else 4) * t * (2 + n) * n if c.train_base else 0
    ss.save(f"{key}.mix", 4 * t * fp32 + mixes)


def _mix(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, out: str, out_bytes: int, stream: str,
         stream_grad: bool = True) -> None:
    """The residual mix after a sublayer: its output, `post.to(dtype)` in the stream's dtype and the matmul's comb
    and stream (autocast's 16-bit copies of both over an fp32 stream; else comb in the compute dtype beside the
    stream the hyper connection keeps). Over the embedding's streams under LoRA (no gradient: nor post, comb)
    only post, for the sublayer output's gradient."""
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    ss.save(f"{key}.post", c.res * t * n)
    if not stream_grad:
        return
    ss.save(out, out_bytes * t * h)
    if c.autocast and c.res == 4:
        ss.save(f"{key}.comb", 2 * t * n * n)
        ss.save(f"{stream}.bf16", 2 * t * n * h)
    else:
        ss.save(f"{key}.comb", c.e * t * n * n)
        ss.save(stream, c.res * t * n * h)


def _norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, x_bytes: int, tokens: int | None = None) -> str:
    """DeepseekV4RMSNorm: memory/blocks.py rmsnorm with the fp32 product (its `gemma` flag), over `tokens` rows."""
    return rmsnorm(ss, replace(c, tokens=tokens) if tokens else c, key, x, d, True, x_bytes=x_bytes)


def _compressor(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict, y: str) -> int:
    """The compressor (HCA: kv_proj of d; CSA: of 2d, with the indexer), reading the normed input `y`; returns the
    compressed entries per sequence (the KV length FA2 reads beyond s)."""
    if "compressor.kv_proj" not in lins:
        return 0
    hy, d, b, e = arch.hyper, arch.head_dim, c.batch, _e16(c)
    r, csa = hy["rope"], lins["compressor.kv_proj"].d_out == 2 * arch.head_dim
    m = hy["rates"]["compressed_sparse_attention" if csa else "heavily_compressed_attention"]
    w = c.seq // m
    used = b * w * m                              # the usable tokens: whole windows only

    def compress(key: str, width: int, overlap: bool) -> None:
        for name in ("kv_proj", "gate_proj"):
            linear(ss, c, y, c.res, lins[f"{key}.{name}"], ads.get(f"{key}.{name}"))
        ss.save(f"{key}.softmax", 4 * used * width * (2 if overlap else 1))
        ss.save(f"{key}.softmax16", e * used * width * (2 if overlap else 1))
        # HCA: `chunk_kv * softmax` keeps kv_proj's output; CSA: the new_zeros overlap tensor filled from it
        ss.save(f"{key}.kv", e * (used * width * 2 if overlap else c.tokens * width))
        # the window sum (fp32 under autocast) into kv_norm
        _norm(ss, c, f"{key}.kv_norm", f"{key}.sum", width, 4 if c.autocast else e, b * w)
        ss.save(f"{key}.rope", 2 * c.res * b * w * r)

    # the CSA indexer keeps nothing past the forward: its graph ends in `topk(...).indices` (no gradient reaches
    # it), so what its ops save (its compressor, the scorer's fp32 q and scores, its LoRA inputs) dies with it
    compress("compressor", d, csa)
    return w


def hyper_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One DeepseekV4DecoderLayer (the module docstring's op list)."""
    ss = SavedSet()
    _attention_half(ss, arch, c, linears, adapters)
    _ffn_half(ss, arch, c, linears, adapters)
    return ss.total


def hc_backward_moment(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """The layer's bytes at its ffn_hc backward: DeepseekV4UnweightedRMSNorm's backward over the fp32 (t, N·h) copy
    of the stream holds five fp32 tensors of that size (mul, pow, div, mul, mul) beside the incoming stream
    gradient, while the attention half's saved tensors and ffn_hc's fp32 copy and rsqrt are alive (the FFN half,
    the F.linear input, the Sinkhorn tensors and the stream are consumed by then). Traced: the peak of
    tools/memtrace/moe_trace.py deepseek-v4-3l-lora-attn-s512-ckpt (five 8 MiB fp32 temporaries and a 4 MiB
    bf16 one at a backward mul)."""
    if arch.model_type in OTHERS:
        return OTHERS[arch.model_type][2](arch, c, linears, adapters)
    ss = SavedSet()
    _attention_half(ss, arch, c, linears, adapters)
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    copy = 4 * t * n * h + 4 * t                 # ffn_hc's fp32 copy of the stream and its rsqrt
    return ss.total + copy + 5 * 4 * t * n * h + c.res * t * n * h


def mix_backward_temps(arch: ModelArch, c: Ctx) -> int:
    """The first op of a layer's backward, the FFN residual mix `post * mlp_out + matmul(comb.T, streams)`, beside
    the layer's whole saved set: four (t, N, h) gradients in the stream's dtype (the incoming one, the product's
    two and the matmul's). Traced: the peak of tools/memtrace/moe_trace.py deepseek-v4-3l-full-s512-ckpt (a
    backward mul, the recomputed layer whole, 16 MiB of stream-sized temporaries)."""
    if arch.model_type in OTHERS:
        return OTHERS[arch.model_type][1](arch, c)
    return 4 * c.res * c.tokens * arch.hyper["hc_mult"] * arch.hidden_size


def _attention_half(ss: SavedSet, arch: ModelArch, c: Ctx, linears: tuple[Linear, ...],
                    adapters: tuple[Adapter, ...]) -> None:
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    hy, h, t, e = arch.hyper, arch.hidden_size, c.tokens, _e16(c)
    a, d, r = arch.num_heads, arch.head_dim, hy["rope"]
    c2 = _later(c)
    hyper_connection(ss, c, arch, "attn_hc", "stream_in")
    # the collapsed stream `.to(hidden_streams.dtype)`: the residual dtype, and so the norm's output
    y = _norm(ss, c, "ln1", "collapsed", h, c.res)
    for name in ("q_a_proj", "kv_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    qa = _norm(ss, _later(c) if "q_a_proj" in ads else c, "q_a_norm", "q_a", hy["q_lora_rank"], e)
    linear(ss, c, qa, e, lins["q_b_proj"], ads.get("q_b_proj"))
    if c.train_base or not c.first_layer or "q_a_proj" in ads or "q_b_proj" in ads:
        # q_b_norm: x * rsqrt(x.float().square().mean(-1)).to(x.dtype), per head
        ss.save("q_b_norm", 4 * t * a * d + 4 * t * a + e * t * a + e * t * a * d)
    _norm(ss, _later(c) if "kv_proj" in ads else c, "kv_norm", "kv", d, e)
    extra = _compressor(ss, c, arch, lins, ads, y)
    ss.save("rope", 6 * c.res * t * r)                          # cos / sin of the q, kv and output rotations
    ss.save("attn.q", e * t * a * d)
    ss.save("attn.kv", e * c.batch * (c.seq + extra) * d)
    ss.save("attn.out", e * t * a * d)
    ss.save("attn.lse", 4 * a * t)
    # the grouped bmm's input: (t·o_groups, a·d / o_groups) rows, a·d per token
    linear(ss, c2, "attn.regrouped", e, Linear("o_a_proj", a * d, hy["o_groups"] * hy["o_lora_rank"]), None)
    linear(ss, c2, "o_a.out", e, lins["o_b_proj"], ads.get("o_b_proj"))
    _mix(ss, c2, arch, "attn_mix", "o_b.out", e, "stream_in", c.train_base or not c.first_layer)


def _ffn_half(ss: SavedSet, arch: ModelArch, c: Ctx, linears: tuple[Linear, ...],
              adapters: tuple[Adapter, ...]) -> None:
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    h, t, e = arch.hidden_size, c.tokens, _e16(c)
    c2 = _later(c)
    hyper_connection(ss, c2, arch, "ffn_hc", "stream_mid")
    y2 = _norm(ss, c2, "ln2", "collapsed2", h, c.res)
    moe = arch.moe
    k, n_e, ie = moe.experts_per_token, moe.num_experts, moe.expert_intermediate
    rows = t * k
    if c.train_base:
        linear(ss, c2, y2, c.res, Linear("router", h, n_e), None)
    # sqrtsoftplus over the logits (softplus runs in fp32 under autocast: its fp32 copy and the fp32 sqrt), the
    # int64 top-k, the gathered weights and (16-bit only) their sum
    if c.autocast:
        ss.save("router", 8 * t * n_e + 8 * t * k + 4 * t * k)
    else:
        ss.save("router", 2 * e * t * n_e + 8 * t * k + e * t * k + e * t)
    # the grouped_mm experts run in their weight dtype (memory/blocks.py sparse_moe): the residual dtype
    em = c.res
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    if trained:
        ss.save("moe.gathered", em * rows * h)
        ss.save("moe.prod", em * rows * ie)
    ss.save("moe.gate_up", em * rows * 2 * ie)
    ss.save("moe.act", 3 * em * rows * ie)                      # both clamps, SiLU
    ss.save("moe.expert_out", em * rows * h)
    ss.save("moe.routing", em * rows + 24 * rows + (0 if c.autocast else 4 * n_e))
    for name in ("gate_proj", "up_proj"):
        linear(ss, c2, y2, c.res, lins[name], ads.get(name))
    ss.save("shared.act", 5 * e * t * ie)                       # gate and up outputs, both clamps, SiLU
    linear(ss, c2, "shared.prod", e, lins["down_proj"], ads.get("down_proj"))
    # routed (the experts' dtype) + shared: the wider of the two
    _mix(ss, c2, arch, "ffn_mix", "mlp.out", max(em, e), "stream_mid")


def hyper_outside(ss: SavedSet, c: Ctx, arch: ModelArch) -> str:
    """After the layers: DeepseekV4HyperHead over the last stream (its fp32 copy, the stream itself when fp32, and
    rsqrt; the normed fp32 input of F.linear(·, hc_fn), autocast's 16-bit copy of it; the mix, its sigmoid and
    pre + eps) and model.norm (fp32 product) over the collapsed stream in the residual dtype. Returns the final
    norm's output key (lm_head's input, in the residual dtype)."""
    if arch.model_type in OTHERS:
        return OTHERS[arch.model_type][0](ss, c, arch)
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    ss.save("hc_head.stream", c.res * t * n * h)
    if c.res != 4:
        ss.save("hc_head.fp32", 4 * t * n * h)
    ss.save("hc_head.rsqrt", 4 * t)
    if c.train_base:
        ss.save("hc_head.normed", (2 if c.autocast else 4) * t * n * h)
    ss.save("hc_head.mix", (2 if c.autocast else 4) * t * n + 2 * 4 * t * n)
    return _norm(ss, c, "final_norm", "hc_head.out", h, c.res)


HYPER = ("deepseek_v4",)
