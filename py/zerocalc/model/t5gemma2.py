"""T5Gemma 2 (transformers 5.24, modeling_t5gemma2.py T5Gemma2ForConditionalGeneration), counted whole: an
encoder of Gemma 3 layers with a SigLIP tower and Gemma 3's projector (vision.py:gemma3_parts), and a decoder of
the same layers whose merged attention (T5Gemma2MergedAttention) attends to itself and to the encoder with one
set of q/k/v/o and q/k norms. Each stack's layers are built by model_from_config (``build``) as a gemma3_text
model read from the encoder's text_config / the decoder config by their own field names: the tensor counts
are T5Gemma2's (its pre/post self-attention and feed-forward RMSNorms carry Gemma 3's names here). The
embeddings (T5Gemma2TextScaledWordEmbedding) add an eoi_embedding vector; the decoder's embed_tokens and the
lm_head (lm_head.out_proj) are the encoder's under tie_word_embeddings (T5Gemma2Model / ...ForConditional-
Generation _tied_weights_keys). Checked against the meta-device build in tests/data/architectures.json.
Activations: memory/blocks_t5gemma2.py (Gemma 3 layers, the decoder's merged self + cross attention), traced on text
batches with the tower frozen (tools/memtrace/t5gemma2_trace.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .encdec import rebase, require_sub_configs
from .vision import gemma3_parts

SUPPORT = ("exact parameter count; activations traced (memory/blocks_t5gemma2.py; tools/memtrace/t5gemma2_trace.py) "
           "for text batches, eager attention (the model has no FA2 path; SDPA costed as a kernel over the merged "
           "keys, not traced); the SigLIP tower frozen and fed no image: an image's tokens and the tower's "
           "activations not modelled")


def t5gemma2(cfg: Mapping, build) -> ModelArch:
    require_sub_configs(cfg, "t5gemma2", "encoder.text_config", "encoder.vision_config", "decoder")
    enc, dec = cfg["encoder"], cfg["decoder"]
    top = ConfigReader(cfg)
    tied = top.bool("tie_word_embeddings", True)
    stacks = {side: build({**sub, "model_type": "gemma3_text", "tie_word_embeddings": True})
              for side, sub in (("encoder", enc["text_config"]), ("decoder", dec))}
    out: list = []
    for side, lm in stacks.items():
        path = "model.encoder.text_model." if side == "encoder" else "model.decoder."
        for t in rebase(lm.tensors, "model.", path):
            if t.name.endswith("embed_tokens.weight"):
                if side == "decoder" and tied:
                    continue
                eoi = TensorList()
                eoi.param(t.module, "eoi_embedding", lm.hidden_size, "embedding")
                out += [t, *eoi.tensors]
                continue
            out.append(t)
        if side == "encoder":
            tower = rebase(tuple(gemma3_parts({"vision_config": enc["vision_config"]}, lm.hidden_size)), "model.",
                           "model.encoder.")
            out += [replace(t, block="", layer=None) for t in tower]
    lm = stacks["decoder"]
    if not tied:
        head = TensorList()
        head.matrix("lm_head.out_proj", "weight", (lm.vocab_size, lm.hidden_size), "lm_head", "out_proj")
        out += head.tensors
    return replace(lm, name=top.str("name", "t5gemma2"), model_type="t5gemma2", tied_embeddings=tied,
                   num_layers=stacks["encoder"].num_layers + lm.num_layers, tensors=tuple(out), support=SUPPORT,
                   t5gemma={"encoder_layers": stacks["encoder"].num_layers,
                            "kinds": {side: sorted(set(_kinds(sub))) for side, sub in (("encoder", enc["text_config"]),
                                                                                     ("decoder", dec))}})


def _kinds(c: Mapping) -> list:
    """A stack's layer_types, or T5Gemma2TextConfig / T5Gemma2DecoderConfig.__post_init__'s default (sliding
    but every sliding_window_pattern-th (6) layer)."""
    n, every = int(c.get("num_hidden_layers", 0)), int(c.get("sliding_window_pattern", 6))
    return list(c.get("layer_types") or ["sliding_attention" if (i + 1) % every else "full_attention"
                                         for i in range(n)])
