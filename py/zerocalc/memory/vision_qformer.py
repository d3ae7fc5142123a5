"""What BLIP-2's ViT, Q-Former and language_projection keep for their backward (vision.images_per_sample).

Read off the traced forward of Blip2ForConditionalGeneration.get_image_features on CPU tensors
(tools/memtrace/vision_towers.py, tests/data/vision_towers_trace.json; transformers 5.24 modeling_blip_2.py
Blip2VisionModel, Blip2QFormerModel, Blip2QFormerLayer), the Q-Former and query_tokens in fp32 as
from_pretrained keeps them (``_keep_in_fp32_modules``), per image:

- the ViT on its n = images · (patches + 1) tokens (class token), e bytes per element, width h, MLP width I:
  CLIP's layer rule of memory/vision.py (LayerNorms' inputs and outputs, the fused qkv output that SDPA's q, k,
  v view, SDPA's output, which is also projection's input, its fp32 logsumexp per head, fc1's and GELU's
  outputs: 8·e·n·h + 2·e·n·I + 4·heads·n + 16·n), then post_layernorm's input and statistics; its output is
  only cast to fp32 for the Q-Former, and that fp32 copy (4·n·h) is what every cross-attention's key and value
  linears keep;
- the Q-Former on m = images · num_query_tokens queries of width H (4 bytes per element): the embedding
  LayerNorm's statistics (its input is the query_tokens parameter) and output; per layer the self-attention
  (q, k, v, SDPA's output, also output.dense's input, output.LayerNorm's input and output: 6·4·m·H, its
  logsumexp 4·heads·m and statistics 8·m), in every cross_attention_frequency-th layer a cross-attention (q,
  SDPA's output, LayerNorm input and output: 4·4·m·H; key and value over the ViT's tokens: 2·4·n·H; logsumexp
  and statistics), the query FFN (intermediate_query's and GELU's outputs 2·4·m·I_q, output_query.LayerNorm's
  input and output 2·4·m·H, statistics); the last layer's output is cast to the model dtype, which
  language_projection keeps (e·m·H) instead of the fp32 one;
- dropout: the trace runs at probability 0 (CPU's dropout keeps an input-dtype noise tensor, CUDA's
  native_dropout a bool mask); with hidden_dropout_prob > 0 (BLIP-2's 0.1) each hidden dropout adds its bool
  mask, m·H bytes: after the embedding LayerNorm and in each attention's and FFN's output (1 + 2·layers +
  cross layers); attention-probability dropout inside SDPA's CUDA kernels keeps only an RNG state. Not traced.
With activation checkpointing each ViT layer keeps its input (e·n·h) and each Q-Former layer its hidden states
(4·m·H; the fp32 encoder copy it also takes is the shared one above).
"""
from __future__ import annotations

from typing import Mapping


def instruct_qformer_saved_bytes(spec: Mapping, images: int, e: int, checkpointed: bool, instruction: int) -> int:
    """InstructBLIP's Q-Former (modeling_instructblip.py InstructBlipQFormerEmbeddings / InstructBlipQFormerLayer)
    and language_projection for ``images`` images, each with ``instruction`` qformer_input_ids: BLIP-2's rule
    over r = m + L rows (m queries, L instruction tokens) in the model dtype (only query_tokens is kept in fp32):
    the embedding LayerNorm's input (the [queries; word + position embeddings] concat cast to the LayerNorm's
    dtype), output and statistics, the token ids; per layer the self-attention over all r rows (q, k, v, SDPA's
    output, output.LayerNorm's input and output: 6·e·r·H, logsumexp, statistics), the cross-attention for the m
    queries only (as BLIP-2's, over the ViT's tokens), the query FFN on the queries and the text FFN
    (intermediate / output) on the instruction tokens (each layer's two intermediate and GELU outputs 2·e·r·I, its
    two output LayerNorms' inputs e·r·H and the concatenated layer output e·r·H); language_projection reads a view
    of the last layer's output (no final LayerNorm). Under checkpointing each layer keeps its input (e·r·H)."""
    m, hq, n = images * spec["queries"], spec["q_hidden"], images * (spec["patches"] + 1)
    r = m + images * instruction
    ids = 8 * images * instruction + 8 * instruction          # word ids per image, one shared position-id row
    emb = e * r * hq + 8 * r + ids                            # the LayerNorm's input; its output is layer 0's input
    # language_projection's input: a view of the last layer's output for one image, else a contiguous copy of the
    # queries' rows (`qformer_outputs[0][:, :m]` reshaped)
    proj = e * r * hq if images == 1 else e * m * hq
    if checkpointed:
        return emb + spec["q_layers"] * e * r * hq + proj
    lse = 4 * spec["q_heads"]
    self_attn = 6 * e * r * hq + lse * r + 8 * r
    cross = 4 * e * m * hq + 2 * e * n * hq + lse * m + 8 * m
    ffn = 2 * e * r * spec["q_inter"] + 2 * e * r * hq + 8 * r
    # layer 0's input is the embedding LayerNorm's output; each layer's output (ffn's last e·r·H) is the next
    # layer's input, the last one's replaced by language_projection's
    total = emb + spec["q_layers"] * (self_attn + ffn) + spec["q_cross"] * cross + proj
    if spec["q_dropout"]:
        total += (1 + 2 * spec["q_layers"]) * r * hq + spec["q_cross"] * m * hq
    return total


def qformer_saved_bytes(spec: Mapping, images: int, e: int, checkpointed: bool) -> int:
    """The Q-Former's and language_projection's bytes for ``images`` images (the module docstring's rules)."""
    m, hq, n = images * spec["queries"], spec["q_hidden"], images * (spec["patches"] + 1)
    lse, stats = 4 * spec["q_heads"] * m, 8 * m
    if checkpointed:
        total = spec["q_layers"] * 4 * m * hq + stats
    else:
        self_attn = 6 * 4 * m * hq + lse + stats
        cross = 4 * 4 * m * hq + 2 * 4 * n * hq + lse + stats
        ffn = 2 * 4 * m * spec["q_inter"] + 2 * 4 * m * hq + stats
        total = stats + 4 * m * hq + spec["q_layers"] * (self_attn + ffn) + spec["q_cross"] * cross - 4 * m * hq
    if spec["q_dropout"]:
        total += (1 + 2 * spec["q_layers"] + spec["q_cross"]) * m * hq
    return total + e * m * hq


def blip2_saved_bytes(spec: Mapping, images: int, e: int, checkpointed: bool, instruction: int = 0) -> int:
    h, n = spec["hidden"], images * (spec["patches"] + 1)
    if checkpointed:
        per_layer = e * n * h
    else:
        per_layer = e * n * (8 * h + spec["mlp_tensors"] * spec["inter"]) + 4 * spec["heads"] * n + 16 * n
    total = spec["layers_run"] * per_layer + e * n * h + 8 * n         # post_layernorm's input and statistics
    if spec.get("instruct"):
        # InstructBLIP: the cross-attentions' key / value read post_layernorm's output as it is (model dtype)
        total += e * n * h if spec["q_cross"] else 0
        return total + instruct_qformer_saved_bytes(spec, images, e, checkpointed, instruction)
    if spec["q_cross"]:
        total += 4 * n * h                                               # the fp32 copy the cross-attentions read
    return total + qformer_saved_bytes(spec, images, e, checkpointed)
