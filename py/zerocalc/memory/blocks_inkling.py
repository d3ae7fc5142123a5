"""Saved tensors of Inkling's decoder layer (model/inkling.py), the op sequence of transformers 5.24
modeling_inkling.py InklingDecoderLayer and what each op keeps for backward, traced on fake tensors
(tools/memtrace/inkling_trace.py, tests/data/inkling_trace.json, held within 3 % by tests/test_inkling_blocks.py).

With t = b·s tokens, a heads, kv KV heads of d dims, d_rel, the layer's rel_extent R (sliding_window_size in a
sliding layer), e the 16-bit compute dtype:
- input_layernorm / post_attention_layernorm: InklingRMSNorm (Llama's: memory/blocks.py rmsnorm);
- q_proj, k_proj, v_proj, r_proj read the norm's output (memory/blocks.py linear, LoRA included);
- k_sconv / v_sconv (InklingShortConvolution, fp32 weights: _keep_in_fp32_modules_strict): `x.float()` is kept by
  the depthwise conv1d (4·t·kv·d each) whenever its input needs a gradient (frozen weights too: ConvolutionBackward
  saves input and weight), the residual add keeps nothing;
- q_norm / k_norm: per-head InklingRMSNorm over the projection (q) and the conv's 16-bit output (k);
- InklingRelativeLogits: `relative_states @ proj` keeps relative_states (2·t·a·d_rel) for proj's gradient (full
  fine-tuning); `.gather` keeps its input, the (b, s, a, R) rel logits (2·t·a·R), and its index, the clamped
  distance, an int64 (1, 1, s, s) expanded view (8·s², once, whatever b and a); masked_fill keeps its bool
  (1, 1, s, s) mask (s²);
- attention: eager (InklingPreTrainedModel._supports_flash_attn is False; SDPA takes the bias as a float mask, see
  the trace driver): q, the repeated K and V (a·d wide), the fp32 softmax and its 16-bit copy (6·a·s²·b); the bias
  and the mask are added, not kept; o_proj reads the transposed output's contiguous copy;
- attn_sconv / mlp_sconv over h: the fp32 upcast of the sublayer's output (4·t·h each);
- dense MLP (InklingMLP): SwiGLU (memory/blocks.py gated_mlp) and `down * global_scale`, which keeps down's output
  (e·t·h) for the scale's gradient (full fine-tuning);
- sparse MLP (InklingMoE): InklingTopkRouter in fp32 with autocast off: `F.linear(x.float(), w.float())` keeps the
  fp32 input copy (full fine-tuning) and the fp32 copy of the (E + S, h) weight; sigmoid keeps its output and gather
  the logits (4·t·(E + S) each), topk's int64 indices (8·t·k); over the k + S chosen logits: cat, logsigmoid's
  output and buffer (CPU), exp (4·t·(k + S) each) and logsumexp (4·t); `* global_scale` keeps its input (full
  fine-tuning); the shared gammas' contiguous copy (e·t·S);
- routed experts (grouped_mm, integrations/moe.py): three int64 index tensors (floor_divide, sort, inverse:
  24·t·k), the int32 offsets (4·E), the gathered rows (when the experts train), gate_up's output, SiLU's output,
  the product (when the experts train), the routing weights gathered (e·t·k) and down's output (kept for them);
- shared experts (InklingSharedExperts, bmm over S): gate and up outputs, SiLU, `act * up` (kept by the gammas'
  multiply) and `* gammas` (down's input, when it trains), each e·t·S·I, reading the norm's output.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear, rmsnorm
from .lora import Adapter


def layer_geometry(arch: ModelArch, linears: tuple[Linear, ...]) -> tuple[int, int, int, int]:
    """(heads, head dim, d_rel, rel_extent) of the layer whose linears these are (arch.layer_linears[i]: its
    rel_logits_proj.proj is (d_rel, rel_extent), its q_norm over the head dim)."""
    lls = arch.layer_linears or (linears,)
    i = next((j for j, x in enumerate(lls) if x is linears), None)
    if i is None:
        i = next((j for j, x in enumerate(lls) if x == linears), 0)
    proj = next(tt for tt in arch.tensors if tt.name.endswith(f"layers.{i}.self_attn.rel_logits_proj.proj"))
    prefix = proj.name[: -len("rel_logits_proj.proj")]
    d = next(tt.numel for tt in arch.tensors if tt.name == f"{prefix}q_norm.weight")
    q = next(lin for lin in linears if lin.name == "q_proj")
    return q.d_out // d, d, proj.shape[0], proj.shape[1]


def relative_logits(ss: SavedSet, c: Ctx, heads: int, d_rel: int, extent: int) -> None:
    """InklingRelativeLogits.forward (modeling_inkling.py ≈l.110-133)."""
    e, t = 2 if c.autocast else c.e, c.tokens
    if c.train_base:
        ss.save("rel.states", e * t * heads * d_rel)            # matmul's input, for proj's gradient
    ss.save("rel.logits", e * t * heads * extent)               # gather keeps its input
    ss.save("rel.index", 8 * c.seq * c.seq)                     # int64 (1, 1, s, s), expanded
    ss.save("rel.mask", c.seq * c.seq)                          # bool (1, 1, s, s)


def router(ss: SavedSet, c: Ctx, h: int, n_total: int, k: int, shared: int) -> None:
    """InklingTopkRouter.forward (fp32, autocast off)."""
    t = c.tokens
    if c.train_base:
        ss.save("router.x_fp32", 4 * t * h)
    ss.save("router.w_fp32", 4 * n_total * h)
    ss.save("router.sigmoid", 4 * t * n_total)
    ss.save("router.logits", 4 * t * n_total)
    ss.save("router.topk", 8 * t * k)
    ss.save("router.chosen", 4 * 4 * t * (k + shared))         # cat, logsigmoid out + buffer, exp
    ss.save("router.lse", 4 * t)
    if c.train_base:
        ss.save("router.scaled", 4 * t * (k + shared))         # * global_scale keeps its input
    ss.save("router.gammas", (2 if c.autocast else c.e) * t * shared)


def experts(ss: SavedSet, c: Ctx, h: int, n_experts: int, k: int, inter: int, trained: bool) -> None:
    """The routed experts under transformers' grouped_mm (integrations/moe.py), in the weights' dtype."""
    e, rows = c.res, c.tokens * k
    ss.save("experts.index", 24 * rows + 4 * n_experts)
    if trained:
        ss.save("experts.gathered", e * rows * h)
    ss.save("experts.gate_up", e * rows * 2 * inter)
    ss.save("experts.act", e * rows * inter)
    if trained:
        ss.save("experts.prod", e * rows * inter)
    ss.save("experts.weights", e * rows)
    ss.save("experts.down", e * rows * h)


def shared_experts(ss: SavedSet, c: Ctx, x: str, x_bytes: int, h: int, width: int) -> None:
    """InklingSharedExperts.forward: bmm over the S experts of `width` = S·I in all."""
    e, t = 2 if c.autocast else c.e, c.tokens
    if c.train_base:
        ss.save(x, x_bytes * t * h)
    for name in ("gate", "up", "act", "act_up"):
        ss.save(f"shared.{name}", e * t * width)
    if c.train_base:
        ss.save("shared.prod", e * t * width)


def inkling_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One InklingDecoderLayer (the module docstring's list)."""
    ss = SavedSet()
    h, t = arch.hidden_size, c.tokens
    e = 2 if c.autocast else c.e
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    routed = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    c2 = replace(c, first_layer=False)
    q, kv_dim = lins["q_proj"], lins["k_proj"].d_out
    heads, d, d_rel, extent = layer_geometry(arch, linears)
    y = rmsnorm(ss, c, "ln1", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj", "r_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    # the convs' inputs need a gradient when their projection trains
    for name, key in (("k_proj", "k_sconv"), ("v_proj", "v_sconv")):
        if c.train_base or name in ads or not c.first_layer:
            ss.save(f"{key}.fp32", 4 * t * kv_dim)
    cq = c2 if (c.train_base or "q_proj" in ads or not c.first_layer) else c
    ck = c2 if (c.train_base or "k_proj" in ads or not c.first_layer) else c
    rmsnorm(ss, cq, "q_norm", "q", q.d_out, groups=heads, x_bytes=e)
    rmsnorm(ss, ck, "k_norm", "k", kv_dim, groups=kv_dim // d, x_bytes=e)
    if c.train_base or "r_proj" in ads or not c.first_layer:
        relative_logits(ss, c, heads, d_rel, extent)
    # eager attention over this layer's heads (q_norm's output is the query); repeat_kv copies K and V
    shaped = replace(arch, family="llama", num_heads=heads, num_kv_heads=kv_dim // d)
    out = attention_core(ss, replace(c2, attention="eager"), shaped, "attn", q.d_out, kv_dim)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    ss.save("attn_sconv.fp32", 4 * t * h)
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if routed:
        moe = arch.moe
        n_shared = moe.shared_intermediate // moe.expert_intermediate
        router(ss, c2, h, moe.num_experts + n_shared, moe.experts_per_token, n_shared)
        experts(ss, c2, h, moe.num_experts, moe.experts_per_token, moe.expert_intermediate, c.train_base)
        shared_experts(ss, c2, y2, c.res, h, moe.shared_intermediate)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
        if c.train_base:
            ss.save("mlp.down_out", e * t * h)               # `* global_scale`
    ss.save("mlp_sconv.fp32", 4 * t * h)
    return ss.total


def inkling_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (InklingTextModel / InklingForCausalLM.forward): the embedding's embed_norm (an
    InklingRMSNorm: kept only when the embedding trains), model.norm, and lm_head's input, the new tensor
    `last_hidden_state / logits_mup_width_multiplier`; no rotary embedding. Returns lm_head's input and bytes."""
    rmsnorm(ss, replace(c, first_layer=not c.train_base), "embed_norm", "embed", arch.hidden_size)
    rmsnorm(ss, c, "final_norm", "resid_final", arch.hidden_size)
    return "final_norm.div", c.res


# the text model and the composite whose language model it is (model/composite.py inkling_mm_model)
MODEL_TYPES = ("inkling_text", "inkling_mm_model")
RULES = {t: inkling_layer for t in MODEL_TYPES}
HEADS = {t: inkling_head for t in MODEL_TYPES}
