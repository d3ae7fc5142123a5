"""Gemma 4's multi-token-prediction assistant (transformers 5.24 modeling_gemma4_unified_assistant.py
Gemma4UnifiedAssistantForCausalLM): ``model`` is AutoModel of text_config (a Gemma4UnifiedTextModel, counted by
gemma4.py; its default text_config shares every layer's K/V with the backbone: num_kv_shared_layers = layers,
so q_proj, q_norm and o_proj only), lm_head (vocab x h, tied to model.embed_tokens by the top-level
tie_word_embeddings, default True), pre_projection (2 x backbone_hidden_size -> h) and post_projection
(h -> backbone_hidden_size), no biases; with use_ordered_embeddings the masked embedder's centroids
(h -> num_centroids; token_ordering is a buffer).

The count is exact (tests/test_architectures.py). Activations: Gemma 4's layer rule, layer by layer
(memory/blocks_gemma4.py gemma4_block over ``layer_linears``), and around the layers the backbone's inputs
(memory/blocks_gemma4_assistant.py), traced as a drafter behind a frozen backbone
(tools/memtrace/odd_composites_trace.py g4a rows).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .gemma4 import gemma4_text

SUPPORT = ("exact parameter count; activations traced (memory/blocks_gemma4_assistant.py; "
           "tools/memtrace/odd_composites_trace.py), as a drafter behind a frozen backbone whose inputs_embeds and "
           "shared K/V it reads; full bf16-mixed counts autocast copies of pre_projection / post_projection the step "
           "does not keep")


def gemma4_unified_assistant(c: ConfigReader) -> ModelArch:
    text = dict(c.cfg.get("text_config")) if isinstance(c.cfg.get("text_config"), Mapping) else {}
    # Gemma4UnifiedAssistantConfig.__post_init__: every layer reuses the backbone's K/V unless the config says
    text["num_kv_shared_layers"] = text.get("num_kv_shared_layers") or text.get("num_hidden_layers", 30)
    tied = c.bool("tie_word_embeddings", True)
    arch = gemma4_text(ConfigReader({**text, "name": c.str("name", "gemma4_unified_assistant")}),
                       "gemma4_unified_assistant", tied, unified=True)
    h, back = arch.hidden_size, c.int("backbone_hidden_size", default=3840)
    b = TensorList()
    b.linear("pre_projection", 2 * back, h, "other")
    b.linear("post_projection", h, back, "other")
    if c.bool("use_ordered_embeddings", False):
        b.linear("masked_embedding.centroids", h, c.int("num_centroids", default=2048), "other")
    return replace(arch, tensors=arch.tensors + tuple(b.tensors), support=SUPPORT)


GEMMA4_ASSISTANT = {"gemma4_unified_assistant": gemma4_unified_assistant}
