"""Saved tensors of Mistral Large 4's decoder layer (transformers 5.24 modeling_mistral_large4.py
MistralLarge4TextDecoderLayer): latent attention without a q latent, per-head softmax scaling, the DSA indexer,
then the dense SwiGLU MLP or DeepSeek's routed experts with a shared expert (memory/blocks.py's rules).

With t = b·s tokens, a heads, a query head of dq = qk_nope + qk_rope dims, a value head of dv, the latent rank r
and the layer's rope dims R (0 in a NoPE layer: no_rope_layers[i] == 0, its rope dims moved to the nope part),
all in the 16-bit compute dtype unless said:
- input_layernorm as the Llama block's (memory/blocks.py rmsnorm); q_proj and kv_a_proj_with_mqa read its output;
- kv_a_layernorm over the latent (r): its fp32 input, rsqrt, normalised tensor; its output is kv_b_proj's input;
- the rotary embedding's learned ``alpha`` (MistralLarge4TextRotaryEmbedding) makes cos / sin need a gradient
  when it trains (full fine-tuning): the interleaved rotation's products (apply_rotary_pos_emb_interleave
  `q[..., 0::2] * cos`) keep strided views of q_proj's output (t·a·dq) and of kv_a_proj_with_mqa's (t·(r + R));
  none in a NoPE layer or under LoRA;
- MistralLarge4TextSoftmaxScaling: `query_states * scale` keeps the concatenated query (t·a·dq) for the
  scale's gradient (full fine-tuning only) and the (1, a, s) scale; scale · log_pos keeps log_pos (1, s);
- expand_kv: kv_b_proj's output (t·a·(nope + dv)) stays alive as SDPA's value (a view of it), the key a new
  tensor (t·a·dq) written by copy_;
- the indexer runs under torch.no_grad (MistralLarge4TextIndexer.forward): it keeps nothing, and its
  parameters get no gradient, hence no optimizer state (memory/indexers.py);
- the sparse mask: `attention_mask.masked_fill(index_mask, min)`, a new (b, 1, s, s) 16-bit tensor per layer
  (the causal mask is always built: create_causal_mask(allow_is_causal_skip=False)), which SDPA keeps with the
  scaled query, key, value, its output and the fp32 logsumexp; o_proj reads the output's contiguous copy
  (`attn_output.reshape(...).contiguous()` of the transposed output). Eager attention: the Llama lineage's
  fp32 softmax and its 16-bit copy (memory/blocks.py attention_core), the mask added, not kept;
- post_attention_layernorm, then the MLP: memory/blocks.py gated_mlp or sparse_moe (DeepSeek's fp32 router).
The modelling code has no FlashAttention-2 (_supports_flash_attn False): a "flash" plan runs as SDPA.

Traced: tools/memtrace/families.py mistral_large4 (tools/memtrace/golden/families/mistral_large4-*, held within
3 % by tests/test_family_grid.py)."""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear, rmsnorm, sparse_moe
from .blocks_hy_v4 import MODEL_TYPES as HY_V4, hy_v4_checkpointed
from .ckpt_inputs import checkpointed_beyond
from .lora import Adapter


def latent_dims(arch: ModelArch, lins: dict) -> tuple[int, int, int, int]:
    """(query head dq, value head dv, this layer's nope dims, this layer's rope dims) from its linears:
    q_proj is a·dq wide, o_proj reads a·dv, kv_b_proj writes a·(nope + dv) with nope = dq - R."""
    a = arch.num_heads
    dq, dv = lins["q_proj"].d_out // a, lins["o_proj"].d_in // a
    nope = lins["kv_b_proj"].d_out // a - dv
    return dq, dv, nope, dq - nope


def sparse_mask_bytes(c: Ctx) -> int:
    """The layer's (b, 1, s, s) mask with the indexer's unselected keys filled, kept by SDPA (not by eager)."""
    if c.attention == "eager":
        return 0
    return (2 if c.autocast else c.e) * c.batch * c.seq * c.seq


MODEL_TYPES = ("mistral_large4", "mistral_large4_text")


def checkpointed_topk(arch: ModelArch, batch: int, seq: int, res: int = 2, lora: bool = False) -> int:
    """Under full activation checkpointing: every layer after the first is called with the previous layer's
    top-k indices (MistralLarge4TextModel.forward `prev_topk_indices=topk_indices`, int32 (b, s, min(index_topk,
    s))), which the non-reentrant checkpoint keeps as an input until that layer's backward: (L - 1) of them.
    Without checkpointing each dies when the next layer has built its mask (nothing saves it). Plus what other
    families' checkpoints keep beyond their stream (memory/ckpt_inputs.py; `lora`: adapters only)."""
    return _topk(arch, batch, seq, res) + checkpointed_beyond(arch, batch, seq, res, lora)


def _topk(arch: ModelArch, batch: int, seq: int, res: int) -> int:
    if arch.model_type in HY_V4:
        return hy_v4_checkpointed(arch, batch, seq, res)     # memory/blocks_hy_v4.py: its mask and shared top-k
    if arch.model_type not in MODEL_TYPES or not arch.mla:
        return 0
    return (arch.num_layers - 1) * 4 * batch * seq * min(arch.mla["index_topk"], seq)


def mistral_large4_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h, t, a = arch.hidden_size, c.tokens, arch.num_heads
    e = 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    if c.attention == "flash":
        c = replace(c, attention="sdpa")
        c2 = replace(c2, attention="sdpa")
    dq, dv, nope, rope = latent_dims(arch, lins)
    y = rmsnorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, c.res, lins["q_proj"], ads.get("q_proj"))
    kv_a = lins.get("kv_a_proj_with_mqa")
    if kv_a is not None:
        linear(ss, c, y, c.res, kv_a, ads.get("kv_a_proj_with_mqa"))
        rmsnorm(ss, c2 if "kv_a_proj_with_mqa" in ads else c, "kv_a_norm", "kv_a", kv_a.d_out - rope, x_bytes=e)
    linear(ss, c, "kv_a_norm.out", c.res, lins["kv_b_proj"], ads.get("kv_b_proj"))
    if c.train_base:
        if rope:
            ss.save("q_proj.out", e * t * a * dq)
            if kv_a is not None:
                ss.save("kv_a.out", e * t * kv_a.d_out)
        ss.save("query.cat", e * t * a * dq)
        ss.save("log_pos", e * c.seq)
    ss.save("softmax_scale", e * a * c.seq)
    # the value both kernels keep is a view of kv_b_proj's output (a·(nope + dv) per token; eager's repeat_kv is
    # the identity: as many KV heads as query heads), saved under attention_core's key first; then the scaled
    # query, the new key, the output and logsumexp (SDPA) or the fp32 softmax and its 16-bit copy (eager)
    ss.save("attn.v_rep" if c2.attention == "eager" else "attn.v", e * t * lins["kv_b_proj"].d_out)
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", a * dq, a * dq)
    ss.save("attn.mask", sparse_mask_bytes(c2))
    if c2.attention != "eager":
        out = "attn.out_contiguous"
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, c2, arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total
