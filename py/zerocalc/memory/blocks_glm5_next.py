"""Saved tensors of GLM-5.3-Flash's language-model layer (transformers 5.24 modeling_glm5_next.py
Glm5NextTextDecoderLayer) as it trains on a GPU (fla's chunk_kda and causal-conv1d's kernel:
memory/blocks_kimi_linear.py).

With t tokens, h hidden, N = hc_mult streams, e the 16-bit compute dtype:

- attn_hc / ffn_hc (Glm5NextTextHyperConnection): DeepSeek-V4's (memory/blocks_hyper.py hyper_connection's list,
  repeated in `_hc`: the fp32 stream copy, rsqrt, normed input, the mixes, sigmoids, softmax and Sinkhorn
  divisions, the stream) and, its fn parameter being 16-bit here, the fp32 copy `self.fn.float()` that F.linear
  keeps for the input's gradient;
- the residual mixes `post.to(dtype) * out + matmul(comb.to(dtype).T, residual)`: post, the sublayer's output, comb
  and the stream (blocks_hyper's);
- input_layernorm / post_attention_layernorm (Glm5NextTextRMSNorm, Llama's) over the collapsed stream;
- linear_attention (Glm5NextTextLinearAttention): Kimi Linear's KDA (blocks_kimi_linear.kda_saves) with the safe
  lower-bound gate `lower_bound * sigmoid(exp(A_log) * g)`: the fp32 sigmoid and exp(A_log), g itself when A_log
  trains, the fp32 product (fla's g); apply_mask_to_padding_states' product is the projections' input (the norm
  output's size) and the (b, s) bool mask is kept once (the head's);
- indexed_attention (Glm5NextTextAttention, NoPE: qk_rope_head_dim 0): q_a_proj, q_a_layernorm, q_b_proj,
  kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj (llama-style norms); the indexer runs under torch.no_grad (memory/
  indexers.py); SDPA (the only backends: build_attention_mask_from_topk) keeps q (q_b_proj's output), the new key,
  the value (a view of kv_b_proj's output, all of it), its output (o_proj's input), the fp32 logsumexp and the
  (b, 1, s, s) 16-bit mask `torch.where(mask, 0, min)`, one per layer; eager attention q, k, v, the fp32 softmax,
  its 16-bit copy and the output's contiguous copy (a plan's "flash" runs as SDPA: _supports_flash_attn False);
- the MLP: Glm5NextTextMLP and the shared expert clamp gate and up (`clamp(max=limit)`, `clamp(-limit, limit)`),
  each clamp keeping its input: gate, up, both clamps, SiLU and the product; Glm5NextTextMoE: memory/blocks.py
  sparse_moe (fp32 sigmoid router, grouped_mm experts) with the experts' two clamps per routed row.

Traced: tools/memtrace/glm5_next_trace.py (tests/data/glm5_next_trace.json, tests/test_glm5_next_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, linear, rmsnorm, sparse_moe
from .blocks_kimi_linear import GATES, kda_saves
from .lora import Adapter

MODEL_TYPES = ("glm5_next", "glm5_next_text")


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _hc(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, stream: str) -> None:
    """One Glm5NextTextHyperConnection over the (t, N, h) stream: memory/blocks_hyper.py hyper_connection's saves
    (DeepseekV4HyperConnection's code, repeated here: blocks_hyper imports this module) and the fp32 copy of the
    16-bit fn that F.linear(·, fn.float()) keeps."""
    n, iters, t, h = arch.hyper["hc_mult"], arch.hyper["sinkhorn_iters"], c.tokens, arch.hidden_size
    if c.first_layer and not c.train_base:
        return                                   # the embedding's streams need no gradient under LoRA
    ss.save(stream, c.res * t * n * h)
    if c.res != 4:
        ss.save(f"{key}.fp32", 4 * t * n * h)
        ss.save(f"{key}.fn_fp32", 4 * (2 + n) * n * n * h)
    ss.save(f"{key}.rsqrt", 4 * t)
    if c.train_base:
        ss.save(f"{key}.normed", (2 if c.autocast else 4) * t * n * h)   # F.linear(·, fn)'s input
    fp32 = n * n + 3 * n + (2 * iters - 1) * (n * n + n)   # comb softmax, sigmoids, pre + eps, Sinkhorn
    mixes = (2 if c.autocast else 4) * t * (2 + n) * n if c.train_base else 0
    ss.save(f"{key}.mix", 4 * t * fp32 + mixes)


def _kda(ss: SavedSet, c: Ctx, y: str, lins: dict, ads: dict) -> str:
    """Glm5NextTextLinearAttention: Kimi Linear's projections and memory/blocks_kimi_linear.py kda_saves with the
    safe gate and the fp32 g; returns o_proj's input key."""
    e = 2 if c.autocast else c.e
    for name in ("q_proj", "k_proj", "v_proj", "f_a_proj", "b_proj", "g_a_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    for name, src in (("f_b_proj", "fa.out"), ("g_b_proj", "ga.out")):
        linear(ss, c, src, e, lins[name], ads.get(name))
    upstream = not (c.first_layer and not c.train_base)
    qkv_grad = upstream or any(n in ads for n in ("q_proj", "k_proj", "v_proj"))
    gate_grad = upstream or any(n in ads for n in GATES)
    q, nh = lins["q_proj"].d_out, lins["b_proj"].d_out
    kda_saves(ss, c, q, nh, q // nh, qkv_grad, gate_grad, True, 4)
    return "onorm.out"


def _mix(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, out: str, out_bytes: int, stream: str) -> None:
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    ss.save(f"{key}.post", c.res * t * n)
    if c.first_layer and not c.train_base:
        return
    ss.save(out, out_bytes * t * h)
    if c.autocast and c.res == 4:
        ss.save(f"{key}.comb", 2 * t * n * n)
        ss.save(f"{stream}.bf16", 2 * t * n * h)
    else:
        ss.save(f"{key}.comb", c.e * t * n * n)
        ss.save(stream, c.res * t * n * h)


def _clamped_mlp(ss: SavedSet, c: Ctx, key: str, x: str, lins: dict, ads: dict, inter: int) -> str:
    """Glm5NextTextMLP: gate_proj / up_proj outputs (kept by the clamps), both clamps' outputs (SiLU's input, the
    product's factor), SiLU's output, the product (down_proj's input)."""
    e, t = 2 if c.autocast else c.e, c.tokens
    for name in ("gate_proj", "up_proj"):
        linear(ss, c, x, c.res, lins[name], ads.get(name))
    for part in ("gate", "up", "gate_clamp", "up_clamp", "act"):
        ss.save(f"{key}.{part}", e * t * inter)
    down = lins["down_proj"]
    linear(ss, c, f"{key}.prod", e, Linear(down.name, inter, down.d_out), ads.get("down_proj"))
    return f"{key}.out"


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch, y: str, lins: dict, ads: dict) -> str:
    """Glm5NextTextAttention under SDPA (module docstring); returns o_proj's input key."""
    t, a = c.tokens, arch.num_heads
    e = 2 if c.autocast else c.e
    mla = arch.mla
    c2 = _later(c)
    linear(ss, c, y, c.res, lins["q_a_proj"], ads.get("q_a_proj"))
    linear(ss, c, y, c.res, lins["kv_a_proj_with_mqa"], ads.get("kv_a_proj_with_mqa"))
    qa = rmsnorm(ss, c2 if "q_a_proj" in ads else c, "q_a_norm", "q_a", mla["q_lora_rank"], x_bytes=e)
    linear(ss, c, qa, c.res, lins["q_b_proj"], ads.get("q_b_proj"))
    kva = rmsnorm(ss, c2 if "kv_a_proj_with_mqa" in ads else c, "kv_a_norm", "kv_a", mla["kv_lora_rank"], x_bytes=e)
    linear(ss, c, kva, c.res, lins["kv_b_proj"], ads.get("kv_b_proj"))
    dq = mla["qk_nope"] + mla["qk_rope"]
    ss.save("attn.q", e * t * a * dq)
    ss.save("attn.k", e * t * a * dq)
    ss.save("attn.v", e * t * lins["kv_b_proj"].d_out)
    if c.attention == "eager":
        # eager_attention_forward (one KV head per query head: repeat_kv is the identity): the fp32 softmax and its
        # copy in the query's dtype, then the transposed output's contiguous copy o_proj reads; the additive mask
        # is not kept
        scores = a * c.batch * c.seq * c.seq
        ss.save("attn.softmax", 4 * scores)
        if e != 4:
            ss.save("attn.probs", e * scores)
        ss.save("attn.out_contiguous", e * t * a * mla["v_head"])
        return "attn.out_contiguous"
    ss.save("attn.out", e * t * a * mla["v_head"])
    ss.save("attn.lse", 4 * a * t)
    ss.save("attn.mask", e * c.batch * c.seq * c.seq)
    return "attn.out"


def _attention_half(ss: SavedSet, arch: ModelArch, c: Ctx, lins: dict, ads: dict) -> None:
    e, h = 2 if c.autocast else c.e, arch.hidden_size
    _hc(ss, c, arch, "attn_hc", "stream")
    y = rmsnorm(ss, c, "ln1", "collapsed", h)
    if "kv_b_proj" in lins:
        out = _attention(ss, c, arch, y, lins, ads)
    else:
        out = _kda(ss, c, y, lins, ads)
    linear(ss, _later(c), out, e, lins["o_proj"], ads.get("o_proj"))
    _mix(ss, c, arch, "attn_mix", "o_proj.out", e, "stream")


def glm5_next_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One Glm5NextTextDecoderLayer's saved bytes (the module docstring's list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h, t = arch.hidden_size, c.tokens
    e = 2 if c.autocast else c.e
    c2 = _later(c)
    _attention_half(ss, arch, c, lins, ads)
    _hc(ss, c2, arch, "ffn_hc", "stream2")
    y2 = rmsnorm(ss, c2, "ln2", "collapsed2", h)
    if arch.moe and "down_proj" in experts:
        moe = arch.moe
        shared = {k: v for k, v in lins.items() if k not in ("gate_proj", "up_proj", "down_proj")}
        sparse_moe(ss, c2, replace(arch, moe=replace(moe, shared_intermediate=0)), y2, c.res, shared, ads)
        rows = t * moe.experts_per_token
        ss.save("moe.clamps", 2 * c.res * rows * moe.expert_intermediate)
        _clamped_mlp(ss, c2, "shared", y2, lins, ads, moe.shared_intermediate)
        out, out_bytes = "mlp.out", c.res
    else:
        _clamped_mlp(ss, c2, "mlp", y2, lins, ads, lins["down_proj"].d_in)
        out, out_bytes = "mlp.out", e
    _mix(ss, c2, arch, "ffn_mix", out, out_bytes, "stream2")
    return ss.total


def glm5_next_moment(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """The layer's bytes at its ffn_hc norm backward (memory/blocks_hyper.py hc_backward_moment's moment): the
    attention half's saves, ffn_hc's fp32 stream copy and rsqrt, five fp32 stream-sized temporaries and the
    incoming stream gradient."""
    ss = SavedSet()
    _attention_half(ss, arch, c, {lin.name: lin for lin in linears if lin.count == 1},
                    {ad.name: ad for ad in adapters})
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    return ss.total + 4 * t * n * h + 4 * t + 5 * 4 * t * n * h + c.res * t * n * h


def glm5_next_outside(ss: SavedSet, c: Ctx, arch: ModelArch) -> str:
    """After the layers: Glm5NextTextHyperHead, an unweighted mean over the streams (it keeps nothing), then
    model.norm (Llama's RMSNorm) over the collapsed stream; the (b, s) bool attention mask every linear-attention
    layer's apply_mask_to_padding_states multiplies by. Returns lm_head's input key (the residual dtype)."""
    ss.save("attention_mask", c.tokens)
    return rmsnorm(ss, c, "final_norm", "hc_head.out", arch.hidden_size)


def glm5_next_mix_temps(arch: ModelArch, c: Ctx) -> int:
    """The FFN residual mix's backward (memory/blocks_hyper.py mix_backward_temps: the same mix): four (t, N, h)
    gradients in the stream's dtype."""
    return 4 * c.res * c.tokens * arch.hyper["hc_mult"] * arch.hidden_size


# memory/blocks_hyper.py OTHERS: (hyper_outside, mix_backward_temps, hc_backward_moment)
GLM5_HYPER = {t: (glm5_next_outside, glm5_next_mix_temps, glm5_next_moment) for t in MODEL_TYPES}
