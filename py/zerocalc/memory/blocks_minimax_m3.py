"""Saved tensors of MiniMax-M3's decoder layer (transformers 5.24 modeling_minimax_m3_vl.py MiniMaxM3VLDecoderLayer,
the language model of minimax_m3_vl): Gemma-style norms, GQA with per-head q/k norms, and gpt-oss's clamped
SwiGLU in the dense MLP, the shared expert and the routed experts.

With t = b·s tokens, a query and kv key/value heads of d dims:
- MiniMaxM3VLRMSNorm (input_layernorm, post_attention_layernorm, q_norm, k_norm) normalises in fp32 and
  multiplies by `1 + weight` in fp32 before the cast back (memory/blocks.py rmsnorm's Gemma rule: the fp32
  input copy, rsqrt, and under full fine-tuning the fp32 normalised tensor);
- attention: q_proj / k_proj / v_proj read input_layernorm's output; rotary embedding (partial) concatenates
  new query and key tensors, which SDPA keeps with v_proj's output, its output and the fp32 logsumexp; o_proj
  reads the output's contiguous copy (`attn_output.reshape(...).contiguous()`). Eager: the Llama lineage's
  fp32 softmax and its 16-bit copy. A ``minimax_m3_sparse`` layer's lightning indexer (MiniMaxM3VLIndexer) only
  selects key blocks (top-k indices: no gradient reaches it, so its parameters take no optimizer state:
  memory/indexers.py) and its graph dies with its scores; the layer's SDPA gets the (b, a, s, s) 16-bit block
  mask (build_block_mask), so it keeps that mask and K / V repeated to every query head;
- MiniMaxM3VLDenseMLP (the dense layers' mlp, the MoE's shared_experts): gate_up_proj's output (clamp keeps
  its input), then the clamped gate, sigmoid(gate·alpha), the glu product, up + 1 and the product down_proj
  reads: 5 tensors of the intermediate width beside gate_up's 2;
- the routed experts: memory/blocks.py sparse_moe with gpt-oss's gate rule (the sigmoid router's fp32 output
  in place of the softmax, the same routing indices).
The modelling code has no FlashAttention-2 (_supports_flash_attn False): a "flash" plan runs as SDPA (no mask:
the CPU trace's flash kernel, a GPU's SDPA flash kernel).

Traced: tools/memtrace/families.py minimax_m3 (tools/memtrace/golden/families/minimax_m3-*, held within 3 % by
tests/test_family_grid.py)."""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, linear, rmsnorm, sparse_moe
from .lora import Adapter

MODEL_TYPES = ("minimax_m3_vl", "minimax_m3_vl_text")


def clamped_swiglu(ss: SavedSet, c: Ctx, key: str, x: str, x_bytes: int, gate_up: Linear, down: Linear,
                   adapters: dict) -> None:
    """MiniMaxM3VLDenseMLP.forward: down((clamp(up) + 1) · clamp(gate) · sigmoid(clamp(gate) · alpha))."""
    e = 2 if c.autocast else c.e
    n = c.tokens * down.d_in
    linear(ss, c, x, x_bytes, gate_up, adapters.get(gate_up.name))
    ss.save(f"{key}.gate_up", e * 2 * n)                         # the clamps keep their inputs (chunk views)
    ss.save(f"{key}.act", e * n * 4)                             # clamped gate, sigmoid, glu, up + 1
    if c.train_base:
        ss.save(f"{key}.prod", e * n)
    elif adapters.get(down.name):
        linear(ss, replace(c, first_layer=False), f"{key}.prod", e, down, adapters[down.name])


def minimax_m3_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer's saved bytes (the module docstring's list)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    h = arch.hidden_size
    e = 2 if c.autocast else c.e
    if c.attention == "flash":
        c = replace(c, attention="sdpa")
    c2 = replace(c, first_layer=False) if c.first_layer else c
    y = rmsnorm(ss, c, "ln1", "resid", h, gemma=True)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    rmsnorm(ss, c2, "q_norm", "q", arch.q_dim, True, arch.num_heads, e)
    rmsnorm(ss, c2, "k_norm", "k", arch.kv_dim, True, arch.num_kv_heads, e)
    if "indexer.q_proj" in lins and c2.attention != "eager":
        # a sparse layer hands SDPA the indexer's dense (b, a, s, s) additive block mask, so repeat_kv copies K and V
        # to every query head (no enable_gqa with a mask) and SDPA keeps the copies and the mask
        ss.save("attn.k", e * c.tokens * arch.q_dim)
        ss.save("attn.v", e * c.tokens * arch.q_dim)
        ss.save("attn.block_mask", e * c.batch * arch.num_heads * c.seq * c.seq)
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", arch.q_dim, arch.kv_dim)
    if c2.attention != "eager":
        out = "attn.out_contiguous"
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, gemma=True)
    if arch.moe and "down_proj" in experts:
        # the shared expert is the clamped SwiGLU below, not sparse_moe's plain one
        routed = replace(arch, model_type="gpt_oss", moe=replace(arch.moe, shared_intermediate=0))
        sparse_moe(ss, c2, routed, y2, c.res, lins, ads)
        clamped_swiglu(ss, c2, "shared", y2, c.res, lins["gate_up_proj"], lins["down_proj"], ads)
    else:
        clamped_swiglu(ss, c2, "mlp", y2, c.res, lins["gate_up_proj"], lins["down_proj"], ads)
    return ss.total
