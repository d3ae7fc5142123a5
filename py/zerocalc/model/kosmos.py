"""Kosmos-2 and Kosmos-2.5 (transformers 5.24, modeling_kosmos2.py Kosmos2ForConditionalGeneration and
modeling_kosmos2_5.py Kosmos2_5ForConditionalGeneration), counted whole; sub-configs read by their own field
names over their config classes' defaults. Checked against the meta-device builds in
tests/data/architectures.json.

- text_model: a Magneto (sub-LN) decoder: model.embed_tokens (vocab x embed_dim; sinusoidal positions are a
  buffer), Kosmos-2.5's segment_emb (2 x embed_dim); per layer self_attn k/v/q/out_proj (biased) with Kosmos-2's
  inner_attn_ln, self_attn_layer_norm, encoder_attn and its norm when add_cross_attention, ffn fc1/fc2 (biased)
  with ffn.ffn_layernorm over ffn_dim, final_layer_norm; model.layer_norm; lm_head tied to embed_tokens unless
  tie_word_embeddings is false (Kosmos-2: in both the top-level and the text config).
- vision_model: Kosmos-2's CLIP tower (vision.py:vit under vision_model.model), Kosmos-2.5's Pix2Struct-style
  tower (vision_encdec.py:pix2struct_vision with its intermediate_size / head_dim / max_num_patches).
- image_to_text_projection: latent_query (latent_query_num x embed_dim), dense (vision width -> embed_dim),
  x_attn k/v/q/out_proj (biased, no inner LayerNorm).
Activations: the text decoder and what the step keeps around it by memory/blocks_kosmos.py (traced:
tools/memtrace/kosmos_trace.py); a trained tower's and projection's not modelled (frozen by default: no graph but,
Kosmos-2.5 fed images under checkpointing, the hooked one's: memory/blocks_kosmos.py kosmos25_images, reached through
the tower spec below and memory/vision.py tower_saved_bytes, which read vision.images_per_sample).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .vision import vit
from .vision_encdec import pix2struct_vision

SUPPORT = {"kosmos-2": "exact parameter count; activations traced (memory/blocks_kosmos.py; "
                       "tools/memtrace/kosmos_trace.py; a trained vision tower's and projection's activations not "
                       "modelled)",
           "kosmos-2.5": "exact parameter count; activations traced, fed text or images (memory/blocks_kosmos.py; "
                         "tools/memtrace/kosmos_trace.py; fed images, the tower frozen: the batch's flattened_patches, "
                         "the position mask, index_put's index, the segment ids and, under checkpointing, the hooked "
                         "frozen tower's graph; a trained vision tower's and projection's activations not modelled)"}
# Kosmos2VisionConfig / Kosmos2TextConfig, Kosmos2_5VisionConfig / Kosmos2_5TextConfig (configuration_kosmos2*.py)
VISION = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "image_size": 224,
          "patch_size": 14, "num_channels": 3}
TEXT = {"vocab_size": 65037, "embed_dim": 2048, "layers": 24, "ffn_dim": 8192, "attention_heads": 32,
        "max_position_embeddings": 2048}
VISION_2_5 = {"hidden_size": 1536, "patch_embed_hidden_size": 768, "intermediate_size": 3968, "head_dim": 64,
              "num_hidden_layers": 18, "num_attention_heads": 24, "max_num_patches": 4096}
TEXT_2_5 = {"vocab_size": 108481, "embed_dim": 1536, "layers": 24, "ffn_dim": 6144, "attention_heads": 16,
            "max_position_embeddings": 4096}
LATENT = {"kosmos-2": 64, "kosmos-2.5": 2048}


def kosmos(cfg: Mapping) -> ModelArch:
    model_type = cfg["model_type"]
    two_five = model_type == "kosmos-2.5"
    vision, text = cfg.get("vision_config") or {}, cfg.get("text_config") or {}
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        raise PlanError("model.vision_config", f"model_type {model_type!r} needs mapping vision_config / text_config")
    t = ConfigReader({**(TEXT_2_5 if two_five else TEXT), **text})
    e, n, ffn, vocab = t.int("embed_dim"), t.int("layers"), t.int("ffn_dim"), t.int("vocab_size")
    tower, spec = TensorList(), None
    if two_five:
        vh = pix2struct_vision(tower, "vision_model", vision, "vision", VISION_2_5,
                               ("intermediate_size", "head_dim", "max_num_patches"))
        vr = ConfigReader({**VISION_2_5, **vision})
        # fed images (vision.images_per_sample): memory/blocks_kosmos.py kosmos25_images, the frozen tower only
        spec = {"kind": "kosmos25", "frozen_only": True, "patches": vr.int("max_num_patches"),
                "patch_dim": vr.int("patch_embed_hidden_size"), "hidden": vh, "layers": vr.int("num_hidden_layers"),
                "heads": vr.int("num_attention_heads"), "latent": ConfigReader(cfg).int("latent_query_num",
                                                                                        default=LATENT[model_type])}
    else:
        vh = vit(tower, "vision_model.model", ConfigReader({**VISION, **vision}), "clip_vision_model")
    p = "image_to_text_projection"
    tower.matrix(p, "latent_query", (ConfigReader(cfg).int("latent_query_num", default=LATENT[model_type]), e),
                 "projector")
    tower.linear(f"{p}.dense", vh, e, "projector", bias=True)
    for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
        tower.linear(f"{p}.x_attn.{name}", e, e, "projector", bias=True)
    b = TensorList()
    m = "text_model.model"
    b.matrix(f"{m}.embed_tokens", "weight", (vocab, e), "embedding")
    if two_five:
        b.matrix(f"{m}.segment_emb", "weight", (2, e), "embedding")
    cross = t.bool("add_cross_attention", False)
    for i in range(n):
        q = f"{m}.layers.{i}"
        for att in ("self_attn", "encoder_attn") if cross else ("self_attn",):
            for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
                b.linear(f"{q}.{att}.{name}", e, e, "attention", bias=True)
            if att == "self_attn" and not two_five:
                b.norm(f"{q}.self_attn.inner_attn_ln", e, bias=True)
            b.norm(f"{q}.{att}_layer_norm", e, bias=True)
        b.linear(f"{q}.ffn.fc1", e, ffn, "mlp", bias=True)
        b.linear(f"{q}.ffn.fc2", ffn, e, "mlp", bias=True)
        b.norm(f"{q}.ffn.ffn_layernorm", ffn, bias=True)
        b.norm(f"{q}.final_layer_norm", e, bias=True)
    b.norm(f"{m}.layer_norm", e, bias=True)
    # meta builds: Kosmos2ForConditionalGeneration._tied_weights_keys ties text_model.lm_head by the top-level
    # flag, Kosmos2TextForCausalLM by the text config's (tied if either is); Kosmos-2.5's only by the text config
    tied = t.bool("tie_word_embeddings", True) or (not two_five and ConfigReader(cfg).bool("tie_word_embeddings", True))
    if not tied:
        b.matrix("text_model.lm_head", "weight", (vocab, e), "lm_head", "lm_head")
    heads = t.int("attention_heads")
    blk = tuple(Linear(x, e, e) for x in ("k_proj", "v_proj", "q_proj", "out_proj")) + (Linear("fc1", e, ffn),
                                                                                       Linear("fc2", ffn, e))
    drop = text.get("dropout", 0.1)
    rates = {k: float(v) if isinstance(v := text.get(k, default), (int, float)) and not isinstance(v, bool) else 0.0
             for k, default in (("attention_dropout", 0.0 if two_five else 0.1), ("activation_dropout", 0.0))}
    return ModelArch(
        name=ConfigReader(cfg).str("name", model_type), model_type=model_type, family="gpt2", hidden_size=e,
        num_layers=n, num_heads=heads, num_kv_heads=heads, head_dim=e // heads, intermediate_size=ffn,
        vocab_size=vocab, tied_embeddings=tied, max_positions=t.int("max_position_embeddings"), gated_mlp=False,
        norm="layernorm", norms_per_layer=2, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False,
        final_softcap=False, dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool)
        else 0.0, tensors=tuple(replace(x, block="", layer=None) for x in tower.tensors) + tuple(b.tensors),
        block_linears=blk, dense_block_linears=blk, support=SUPPORT[model_type], tower=spec,
        kosmos={"inner_ln": not two_five, "attn_dropout": rates["attention_dropout"],
                "act_dropout": rates["activation_dropout"], "segment": two_five,
                "image_tokens": 0 if two_five else ConfigReader(cfg).int("latent_query_num",
                                                                         default=LATENT[model_type])})


KOSMOS = ("kosmos-2", "kosmos-2.5")
