"""Saved tensors of MiniMax's decoder layers (transformers 5.24 modeling_minimax.py MiniMaxDecoderLayer): the
softmax-attention layers are memory/blocks.py's Llama block with the Mixtral experts; the ``linear_attention``
layers run MiniMaxLightningAttention.forward's block loop, costed here.

With a heads of d dims (inner = a·d), block_size B and nb = ceil(s / B) blocks of b·B tokens, one (b, a, B, d)
block tensor in the 16-bit compute dtype being X bytes:
- qkv_proj keeps the input_layernorm output, SiLU its output (3·inner per token);
- per block, `matmul(q_i, k_i^T)` keeps contiguous copies of q_i and k_i^T, `matmul(scores * diagonal_decay, v_i)`
  the decayed scores (b, a, B, B) and a copy of v_i, `matmul(q_i * query_decay, kv)` the running (b, a, d, d) state
  and, from the second block on (the zero state of the first needs no gradient), the decayed q_i; every block but
  the last `matmul((k_i * key_decay)^T, v_i)` for the next state, copies of both: the last block's state update
  reaches only the returned cache, which the layer drops, and its saved tensors die with it. In all
  (6·nb - 3)·X, nb scores and nb states (a shorter last block, s not a multiple of B, is counted as a full one;
  not traced); under autocast the fp32 products with the fp32 decay buffers are read
  through autocast's 16-bit copies: the same bytes;
- norm (MiniMaxRMSNorm over inner) of the concatenated output: its fp32 input, rsqrt and normalised tensor;
  output_gate reads the layer's normed input; sigmoid keeps its output, the gating product the norm's output and
  out_proj the product;
- the residual is the normed input (post-norm), scaled by python floats (nothing kept); post_attention_layernorm
  and the experts as the softmax layers'.

Traced: tools/memtrace/families.py minimax (tools/memtrace/golden/families/minimax-*, held within 3 % by
tests/test_family_grid.py)."""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, block_saved_bytes, linear, rmsnorm, sparse_moe
from .lora import Adapter


def lightning_attention_saved(ss: SavedSet, c: Ctx, arch: ModelArch, inner: int, needs_grad: bool) -> None:
    """The block loop's tensors (the module docstring's list)."""
    if not needs_grad:
        return
    e = 2 if c.autocast else c.e
    d = inner // arch.num_heads
    block = min(arch.lightning["block_size"], c.seq)
    nb = -(-c.seq // block)
    x = e * c.batch * arch.num_heads * block * d
    ss.save("lightning.blocks", (6 * nb - 3) * x)
    ss.save("lightning.scores", nb * e * c.batch * arch.num_heads * block * block)
    ss.save("lightning.states", nb * e * c.batch * arch.num_heads * d * d)


def minimax_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    if "output_gate" not in lins:
        return block_saved_bytes(arch, c, linears, adapters)
    ss = SavedSet()
    ads = {ad.name: ad for ad in adapters}
    h, t = arch.hidden_size, c.tokens
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False)
    qkv, gate, out = lins["qkv_proj"], lins["output_gate"], lins["out_proj"]
    inner = gate.d_out
    y = rmsnorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, c.res, qkv, ads.get("qkv_proj"))
    needs_grad = c.train_base or not c.first_layer or "qkv_proj" in ads
    if needs_grad:
        ss.save("qkv.out", e * t * 3 * inner)                   # SiLU keeps its input
    lightning_attention_saved(ss, c, arch, inner, needs_grad)
    n = rmsnorm(ss, c2, "attn_norm", "attn_cat", inner, x_bytes=e)
    linear(ss, c, y, c.res, gate, ads.get("output_gate"))
    ss.save("gate.sigmoid", e * t * inner)
    ss.save(n, c.res * t * inner)                               # the gating product's other factor
    linear(ss, c2, "gated", e, out, ads.get("out_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if arch.moe:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    return ss.total
