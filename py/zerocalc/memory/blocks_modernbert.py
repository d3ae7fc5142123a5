"""Saved tensors of ModernBERT-decoder (transformers 5.24 modeling_modernbert_decoder.py), read off fake-tensor
traces of the real training step (tools/memtrace/families.py modernbert rows, tools/memtrace/golden/families/
modernbert-*, held within 3 % by tests/test_family_grid.py).

ModernBertDecoderLayer: attn_norm (nn.LayerNorm, bias by norm_bias; nn.Identity in layer 0) -> q/k/v_proj ->
Llama's rotary (new q and k) -> attention (sliding-window layers are a kernel argument under FA2) -> Wo ->
residual; mlp_norm -> Wi (h -> 2·I) -> `input, gate = chunk(2)` -> GELU(input) * gate -> Wo -> residual. The
chunk's views keep Wi's whole output alive (GELU keeps `input`, the product keeps `gate`): memory/blocks.py
gated_mlp's fused gate_up rule. Around the layers (ModernBertDecoderModel / ModernBertDecoderPredictionHead):
embeddings.norm over the embedding output, final_norm, then lm_head.dense -> GELU -> lm_head.norm -> decoder.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear
from .blocks_families import layernorm
from .lora import Adapter


def modernbert_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One ModernBertDecoderLayer. Traced per layer (16-bit elements, full bf16, FA2): 8·t·h + 4·t·I (layer 0, with
    no attn_norm: 7·t·h + 4·t·I) and the fp32 logsumexp; eager keeps the Llama lineage's fp32 softmax and its
    16-bit copy (`softmax(..., dtype=torch.float32).to(query.dtype)`)."""
    ss = SavedSet()
    q, k, v, attn_o, wi, mlp_o = linears                    # model/classic_more.py modernbert_decoder's order
    ads = {(ad.name, ad.d_in): ad for ad in adapters}       # the attention's and the MLP's Wo share a name
    e, h = 2 if c.autocast else c.e, arch.hidden_size
    if c.first_layer:
        y, yb = "emb_norm.out", 4 if c.autocast else c.res  # layer 0 reads embeddings.norm's output
    else:
        y, yb = layernorm(ss, c, "attn_norm", "resid", h)
    for lin in (q, k, v):
        linear(ss, c, y, yb, lin, ads.get((lin.name, lin.d_in)))
    c2 = replace(c, first_layer=False) if c.first_layer else c
    view = arch if c.attention != "eager" else replace(arch, family="llama")
    out = attention_core(ss, c2, view, "attn", arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, e, attn_o, ads.get((attn_o.name, attn_o.d_in)))
    y2, yb2 = layernorm(ss, c2, "mlp_norm", "resid2", h)
    mlp = {"gate_up_proj": Linear("gate_up_proj", wi.d_in, wi.d_out), "down_proj": mlp_o}
    mads = {"gate_up_proj": ads.get((wi.name, wi.d_in)), "down_proj": ads.get((mlp_o.name, mlp_o.d_in))}
    gated_mlp(ss, c2, "mlp", y2, yb2, mlp, {k_: a for k_, a in mads.items() if a}, mlp_o.d_in)
    return ss.total


def modernbert_outside(ss: SavedSet, c: Ctx, arch: ModelArch, x: str) -> tuple[str, int]:
    """Around the layers: embeddings.norm's input and stats (when layer 0's projections train; under LoRA nothing
    before them needs a gradient), final_norm, lm_head.dense (its input), GELU (its input), lm_head.norm, and the
    rotary cos/sin the layers' rotary keeps: one (b, s, head_dim) pair per layer type (`position_embeddings
    [layer_type]`, both full and sliding in the released configs). Returns the decoder's input and its bytes per
    element (traced: five t·h tensors, the norms' stats, two cos/sin pairs in the residual dtype)."""
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    ss.save("rope_cos_sin", 2 * 2 * c.res * c.tokens * arch.head_dim)
    if c.train_base:
        layernorm(ss, c, "emb_norm", "embedding_out", h)
    y, yb = layernorm(ss, replace(c, first_layer=False), "final_norm", x, h)
    dense = Linear("dense", h, h)
    linear(ss, c, y, yb, dense, None)
    ss.save("head_gelu.in", e * c.tokens * h)
    return layernorm(ss, replace(c, first_layer=False), "head_norm", "head_gelu.out", h)
