"""What the Whisper-style audio towers of Qwen2-Audio and Voxtral keep for their backward (vision.images_per_sample
counts the 30 s clips each sample carries; each is max_source_positions encoder positions).

Read off the traced forward on CPU tensors (tools/memtrace/vision_towers.py qwen2_audio / voxtral cases,
tests/data/vision_towers_trace.json; transformers 5.24 modeling_qwen2_audio.py Qwen2AudioEncoder /
Qwen2AudioEncoderLayer / Qwen2AudioMultiModalProjector, modeling_voxtral.py VoxtralEncoder /
VoxtralMultiModalProjector), per clip, P positions of width d, T = 2P mel frames of `mel` bins, e bytes:

- the front: the feature extractor's fp32 features cast to the weights' dtype (conv1's input, e·mel·T), conv1's
  output and GELU's (conv2's input) e·d·T each, conv2's output (GELU's input) e·d·P; the positional add's output
  is layer 0's input;
- each encoder layer over n = P rows: the layer input and self_attn_layer_norm's output, q, k and v, each made
  contiguous by `_shape(...).contiguous()` (SDPA keeps those copies), SDPA's output and out_proj's contiguous
  input (`attn_output.reshape(...).contiguous()` of its transposed output), the residual sum and
  final_layer_norm's output: 9·e·n·d; fc1's and GELU's outputs 2·e·n·ffn; the fp32 logsumexp 4·heads·n and two
  LayerNorms' statistics 16·n (fp32 on CUDA; bf16 in the CPU trace);
- Qwen2-Audio: avg_pooler (AvgPool1d 2) keeps the last layer's output (e·P·d), layer_norm its pooled input and
  statistics, the projector's linear its output (2·e·(P/2)·d + 8·P/2); Voxtral: layer_norm's input, statistics
  and output (2·e·P·d + 8·P; the output viewed as P/4 rows of 4·d for linear_1), linear_1's and GELU's outputs
  over P/4 rows of the text width (2·e·(P/4)·H).
With activation checkpointing each encoder layer keeps its input (e·n·d); the front and the tail are outside the
checkpointed layers and keep what they keep without.
"""
from __future__ import annotations

from typing import Mapping


def audio_saved_bytes(spec: Mapping, clips: int, e: int, checkpointed: bool) -> int:
    d, p = spec["hidden"], spec["positions"]
    n = clips * p
    front = e * clips * spec["mel"] * 2 * p + 2 * e * 2 * n * d + e * n * d
    if checkpointed:
        layers = spec["layers_run"] * e * n * d
    else:
        layers = spec["layers_run"] * (9 * e * n * d + 2 * e * n * spec["inter"] + 4 * spec["heads"] * n + 16 * n)
    if spec["projector"] == "voxtral":
        rows = n * d // spec["stack_width"]
        tail = 2 * e * n * d + 8 * n + 2 * e * rows * spec["text_hidden"]
    else:
        tail = e * n * d + 2 * e * (n // 2) * d + 8 * (n // 2)
    return front + layers + tail
