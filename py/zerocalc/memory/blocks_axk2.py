"""Saved tensors of A.X K2's decoder layers (transformers 5.24 modeling_axk2.py AXK2DecoderLayer), traced on fake
tensors (tools/memtrace/axk2_trace.py, tests/data/axk2_trace.json, held within 3 % by tests/test_axk2_blocks.py).

The attention always runs eager: AXK2PreTrainedModel._supports_flash_attn = False (FA2 is refused at load) and
AXK2Attention.forward indexes attention_mask[:, 0] for its indexer, which is None under SDPA's causal path (a
TypeError in transformers 5.24). With t tokens (b sequences of s), hidden h, a heads, e the 16-bit dtype:

- AXK2GatedRMSNorm (input_layernorm; post_attention_layernorm in sparse layers): AXK2RMSNorm's fp32 upcast, rsqrt
  and normalised 16-bit tensor (memory/blocks.py rmsnorm), which AXK2GateMLP's fc1 reads; `y *
  torch.sigmoid(self.mlp(y).float())` keeps the fp32 sigmoid (4·t·h) and the cast-back output the next linears read.
  The gate MLP's own h -> gated_norm_rank (16) -> h tensors (4·e·t·rank) are left out (under 0.1 % of a layer);
- AXK2Attention: q_a_proj, q_a_layernorm, then q_gate_proj reads torch.cat([q_resid, q_compressed]) (e·t·2·q_lora);
  kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, whose output holds the values the attention reads (e·t·a·(nope +
  v)); the concatenated query and expand_kv's key (e·t·a·(nope + rope) each); eager_attention_forward's fp32
  softmax and its e-byte copy (b·a·s² each); the contiguous output and the fp32 sigmoid of the gate half (e and 4
  bytes · t·a·v), the cast-back product o_proj reads;
- AXK2Indexer: its graph ends in `topk(...).indices`, which no gradient reaches, so it keeps nothing;
- the dense MLP (memory/blocks.py gated_mlp) after a plain RMSNorm; AXK2MoE: DeepSeek-V3's fp32 router and
  grouped_mm experts with the shared experts (memory/blocks.py sparse_moe).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, gated_mlp, linear, rmsnorm, sparse_moe
from .lora import Adapter


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def gated_norm(ss: SavedSet, c: Ctx, key: str, x: str, h: int) -> str:
    """AXK2GatedRMSNorm over h: the RMSNorm, the fp32 sigmoid of its gate MLP, the gated output (its key)."""
    ss.save(rmsnorm(ss, c, key, x, h), c.res * c.tokens * h)      # fc1's input and the gate product's
    ss.save(f"{key}.sigmoid", 4 * c.tokens * h)
    return f"{key}.gated"


def eager_latent_attention(ss: SavedSet, c: Ctx, a: int, qk: int, v: int, kv_b_out: int) -> None:
    """MLA's expanded heads under eager attention (AXK2Attention, Dots3NoteTextAttention): kv_b_proj's output, of
    which the values are a view; the concatenated query and expand_kv's key; eager_attention_forward's fp32 softmax
    and its 16-bit copy; the attention output made contiguous for the output gate's product."""
    e, t = 2 if c.autocast else c.e, c.tokens
    ss.save("kv_b.out", e * t * kv_b_out)
    ss.save("attn.q", e * t * a * qk)
    ss.save("attn.k", e * t * a * qk)
    ss.save("attn.softmax", 4 * c.batch * a * c.seq * c.seq)
    ss.save("attn.probs", e * c.batch * a * c.seq * c.seq)
    ss.save("attn.out", e * t * a * v)


def axk2_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    ss = SavedSet()
    h, t, a = arch.hidden_size, c.tokens, arch.num_heads
    e = 2 if c.autocast else c.e
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    sparse = any(lin.count > 1 for lin in linears)
    ads = {ad.name: ad for ad in adapters}
    later = _later(c)
    qa, qg, kva, kvb, o = (lins[n] for n in ("q_a_proj", "q_gate_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"))
    qr, kvr = qa.d_out, kvb.d_in
    v = o.d_in // a
    qk = arch.head_dim                                   # qk_nope + qk_rope
    y = gated_norm(ss, c, "ln1", "resid", h)
    for lin in (qa, kva):
        linear(ss, c, y, c.res, lin, ads.get(lin.name))
    rmsnorm(ss, later if qa.name in ads else c, "q_a_norm", "q_a", qr)
    linear(ss, later, "q_cat", e, qg, ads.get(qg.name))
    rmsnorm(ss, later if kva.name in ads else c, "kv_a_norm", "kv_a", kvr)
    linear(ss, c, "kv_a.out", e, kvb, ads.get(kvb.name))
    eager_latent_attention(ss, c, a, qk, v, kvb.d_out)
    ss.save("attn.gate_sigmoid", 4 * t * a * v)
    linear(ss, later, "attn.gated", e, o, ads.get("o_proj"))
    if sparse:
        y2 = gated_norm(ss, later, "ln2", "resid2", h)
        sparse_moe(ss, later, arch, y2, c.res, lins, ads)
    else:
        y2 = rmsnorm(ss, later, "ln2", "resid2", h)
        gated_mlp(ss, later, "mlp", y2, c.res, lins, ads, arch.intermediate_size)
    return ss.total


def rmsnorm_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers of AXK2 and dots3 (modeling_axk2.py Axk2Model.forward / modeling_dots3_note.py
    Dots3NoteTextModel.forward, `self.norm`): model.norm is Llama's RMSNorm (Axk2RMSNorm / Dots3NoteRMSNorm: the
    fp32 upcast and rsqrt whenever its input needs a gradient, the 16-bit `hidden_states.to(input_dtype)` when its
    weight trains), not the LayerNorm head memory/activations.py gives the other types of their family; lm_head reads
    its 16-bit output (memory/blocks_more.py MORE_HEADS). Traced (tools/memtrace/dots3_trace.py, axk2_trace.py): the
    4 MiB fp32 upcast and the 2 MiB 16-bit cast beside lm_head's input at the loss's backward (before: -4 MiB, dots3
    with checkpointing -36.4 %, without -2.5 %; axk2 full -1.5 %). Returns lm_head's input and its bytes."""
    return rmsnorm(ss, c, "final_norm", "resid_final", arch.hidden_size), c.res


AXK2_RULES = {"axk2": axk2_block}
AXK2_HEADS = {"axk2": rmsnorm_head}                # model.norm: Axk2RMSNorm, Llama's
