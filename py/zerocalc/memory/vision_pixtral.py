"""What a Pixtral vision tower and its projector keep for their backward (Mistral 3, LightOnOCR).

Read off the traced forward of Mistral3Model / LightOnOcrModel.get_image_features on CPU tensors
(tools/memtrace/vision_towers.py, tests/data/vision_towers_trace.json; transformers 5.24 modeling_pixtral.py
PixtralVisionModel, PixtralAttentionLayer; modeling_mistral3.py Mistral3MultiModalProjector, Mistral3PatchMerger;
modeling_lighton_ocr.py LightOnOcrMultiModalProjector). Every image of the micro-batch is one packed sequence of
N patches (each image its own (height / patch) x (width / patch), no class token), e bytes per element, h the
tower width, I its MLP width, for each layer the selected feature depends on (vision_feature_layer; hidden_states[k]
is layer k - 1's output):

- attention_norm and ffn_norm (PixtralRMSNorm): the fp32 upcast (4·N·h, read by pow and the product), the fp32
  rsqrt (4·N), the normalised tensor cast back (weight * x needs it: e·N·h) and the output (read by the next
  linears: e·N·h);
- attention: the rotated q and k (q * cos + rotate_half(q) * sin: the products save cos and sin, not q) and v
  (a view of v_proj's output), e·N·h each; SDPA's output, viewed again as o_proj's input (e·N·h), and its fp32
  logsumexp per head (4·heads·N);
- the gated MLP: gate_proj's output (kept by the activation), the activation's output and up_proj's output
  (kept by their product), the product (down_proj's input): 4·e·N·I;
- once: ln_pre (its upcast, rsqrt and cast back; its output is only upcast by layer 0's norm), the rotary cos
  and sin cast to the input dtype (2·e·N·head_dim, shared by every layer), and under SDPA the block-diagonal
  additive mask generate_block_attention_mask builds over the whole packed sequence (e·N², one storage
  expanded for every layer); flash_attention_2 takes cu_seqlens instead and keeps no mask;
- the projector: its RMSNorm over h (upcast, rsqrt, cast back: unfold reads the output and keeps nothing), the
  unfolded merge^2 patches (merging_layer's input, e·N·h), the merged tokens (linear_1's input,
  e·(N / merge^2)·h), linear_1's and GELU's outputs (e·(N / merge^2)·text_hidden each).
With activation checkpointing each layer (a GradientCheckpointingLayer) keeps its input (e·N·h); the rest is as
above (traced). Eager attention (per-layer probabilities) is not modelled: it is counted as SDPA.
"""
from __future__ import annotations

from typing import Mapping


def pixtral_norm_bytes(n: int, h: int, e: int, output: bool = True) -> int:
    """One PixtralRMSNorm over n tokens: upcast, rsqrt, the cast back, and its output when a linear reads it."""
    return 4 * n * h + 4 * n + e * n * h + (e * n * h if output else 0)


def pixtral_layer_bytes(spec: Mapping, n: int, e: int) -> int:
    """One PixtralAttentionLayer without checkpointing (the module docstring's rules)."""
    h = spec["hidden"]
    attn = 3 * e * n * h + e * n * h + 4 * spec["heads"] * n          # rotated q, k; v; SDPA out; logsumexp
    return 2 * pixtral_norm_bytes(n, h, e) + attn + 4 * e * n * spec["inter"]


def pixtral_patches(spec: Mapping, tokens: int, images: int) -> int:
    """Patches per image from its image tokens: Mistral 3's PixtralProcessor ends each row of merged tokens with
    [IMG_BREAK] (the last with [IMG_END]), and FuyuProcessor each row of patches with |NEWLINE|, so a g x g grid
    is g^2 + g tokens (images taken square); LightOnOCR's processor adds none. Times spatial_merge_size^2."""
    per_image = tokens // images if images else 0
    if spec["breaks"]:
        g = (_isqrt(1 + 4 * per_image) - 1) // 2
        per_image = g * g
    return per_image * spec["merge"] ** 2


def _isqrt(x: int) -> int:
    r = int(x ** 0.5)
    while r * r > x:
        r -= 1
    while (r + 1) * (r + 1) <= x:
        r += 1
    return r


def pixtral_saved_bytes(spec: Mapping, n: int, e: int, checkpointed: bool, flash: bool) -> int:
    """Bytes the tower and projector keep for n packed patches (the module docstring's rules)."""
    h = spec["hidden"]
    per_layer = e * n * h if checkpointed else pixtral_layer_bytes(spec, n, e)
    total = spec["layers_run"] * per_layer
    total += pixtral_norm_bytes(n, h, e, output=False)                 # ln_pre
    total += 2 * e * n * spec["head_dim"]                               # rotary cos, sin
    if not flash:
        total += e * n * n                                              # the block-diagonal mask
    tokens = n // spec["merge"] ** 2
    total += pixtral_norm_bytes(n, h, e, output=False) + e * n * h + e * tokens * h      # norm, unfold, merged
    total += 2 * e * tokens * spec["text_hidden"]                       # linear_1's and GELU's outputs
    return total
