"""Saved tensors of the two long-input encoders memory/blocks_seq2seq.py counts beside BART's layer: LED's Longformer
sliding-window self-attention and PEGASUS-X's block-local + global-token encoder layer (transformers 5.24
modeling_led.py, modeling_pegasus_x.py; traced on fake tensors as AutoModelForSeq2SeqLM: tools/memtrace/seq2seq.py,
fixtures tools/memtrace/golden/seq2seq/led-*, pegx-*, held within 3 % by tests/test_seq2seq_grid.py).

Neither runs through the attention interface: each is its own matmuls, so the plan's flash / eager does not change
them. The traced batch has no global_attention_mask (LED's global attention, `is_global_attn`, is off: every token
attends its window only, as run_summarization trains LED); PEGASUS-X's global tokens are its `embed_global` rows,
always on.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import ModelArch
from .blocks import MASK, Ctx, SavedSet, linear
from .blocks_bart import bart_mlp
from .blocks_families import layernorm


def probs(ss: SavedSet, c: Ctx, key: str, n: int, p_drop: float) -> None:
    """A softmax without a dtype over n scores, then dropout(attention_dropout), read by a matmul: the output in
    the scores' dtype (fp32 under autocast, with the matmul's 16-bit copy), the dropout's bool mask and output."""
    e = 2 if c.autocast else c.e
    ss.save(f"{key}.softmax", (4 if c.autocast else e) * n)
    if p_drop > 0:
        ss.save(f"{key}.drop_mask", MASK * n)
        if not c.autocast:
            ss.save(f"{key}.drop", e * n)
    if c.autocast:
        ss.save(f"{key}.probs16", 2 * n)


def longformer(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, x_bytes: int, lins: dict, ads: dict,
               window: int) -> str:
    """modeling_led.py LEDEncoderSelfAttention.forward without global attention, w = window // 2 (one side),
    s padded to a multiple of the window (LEDEncoder._pad_to_window_size):
    - `hidden_states.transpose(0, 1)` feeds query / key / value: each linear copies its non-contiguous input;
    - _sliding_chunks_query_key_matmul: `_chunk` views q and k as s/w − 1 overlapping chunks of 2w, and the
      einsum keeps contiguous copies of both, 2·e·b·(s − w)·h bytes each;
    - softmax(dtype=float32) over (b, s, a, 2w + 1), and _mask_invalid_locations' two bool (b, w, a, w + 1) masks;
    - _sliding_chunks_matmul_attn_probs_value: the padded, diagonalised probabilities (b·a, s/w, w, 3w + 2) and
      the value's s/w chunks of 3w, copied by the einsum: e·b·a·s·(3w + 2) and 3·e·b·s·h;
    - the output, made contiguous, is self_attn.output's input (returned)."""
    e = 2 if c.autocast else c.e
    h, a, b, w = arch.hidden_size, arch.num_heads, c.batch, window // 2
    s = -(-c.seq // window) * window
    for name in ("q_proj", "k_proj", "v_proj"):         # LED's query / key / value
        linear(ss, c, f"{x}.T.{name}", x_bytes, lins[name], ads.get(name))
    ss.save("lf.q_chunks", 2 * e * b * (s - w) * h)
    ss.save("lf.k_chunks", 2 * e * b * (s - w) * h)
    ss.save("lf.softmax", 4 * b * s * a * (2 * w + 1))
    ss.save("lf.masks", 2 * MASK * b * w * a * (w + 1))
    ss.save("lf.probs_chunks", e * b * a * s * (3 * w + 2))
    ss.save("lf.v_chunks", 3 * e * b * s * h)
    return "lf.out"


def global_local_layer(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict, stagger: bool,
                       last: bool) -> None:
    """modeling_pegasus_x.py PegasusXEncoderLayer (pre-LN) with PegasusXGlobalLocalAttention, blocks of B =
    block_size, G = num_global_tokens per sequence (tg = G·b tokens):
    - tokens: self_attn_layer_norm; a staggered layer pads B/2 each side (pad_local_tokens: F.pad copies the norm
      output, q/k/v read the copy, sp = s + B); `_shape(...).contiguous()` copies q (scaled), k, v;
    - global tokens: global_self_attn_layer_norm, the same q/k/v projections and copies over tg tokens;
    - the global queries attend `cat([global_k, local_k])` and `cat([global_v, local_v])` (b, a, G + sp, d), softmax
      over (b, a, G, G + sp); the local queries attend their block and the global keys: softmax over
      (b, a, sp/B, B, G + B) (blocked k / v are views);
    - out_proj reads a contiguous copy of each output; the feed-forward runs over tokens and global tokens.
    The last layer's global tokens are not read after it (PegasusXEncoder returns the tokens): the global queries'
    attention and the global feed-forward are freed with their outputs (traced: the fixtures' forward end holds
    neither their q copy, cats and softmax nor their out_proj input, norm and feed-forward; the global k and v
    copies stay, read by the local queries)."""
    sw = arch.bart
    e = 2 if c.autocast else c.e
    h, a, b, big, g = arch.hidden_size, arch.num_heads, c.batch, sw["block"], sw["globals"]
    s = -(-c.seq // big) * big
    sp = s + big if stagger else s
    c2 = replace(c, first_layer=False)
    ct, cg, cg2 = replace(c, tokens=sp * b), replace(c, tokens=g * b), replace(c2, tokens=g * b)
    y, yb = layernorm(ss, c, "ln_sa", "resid", h)
    x = f"{y}.pad" if stagger else y
    yg, ygb = layernorm(ss, cg, "ln_g", "gresid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, ct, x, yb, lins[name], ads.get(name))
        linear(ss, cg, yg, ygb, lins[name], ads.get(name))
    for name in ("q", "k", "v"):
        ss.save(f"la.{name}", e * sp * b * h)
        if name != "q" or not last:
            ss.save(f"ga.{name}", e * g * b * h)        # the local queries read the global k and v
    if not last:
        ss.save("ga.kcat", e * b * (g + sp) * h)
        ss.save("ga.vcat", e * b * (g + sp) * h)
        probs(ss, c2, "ga", a * b * g * (g + sp), sw["attn_dropout"])
    probs(ss, c2, "la", a * b * sp * (big + g), sw["attn_dropout"])
    linear(ss, replace(c2, tokens=sp * b), "la.out", e, lins["out_proj"], ads.get("out_proj"))
    _tail(ss, c2, sw, "", lins, ads)
    if not last:
        linear(ss, cg2, "ga.out", e, lins["out_proj"], ads.get("out_proj"))
        _tail(ss, cg2, sw, "g", lins, ads)


def _tail(ss: SavedSet, c: Ctx, sw: dict, key: str, lins: dict, ads: dict) -> None:
    """After the attention: dropout, `residual + x`, final_layer_norm, the feed-forward, dropout."""
    h = lins["fc2"].d_out
    if sw["dropout"] > 0:
        ss.save(f"{key}attn_drop", MASK * c.tokens * h)
    y, yb = layernorm(ss, c, f"{key}ln_ff", f"{key}resid_attn", h)
    bart_mlp(ss, c, sw, y, yb, lins, ads, key)
    if sw["dropout"] > 0:
        ss.save(f"{key}mlp_drop", MASK * c.tokens * h)
