"""Decoder layers that attend to image tokens only: Mllama's cross-attention layers (``ModelArch.image_cross_layers``,
model/vision_mllama.py).

transformers 5.24 modeling_mllama.py MllamaTextModel.forward::

    if is_cross_attention_layer and cross_attention_states is None and is_cross_attention_cache_empty:
        continue

A step fed no images (``vision.tokens_per_sample`` and ``vision.images_per_sample`` 0) never runs those layers:
they save nothing, full checkpointing keeps no input for them, autocast casts none of their weights, and their
parameters get no gradient, so no optimizer state (torch AdamW skips a parameter whose .grad is None). Traced:
tools/memtrace/families.py mllama rows (tools/memtrace/golden/families/mllama-*). A step fed image tokens
(``vision.tokens_per_sample`` = images x max_num_tiles x patches: the projected vision states beside the text, not
inside ``seq_len``) runs them: ``cross_layer``, traced in the mllamaimg rows.

Not traced (CPU SDPA takes the mask as it is): on CUDA the memory-efficient kernel wants the mask's last dimension
aligned to 16 and pads a copy per call where it is not (the released checkpoints' 4 x 1025 = 4100 vision tokens an
image are not), which would make the mask a per-layer tensor; counted here once, as traced.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from ..plan import Plan
from .blocks import Ctx, SavedSet, gated_mlp, linear, rmsnorm
from .ernie_vl import text_only_idle
from .lora import Adapter
from .ssm_hybrids import block_saved_bytes as ssm_saved_bytes  # blocks.py's, with the state-space mixers


def images_fed(plan: Plan) -> bool:
    return plan.vision.tokens_per_sample > 0 or plan.vision.images_per_sample > 0


def skipped_layers(arch: ModelArch, plan: Plan) -> frozenset:
    """The decoder layers a text-only step skips (modeling_mllama.py MllamaTextModel.forward's `continue`)."""
    if not arch.image_cross_layers or images_fed(plan):
        return frozenset()
    return frozenset(arch.image_cross_layers)


def idle_tensors(arch: ModelArch, plan: Plan) -> list:
    """The skipped layers' parameters: no gradient, no optimizer state, no autocast copy."""
    skip = skipped_layers(arch, plan)
    # ERNIE-4.5-VL's vision experts, which a text-only step never reaches (memory/ernie_vl.py)
    return ([t for t in arch.tensors if t.layer in skip] if skip else []) + text_only_idle(arch, images_fed(plan))


def cross_layers_run(arch: ModelArch, plan: Plan) -> frozenset:
    """The cross-attention layers a step fed image tokens runs over them."""
    return frozenset(arch.image_cross_layers) if arch.image_cross_layers and images_fed(plan) else frozenset()


def cross_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...],
                n_vis: int) -> SavedSet:
    """One MllamaCrossAttentionDecoderLayer over n_vis vision states per sample (modeling_mllama.py), the vision
    states frozen (no gradient): input_layernorm; q_proj and q_norm (MllamaTextRMSNorm per head, as Qwen3's);
    k_proj / v_proj read the vision states (key ``cross_states``: one tensor for every cross layer), k_norm over
    the vision tokens; SDPA with the 4-D cross_attention_mask, so repeat_kv copies K and V to every query head
    (integrations/sdpa_attention.py use_gqa_in_sdpa: only without a mask) and the memory-efficient kernel keeps
    q, the repeated K / V, its output and fp32 logsumexp (and the mask: ``cross_mask``); eager: the fp32 (b, a, s,
    n_vis) softmax and its 16-bit copy; o_proj; ``cross_attn_attn_gate.tanh() * out`` keeps out for the gate's
    gradient; post_attention_layernorm; the gated MLP; ``full_text_row_masked_out_mask[:, 0] * mlp_out`` keeps
    the row mask (``row_mask``), and the MLP gate keeps the masked output (the mask's dtype: the model's). The
    layer is never layer 0 (cross_attention_layers start at 3)."""
    ss = SavedSet()
    h, a, q_dim, kv_dim = arch.hidden_size, arch.num_heads, arch.q_dim, arch.kv_dim
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    ads = {ad.name: ad for ad in adapters}
    e = 2 if c.autocast else c.e
    y = rmsnorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, c.res, lins["q_proj"], ads.get("q_proj"))
    rmsnorm(ss, c, "q_norm", "q", q_dim, groups=a, x_bytes=e)
    # the vision states need no gradient, as layer 0's input under LoRA: the adapters' dropout keeps no mask
    cv = replace(c, tokens=c.batch * n_vis, seq=n_vis, first_layer=True)
    for name in ("k_proj", "v_proj"):
        linear(ss, cv, "cross_states", e, lins[name], ads.get(name))
    if c.train_base or "k_proj" in ads:
        # k_norm's input needs a gradient only through k_proj
        rmsnorm(ss, replace(cv, first_layer=False), "k_norm", "k", kv_dim, groups=arch.num_kv_heads, x_bytes=e)
    rep = q_dim if arch.num_kv_heads != a else kv_dim
    ss.save("attn.q", e * c.tokens * q_dim)
    ss.save("attn.k_rep", e * cv.tokens * rep)
    ss.save("attn.v_rep", e * cv.tokens * rep)
    out = cross_scores(ss, c, a, q_dim, n_vis, "cross_mask", c.res)
    linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
    if c.train_base:
        ss.save("attn.o_out", e * c.tokens * h)
    y2 = rmsnorm(ss, c, "ln2", "resid2", h)
    gated_mlp(ss, c, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    ss.save("row_mask", c.res * c.tokens)
    if c.train_base:
        ss.save("mlp.masked", max(c.res, e) * c.tokens * h)
    return ss


def cross_scores(ss: SavedSet, c: Ctx, a: int, q_dim: int, n_vis: int, mask: str, mask_bytes: int) -> str:
    """The attention over n_vis vision states a sample: eager keeps the fp32 (b, a, s, n_vis) softmax and its
    16-bit copy; SDPA's memory-efficient kernel its output, the fp32 logsumexp and the 4-D mask (key ``mask``, in
    mask_bytes). Returns the o_proj input's key."""
    e = 2 if c.autocast else c.e
    if c.attention == "eager":
        scores = a * c.tokens * n_vis
        ss.save("attn.softmax", 4 * scores)                 # softmax(dtype=float32)
        if e != 4:
            ss.save("attn.probs", e * scores)               # .to(query.dtype)
        return "attn.ctx"
    ss.save("attn.out", e * c.tokens * q_dim)
    ss.save("attn.lse", 4 * a * c.tokens)
    ss.save(mask, mask_bytes * c.tokens * n_vis)
    return "attn.out"


SHARED = ("cross_states", "cross_mask", "row_mask")


def cross_layer_bytes(ss: SavedSet) -> int:
    """A cross layer's own saved bytes: without the tensors every cross layer shares (``SHARED``)."""
    return sum(v for k, v in ss.items.items() if k not in SHARED)


def cross_shared_bytes(ss: SavedSet, c: Ctx, n_vis: int, h: int, checkpointed: bool) -> int:
    """The vision states, the 4-D cross_attention_mask and the row mask, once for all cross layers: what a layer
    saves of them, or, under full checkpointing, all three (the checkpointed layers' inputs)."""
    if not checkpointed:
        return sum(v for k, v in ss.items.items() if k in SHARED)
    e = 2 if c.autocast else c.e
    return e * c.batch * n_vis * h + c.res * c.tokens * (n_vis + 1)


def frozen_layers(arch: ModelArch) -> frozenset:
    """The decoder layers whose own block (``ModelArch.config_frozen``) the modelling code froze."""
    if not arch.config_frozen:
        return frozenset()
    names = set(arch.config_frozen)
    return frozenset(t.layer for t in arch.tensors if t.name in names and t.layer is not None)


def skipped_adapter_params(per_layer_adapters, skipped: frozenset) -> int:
    """The adapters of the layers a step skips (skipped_layers): never run, so never cast or trained."""
    return sum(a.numel for i in skipped for a in per_layer_adapters[i])


# --- IDEFICS (v1): a gated cross-attention layer before every cross_layer_interval-th decoder layer -------------

GATED = "gated_cross_attn."


def gated_layers_run(arch: ModelArch, plan: Plan) -> frozenset:
    """The decoder layers an IDEFICS gated cross-attention layer runs before, in a step fed the vision states."""
    return frozenset(arch.gated_cross_layers) if arch.gated_cross_layers and images_fed(plan) else frozenset()


def idefics_rmsnorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, input_grad: bool) -> str:
    """modeling_idefics.py IdeficsRMSNorm: ``variance = x.to(float32).pow(2).mean(-1)``, ``x * rsqrt(variance +
    eps)`` on the input itself (so the input, in the residual dtype, is kept beside the fp32 copy pow keeps and the
    fp32 rsqrt), then ``weight * hidden_states.to(weight.dtype)`` keeps the normalised tensor for the weight
    gradient. Without a gradient to its input (the first layer's input: IDEFICS' frozen embed_tokens, or LoRA) only
    that normalised tensor, and only when the weight trains. Traced (golden/families/idefics-*)."""
    if input_grad:
        ss.save(f"{key}.fp32" if c.res != 4 else x, 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens)
        ss.save(x, c.res * c.tokens * d)
    if c.train_base:
        ss.save(f"{key}.normed", c.res * c.tokens * d)
    return f"{key}.out"


def qk_layer_norm(ss: SavedSet, c: Ctx, key: str, n: int, d: int, groups: int, input_grad: bool) -> None:
    """IdeficsAttention's q_layer_norm / k_layer_norm (qk_layer_norms: IdeficsRMSNorm over head_dim) on the (b, a,
    n, head_dim) projection, n tokens of width d: with a gradient to its input, the fp32 copy, the rsqrt per head
    and the 16-bit projection itself; the normalised tensor for a trained weight: a 16-bit copy (``.to(weight
    .dtype)``) under a 16-bit weight, the fp32 copy itself under an fp32 one. Its output is SDPA's q / k."""
    e = 2 if c.autocast else c.e
    if input_grad:
        ss.save(f"{key}.fp32", 4 * n * d)
        ss.save(f"{key}.rsqrt", 4 * n * groups)
        ss.save(f"{key}.in", e * n * d)
    if c.train_base and c.res != 4:
        ss.save(f"{key}.normed", c.res * n * d)
    elif c.train_base:
        ss.save(f"{key}.fp32", 4 * n * d)


def gated_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...],
                n_vis: int, input_grad: bool, qk_norms: bool = False) -> SavedSet:
    """One IdeficsGatedCrossAttentionLayer (modeling_idefics.py) over n_vis vision states a sample (the frozen
    tower's output, no gradient; key ``gated_states``, one tensor for every gated layer, in the vision width):
    input_layernorm (IdeficsRMSNorm); IdeficsAttention(is_cross_attention=True): q_proj over the text, k_proj /
    v_proj over the vision states, no rotary, heads x head_dim as wide as q (no GQA); SDPA with the 4-D
    image_attention_mask (``gated_mask``, made once in IdeficsModel.forward in the states' dtype) keeps q, k, v,
    its output and the fp32 logsumexp; eager: the fp32 (b, a, s, n_vis) softmax and its 16-bit copy; o_proj;
    ``masked_fill((cross_attention_gate == 0)[:, :, None], 0.0)`` keeps its bool mask (one a layer: the ``== 0``
    runs in each layer); ``act_cross_attn(alpha_cross_attn) * out`` keeps the masked output for alpha's gradient;
    post_attention_layernorm; the Llama MLP; ``act_dense(alpha_dense) * mlp_out`` keeps the MLP output;
    ``qk_norms`` (idefics-80b's qk_layer_norms): q_layer_norm / k_layer_norm, ``qk_layer_norm``. alpha
    trains under full fine-tuning only (the tanh outputs, 1 or h elements, are left out). Traced:
    tools/memtrace/families.py idefics rows."""
    ss = SavedSet()
    h, a = arch.hidden_size, arch.num_heads
    lins = {lin.name[len(GATED):]: lin for lin in linears if lin.name.startswith(GATED)}
    ads = {ad.name[len(GATED):]: ad for ad in adapters if ad.name.startswith(GATED)}
    e = 2 if c.autocast else c.e
    cf = replace(c, first_layer=not input_grad)
    y = idefics_rmsnorm(ss, cf, "ln1", "resid", h, input_grad)
    linear(ss, cf, y, c.res, lins["q_proj"], ads.get("q_proj"))
    cv = replace(c, tokens=c.batch * n_vis, seq=n_vis, first_layer=True)
    for name in ("k_proj", "v_proj"):
        linear(ss, cv, "gated_states", e, lins[name], ads.get(name))
    q_dim = lins["q_proj"].d_out
    if qk_norms:
        qk_layer_norm(ss, c, "q_norm", c.tokens, q_dim, a, True)
        qk_layer_norm(ss, c, "k_norm", cv.tokens, q_dim, a, c.train_base or "k_proj" in ads)
    ss.save("attn.q", e * c.tokens * q_dim)
    ss.save("attn.k", e * cv.tokens * q_dim)
    ss.save("attn.v", e * cv.tokens * q_dim)
    out = cross_scores(ss, c, a, q_dim, n_vis, "gated_mask", e)
    linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
    ss.save("gate_mask", c.tokens)                          # (cross_attention_gate == 0): bool (b, s)
    if c.train_base:
        ss.save("attn.masked", e * c.tokens * h)
    y2 = idefics_rmsnorm(ss, c, "ln2", "resid2", h, True)
    gated_mlp(ss, c, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    if c.train_base:
        ss.save("mlp.out", e * c.tokens * h)
    return ss


GATED_SHARED = ("gated_states", "gated_mask")


def gated_layer_bytes(ss: SavedSet) -> int:
    return sum(v for k, v in ss.items.items() if k not in GATED_SHARED)


def gated_saved(arch: ModelArch, plan: Plan, c: Ctx, per_layer_linears, per_layer_adapters
                ) -> tuple[dict[int, int], SavedSet | None]:
    """The gated layers a step fed images runs: each one's saved bytes besides the shared tensors (keyed by the
    decoder layer it runs before), and the last one's SavedSet (the shared ``GATED_SHARED`` tensors; None: none
    runs). Layer 0's gated layer keeps its input's tensors only where that input takes a gradient (full
    fine-tuning with the embedding not frozen)."""
    gated, ss, out = gated_layers_run(arch, plan), None, {}
    qk = bool(gated) and any(t.name.endswith(".cross_attn.q_layer_norm.weight") for t in arch.tensors)
    for i in sorted(gated):
        input_grad = i != 0 or (plan.method == "full" and "model.embed_tokens.weight" not in arch.config_frozen)
        ss = gated_layer(arch, c, per_layer_linears[i], per_layer_adapters[i], plan.vision.tokens_per_sample,
                         input_grad, qk)
        out[i] = gated_layer_bytes(ss)
    return out, ss


def gated_shared(plan: Plan, ss: SavedSet, n_gated: int, layer_input: int, e: int) -> int:
    """What every gated layer shares (GATED_SHARED, once). Under full checkpointing the gated layers are
    checkpointed too (GradientCheckpointingLayer): each keeps its input (``layer_input`` bytes); the checkpoints'
    arguments outlive the forward: the vision states, the 4-D image_attention_mask and cross_attention_gate (b, s)
    in the states' dtype ``e``, and (SDPA) the bool causal mask, b·s² bytes (traced; eager's float mask is not)."""
    if plan.activation_checkpointing != "full":
        return sum(v for k, v in ss.items.items() if k in GATED_SHARED)
    t = plan.micro_batch_size * plan.seq_len
    return (n_gated * layer_input + ss.items.get("gated_states", 0) + e * t * (plan.vision.tokens_per_sample + 1)
            + (plan.micro_batch_size * plan.seq_len ** 2 if plan.attention != "eager" else 0))


def gated_shared_bytes(c: Ctx, n_vis: int, vd: int) -> int:
    """The vision states (b, n_vis, vd) and the 4-D image_attention_mask (b, 1, s, n_vis), both in the states'
    dtype, once for all gated layers (under SDPA the mask is saved; under eager only the states)."""
    e = 2 if c.autocast else c.e
    return e * c.batch * n_vis * vd + (e * c.tokens * n_vis if c.attention != "eager" else 0)


def idefics_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_idefics.py IdeficsDecoderLayer: the Llama block, and what its modelling code keeps beside it.
    IdeficsRMSNorm computes ``hidden_states * torch.rsqrt(variance + eps)`` on its input itself, so both norms keep
    their input in the residual dtype where that is 16-bit (in fp32 it is the tensor pow keeps: counted); each
    IdeficsAttention runs its own IdeficsRotaryEmbedding, whose cos and sin (1, s, head_dim) are a layer's own;
    under SDPA each attention keeps a (b, 1, s, s) mask in the compute dtype (traced: CPU SDPA with the mask
    create_causal_mask gives IDEFICS, which has no FlashAttention-2 path: _supports_flash_attn False).
    Traced: tools/memtrace/families.py idefics rows (golden/families/idefics-*)."""
    total = ssm_saved_bytes(arch, c, linears, adapters)
    e = 2 if c.autocast else c.e
    if c.res != 4 and not (c.first_layer and not c.train_base):
        total += 2 * c.res * c.tokens * arch.hidden_size
    total += 2 * e * c.seq * arch.head_dim
    if c.attention != "eager":
        total += e * c.batch * c.seq * c.seq
    return total
