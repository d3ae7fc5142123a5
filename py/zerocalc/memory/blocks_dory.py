"""Saved tensors of Dory's nGPT decoder layer (model/dory.py), the op sequence of transformers 5.24 modeling_dory.py
and what each op keeps for backward, traced on fake tensors (tools/memtrace/oneoff.py, fixtures in
tools/memtrace/golden/oneoff/dory-*, held within 3 % by tests/test_oneoff_grid.py).

DoryDecoderLayer keeps every hidden state on the unit sphere: eight DoryL2Norms a layer (input, q_norm, k_norm,
attn_sub_norm, post_attention, pre_feedforward, ffn_sub_norm, post_feedforward), each `_norm(x.float()).type_as(x)`
with no weight, so each keeps its fp32 upcast (x itself when already fp32) and its fp32 rsqrt per row. The learned
scales multiply activations: `q * (sqk·scale)²` after RoPE, `gate_states * (s_gate·scale)²`, `gate_proj(x) *
(suv_gate·scale)`, `up_proj(x) * (suv_up·scale)` and the residual rates `|lambda·scale| * (update - h)`: each
multiply keeps its activation operand for the scale's gradient when the scales train (full fine-tuning), and
promotes to fp32 against the fp32 stream or scale. sigmoid keeps its output, silu its input, the products both
factors. Outside the layers: model.norm runs once on the input layers' output, once per loop and once at the end;
DoryLMHead's `logits.float() * scale` keeps the fp32 logits (booked under logits, memory/logits.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, linear
from .lora import Adapter


def l2norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, x_bytes: int, rows: int = 1) -> tuple[str, int]:
    """DoryL2Norm over d, `rows` norms per token: the fp32 upcast (or x itself, fp32) and the rsqrt per row, when
    anything before it needs a gradient; the output is in x's dtype."""
    if not (c.first_layer and not c.train_base):
        ss.save(x if x_bytes == 4 else f"{key}.fp32", 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens * rows)
    return f"{key}.out", x_bytes


def _scaled(ss: SavedSet, c: Ctx, x: str, nbytes: int) -> None:
    """`x * learned_scale`: x kept for the scale's gradient, only when the scale trains."""
    if c.train_base:
        ss.save(x, nbytes)


def pick_adapters(linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> tuple[list, list]:
    """The layer's linears in their model builder's order and each one's adapter (or None): HRM-Text's and Dory's
    layers have two linears named gate_proj (the attention's output gate and the MLP's), so adapters match by name
    and width."""
    ads = list(adapters)
    out = []
    for lin in linears:
        hit = next((a for a in ads if a.name == lin.name and a.d_in == lin.d_in and a.d_out == lin.d_out), None)
        if hit is not None:
            ads.remove(hit)
        out.append(hit)
    return list(linears), out


def dory_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One DoryDecoderLayer call (modeling_dory.py DoryDecoderLayer / DoryAttention / DoryMLP forward)."""
    ss = SavedSet()
    h, t, e, r = arch.hidden_size, c.tokens, 2 if c.autocast else c.e, c.res
    f = max(e, r)                                   # a 16-bit activation against the fp32 stream or scale
    # model/dory.py's order: q, k, v, the attention's gate_proj, o, the MLP's gate/up/down
    (q, k, v, gate, o, mg, mu, md), (aq, ak, av, ag, ao, amg, amu, amd) = pick_adapters(linears, adapters)
    qd, kvd = q.d_out, k.d_out
    y, yb = l2norm(ss, c, "ln_in", "resid", h, r)
    for lin, ad in ((q, aq), (k, ak), (v, av), (gate, ag)):
        linear(ss, c, y, yb, lin, ad)
    c2 = replace(c, first_layer=False)
    l2norm(ss, c2, "q_norm", "q", qd, e, arch.num_heads)
    l2norm(ss, c2, "k_norm", "k", kvd, e, arch.num_kv_heads)
    _scaled(ss, c2, "q_rope", f * t * qd)           # RoPE'd q (cos/sin in the embedding's dtype) times sqk²
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", qd, kvd)
    _scaled(ss, c2, "gate.states", e * t * qd)      # gate_states * s_gate²
    ss.save("gate.sigmoid", f * t * qd)
    ss.save(out, e * t * qd)                        # output * sigmoid keeps both
    sub, sb = l2norm(ss, c2, "attn_sub", "gate.prod", qd, f)
    linear(ss, c2, sub, sb, o, ao)
    l2norm(ss, c2, "ln_post_attn", "o_out", h, e)
    _scaled(ss, c2, "attn.diff", f * t * h)         # rate * (attn_output - h)
    y2, yb2 = l2norm(ss, c2, "ln_pre_ff", "resid2", h, f)
    inter = mg.d_out
    linear(ss, c2, y2, yb2, mg, amg)
    linear(ss, c2, y2, yb2, mu, amu)
    _scaled(ss, c2, "mlp.gate", e * t * inter)      # gate_proj(x) * suv_gate
    _scaled(ss, c2, "mlp.up", e * t * inter)        # up_proj(x) * suv_up
    ss.save("mlp.gate_scaled", f * t * inter)       # silu's input
    ss.save("mlp.up_scaled", f * t * inter)         # the product's factors
    ss.save("mlp.act", f * t * inter)
    sub2, sb2 = l2norm(ss, c2, "ffn_sub", "mlp.prod", inter, f)
    linear(ss, c2, sub2, sb2, md, amd)
    l2norm(ss, c2, "ln_post_ff", "down_out", h, e)
    _scaled(ss, c2, "mlp.diff", f * t * h)          # rate * (mlp_output - h)
    return ss.total


def dory_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (DoryModel.forward): model.norm on the input layers' output, at each loop's start and at
    the end (loops + 2 calls, fp32 upcast + rsqrt each); the rotary cos/sin of each attention type (sliding and
    full: two (1, s, head_dim) pairs in the embedding's dtype). Returns lm_head's input and its bytes."""
    for i in range(arch.looped["loops"] + 2):
        l2norm(ss, c, f"model_norm{i}", f"stream{i}", arch.hidden_size, c.res)
    ss.save("rope_cos_sin", 2 * c.res * seq * arch.head_dim * arch.looped["rope_types"])
    return "final_norm.out", c.res

