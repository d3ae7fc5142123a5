"""Saved tensors of CPM-Ant (transformers 5.24 modeling_cpmant.py CpmAntForCausalLM), read off fake-tensor traces
of the real step (tools/memtrace/own_blocks_trace.py cpmant, tests/data/cpmant_trace.json, held within 3 % by
tests/test_cpmant_blocks.py).

- CpmAntModel.forward prepends prompt_length prompt tokens to every sequence (`torch.cat((arange(...).repeat(b, 1),
  input_ids))`): every layer runs on t' = b·(s + prompt_length) tokens (ModelArch.prompt_tokens), the prompt is
  cut off (`hidden_states[:, prompt_length:]`) only before lm_head.
- CpmAntLayerNorm.forward: `variance = x.to(float32).pow(2).mean(-1)`, `(x * rsqrt(variance + eps)).to(old_dtype)
  * weight`: pow keeps the fp32 copy (x itself where the stream is fp32), the multiply x and the (t', 1) rsqrt,
  the weight's multiply the 16-bit normalised tensor when the weight trains (_norm).
- CpmAntAttention.forward, its own eager code whatever attn_implementation says: project_q / k / v, `matmul(q,
  k^T) / sqrt(dim_head) + position_bias` (the (b, heads, s', s') segment / relative bias in the bias parameter's
  dtype: fp32 under bf16-mixed, so the scores turn fp32), masked_fill with `attention_mask == False` (each of the
  two masked_fills keeps its own (b, 1, s', s') bool mask), softmax (kept), masked_fill again (its output kept by
  the matmul with v; under autocast that matmul's 16-bit copy instead), the contiguous context read by
  attention_out (_attention).
- CpmAntDenseGatedACT / CpmAntFeedForward: `GELU(w_0(x)) * w_1(x)`, then w_out: GELU's input, GELU's output and
  w_1's output for the product, the product for w_out (GELU and the product in 16 bits under autocast).
- Outside the layers (cpmant_head): the segment / position bucket indices (b, s', s') int32 that F.embedding keeps
  for the trained relative_attention_bias, the two int32 (b, s') id tensors of the embeddings, output_layernorm,
  and lm_head's input: the slice of the output_layernorm output (its whole (b, s', h) storage; under autocast the
  16-bit copy of the (b, s, h) slice). CpmAntForCausalLM's loss is CrossEntropyLoss on the 16-bit logits
  (memory/logits.py NO_UPCAST).
dropout_p (0.0 in openbmb/cpm-ant-10b's config) is not modelled (model/classic_more.py marks it approximate).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear
from .lora import Adapter


def _wide(c: Ctx, arch: ModelArch) -> Ctx:
    """The context over the s + prompt_length positions every layer runs."""
    seq = c.seq + arch.prompt_tokens
    return replace(c, tokens=c.batch * seq, seq=seq)


def _cpm_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> tuple[str, int]:
    """CpmAntLayerNorm (module docstring); returns the output's key and bytes per element (the stream's dtype)."""
    if c.first_layer and not c.train_base:
        return key + ".out", c.res                    # nothing before it needs a gradient
    t = c.tokens
    ss.save(x, c.res * t * d)                         # the multiply's x (pow's too where it is fp32)
    if c.res != 4:
        ss.save(key + ".fp32", 4 * t * d)             # pow's fp32 copy
    ss.save(key + ".rsqrt", 4 * t)
    if c.train_base:
        ss.save(key + ".normed", c.res * t * d)       # the weight's multiply keeps the normalised tensor
    return key + ".out", c.res


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch, d: int) -> str:
    """CpmAntAttention's scores (module docstring); returns attention_out's input key."""
    e = 2 if c.autocast else c.e
    scores = arch.num_heads * c.batch * c.seq * c.seq
    sd = 4 if c.autocast else c.e                     # + position_bias: the bias parameter's dtype
    for name in ("q", "k", "v"):
        ss.save(f"attn.{name}", e * c.tokens * d)
    ss.save("attn.masks", 2 * MASK * c.batch * c.seq * c.seq)
    ss.save("attn.softmax", sd * scores)
    ss.save("attn.probs", (2 if c.autocast else sd) * scores)
    return "attn.ctx"                                 # kept by attention_out where it trains (linear)


def cpmant_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One CpmAntTransformerBlock over t' tokens (module docstring)."""
    ss, c = SavedSet(), _wide(c, arch)
    ads = {ad.name: ad for ad in adapters}
    lins = {lin.name: lin for lin in linears}
    t, h, d, ff = c.tokens, arch.hidden_size, arch.num_heads * arch.head_dim, lins["w_0"].d_out
    e = 2 if c.autocast else c.e
    later = replace(c, first_layer=False) if c.first_layer else c
    y, yb = _cpm_norm(ss, c, "ln_attn", "resid", h)
    for name in ("project_q", "project_k", "project_v"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    out = _attention(ss, later, arch, d)
    linear(ss, later, out, e, lins["attention_out"], ads.get("attention_out"))
    y, yb = _cpm_norm(ss, later, "ln_ffn", "resid_attn", h)
    for name in ("w_0", "w_1"):
        linear(ss, later, y, yb, lins[name], ads.get(name))
    for key in ("gelu.in", "gelu.out", "w_1.out"):
        ss.save(key, e * t * ff)
    linear(ss, later, "ffn.prod", e, lins["w_out"], ads.get("w_out"))
    return ss.total


def cpmant_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (module docstring). Returns lm_head's input key and its bytes per element (lm_head's own
    linear, over b·s tokens, is the caller's: memory/activations.py _head_saved)."""
    w = _wide(c, arch)
    ss.save("ids.int32", 2 * 4 * w.tokens)
    if c.train_base:
        ss.save("position_bucket", 4 * w.batch * w.seq * w.seq)
    y, yb = _cpm_norm(ss, w, "output_layernorm", "resid_final", arch.hidden_size)
    if c.train_base and not (c.autocast and yb == 4):
        ss.save(y, yb * w.tokens * arch.hidden_size)      # the slice's storage: every position
    return y, yb
