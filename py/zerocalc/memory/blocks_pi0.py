"""Saved tensors of π0 (transformers 5.24 modeling_pi0.py PI0ForConditionalGeneration; model/pi0.py) fine-tuned on
its flow-matching loss, the SigLIP tower and projector frozen (vision.trainable's default). Read off fake-tensor
traces of the real step (tools/memtrace/odd_composites_trace.py pi0 rows, fixtures in
tools/memtrace/golden/odd_composites/pi0-*, held within 3 % by tests/test_odd_composites_blocks.py).

What a step runs: PI0Model.embed_prefix embeds the prompt (`input_ids.masked_fill(image_mask, 0)`, the embedding
keeping the filled ids; `torch.where(image_mask, image_embeds, inputs_embeds)` the bool mask) with the frozen tower's
image tokens; PaliGemma's Gemma language model runs the s prefix tokens with use_cache=True (memory/blocks.py
llama_block, Gemma's rules: DynamicCache.update's `cat` makes each layer's K/V a new tensor, which SDPA keeps as
it would keep k / v); the loss reaches it only through the cache's K/V, so the last layer keeps only its K/V path (kv_path) and the
final norm, on an output nobody reads, nothing.
PI0ActionTimeEmbedding turns state, noisy actions and the time's sinusoid into chunk_size + 1 suffix tokens of the
expert's width (state_proj's and action_in_proj's inputs, the concatenation action_time_mlp_in reads, SiLU's
input and output). The action expert (a GemmaModel of dit_config) runs the n = chunk_size + 1 suffix tokens:
Gemma's layer over b·n tokens, but each layer's attention reads `cat(prefix K/V, suffix K/V)` from the shared
cache, s + n rows a sample, which SDPA keeps. Its final norm; action_out_proj on the last chunk_size rows (a
contiguous copy it keeps); F.mse_loss keeps the difference and the prediction.

PI0 has no gradient checkpointing in 5.24 (the checkpointed VLM drops its cache: odd_composites_trace.NO_CKPT).
Eager (PI0 has no FlashAttention: SDPA or eager) costs each layer's (b, a, q, k) softmax by memory/blocks.py's
Gemma rule at the layer's own query / key lengths (not traced beyond the pi0-full-mixed-eager row).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, block_saved_bytes, linear, rmsnorm
from .lora import Adapter

MODEL_TYPE = "pi0"
_DIT = "model.dit.layers.0."


def _shape(arch: ModelArch, name: str) -> tuple:
    return next(tt.shape for tt in arch.tensors if tt.name == name)


def expert(arch: ModelArch) -> tuple[ModelArch, tuple[Linear, ...]]:
    """The action expert's Gemma block, read off its tensors (model/pi0.py files them outside the blocks)."""
    lins = tuple(Linear(n, _shape(arch, f"{_DIT}{p}.{n}.weight")[1], _shape(arch, f"{_DIT}{p}.{n}.weight")[0])
                 for p, n in (("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"),
                              ("self_attn", "o_proj"), ("mlp", "gate_proj"), ("mlp", "up_proj"),
                              ("mlp", "down_proj")))
    hd = arch.head_dim
    w, inter = lins[0].d_in, lins[4].d_out
    layers = len({tt.name.split(".")[3] for tt in arch.tensors if tt.name.startswith("model.dit.layers.")})
    return replace(arch, hidden_size=w, intermediate_size=inter, num_heads=lins[0].d_out // hd,
                   num_kv_heads=lins[1].d_out // hd, num_layers=layers, block_linears=lins,
                   dense_block_linears=lins), lins


def kv_path(arch: ModelArch, c: Ctx, adapters: tuple[Adapter, ...]) -> int:
    """The VLM's last layer as the loss reaches it: only through its K/V in the cache (its attention output, MLP and
    the final norm feed nothing the loss reads, and their graph dies with the VLM's output), so input_layernorm and
    k_proj / v_proj's inputs (with their adapters); the rotary's cos / sin are the stack's."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in arch.block_linears}
    ads = {ad.name: ad for ad in adapters}
    y = rmsnorm(ss, c, "ln1", "resid", arch.hidden_size, True)
    for name in ("k_proj", "v_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    return ss.total


def pi0_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple[Adapter, ...],
               lm_head_adapter: Adapter | None, input_grads: bool):
    """memory/blocks_seq2seq.py EncDec's fields (layers, extra, ckpt_extra, head) for π0 (module docstring)."""
    chunk = arch.side_tokens
    n, t, b, s, h = chunk + 1, c.tokens, c.batch, c.seq, arch.hidden_size
    e = 2 if c.autocast else c.e
    ex, elins = expert(arch)
    by_name = {lin.name: lin for lin in elins}
    eads = tuple(Adapter(ad.name, by_name[ad.name].d_in, by_name[ad.name].d_out, ad.rank)
                 for ad in adapters if ad.name in by_name)
    layers = [block_saved_bytes(arch, c_first if i == 0 else c, arch.block_linears, adapters)
              for i in range(arch.num_layers - 1)]
    layers.append(kv_path(arch, c_first if arch.num_layers == 1 else c, adapters))
    # the expert over b·n suffix tokens; its layer 0 reads the action embedding, trained only in full fine-tuning
    ce = replace(c, tokens=b * n, seq=n)
    prefix_kv = 2 * e * b * s * ex.num_kv_heads * ex.head_dim        # the cache's prefix rows in the cat
    for i in range(ex.num_layers):
        layers.append(block_saved_bytes(ex, replace(ce, first_layer=c_first.first_layer and i == 0), elins, eads)
                      + prefix_kv)
    ss = SavedSet()
    ca = replace(c, tokens=b * chunk, seq=chunk)                      # the action rows
    a, w = _shape(arch, "action_out_proj.weight")[0], ex.hidden_size
    states = _shape(arch, "embed_action_time.state_proj.weight")[1]
    if c.train_base:
        ss.save("filled_ids", 8 * t)                                  # the embedding's masked_fill(ids)
        ss.save("image_mask", t)                                      # torch.where's bool condition
        ss.save("state_proj.in", c.res * b * states)
        ss.save("action_in_proj.in", c.res * b * chunk * a)
        linear(ss, ca, "action_time_cat", e, Linear("action_time_mlp_in", 2 * w, w), None)
        ss.save("silu.in", e * b * chunk * w)
        linear(ss, ca, "silu.out", e, Linear("action_time_mlp_out", w, w), None)
    ss.save("rope_cos_sin", 2 * c.res * (s + n) * arch.head_dim)
    y = rmsnorm(ss, ce, "dit_norm", "dit_last", w, True)
    if c.train_base:
        # the contiguous slice of the last chunk_size rows
        linear(ss, ca, "dit_out_rows", e, Linear("action_out_proj", w, a), None)
    ss.save("mse.diff", c.res * b * chunk * a)
    ss.save("mse.pred", e * b * chunk * a)
    del y
    head = SavedSet()
    # the batch, alive the whole step: pixel values (one camera), state, noise, actions, the time, the prompt copy
    emb = "model.vlm.vision_tower.embeddings."
    # the image: channels x patch² a patch (the patch embedding's input width) x the position rows
    pixels = _shape(arch, emb + "patch_embedding.weight")[1] * _shape(arch, emb + "position_embedding.weight")[0]
    head.save("batch", c.res * b * (pixels + states + 2 * chunk * a) + 4 * b + 8 * t)
    return tuple(layers), ss.total, ss.total, head.total
