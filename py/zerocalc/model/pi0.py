"""π0 (transformers 5.24, modeling_pi0.py PI0ForConditionalGeneration), counted whole: model.vlm = the
PaliGemmaModel of vlm_config (the SigLIP tower and projector of vision.py:paligemma_parts, the Gemma language
model without a head), model.dit = the GemmaModel of dit_config (the action expert, without a head),
embed_action_time (action_in_proj max_action_dim -> expert width, state_proj max_state_dim -> expert width,
action_time_mlp_in 2·width -> width, action_time_mlp_out, all biased) and action_out_proj (width ->
max_action_dim, biased). Both Gemma models are built by model_from_config (``build``) as their AutoModel: no
lm_head, whatever their tie_word_embeddings. There is no next-token loss (flow matching on actions): no logits.
Checked against the meta-device build in tests/data/architectures.json.
Activations: memory/blocks_pi0.py (the VLM's Gemma blocks over the prefix, its last layer's K/V path, the action
expert's blocks over chunk_size + 1 suffix tokens reading the cache, the action embedding and the MSE loss), traced
with the tower frozen (tools/memtrace/odd_composites_trace.py pi0 rows); ``side_tokens`` carries chunk_size.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .encdec import rebase, require_sub_configs
from .vision import paligemma_parts

SUPPORT = ("exact parameter count; activations traced (memory/blocks_pi0.py; tools/memtrace/odd_composites_trace.py), "
           "with the SigLIP tower frozen; a trained tower's activations are not modelled")


def pi0(cfg: Mapping, build) -> ModelArch:
    require_sub_configs(cfg, "pi0", "vlm_config.text_config", "vlm_config.vision_config", "dit_config")
    vlm, dit = cfg["vlm_config"], cfg["dit_config"]
    c = ConfigReader(cfg)
    lm = build({**vlm["text_config"], "tie_word_embeddings": True, "name": c.str("name", "pi0")})
    expert = build({**dit, "tie_word_embeddings": True})
    w = expert.hidden_size
    b = TensorList()
    a, s = c.int("max_action_dim", default=32), c.int("max_state_dim", default=32)
    for name, d_in, d_out in (("action_in_proj", a, w), ("state_proj", s, w), ("action_time_mlp_in", 2 * w, w),
                              ("action_time_mlp_out", w, w)):
        b.linear(f"embed_action_time.{name}", d_in, d_out, "other", bias=True)
    b.linear("action_out_proj", w, a, "other", bias=True)
    tower = rebase(tuple(paligemma_parts(vlm, lm.hidden_size)), "model.", "model.vlm.")
    outside = tuple(replace(t, block="", layer=None) for t in rebase(expert.tensors, "model.", "model.dit."))
    return replace(lm, model_type="pi0", causal_lm=False, support=SUPPORT,
                   side_tokens=c.int("chunk_size", default=50),
                   tensors=outside + tuple(replace(t, block="", layer=None) for t in tower)
                   + rebase(lm.tensors, "model.", "model.vlm.language_model.") + tuple(b.tensors))
