"""Saved tensors of Gemma 4's decoder layer (transformers 5.24 modeling_gemma4.py Gemma4TextDecoderLayer,
Gemma4TextAttention, Gemma4RMSNorm), layer by layer: its layers differ in shape (model/gemma4.py gives each its
own linears), and each layer's head_dim, K/V heads and MLP width are read off those linears.

- Gemma4RMSNorm: `_norm(x.float())` = `x * pow(x.pow(2).mean(-1, keepdim=True) + eps, -0.5)`, then
  `* weight.float()` and `.type_as(x)`: the fp32 input (x itself when already fp32), the per-row mean square
  (pow's base) and its pow (mul's other factor), and with a trained weight the fp32 normalised tensor; v_norm has
  no weight (with_scale False): no normalised tensor.
- attention: q_proj -> q_norm (per head) -> rotary; unless the layer reuses an earlier layer's K/V
  (kv_sharing_modes "reuse") k_proj -> k_norm -> rotary and v_proj (k_proj's output with attention_k_eq_v on a
  full-attention layer) -> v_norm; flash/SDPA keeps q, k, v, the output and the logsumexp. A reusing layer's
  attention keeps the producing layer's K/V storages, already counted there; eager's repeat_kv copies them again
  unless there is one KV head (a view).
- four norms around attention and the gated GELU MLP (memory/blocks.py gated_mlp), and with
  hidden_size_per_layer_input: per_layer_input_gate keeps the residual sum, act_fn its output, the product with
  the layer's slice of the per-layer inputs keeps act_fn's output, per_layer_projection the product,
  post_per_layer_input_norm its input. `hidden_states *= layer_scalar` (a buffer) keeps nothing.
- outside the layers (`gemma4_outside`): per_layer_model_projection's input (the scaled embedding) and
  per_layer_projection_norm (per layer and token, over hidden_size_per_layer_input) when the base trains; the
  per-layer inputs, one (b, s, layers, hidden_size_per_layer_input) tensor every layer's product keeps; the full
  attention layers' rotary cos/sin at their own head_dim.

Traced: tools/memtrace/families.py gemma4 (tools/memtrace/golden/families/gemma4-*, held within 3 % by
tests/test_family_grid.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear, rmsnorm, sparse_moe
from .lora import Adapter

GEMMA4 = ("gemma4_text", "gemma4", "gemma4_unified_text", "gemma4_unified")   # the assistant: model/gemma4_assistant.py


def g4_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, groups: int = 1, x_bytes: int = 0,
            scale: bool = True) -> str:
    """Gemma4RMSNorm, ``groups`` norms per token over d elements in all: memory/blocks.py rmsnorm's fp32 input, rsqrt and fp32
    normalised tensor (Gemma's rule), with pow's base (the mean square plus eps, 4 bytes per row) beside it."""
    if not (c.first_layer and not c.train_base):
        ss.save(f"{key}.mean_sq", 4 * c.tokens * groups)
    if scale:
        return rmsnorm(ss, c, key, x, d, True, groups, x_bytes)
    return rmsnorm(ss, replace(c, train_base=False), key, x, d, True, groups, x_bytes)


def _dims(arch: ModelArch, lins: dict) -> tuple[int, int]:
    """(head_dim, kv heads; 0 where the layer reuses an earlier layer's K/V) of a layer, from its linears."""
    hd = lins["q_proj"].d_out // arch.num_heads
    return hd, (lins["k_proj"].d_out // hd if "k_proj" in lins else 0)


def gemma_attention(ss: SavedSet, c: Ctx, arch: ModelArch, y: str, lins: dict, ads: dict) -> None:
    """Gemma4TextAttention / Gemma3nTextAttention on the norm output ``y``: q_proj -> q_norm (per head) -> rotary;
    unless the layer reuses an earlier layer's K/V, k_proj -> k_norm -> rotary and v_proj -> v_norm (no weight);
    the attention's saves; o_proj."""
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False)
    hd, kv = _dims(arch, lins)
    q_dim = arch.num_heads * hd
    linear(ss, c, y, c.res, lins["q_proj"], ads.get("q_proj"))
    g4_norm(ss, c2, "q_norm", "q", q_dim, arch.num_heads, e)
    for name in ("k_proj", "v_proj"):
        if name in lins:
            linear(ss, c, y, c.res, lins[name], ads.get(name))
    if kv:
        g4_norm(ss, c2, "k_norm", "k", kv * hd, kv, e)
        g4_norm(ss, c2, "v_norm", "v" if "v_proj" in lins else "k", kv * hd, kv, e, scale=False)
    # eager: repeat_kv's reshape of the expanded K/V is a copy at every query head's width, one KV head too
    # (traced: gemma4-full-mixed-eager, `clone` of (b, a, s, d) for K and V in every layer, reusing ones included)
    view = replace(arch, head_dim=hd, num_kv_heads=arch.num_heads if c.attention == "eager" else max(kv, 1))
    out = attention_core(ss, c, view, "attn", q_dim, kv * hd)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))


def gemma4_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    ss = SavedSet()
    h = arch.hidden_size
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    e = 2 if c.autocast else c.e                             # a projection's output dtype
    c2 = replace(c, first_layer=False)                  # after the first op everything needs a gradient
    y = g4_norm(ss, c, "ln1", "resid", h)
    gemma_attention(ss, c, arch, y, lins, ads)
    g4_norm(ss, c2, "post_attn_norm", "o_out", h, x_bytes=e)
    y2 = g4_norm(ss, c2, "pre_ff_norm", "resid2", h)
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    if arch.moe:
        sparse_moe(ss, c2, arch, "resid2", c.res, lins, ads)
    g4_norm(ss, c2, "post_ff_norm", "mlp_out", h, x_bytes=e)
    gate = lins.get("per_layer_input_gate")
    if gate is not None:
        linear(ss, c2, "resid3", c.res, gate, ads.get(gate.name))
        ss.save("pli.gate_out", e * c.tokens * gate.d_out)    # act_fn (GELU) keeps its input
        ss.save("pli.act", e * c.tokens * gate.d_out)         # the product keeps act_fn's output
        proj = lins["per_layer_projection"]
        linear(ss, c2, "pli.prod", e, proj, ads.get(proj.name))
        g4_norm(ss, c2, "post_pli_norm", "pli.proj_out", h, x_bytes=e)
    return ss.total


def gemma4_outside(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int, emb: int, checkpointed: bool = False) -> None:
    """Gemma4TextModel.forward around the layers: get_per_layer_inputs / project_per_layer_inputs and the rotary
    tables of the full-attention layers (the sliding layers' are memory/activations.py _head_saved's).
    ``checkpointed`` (full activation checkpointing): the scaled embedding is layer 0's input, which the
    checkpointed stack counts, unless per_layer_model_projection keeps autocast's 16-bit copy of it."""
    lins = [{lin.name: lin for lin in layer} for layer in (arch.layer_linears or ())]
    dims = {_dims(arch, lin)[0] for lin in lins} - {arch.head_dim}
    for hd in dims:
        ss.save(f"rope_cos_sin_{hd}", 2 * emb * seq * hd)
    gate = next((lin["per_layer_input_gate"] for lin in lins if "per_layer_input_gate" in lin), None)
    if gate is None:
        return
    n, hpl = arch.num_layers, gate.d_out
    if c.train_base:
        if not (checkpointed and not (c.autocast and c.res == 4)):
            linear(ss, c, "embed_scaled", c.res, Linear("per_layer_model_projection", arch.hidden_size, n * hpl),
                   None)
        g4_norm(ss, c, "per_layer_projection_norm", "pl_proj", n * hpl, n, 2 if c.autocast else c.e)
    ss.save("per_layer_inputs", c.res * c.tokens * n * hpl)


def checkpointed_kv(arch: ModelArch, e: int, t: int) -> int:
    """Under full checkpointing with K/V reuse: Gemma4TextModel.forward's shared_kv_states dict, an argument of
    every checkpointed layer call, keeps the storing layers' K and V (post-norm, post-rotary; ``e`` bytes) alive
    for the reusing layers' recompute (traced: gemma4-full-pure-flash-gc, 6 MiB = 2·2·2048·(256 + 512) alive at
    forward end beside the layer inputs). The storing layer of each layer type is the last one before the
    reusing layers (Gemma4TextConfig.kv_sharing_modes "store"); the types are told apart by head_dim."""
    lins = [{lin.name: lin for lin in layer} for layer in (arch.layer_linears or ())]
    if all("k_proj" in lin for lin in lins):
        return 0
    store: dict[int, int] = {}
    for lin in lins[:next(i for i, lin in enumerate(lins) if "k_proj" not in lin)]:
        hd, kv = _dims(arch, lin)
        store[hd] = kv * hd
    return 2 * e * t * sum(store.values())
