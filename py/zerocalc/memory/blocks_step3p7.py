"""Saved tensors of Step 3.7's decoder layer (transformers 5.24 modeling_step3p7.py Step3p7DecoderLayer, the step3p5
language model of Step3p7ForConditionalGeneration).

With t = b·s tokens, a query heads of d dims (per layer: q_proj's width), all in the 16-bit compute dtype unless
said:
- Step3p7RMSNorm (input_layernorm, post_attention_layernorm, the per-head q_norm / k_norm) is Gemma's: the fp32
  upcast, rsqrt and, when its weight trains, the fp32 product `output * (1 + weight.float())` (memory/blocks.py
  rmsnorm's Gemma rule); q_norm / k_norm read the projections' 16-bit outputs;
- Step3p7Attention: q/k/v_proj and g_proj read input_layernorm's output; FA2 keeps the rotated q and k (cat's new
  tensors), v, its output and the fp32 logsumexp; `attn_output.reshape(...)` of FA2's transposed output is a copy,
  which the output gate's product keeps when the gate needs a gradient (not in layer 0 under LoRA: there g_proj's
  input has none), with `gate_states.unsqueeze(-1).sigmoid()` (a per head and token, or a·d without per-head
  gating); o_proj reads the gated product;
- Step3p7MLP (the dense layers' mlp and the MoE's shared_experts): `act_fn(gate_proj(x)).clamp(max=limit)` and
  `up_proj(x).clamp(...)` (limit inf unless swiglu_limits_shared): gate_proj's output (SiLU's input), SiLU's output
  and up_proj's output (the clamps' inputs), both clamped tensors (the product's factors), and the product
  (down_proj's input, when it trains): 6 tensors of the intermediate width;
- Step3p7TopKRouter: F.linear over its 16-bit weight (the input kept when it trains: post_attention_layernorm's
  output), sigmoid of the fp32 logits (t·E fp32 kept), int64 top-k, the gathered fp32 weights' clone and row sums
  (the in-place division);
- Step3p7Experts loops over the experts hit: per routed row (t·k of them; every expert hit under the tracer's
  balanced router) the gathered row (F.linear's input, when the experts train), gate_up's output, SiLU's, both
  clamps, the product (when they train), down's output (the routing weight's factor), the fp32 routing weight, two
  int64 indices and the `.to(final.dtype)` copy index_add_ keeps (in the stream's dtype). Under autocast over fp32
  weights each expert's F.linear keeps autocast's 16-bit copies of its weight slices (`self.gate_up_proj[i]` is
  no leaf) and of its rows.

Traced: tools/memtrace/more_moe_trace.py step3p7 (tests/data/step3p7_trace.json, tests/test_step3p7_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, linear, rmsnorm
from .lora import Adapter

MODEL_TYPES = ("step3p5", "step3p7")


def clamped_mlp(ss: SavedSet, c: Ctx, key: str, x: str, lins: dict, ads: dict, rows: int) -> None:
    """Step3p7MLP.forward (and an expert's _apply_gate over ``rows`` rows): down(clamp(silu(gate)) * clamp(up))."""
    e = 2 if c.autocast else c.e
    down = lins["down_proj"]
    n = rows * down.d_in
    for name in ("gate_proj", "up_proj"):
        if name in lins:
            linear(ss, c, x, c.res, lins[name], ads.get(name))
    ss.save(f"{key}.gate_up", 2 * e * n)          # gate_proj's and up_proj's outputs (SiLU's / a clamp's input)
    ss.save(f"{key}.act", 3 * e * n)              # SiLU's output, the clamped gate and the clamped up
    if c.train_base:
        ss.save(f"{key}.prod", e * n)
    elif ads.get(down.name):
        linear(ss, replace(c, first_layer=False), f"{key}.prod", e, Linear(down.name, down.d_in, down.d_out),
               ads[down.name])


def step3p7_experts(ss: SavedSet, c: Ctx, arch: ModelArch, x: str) -> None:
    """Step3p7TopKRouter and the Step3p7Experts loop (the module docstring)."""
    moe, t, h = arch.moe, c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    k, n_e, ie = moe.experts_per_token, moe.num_experts, moe.expert_intermediate
    rows = t * k
    if c.train_base:
        ss.save(x, c.res * t * h)                 # the router's input (its weight's gradient)
    ss.save("router", 4 * t * n_e + 8 * t * k + 4 * t * k + 4 * t)
    if c.autocast and c.res == 4:
        ss.save("moe.weight16", 2 * n_e * 3 * ie * h)
        ss.save("moe.gathered", 2 * rows * h)
    elif c.train_base:
        ss.save("moe.gathered", e * rows * h)
    ss.save("moe.gate_up", e * rows * 2 * ie)
    ss.save("moe.act", 3 * e * rows * ie)
    if c.train_base:
        ss.save("moe.prod", e * rows * ie)
    ss.save("moe.expert_out", e * rows * h)
    ss.save("moe.index_add_source", c.res * rows * h)
    ss.save("moe.routing", 4 * rows + 16 * rows)


def step3p7_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h, t, d = arch.hidden_size, c.tokens, arch.head_dim
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
    y = rmsnorm(ss, c, "ln1", "resid", h, True)
    for name in ("q_proj", "k_proj", "v_proj", "g_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    rmsnorm(ss, c2, "q_norm", "q", q_dim, True, q_dim // d, e)
    rmsnorm(ss, c2, "k_norm", "k", kv_dim, True, kv_dim // d, e)
    attention_core(ss, c2, replace(arch, family="llama", num_heads=q_dim // d), "attn", q_dim, kv_dim)
    if not c.first_layer or c.train_base:
        ss.save("attn.out_contiguous", e * t * q_dim)
    ss.save("attn.gate_sigmoid", e * t * lins["g_proj"].d_out)
    linear(ss, c2, "attn.gated", e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, True)
    if arch.moe and "down_proj" in experts:
        step3p7_experts(ss, c2, arch, y2)
        clamped_mlp(ss, c2, "shared", y2, lins, ads, t)
    else:
        clamped_mlp(ss, c2, "mlp", y2, lins, ads, t)
    return ss.total
