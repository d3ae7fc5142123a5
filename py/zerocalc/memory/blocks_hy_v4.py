"""Saved tensors of HY-V4's decoder layer (transformers 5.24 modeling_hy_v4.py HYV4DecoderLayer, also HY-V4-VL's
language model: modeling_hy_v4_vl.py HYV4VLDecoderLayer, the same code): hyper-connected residual streams without
Sinkhorn around an output-gated MLA with a sink per head, then a dense SwiGLU MLP or clamped routed experts with a
shared expert.

With t tokens (b sequences of s), hidden h, N = hc_mult streams, a heads (query head dq = nope + R rope dims, value
head dv), q / kv latent ranks qr / kr, e the 16-bit compute dtype, the ops and what each keeps for backward (traced
on fake tensors: tools/memtrace/hy_v4_trace.py, tests/data/hy_v4_trace.json, held by tests/test_hy_v4_blocks.py):

- HYV4HyperConnection (attn_hc, ffn_hc; fp32 parameters, autocast off): `hidden_streams.flatten(2).float()` is an
  fp32 copy of the (b, s, N·h) stream (the stream itself when fp32), kept by the unweighted norm's square and, when
  fn trains, by F.linear; its rsqrt; F.linear's 2N outputs per token (kept by `mixes = ... * rsqrt`), the product
  (kept by `pre_logits * pre_scale` when the scale trains), the two sigmoids, pre and post (`+ hc_eps`) in fp32;
  `pre.unsqueeze(-1) * hidden_streams` keeps the stream (in its own dtype);
- the residual mix `(post.float() * out.float() + residual.float()).to(dtype)`: post and the fp32 copy of the
  sublayer's output (the output itself when fp32); the new stream is the next hyper connection's input;
- HYV4RMSNorm (Llama's: `weight * x.to(input_dtype)`): memory/blocks.py rmsnorm; input_layernorm and
  post_attention_layernorm over the collapsed stream (`out.to(hidden_streams.dtype)`), q_a_layernorm and
  kv_a_layernorm over the projections' outputs;
- HYV4Attention: gate_proj, q_a_proj and kv_a_proj_with_mqa read input_layernorm's output, q_b_proj q_a_layernorm's,
  kv_b_proj kv_a_layernorm's; `torch.cat((q_pass, q_rot))` a new query (t·a·dq), expand_kv a new key (new_empty +
  copy_, t·a·dq) and the value a view of kv_b_proj's output (t·a·(nope + dv)); the RoPE cos / sin are the model's
  (kept once, outside the layers); the indexer is @torch.no_grad (memory/indexers.py): it keeps nothing;
- eager_attention_forward, the only kernel (HYV4PreTrainedModel: no SDPA, no FA2): `torch.cat([scores, sinks])` with
  the fp32 sinks makes the (b, a, s, s + 1) logits fp32; `max(dim=-1)` keeps its int64 indices, the fp32 softmax its
  output, `probs[..., :-1].to(value.dtype)` is a new (b, a, s, s) tensor kept by the matmul with the value;
- the output gate: `attn_output * sigmoid(gate_states)` keeps the transposed output's contiguous copy and the
  sigmoid (t·a·dv each); o_proj reads the product;
- HYV4MLP (dense layers, shared_experts): memory/blocks.py gated_mlp (gate and up outputs, SiLU, the product);
- HYV4TopkRouter: F.linear over `hidden_states.type(float32)` (that copy kept when the fp32 router weight trains),
  the fp32 sigmoid scores, int64 top-k indices, the gathered weights' clone and their denominator (norm_topk_prob);
  under autocast F.linear keeps its 16-bit copies of the input and the weight, and the scores are 16-bit;
- HYV4Experts under grouped_mm (t·k routed rows; `_apply_gate`): the gathered input and the product (when the
  experts train), the gate_up output, both clamps, SiLU, the down output (all in the experts' weight dtype), the
  gathered routing weights (the scores' dtype), the int64 permutation indices (24 bytes per row) and the int32
  offsets (E).

Outside the layers (`hy_v4_outside`): the embedding expanded to N streams (layer 0's input), HYV4HyperHead (the fp32
copy of the last stream and its rsqrt, F.linear's N outputs, the product, the sigmoid, pre), model.norm over its
output, the rotary cos / sin, and lm_head's fp32 input (`hidden_states.to(lm_head.weight.dtype)`: the head is kept
fp32, _keep_in_fp32_modules_strict, so its logits are fp32 under a 16-bit plan: FP32_HEAD, memory/inputs.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, gated_mlp, linear, rmsnorm
from .lora import Adapter

MODEL_TYPES = ("hy_v4", "hy_v4_vl")
# lm_head kept fp32 whatever the model dtype (HYV4ForCausalLM / HYV4VLForConditionalGeneration
# _keep_in_fp32_modules_strict = ["lm_head"]): memory/inputs.py counts its weight and logits in fp32
FP32_HEAD = MODEL_TYPES


def _e16(c: Ctx) -> int:
    return 2 if c.autocast else c.e


def hyper_connection(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, stream: str) -> None:
    """One HYV4HyperConnection over the (t, N·h) stream `stream` in the residual dtype (the module docstring)."""
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    if c.first_layer and not c.train_base:
        return                                   # the embedding's streams need no gradient under LoRA
    ss.save(stream, c.res * t * n * h)
    if c.res != 4:
        ss.save(f"{key}.fp32", 4 * t * n * h)
    ss.save(f"{key}.rsqrt", 4 * t)
    # F.linear's 2N outputs, the two sigmoids, pre; the product `mixes` when the scale trains
    ss.save(f"{key}.mix", 4 * t * (2 * n + 2 * n + n) + (4 * t * 2 * n if c.train_base else 0))


def _mix(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, stream_grad: bool) -> None:
    """The residual mix after a sublayer: post (for the output's gradient) and, when post needs a gradient (not over
    the embedding's streams under LoRA), the fp32 copy of the sublayer's output."""
    ss.save(f"{key}.post", 4 * c.tokens * arch.hyper["hc_mult"])
    if stream_grad:
        ss.save(f"{key}.out32", 4 * c.tokens * arch.hidden_size)


def hy_v4_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One HYV4DecoderLayer (the module docstring's op list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    hy, h, t, e = arch.hyper, arch.hidden_size, c.tokens, _e16(c)
    a, nope, rope, dv = arch.num_heads, hy["qk_nope"], hy["rope"], hy["v_head"]
    dq = nope + rope
    c2 = replace(c, first_layer=False) if c.first_layer else c
    hyper_connection(ss, c, arch, "attn_hc", "stream_in")
    y = rmsnorm(ss, c, "ln1", "collapsed", h)
    for name in ("self_attn.gate_proj", "q_a_proj", "kv_a_proj_with_mqa"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    qa = rmsnorm(ss, c2 if "q_a_proj" in ads else c, "q_a_norm", "q_a", hy["q_lora_rank"], x_bytes=e)
    linear(ss, c, qa, e, lins["q_b_proj"], ads.get("q_b_proj"))
    kva = rmsnorm(ss, c2 if "kv_a_proj_with_mqa" in ads else c, "kv_a_norm", "kv_a", hy["kv_lora_rank"], x_bytes=e)
    linear(ss, c, kva, e, lins["kv_b_proj"], ads.get("kv_b_proj"))
    # eager: the new query and key, the value (kv_b_proj's output), the max's indices, the fp32 softmax over s + 1
    # (the sink), its 16-bit copy without the sink column
    scores = c.batch * a * c.seq * c.seq
    ss.save("attn.q", e * t * a * dq)
    ss.save("attn.k", e * t * a * dq)
    ss.save("attn.v", e * t * a * (nope + dv))
    ss.save("attn.max", 8 * t * a)
    ss.save("attn.softmax", 4 * (scores + t * a))
    ss.save("attn.probs", e * scores)
    # the output gate: the sigmoid and, when the gate needs a gradient (not in layer 0 under LoRA, unless adapted),
    # the contiguous output; o_proj reads the product
    if c.train_base or not c.first_layer or "self_attn.gate_proj" in ads:
        ss.save("attn.out", e * t * a * dv)
    ss.save("gate.sigmoid", e * t * a * dv)
    linear(ss, c2, "attn.gated", e, lins["o_proj"], ads.get("o_proj"))
    _mix(ss, c2, arch, "attn_mix", c.train_base or not c.first_layer)
    hyper_connection(ss, c2, arch, "ffn_hc", "stream_mid")
    y2 = rmsnorm(ss, c2, "ln2", "collapsed2", h)
    if "gate_up_proj" not in experts:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    else:
        _experts(ss, c2, arch, y2, lins, ads)
    _mix(ss, c2, arch, "ffn_mix", True)
    return ss.total


def _experts(ss: SavedSet, c: Ctx, arch: ModelArch, y2: str, lins: dict, ads: dict) -> None:
    """HYV4MoE: the fp32 router, the grouped_mm experts and the shared expert (the module docstring)."""
    moe, t, h, e = arch.moe, c.tokens, arch.hidden_size, _e16(c)
    k, n_e, ie = moe.experts_per_token, moe.num_experts, moe.expert_intermediate
    rows = t * k
    # under autocast F.linear runs in 16 bits: it keeps its own 16-bit copies of the input and of the fp32 weight,
    # and the sigmoid scores and gathered weights are 16-bit
    r = 2 if c.autocast else 4
    if c.train_base:
        ss.save("router.x", r * t * h + (2 * n_e * h if c.autocast else 0))
    ss.save("router", r * t * n_e + 8 * t * k + r * t * k + 4 * t)
    em = c.res                                   # grouped_mm runs in the experts' weight dtype
    if c.train_base or any(name.startswith("experts.") for name in ads):
        ss.save("moe.gathered", em * rows * h)
        ss.save("moe.prod", em * rows * ie)
    ss.save("moe.gate_up", em * rows * 2 * ie)
    ss.save("moe.act", 3 * em * rows * ie)       # both clamps, SiLU
    ss.save("moe.expert_out", em * rows * h)
    ss.save("moe.routing", r * rows + 24 * rows + 4 * n_e)
    shared = {name.rpartition(".")[2]: lin for name, lin in lins.items() if name.startswith("shared_experts.")}
    shared_ads = {name.rpartition(".")[2]: ad for name, ad in ads.items() if name.startswith("shared_experts.")}
    gated_mlp(ss, c, "shared", y2, c.res, shared, shared_ads, shared["down_proj"].d_in)


def hy_v4_outside(ss: SavedSet, c: Ctx, arch: ModelArch) -> str:
    """After the layers: HYV4HyperHead over the last stream and model.norm (Llama's) over its output, the rotary
    cos / sin and, when lm_head trains, its fp32 input (the module docstring). Returns the final norm's output key."""
    n, t, h = arch.hyper["hc_mult"], c.tokens, arch.hidden_size
    ss.save("hc_head.stream", c.res * t * n * h)
    if c.res != 4:
        ss.save("hc_head.fp32", 4 * t * n * h)
    ss.save("hc_head.rsqrt", 4 * t)
    ss.save("hc_head.mix", 4 * t * n * (4 if c.train_base else 3))
    # (1, s, R) cos and sin; HY-V4-VL's 3-D rope expands the position ids over the batch: (b, s, R)
    ss.save("rope", 2 * _e16(c) * (c.tokens if arch.model_type == "hy_v4_vl" else c.seq) * arch.hyper["rope"])
    if c.train_base and c.res != 4:
        ss.save("lm_head.x32", (4 - c.res) * t * h)   # beside the norm's output the head counts in the residual dtype
    if c.autocast and c.res == 2 and not c.train_base:
        # adapters under autocast on a 16-bit base: the fp32 head's matmul keeps autocast's 16-bit copy of its weight
        # for its input's gradient (a full bf16-mixed plan's copies are memory/activations.py's, every linear's)
        ss.save("lm_head.w16", 2 * arch.vocab_size * h)
    return rmsnorm(ss, c, "final_norm", "hc_head.out", h)


def fp32_head_numel(arch: ModelArch, framework: str, base_bytes: int) -> int:
    """memory/inputs.py: the trained parameters kept fp32 on a 16-bit base (_keep_in_fp32_modules_strict: lm_head, the
    hyper connections' fn / base / scale, the hyper head's, the routers' gate.weight, the sinks; the indexer's
    weights_proj and k_norm take no gradient, memory/indexers.py), counted as that many more elements in the base
    dtype: their second two bytes, in the weight, the gradient and each optimizer state. Not under DeepSpeed, whose
    engine casts the whole module to 16 bits."""
    if arch.model_type not in FP32_HEAD or framework == "deepspeed" or base_bytes != 2:
        return 0
    kept = (".attn_hc.", ".ffn_hc.", ".hc_head.", ".mlp.gate.", ".self_attn.sinks")
    return sum(t.numel for t in arch.tensors if t.name == "lm_head.weight" or any(k in f".{t.name}" for k in kept))



def hy_v4_moment(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """memory/blocks_hyper.py hc_backward_moment's place (DeepSeek-V4's ffn_hc norm backward beside the attention
    half): not modelled, 0. HY-V4's unweighted norm returns only the rsqrt (`x * ...` is not applied, the product
    is the mix's), and no traced row peaks in a hyper connection's backward (tests/test_hy_v4_blocks.py)."""
    return 0


def hy_v4_mix_temps(arch: ModelArch, c: Ctx) -> int:
    """The first op of a layer's backward, the FFN residual mix `(post.float() * out.float() + residual.float())
    .to(dtype)`, beside the layer's whole saved set (memory/blocks_hyper.py mix_backward_temps' place): the incoming
    (t, N, h) stream gradient in the stream's dtype, its fp32 upcast (none over an fp32 stream) and the two fp32
    products of the mul's backward (post's, before its sum over h, and the output's, before its sum over N).
    Traced: the peak of tools/memtrace/hy_v4_trace.py hy-v4-3l-lora-attn-s512-ckpt (a backward mul in the
    recomputed layer, 28 MiB of temporaries: 4 MiB bf16 and three 8 MiB fp32)."""
    n = c.tokens * arch.hyper["hc_mult"] * arch.hidden_size
    return c.res * n + (4 * n if c.res != 4 else 0) + 2 * 4 * n


def hy_v4_checkpointed(arch: ModelArch, batch: int, seq: int, res: int) -> int:
    """Under full activation checkpointing, what the non-reentrant checkpoint keeps of each layer's inputs beyond its
    stream (memory/blocks_mistral_large4.py checkpointed_topk's place): the (b, 1, s, s) causal mask in the model
    dtype (HYV4Model.forward: create_causal_mask(allow_is_causal_skip=False), one tensor passed to every layer),
    and the int32 (b, s, min(index_topk, s)) top-k indices `prev_topk_indices`, a new tensor from each ``full``
    layer but the last, which every following layer is called with (a ``shared`` layer passes its input on).
    Traced: tools/memtrace/hy_v4_trace.py hy-v4-3l-full-mixed-s512-ckpt (the fp32 mask, 1 MiB, and layer 0's
    indices alive at the forward's peak). memory/activations.py's eager term already books the mask in 2 bytes
    (its additive 16-bit mask for families outside the Llama lineage), so only what the residual dtype adds beyond
    those is counted here (the mask counted twice was +0.5 MiB at s 512: tools/memtrace/moe_trace.py
    hy-v4-3l-full-s512-ckpt, where the step peaks at the loss's backward with the whole stack alive)."""
    full = arch.hyper["indexer_full"][:-1]
    return (res - 2) * batch * seq * seq + sum(full) * 4 * batch * seq * min(arch.hyper["index_topk"], seq)


def last_hidden_local(arch: ModelArch, full_fp32_amp: bool, t: int) -> int:
    """At the end of forward (the loss's forward, the `fwd` phase), bf16-mixed full fine-tuning over fp32 weights:
    HYV4ForCausalLM.forward's `hidden_states = outputs.last_hidden_state`, the fp32 (b, s, h) output of the hyper
    head, is a local (and held by `outputs`) until the forward returns; the fp32 lm_head under autocast keeps only its
    16-bit copy. Traced: hy-v4-3l-full-mixed-s512-ckpt peaks at nll_loss_forward with it alive (2 MiB;
    tools/memtrace/hy_v4_trace.py): activations -4.4 % before, -2.3 % with it (autocast's cached copies of the
    no-grad indexer's and the routers' fp32 weights, 0.55 MiB, and 1.6 MiB not identified remain)."""
    return 4 * t * arch.hidden_size if arch.model_type in MODEL_TYPES and full_fp32_amp else 0
