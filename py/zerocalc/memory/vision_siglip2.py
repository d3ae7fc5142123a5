"""What LFM2-VL's SigLIP 2 NaFlex tower and pixel-unshuffle projector keep for their backward.

Read off the traced forward on CPU tensors (tools/memtrace/vision_towers.py lfm2_vl cases,
tests/data/vision_towers_trace.json; transformers 5.24 modeling_siglip2.py Siglip2VisionEmbeddings /
Siglip2EncoderLayer, modeling_lfm2_vl.py Lfm2VlModel.get_image_features / Lfm2VlMultiModalProjector), over the
batch's n patches (vision.tokens_per_sample x downsample_factor^2 a sample: each image token is factor^2
patches), e bytes, width h:

- resize_positional_embeddings: the bilinear (antialiased) resize of the num_patches-position table written as
  fp32 interpolation weights, one row per patch: 4·n·num_patches;
- each encoder layer SigLIP's rule (memory/vision.py: the layer input, layer_norm1's output, q, k, v, SDPA's
  output, the residual sum, layer_norm2's output, fc1's and GELU's outputs, logsumexp, statistics);
- post_layernorm's input and statistics; the token gather (`last_hidden_state.reshape(-1, h)[patch_index]`)
  keeps its int64 index (one per patch) and its output, which pixel_unshuffle views for the projector's
  LayerNorm (projector_use_layernorm): its statistics over n / factor^2 rows and its output (linear_1's input);
  linear_1's and GELU's outputs over n / factor^2 rows of projector_hidden_size; the token mask (a bool each).
With activation checkpointing each encoder layer keeps its input (e·n·h). Images of equal size are assumed:
a batch padded to its largest image (pixel_attention_mask) runs the padding too.
"""
from __future__ import annotations

from typing import Mapping


def lfm2_vl_saved_bytes(spec: Mapping, n: int, e: int, checkpointed: bool) -> int:
    h = spec["hidden"]
    if checkpointed:
        per_layer = e * n * h
    else:
        per_layer = e * n * (8 * h + spec["mlp_tensors"] * spec["inter"]) + 4 * spec["heads"] * n + 16 * n
    tokens = n // spec["factor"] ** 2
    projector = e * n * h + (8 * tokens + e * n * h if spec["layernorm"] else 0) + 2 * e * tokens * spec["mid"]
    return (4 * n * spec["positions"] + spec["layers_run"] * per_layer + e * n * h + 8 * n + 8 * n + projector
            + tokens)
