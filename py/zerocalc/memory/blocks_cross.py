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
    if c.attention == "eager":
        scores = a * c.tokens * n_vis
        ss.save("attn.softmax", 4 * scores)                 # softmax(dtype=float32)
        if e != 4:
            ss.save("attn.probs", e * scores)               # .to(query.dtype)
    else:
        ss.save("attn.out", e * c.tokens * q_dim)
        ss.save("attn.lse", 4 * a * c.tokens)
        ss.save("cross_mask", c.res * c.tokens * n_vis)
    out = "attn.out" if c.attention != "eager" else "attn.ctx"
    linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
    if c.train_base:
        ss.save("attn.o_out", e * c.tokens * h)
    y2 = rmsnorm(ss, c, "ln2", "resid2", h)
    gated_mlp(ss, c, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    ss.save("row_mask", c.res * c.tokens)
    if c.train_base:
        ss.save("mlp.masked", max(c.res, e) * c.tokens * h)
    return ss


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
