"""What a Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 / EXAONE 4.5 vision tower (``model.visual``) keeps for its
backward.

Read off the traced forward of each tower on CPU tensors (tools/memtrace/vision_qwen.py,
tests/data/vision_qwen_trace.json; transformers 5.24 modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel,
modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel, modeling_qwen3_vl.py Qwen3VLVisionModel,
modeling_qwen3_5.py Qwen3_5VisionModel, modeling_exaone4_5.py Exaone4_5_VisionModel), per patch n of the
micro-batch's images (the tower sees every image's patches as one packed sequence; cu_seqlens splits the attention per image, or per window in 2.5-VL, which
changes no saved byte), e bytes per element, h the tower width, I its MLP width:

- each block's two norms: LayerNorm keeps its input and its output (read by the next linear), e·n·h each, and
  fp32 mean and rstd, 8·n (bf16 on CPU, fp32 on CUDA); Qwen2_5_VLRMSNorm keeps its fp32 upcast (4·n·h), the
  normalised tensor cast back (weight * x needs it: e·n·h), its output (e·n·h) and the fp32 rsqrt (4·n);
- attention: the fused qkv output (e·n·3h: v is a view of it), the rotated q and k cast back to the input
  dtype (2·e·n·h; the fp32 rotation keeps nothing, cos and sin need no gradient); EXAONE 4.5's grouped k/v
  (width kv = num_key_value_heads·head_dim, SDPA with enable_gqa: no repeat) make these e·n·(h + 2kv) and
  e·n·(h + kv); SDPA's output (e·n·h) and
  fp32 logsumexp per head (4·heads·n), proj's input (under SDPA the per-image / per-window chunks' outputs
  concatenated, a copy: e·n·h; under flash_attention_2 (plan attention ``flash``) the varlen kernel's one output
  viewed: nothing more);
- the MLP: fc1's output, or gate's and up's outputs and their product (gated, 2.5-VL), and the activation's
  own output(s) (QuickGELU: its sigmoid and the product; silu / GELU: one), e·n·I each;
- once: the rotary cos and sin (fp32, 2·4·n·head_dim); 2.5-VL's window index and its argsort (int64, n / 4
  merged units each: 4·n); Qwen3-VL's bilinear position-embedding indices (int64) and weights (fp32) over four
  neighbours (48·n);
- the merger: its norm over the tower width (as a block's norm), mlp.0's / linear_fc1's output and GELU's
  output over the merged width (n / merge^2 tokens of merge^2·h: e·n·h each); each Qwen3-VL deepstack merger a
  LayerNorm over the merged width (its input is a block's output, kept already: its output e·n·h and stats
  2·n), linear_fc1's and GELU's outputs (2·e·n·h); HyperCLOVA X Vision V2's projector its input
  (e·(n / merge^2)·out_hidden_size, a linear keeps its input: not traced).
With activation checkpointing each VisionBlock (a GradientCheckpointingLayer) keeps its input (e·n·h); the
rest is as above (traced). The trace's LayerNorm statistics are bf16 on CPU (2 bytes less each than on CUDA);
its flash_attention_2 cases run HF's varlen glue with the kernel's saves stood in for (q, k, v, out, lse).
Eager attention (its per-chunk probabilities) is not modelled: it is counted as SDPA.

GLM-4.1V / GLM-4.6V (modeling_glm4v.py Glm4vVisionModel; traced: tools/memtrace/vision_towers.py ``glm4v``
cases): the blocks above with RMSNorms and a gated SiLU MLP of width out_hidden_size (no rotary cos / sin kept);
once, post_conv_layernorm and post_layernorm (RMSNorms; the downsample conv reads the latter's output), the
position table's fp32 copy that grid_sample keeps (4·positions·h, once per micro-batch) and its fp32 grid (8·n);
the merger over m = n / merge^2 tokens of D = out_hidden_size: proj's input (the conv's output), its LayerNorm's
input and output and statistics, GELU's output (gate / up's input), then gate's, SiLU's and up's outputs and
their product over intermediate_size: 4·e·m·D + 8·m + 4·e·m·I.
"""
from __future__ import annotations

from typing import Mapping


def qwen_norm_bytes(spec: Mapping, n: int, e: int) -> int:
    """One norm over the tower width h for n tokens (the module docstring's first rule)."""
    h = spec["hidden"]
    if spec["norm"] == "rmsnorm":
        return 4 * n * h + 2 * e * n * h + 4 * n      # fp32 upcast, the cast back, the output; rsqrt
    return 2 * e * n * h + 8 * n                      # input, output; fp32 mean and rstd


def qwen_block_bytes(spec: Mapping, n: int, e: int, flash: bool) -> int:
    """One VisionBlock without checkpointing: two norms, attention, the MLP."""
    h, inter = spec["hidden"], spec["inter"]
    kv = spec["kv"]
    attn = e * n * (h + 2 * kv) + e * n * (h + kv) + e * n * h + 4 * spec["heads"] * n   # qkv, q/k, out, lse
    if not flash:
        attn += e * n * h                                                   # proj's input: the chunks' cat
    mlp_tensors = (3 if spec["gated"] else 1) + spec["act_tensors"]    # gate, up, product | fc1; + activation
    return 2 * qwen_norm_bytes(spec, n, e) + attn + mlp_tensors * e * n * inter


def qwen_tower_saved_bytes(spec: Mapping, n: int, e: int, checkpointed: bool, flash: bool) -> int:
    """Bytes the tower keeps for n patches (the module docstring's rules); ``flash``: flash_attention_2."""
    h = spec["hidden"]
    per_block = e * n * h if checkpointed else qwen_block_bytes(spec, n, e, flash)
    total = spec["layers"] * per_block
    total += 2 * 4 * n * (h // spec["heads"])                 # rotary cos, sin (fp32)
    if spec["windowed"]:
        total += 2 * 8 * (n // spec["merge"] ** 2)            # window_index, its argsort (int64)
    if spec["pos_embed"]:
        total += 4 * 8 * n + 4 * 4 * n                       # four neighbours' indices (int64), weights (fp32)
    total += qwen_norm_bytes(spec, n, e) + 2 * e * n * h      # merger: norm; fc1's and GELU's outputs
    total += spec["deepstack"] * (3 * e * n * h + 8 * (n // spec["merge"] ** 2))
    if spec["projector"] == "linear":
        total += e * (n // spec["merge"] ** 2) * spec["out"]
    return total


def glm4v_saved_bytes(spec: Mapping, n: int, e: int, checkpointed: bool, flash: bool) -> int:
    """Bytes GLM-4V's tower keeps for n patches (the module docstring's GLM rule)."""
    h, m, d = spec["hidden"], n // spec["merge"] ** 2, spec["out"]
    per_block = e * n * h if checkpointed else qwen_block_bytes(spec, n, e, flash)
    total = spec["layers"] * per_block + 2 * qwen_norm_bytes(spec, n, e)
    total += 4 * spec["positions"] * h + 8 * n
    return total + 4 * e * m * d + 8 * m + 4 * e * m * spec["merger_inter"]
