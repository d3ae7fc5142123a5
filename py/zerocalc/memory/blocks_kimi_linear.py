"""Saved tensors of Kimi Linear's decoder layer (transformers 5.24 modeling_kimi_linear.py KimiLinearDecoderLayer) as
it trains on a GPU, where transformers runs causal-conv1d's and flash-linear-attention's (fla) chunk_kda kernels.

With t = b·s tokens, H KDA heads of d (q = H·d: q_proj's width), e the 16-bit compute dtype (2 under autocast):

- input_layernorm and post_attention_layernorm: KimiLinearRMSNorm, Llama's (memory/blocks.py rmsnorm);
- the MLA layers (``full_attention``; KimiLinearAttention, NoPE): memory/blocks.py llama_block's latent attention,
  the query a view of q_proj's output, the key a new tensor (expand_kv's new_empty / copy_), FA2's padded value, its
  output and logsumexp, o_proj's copy of the cropped output (arch.mla);
- the KDA layers (KimiLinearDeltaAttention.forward): q/k/v_proj read the norm's output; their `torch.cat` is
  causal_conv1d_fn's input, which CausalConv1dFn keeps (3·q per token). KimiLinearForgetGate: f_a_proj's output
  (f_b_proj's input, when it trains); `g = f.float() + dt_bias`, `torch.where(g > 20, g, log(1 + exp(g)))`: exp
  keeps its fp32 output, log its fp32 input `1 + exp`, where the bool condition (once g needs a gradient);
  `-exp(A_log) * softplus` keeps exp(A_log) and its negation (H each) and, when A_log trains, the fp32 softplus; the
  product (fp32, q per token)
  is fla's g, kept by the kernel. beta = sigmoid(b_proj(x)) (e, H per token) is the kernel's beta. fla's
  ChunkKDAFunction (flash-linear-attention 0.5.2, fla/ops/kda/chunk.py; tools/memtrace/kda_trace.py KdaStandIn) keeps
  the l2-normed q and k (e), their fp32 rstd (H per token each), v's contiguous copy (e), the fp32 g_cumsum, g and
  beta, Aqk and Akk (e, 64 per head and token: the chunk size); h, w, u, kg and v_new are recomputed in backward.
  g_a_proj's output is g_b_proj's input; KimiLinearRMSNormGated over (t·H, d) rows: the fp32 copy of the kernel's
  output, the fp32 rsqrt per row, the weight's fp32 copy (a 16-bit weight), the fp32 normalised tensor (for the
  weight's gradient), the fp32 sigmoid of the gate, the fp32 weighted tensor (for the gate's gradient) and the
  16-bit output o_proj reads;
- the MLP: the dense SwiGLU (memory/blocks.py gated_mlp) or KimiLinearMoE, DeepSeek's (memory/blocks.py sparse_moe:
  the fp32 sigmoid router reading an fp32 copy of its input, the grouped_mm experts, the shared expert).

Under LoRA, layer 0's input needs no gradient: the mixer keeps its set only where an adapter on q/k/v_proj makes the
kernel's inputs need one, the forget gate's and the gate's grad-only saves go. Traced: tools/memtrace/kda_trace.py
kimi_linear (tests/data/kimi_linear_trace.json, tests/test_kimi_linear_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, gated_mlp, linear, llama_block, rmsnorm, sparse_moe
from .lora import Adapter

CHUNK = 64          # fla chunk_kda: chunk_size 64, Aqk / Akk are (b, s, H, 64)


def kda_kernel_saves(ss: SavedSet, t: int, e: int, q: int, heads: int) -> None:
    """What fla 0.5.2's ChunkKDAFunction keeps besides g and beta (its caller's tensors): the l2-normed q and k and
    their fp32 rstd, v's contiguous copy, the fp32 g_cumsum, Aqk and Akk."""
    ss.save("kda.q", e * t * q)
    ss.save("kda.k", e * t * q)
    ss.save("kda.qk_rstd", 2 * 4 * t * heads)
    ss.save("kda.v", e * t * q)
    ss.save("kda.g_cumsum", 4 * t * q)
    ss.save("kda.A", 2 * e * t * heads * CHUNK)


def kda_mixer(ss: SavedSet, c: Ctx, y: str, lins: dict, ads: dict, gate: str = "") -> str:
    """KimiLinearDeltaAttention / BailingHybridDeltaAttention between the input norm's output ``y`` and o_proj;
    returns o_proj's input key. Bailing's layer has f_proj and g_proj where Kimi's has the low-rank pairs.
    ``gate`` "safe": Kimi's layer with the lower-bound forget gate `lower_bound * sigmoid(exp(A_log) * g)` and its
    fp32 output as fla's g (modeling_glm5_next.py Glm5NextTextForgetGate)."""
    t, e = c.tokens, 2 if c.autocast else c.e
    q, heads = lins["q_proj"].d_out, lins["b_proj"].d_out
    bailing = "f_proj" in lins
    d = q // heads
    grad_in = c.train_base or not c.first_layer
    ins = ("q_proj", "k_proj", "v_proj", "f_proj", "b_proj", "g_proj") if bailing else \
        ("q_proj", "k_proj", "v_proj", "f_a_proj", "b_proj", "g_a_proj")
    for name in ins:
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    mixer = grad_in or any(n in ads for n in ("q_proj", "k_proj", "v_proj"))
    fgate = grad_in or any(n in ads for n in ("f_proj", "f_a_proj", "f_b_proj"))
    ogate = grad_in or any(n in ads for n in ("g_proj", "g_a_proj", "g_b_proj"))
    c2 = replace(c, first_layer=False) if c.first_layer else c
    if not bailing:
        linear(ss, c2, "f_a.out", e, lins["f_b_proj"], ads.get("f_b_proj"))
        linear(ss, c2, "g_a.out", e, lins["g_b_proj"], ads.get("g_b_proj"))
    if not mixer:
        return "o_norm.out"
    if gate == "safe":
        if fgate:
            ss.save("fgate.sigmoid", 4 * t * q)
            ss.save("fgate.decay", 4 * heads)
        if c.train_base:
            ss.save("fgate.g_in", 4 * t * q)
        ss.save("fgate.g", 4 * t * q)
    elif bailing:
        # BailingHybridForgetGate: `f_proj(x).float() + dt_bias`, decay = A_log.exp() (fp32 A_log), the safe gate
        # `lower_bound * sigmoid(decay * gate_input)` (sigmoid keeps its fp32 output; the product keeps gate_input
        # when A_log trains, and decay) or `-decay * softplus(gate_input)` (softplus keeps gate_input, the product
        # the fp32 softplus when A_log trains: the same bytes), then `.to(hidden_states.dtype)`: fla's g
        if fgate:
            ss.save("fgate.sigmoid", 4 * t * q)
            ss.save("fgate.decay", 4 * heads)
        if c.train_base:
            ss.save("fgate.gate_input", 4 * t * q)
        ss.save("fgate.g", c.res * t * q)
    else:
        if fgate:
            ss.save("fgate.exp", 4 * t * q)
            ss.save("fgate.log_in", 4 * t * q)
            ss.save("fgate.where_cond", t * q)
            ss.save("fgate.neg_decay", 4 * heads)
        if c.train_base:
            ss.save("fgate.decay", 4 * heads)
            ss.save("fgate.softplus", 4 * t * q)
        ss.save("fgate.g", 4 * t * q)                   # -decay * softplus: fla's g
    ss.save("beta", e * t * heads)
    ss.save("conv.x", e * t * 3 * q)
    kda_kernel_saves(ss, t, e, q, heads)
    ss.save("o_norm.fp32", 4 * t * q)
    ss.save("o_norm.rsqrt", 4 * t * heads)
    if c.res != 4:
        ss.save("o_norm.weight_fp32", 4 * d)            # `self.weight.to(torch.float32)` of a 16-bit weight
    if c.train_base:
        ss.save("o_norm.normed", 4 * t * q)
    ss.save("o_norm.sigmoid", 4 * t * q)
    if ogate:
        ss.save("o_norm.weighted", 4 * t * q)
    return "o_norm.out"


def mla_output_gate(c: Ctx, lins: dict, ads: dict) -> int:
    """BailingHybridAttention's head-wise output gate beside llama_block's latent attention: `sigmoid(g_proj(x)
    .float()).to(hidden_states.dtype)` times the attention output; the product keeps the cast gate (a 16-bit stream)
    and the attention output (FA2's, kept already), sigmoid its fp32 output when the gate needs a gradient; g_proj
    keeps the norm's output (llama_block's, under full fine-tuning) and its adapter's inputs."""
    ss, t = SavedSet(), c.tokens
    g = lins["g_proj"]
    heads = g.d_out
    attn = c.train_base or not c.first_layer or any(
        n in ads for n in ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"))
    gate = c.train_base or not c.first_layer or "g_proj" in ads
    if "g_proj" in ads:
        linear(ss, replace(c, train_base=False), "ln1.out", c.res, g, ads["g_proj"])
    if gate or (attn and c.res == 4):
        ss.save("gate.sigmoid", 4 * t * heads)
    if attn and c.res != 4:
        ss.save("gate.cast", c.res * t * heads)
    return ss.total


def kimi_linear_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list): an MLA layer is llama_block's."""
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    if "kv_b_proj" in lins:
        extra = mla_output_gate(c, lins, {ad.name: ad for ad in adapters}) if "g_proj" in lins else 0
        if c.attention == "eager":
            # eager_attention_forward's `matmul(probs, value)` keeps the value, a view of kv_b_proj's whole output
            # (a·(nope + v) per token, not llama_block's query-wide repeated V); Bailing's gate product keeps the
            # eager output's contiguous copy beside o_proj's input, the product (traced: the -eager rows)
            e = 2 if c.autocast else c.e
            q_dim = arch.num_heads * (arch.mla["qk_nope"] + arch.mla["qk_rope"])
            extra += e * c.tokens * (lins["kv_b_proj"].d_out - q_dim)
            if "g_proj" in lins:
                extra += e * c.tokens * lins["o_proj"].d_in
        return llama_block(arch, c, linears, adapters) + extra
    experts = {lin.name for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    ss, h = SavedSet(), arch.hidden_size
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    y = rmsnorm(ss, c, "ln1", "resid", h)
    out = kda_mixer(ss, c, y, lins, ads)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def kimi_linear_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers: model.norm (Llama's RMSNorm); no rotary embedding (NoPE). Returns lm_head's input key and
    its bytes per element."""
    return rmsnorm(ss, c, "final_norm", "resid_final", arch.hidden_size), c.res
