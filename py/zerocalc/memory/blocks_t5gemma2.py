"""Saved tensors of T5Gemma 2 (transformers 5.24 modeling_t5gemma2.py T5Gemma2ForConditionalGeneration), trained on
text: the encoder's T5Gemma2EncoderLayer is Gemma 3's layer (memory/blocks.py llama_block: sandwich RMSNorms,
per-head q_norm / k_norm, GQA, GeGLU) with bidirectional attention, which keeps what the causal one does; the
decoder's T5Gemma2DecoderLayer is the same layer whose self-attention is T5Gemma2MergedAttention: the layer's own
k_proj / v_proj also project the encoder output (one tensor every decoder layer reads: saved once), k_norm runs
over those cross keys too (no rotary on them), and `torch.cat` puts them after the self keys / values, so one
attention runs over s + s_enc keys under the merged (causal | bidirectional) mask. The SigLIP tower and its
projector, frozen (vision.trainable's default) and not run on a text batch, keep nothing.

Traced: tools/memtrace/t5gemma2_trace.py (fixtures tools/memtrace/golden/t5gemma2/, tests/test_t5gemma2_blocks.py),
eager only: `_supports_flash_attn = False` (T5Gemma2PreTrainedModel); a plan asking flash / sdpa is costed with the
attention kernel's q, k, v, output and logsumexp over the merged keys (not traced).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, block_saved_bytes, linear, rmsnorm
from .lora import Adapter


def merged_cross(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict) -> None:
    """What T5Gemma2MergedAttention.forward keeps beyond Gemma 3's self-attention (its caller's llama_block):
    k_proj / v_proj over the encoder output ("enc_out", popped by the caller: one tensor for every decoder layer),
    k_norm over the cross keys (Gemma's RMSNorm per head: the fp32 upcast, rsqrt, the fp32 product), and the
    attention over s_enc more keys: eager (eager_attention_forward) keeps repeat_kv's copies of the concatenated
    K and V (s + s_enc rows: s_enc more each) and the fp32 softmax and its copy in q's dtype over (b, a, s, s + s_enc)
    scores (a·s·s_enc·b more each); an attention kernel keeps the concatenated k and v (s_enc more rows each)."""
    e = 2 if c.autocast else c.e
    t, a = c.tokens, arch.num_heads
    q_dim, kv_dim = arch.q_dim, arch.kv_dim
    for name in ("k_proj", "v_proj"):
        linear(ss, c, "enc_out", c.res, lins[name], ads.get(name))
    rmsnorm(ss, c, "cross_k_norm", "cross_k", kv_dim, True, arch.num_kv_heads, e)
    if c.attention == "eager":
        rep = kv_dim if arch.num_kv_heads == 1 else q_dim
        ss.save("cross.k_rep", e * t * rep)
        ss.save("cross.v_rep", e * t * rep)
        scores = a * c.seq * c.seq * c.batch               # s query rows × s_enc (= s) more keys
        ss.save("cross.softmax", 4 * scores)
        if e != 4:
            ss.save("cross.probs", e * scores)
    else:
        ss.save("cross.k", e * t * kv_dim)
        ss.save("cross.v", e * t * kv_dim)


def t5gemma2_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple[Linear, ...],
                    adapters: tuple[Adapter, ...], lm_head_adapter: Adapter | None) -> tuple:
    """(layers, extra, ckpt_extra, head) of memory/blocks_seq2seq.py EncDec: every layer llama_block's Gemma 3
    layer, each decoder layer with merged_cross; the encoder's final norm (T5Gemma2TextEncoder.norm) and its
    output, which the decoder layers' k_proj / v_proj read (kept once); the decoder's input ids (shift_right's new
    int64 tensor); the decoder's final norm and lm_head's input. Under full checkpointing the stack keeps each
    layer's input (activations.py) and, besides, the encoder's final norm, its output and the decoder's ids."""
    h, t = arch.hidden_size, c.tokens
    layers, fin, shared, head = gemma_stacks(arch, c_first, c, linears, adapters, lm_head_adapter, merged_cross)
    ckpt = fin + c.res * t * h + 8 * t + 2 * 8 * c.seq + checkpointed_masks(arch, c)
    return layers, fin + shared + 8 * t, ckpt, head


def gemma_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...],
                 lm_head_adapter: Adapter | None, cross) -> tuple:
    """(layers, encoder final norm, shared, head) of T5Gemma's and T5Gemma 2's stacks: every layer llama_block's
    Gemma layer, each decoder layer with `cross` (T5Gemma's cross-attention block, T5Gemma 2's merged attention),
    whose encoder output ("enc_out") is kept once for every decoder layer; the encoder's final norm; the decoder's
    final norm and lm_head over its output."""
    n_enc = arch.t5gemma["encoder_layers"]
    lins, ads = {x.name: x for x in linears}, {x.name: x for x in adapters}
    layers, shared = [], SavedSet()
    for i in range(arch.num_layers):
        ci = c_first if i in (0, n_enc) else c
        n = block_saved_bytes(arch, ci, linears, adapters)
        if i >= n_enc:
            ss = SavedSet()
            cross(ss, replace(ci, first_layer=False), arch, lins, ads)
            if "enc_out" in ss.items:
                shared.save("enc_out", ss.items.pop("enc_out"))
            n += ss.total
        layers.append(n)
    fin = SavedSet()
    rmsnorm(fin, c, "enc_final", "enc_last", arch.hidden_size, gemma=True)
    head = SavedSet()
    y = rmsnorm(head, c, "dec_final", "dec_last", arch.hidden_size, gemma=True)
    linear(head, c, y, c.res, Linear("lm_head", arch.hidden_size, arch.vocab_size), lm_head_adapter)
    return tuple(layers), fin.total, shared.total, head.total


def checkpointed_masks(arch: ModelArch, c: Ctx) -> int:
    """The 4-D masks every checkpointed layer takes as an input (one tensor per layer type, in the embeddings'
    dtype under eager; SDPA's are bool, not traced): the encoder's sliding-window one (b, 1, s, s)
    (create_bidirectional_mask with an and_mask_function never skips; the full one is skipped, None, for an
    unpadded batch), and the decoder's merged masks (b, 1, s, s + s_enc), `torch.cat` of the causal (or
    sliding causal) mask and the cross mask, both always materialised (T5Gemma2Decoder.forward
    allow_is_causal_skip / allow_is_bidirectional_skip False), one per decoder layer type. Traced:
    tools/memtrace/golden/t5gemma2/*-gc-*."""
    enc, dec = arch.t5gemma["kinds"]["encoder"], arch.t5gemma["kinds"]["decoder"]
    b = c.res if c.attention == "eager" else 1
    square = c.batch * c.seq * c.seq
    # and each stack's rotary cos / sin (1, s, head_dim) per layer type, T5Gemma2RotaryEmbedding's output cast
    # to the hidden states' dtype (`cos.to(dtype=x.dtype)`), handed to every layer as position_embeddings
    rotary = 2 * c.res * c.seq * arch.head_dim * (len(enc) + len(dec))
    return b * square * (("sliding_attention" in enc) + 2 * len(dec)) + rotary   # s_enc = s: the merged ones twice as wide
