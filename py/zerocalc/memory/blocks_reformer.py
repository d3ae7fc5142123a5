"""What Reformer keeps for its backward (transformers 5.24 modeling_reformer.py ReformerModelWithLMHead), read off
fake-tensor traces of the real step (tools/memtrace/own_attention_trace.py reformer, tests/data/reformer_trace.json,
held by tests/test_reformer_blocks.py).

- The layers keep nothing: ReformerEncoder.forward runs them inside _ReversibleFunction, whose forward calls every
  ReformerLayer under torch.no_grad (Y_1 = X_1 + attention(X_2), Y_2 = X_2 + feed_forward(Y_1)) and keeps only the
  last layer's two halves (ctx.save_for_backward: 2 x (b, s, h), in the stream's dtype: fp32, since
  AxialPositionEmbeddings' fp32 weights promote the embedding sum) and each LSH layer's buckets (ctx.all_buckets:
  int64 (b, heads, num_hashes · s)). Its backward rebuilds each layer's input from its output and runs the
  layer's forward and backward again (ReformerLayer.backward_pass): that recompute, where the step peaks, is not
  modelled here (tests/test_reformer_blocks.py pins the gap). Under autocast the layers keep no 16-bit weight
  copies either (memory/blocks_more.py no_autocast_copy).
- Around them (reformer_head): the word embedding's dropout mask (ReformerEmbeddings.forward), the (b, s, 2h)
  concatenation encoder.layer_norm keeps (fp32) and its mean/rstd, the dropout after it (mask; its output is
  lm_head.decoder's input, 2·h wide: memory/activations.py books lm_head over hidden_size, this module the other
  half) and the ids / labels.
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet
from .lora import Adapter


def reformer_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """A ReformerLayer keeps nothing at forward end (module docstring)."""
    return 0


def reformer_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers and what _ReversibleFunction keeps (module docstring). Returns lm_head's input (the final
    dropout's output, fp32) and its bytes per element; lm_head's own linear over hidden_size is the caller's."""
    t, h = c.tokens, arch.hidden_size
    ss.save("ids_labels", 16 * t)
    if arch.dropout > 0 and c.train_base:
        ss.save("rev.emb_drop", MASK * t * h)
    ss.save("rev.halves", 2 * c.res * t * h)
    own = arch.own or {}
    ss.save("rev.buckets", 8 * own.get("lsh_layers", 0) * c.batch * arch.num_heads * own.get("num_hashes", 1) * seq)
    ss.save("rev.ln_in", 4 * t * 2 * h)                        # the halves' concatenation, fp32
    ss.save("rev.ln_stats", 8 * t)
    if arch.dropout > 0:
        ss.save("rev.final_drop", MASK * t * 2 * h)
    if c.train_base:
        ss.save("rev.head_in_half", (2 if c.autocast else 4) * t * h)   # lm_head.decoder reads 2·h
    return "rev.final_drop.out", 4
