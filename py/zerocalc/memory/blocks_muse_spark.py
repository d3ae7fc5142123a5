"""Saved tensors of Muse Spark's decoder layer (transformers 5.24 modeling_muse_spark.py MuseSparkTextDecoderLayer,
the language model of MuseSparkForConditionalGeneration).

With t = b·s tokens, a query and kv key/value heads of d dims, m = moe_hidden_size and R = t·k routed rows, in the
16-bit compute dtype unless said:
- three kinds of RMSNorm: MuseSparkTextCenteredRMSNorm (input_layernorm, pre_feedforward_layernorm,
  pre_expert_norm: `_norm(x.float()) * (1 + weight).float()`, memory/blocks.py rmsnorm's Gemma rule: the fp32 upcast,
  rsqrt and, when the weight trains, the fp32 normalised tensor); the weightless MuseSparkRMSNorm (qk_norm over q
  and k, o_norm over the attention output, post_attention_layernorm, the embedding's embed_norm: the fp32 upcast
  and the fp32 (variance + eps) and its power per row: 8 bytes); MuseSparkTextInputScaledRMSNorm
  (post_feedforward_layernorm, the experts' post_expert_norm: `x.float() * (1 + weight).float()`, which keeps
  x.float() when the weight trains, then `.type_as(x).float()`, a second fp32 copy, and rsqrt);
- MuseSparkTextAttention: q/k/v_proj and gate_proj read input_layernorm's output; FA2 keeps the rotated q and k, v,
  its output and the fp32 logsumexp; o_norm's 16-bit output is kept by the gate's product when the gate needs a
  gradient (not in layer 0 under LoRA: gate_proj's input has none), with `sigmoid(gate_proj(x))` (a·d); o_proj reads
  the product;
- MuseSparkResidualGate (after post_attention_layernorm and post_feedforward_layernorm): `alpha * residual + beta *
  hidden` with fp32 gates of h: when they train, the products keep the residual and the normed sublayer output;
- the dense MLP: memory/blocks.py gated_mlp;
- MuseSparkMoE: MuseSparkTopkRouter's F.linear(x.type(float32), w.type(float32)) keeps the fp32 copy of its input
  when the fp32 weight trains, the fp32 sigmoid (t·E), int64 top-k, the gathered weights and their sum + eps;
  pre_expert_proj (h -> m), pre_expert_norm, then transformers' grouped_mm experts (integrations/moe.py
  grouped_mm_experts_forward with has_post_expert_norm) over m: the gathered rows and the product when the experts
  train, gate_up's output, SiLU's, down's output through post_expert_norm (its output the routing weights' factor),
  the fp32 weights and three int64 permutation indices per row; the summed (t, m) output cast to 16 bits is
  post_expert_proj's input (m -> h).
The grouped matmuls run in the experts' weight dtype (memory/blocks.py sparse_moe): fp32 over fp32 master weights.

Traced: tools/memtrace/more_moe_trace.py muse_spark (tests/data/muse_spark_trace.json, tests/test_muse_spark_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear, rmsnorm
from .lora import Adapter

MODEL_TYPES = ("muse_spark", "muse_spark_text")


def weightless_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, groups: int, x_bytes: int) -> str:
    """MuseSparkRMSNorm(with_scale=False): the fp32 upcast, (variance + eps) and its power (fp32, per group)."""
    if not (c.first_layer and not c.train_base):
        ss.save(f"{key}.fp32" if x_bytes != 4 else x, 4 * c.tokens * d)
        ss.save(f"{key}.rstd", 8 * c.tokens * groups)
    return f"{key}.out"


def input_scaled_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, x_bytes: int, rows: int) -> str:
    """MuseSparkTextInputScaledRMSNorm over ``rows`` rows: x.float() (kept for the weight's gradient), the fp32 copy of
    its 16-bit rounding that _norm reads, rsqrt."""
    if c.train_base:
        ss.save(f"{key}.fp32" if x_bytes != 4 else x, 4 * rows * d)
    ss.save(f"{key}.scaled", 4 * rows * d)
    ss.save(f"{key}.rsqrt", 4 * rows)
    return f"{key}.out"


def muse_moe(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, lins: dict, experts: dict, ads: dict) -> str:
    """The router, pre_expert_proj / pre_expert_norm, the grouped experts and post_expert_proj's input."""
    moe, t, h = arch.moe, c.tokens, arch.hidden_size
    e, em = (2 if c.autocast else c.e), c.res
    k, n_e, ie = moe.experts_per_token, moe.num_experts, moe.expert_intermediate
    m, rows = lins["pre_expert_proj"].d_out, t * k
    if c.train_base:
        if c.autocast:
            ss.save(f"{x}.router16", 2 * t * h)         # autocast's 16-bit copies of the router's input and weight
        else:
            ss.save(f"{x}.fp32" if c.res != 4 else x, 4 * t * h)
    if c.autocast:
        ss.save("router.weight16", 2 * n_e * h)
    ss.save("router", 4 * t * n_e + 8 * rows + 4 * rows + 4 * t)
    linear(ss, c, x, c.res, lins["pre_expert_proj"], ads.get("pre_expert_proj"))
    y = rmsnorm(ss, c, "pre_expert_norm", "pre_expert", m, True, x_bytes=e)
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    if trained:
        ss.save("moe.gathered" if em == e else f"{y}.gathered", em * rows * m)
    ss.save("moe.gate_up", em * rows * 2 * ie)
    ss.save("moe.act", em * rows * ie)
    if trained:
        ss.save("moe.prod", em * rows * ie)
    input_scaled_norm(ss, c, "post_expert_norm", "moe.down_out", m, em, rows)
    ss.save("post_expert_norm.out", em * rows * m)        # the routing weights' factor
    ss.save("moe.routing", 4 * rows + 24 * rows)
    linear(ss, c, "moe.final", e, lins["post_expert_proj"], ads.get("post_expert_proj"))
    return "post_expert_proj.out"


def muse_spark_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list); layer 0 under full fine-tuning also carries
    the embedding's embed_norm (its fp32 upcast and per-row statistics)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h, t, d = arch.hidden_size, c.tokens, arch.head_dim
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
    if c.first_layer and c.train_base:
        weightless_norm(ss, c, "embed_norm", "embed", h, 1, c.res)
    y = rmsnorm(ss, c, "ln1", "resid", h, True)
    for name in ("q_proj", "k_proj", "v_proj", "self_attn.gate_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    weightless_norm(ss, c2, "q_norm", "q", q_dim, q_dim // d, e)
    weightless_norm(ss, c2, "k_norm", "k", kv_dim, kv_dim // d, e)
    attention_core(ss, c2, replace(arch, family="llama"), "attn", q_dim, kv_dim)
    weightless_norm(ss, c2, "o_norm", "attn.out", q_dim, q_dim // d, e)
    if not c.first_layer or c.train_base:
        ss.save("o_norm.out", e * t * q_dim)
    ss.save("attn.gate_sigmoid", e * t * q_dim)
    linear(ss, c2, "attn.gated", e, lins["o_proj"], ads.get("o_proj"))
    weightless_norm(ss, c2, "post_attn_norm", "o_out", h, 1, e)
    if c.train_base:
        ss.save("resid", c.res * t * h)                   # the residual gate's factors
        ss.save("post_attn_norm.out", e * t * h)
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, True)
    if arch.moe and "down_proj" in experts:
        muse_moe(ss, c2, arch, y2, lins, experts, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    input_scaled_norm(ss, c2, "post_ff_norm", "mlp_out", h, e, t)
    if c.train_base:
        ss.save("resid2", c.res * t * h)
        ss.save("post_ff_norm.out", e * t * h)
    return ss.total


def post_expert_norm_moment(arch: ModelArch, e: int, res: int, t: int) -> int:
    """Full fine-tuning: the top (or recomputed) sparse layer's backward peaks in post_expert_norm's backward, over
    the fp32 (R, m) rows: three products, a quotient and a power (5 · 4·R·m), when the layer's tail has been
    consumed: post_feedforward_layernorm and its residual gate (the upcast, the rounded copy, the gate's factors),
    post_expert_proj's (t, m) input and post_expert_norm's 16-bit output (the routing weights' factor). Returns the
    moment's bytes over the layer's saved set (traced: muse-spark-2l-full-s512-ckpt, 22.0 MB of temporaries at a
    mul beside the recomputed sparse layer)."""
    moe, h = arch.moe, arch.hidden_size
    lin = next(x for lins in (arch.layer_linears or (arch.block_linears,)) for x in lins if x.name == "pre_expert_proj")
    rows, m = t * moe.experts_per_token, lin.d_out
    consumed = 4 * t * h + 4 * t * h + 4 * t + res * t * h + e * t * h + e * t * m + res * rows * m
    return 5 * 4 * rows * m - consumed
