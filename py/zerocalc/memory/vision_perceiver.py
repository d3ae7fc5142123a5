"""What Idefics2's connector keeps for its backward (plan-v1 Extension 8, ``vision.images_per_sample``).

Traced (tools/memtrace/vision_towers.py ``idefics2`` cases, tests/data/vision_towers_trace.json; transformers
5.24 modeling_idefics2.py Idefics2Connector), per image of n patches (the tower's, memory/vision.py, before it),
e bytes per element, text width H, latents L, heads a of width d, k/v heads g:
- modality_projection (Idefics2MLP, vision width -> text intermediate I -> H): gate_proj's output (SiLU's input),
  SiLU's output, up_proj's output and their product (down_proj's input): 4·e·n·I; its input is post_layernorm's
  output, counted with the tower;
- per perceiver layer (resampler_depth of them; plain modules, not checkpointed): an Idefics2RMSNorm keeps its
  fp32 upcast and bf16 normalised copy and the fp32 rsqrt, (4 + e)·rows·H + 4·rows, over the latents
  (input_latents_norm, post_attention_layernorm) and over the context (input_context_norm, every layer); the
  concatenated [context; latents] (k_proj's and v_proj's input) e·(n + L)·H; q_proj's input e·L·H; SDPA's q,
  k and v (k/v at g heads: HF passes enable_gqa, no repeat_kv copy) e·L·a·d + 2·e·(n + L)·g·d, its output (o_proj
  reads it as a view) e·L·a·d and fp32 logsumexp 4·a·L; the MLP (4·H wide): its input e·L·H and 4·e·L·4H;
- the final norm over the latents.
"""
from __future__ import annotations

from typing import Mapping


def rms_norm_bytes(rows: int, width: int, e: int) -> int:
    """Idefics2RMSNorm: the fp32 upcast (read by pow and the product), rsqrt's fp32 output, the bf16 cast read by
    the weight's product."""
    return (4 + e) * rows * width + 4 * rows


def perceiver_saved_bytes(spec: Mapping, images: int, e: int) -> int:
    """Bytes Idefics2Connector keeps for ``images`` images of ``spec["patches"]`` patches (the docstring's rules)."""
    n, big_h, lat = spec["patches"], spec["text_hidden"], spec["latents"]
    heads, hd, kv = spec["resampler_heads"], spec["resampler_head_dim"], spec["resampler_kv_heads"]
    projection = 4 * e * n * spec["text_inter"]
    layer = (2 * rms_norm_bytes(lat, big_h, e) + rms_norm_bytes(n, big_h, e)
             + e * (n + lat) * big_h + e * lat * big_h
             + 2 * e * lat * heads * hd + 2 * e * (n + lat) * kv * hd + 4 * heads * lat
             + e * lat * big_h + 4 * e * lat * 4 * big_h)
    return images * (projection + spec["depth"] * layer + rms_norm_bytes(lat, big_h, e))
