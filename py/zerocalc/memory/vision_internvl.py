"""What InternVL's InternViT tower and projector keep for their backward (vision.images_per_sample tiles).

Read off the traced forward of InternVLModel.get_image_features on CPU tensors (tools/memtrace/vision_internvl.py,
tests/data/vision_internvl_trace.json; transformers 5.24 modeling_internvl.py InternVLVisionLayer,
InternVLMultiModalProjector), per token n of the micro-batch's tiles (patches plus the class token), e bytes
per element, h the tower width, I its MLP width, for each layer the selected feature depends on:

- layernorm_before and layernorm_after: a LayerNorm keeps its input and its output (e·n·h each) and fp32 mean
  and rstd (8·n; bf16 on CPU); an RMSNorm (norm_type rms_norm) its fp32 upcast (4·n·h), the cast back and the
  output (2·e·n·h) and the fp32 rsqrt (4·n);
- q_proj, k_proj, v_proj outputs (e·n·h each; with use_qk_norm q and k go through an RMSNorm each, which keeps
  the above instead of the projection's output), SDPA's output, which is also projection_layer's input (the
  kernel's output is laid out (b, s, heads, d), so the transpose back copies nothing: e·n·h), its fp32
  logsumexp per head (4·heads·n);
- projection_layer's and fc2's outputs, kept by the layer-scale products lambda_1 · x and lambda_2 · x
  (e·n·h each); fc1's and GELU's outputs (e·n·I each; QuickGELU one more);
- with use_mean_pooling false and vision_feature_layer -1, the tower's final LayerNorm keeps its input and
  statistics (its output is sliced and copied by pixel_shuffle);
- the projector, on the n' = patches / shuffle^2 tokens of width shuffle^2·h a tile: LayerNorm's input (the
  pixel-shuffled copy) and output (e·n'·shuffle^2·h each) and statistics (8·n'), linear_1's and GELU's outputs
  (e·n'·text_hidden each).
flash_attention_2 (flash_attn_func on (b, s, heads, d) views) keeps the same as SDPA (traced with the kernel's
saves stood in for). With activation checkpointing each layer (a GradientCheckpointingLayer) keeps its input (e·n·h). Layers after
the selected feature layer run, but nothing reaches the loss through them.
"""
from __future__ import annotations

from typing import Mapping


def internvit_norm_bytes(norm: str, n: int, h: int, e: int) -> int:
    if norm == "rmsnorm":
        return 4 * n * h + 2 * e * n * h + 4 * n     # fp32 upcast, cast back, output; rsqrt
    return 2 * e * n * h + 8 * n                     # input, output; fp32 mean and rstd


def internvit_layer_bytes(spec: Mapping, n: int, e: int) -> int:
    """One InternVLVisionLayer without checkpointing (the module docstring's rules)."""
    h, inter = spec["hidden"], spec["inter"]
    norms = 2 * internvit_norm_bytes(spec["norm"], n, h, e)
    qk = 2 * internvit_norm_bytes("rmsnorm", n, h, e) if spec["qk_norm"] else 2 * e * n * h
    attn = qk + e * n * h + e * n * h + 4 * spec["heads"] * n          # (q, k), v, SDPA out, logsumexp
    return norms + attn + 2 * e * n * h + (1 + spec["act_tensors"]) * e * n * inter   # layer-scale inputs, MLP


def internvit_saved_bytes(spec: Mapping, tiles: int, e: int, checkpointed: bool) -> int:
    h = spec["hidden"]
    n = tiles * (spec["patches"] + 1)                # the class token
    per_layer = e * n * h if checkpointed else internvit_layer_bytes(spec, n, e)
    total = spec["layers_run"] * per_layer
    if spec["final_norm"]:
        total += e * n * h + 8 * n                   # the final LayerNorm's input and statistics
    tokens = tiles * spec["patches"] // spec["shuffle"] ** 2
    total += 2 * e * tiles * spec["patches"] * h + 8 * tokens          # projector LayerNorm input, output, stats
    total += 2 * e * tokens * spec["text_hidden"]                       # linear_1's and GELU's outputs
    return total
