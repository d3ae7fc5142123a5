"""Saved tensors of Doge (transformers 5.24 modeling_doge.py DogeDecoderLayer), read off fake-tensor traces of the
real step (tools/memtrace/own_blocks_trace.py doge, tests/data/doge_trace.json, held within 3 % by
tests/test_doge_blocks.py).

The layer is a Llama-lineage one with per-head q_norm / k_norm (memory/blocks.py llama_block: DogeRMSNorm is
LlamaRMSNorm's formula) but for:
- DogeAttention.forward's dynamic mask: `dt_proj(value_states ...)` reads the values SDPA keeps anyway, then
  `exp(A * softplus(dt))` over (b, s, kv heads): softplus keeps its input, the multiply by A the softplus output
  where A trains, exp its output; prepare_dynamic_mask expands it to (b, kv, s, s), a view.
  Under SDPA (create_causal_mask returns no mask without padding) that view is SDPA's attn_mask and nothing
  (b, s, s)-sized is kept; eager (a 4-D causal mask) masked_fills it with `attention_mask != 0`, whose (b, 1, s, s)
  bool mask masked_fill keeps, and adds it to the scores. DogePreTrainedModel has no FlashAttention
  (_supports_flash_attn False): a flash plan is costed as SDPA's, whose saved set memory/blocks.py attention_core
  books as FA2's.
- DogeDecoderLayer.forward's learned residual scales: `input_residual * residual + hidden_states` and
  `post_attention_residual * residual + ...` keep each residual (the layer input and the mid-layer sum, the
  stream's dtype) where the scales train.
- the CDMoE feed-forward (is_moe) is not modelled (model/doge.py says so).
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, llama_block
from .lora import Adapter


def doge_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One DogeDecoderLayer (module docstring)."""
    total = llama_block(arch, c, linears, adapters)
    ss = SavedSet()
    t, h, kv = c.tokens, arch.hidden_size, arch.num_kv_heads
    e = 2 if c.autocast else c.e
    ss.save("dt.in", e * t * kv)                      # softplus keeps dt_proj's output
    ss.save("dt.exp", e * t * kv)                     # exp keeps its output
    if c.train_base:
        ss.save("dt.softplus", e * t * kv)            # A * softplus(dt) keeps softplus's output for A
        if c.res != 4:
            # the two residual-scale multiplies keep their residuals; in an fp32 stream the layer input and the
            # mid-layer sum are what the norms' pow keeps already (llama_block)
            ss.save("resid", c.res * t * h)
            ss.save("resid2", c.res * t * h)
    if c.attention == "eager":
        ss.save("dynamic_mask.bool", MASK * c.batch * c.seq * c.seq)
    return total + ss.total
