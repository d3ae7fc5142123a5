"""Saved tensors of Kosmos-2's and Kosmos-2.5's text decoders (transformers 5.24 modeling_kosmos2.py
Kosmos2TextBlock / Kosmos2TextTransformer, modeling_kosmos2_5.py Kosmos2_5TextBlock / Kosmos2_5TextTransformer) and
what the step keeps around them; read off fake-tensor traces of the real step (tools/memtrace/kosmos_trace.py,
fixtures in tools/memtrace/golden/kosmos/, held within 3 % by tests/test_kosmos_blocks.py).

A layer (kosmos_layer), pre-LayerNorm: self_attn_layer_norm (nn.LayerNorm: its input, fp32 under autocast, and
mean / rstd), q / k / v_proj, the attention, Kosmos-2's inner_attn_ln over the attention output before out_proj
(its input: the contiguous attention output, a fp32 copy under autocast), out_proj, dropout (mask), the residual,
final_layer_norm, Kosmos2TextFFN: fc1 -> GELU (its input) -> dropout(activation_dropout) -> ffn_layernorm over
ffn_dim (GELU's output, fp32 under autocast) -> fc2 -> dropout (mask). Eager attention (eager_attention_forward:
`matmul(query, key.transpose(-1, -2)) * scaling`, softmax without a dtype, dropout(attention_dropout),
`matmul(attn_weights, value)`) keeps q, K^T and V (contiguous copies), the softmax (fp32 under autocast, where it
is on autocast's fp32 list), the dropout's mask and output (a 16-bit copy under autocast); Kosmos-2.5's scales the
query before (`self.scaling * query_states`), the same tensors. SDPA / FlashAttention-2: memory/blocks.py
attention_core's q, k, v, output and logsumexp. Kosmos-2 has no FlashAttention-2 (_supports_flash_attn False);
its SDPA row is traced with the FA2 profile (a GPU's memory-efficient kernel also keeps the (s, s) attn_bias, one
tensor for all layers).

Around the layers (kosmos_stacks): the batch's pixel_values (Kosmos-2: its forward requires them; the weights'
dtype) and image_embeds_position_mask ((b, s) int64), alive the whole step; forward_embedding's
`inputs_embeds[mask.bool()] = image_embeds` keeps the bool mask where the embedding trains; two dropouts over
the embeddings (forward_embedding's and Kosmos2TextTransformer.forward's: two masks) where anything before them
needs a gradient (and, PEFT under checkpointing, embed_tokens' output itself: enable_input_require_grads makes it a
leaf the graph holds); Kosmos-2.5's segment_emb over a (b, 1) index (fed text only); the final layer_norm and lm_head's
input. Kosmos-2.5 fed images (vision.images_per_sample, which kosmos_stacks cannot see: memory/vision.py
tower_saved_bytes asks kosmos25_images, below, through model/kosmos.py's tower spec) adds its batch, index_put's
and segment_emb's (b, s) indices and, under checkpointing, the hooked frozen tower's graph. The frozen tower and projection (vision.trainable's default) keep nothing: Kosmos-2's main_input_name is
pixel_values, so even checkpointing hooks no embedding. With checkpointing each layer keeps its input and the causal mask every checkpointed layer holds as an input:
Kosmos-2's (s, s) additive one (_make_causal_mask, expanded over the batch as a view, in the embeddings' dtype),
Kosmos-2.5's create_causal_mask under eager ((b, 1, s, s), additive in the embeddings' dtype; none under FA2).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from ..plan import Plan
from .blocks import MASK, Ctx, SavedSet, attention_core, linear
from .lora import Adapter
from .precision import dtypes_for

MODEL_TYPES = ("kosmos-2", "kosmos-2.5")
POSITIONS = "vision_model.model.embeddings.position_embedding.weight"
PATCHES = "vision_model.model.embeddings.patch_embedding.weight"


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _norm(ss: SavedSet, c: Ctx, key: str, x: str, x_bytes: int, d: int) -> tuple[str, int]:
    """nn.LayerNorm over d reading `x` (x_bytes an element): its input (under autocast a fp32 copy of a 16-bit one)
    and mean / rstd, where anything before it or its weight needs a gradient. Returns the output's key and bytes."""
    out = 4 if c.autocast else x_bytes
    if c.first_layer and not c.train_base:
        return f"{key}.out", out
    ss.save(x if out == x_bytes else f"{key}.in_fp32", out * c.tokens * d)
    ss.save(f"{key}.stats", 8 * c.tokens)
    return f"{key}.out", out


def _eager(ss: SavedSet, c: Ctx, arch: ModelArch, p_drop: float) -> str:
    """eager_attention_forward (module docstring); returns the output's key."""
    e = 2 if c.autocast else c.e
    t, q = c.tokens, arch.q_dim
    for name in ("q", "kT", "v"):
        ss.save(f"attn.{name}", e * t * q)
    scores = arch.num_heads * c.seq * c.seq * c.batch
    soft = 4 if c.autocast else e
    ss.save("attn.softmax", soft * scores)
    if p_drop > 0:
        ss.save("attn.drop_mask", MASK * scores)
        ss.save("attn.probs", e * scores)
    elif c.autocast:
        ss.save("attn.probs", 2 * scores)                     # the 16-bit copy matmul reads
    return "attn.out"


def kosmos_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One Kosmos2TextBlock / Kosmos2_5TextBlock (module docstring)."""
    ss, k = SavedSet(), arch.kosmos
    ads = {ad.name: ad for ad in adapters}
    lins = {lin.name: lin for lin in linears}
    t, h, f = c.tokens, arch.hidden_size, lins["fc1"].d_out
    e = 2 if c.autocast else c.e
    later = _later(c)
    y, yb = _norm(ss, c, "ln1", "resid", c.res, h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    out = (_eager(ss, later, arch, k["attn_dropout"]) if c.attention == "eager"
           else attention_core(ss, later, arch, "attn", arch.q_dim, arch.q_dim))
    ob = e
    if k["inner_ln"]:
        out, ob = _norm(ss, later, "inner_attn_ln", out, e, h)
    linear(ss, later, out, ob, lins["out_proj"], ads.get("out_proj"))
    if arch.dropout > 0:
        ss.save("resid_drop1", MASK * t * h)
    y, yb = _norm(ss, later, "ln2", "resid_attn", c.res, h)
    linear(ss, later, y, yb, lins["fc1"], ads.get("fc1"))
    ss.save("gelu.in", e * t * f)
    act = "gelu.out"
    if k["act_dropout"] > 0:
        ss.save("act_drop_mask", MASK * t * f)
        act = "act_drop.out"
    y, yb = _norm(ss, later, "ffn_layernorm", act, e, f)
    linear(ss, later, y, yb, lins["fc2"], ads.get("fc2"))
    if arch.dropout > 0:
        ss.save("resid_drop2", MASK * t * h)
    return ss.total


def pixel_numel(arch: ModelArch) -> int:
    """One image's pixel_values elements (Kosmos-2's CLIP tower: channels x patch² x patches), 0 for Kosmos-2.5
    (fed text only)."""
    if arch.model_type != "kosmos-2":
        return 0
    n = next(tt.shape[0] for tt in arch.tensors if tt.name == POSITIONS) - 1
    shape = next(tt.shape for tt in arch.tensors if tt.name == PATCHES)     # (h, c, p, p) or (h, c·p·p)
    per_patch = 1
    for d in shape[1:]:
        per_patch *= d
    return n * per_patch


def kosmos_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple[Adapter, ...],
                  lm_head_adapter: Adapter | None, input_grads: bool):
    """memory/blocks_seq2seq.py EncDec's fields (layers, extra, ckpt_extra, head) for Kosmos-2 / 2.5 (module
    docstring)."""
    lins = arch.block_linears
    layers = tuple(kosmos_layer(arch, c_first if i == 0 else c, lins, adapters) for i in range(arch.num_layers))
    t, h, b = c.tokens, arch.hidden_size, c.batch
    head = SavedSet()
    head.save("ids_labels", 16 * t)
    head.save("pixel_values", c.res * b * pixel_numel(arch))
    if arch.kosmos["image_tokens"]:
        head.save("image_embeds_position_mask", 8 * t)
        if c.train_base:
            head.save("position_mask.bool", t)              # index_put's bool index
    if arch.kosmos["segment"] and c.train_base:
        head.save("segment_ids", 8 * b)                     # segment_emb's (b, 1) index
    if arch.dropout > 0 and (c.train_base or input_grads):
        head.save("embed_drop_masks", 2 * MASK * t * h)
    if input_grads and not c.train_base:
        # PEFT under checkpointing (enable_input_require_grads): embed_tokens' output made a leaf that requires
        # grad, held by its AccumulateGrad node until backward
        head.save("embed_tokens.out", c.res * t * h)
    y, yb = _norm(head, c, "layer_norm", "resid_final", c.res, h)
    linear(head, c, y, yb, Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    # checkpointing: the causal mask, a checkpoint input of every layer (one tensor): Kosmos-2's (s, s) additive one
    # expanded over the batch; Kosmos-2.5's create_causal_mask, under eager a (b, 1, s, s) additive tensor (none
    # for FlashAttention-2 and SDPA's causal kernel)
    ckpt = 0
    if not arch.kosmos["segment"]:
        ckpt = c.res * c.seq * c.seq
    elif c.attention == "eager":
        ckpt = c.res * b * c.seq * c.seq
    return layers, 0, ckpt, head.total


def kosmos25_images(plan: Plan, arch: ModelArch) -> int:
    """Kosmos-2.5 fed images (vision.images_per_sample; the tower and image_to_text_projection frozen, trained ones
    are not modelled: memory/vision.py tower_untraced), beyond what its text-only step keeps (kosmos_stacks: the
    (b, 1) zero segment index there, taken back here). Read off the k25i rows of tools/memtrace/kosmos_trace.py.

    The batch (alive the whole step): flattened_patches, (b, max_num_patches, 2 + patch_embed_hidden_size) in the
    weights' dtype (Kosmos2_5ImageProcessor pads every image to max_patches rows: the config's max_num_patches, the
    row / column embedders' rows, taken as the processor's), and image_embeds_position_mask ((b, s) int64).
    Kosmos2_5TextTransformer.forward: `inputs_embeds.clone()` (keeps nothing) and `inputs_embeds[mask == 1] =
    image_embeds` keep the (b, s) bool index where the embeddings need a gradient (full fine-tuning, or PEFT's
    enable_input_require_grads under checkpointing); `segment_emb(mask.ne(0).long())` keeps its (b, s) int64 index
    where segment_emb trains.

    Under checkpointing the frozen tower has a graph: activation_checkpointing_enable calls
    enable_input_require_grads (main_input_name is input_ids), which hooks Kosmos2_5VisionModel's
    get_input_embeddings, patch_projection. Kept over n = b·patches: the hooked patch_projection output (a leaf),
    each checkpointed Kosmos2_5VisionLayer's input and the (b, 1, P, P) additive mask (one tensor), the final
    Kosmos2_5LayerNorm's input, fp32 upcast (not over a fp32 stream), rsqrt and output (normalize's input),
    normalize's norm and clamp ((b, P, 1) each); the frozen projection's dense / k / v / q / out_proj keep no inputs
    (frozen weights; fp32 ones under autocast keep the 16-bit copies of dense's, k's, v's and out_proj's), its
    x_attn's attention over the L latent queries (they need no gradient) and the P + L key_value_states keeps,
    under FA2 / SDPA, the scaled q, k, v, its output and the fp32 logsumexp; under eager (eager_attention_forward)
    q, V, softmax's fp32 output (its dtype=torch.float32) and the 16-bit copy the second matmul reads."""
    spec, images = arch.tower, plan.vision.images_per_sample * plan.micro_batch_size
    if spec is None or spec["kind"] != "kosmos25" or not images:
        return 0
    dt = dtypes_for(plan)
    res = dt.weight if plan.method == "full" else dt.frozen      # the weights' dtype (the tower's: frozen)
    full, ckpt = plan.method == "full", plan.activation_checkpointing == "full"
    b, t = plan.micro_batch_size, plan.micro_batch_size * plan.seq_len
    p, vh, e, lat = spec["patches"], spec["hidden"], arch.hidden_size, spec["latent"]
    total = res * images * p * (spec["patch_dim"] + 2) + 8 * t
    if full or (ckpt and plan.method != "full"):
        total += t                                   # index_put's bool index
    if full:
        total += 8 * t - 8 * b                       # segment_emb's (b, s) index, not the text-only (b, 1) one
    if not ckpt:
        return total
    n, x = images * p, 2 if dt.autocast else res     # the tower's tokens; its linears' outputs' dtype
    # the hooked patch_projection output (a linear's: x), each layer's input (the stream: res, the row / column
    # embeddings' dtype) and the mask; the final LayerNorm's fp32 upcast (none over a fp32 stream), rsqrt, input and
    # output; normalize's norm and clamp
    total += x * n * vh + spec["layers"] * res * n * vh + res * images * p * p
    total += (4 * n * vh if res != 4 else 0) + 4 * n + 2 * res * n * vh + 2 * res * n
    if dt.autocast and res == 4:
        # fp32 weights under autocast: the 16-bit copies of the frozen dense, k_proj, v_proj and out_proj weights
        # their input gradients read (q_proj's input, the latent queries, needs none)
        total += 2 * (e * vh + 3 * e * e)
    kv = images * (p + lat) * e
    q = x * images * lat * e
    if plan.attention == "eager":
        # the query needs no gradient (q_proj over the frozen latent_query): matmul keeps q, not K^T; softmax's
        # fp32 output (dtype=torch.float32), its 16-bit copy and V
        scores = arch.num_heads * images * lat * (p + lat)
        total += q + x * kv + (4 + x) * scores
        if arch.kosmos["attn_dropout"] > 0:
            total += (MASK + x) * scores
        return total
    # FA2 / SDPA keep q, k, v, the output and the fp32 logsumexp
    return total + 2 * q + 2 * x * kv + 4 * arch.num_heads * images * lat
