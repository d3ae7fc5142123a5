"""What Reformer keeps for its backward (transformers 5.24 modeling_reformer.py ReformerModelWithLMHead), read off
fake-tensor traces of the real step (tools/memtrace/own_attention_trace.py reformer, tests/data/reformer_trace.json,
held by tests/test_reformer_blocks.py).

- The layers keep nothing: ReformerEncoder.forward runs them inside _ReversibleFunction, whose forward calls every
  ReformerLayer under torch.no_grad (Y_1 = X_1 + attention(X_2), Y_2 = X_2 + feed_forward(Y_1)) and keeps only the
  last layer's two halves (ctx.save_for_backward: 2 x (b, s, h), in the stream's dtype: fp32, since
  AxialPositionEmbeddings' fp32 weights promote the embedding sum) and each LSH layer's buckets (ctx.all_buckets:
  int64 (b, heads, num_hashes · s)). Its backward rebuilds each layer's input from its output and runs the
  layer's forward and backward again (ReformerLayer.backward_pass): that recompute, where the step peaks, is
  reversible_backward_moment (booked by memory/inputs.py as a backward moment). Under autocast the layers keep
  no 16-bit weight copies either (memory/blocks_more.py no_autocast_copy).
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


def _attention_moment(own: dict, kind: str, b: int, a: int, d: int, s: int) -> int:
    """One recomputed attention inside its own backward, at the moment the step peaks: the logsumexp's backward
    (LocalSelfAttention.forward / LSHSelfAttention._attend: `logits = torch.logsumexp(dots)`, `exp(dots - logits)`),
    all fp32 (ReformerLayer.backward_pass runs outside autocast). backward_pass calls `.backward(...,
    retain_graph=True)`, so the whole recomputed saved set lives until the layer's backward ends. With w = c·(1 +
    before + after) keys per chunk of c queries, E = b·a·n·s·d (n hashes; n = 1 for local) and L = b·a·n·s·w
    (the chunks' scores):
    - saved, local: the look-adjacent keys and values (2 x E·w/c, `_look_adjacent`'s cat), the chunked queries'
      copy (E) and the merged output (E, `_merge_hidden_size_dims`, output.dense's input); the masked scores
      (`torch.where`, L), the probabilities (exp, L), their dropout's output (L) and mask (bool L) where
      local_attention_probs_dropout_prob > 0, the causal mask (bool L), logsumexp's result (b·a·s);
    - saved, LSH: the query_key and value `repeat`s (2E, _gather_by_expansion), the sorted query_key (E), the
      look-adjacent keys and values (2 x E·w/c), the merged output (b·a·s·d); scores and probabilities (2L), the
      causal and self masks (2 bool L), the sorted indices and their per-hash remainder (2 int64 b·a·n·s), the key
      norm's rsqrt and logsumexp's result (2 x b·a·n·s); a dropout as local's (untraced: p is 0 by default);
      with n > 1 hashes also what their combination keeps: ReverseSort's unsorted output (E) and logits (b·a·n·s),
      `torch.exp(logits - logsumexp)` (b·a·n·s) and the logsumexp over the hashes (b·a·s);
    - in flight: the values' gradient (E·w/c, the probabilities' matmul backward), exp's backward output, and
      logsumexp's backward: its sub, exp and product (4L), the summed gradient of its result (b·a·n·s).
    Traced (tests/data/reformer_trace.json): layer 3 (LSH, c 64) of the default config, layer 2 (local, c 128)
    of a local-only one, layer 2 (LSH, c 128, 1 and 2 hashes) of lsh / local / lsh / local with local chunks of
    32, the top layer (LSH, c 256) of local / lsh."""
    c, before, after, p = own[kind]
    n = own.get("num_hashes", 1) if kind == "lsh" else 1
    if s <= c:                                   # one chunk, no look-adjacent (do_standard_self_attention)
        c, before, after = s, 0, 0
    w = c * (1 + before + after)
    e, big, row = b * a * n * s * d, b * a * n * s * w, b * a * n * s
    drop = 5 * big if p > 0 else 0               # dropout's fp32 output and bool mask
    if kind == "local":
        saved = 4 * (2 * e * w // c + 2 * e) + 8 * big + big + drop + 4 * row
    else:
        saved = 4 * (3 * e + 2 * e * w // c + b * a * s * d) + 8 * big + 2 * big + 16 * row + 8 * row + drop
        if n > 1:       # the hashes' combination: `out_vectors * probs_vectors` and the logsumexp over the hashes
            saved += 4 * (e + 2 * row + b * a * s)
    return saved + 4 * (4 * big + e * w // c) + 4 * row


def _feed_forward_moment(arch: ModelArch, b: int, s: int) -> int:
    """One recomputed ChunkReformerFeedForward inside its own backward, at the activation's backward
    (threshold_backward for relu), fp32: its saved set (the LayerNorm's output and mean / rstd, 4·t·h + 8·t;
    ReformerFeedForwardDense's dropout mask, t·f where hidden_dropout_prob > 0, and the activation's output, 4·t·f,
    output.dense's input; ReformerFeedForwardOutput's output, 4·t·h, and dropout mask, t·h) and in flight the
    activation's output gradient and its own backward's (2 x 4·t·f). With chunk_size_feed_forward
    (apply_chunking_to_forward: the chunks' outputs concatenated, each chunk back-propagated in turn) the saved set
    is the same in total, the two gradients are one chunk's, and beside them the feed-forward's weight and bias
    gradients summed over the chunks (4·(2·h·f + f + h)) and the input gradients of all but two of the chunks.
    Traced: layer 4 of the default config with feed_forward_size 8192 and 2 heads, unchunked and in chunks of 512
    (tests/data/reformer_trace.json), and of 1024 (8 and 4 chunks: 6 and 2 input gradients pending)."""
    own, t, h, f = arch.own or {}, b * s, arch.hidden_size, arch.intermediate_size
    drop = arch.dropout is not None and arch.dropout > 0
    chunk = min(s, own.get("ff_chunk") or s)
    chunks, rows = -(-s // chunk), b * chunk
    out = 4 * t * h + 8 * t + (t * f if drop else 0) + 4 * t * f + 4 * t * h + (t * h if drop else 0) + 8 * rows * f
    if chunks > 1:
        # the chunks' weight gradients summed in autograd's input buffers before AccumulateGrad (dense.dense and
        # output.dense, weights and biases) and the input gradients of all but two chunks, pending for the split
        out += 4 * (2 * h * f + f + h) + (chunks - 2) * 4 * rows * h
    return out


def reversible_backward_moment(arch: ModelArch, batch: int, seq: int) -> int:
    """Where the step peaks: _ReversibleFunction.backward's loop over the layers, top down, each
    ReformerLayer.backward_pass re-running the layer's feed-forward and attention under torch.enable_grad and
    back-propagating through them (traced: tools/memtrace/own_attention_trace.py reformer). The largest of the
    layers' attention moments (_attention_moment), beside (all fp32; t = b·s):
    - the streams: the previous layer's ReformerBackwardOutput, still bound to the loop's `output` (its two
      rebuilt halves and their two gradients, 4 x 4·t·h; at the top layer views of ctx's halves and of the
      gradient: none new), this layer's rebuilt X_2 and its grad_attn_output (2 x 4·t·h), and the gradient of
      encoder.layer_norm's (t, 2h) input that the reversible function's backward holds (8·t·h);
    - the recomputed attention's LayerNorm output and mean / rstd (4·t·h + 8·t), its output (4·t·h, the dropout's
      output where hidden_dropout_prob > 0) and the dropout's mask (t·h);
    - what forward kept that is not consumed yet: ctx's two halves (2 x 4·t·h), every LSH layer's buckets, the
      embeddings' dropout mask, the ids (8·t).
    Or, where it is larger, a feed-forward's moment (_feed_forward_moment): it runs first in backward_pass, before
    X_2 is rebuilt, beside the previous layer's output only.
    memory/inputs.py books it as a backward moment of its own (bwd_top), where the gradients are those the stack
    keeps: whole in the traced plans (their step keeps `.grad` across steps), as at that moment in the trace."""
    own, t, h = arch.own or {}, batch * seq, arch.hidden_size
    a, d = arch.num_heads, arch.head_dim
    kinds = own.get("kinds", ())
    drop = arch.dropout is not None and arch.dropout > 0
    fixed = 8 * t * h + 8 * own.get("lsh_layers", 0) * batch * a * own.get("num_hashes", 1) * seq + 8 * t
    fixed += (t * h if drop else 0) + 8 * t * h
    attention_extra = 4 * t * h + 8 * t + 4 * t * h + (t * h if drop else 0)
    ff = _feed_forward_moment(arch, batch, seq)
    moment = 0
    for i, kind in enumerate(kinds):
        above = 0 if i == len(kinds) - 1 else 16 * t * h          # the previous layer's ReformerBackwardOutput
        moment = max(moment, above + 8 * t * h + attention_extra + _attention_moment(own, kind, batch, a, d, seq),
                     above + ff)
    return fixed + moment if kinds else 0
