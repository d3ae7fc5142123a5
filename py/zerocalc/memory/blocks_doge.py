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
- the CDMoE feed-forward (is_moe, DogeCDMoE.forward): the shared MLP (llama_block's gated MLP) and the product-key
  retrieval experts (_cdmoe).
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear, llama_block
from .lora import Adapter, block_linears_per_layer


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
    lins = {lin.name: lin for lin in linears}
    if "router_gate" in lins:
        _cdmoe(ss, c, arch, lins["router_gate"], lins["retrieval_experts"].d_out // 2,
               {ad.name: ad for ad in adapters})
    return total + ss.total


def _cdmoe(ss: SavedSet, c: Ctx, arch: ModelArch, router: Linear, k: int, ads: dict) -> None:
    """DogeCDMoE.forward beside the shared MLP llama_block books: router_gate reads the norm output; the two top-ks
    keep their int64 indices ((2, t, num_keys) and (t, k)), gather its (t, k) output indices; down_embed(indices) and
    up_embed(indices), (t, k, h) each, kept by the two matmuls (16-bit copies of the fp32 embeddings under
    autocast, with a 16-bit copy of the norm output for the first); the (t, k) expert weights: the first matmul's
    output (the activation's input), the activation's output, the softmax's routing weights and their product
    (the second matmul's input). ``k``: num_experts_per_tok (model/doge.py's retrieval_experts pseudo-linear, h ->
    2·k: the two matmuls' multiply-adds)."""
    t, h, e = c.tokens, arch.hidden_size, 2 if c.autocast else c.e
    keys = router.d_out // 2
    if c.autocast:
        linear(ss, c, "ln2.out", c.res, router, ads.get("router_gate"))   # its own 16-bit copy of the norm output
    # (else the norm output router_gate keeps is the shared MLP's gate_proj / up_proj input, booked by llama_block)
    ss.save("cdmoe.topk_keys", 8 * 2 * t * keys)
    ss.save("cdmoe.topk", 2 * 8 * t * k)              # the top-k's position indices and gather's expert indices
    ss.save("cdmoe.embeds", 2 * e * t * k * h)
    if c.autocast:
        ss.save("cdmoe.hidden16", 2 * t * h)
    ss.save("cdmoe.weights", 4 * e * t * k)


def cdmoe_forward_locals(arch: ModelArch, full_fp32: bool, e: int, t: int) -> int:
    """A moment at the end of a CDMoE layer's forward (DogeCDMoE.forward's `hidden_states + experts_states`), where
    its locals are still alive beside the layer's saved set: the product-key sums over every key pair, all_scores
    (t, keys², the router's dtype e) and the int64 all_indices, both referenced until the forward returns; and under
    bf16-mixed over fp32 weights (`full_fp32`: full fine-tuning, fp32 master weights) down_embed(indices) and
    up_embed(indices), fp32 (t, k, h) lookups of the fp32 embeddings beside the 16-bit copies autocast makes of them
    for the two matmuls (which those keep: _cdmoe's cdmoe.embeds). Without checkpointing in the top layer's forward
    (memory/terms.py fwd_top: every layer's saved set, no logits yet), with it in the recomputed layer's forward.
    Traced (tools/memtrace/own_blocks_trace.py doge): doge-4l-moe-full-mixed-s512 peaks there in the forward (two
    fp32 128 MiB lookups, the 64 MiB int64 indices, the 16 MiB scores), doge-4l-moe-full-s512-ckpt in the recompute
    (indices and scores); before this moment the engine peaked at the loss's backward: activations -25.4 % and
    -96.6 %, logits +0.188 GiB."""
    if arch.model_type != "doge":
        return 0
    k = {lin.name: lin.d_out // 2 for lins in block_linears_per_layer(arch) for lin in lins
         if lin.name in ("retrieval_experts", "router_gate")}
    if "retrieval_experts" not in k:
        return 0
    keys = k["router_gate"]
    return (8 + e) * t * keys * keys + (2 * 4 * t * k["retrieval_experts"] * arch.hidden_size if full_fp32 else 0)
