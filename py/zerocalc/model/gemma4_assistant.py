"""Gemma 4's multi-token-prediction assistant (transformers 5.24 modeling_gemma4_unified_assistant.py
Gemma4UnifiedAssistantForCausalLM): ``model`` is AutoModel of text_config (a Gemma4UnifiedTextModel, counted by
gemma4.py; its default text_config shares every layer's K/V with the backbone: num_kv_shared_layers = layers,
so q_proj, q_norm and o_proj only), lm_head (vocab x h, tied to model.embed_tokens by the top-level
tie_word_embeddings, default True), pre_projection (2 x backbone_hidden_size -> h) and post_projection
(h -> backbone_hidden_size), no biases; with use_ordered_embeddings the masked embedder's centroids
(h -> num_centroids; token_ordering is a buffer).

The count is exact (tests/test_architectures.py). Activations: each layer is costed as a classic block of its linears (the
last layer's: q_proj, o_proj and the MLP; memory/blocks.py's Gemma block needs a k_proj), not traced, which
``support`` says.
"""
from __future__ import annotations

from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .gemma4 import gemma4_text
from .recurrent import recurrent_arch


def gemma4_unified_assistant(c: ConfigReader) -> ModelArch:
    text = c.cfg.get("text_config") if isinstance(c.cfg.get("text_config"), Mapping) else {}
    tied = c.bool("tie_word_embeddings", True)
    arch = gemma4_text(ConfigReader({**text, "name": c.str("name", "gemma4_unified_assistant")}),
                       "gemma4_unified_assistant", tied, unified=True)
    h, back = arch.hidden_size, c.int("backbone_hidden_size", default=3840)
    b = TensorList()
    b.linear("pre_projection", 2 * back, h, "other")
    b.linear("post_projection", h, back, "other")
    if c.bool("use_ordered_embeddings", False):
        b.linear("masked_embedding.centroids", h, c.int("num_centroids", default=2048), "other")
    b.tensors[:0] = arch.tensors
    return recurrent_arch(c, "gemma4_unified_assistant", b, h=h, n_layers=arch.num_layers, vocab=arch.vocab_size,
                          tied=tied, lins=arch.block_linears, heads=arch.num_heads, kv=arch.num_kv_heads,
                          hd=arch.head_dim, inter=arch.intermediate_size,
                          what="layers, which read their K/V from the backbone, are")


GEMMA4_ASSISTANT = {"gemma4_unified_assistant": gemma4_unified_assistant}
