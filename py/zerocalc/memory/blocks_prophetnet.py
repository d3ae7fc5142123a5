"""Saved tensors of ProphetNet's decoder as ProphetNetForCausalLM trains it (transformers 5.24 modeling_prophetnet.py):
ProphetNetDecoder.forward concatenates the main stream (word + position embeddings, b x s) and `ngram` predicting
streams (ngram_embeddings[i] + the next position's embedding) into (b, (1 + ngram)·s, h), so every layer runs
T = (1 + ngram)·b·s tokens. ProphetNetDecoderLayer is post-LN: ProphetNetNgramSelfAttention -> dropout ->
self_attn_layer_norm(x + attn), the cross-attention skipped (no encoder states: registered, never run, no
gradient: memory/blocks_bart.py never_run), ProphetNetFeedForward (intermediate -> GELU -> dropout(activation_dropout)
-> output -> dropout) -> feed_forward_layer_norm(x + ffn). lm_head runs over the ngram predicting streams only
(memory/logits.py: ngram·b·s rows). Traced: tools/memtrace/prophetnet_trace.py (fixtures
tools/memtrace/golden/prophetnet/, tests/test_prophetnet_blocks.py); eager only (the model's own einsum attention).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear
from .lora import Adapter


def layernorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> tuple[str, int]:
    """nn.LayerNorm (memory/blocks_families.py layernorm's rule, which this module cannot import: blocks_more.py
    sits below it): its input (fp32 under autocast) and mean / rstd when anything before it or its weight needs a
    gradient. Returns the output's key and bytes per element."""
    if not (c.first_layer and not c.train_base):
        ss.save(x if not c.autocast or c.res == 4 else f"{key}.in_fp32", (4 if c.autocast else c.res) * c.tokens * d)
        ss.save(f"{key}.stats", 8 * c.tokens)
    return f"{key}.out", 4 if c.autocast else c.res


def _streams(arch: ModelArch) -> int:
    return 1 + arch.prophetnet["ngram"]


def ngram_attention(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, xb: int, lins: dict, ads: dict) -> str:
    """ProphetNetNgramSelfAttention.forward over the T tokens of c (c.tokens = T): query/key/value over the layer
    input; `_shape(...).contiguous()` copies of q, k, v (e·T·h each: the einsums keep their chunks); the predicting
    streams' torch.stack of their queries (ngram·t rows) and of [main keys; own keys] (2·ngram·t), the values' cat
    made contiguous for the einsum (2·ngram·t); relative_pos_embeddings (h -> buckets·heads) over a contiguous copy
    of each stream, its output reshaped (a copy, e·T·a·buckets) and gathered by int64 bucket ids that `.long()` makes
    per layer: (b·a·s, s) for the main stream, (ngram·b·a·s, 2s) for the predicting ones; softmax(dtype=float32)
    over the main (b, a, s, s) and predicting (b, ngram, a, s, 2s) scores, `.type_as` to the scores' dtype and the
    attention dropout (its mask and output, or the 16-bit probabilities without dropout); out_proj over each
    stream's contiguous output; the output dropout's mask."""
    pn, h, a = arch.prophetnet, arch.hidden_size, arch.num_heads
    e = 2 if c.autocast else c.e
    T = c.tokens
    t = T // _streams(arch)
    n = pn["ngram"]
    for name in ("query_proj", "key_proj", "value_proj"):
        linear(ss, c, x, xb, lins[name], ads.get(name))
    c2 = replace(c, first_layer=False)
    # what needs a gradient (LoRA's layer 0: only what an adapter makes): each einsum keeps the factor the other
    # factor's gradient reads
    g_in = c.train_base or not c.first_layer
    gq, gk, gv = (g_in or name in ads for name in ("query_proj", "key_proj", "value_proj"))
    if gk:
        ss.save("attn.q", e * T * h)
        ss.save("predict.q", e * n * t * h)
    if gq:
        ss.save("attn.k", e * T * h)
        ss.save("predict.k", e * 2 * n * t * h)
    s, b = c.seq, c.batch
    scores = b * a * s * s * (1 + 2 * n)                 # main s x s, each predicting stream s x 2s
    if gq or gk:
        ss.save("attn.v", e * T * h)
        ss.save("predict.v", e * 2 * n * t * h)
        ss.save("softmax", 4 * scores)
        if pn["attn_dropout"] > 0:
            ss.save("attn_drop.mask", MASK * scores)
    if gv:
        ss.save("probs", e * scores)
    if g_in:
        linear(ss, c2, "relpos.in", xb, Linear("relative_pos_embeddings", h, pn["buckets"] * a), None)
        ss.save("relpos.out", e * T * a * pn["buckets"])
        ss.save("relpos.index", 8 * scores)
    linear(ss, c2, "attn.out", e, lins["out_proj"], ads.get("out_proj"))
    if arch.dropout > 0:
        ss.save("attn_out.drop_mask", MASK * T * h)
    return "attn.resid"


def prophetnet_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One ProphetNetDecoderLayer over (1 + ngram)·b·s tokens (module docstring). The layer input is the previous
    feed_forward_layer_norm's output (layer 0: the embeddings' dropout output), fp32 under autocast."""
    lins, ads = {x.name: x for x in linears}, {x.name: x for x in adapters}
    pn, h = arch.prophetnet, arch.hidden_size
    e = 2 if c.autocast else c.e
    C = replace(c, tokens=c.tokens * _streams(arch))
    C2 = replace(C, first_layer=False)
    ss = SavedSet()
    ngram_attention(ss, C, arch, "resid", 4 if c.autocast else c.res, lins, ads)
    y, yb = layernorm(ss, C2, "ln_sa", "resid_sa", h)
    inter, out = lins["intermediate"], lins["output"]
    linear(ss, C2, y, yb, inter, ads.get("intermediate"))
    ss.save("gelu.in", e * C.tokens * inter.d_out)
    act = "gelu.out"
    if pn["act_dropout"] > 0:
        ss.save("act_drop.mask", MASK * C.tokens * inter.d_out)
        act = "act_drop.out"
    linear(ss, C2, act, e, out, ads.get("output"))
    if arch.dropout > 0:
        ss.save("ffn.drop_mask", MASK * C.tokens * h)
    layernorm(ss, C2, "ln_ff", "resid_ff", h)           # its output: the next layer's input (saved there)
    return ss.total


def prophetnet_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int, input_grads: bool = False) -> tuple[str, int]:
    """Around the layers: embeddings_layer_norm's input (the streams' torch.cat; fp32 under autocast) and the
    embedding dropout's mask when the embeddings train (or `input_grads`: PEFT under checkpointing makes the word
    embeddings' output a leaf that requires grad, enable_input_require_grads, itself kept), the int64 position ids
    (clamp, + 1) and _compute_loss's expanded targets (ngram x b x s), and lm_head's input, a contiguous copy of the
    ngram predicting streams (`outputs[1].view(b, ngram, s, -1)`), saved here at its ngram·b·s rows. Returns its
    key and bytes per element."""
    n, h = arch.prophetnet["ngram"], arch.hidden_size
    C = replace(c, tokens=c.tokens * _streams(arch), first_layer=False)
    if input_grads and not c.train_base:
        ss.save("emb_leaf", c.res * c.tokens * h)
    if c.train_base or input_grads:
        layernorm(ss, C, "ln_emb", "emb_cat", h)
        if arch.dropout > 0:
            ss.save("emb.drop_mask", MASK * C.tokens * h)
    ss.save("position_ids", 2 * 8 * c.tokens)
    ss.save("expend_targets", 8 * n * c.tokens)
    yb = 4 if c.autocast else c.res
    return "head.in", yb


def prophetnet_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple[Linear, ...],
                      adapters: tuple[Adapter, ...], lm_head_adapter: Adapter | None, input_grads: bool) -> tuple:
    """(layers, extra, ckpt_extra, head) of memory/blocks_seq2seq.py EncDec. Under full checkpointing each layer
    keeps its input, (1 + ngram)·b·s tokens (fp32 under autocast: a LayerNorm's output), where activations.py counts
    b·s in the residual dtype (the difference is here), and ProphetNetDecoder.forward's tensors every checkpointed
    layer takes: the main stream's causal mask (s, s) and the predicting streams' (ngram, s, 2s) in the model's
    dtype, and the int32 relative-position buckets (b, s, s) and (b, s, 2s) (compute_buffered_relative_buckets)."""
    n_streams, h, t, s, b = _streams(arch), arch.hidden_size, c.tokens, c.seq, c.batch
    layers = tuple(prophetnet_layer(arch, c_first if i == 0 else c, linears, adapters) for i in range(arch.num_layers))
    xb = 4 if c.autocast else c.res
    ckpt = arch.num_layers * (xb * n_streams - c.res) * t * h
    ckpt += c.res * s * s * (1 + 2 * arch.prophetnet["ngram"]) + 4 * b * s * s * 3
    head = SavedSet()
    head.save("ids_labels", 16 * t)
    y, yb = prophetnet_head(head, c, arch, s, input_grads)
    cn = replace(c, tokens=t * arch.prophetnet["ngram"])
    linear(head, cn, y, yb, Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    return layers, 0, ckpt, head.total
