"""Saved tensors of XLNet (transformers 5.24 modeling_xlnet.py XLNetLMHeadModel), read off fake-tensor traces of the
real step (tools/memtrace/own_attention_trace.py xlnet, tests/data/xlnet_trace.json, held within 3 % by
tests/test_xlnet_blocks.py).

A training step feeds input_ids and labels only: no target_mapping, so XLNetModel.forward runs one stream
(output_g None: the query stream of the two-stream attention is never built), attn_type "bi" with no perm_mask,
input_mask or token types gives no attention mask and no segment term. Per XLNetLayer:
- XLNetRelativeAttention.forward's single-stream branch: q / k / v heads `einsum("ibh,hnd->ibnd", h, W)` over the
  layer input, the positional keys `einsum(r.type(self.r.dtype), self.r)` over XLNetModel's pos_emb of 2·s
  positions (relative_positional_encoding, after the model's dropout: fp32, built once for every layer); the
  weights are torch.FloatTensor parameters, fp32 whatever dtype the model is built in (so no bf16-pure step runs:
  the first einsum meets bf16 hidden states), and PEFT cannot wrap them.
  rel_attn_core: `einsum(q + r_w_bias, k)` keeps q + r_w_bias (for k's gradient) and k, `einsum(q + r_r_bias,
  k_r)` keeps k_r and, where r trains, q + r_r_bias; rel_shift_bnij's index_select keeps its int64 arange; the
  (b, n, s, s) softmax and attention dropout (mask and output), the einsum with v keeps v; post_attention's
  `einsum(attn_vec, self.o)` keeps attn_vec's contiguous copy where o trains and o's permuted copy, then dropout's
  mask and the LayerNorm of `attn_out + h`.
  Under autocast every einsum reads 16-bit copies: of the layer input, once per projection where the weights
  train; of q / k / v / o (kept for the input's gradient: the parameters are fp32 leaves; under LoRA frozen, cast
  again by every call); of pos_emb in every layer where r trains; of q + bias (the fp32 sum of a 16-bit head and
  an fp32 bias); the softmax and the dropout run in fp32 (mask and a 16-bit copy of the output kept: 7 bytes per
  score, as memory/blocks.py attention_core's BERT-era eager rule).
- XLNetFeedForward: layer_1 -> gelu (keeps its input) -> dropout -> layer_2 -> dropout -> LayerNorm(output + inp).
- Outside the layers (xlnet_head): the word embedding's dropout mask, pos_emb (fp32, kept once by every layer's
  k_r einsum where r trains, without autocast), the final dropout before lm_loss (its mask and output).
Nothing requires a gradient before layer 0's feed-forward under LoRA (its only targets: layer_1 / layer_2), so the
first layer's attention keeps nothing there.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear
from .lora import Adapter


def layernorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> None:
    """nn.LayerNorm: its input (fp32 under autocast: the residual sum) and mean/rstd (memory/blocks_families.py
    layernorm's rule; that module imports this one's registry, memory/blocks_more.py)."""
    if not (c.first_layer and not c.train_base):
        ss.save(x, (4 if c.autocast else c.res) * c.tokens * d)
        ss.save(f"{key}.stats", 8 * c.tokens)


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch) -> None:
    """XLNetRelativeAttention over one stream (module docstring); nothing when nothing before it needs a gradient."""
    tb, ig = c.train_base, not c.first_layer or c.train_base
    if not ig:
        return
    t, h, nd, s, b = c.tokens, arch.hidden_size, arch.q_dim, c.seq, c.batch
    e = 2 if c.autocast else c.e
    if tb:
        # the layer input for the q / k / v weights' gradients (autocast: one 16-bit copy per einsum)
        ss.save("xl.h16" if c.autocast else "resid", (3 * 2 if c.autocast else c.res) * t * h)
        if c.autocast:
            ss.save("xl.pos16", 2 * 2 * s * b * h)               # pos_emb's copy for r's gradient
    if c.autocast:
        ss.save("xl.w16", 2 * 4 * h * nd)                        # q, k, v, o: 16-bit copies of fp32 parameters
    else:
        ss.save("xl.o_perm", c.e * h * nd)                       # o permuted for attn_vec's gradient
    ss.save("xl.kv", 2 * e * t * nd)                             # k (for q's gradient), v (for the probabilities')
    ss.save("xl.k_r", e * 2 * s * b * nd)                        # k_r (for q's gradient)
    ss.save("xl.q_w", e * t * nd)                                # q + r_w_bias (for k's gradient)
    if tb:
        ss.save("xl.q_r", e * t * nd)                            # q + r_r_bias (for r's gradient)
        ss.save("xl.attn_vec", e * t * nd)                       # attn_vec's copy (for o's gradient)
    scores = b * arch.num_heads * s * s
    if arch.dropout > 0:
        ss.save("xl.scores", (7 if c.autocast else 2 * c.e + MASK) * scores)
    else:
        ss.save("xl.scores", (6 if c.autocast else c.e) * scores)
    ss.save("xl.rel_shift_index", 8 * s)
    if arch.dropout > 0:
        ss.save("xl.attn_out_drop", MASK * t * h)
    layernorm(ss, c, "xl.ln1", "xl.sum1", h)


def xlnet_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One XLNetLayer (module docstring)."""
    ss = SavedSet()
    ads = {ad.name: ad for ad in adapters}
    lins = {lin.name: lin for lin in linears}
    _attention(ss, c, arch)
    t, h = c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    x_b = 4 if c.autocast else c.res                             # rel_attn.layer_norm's output
    up, down = lins["layer_1"], lins["layer_2"]
    linear(ss, c, "xl.ln1.out", x_b, up, ads.get("layer_1"))
    c2 = replace(c, first_layer=False) if ads.get("layer_1") else c
    ss.save("xl.gelu.in", e * t * up.d_out)                      # F.gelu keeps its input
    if arch.dropout > 0:
        ss.save("xl.ff_drop1", MASK * t * up.d_out)
    linear(ss, c2, "xl.ff_drop1.out", e, down, ads.get("layer_2"))
    if arch.dropout > 0:
        ss.save("xl.ff_drop2", MASK * t * h)
    layernorm(ss, c2, "xl.ln2", "xl.sum2", h)
    return ss.total


def xlnet_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (module docstring): returns lm_loss's input (the final dropout's output) and its bytes."""
    t, h = c.tokens, arch.hidden_size
    ss.save("ids_labels", 16 * t)
    if arch.dropout > 0:
        if c.train_base:
            ss.save("xl.emb_drop", MASK * t * h)
        ss.save("xl.final_drop", MASK * t * h)
    if c.train_base and not c.autocast:
        ss.save("xl.pos_emb", 4 * 2 * seq * c.batch * h)          # fp32, one tensor every layer's k_r einsum keeps
    return "xl.final_drop.out", 4 if c.autocast else c.res
