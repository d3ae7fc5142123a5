"""Decoder layers that attend to image tokens only: Mllama's cross-attention layers (``ModelArch.image_cross_layers``,
model/vision_mllama.py).

transformers 5.24 modeling_mllama.py MllamaTextModel.forward::

    if is_cross_attention_layer and cross_attention_states is None and is_cross_attention_cache_empty:
        continue

A step fed no images (``vision.tokens_per_sample`` and ``vision.images_per_sample`` 0) never runs those layers:
they save nothing, full checkpointing keeps no input for them, autocast casts none of their weights, and their
parameters get no gradient, so no optimizer state (torch AdamW skips a parameter whose .grad is None). Traced:
tools/memtrace/families.py mllama rows (tools/memtrace/golden/families/mllama-*). A step fed image tokens runs
them on the projected vision states, costed as self-attention layers of the same widths: not traced, which
``support_note`` says.
"""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan

CROSS_APPROX = ("activations approximate (the {} cross-attention layers, which attend to the image tokens, are "
                "costed as self-attention layers; a text-only step, which skips them, is traced)")


def images_fed(plan: Plan) -> bool:
    return plan.vision.tokens_per_sample > 0 or plan.vision.images_per_sample > 0


def skipped_layers(arch: ModelArch, plan: Plan) -> frozenset:
    """The decoder layers a text-only step skips (modeling_mllama.py MllamaTextModel.forward's `continue`)."""
    if not arch.image_cross_layers or images_fed(plan):
        return frozenset()
    return frozenset(arch.image_cross_layers)


def idle_tensors(arch: ModelArch, plan: Plan) -> list:
    """The skipped layers' parameters: no gradient, no optimizer state, no autocast copy."""
    skip = skipped_layers(arch, plan)
    return [t for t in arch.tensors if t.layer in skip] if skip else []


def support_note(arch: ModelArch, plan: Plan) -> str:
    """model_support's clause where image tokens reach the cross-attention layers, else ''."""
    return CROSS_APPROX.format(len(arch.image_cross_layers)) if arch.image_cross_layers and images_fed(plan) else ""
