"""What Florence-2's DaViT tower and projector keep for their backward (vision.images_per_sample images).

Read off the traced forward of Florence2Model.get_image_features on CPU tensors (tools/memtrace/vision_towers.py,
tests/data/vision_towers_trace.json; transformers 5.24 modeling_florence2.py Florence2VisionBackbone,
Florence2VisionConvEmbed, Florence2VisionSpatialBlock, Florence2VisionChannelBlock, Florence2MultiModalProjector),
with the attention kernels' saves stood in for as CUDA's SDPA keeps them (q, k, v, output, logsumexp: CPU SDPA
runs the channel attention, whose head dimension is the token count, by its fp32 math path instead). Per stage
s of a grid H x W (T tokens over the micro-batch's images, C = embed_dim[s], I = mlp_ratio·C, a heads, windows
of w x w over the grid padded to whole windows: Tp tokens), e bytes per element:

- the conv embedding: stage 0 its LayerNorm after the conv (input e·T·C, statistics 8·T); later stages the
  LayerNorm before it over the previous stage's output (its input and output, read by the conv, and statistics);
- a spatial block: conv1's input, norm1's input and statistics; the window partition (qkv's input, e·Tp·C); the
  qkv output that q, k, v view (3·e·Tp·C); the kernel's output, also proj's input (e·Tp·C), and its fp32
  logsumexp (4·a·Tp); conv2's input, norm2's input and statistics, fc1's input, fc1's and GELU's outputs
  (2·e·T·I): 5·e·T·C + 5·e·Tp·C + 4·a·Tp + 16·T + 2·e·T·I;
- a channel block (attention over each group's channels, the tokens as head dimension): conv1's input,
  norm1's input and statistics, qkv's input, q, k, v made contiguous for the kernel (their last dimension is
  strided: 3·e·T·C), the output (e·T·C), proj's input (a permuted copy, e·T·C), conv2 .. GELU as above:
  11·e·T·C + 16·T + 2·e·T·I (and a logsumexp of C floats an image);
- drop_path (drop_path_rate, 0.1 by default) keeps only its per-image random scale: nothing counted;
- the projector: image_projection's input, the pooled token and the T_last tokens (e·(T_last + 1)·C_last an
  image) and image_proj_norm's input (e·(T_last + 1)·projection_dim) and statistics.
DaViT's blocks are plain modules, not GradientCheckpointingLayers: gradient checkpointing leaves the tower as it
is (traced). The grid is the processor's resize (Florence2Processor: 768 x 768, 577 image tokens).
"""
from __future__ import annotations

from typing import Mapping


def _out(n: int, k: int, s: int, p: int) -> int:
    return (n + 2 * p - k) // s + 1


def davit_saved_bytes(spec: Mapping, images: int, e: int) -> int:
    """Bytes the DaViT tower and Florence-2's projector keep for ``images`` images (the module docstring)."""
    total, grid, prev = 0, spec["image_size"], None
    w = spec["window"]
    for s, (depth, c, heads) in enumerate(zip(spec["depths"], spec["dims"], spec["heads"])):
        grid = _out(grid, spec["kernels"][s], spec["strides"][s], spec["paddings"][s])
        t = images * grid * grid
        side = -(-grid // w) * w
        tp = images * side * side
        if prev is None:
            total += e * t * c + 8 * t                         # the LayerNorm after stage 0's conv
        else:
            pt, pc = prev
            total += 2 * e * pt * pc + 8 * pt                  # the LayerNorm before the conv
        inter = int(c * spec["mlp_ratio"])
        spatial = 5 * e * t * c + 5 * e * tp * c + 4 * heads * tp + 16 * t + 2 * e * t * inter
        channel = 11 * e * t * c + 16 * t + 4 * c * images + 2 * e * t * inter
        total += depth * (spatial + channel)
        prev = (t, c)
    t, c = prev
    n = t + images                                             # the pooled token of each image
    return total + e * n * c + e * n * spec["projection"] + 8 * n
