"""Saved tensors of the MoE decoder blocks whose experts run code of their own, not transformers' shared MoE
experts (memory/blocks.py _moe): Llama 4 (every expert on every token), DBRX (a loop over the experts hit, each
indexed out of one (E·I, h) weight) and JetMoE (a mixture of attention beside the MoE MLP). Each rule is the op
sequence of the transformers 5.24 modelling file and what each op keeps for backward, traced on fake tensors
(tools/memtrace/moe_trace.py `added`, fixtures in tests/data/moe_families_added_trace.json, held within 3 % by
tests/test_moe_families.py). `layer_saved_bytes` adds these rules to memory/blocks_families.py's.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import FP32_PRODUCT_NORMS, Ctx, SavedSet, attention_core, gated_mlp, linear, llama_block, rmsnorm
from .blocks_families import RULES as FAMILY_RULES
from .blocks_families import layer_saved_bytes as family_saved_bytes
from .blocks_families import layernorm
from .blocks_modernbert import modernbert_block
from .blocks_moshi import moshi_block
from .blocks_hyper import HYPER, hyper_block
from .blocks_minimax_m3 import MODEL_TYPES as MINIMAX_M3, minimax_m3_block
from .blocks_mistral_large4 import mistral_large4_block
from .blocks_more import MORE_RULES
from .lora import Adapter


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def llama4_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_llama4.py Llama4TextDecoderLayer: Llama's RMSNorms and attention (memory/blocks.py rules), with
    Llama4TextL2Norm on q and k (`_norm(x.float()).type_as(x)`, no weight: the fp32 upcast and the per-head rsqrt
    kept, SDPA keeps the 16-bit output) on the RoPE layers. The NoPE layers (every no_rope_layer_interval-th)
    have no q/k norm but a temperature-scaled query copy `(q * attn_scales).to(dtype)` that SDPA keeps instead;
    both are costed as RoPE layers (4·t·(q + kv) bytes over a NoPE layer, under 1 % of Scout's MoE layer).
    Dense layers (not in moe_layers): Llama4TextMLP of intermediate_size_mlp, the gated rule. MoE layers: see
    `_llama4_moe`. Traced: tools/memtrace/moe_trace.py llama4_text (tests/data/moe_families_added_trace.json)."""
    ss = SavedSet()
    h = arch.hidden_size
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    c2 = _later(c)
    y = rmsnorm(ss, c, "ln1", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    if arch.qk_norm and (c.train_base or any(n in ads for n in ("q_proj", "k_proj")) or not c.first_layer):
        ss.save("q_norm.fp32", 4 * c.tokens * arch.q_dim)
        ss.save("q_norm.rsqrt", 4 * c.tokens * arch.num_heads)
        ss.save("k_norm.fp32", 4 * c.tokens * arch.kv_dim)
        ss.save("k_norm.rsqrt", 4 * c.tokens * arch.num_kv_heads)
    if c.attention == "eager":
        # modeling_llama4.py eager_attention_forward: repeat_kv copies K and V to every head and the softmax runs
        # in the query's dtype (no fp32 upcast; under autocast softmax is an fp32 op and the probs @ V matmul keeps
        # a 16-bit copy). Traced: llama4-text-4l-full-s512-eager, 2 bytes per score
        e, scores = 2 if c.autocast else c.e, arch.num_heads * c.seq * c.seq * c.batch
        for name in ("q", "k_rep", "v_rep"):
            ss.save(f"attn.{name}", e * c.tokens * arch.q_dim)
        ss.save("attn.softmax", (4 if c.autocast else e) * scores)
        if c.autocast:
            ss.save("attn.probs", 2 * scores)
        out = "attn.out"
    else:
        out = attention_core(ss, c2, arch, "attn", arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, 2 if c.autocast else c.e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if "gate_up_proj" in experts:
        _llama4_moe(ss, c2, arch, y2, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def _llama4_moe(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, lins: dict, ads: dict) -> None:
    """modeling_llama4.py Llama4TextMoe: every expert runs on every token. The router (nn.Linear, keeps its input
    when it trains) scatters its top-k logits into -inf and keeps `sigmoid(scores.float())` (fp32, t·E) and the
    top-k indices; `hidden_states.repeat(E, 1)` (E·t rows, kept by the product with the scores, whose transposed
    copy is kept too) times the scores is Llama4TextExperts' bmm input, kept only when the experts train;
    the bmm's gate_up output (E·t·2I, `chunk` views: silu's input and the product's other factor), silu's output
    and, when the experts train, the product (down_proj's bmm input). The shared expert is a gated MLP on the t
    tokens. Traced per MoE layer (bf16, full): 2·E·t·(2h + 4I) + 8·t·I_shared + the router's."""
    moe, t, h = arch.moe, c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    rows, ie = moe.num_experts * t, moe.expert_intermediate
    if c.train_base:
        linear(ss, c, x, c.res, Linear("router", h, moe.num_experts), None)
    ss.save("router.sigmoid", 4 * t * moe.num_experts)
    ss.save("router.topk", 8 * t * moe.experts_per_token)
    ss.save("router.scores_t", e * rows)
    ss.save("moe.repeat", c.res * rows * h)
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    if trained:
        ss.save("moe.routed_in", e * rows * h)
    ss.save("moe.gate_up", e * rows * 2 * ie)
    ss.save("moe.act", e * rows * ie)
    if trained:
        ss.save("moe.prod", e * rows * ie)
    shared = {name: lins[name] for name in ("gate_proj", "up_proj", "down_proj")}
    gated_mlp(ss, c, "shared", x, c.res, shared, ads, moe.shared_intermediate)


def dbrx_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_dbrx.py DbrxBlock: norm_1 (nn.LayerNorm without bias) -> Wqkv -> `clamp(-clip_qkv, clip_qkv)` (keeps
    its input for the mask; every DBRX checkpoint sets clip_qkv, torch.clamp refuses two Nones) -> split: v a view
    of the clamped output, so SDPA keeps all of it, q and k new after RoPE -> SDPA -> out_proj; norm_2 -> DbrxFFN:
    router.layer, softmax in the logits' dtype (kept), top-k and its p-norm normalisation; DbrxExperts loops over
    the experts hit: `hidden_states[token_idx]` (a gathered copy the w1/v1 matmuls keep when the experts train),
    w1 and v1 outputs (silu's input, the product's factor), silu's output, the product (w2's input, kept when the
    experts train), w2's output (kept by the product with the routing weights) and that product (kept for
    index_add_), with the int64 (idx, token_idx) of torch.where per routed row. Traced (tools/memtrace/moe_trace.py
    dbrx, a balanced router: tools/memtrace/routing.py) per layer in 16-bit elements: 3·t·h + 2·t·qkv + t·kv +
    rows·(3h + 4I) with rows = t·k, full fine-tuning."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e, h = c.tokens, 2 if c.autocast else c.e, arch.hidden_size
    moe = arch.moe
    y, yb = layernorm(ss, c, "ln1", "resid", h)
    wqkv = lins["Wqkv"]
    linear(ss, c, y, yb, wqkv, ads.get("Wqkv"))
    c2 = _later(c)
    if c.train_base or "Wqkv" in ads or not c.first_layer:
        ss.save("qkv.out", e * t * wqkv.d_out)                  # clamp's input, for its mask
    if c.attention == "eager":
        # DBRX's eager_attention_forward is Llama's (repeat_kv copies, fp32 softmax and its 16-bit copy): the view
        # of the clamped output is not kept there (traced: dbrx-2l-full-s512-eager, saved -1.7 %)
        out = attention_core(ss, c2, replace(arch, family="llama"), "attn", arch.q_dim, arch.kv_dim)
    else:
        ss.save("qkv.clamped", e * t * wqkv.d_out)              # v is a view of it
        ss.save("attn.v", 0)
        ss.save("attn.q", e * t * arch.q_dim)                   # RoPE's new q and k
        ss.save("attn.k", e * t * arch.kv_dim)
        out = attention_core(ss, c2, arch, "attn", arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, e, lins["out_proj"], ads.get("out_proj"))
    y2, yb2 = layernorm(ss, c2, "ln2", "resid2", h)
    if c.train_base:
        linear(ss, c2, y2, yb2, Linear("router", h, moe.num_experts), None)
    k = moe.experts_per_token
    ss.save("router.softmax", e * t * moe.num_experts)
    ss.save("router.topk", (8 + e) * t * k + e * t)             # indices, values, their p-norm
    rows, ie = t * k, moe.expert_intermediate
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    if trained:
        ss.save("moe.gathered", e * rows * h)
        ss.save("moe.prod", e * rows * ie)
    ss.save("moe.gate_up", e * rows * 2 * ie)                   # w1's and v1's outputs
    ss.save("moe.act", e * rows * ie)
    ss.save("moe.expert_out", e * rows * h)                     # w2's output, for the routing weights' gradient
    ss.save("moe.weighted", e * rows * h)                       # kept by index_add_
    ss.save("moe.routing_index", (16 + e) * rows)               # torch.where's two int64 and the gathered weights
    return ss.total


def jetmoe_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_jetmoe.py JetMoeDecoderLayer: RMSNorms as Llama's; JetMoeAttention's mixture of attention (MoA) and
    the MoE MLP, both JetMoeParallelExperts over t·k routed rows (experts sorted by JetMoeTopKGating), 3-D weights
    PEFT cannot wrap. Per routed row: the gathered input (`layer_input[batch_index]`, kept by the experts'
    F.linear when they train), each ParallelExperts' `cat` output where the next op keeps it (`index_add`'s source,
    the product with the gates), the gated product `expert_outputs * batch_gates` (index_add's source). MoA: q over
    k·kv heads (RoPE's new tensor), kv_proj's K and V `repeat`ed to the k groups (copies SDPA keeps), SDPA's
    output, and the expert-sorted copy of it that output_linear keeps when it trains. MoE: the gate/up `cat`
    (silu's input and the product's factor), silu's output and the product (output_linear's input, kept when
    the experts train). The router (nn.Linear) keeps its input when it trains, the fp32 top-k softmax and the
    int64 indices. In layer 0 under LoRA (only kv_proj is targetable) nothing before kv_proj needs a gradient, so
    the query experts' outputs and the output experts' outputs are not kept there. Traced (tools/memtrace/
    moe_trace.py jetmoe, a balanced router: tools/memtrace/routing.py) per layer, 16-bit elements, full:
    rows·(9·kv·d + 7h + 4I) + the norms' and the router's."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e, h = c.tokens, 2 if c.autocast else c.e, arch.hidden_size
    moe = arch.moe
    rows, kvp, ie = t * moe.experts_per_token, arch.kv_dim, moe.expert_intermediate
    c2 = _later(c)

    def router(key: str, x: str) -> None:
        if c.train_base:
            linear(ss, c, x, c.res, Linear(f"{key}.router", h, moe.num_experts), None)
            ss.save(f"{key}.gathered", e * rows * h)
        ss.save(f"{key}.routing", 4 * rows + 24 * rows + e * rows)   # softmax, top-k / sorted / batch index, gates

    y = rmsnorm(ss, c, "ln1", "resid", h)
    router("moa", y)
    query_grad = c.train_base or not c.first_layer
    if query_grad:
        ss.save("moa.q_out", e * rows * kvp)                    # input_linear's cat, index_add's source
    linear(ss, c, y, c.res, lins["kv_proj"], ads.get("kv_proj"))
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", arch.q_dim, arch.q_dim)
    if c.train_base:
        ss.save(f"{out}.sorted", e * rows * kvp)                # `layer_input[index_sorted_experts]`
    if query_grad:
        ss.save("moa.o_out", e * rows * h)                      # output_linear's cat, for the gates' gradient
    ss.save("moa.weighted", e * rows * h)
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    router("moe", y2)
    ss.save("moe.gate_up", e * rows * 2 * ie)
    ss.save("moe.act", e * rows * ie)
    if c.train_base:
        ss.save("moe.prod", e * rows * ie)
    ss.save("moe.expert_out", e * rows * h)
    ss.save("moe.weighted", e * rows * h)
    return ss.total


def balanced_real_rows(t: int, k: int, experts: int, zero: int) -> int:
    """Routed slots that reach a real expert when the t·k slots go round-robin over the E + Z experts
    (tools/memtrace/routing.py, the balanced router): expert j gets ceil((t·k - j) / (E + Z))."""
    r, n = t * k, experts + zero
    return r // n * experts + min(r % n, experts)


def longcat_moe(ss: SavedSet, c: Ctx, arch: ModelArch) -> None:
    """LongcatFlashMoE, the shortcut MoE reading post_attention_layernorm[0]'s output: LongcatFlashTopkRouter's
    F.linear(x.type(float32), classifier.weight.type(float32)) keeps the fp32 copy of its input (the weight's
    gradient) and the fp32 copy of its 16-bit weight (the input's), the fp32 softmax and the int64 top-k;
    LongcatFlashExperts' loop per routed slot: the gathered row (the real experts' F.linear input when they train,
    the identity experts' factor of the routing weight always), its fp32 routing weight, the int64 where() indices
    and the 16-bit copy index_add_ keeps as its source; per slot of a real expert its gate_up output, SiLU's, the
    product (down's input, when the experts train) and down's output (the weight's factor)."""
    moe, t, h = arch.moe, c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    k, n = moe.experts_per_token, moe.num_experts + moe.zero_experts
    rows = t * k
    real = balanced_real_rows(t, k, moe.num_experts, moe.zero_experts)
    ie = moe.expert_intermediate
    if c.autocast:
        # under autocast the router's F.linear reads autocast's 16-bit copies of its fp32 input and weight
        if c.train_base:
            ss.save("router.in16", 2 * t * h)
        ss.save("router.weight16", 2 * n * h)
    else:
        if c.train_base:
            ss.save("router.fp32_in", 4 * t * h)
        ss.save("router.fp32_weight", 4 * n * h if c.e != 4 else 0)
    ss.save("router.softmax", 4 * t * n + 8 * rows)
    trained = c.train_base
    if c.autocast and c.res == 4:
        # over fp32 weights each real expert's F.linear keeps autocast's 16-bit copies of its weight slices
        # (`self.gate_up_proj[expert_idx]` is no leaf: autocast's weight cache passes it by) and of its rows; the
        # identity experts' rows stay fp32 (traced: longcat-flash-2l-full-mixed-s512)
        ss.save("moe.weight16", 2 * min(moe.num_experts, real) * 3 * ie * h)
        ss.save("moe.gathered", 2 * real * h + 4 * (rows - real) * h)
    else:
        ss.save("moe.gathered", e * (rows if trained else rows - real) * h)
    ss.save("moe.index_add_source", c.res * rows * h)           # the weighted rows in the stream's dtype
    ss.save("moe.routing", (2 if c.autocast else 4) * rows + 16 * rows)
    ss.save("moe.gate_up", e * real * 2 * ie)
    ss.save("moe.act", e * real * ie)
    if trained:
        ss.save("moe.prod", e * real * ie)
    ss.save("moe.expert_out", e * real * h)


def longcat_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_longcat_flash.py LongcatFlashDecoderLayer: two sublayers of input_layernorm, LongcatFlashMLA
    (DeepSeek-V3's MLA with scalar LoRA scalings, which keep nothing: memory/blocks.py llama_block's MLA path),
    post_attention_layernorm and a SwiGLU MLP (the Llama block, twice), and the shortcut MoE beside the first
    MLP (`longcat_moe`). Traced: tools/memtrace/moe_trace.py longcat_flash (tests/data/longcat_flash_trace.json,
    tests/test_longcat_blocks.py)."""
    view = replace(arch, moe=None)
    ss = SavedSet()
    longcat_moe(ss, _later(c), arch)
    return sum(llama_block(view, c if j == 0 else _later(c), *_sublayer(linears, adapters, j)) for j in (0, 1)) \
        + ss.total


def _sublayer(linears: tuple[Linear, ...], adapters: tuple[Adapter, ...], j: int) -> tuple[tuple, tuple]:
    """Sublayer j's linears and adapters under their leaf names ("self_attn.1.q_a_proj" -> "q_a_proj")."""
    mine = (f"self_attn.{j}.", f"mlps.{j}.")
    lins = tuple(replace(lin, name=lin.name.rsplit(".", 1)[-1]) for lin in linears
                 if lin.count == 1 and lin.name.startswith(mine))
    ads = tuple(replace(ad, name=ad.name.rsplit(".", 1)[-1]) for ad in adapters if ad.name.startswith(mine))
    return lins, ads


def longcat_consumed(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...]) -> int:
    """What the top layer's backward has consumed when the experts' weight-gradient moment comes (memory/
    expert_backward.py expert_grad_temp): the second sublayer and the first MLP (they run after the shortcut MoE in
    forward), the identity experts' slots (the loop's last experts, visited first) and the first two real experts'
    slots (the moment is at the second one's gate_up select_backward). Traced: longcat-flash-2l-full-s512, 109.4 MB
    of activations at the peak of 155.9 MB saved (the final norm's and lm_head's 4.2 MB aside)."""
    moe, t, h = arch.moe, c.tokens, arch.hidden_size
    e, ie = 2 if c.autocast else c.e, moe.expert_intermediate
    view, (sub, _) = replace(arch, moe=None), _sublayer(linears, (), 1)
    mlp = next(lin for lin in sub if lin.name == "down_proj").d_in
    k, n = moe.experts_per_token, moe.num_experts + moe.zero_experts
    real = balanced_real_rows(t, k, moe.num_experts, moe.zero_experts)
    per_expert = -(-t * k // n)
    return (llama_block(view, _later(c), sub, ()) + 4 * e * t * mlp + e * t * h
            + (t * k - real) * (2 * e * h + 20) + 2 * per_expert * (3 * e * h + 4 * e * ie + 20))


def beam_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_beam.py BeamDecoderLayer. BeamRMSNorm is `(self.weight * hidden_states).to(input_dtype)`: the fp32
    upcast, rsqrt and the fp32 normalised tensor (memory/blocks.py rmsnorm with the fp32 product), for the four block
    norms and the per-head q_norm / k_norm over the projections' 16-bit outputs. BeamAttention: q/k/v and the output
    gate read input_layernorm's output; FA2 keeps the rotated (or, in the NoPE full layers, scaled: `(q.float() *
    attention_scaling).to(dtype)`) q and k, v, the output and the logsumexp; `sigmoid(gate + gate_bias)` keeps its
    output, o_proj the gated product. BeamMLP: `(act_fn(gate.float()) * up.float()).to(dtype)` keeps both fp32 copies
    and SiLU's fp32 output, down_proj the 16-bit product; the experts (grouped_mm, t·k rows) the same per routed row
    beside the gathered input and the product (when they train), the down output and the fp32 routing weights, and
    the int64 permutation indices; BeamTopKRouter's F.linear(x.float(), w.float()) the fp32 copy of its input (the
    fp32 weight's gradient), the fp32 sigmoid, top-k, the weights' sum and their normalised copy. The residual's
    depth scalings are python floats. Traced: tools/memtrace/moe_trace.py beam (tests/data/beam_trace.json)."""
    return _beam_layer(arch, c, linears, adapters, False)


def beam_recompute_moment(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """A checkpointed Beam layer's recompute peaks at the end of its MLP's forward, before post_feedforward_layernorm:
    beside what the layer has saved so far, a dense MLP's locals (gate_proj's and up_proj's 16-bit outputs, the fp32
    product and its 16-bit copy being made), an MoE's fp32 weighted expert outputs and their fp32 un-permuted copy
    (2 · 4·t·k·h) and the residual, 16-bit; and the layer output's gradient as the next layer's input norm gave it,
    fp32 (its upcast's backward: 4·t·h; the 16-bit copy is memory/activations.py's layer_backward_temp). Traced:
    beam-3l-lora-attn-s512-ckpt (layer 0's MLP, at a _to_copy) and beam-3l-full-s512-ckpt (a sparse layer's experts,
    at an index): both with the (1, 512, 1024) fp32 gradient among the temporaries."""
    return _beam_layer(arch, c, linears, adapters, True) + 4 * c.tokens * arch.hidden_size


def _beam_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...],
                moment: bool) -> int:
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h, t = arch.hidden_size, c.tokens
    e16 = 2 if c.autocast else c.e
    c2 = _later(c)
    y = rmsnorm(ss, c, "ln1", "resid", h, True)
    for name in ("q_proj", "k_proj", "v_proj", "self_attn.gate_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
    rmsnorm(ss, c2, "q_norm", "q", q_dim, True, arch.num_heads, e16)
    rmsnorm(ss, c2, "k_norm", "k", kv_dim, True, arch.num_kv_heads, e16)
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", q_dim, kv_dim)
    ss.save("attn.gate_sigmoid", e16 * t * q_dim)
    linear(ss, c2, f"{out}.gated", e16, lins["o_proj"], ads.get("o_proj"))
    rmsnorm(ss, c2, "post_attn_norm", "o_out", h, True, x_bytes=e16)
    y2 = rmsnorm(ss, c2, "pre_ff_norm", "resid2", h, True)
    if experts:
        moe = arch.moe
        k, n_e, ie, em = moe.experts_per_token, moe.num_experts, moe.expert_intermediate, c.res
        rows = t * k
        if c.train_base:
            ss.save("router.fp32_in", 4 * t * h)
        ss.save("router", 4 * t * n_e + 8 * t * k + 4 * t + 4 * t * k)
        if c.train_base or any(name.startswith("experts.") for name in ads):
            ss.save("moe.gathered", em * rows * h)
            ss.save("moe.prod", em * rows * ie)
        ss.save("moe.act", 3 * 4 * rows * ie)                   # gate.float(), up.float(), SiLU's fp32 output
        ss.save("moe.expert_out", em * rows * h)
        ss.save("moe.routing", 4 * rows + 24 * rows + 4 * n_e)
        if moment:
            return ss.total + 2 * 4 * rows * h + e16 * t * h
    else:
        for name in ("gate_proj", "up_proj"):
            linear(ss, c2, y2, c.res, lins[name], ads.get(name))
        inter = lins["down_proj"].d_in
        ss.save("mlp.fp32", 3 * 4 * t * inter)                 # gate.float(), up.float(), SiLU's fp32 output
        if moment:
            return ss.total + 2 * e16 * t * inter + 4 * t * inter + e16 * t * inter
        linear(ss, c2, "mlp.prod", e16, lins["down_proj"], ads.get("down_proj"))
    rmsnorm(ss, c2, "post_ff_norm", "mlp_out", h, True, x_bytes=e16)
    return ss.total


MOE_RULES = {"llama4_text": llama4_block, "llama4": llama4_block,   # llama4: the composite's text model
             "dbrx": dbrx_block, "jetmoe": jetmoe_block, "longcat_flash": longcat_block, "beam": beam_block,
             **{t: hyper_block for t in HYPER},          # memory/blocks_hyper.py: DeepSeek-V4
             **{t: mistral_large4_block for t in ("mistral_large4", "mistral_large4_text")},
             **{t: minimax_m3_block for t in MINIMAX_M3},
             # not MoE: rules that need blocks_families' helpers cannot register there (memory/blocks_modernbert.py,
             # memory/blocks_moshi.py beside them)
             "modernbert-decoder": modernbert_block, "moshi": moshi_block, **MORE_RULES}
RULES = {**FAMILY_RULES, **MOE_RULES}


def layer_saved_bytes(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One block's saved bytes: this module's rule for the model_type, else memory/blocks_families.py's
    layer_saved_bytes (which the trainers running their own model code always get)."""
    rule = None if c.own_model else MOE_RULES.get(arch.model_type)
    return rule(arch, c, linears, adapters) if rule else family_saved_bytes(arch, c, linears, adapters)
