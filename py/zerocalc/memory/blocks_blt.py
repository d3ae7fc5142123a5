"""Saved tensors of BLT, the Byte Latent Transformer (transformers 5.24 modeling_blt.py BltForCausalLM), read off
fake-tensor traces of the real step (tools/memtrace/own_attention_trace.py blt, tests/data/blt_trace.json, held
within 3 % by tests/test_blt_blocks.py).

The patches: BltModel.forward's entropy patching depends on the data (the frozen BltPatcher's entropies against
patching_threshold); the engine assumes patches of BltConfig.patch_size bytes, s / patch_size per sequence (the
trace feeds exactly that: own_attention_trace.py blt_fixed_patches). The patcher is frozen and fed ids: it keeps
nothing. Per step:
- compute_hash_embeddings: local_encoder.embed_tokens and one encoder_hash_tok_embedding lookup per hash group,
  each embedding's backward keeping its int64 ids (8·t per lookup, where the embeddings train);
- BltLocalEncoder: dropout (0 by default), its BltTransformerLayers over the s bytes (Llama's layer: blt_local),
  then after the last (or every, cross_attn_all_layers) layer patch_reduce's scatter_reduce("amax") keeps its
  source (the layer output), its zeros input, its result and the int64 patch ids; patch_embedding_projection reads
  the result; a BltCrossAttention with the P·k patch queries over the s bytes (_cross);
- BltGlobalTransformer over the P patches (the model's blocks: blt_global_layer, Llama's layer at P tokens);
- BltLocalDecoder: patch_embedding_projection reads the global output; per layer (every one: the default
  cross_attn_all_layers) a BltCrossAttention of the s bytes over the P·k patch states, then a BltTransformerLayer;
  the final BltRMSNorm (the fp32 upcast, the normalised tensor, rsqrt) and lm_head over the decoder's width;
- the rotary cos / sin of each stack ((1, n, head_dim) each, kept by the rotation) and the ids / labels.
BltCrossAttention.forward: q_norm and k_norm (BltRMSNorm: LlamaRMSNorm's saved set) on the queries and the
key / value states, q / k / v / o_proj, SDPA's q, k, v, output and fp32 logsumexp over the query length.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, linear, llama_block, rmsnorm
from .lora import Adapter


def _patches(arch: ModelArch, seq: int) -> int:
    return seq // arch.own["patch_size"]


def blt_global_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One BltTransformerLayer of the global transformer, over the P patches of each sequence."""
    p = _patches(arch, c.seq)
    return llama_block(arch, replace(c, tokens=p * c.batch, seq=p), linears, adapters)


def _local(arch: ModelArch, side: str) -> tuple[ModelArch, tuple[Linear, ...]]:
    """A local stack's layer as an arch view and its linears (model/blt.py own[side]: h, heads, kv, hd, I)."""
    h, heads, kv, hd, inter = arch.own[side]["dims"]
    view = replace(arch, hidden_size=h, num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter)
    lins = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h), Linear("gate_proj", h, inter), Linear("up_proj", h, inter),
            Linear("down_proj", inter, h))
    return view, lins


def _cross(ss: SavedSet, c: Ctx, view: ModelArch, key: str, q: tuple[str, int, int], kv: tuple[str, int, int]) -> None:
    """A BltCrossAttention (module docstring): ``q`` / ``kv`` are (the input's key, its bytes per element, its
    positions per sequence) for the queries and for the key / value states."""
    h, b = view.hidden_size, c.batch
    cq, ckv = replace(c, tokens=q[2] * b, seq=q[2]), replace(c, tokens=kv[2] * b, seq=kv[2])
    y = rmsnorm(ss, cq, f"{key}.q_norm", q[0], h, x_bytes=q[1])
    linear(ss, cq, y, c.res, Linear("q_proj", h, view.q_dim), None)
    y = rmsnorm(ss, ckv, f"{key}.k_norm", kv[0], h, x_bytes=kv[1])
    for name, d in (("k_proj", view.kv_dim), ("v_proj", view.kv_dim)):
        linear(ss, ckv, y, c.res, Linear(name, h, d), None)
    e = 2 if c.autocast else c.e
    ss.save(f"{key}.q", e * cq.tokens * view.q_dim)
    ss.save(f"{key}.kv", 2 * e * ckv.tokens * view.kv_dim)
    ss.save(f"{key}.out", e * cq.tokens * view.q_dim)
    ss.save(f"{key}.lse", 4 * view.num_heads * cq.tokens)
    linear(ss, cq, f"{key}.out", e, Linear("o_proj", view.q_dim, h), None)


def blt_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Everything outside the global layers (module docstring). Returns lm_head's input and its bytes; its saved
    copy is booked here at the decoder's width (memory/activations.py books lm_head over hidden_size, the global
    width, under a key already taken here)."""
    own, t, b = arch.own, c.tokens, c.batch
    p = _patches(arch, seq)
    pk = p * own["cross_attn_k"]
    e = 2 if c.autocast else c.e
    ss.save("ids_labels", 16 * t)
    if c.train_base:
        ss.save("blt.hash_ids", 8 * t * (1 + own["hash_lookups"]))
    enc, enc_lins = _local(arch, "encoder")
    dec, dec_lins = _local(arch, "decoder")
    h_e, h_d = enc.hidden_size, dec.hidden_size
    for view, n in ((enc, seq), (arch, p), (dec, seq)):
        ss.save(f"blt.rope.{view.hidden_size}.{n}", 2 * c.res * n * view.head_dim)
    for i in range(own["encoder"]["layers"]):
        ss.save(f"blt.enc{i}", llama_block(enc, c, enc_lins, ()))
    # patch_reduce: the source (the encoder output), zeros, the amax result, the patch ids; the result is
    # patch_embedding_projection's input
    cp = replace(c, tokens=b * p, seq=p)
    ss.save("blt.enc_out", c.res * t * h_e)
    ss.save("blt.reduce", 2 * c.res * b * p * h_e + 8 * t)
    linear(ss, cp, "blt.reduce.out", c.res, Linear("patch_embedding_projection", h_e, h_e * own["cross_attn_k"]),
           None)
    for i in range(own["encoder"]["cross_layers"]):
        q_in = ("blt.patch_embeds", e, pk) if i == 0 else (f"blt.enc_cross{i - 1}.sum", c.res, pk)
        _cross(ss, c, enc, f"blt.enc_cross{i}", q_in, ("blt.enc_out", c.res, seq))
    linear(ss, cp, "blt.global_out", c.res, Linear("patch_embedding_projection", arch.hidden_size,
                                                  h_d * own["cross_attn_k"]), None)
    for i in range(own["decoder"]["layers"]):
        if i < own["decoder"]["cross_layers"]:
            q_in = ("blt.enc_out", c.res, seq) if i == 0 else (f"blt.dec{i - 1}.out", c.res, seq)
            _cross(ss, c, dec, f"blt.dec_cross{i}", q_in, ("blt.dec_patch_embeds", e, pk))
        ss.save(f"blt.dec{i}", llama_block(dec, c, dec_lins, ()))
    y = rmsnorm(ss, c, "blt.norm", f"blt.dec{own['decoder']['layers'] - 1}.out", h_d)
    if c.train_base:
        key = f"{y}.bf16.lm_head" if c.autocast and c.res == 4 else y
        ss.save(key, (2 if c.autocast else c.res) * t * h_d)
    return y, c.res


def blt_checkpointed(arch: ModelArch, c: Ctx) -> int:
    """Full checkpointing (every BltTransformerLayer is a GradientCheckpointingLayer; the cross-attentions are not):
    the correction to memory/activations.py's stack (each global layer's input over b·s tokens) and blt_head's
    local layers (their whole saved sets): each local layer keeps its input (the stream's dtype), each global layer
    its input over the b·P patches. Traced: blt-2l-full-s512-ckpt."""
    own, t = arch.own, c.tokens
    p = _patches(arch, c.seq) * c.batch
    corr = arch.num_layers * c.res * arch.hidden_size * (p - t)
    for side in ("encoder", "decoder"):
        view, lins = _local(arch, side)
        corr += own[side]["layers"] * (c.res * t * view.hidden_size - llama_block(view, c, lins, ()))
    return corr
