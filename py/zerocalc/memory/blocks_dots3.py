"""Saved tensors of dots.3 Note's language-model layers (transformers 5.24 modeling_dots3_note.py
Dots3NoteTextDecoderLayer), traced on fake tensors (tools/memtrace/dots3_trace.py, tests/data/dots3_note_trace.json,
held within 3 % by tests/test_dots3_note_blocks.py).

The attention always runs eager: Dots3NotePreTrainedModel._supports_flash_attn = False (FA2 is refused at load) and
under SDPA Dots3NoteTextAttention.forward's `attention_mask[:, 0]` (the indexer's mask) raises TypeError, the mask
being None (traced in transformers 5.24). Each layer's shape is its own (per_layer_config): the heads a are g_proj's
outputs, the query head q_b_proj's / a, the value head o_proj's inputs / a. With t tokens (b sequences of s), e the
16-bit dtype:

- input_layernorm / post_attention_layernorm (Dots3NoteRMSNorm, memory/blocks.py rmsnorm) and their outputs, which
  q_a_proj / kv_a_proj_with_mqa / g_proj and the MLP read;
- q_a_layernorm, then `q_resid * self.q_lora_scale`, which q_b_proj keeps (e·t·q_lora); kv_a_layernorm (over the
  contiguous kv latent), `k_pass * self.kv_lora_scale`, which kv_b_proj keeps (e·t·kv_lora); k_rope_only_layernorm
  over the rope head; kv_b_proj's output, of which the values are a view (e·t·a·(nope + v));
- the concatenated query and expand_kv's key (e·t·a·(nope + rope) each); eager_attention_forward's fp32 softmax and
  its e-byte copy (b·a·s² each, sliding or indexed: the mask is applied, not the window's shape);
- `attn_output * gate.sigmoid()`: the contiguous output, the per-head sigmoid (e·t·a) and the product o_proj reads;
- the DSA indexer keeps nothing (its graph ends in `topk(...).indices`); the rotary cos / sin (one pair per layer
  type, shared by the layers: 4 or 2 bytes · 2·t·rope) are left out;
- the dense SwiGLU MLP (memory/blocks.py gated_mlp); Dots3NoteTextMoE: DeepSeek-V3's fp32 router and grouped_mm
  experts with the shared experts (memory/blocks.py sparse_moe).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, gated_mlp, linear, rmsnorm, sparse_moe
from .blocks_axk2 import eager_latent_attention, rmsnorm_head
from .lora import Adapter


def dots3_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    ss = SavedSet()
    h, t = arch.hidden_size, c.tokens
    e = 2 if c.autocast else c.e
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    sparse = any(lin.count > 1 for lin in linears)
    ads = {ad.name: ad for ad in adapters}
    later = replace(c, first_layer=False) if c.first_layer else c
    kva, kvb, o, g = (lins[n] for n in ("kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "g_proj"))
    a = g.d_out
    q = lins.get("q_b_proj") or lins["q_proj"]
    qk, v, kvr = q.d_out // a, o.d_in // a, kvb.d_in
    rope = kva.d_out - kvr
    y = rmsnorm(ss, c, "ln1", "resid", h)
    for name in ("q_a_proj", "q_proj", "kv_a_proj_with_mqa", "g_proj"):
        if name in lins:
            linear(ss, c, y, c.res, lins[name], ads.get(name))
    if "q_a_proj" in lins:
        rmsnorm(ss, later if "q_a_proj" in ads else c, "q_a_norm", "q_a", lins["q_a_proj"].d_out)
        linear(ss, later, "q_scaled", e, q, ads.get(q.name))
    rmsnorm(ss, later if kva.name in ads else c, "kv_a_norm", "kv_a", kvr)
    linear(ss, later, "kv_scaled", e, kvb, ads.get(kvb.name))
    rmsnorm(ss, later if kva.name in ads else c, "k_rope_norm", "k_rot", rope)
    eager_latent_attention(ss, c, a, qk, v, kvb.d_out)
    ss.save("attn.gate_sigmoid", e * t * a)
    linear(ss, later, "attn.gated", e, o, ads.get("o_proj"))
    y2 = rmsnorm(ss, later, "ln2", "resid2", h)
    if sparse:
        sparse_moe(ss, later, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, later, "mlp", y2, c.res, lins, ads, arch.intermediate_size)
    return ss.total


DOTS3_RULES = {"dots3_note_text": dots3_block}
DOTS3_HEADS = {"dots3_note_text": rmsnorm_head}     # model.norm: Dots3NoteRMSNorm, Llama's
