"""Saved tensors of Gemma 3n's language model (transformers 5.24 modeling_gemma3n.py Gemma3nTextDecoderLayer,
Gemma3nTextModel) as it trains: Gemma 4's layer (memory/blocks_gemma4.py: Gemma3nRMSNorm is Gemma4RMSNorm's code,
the attention with K/V reuse, the per-layer inputs) inside AltUp's n streams, with LAuReL and activation sparsity.

- Gemma3nTextAltUp.predict: compute_router_modalities on stream 0 (router_norm, `* router_input_scale`, the
  modality_router linear, `tanh(routed.float())` keeps its fp32 output, `.type_as(x)` is prediction_coefs'
  input), then `torch.matmul(hidden_states.permute(1, 2, 3, 0), all_coefs)` keeps the layer input (all n streams)
  and the coefficients (prediction_coefs' output, n^2 per token); the contiguous predictions' stream 0 is
  input_layernorm's input.
- Gemma3nTextLaurelBlock: linear_left on the normed prediction (the tensor q/k/v read), linear_right keeps the
  rank-wide middle, post_laurel_norm its output.
- Gemma3nTextMLP with activation_sparsity > 0 (_gaussian_topk): std keeps gate_proj's output and its own result,
  relu keeps its output (the GELU's input): one more MLP-wide tensor than the gated MLP.
- Gemma3nTextAltUp.correct on the layer's output: router_norm and modality_router again, tanh's fp32 output,
  `F.linear(modalities, clamped weight)` keeps the modalities, `torch.mul(innovation, all_coefs)` the repeated
  innovation (n streams) and the coefficients; scale_corrected_output's product with correct_output_scale keeps
  the cloned stream 0; then the per-layer-input gate as Gemma 4's.
- outside the layers (gemma3n_outside): Gemma 4's per-layer inputs (gemma4_outside); the n - 1 altup_projections
  of the scaled embedding and, after the layers, the altup_unembed_projections of the last layer's streams, each
  with its magnitude rescaling (`mean(x**2) ... sqrt`: the projection's output, the mean, the sqrt and the
  rescaled product; the target magnitude's mean and pow once per side), the last layer's output kept by them;
  model.norm's pow base; a second rotary pair for the second attention type.

Under autocast the streams are fp32 whatever the weights' dtype (stream_ctx). Traced: tools/memtrace/ssm_trace.py
gemma3n_text (tests/data/gemma3n_text_trace.json: full bf16 and bf16-mixed, checkpointed, LoRA with and without
checkpointing; held within 3 % by tests/test_ssm_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from ..model.gemma3n import SPARSE
from .blocks import Ctx, SavedSet, gated_mlp, linear
from .blocks_gemma4 import g4_norm, gemma4_outside, gemma_attention
from .lora import Adapter

def _router(ss: SavedSet, c: Ctx, key: str, x: str, x_bytes: int, lins: dict, ads: dict) -> str:
    """compute_router_modalities(x): router_norm, the scaled norm output modality_router reads, tanh's fp32
    output (n per token); returns the key of `.type_as(x)`, the modalities (x_bytes per element)."""
    h, n = lins["modality_router"].d_in, lins["modality_router"].d_out
    y = g4_norm(ss, c, f"{key}.router_norm", x, h, x_bytes=x_bytes)
    linear(ss, c, f"{y}.scaled", c.res, lins["modality_router"], ads.get("modality_router"))
    if not (c.first_layer and not c.train_base):
        ss.save(f"{key}.tanh", 4 * c.tokens * n)
    return f"{key}.modalities"


def stream_ctx(c: Ctx) -> Ctx:
    """The AltUp streams' dtype: fp32 under autocast whatever the weights' (Gemma3nTextModel.forward rescales the
    projected streams by `torch.mean(hidden_states_0**2, ...) ** 0.5`, and CUDA autocast runs pow in fp32: the
    stack of a 16-bit stream 0 and fp32 others is fp32; traced: the LoRA rows over a 16-bit base), else the
    weights' dtype. Everything the layer derives from the streams follows."""
    return replace(c, res=4) if c.autocast else c


def gemma3n_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    c = stream_ctx(c)
    ss = SavedSet()
    h, t = arch.hidden_size, c.tokens
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    e = 2 if c.autocast else c.e                             # a projection's output dtype
    n = lins["modality_router"].d_out
    c2 = replace(c, first_layer=False)
    grad = not (c.first_layer and not c.train_base)
    # AltUp.predict. router_norm's `x.float()` is a copy of stream 0 in a 16-bit stream; in an fp32 one it is the
    # stream itself, a view that keeps the whole layer input (n streams) alive (traced: the bf16-mixed rows)
    if grad and c.res == 4:
        ss.save("streams.0", 4 * n * t * h)
    modal = _router(ss, c, "predict", "streams.0", c.res, lins, ads)
    linear(ss, c, modal, c.res, lins["prediction_coefs"], ads.get("prediction_coefs"))
    if grad:
        ss.save("streams", (2 if c.autocast else c.res) * n * t * h)     # the matmul's inputs (autocast: copies)
        ss.save("predict.coefs", e * t * n * n)
    # `predictions.contiguous().type_as(hidden_states)`: input_layernorm reads its stream 0 - in an fp32 stream a view
    # that keeps all n predicted streams (under autocast the matmul's 16-bit result cast back: a new fp32 tensor)
    if grad and c.res == 4:
        ss.save("prediction.0", 4 * n * t * h)
    y = g4_norm(ss, c, "ln1", "prediction.0", h)
    # LAuReL (in layer 0 of a LoRA run nothing before it needs a gradient unless it has adapters)
    cl = c2 if any(name in ads for name in ("linear_left", "linear_right")) else c
    linear(ss, c, y, c.res, lins["linear_left"], ads.get("linear_left"))
    linear(ss, cl, "laurel.mid", e, lins["linear_right"], ads.get("linear_right"))
    g4_norm(ss, cl, "post_laurel_norm", "laurel.out", h, x_bytes=e)
    gemma_attention(ss, c, arch, y, lins, ads)
    g4_norm(ss, c2, "post_attn_norm", "o_out", h, x_bytes=e)
    y2 = g4_norm(ss, c2, "pre_ff_norm", "resid2", h)
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    if SPARSE in lins:
        ss.save("mlp.topk_in", e * t * lins["down_proj"].d_in)           # gate_proj's output, kept by std
        ss.save("mlp.std", e * t)
    g4_norm(ss, c2, "post_ff_norm", "mlp_out", h, x_bytes=e)
    # AltUp.correct on the layer's output, then scale_corrected_output
    modal = _router(ss, c2, "correct", "activated", c.res, lins, ads)
    if c.train_base:
        ss.save(modal, (2 if c.autocast else c.res) * t * n)   # F.linear(modalities, weight.clamp(...)): its input
    ss.save("correct.coefs", e * t * n)                       # the linear's output + 1.0
    ss.save("correct.innovation", c.res * n * t * h)
    if c.train_base:
        ss.save("first.clone", c.res * t * h)
    gate = lins["per_layer_input_gate"]
    linear(ss, c2, "first.scaled", c.res, gate, ads.get(gate.name))
    ss.save("pli.gate_out", e * t * gate.d_out)
    if c.train_base:
        ss.save("pli.act", e * t * gate.d_out)         # the product keeps it for the per-layer inputs' gradient
    proj = lins["per_layer_projection"]
    linear(ss, c2, "pli.prod", e, proj, ads.get(proj.name))
    g4_norm(ss, c2, "post_pli_norm", "pli.proj_out", h, x_bytes=e)
    return ss.total


def _rescaled(ss: SavedSet, c: Ctx, key: str, n: int, h: int) -> None:
    """Gemma3nTextModel.forward's magnitude rescaling of n - 1 projected streams: the target magnitude's mean and
    pow, then per stream the projection's output `.to(hidden_states_0.dtype)` (the embedding's dtype), its mean,
    sqrt and the rescaled product, in the streams' dtype (stream_ctx). Where the two differ (autocast over a 16-bit
    base) pow keeps an fp32 copy of the 16-bit projection, which the product keeps too."""
    t, r, s = c.tokens, c.res, stream_ctx(c).res
    ss.save(f"{key}.target", 2 * s * t)
    for i in range(n - 1):
        ss.save(f"{key}.{i}.proj", s * t * h)
        if r != s:
            ss.save(f"{key}.{i}.proj16", r * t * h)
        ss.save(f"{key}.{i}.mean_sqrt", 2 * s * t)
        ss.save(f"{key}.{i}.rescaled", s * t * h)


def gemma3n_outside(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int, emb: int, checkpointed: bool = False) -> None:
    """Gemma3nTextModel.forward around the layers (the module docstring): the per-layer inputs, the altup
    projections and unembed projections with their rescaling, the last layer's streams, model.norm's pow base and
    the second attention type's rotary pair. Before the layers nothing needs a gradient under LoRA unless full
    checkpointing (PEFT's enable_input_require_grads) makes the embedding output require one."""
    gemma4_outside(ss, c, arch, seq, emb, checkpointed)
    lins = {lin.name: lin for lin in arch.layer_linears[0]}
    n, h = lins["modality_router"].d_out, arch.hidden_size
    s = stream_ctx(c).res
    if c.train_base:
        # each of the n - 1 projections reads the scaled embedding (unembed: a stream of the last layer's output,
        # kept whole below); under autocast over an fp32 stream each keeps its own 16-bit copy
        for i in range(n - 1):
            linear(ss, c, "embed_scaled", c.res, Linear(f"altup_projections.{i}", h, h), None)
            if c.autocast:
                linear(ss, c, f"final_streams.{i + 1}", s, Linear(f"altup_unembed_projections.{i}", h, h), None)
    elif checkpointed:
        # the frozen per_layer_model_projection's output needs a gradient: per_layer_projection_norm keeps its
        # fp32 copy and mean squares (no normalised tensor: its weight is frozen)
        g4_norm(ss, c, "per_layer_projection_norm", "pl_proj", arch.num_layers * lins["per_layer_input_gate"].d_out,
                arch.num_layers, 2 if c.autocast else c.e)
    if c.train_base or checkpointed:
        # `hidden_states_0**2` keeps the embedding output (autocast: pow's fp32 copy of it)
        ss.save("embed_scaled" if s == c.res else "embed_scaled.fp32", s * c.tokens * h)
        _rescaled(ss, c, "altup", n, h)
    ss.save("final_streams", s * n * c.tokens * h)
    _rescaled(ss, c, "unembed", n, h)
    ss.save("final_norm.mean_sq", 4 * c.tokens)
    ss.save("rope_cos_sin_2", 2 * emb * seq * arch.head_dim)


def checkpointed_streams(arch: ModelArch, res: int, e: int, t: int) -> int:
    """Full checkpointing: each checkpointed layer keeps its input, all n AltUp streams (``res``: their dtype,
    stream_ctx's), and the shared_kv_states
    dict keeps the storing layers' K and V for the reusing layers' recompute (Gemma 3n stores one pair per
    attention type, sliding and full: both occur among its last num_kv_shared_layers)."""
    lins = [{lin.name: lin for lin in layer} for layer in arch.layer_linears]
    n, h = lins[0]["modality_router"].d_out, arch.hidden_size
    stack = arch.num_layers * n * res * t * h
    if any("k_proj" not in lin for lin in lins):
        kv = next(lin["k_proj"].d_out for lin in lins if "k_proj" in lin)
        stack += 2 * 2 * e * t * kv
    return stack
