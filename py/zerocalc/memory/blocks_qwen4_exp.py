"""Saved tensors of Qwen4-Exp's decoder layers (transformers 5.24 modeling_qwen4_exp.py Qwen4ExpTextDecoderLayer):
gated-residual hyper connections around a Gated DeltaNet or a QSA-indexed gated attention, then Qwen2-MoE's
experts with a gated shared expert.

With t tokens (b sequences of s), hidden h, N = hc_count streams (W = N·h per token), r = hc_lowrank, e the
16-bit compute dtype (autocast's under bf16-mixed), the ops and what each keeps for backward (traced on fake
tensors: tools/memtrace/qwen4_trace.py, tests/data/qwen4_exp_trace.json, held within 3 % by
tests/test_qwen4_exp_blocks.py):

- Qwen4ExpTextGatedResidual (attn_hyper_connection, mlp_hyper_connection; model.hyper_connection_mixer without
  block_inject_weight) over the (t, W) stream: hc_norm is Qwen4ExpTextRMSNorm per h-wide group, Gemma's formula:
  `x.float()` (an fp32 copy, the stream itself when it is fp32) and the per-group rsqrt, `1.0 + weight.float()`
  (W fp32), the fp32 normalised tensor for the weight's gradient, `.type_as(x)` of the weighted output (the stream's
  dtype) read by input_mix_weight_down, block_inject_weight and the mix product (under autocast each linear keeps
  its 16-bit copy and the product the fp32 tensor); `down(·) / hc_count` (silu's input, t·r), silu's output
  (input_mix_weight_up's input), the W-wide sigmoid and the N-wide injection sigmoid; the mix's mean is the
  sublayer's input (t·h: fp32 under autocast over fp32 weights, so every linear reading it keeps a 16-bit copy);
- after each sublayer `hidden_states.unsqueeze(-2) * injection_weights.unsqueeze(-1)` keeps the sublayer's output
  and `2 * sigmoid(...)` (t·N); `hyper_input + injection` keeps nothing;
- the Gated DeltaNet (linear_attention layers): Qwen3.5's (memory/deltanet.py mixer_saves: causal-conv1d's input,
  beta, g's softplus, fla's chunk_gated_delta_rule saves, Qwen4ExpTextRMSNormGated) between in_proj_qkv / z / b / a
  and out_proj;
- Qwen4ExpTextAttention (indexed_attention layers): q_proj (query and gate), k_proj, v_proj read the mix; q_norm /
  k_norm (Gemma's formula per head: fp32 copy, rsqrt, 1 + weight, fp32 normalised tensor); RoPE keeps cos / sin
  only (outside the layers); under SDPA the mask `attention_mask & selected_token_mask` (b, 1, s, s), which SDPA
  turns into an additive 16-bit mask it keeps, the rotated query (a cat), K and V repeated to every head (repeat_kv
  copies: a mask disables SDPA's own GQA), the output and the fp32 logsumexp; under eager the fp32 softmax and its
  16-bit copy instead of the mask (memory/blocks.py attention_core); then `reshape(...).contiguous()` of the
  output, sigmoid(gate) and their product (o_proj's input). The QSA indexer keeps nothing: its result is a boolean
  mask scattered from top-k indices, so its graph dies in the forward and its parameters get no gradient
  (memory/indexers.py NO_GRAD_INDEXERS);
- Qwen4ExpTextSparseMoeBlock: the router's softmax and top-k, the grouped_mm experts (memory/blocks.py sparse_moe),
  the shared expert (gate, up, SiLU, product), `sigmoid(shared_expert_gate(x))` (t) and the shared output (t·h) its
  product keeps; the block's output (routed + shared) in the wider of the two dtypes.

Outside the layers (`qwen4_outside`, through memory/blocks_hyper.py OTHERS): the rotary cos / sin (b·s·rot each, in
the embedding's dtype) and the mixer (no final norm), whose mean is lm_head's input. PLE layers (ple_layer_ids,
Qwen4ExpTextPLELayer) are not traced: the default has none, and a layer that has one is costed without it.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, linear, sparse_moe
from .deltanet import mixer_saves
from .lora import Adapter

MODEL_TYPES = ("qwen4_exp_text", "qwen4_exp")


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _e(c: Ctx) -> int:
    return 2 if c.autocast else c.e


def gemma_norm(ss: SavedSet, c: Ctx, key: str, x: str, width: int, groups: int, d: int, x_bytes: int) -> None:
    """Qwen4ExpTextRMSNorm over `width` per token in `groups` groups of d: `x.float()` (x itself when fp32), the
    rsqrt per group, `1.0 + weight.float()` and, when the weight trains, the fp32 normalised tensor."""
    t = c.tokens
    ss.save(x if x_bytes == 4 else f"{key}.fp32", 4 * t * width)
    ss.save(f"{key}.rsqrt", 4 * t * groups)
    ss.save(f"{key}.w1", 4 * d)
    if c.train_base:
        ss.save(f"{key}.normed", 4 * t * width)


def gated_residual(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, stream: str, ads: dict,
                   combine: bool = True) -> tuple[str, int]:
    """One Qwen4ExpTextGatedResidual over the stream (the module docstring's list). Returns the mix's key and
    bytes per element (the sublayer's input). Over the embedding's stream under LoRA nothing needs a gradient."""
    hy, t, h, e = arch.hyper, c.tokens, arch.hidden_size, _e(c)
    n, r = hy["hc_mult"], hy["lowrank"]
    w = n * h
    mix = (f"{key}.mix", c.res)
    if c.first_layer and not c.train_base:
        return mix
    gemma_norm(ss, c, f"{key}.hc_norm", stream, w, n, w, c.res)
    down, up = Linear("input_mix_weight_down", w, r), Linear("input_mix_weight_up", r, w)
    if c.autocast and c.res == 4:
        ss.save(f"{key}.weighted", 4 * t * w)                   # the product's fp32 factor
        linear(ss, c, f"{key}.weighted", 4, down, ads.get(down.name))
        if combine:
            linear(ss, c, f"{key}.weighted", 4, Linear("block_inject_weight", w, n), ads.get("block_inject_weight"))
    else:
        ss.save(f"{key}.weighted", c.res * t * w)               # type_as(x): shared by the linears and the product
        linear(ss, c, f"{key}.weighted", c.res, down, ads.get(down.name))
        if combine:
            linear(ss, c, f"{key}.weighted", c.res, Linear("block_inject_weight", w, n),
                   ads.get("block_inject_weight"))
    ss.save(f"{key}.silu_in", e * t * r)
    linear(ss, c, f"{key}.silu", e, up, ads.get(up.name))
    ss.save(f"{key}.sigmoid", e * t * w)
    if combine:
        ss.save(f"{key}.inject_sigmoid", e * t * n)
    return mix


def _inject(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, out_bytes: int) -> None:
    """`out.unsqueeze(-2) * injection_weights.unsqueeze(-1)`: the 2·sigmoid weights (t·N) for the output's gradient,
    the output (t·h) for the weights' (none over the embedding's stream under LoRA)."""
    t = c.tokens
    ss.save(f"{key}.inject_w", _e(c) * t * arch.hyper["hc_mult"])
    if not (c.first_layer and not c.train_base):
        ss.save(f"{key}.out", out_bytes * t * arch.hidden_size)


def _deltanet(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict, x: str, xb: int) -> None:
    ins = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")
    for name in ins:
        linear(ss, c, x, xb, lins[name], ads.get(name))
    if not (c.first_layer and not c.train_base and not any(n in ads for n in ins)):
        mixer_saves(ss, c, arch.deltanet)
    linear(ss, _later(c), "gnorm.out", _e(c), lins["out_proj"], ads.get("out_proj"))


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict, x: str, xb: int) -> None:
    t, e, a, d, kv = c.tokens, _e(c), arch.num_heads, arch.head_dim, arch.num_kv_heads
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, x, xb, lins[name], ads.get(name))
    c2 = _later(c)
    if not (c.first_layer and not c.train_base and not any(n in ads for n in ("q_proj", "k_proj", "v_proj"))):
        gemma_norm(ss, c2, "q_norm", "q", a * d, a, d, e)
        gemma_norm(ss, c2, "k_norm", "k", kv * d, kv, d, e)
    if c.attention == "eager":
        attention_core(ss, replace(c, attention="eager"), replace(arch, family="llama"), "attn", a * d, a * d)
    else:
        ss.save("attn.mask", e * c.batch * c.seq * c.seq)       # the additive mask SDPA makes of the boolean one
        for name in ("q", "k_rep", "v_rep", "out"):
            ss.save(f"attn.{name}", e * t * a * d)
        ss.save("attn.lse", 4 * a * t)
    ss.save("attn.contiguous", e * t * a * d)
    ss.save("attn.gate_sigmoid", e * t * a * d)
    linear(ss, c2, "attn.gated", e, lins["o_proj"], ads.get("o_proj"))


def _moe(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict, x: str, xb: int) -> None:
    sparse_moe(ss, c, arch, x, xb, lins, ads)
    t, e = c.tokens, _e(c)
    linear(ss, c, x, xb, Linear("shared_expert_gate", arch.hidden_size, 1), ads.get("shared_expert_gate"))
    ss.save("shared.gate_sigmoid", e * t)
    ss.save("shared.out", e * t * arch.hidden_size)


def qwen4_exp_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One Qwen4ExpTextDecoderLayer (the module docstring's op list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    x, xb = gated_residual(ss, c, arch, "attn_hc", "stream_in", ads)
    if "out_proj" in lins:
        _deltanet(ss, c, arch, lins, ads, x, xb)
    else:
        _attention(ss, c, arch, lins, ads, x, xb)
    _inject(ss, c, arch, "attn_hc", _e(c))
    c2 = _later(c)
    x2, xb2 = gated_residual(ss, c2, arch, "mlp_hc", "stream_mid", ads)
    _moe(ss, c2, arch, lins, ads, x2, xb2)
    _inject(ss, c2, arch, "mlp_hc", max(c.res, _e(c)))
    return ss.total


def qwen4_outside(ss: SavedSet, c: Ctx, arch: ModelArch) -> str:
    """After the layers: the rotary cos / sin (Qwen4ExpTextRotaryEmbedding: `.to(x.dtype)` of the embedding, b·s·rot
    each) and model.hyper_connection_mixer (no block_inject_weight, no final norm). Returns lm_head's input key,
    the mix's mean in the residual dtype."""
    ss.save("rope_cos_sin", 2 * c.res * c.tokens * arch.hyper["rope"])
    key, _ = gated_residual(ss, _later(c), arch, "mixer", "resid_final", {}, combine=False)
    return key


def no_moment(*_args) -> int:
    """DeepSeek-V4's residual-mix backward moment (memory/blocks_hyper.py mix_backward_temps): none here."""
    return 0


def recompute_moment(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """The recomputed layer at the end of its experts' forward (traced: the peak of
    tools/memtrace/qwen4_trace.py qwen4-exp-4l-lora-s512-ckpt, recompute / index, 21 MiB above the layer's saved
    set): besides what the layer saves, the forward's live locals: mlp_hyper_connection's hyper_input (the mid
    stream, saved itself when fp32), the attention half's `injection` (t·W, alive until the MLP half rebinds it),
    the experts' gathered rows (when frozen: not saved), weighted outputs and unpermuted rows (t·k·h each, in the
    experts' dtype), and the incoming stream gradient (t·W in the stream's dtype; memory/activations.py books
    e·t·h of it). memory/activations.py subtracts one checkpointed stream from this moment (its
    checkpointed_stream: DeepSeek-V4's hyper connection keeps the stream itself); here the stream is saved itself
    only when fp32, so the moment adds it back otherwise. Through blocks_hyper.py OTHERS (hc_backward_moment).
    Without checkpointing memory/activations.py books the same function's excess over the top layer as the top
    layer's backward moment (inputs.py moe_top_weight_grad, TOP_ONLY), a moment that has no recompute: an
    overstatement there of about these locals, below the loss's moment in every traced row (not modelled apart)."""
    lins = {lin.name for lin in linears}
    ads = {ad.name for ad in adapters}
    t, h, n, e = c.tokens, arch.hidden_size, arch.hyper["hc_mult"], _e(c)
    rows = t * arch.moe.experts_per_token
    stream = c.res * t * n * h
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    local = (0 if c.res == 4 else stream) + e * t * n * h + c.res * rows * h * (2 if trained else 3)
    local += stream - e * t * h
    return (qwen4_exp_layer(arch, c, linears, adapters) + local + (0 if c.res == 4 else stream)
            if "gate_up_proj" in lins else 0)


# memory/blocks_hyper.py OTHERS: (hyper_outside, mix_backward_temps, hc_backward_moment) of each model_type
QWEN4_HYPER = {t: (qwen4_outside, no_moment, recompute_moment) for t in MODEL_TYPES}
