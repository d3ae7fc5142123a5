"""What GOT-OCR 2.0's SAM ViT (ViTDet), its neck and projector keep for their backward (vision.images_per_sample
tiles of image_size).

Read off the traced forward of GotOcr2Model.get_image_features on CPU tensors (tools/memtrace/vision_towers.py,
tests/data/vision_towers_trace.json: tiny widths and GOT's own 768 / 12 heads / 14-patch windows on a 512 px
tile; transformers 5.24 modeling_got_ocr2.py GotOcr2VisionLayer, GotOcr2VisionAttention, GotOcr2VisionNeck,
GotOcr2MultiModalProjector). GotOcr2Model supports no SDPA: the attention is written out (eager), so each
layer keeps its whole attention matrix whatever the plan's ``attention``. Per tile, e bytes per element, a G x G
patch grid (T = G^2 tokens, width h, a heads of d, MLP width I), windowed layers on the grid padded to whole
windows of w x w (Tp = (ceil(G / w) w)^2 tokens, nw windows), global layers on T:

- layer_norm1's input (e·T·h) and statistics (8·T, fp32 on CUDA); qkv's input (a global layer: layer_norm1's
  output; windowed: its padded windows, e·Tp·h); the qkv output reshaped per head (3·e·Tp·h: q, k, v are its
  slices; a copy, or with a batch of one the output itself); query * scale (e·Tp·h, kept by q·k^T);
- decomposed relative positions (use_rel_pos): the two gathered tables (e·w·w·d each; global G·G·d) and their
  int64 indices (8·w^2 each), once per layer for all tiles, and the einsums' query operands laid out for their
  batched matmuls: one copy (e·Tp·h) when the attention's batch (tiles x windows) is above one, two when it is
  one (q is then a strided view of the qkv output: traced both ways);
- softmax in fp32 and its output kept (4·a·nw·w^4; global 4·a·T^2), cast back to the input dtype for the
  probs @ v matmul (e·a·nw·w^4; global e·a·T^2) — the dominant term, above 1 GB a tile in each global layer of
  GOT-OCR 2.0 (T = 4096, 12 heads);
- proj's input, before the windows are undone (e·Tp·h); layer_norm2's input, statistics and output
  (2·e·T·h + 8·T); lin1's and GELU's outputs (2·e·T·I);
- the neck: conv1's input (the last layer's output, e·T·h), each channels-first LayerNorm's input and
  statistics and conv2's / conv_upsampler1's input (its output): 4·e·T·c + 16·T over c output_channels;
  conv_upsampler2's input (e·ceil(G/2)^2·2c) and the linear's (e·ceil(G/4)^2·text_hidden).
With activation checkpointing each layer (a GradientCheckpointingLayer) keeps its input (e·T·h); the neck and
projector as above (traced). Without use_rel_pos the rule drops the position terms (not traced).
"""
from __future__ import annotations

from typing import Mapping


def sam_layer_bytes(spec: Mapping, images: int, e: int, window: bool) -> int:
    """One GotOcr2VisionLayer over ``images`` tiles (the module docstring's rules)."""
    g, h, a = spec["grid"], spec["hidden"], spec["heads"]
    t = images * g * g
    if window:
        w = spec["window"]
        side = -(-g // w) * w
        tp, batch, span = images * side * side, images * (side // w) ** 2, w
        scores = a * batch * w ** 4
    else:
        tp, batch, span, scores = t, images, g, a * images * (g * g) ** 2
    total = e * t * h + 8 * t                                 # layer_norm1's input, statistics
    total += e * tp * h + 3 * e * tp * h + e * tp * h         # qkv's input, its output per head, query * scale
    if spec["rel_pos"]:
        d = h // a
        total += 2 * e * span * span * d + 2 * 8 * span * span         # the gathered tables, their indices
        total += (2 if batch == 1 else 1) * e * tp * h                  # the einsums' query operands
    total += (4 + e) * scores                                 # fp32 softmax output, its cast
    total += e * tp * h                                       # proj's input
    total += 2 * e * t * h + 8 * t + 2 * e * t * spec["inter"]   # layer_norm2, lin1 and GELU outputs
    return total


def sam_saved_bytes(spec: Mapping, images: int, e: int, checkpointed: bool) -> int:
    g, h, c = spec["grid"], spec["hidden"], spec["channels"]
    t = images * g * g
    if checkpointed:
        total = (spec["window_layers"] + spec["global_layers"]) * e * t * h
    else:
        total = (spec["window_layers"] * sam_layer_bytes(spec, images, e, True)
                 + spec["global_layers"] * sam_layer_bytes(spec, images, e, False))
    g2 = -(-g // 2)
    g4 = -(-g2 // 2)
    total += e * t * h + 4 * e * t * c + 16 * t              # the neck
    total += images * (e * g2 * g2 * 2 * c + e * g4 * g4 * spec["text_hidden"])   # projector's conv2, linear
    return total
