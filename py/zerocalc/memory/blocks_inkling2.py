"""Saved tensors of Inkling 2's decoder layers (model/inkling2.py), the op sequence of transformers 5.24
modeling_inkling2.py Inkling2SlidingDecoderLayer / Inkling2FullDecoderLayer and what each op keeps for backward,
traced on fake tensors (tools/memtrace/inkling_trace.py inkling2_text, tests/data/inkling2_trace.json, held within
3 % by tests/test_inkling_blocks.py). Eager attention only (Inkling2PreTrainedModel: no FlashAttention, no SDPA).

With t = b·s tokens, a heads, kv KV heads of d dims (W = a·d, K = kv·d), n block states read, e the 16-bit dtype:
- Inkling2BlockAttentionResidual (attention_input before the attention in layers > 0, with 3 queries in full
  layers; mlp_input before the MLP; final_input after the last layer): the fp32 stack of the block states and the
  current state (4·t·n·h), UnweightedRMSNorm's rsqrt and its fp32 output (the eager key and value), the fp32
  softmax (4·t·q·n); its fp32 output (4·t·q·h: a contiguous copy with 3 queries) is what the next norm keeps;
- Inkling2RMSNorm (`(weight * x.float()).to(dtype)`): the fp32 upcast (x itself when fp32), rsqrt and the fp32
  product (full fine-tuning); the layer's `.to(dtype)` makes the 16-bit input of the projections;
- q_proj: ScaledL2Clip (LogScaledL2Clip in full layers, whose log scale keeps a (1, s) fp32 scale): the fp32
  upcast and the scale's fp32 copy, the product (kept by vector_norm and the clip's multiply), and four (t, a)
  fp32 tensors (norm, reciprocal, threshold product, clamp); its 16-bit output is the query;
- k_proj / v_proj: the static conv's fp32 input (4·t·K) in sliding layers; in full layers the dynamic conv's fp32
  per-token weights and flipped windows (4·t·K·kernel each); k's L2Clip (fp32 upcast and four (t, kv) tensors),
  v's UnweightedRMSNorm (fp32 upcast and rsqrt); repeat_kv's copies of K and V (W wide);
- relative_position_bias: its ScaledL2Clip over (a, d_rel) as q's, the 16-bit relative states (full fine-tuning:
  proj's gradient), the rel logits the gather keeps (2·t·a·extent), the int64 (s, s) index and the bool mask;
- attention with the sink: the fp32 softmax over kv + 1 logits (4·a·s·(s + 1)·b), the 16-bit probabilities;
- o_proj (Inkling2GatedOutputProjection): the fp32 sigmoid of gate_proj, the attention output's fp32 copy, their
  16-bit product (o_proj.linear's input);
- post_attention_convolution / post_mlp_convolution: the fp32 upcast of their input (4·t·h each);
- the router in fp32: the input's fp32 copy (full fine-tuning), the sigmoid scores, top-k indices, the gathered
  weights and their sum; the experts (grouped_mm): three int64 indices and the int32 offsets, the gathered rows and
  down's 16-bit input (when the experts train), the softcapped SwiGLU's six fp32 tensors (tanh and capped gate,
  sigmoid, tanh and capped up, the first product), the fp32 weights gathered, down's output.
Inkling 2 Loop (modeling_inkling2_loop.py; tests/data/inkling2_loop_trace.json): the loop layers cast their input
norm's output for q, k and v apart; in the passes after the first, message_input (a block residual with 4 queries
over the previous pass's block states, its (b, s, 4, h) fp32 output kept) feeds four Inkling2LoopMessageGates
(message_gate below) before the q/k/v norms and the MLP's norm. Each call is costed on its own (model/inkling2.py).
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, linear
from .lora import Adapter


def layer_index(arch: ModelArch, linears: tuple[Linear, ...]) -> int:
    lls = arch.layer_linears or (linears,)
    i = next((j for j, x in enumerate(lls) if x is linears), None)
    return i if i is not None else next((j for j, x in enumerate(lls) if x == linears), 0)


def block_residual(ss: SavedSet, c: Ctx, key: str, h: int, states: int, queries: int = 1) -> None:
    """Inkling2BlockAttentionResidual over `states` block states (its output is booked by the norm reading it)."""
    t = c.tokens
    ss.save(f"{key}.stack", 4 * t * states * h)
    ss.save(f"{key}.rsqrt", 4 * t * states)
    ss.save(f"{key}.softmax", 4 * t * queries * states)
    if c.autocast:
        # bf16-mixed: both matmuls run in bf16 and keep autocast's copies: the expanded query and the normed stack
        # (transposed for the scores, as it is for the values), the fp32 probabilities
        ss.save(f"{key}.q16", 2 * t * queries * h)
        ss.save(f"{key}.k16", 2 * t * states * h)
        ss.save(f"{key}.v16", 2 * t * states * h)
        ss.save(f"{key}.probs16", 2 * t * queries * states)
    else:
        ss.save(f"{key}.normed", 4 * t * states * h)


def norm(ss: SavedSet, c: Ctx, key: str, x: str, x_bytes: int, h: int, needs_grad: bool = True) -> None:
    """Inkling2RMSNorm over h: its fp32 input (a new copy unless x is fp32), rsqrt, the fp32 product."""
    t = c.tokens
    if needs_grad:
        ss.save(x if x_bytes == 4 else f"{key}.fp32", 4 * t * h)
        ss.save(f"{key}.rsqrt", 4 * t)
    if c.train_base:
        ss.save(f"{key}.normed", 4 * t * h)


def l2clip(ss: SavedSet, c: Ctx, key: str, width: int, groups: int, scaled: bool, log_scaled: bool) -> None:
    """(Scaled / LogScaled) L2Clip over `groups` heads of width // groups, from a 16-bit input."""
    t = c.tokens
    if not scaled or c.train_base:
        ss.save(f"{key}.fp32", 4 * t * width)       # the upcast: the clip's own input, or the scale's gradient's
    if scaled:
        ss.save(f"{key}.scale_fp32", 4 * width)
        ss.save(f"{key}.product", 4 * t * width)
    ss.save(f"{key}.groups", 4 * 4 * t * groups)
    if log_scaled:
        ss.save(f"{key}.log_scale", 4 * c.seq)


def message_gate(ss: SavedSet, c: Ctx, key: str, h: int, lins: tuple, ad) -> str:
    """Inkling2LoopMessageGate (modeling_inkling2_loop.py): the weightless norms' rsqrt of the (fp32) state and
    message, kept themselves elsewhere; the concatenation's 16-bit cast (down_proj's input), down's fp32 copy (the
    fp32 forget / message projections' input), both tanh outputs and `1 - forget`. Returns its fp32 output."""
    t = c.tokens
    down, forget, message = lins
    ss.save(f"{key}.rsqrt", 8 * t)
    linear(ss, c, f"{key}.cat16", 2, Linear(f"{down.name}.{key}", down.d_in, down.d_out), ad(down))
    for lin in (forget, message):
        linear(ss, c, f"{key}.down32", 4, Linear(f"{lin.name}.{key}", lin.d_in, lin.d_out), ad(lin))
    ss.save(f"{key}.tanh", 2 * 4 * t * h)
    ss.save(f"{key}.keep", 4 * t * h)
    return f"{key}.out"


def inkling2_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One Inkling 2 decoder layer (the module docstring's list)."""
    ss = SavedSet()
    h, t, s, b = arch.hidden_size, c.tokens, c.seq, c.batch
    e = 2 if c.autocast else c.e
    lay = arch.inkling2["layers"][layer_index(arch, linears)]
    a, kvh, d, d_rel, extent, kernel = (lay[k] for k in ("heads", "kv", "d", "d_rel", "extent", "kernel"))
    w, kv_dim, sliding = a * d, kvh * d, lay["sliding"]
    lins = list(linears)
    ads = list(adapters)

    def ad(lin: Linear) -> Adapter | None:
        return next((x for x in ads if x.name == lin.name and x.d_in == lin.d_in and x.d_out == lin.d_out), None)

    def proj(key: str, x: str, lin: Linear, x_bytes: int = c.res) -> None:
        """`lin` under its own key: q/k/v/o_proj.linear and relative_position_bias.linear share the leaf name
        `linear`, and each LoRA wrapper makes its own copy of the input."""
        linear(ss, c, x, x_bytes, Linear(f"{lin.name}.{key}", lin.d_in, lin.d_out, lin.count), ad(lin))

    msgs = lay.get("message_states", 0)
    gates = iter(lins[-12:]) if msgs else None
    if msgs:
        # message_input over the previous pass's block states: its (b, s, 4, h) fp32 output feeds four gates
        block_residual(ss, c, "msg_in", h, msgs, 4)
        ss.save("msg_in.out", 4 * t * 4 * h)
    if lay["first"]:
        norm(ss, c, "ln_in", "resid", c.res, h, needs_grad=not (c.first_layer and not c.train_base))
        inputs = ("attn_in.q16",) * 3
    else:
        q = 1 if sliding else 3
        block_residual(ss, c, "attn_in", h, lay["attn_states"], q)
        ss.save("attn_in.out", 4 * t * q * h)
        names = ("q_ln", "k_ln", "v_ln") if msgs or not sliding else ("ln_in",)
        for name in names:
            x = "attn_in.out"
            if msgs:
                x = message_gate(ss, c, name, h, (next(gates), next(gates), next(gates)), ad)
            norm(ss, c, name, x, 4, h)
        # a loop layer casts the norm's output for q, k and v apart (`.to(dtype)` three times)
        inputs = ("attn_in.q16", "attn_in.k16", "attn_in.v16") if lay.get("loop") or not sliding \
            else ("attn_in.q16",) * 3
    qi, ki, vi = inputs
    it = iter(lins)
    q_lin, k_lin, v_lin = next(it), next(it), next(it)
    def conv(key: str, width: int) -> None:
        """A static depthwise conv (fp32 weights): its fp32 input; under autocast bf16 copies of input and weight."""
        if c.autocast:
            ss.save(f"{key}.in16", 2 * t * width)
            ss.save(f"{key}.w16", 2 * width * kernel)
        else:
            ss.save(f"{key}.fp32", 4 * t * width)

    proj("q", qi, q_lin)
    proj("k", ki, k_lin)
    proj("v", vi, v_lin)
    l2clip(ss, c, "q_clip", w, a, True, not sliding)
    if sliding:
        for key in ("k_conv", "v_conv"):
            conv(key, kv_dim)
    else:
        for key, x in (("k_dyn", ki), ("v_dyn", vi)):
            wp = next(it)
            proj(key, x, wp)
            ss.save(f"{key}.weights", 4 * t * kv_dim * kernel)
            ss.save(f"{key}.windows", 4 * t * kv_dim * kernel)
    l2clip(ss, c, "k_clip", kv_dim, kvh, False, False)
    ss.save("v_norm.fp32", 4 * t * kv_dim)
    ss.save("v_norm.rsqrt", 4 * t * kvh)
    gate, o_lin, sink, rel = next(it), next(it), next(it), next(it)
    for key, lin in (("gate", gate), ("sink", sink), ("rel", rel)):
        proj(key, qi, lin)
    l2clip(ss, c, "rel_clip", a * d_rel, a, True, not sliding)
    if c.train_base:
        ss.save("rel.states", e * t * a * d_rel)
    ss.save("rel.logits", e * t * a * extent)
    ss.save("rel.index", 8 * s * s)
    ss.save("rel.mask", s * s)
    ss.save("attn.q", e * t * w)
    ss.save("attn.k_rep", e * t * w)
    ss.save("attn.v_rep", e * t * w)
    ss.save("attn.softmax", 4 * a * s * (s + 1) * b)
    ss.save("attn.probs", e * a * s * s * b)
    ss.save("o.sigmoid", 4 * t * w)
    ss.save("o.attn_fp32", 4 * t * w)
    proj("o", "o.prod", o_lin, e)
    conv("post_attn_conv", h)
    block_residual(ss, c, "mlp_in", h, lay["mlp_states"])
    ss.save("mlp_in.out", 4 * t * h)
    x2 = message_gate(ss, c, "mlp_gate", h, (next(gates), next(gates), next(gates)), ad) if msgs else "mlp_in.out"
    norm(ss, c, "ln2", x2, 4, h)
    moe = arch.moe
    k, inter, rows = moe.experts_per_token, moe.expert_intermediate, t * moe.experts_per_token
    # the fp32 router; under autocast its F.linear runs in bf16 (copies of the input and the fp32 weight), so the
    # scores and the gathered weights are bf16
    r = 2 if c.autocast else 4
    if c.train_base:
        ss.save("router.x", r * t * h)
    if c.autocast:
        ss.save("router.w16", 2 * moe.num_experts * h)
    ss.save("router.scores", r * t * moe.num_experts)
    ss.save("router.topk", 8 * t * k)
    ss.save("router.weights", r * t * k + 4 * t)
    ss.save("experts.index", 24 * rows + 4 * moe.num_experts)
    if c.train_base:
        ss.save("experts.gathered", c.res * rows * h)
        ss.save("experts.down_in", c.res * rows * inter)
    ss.save("experts.swiglu", 6 * 4 * rows * inter)
    ss.save("experts.weights", 4 * rows)
    ss.save("experts.down", c.res * rows * h)
    conv("post_mlp_conv", h)
    return ss.total


def inkling2_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (Inkling2TextModel / Inkling2ForCausalLM.forward): embed_norm (kept only when the
    embedding trains), final_input over the final block states and model.norm over its fp32 output; lm_head reads
    the norm's 16-bit cast. No rotary embedding. Returns lm_head's input and its bytes."""
    t, h = c.tokens, arch.hidden_size
    if c.train_base:
        norm(ss, c, "embed_norm", "embed", c.res, h)
    block_residual(ss, c, "final_in", h, arch.inkling2["final_states"])
    ss.save("final_in.out", 4 * t * h)
    norm(ss, c, "final_norm", "final_in.out", 4, h)
    return "final_norm.out16", 2 if c.autocast else c.e


def checkpointed_block_states(arch: ModelArch, t: int) -> int:
    """Under full checkpointing each decoder layer keeps its inputs, Inkling 2's: the hidden states (counted by the
    engine), the (b, s, n, h) stack of block states (Inkling2TextModel.forward's torch.cat at each block boundary;
    one tensor shared by the calls that read it, model/inkling2.py's "stack"), in the embedding's dtype (bf16: 2
    bytes; a bf16-mixed full fine-tuning's fp32 stacks are counted as bf16); and, in Inkling 2 Loop's later
    passes, the messages: message_input runs outside the layers, so its saved set (fp32 stack, normed stack,
    rsqrt, softmax) and its (b, s, 4, h) fp32 output stay. Traced: tools/memtrace/inkling_trace.py *-ckpt."""
    if arch.inkling2 is None:
        return 0
    h, lays = arch.hidden_size, arch.inkling2["layers"]
    stacks = {lay["stack"]: lay["attn_states"] - 1 for lay in lays}
    total = sum(2 * t * n * h for n in stacks.values())
    for lay in lays:
        n = lay.get("message_states", 0)
        if n:
            total += 2 * 4 * t * n * h + 4 * t * n + 4 * t * 4 * n + 4 * t * 4 * h
    return total


MODEL_TYPES = ("inkling2_text", "inkling2", "inkling2_loop_text", "inkling2_loop")
RULES = {mt: inkling2_layer for mt in MODEL_TYPES}
HEADS = {mt: inkling2_head for mt in MODEL_TYPES}
