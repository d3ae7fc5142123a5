"""BigBird's own attention and activation (transformers 5.24 modeling_big_bird.py), read off fake-tensor traces of
the real step (tools/memtrace/own_attention_trace.py big_bird, tests/data/big_bird_trace.json, held within 3 % by
tests/test_big_bird_blocks.py). memory/blocks_bert.py bert_block and outside_saved call these for "big_bird"; the
rest of the layer is BERT's post-LayerNorm one.

- When it runs: BigBirdModel.forward keeps attention_type "block_sparse" (BigBirdConfig's default) only for
  seq_length > (5 + 2·num_random_blocks)·block_size (704 by default; at or below it set_attention_type switches the
  model to "original_full", memory/blocks_bert.py's eager rule, for good) and never with add_cross_attention
  (BigBirdModel.__init__). The is_decoder / cache switch does not apply to a training step (no cache is passed:
  BigBirdForCausalLM trains block_sparse, bidirectionally, above the threshold).
- BigBirdBlockSparseAttention.bigbird_block_sparse_attention over nb = s / block_size blocks of bs tokens, r random
  blocks, m = nb - 4 middle blocks, a heads of d (block_sparse_attention): q, k and v (the projections' outputs,
  viewed); the middle blocks' sliding keys and values `torch.cat` of three shifted block views (2·m·3bs·d), two
  contiguous copies of the middle queries (m·bs·d each; only the keys' gradient reads them), the gathered random
  keys and values made contiguous for the matmuls (2·m·r·bs·d); the second and second-to-last query blocks'
  concatenated keys and values (4·(4 + r)·bs·d); the softmaxes over the first / last blocks' rows (bs × s each),
  the second / second-to-last ((4 + r)·bs wide) and the middle band ((5 + r)·bs wide, per middle block). No dropout
  (attention_probs_dropout_prob is not applied there). Under autocast softmax runs in fp32 and every matmul with
  the values reads a 16-bit copy of its weights (6 bytes per score); the context `* from_mask` (from_mask in the
  LayerNorm output's dtype: fp32) is fp32, so output.dense keeps its own 16-bit copy. The attention_probs matrix it
  also builds is dropped with its graph (output_attentions off).
- hidden_act "gelu_new" (BigBirdConfig's default; activations.py NewGELUActivation, python
  0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³)))): x, tanh, 1 + tanh and 0.5·x kept (4·e per element); under autocast
  pow runs in fp32 (x's fp32 copy, tanh and 1 + tanh fp32, 0.5·x 16-bit: 14 bytes) and the output is fp32
  (memory/blocks_bart.py bart_mlp's rule). The head transform (BigBirdPredictionHeadTransform) uses it too.
"""
from __future__ import annotations

from ..model import ModelArch
from .blocks import Ctx, SavedSet


def block_sparse(arch: ModelArch, c: Ctx) -> bool:
    """Whether BigBirdModel.forward runs block_sparse at this plan's length (module docstring)."""
    own = arch.own
    if arch.model_type != "big_bird" or not own or not own["block_sparse"]:
        return False
    return c.seq > (5 + 2 * own["random_blocks"]) * own["block_size"]


def block_sparse_attention(ss: SavedSet, c: Ctx, arch: ModelArch, key_grad: bool) -> tuple[str, int]:
    """BigBirdBlockSparseAttention's saved set (module docstring), per (sequence, head) in block units. ``key_grad``:
    whether the key needs a gradient (not in the first layer under LoRA without a key adapter); only its gradient
    reads the queries' copies. With more than one sequence the (b, a) batch dims of the q / k / v views do not
    fold into one, so every matmul / einsum operand that is a view of them is copied: the four query blocks, the
    transposed keys and the values of the first / last rows' matmuls, the global key and value blocks of the
    middle band's einsums and the middle queries once more (the einsums'); a single sequence keeps q itself.
    Returns output.dense's input key and bytes per element (fp32 under autocast: the from_mask multiply)."""
    own, b, s, a, d = arch.own, c.batch, c.seq, arch.num_heads, arch.head_dim
    bs, r = own["block_size"], own["random_blocks"]
    m = s // bs - 4
    e16 = 2 if c.autocast else c.e
    ss.save("attn.k", e16 * c.tokens * arch.q_dim)              # kept by torch_gather_b2's gather
    ss.save("attn.v", e16 * c.tokens * arch.q_dim)
    # sliding keys / values (three shifted blocks per middle block), the gathered random ones, the second and
    # second-to-last query blocks' concatenated keys / values
    rows = 2 * m * 3 * bs + 2 * m * r * bs + 4 * (4 + r) * bs
    if b > 1:
        rows += 4 * s + 4 * bs                                   # k^T and v copies for the first / last rows
    if key_grad:
        if b == 1:
            ss.save("attn.q", e16 * c.tokens * arch.q_dim)
            rows += 2 * m * bs                                   # the middle queries' copies
        else:
            rows += 4 * bs + 4 * m * bs
    ss.save("attn.sparse_blocks", e16 * b * a * d * rows)
    scores = b * a * bs * (m * (5 + r) * bs + 2 * s + 2 * (4 + r) * bs)
    ss.save("attn.sparse_softmax", (6 if c.autocast else c.e) * scores)
    ss.save("attn.rand_attn", 8 * b * a * (s // bs - 2) * r)      # the int64 random block indices gather keeps
    return "attn.ctx", 4 if c.autocast else c.e


def band_mask(arch: ModelArch, c: Ctx) -> int:
    """BigBirdModel.create_masks_for_block_sparse_attn's fp32 band_mask (b, 1, m, bs, 3bs), an argument of every
    layer: under full checkpointing the checkpoints keep it for the recompute (each layer casts its own copy to
    the hidden dtype and saves none of it otherwise). Traced: the -ckpt rows."""
    bs = arch.own["block_size"]
    return 4 * c.batch * (c.seq // bs - 4) * bs * 3 * bs


def gelu_new(arch: ModelArch) -> bool:
    return arch.model_type == "big_bird" and bool(arch.own) and arch.own["act"] == "gelu_new"


def gelu_new_saved(ss: SavedSet, c: Ctx, key: str, n: int) -> int:
    """NewGELUActivation over ``n`` elements (module docstring); returns its output's bytes per element."""
    e = 2 if c.autocast else c.e
    ss.save(f"{key}.gelu_new", (14 if c.autocast else 4 * e) * n)
    return 4 if c.autocast else e
