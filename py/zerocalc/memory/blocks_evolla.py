"""Saved tensors of Evolla (transformers 5.24 modeling_evolla.py EvollaForProteinText2Text; model/evolla.py) trained
with its SaProt protein encoder frozen (vision.trainable's default for a tower). Read off fake-tensor traces of the
real step (tools/memtrace/odd_composites_trace.py evolla rows, fixtures in tools/memtrace/golden/odd_composites/
evolla-*, held within 3 % by tests/test_odd_composites_blocks.py).

- ``evolla_layer`` (MORE_RULES): EvollaDecoderLayer, Llama's block (memory/blocks.py llama_block), and in every
  (num_hidden_layers // aligner_num_add_layers)-th layer its ``adapter`` (EvollaSequenceAlignerCrossAttention, its
  linears in that layer's ``layer_linears``): attention_norm (Llama's RMSNorm rule), query; key_protein /
  value_protein read the resampler's output (one tensor for every adapter: evolla_stacks); `query * scale`, kept
  by the score matmul beside k's transposed copy; the bool mask masked_fill keeps, the softmax and v's copy; out_proj's contiguous input; `tanh(gate) * out` keeps out and
  the tanh; the feed-forward (nn.LayerNorm, fc1, GELU, fc2) and its tanh gate the same way.
- ``evolla_stacks`` (memory/blocks_seq2seq.py's EncDec hook): the layers, then outside them the resampler (EvollaSequenceCompressorResampler, trained in full fine-tuning:
  latents x ones, each layer's norm_media over the protein tokens, norm_latents, to_q, to_kv over
  cat(media, latents), the score matmul / amax / mask / softmax over P + L keys, to_out, the feed-forward),
  protein_projector and its LayerNorm, whose output the adapters read; the frozen SaProt's output the resampler
  reads; the final norm and the rotary tables as Llama's.

Under LoRA the resampler and the adapters are frozen (PEFT's q_proj / v_proj are the Llama's): no gradient reaches
the resampler, and the adapters keep only what the text stream's gradient needs.
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear, llama_block, rmsnorm
from .lora import Adapter

MODEL_TYPE = "evolla"
ADAPTER = ("adapter.query", "adapter.out_proj", "adapter.ff.fc1")     # an adapter layer's extra linears
_R = "model.protein_encoder.sequence_compressor_resampler"
_ENC = "model.protein_encoder.model"


def _shape(arch: ModelArch, name: str) -> tuple:
    return next(tt.shape for tt in arch.tensors if tt.name == name)


def _latents(arch: ModelArch) -> int:
    return _shape(arch, f"{_R}.latents")[0]


def _scores(ss: SavedSet, c: Ctx, key: str, q_rows: int, k_rows: int, heads: int, inner: int, trained: bool) -> str:
    """`matmul(q * scale, k^T)`, `- amax(...).detach()`, masked_fill, softmax, `matmul(probs, v)` (eager, 16-bit
    under autocast: the softmax's fp32 output and its 16-bit copy), over ``q_rows`` queries and ``k_rows`` keys
    (both summed over the batch). ``trained``: the keys / values need a gradient (their projections train). The
    detached amax's node is unreachable from the loss: neither the scores nor the amax stay (traced; a
    saved-tensor hook would keep them)."""
    e = 2 if c.autocast else c.e
    scores = heads * q_rows * (k_rows // c.batch)
    if trained:
        ss.save(f"{key}.q_scaled", e * q_rows * inner)
    ss.save(f"{key}.k_t", e * k_rows * inner)
    ss.save(f"{key}.softmax", (4 if c.autocast else e) * scores)
    if c.autocast and trained:
        ss.save(f"{key}.probs16", 2 * scores)             # the fp32 probs' copy the second matmul keeps
    ss.save(f"{key}.v", e * k_rows * inner)
    return f"{key}.ctx"


def _ff(ss: SavedSet, c: Ctx, key: str, x: str, d: int, mult: int) -> None:
    """EvollaFeedForward (LayerNorm, bias-free fc1, nn.GELU, fc2) on ``x`` (c.tokens rows)."""
    e = 2 if c.autocast else c.e
    r = 4 if c.autocast else c.res
    ss.save(x, r * c.tokens * d)                          # the LayerNorm's input (the residual sum)
    ss.save(f"{key}.stats", 8 * c.tokens)
    if c.train_base:
        linear(ss, c, f"{key}.norm_out", r, Linear("fc1", d, mult * d), None)
    ss.save(f"{key}.fc1_out", e * c.tokens * mult * d)    # GELU's input
    if c.train_base:
        ss.save(f"{key}.gelu_out", e * c.tokens * mult * d)


def adapter_saved(arch: ModelArch, c: Ctx, lins: dict) -> int:
    """One adapter (module docstring) over the layer's b·s text tokens; the protein states it reads are
    evolla_head's."""
    ss = SavedSet()
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    y = rmsnorm(ss, c, "xattn_norm", "resid_out", h)
    linear(ss, c, y, c.res, lins["adapter.query"], None)
    rows = c.batch * _latents(arch)
    ctx = _scores(ss, c, "xattn", c.tokens, rows, arch.num_heads, h, c.train_base)
    ss.save("xattn.mask", MASK * c.tokens * (rows // c.batch))
    linear(ss, c, ctx, e, lins["adapter.out_proj"], None)
    ss.save("gate_attn.tanh", 4 if c.autocast else c.e)
    if c.train_base:
        ss.save("xattn.out", e * c.tokens * h)            # `tanh(gate) * out` keeps out for the gate's gradient
    _ff(ss, c, "ff", "xattn_sum", h, lins["adapter.ff.fc1"].d_out // h)
    ss.save("gate_ffw.tanh", 4 if c.autocast else c.e)
    if c.train_base:
        ss.save("ff.out", e * c.tokens * h)
    return ss.total


def evolla_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    lins = {lin.name: lin for lin in linears}
    base = tuple(lin for lin in linears if not lin.name.startswith("adapter."))
    total = llama_block(arch, c, base, adapters)
    return total + (adapter_saved(arch, c, lins) if "adapter.query" in lins else 0)


def resampler_saved(arch: ModelArch, c: Ctx, proteins: int, trained: bool) -> int:
    """The resampler over ``proteins`` protein tokens a sample (module docstring). ``trained``: its weights train
    (full fine-tuning); else frozen with an input that needs a gradient (PEFT + checkpointing: saprot_graph), so it
    keeps only what that input's gradient needs: the LayerNorms' inputs and stats (and autocast's fp32 weight
    copies), q's scaled copy (layer 0: only it, the latents need none), k's transposed copy after layer 0, the
    scores, amax, mask, softmax and v's copy, the 16-bit probs under autocast, GELU's input, the final norm's."""
    ss = SavedSet()
    e = 2 if c.autocast else c.e
    r = 4 if c.autocast else c.res                          # a LayerNorm's input / output
    b, lat = c.batch, _latents(arch)
    inner, d = _shape(arch, f"{_R}.layers.0.0.to_q.weight")
    heads = inner // 64
    depth = len({tt.name.split(".")[4] for tt in arch.tensors if tt.name.startswith(f"{_R}.layers.")})
    mult = _shape(arch, f"{_R}.layers.0.1.fc1.weight")[0] // d
    h = arch.hidden_size
    copies = 8 * d if c.autocast and not trained and c.res == 2 else 0    # autocast's fp32 LayerNorm weight / bias
    if trained:
        ss.save("ones", 4 * b)                              # latents * ones keeps ones for the latents' gradient
    kv = proteins + lat
    scores = heads * lat * kv * b
    for j in range(depth):
        k = f"r{j}"
        ss.save(f"{k}.media_stats", 8 * b * proteins + copies)
        if trained or j:
            ss.save(f"{k}.latents_in", r * b * lat * d + copies)
            ss.save(f"{k}.latents_stats", 8 * b * lat)
        if trained:
            ss.save(f"{k}.latents_norm", e * b * lat * d)   # to_q's input
            ss.save(f"{k}.kv_in", e * b * kv * d)           # to_kv's input: cat(media, latents)
        ss.save(f"{k}.q_scaled", e * b * lat * inner)
        if trained or j:
            ss.save(f"{k}.k_t", e * b * kv * inner)
        ss.save(f"{k}.mask", MASK * scores)
        ss.save(f"{k}.softmax", (4 if c.autocast else e) * scores)
        if c.autocast:
            ss.save(f"{k}.probs16", 2 * scores)             # the fp32 probs' copy the second matmul keeps
        ss.save(f"{k}.v", e * b * kv * inner)
        if trained:
            ss.save(f"{k}.to_out_in", e * b * lat * inner)
        ss.save(f"{k}.ff_in", r * b * lat * d + copies)     # the feed-forward's LayerNorm input, stats
        ss.save(f"{k}.ff_stats", 8 * b * lat)
        if trained:
            ss.save(f"{k}.ff_norm_out", (2 if c.autocast else r) * b * lat * d)     # fc1's input
        ss.save(f"{k}.fc1_out", e * b * lat * mult * d)     # GELU's input
        if trained:
            ss.save(f"{k}.gelu_out", e * b * lat * mult * d)
    if trained:
        ss.save("projector_in", e * b * lat * d)
    ss.save("proj_norm_in", (4 if c.autocast else e) * b * lat * h + (8 * h if copies else 0))
    ss.save("proj_norm_stats", 8 * b * lat)
    return ss.total


def saprot_graph(arch: ModelArch, c: Ctx, proteins: int) -> int:
    """Under checkpointing PreTrainedModel.gradient_checkpointing_enable calls enable_input_require_grads, which
    hooks every PreTrainedModel's input embeddings, the frozen EvollaSaProtProteinEncoder's too (as GIT's tower:
    memory/blocks_git.py tower_graph), so its output needs a gradient: the embeddings' token-dropout masks, each
    checkpointed EvollaSaProtLayer's input, the hooked embedding output and the rotary tables, emb_layer_norm_after's
    input (fp32 under autocast, with its fp32 weight copies) and stats (traced: evolla-full-pure-sdpa-gc, evolla-lora-mixed-sdpa-gc)."""
    d = _shape(arch, f"{_R}.layers.0.0.to_q.weight")[1]
    n = len({tt.name.split(".")[5] for tt in arch.tensors if tt.name.startswith(_ENC + ".encoder.layer.")})
    b, r = c.batch, 4 if c.autocast else c.res
    copies = 8 * d if c.autocast and c.res == 2 else 0
    # the hooked word-embedding output, the rotary cos / sin (1, P, head_dim) at SaProt's head_dim of 64 (1280 / 20;
    # the heads are not in the tensors), the masks (bool, int64 ones, the token-dropout ratio)
    emb = c.res * b * proteins * d + 2 * c.res * proteins * 64 + 9 * b * proteins + 4 * b
    return emb + n * c.res * b * proteins * d + r * b * proteins * d + 8 * b * proteins + copies


def evolla_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple[Adapter, ...],
                  lm_head_adapter: Adapter | None, input_grads: bool):
    """memory/blocks_seq2seq.py EncDec's fields (layers, extra, ckpt_extra, head) for Evolla (module docstring);
    ``input_grads``: PEFT under checkpointing (saprot_graph's hook, the frozen resampler's graph)."""
    t, h, b = c.tokens, arch.hidden_size, c.batch
    e, proteins = 2 if c.autocast else c.e, arch.side_tokens
    layers = tuple(evolla_layer(arch, c_first if i == 0 else c, lins, adapters)
                   for i, lins in enumerate(arch.layer_linears))
    out, ck = SavedSet(), SavedSet()
    for ss, gc in ((out, False), (ck, True)):
        if c.train_base or (gc and input_grads):
            ss.save("resampler", resampler_saved(arch, c, proteins, c.train_base))
        if c.train_base:
            ss.save("protein_feats", e * b * _latents(arch) * h)      # key_protein / value_protein's input
        if c.train_base or gc:
            # the frozen encoder's output, which norm_media keeps (with its weight trained, or its input hooked)
            d = _shape(arch, f"{_R}.layers.0.0.to_q.weight")[1]
            ss.save("protein_embeds", (4 if c.autocast else c.res) * b * proteins * d)
        if gc:
            ss.save("saprot_graph", saprot_graph(arch, c, proteins))
            # the resampler's output, an argument of every checkpointed layer (fp32 under autocast: a LayerNorm's)
            ss.save("protein_feats" if not c.autocast else "protein_feats.fp32",
                    (4 if c.autocast else e) * b * _latents(arch) * h)
    head = SavedSet()
    head.save("ids_labels", 16 * t)
    head.save("rope_cos_sin", 2 * c.res * c.seq * arch.head_dim)
    y = rmsnorm(head, c, "final_norm", "resid_final", h)
    linear(head, c, y, c.res, Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    return layers, out.total, ck.total, head.total


RULES = {MODEL_TYPE: evolla_layer}
