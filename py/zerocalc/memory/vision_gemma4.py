"""What Gemma 4's vision tower and embed_vision keep for their backward, trained (``vision.trainable`` not frozen).

Read off the traced forward on CPU tensors (tools/memtrace/gemma4_vision_trace.py, tests/data/gemma4_vision_trace.json;
transformers 5.24 modeling_gemma4.py Gemma4VisionModel / Gemma4VisionEncoderLayer / Gemma4VisionAttention /
Gemma4RMSNorm / Gemma4VisionPooler, Gemma4Model.get_image_features, Gemma4MultimodalEmbedder). Every image is
padded to tokens_per_image·k² patches (Gemma4ImageProcessor's max_patches, k = pooling_kernel_size; the padding
runs too); over the batch's n patches and t = n / k² soft tokens, e bytes, width h, A = heads·head_dim:

- each encoder layer: the four h-wide Gemma4RMSNorms compute in fp32 and keep the input's fp32 copy, its mean
  square and rsqrt (two fp32 per row), the normalized fp32 tensor and the weight's fp32 copy: 8·n·h + 8·n + 4·h
  each; q_norm / k_norm the same over n·heads rows of head_dim (8·n·A + 8·n·heads + 4·head_dim each), v_norm
  (no weight) its fp32 input and the two statistics (4·n·A + 8·n·heads); q_proj's (k/v's) input and the MLP's
  input (e·n·h each); SDPA's q, k, v and output (o_proj reads its view: 4·e·n·A) and its fp32 logsumexp
  (4·n·heads); the gated MLP's gate, GELU, up and product (down_proj's input): 4·e·n·I;
- once: input_proj's input (e·n·3·patch²), the int64 (x, y) positions the two tables are gathered by (16·n) and
  the padding mask (a bool each), the 2-D rotary cos and sin (2·e·n·head_dim, shared by every layer), the
  pooler's fp32 one-hot averaging weights (4·t_img·n_img an image) and the pooler mask (t bools), standardize's
  fp32 scale (4·h), embed_vision's unweighted fp32 RMSNorm (4·t·h + 8·t) and its projection's input (e·t·h).
With activation checkpointing each encoder layer keeps its input (e·n·h) and the once-only terms stay."""
from __future__ import annotations

from typing import Mapping


def gemma4_vision_saved_bytes(spec: Mapping, images: int, e: int, checkpointed: bool) -> int:
    h, inter, heads, hd = spec["hidden"], spec["inter"], spec["heads"], spec["head_dim"]
    a, k2, t_img = heads * hd, spec["pooling"] ** 2, spec["tokens_per_image"]
    n_img = t_img * k2
    n, t = images * n_img, images * t_img
    if checkpointed:
        per_layer = e * n * h
    else:
        norms = 4 * (8 * n * h + 8 * n + 4 * h) + 2 * (8 * n * a + 8 * n * heads + 4 * hd) + 4 * n * a + 8 * n * heads
        per_layer = norms + 2 * e * n * h + 4 * e * n * a + 4 * n * heads + 4 * e * n * inter
    once = (e * n * 3 * spec["patch"] ** 2 + 16 * n + n + 2 * e * n * hd + 4 * images * t_img * n_img + t
            + (4 * h if spec["standardize"] else 0) + 4 * t * h + 8 * t + e * t * h)
    return spec["layers_run"] * per_layer + once
