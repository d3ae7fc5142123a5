"""Evolla (transformers 5.24, modeling_evolla.py EvollaForProteinText2Text), counted whole: a Llama language
model (built by model_from_config from the top-level fields) whose every (num_hidden_layers //
aligner_num_add_layers)-th layer carries an ``adapter`` (EvollaSequenceAlignerCrossAttention: query and
key_protein / value_protein (hidden, biased), attention_norm (RMS), out_proj (aligner_enable_bias), the ff
block's LayerNorm and bias-free fc1 / fc2 of aligner_ffn_mult, two scalar gates), and the protein encoder:
a SaProt (ESM-like) model of protein_encoder_config (word_embeddings, the embedding LayerNorm when
emb_layer_norm_before, absolute positions unless rotary; pre-LN layers of query/key/value/output.dense with
attention.LayerNorm, intermediate / output and the layer LayerNorm; emb_layer_norm_after) and the
sequence-compressor resampler (latents, resampler_depth layers of norm_media / norm_latents / to_q / to_kv /
to_out and a feed-forward of resampler_ff_mult, protein_projector to hidden, a LayerNorm). Checked against the
meta-device build in tests/data/architectures.json.
The SaProt encoder's tensors are filed under "vision": the tower vision.trainable freezes (frozen by default).
Activations: memory/blocks_evolla.py (the Llama blocks with their adapters' cross-attention, each adapter layer's
linears in ``layer_linears``; the resampler; the frozen encoder keeps nothing), traced over proteins of
``side_tokens`` tokens a sample (EvollaProcessor's protein_max_length, 1024, or the config's protein_max_length):
tools/memtrace/odd_composites_trace.py evolla rows.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .encdec import require_sub_configs

# SaProtConfig's defaults (configuration_evolla.py), EvollaConfig's adapter / resampler defaults
SAPROT = {"vocab_size": 446, "hidden_size": 1280, "num_hidden_layers": 33, "intermediate_size": 5120,
          "max_position_embeddings": 1026, "position_embedding_type": "rotary", "emb_layer_norm_before": False}
SUPPORT = ("exact parameter count; activations traced (memory/blocks_evolla.py; tools/memtrace/odd_composites_trace.py), "
           "with the SaProt protein encoder frozen, over proteins of protein_max_length tokens (1024 unless the "
           "config says)")


def evolla(cfg: Mapping, build) -> ModelArch:
    require_sub_configs(cfg, "evolla", "protein_encoder_config")
    c = ConfigReader(cfg)
    lm = build({**{k: v for k, v in cfg.items() if k != "protein_encoder_config"}, "model_type": "llama"})
    h, n = lm.hidden_size, lm.num_layers
    b = TensorList()
    every = max(n // c.int("aligner_num_add_layers", default=8), 1)
    mult, out_bias = c.int("aligner_ffn_mult", default=4), c.bool("aligner_enable_bias", True)
    for i in range(n):
        if (i + 1) % every:
            continue
        a = f"model.layers.{i}.adapter"
        for name in ("query", "key_protein", "value_protein"):
            b.linear(f"{a}.{name}", h, h, "other", bias=True)
        b.param(f"{a}.attention_norm", "weight", h, "other")
        b.linear(f"{a}.out_proj", h, h, "other", bias=out_bias)
        _feed_forward(b, f"{a}.ff", h, mult, "other")
        b.param(a, "gate_attention", 1, "other")
        b.param(a, "gate_ffw", 1, "other")
    p = ConfigReader({**SAPROT, **cfg["protein_encoder_config"]})
    ph = p.int("hidden_size")
    e = "model.protein_encoder.model"
    t = TensorList()
    t.matrix(f"{e}.embeddings.word_embeddings", "weight", (p.int("vocab_size"), ph), "other")
    if p.bool("emb_layer_norm_before", False):
        t.norm(f"{e}.embeddings.layer_norm", ph, bias=True, component="other")
    if p.str("position_embedding_type", "rotary") == "absolute":
        t.matrix(f"{e}.embeddings.position_embeddings", "weight", (p.int("max_position_embeddings"), ph), "other")
    for i in range(p.int("num_hidden_layers")):
        q = f"{e}.encoder.layer.{i}"
        for name in ("query", "key", "value"):
            t.linear(f"{q}.attention.self.{name}", ph, ph, "other", bias=True)
        t.linear(f"{q}.attention.output.dense", ph, ph, "other", bias=True)
        t.norm(f"{q}.attention.LayerNorm", ph, bias=True, component="other")
        t.linear(f"{q}.intermediate.dense", ph, p.int("intermediate_size"), "other", bias=True)
        t.linear(f"{q}.output.dense", p.int("intermediate_size"), ph, "other", bias=True)
        t.norm(f"{q}.LayerNorm", ph, bias=True, component="other")
    t.norm(f"{e}.encoder.emb_layer_norm_after", ph, bias=True, component="other")
    r = "model.protein_encoder.sequence_compressor_resampler"
    t.matrix(r, "latents", (c.int("resampler_num_latents", default=64), ph), "other")
    inner = c.int("resampler_heads", default=8) * c.int("resampler_dim_head", default=64)
    for j in range(c.int("resampler_depth", default=6)):
        t.norm(f"{r}.layers.{j}.0.norm_media", ph, bias=True, component="other")
        t.norm(f"{r}.layers.{j}.0.norm_latents", ph, bias=True, component="other")
        t.linear(f"{r}.layers.{j}.0.to_q", ph, inner, "other")
        t.linear(f"{r}.layers.{j}.0.to_kv", ph, 2 * inner, "other")
        t.linear(f"{r}.layers.{j}.0.to_out", inner, ph, "other")
        _feed_forward(t, f"{r}.layers.{j}.1", ph, c.int("resampler_ff_mult", default=4), "other")
    t.norm(f"{r}.norm", h, bias=True, component="other")
    t.linear(f"{r}.protein_projector", ph, h, "other", bias=True)
    encoder = tuple(replace(x, block="", layer=None, component="vision" if x.name.startswith(e) else x.component)
                    for x in t.tensors)
    ada = tuple(Linear(f"adapter.{name}", h, d_out) for name, d_out in (("query", h), ("out_proj", h),
                                                                         ("ff.fc1", h * mult)))
    layers = tuple(lm.block_linears + (ada if not (i + 1) % every else ()) for i in range(n))
    return replace(lm, model_type="evolla", tensors=encoder + lm.tensors + tuple(b.tensors), support=SUPPORT,
                   layer_linears=layers, side_tokens=c.int("protein_max_length", default=1024))


def _feed_forward(b: TensorList, p: str, dim: int, mult: int, component: str) -> None:
    """EvollaFeedForward: LayerNorm, fc1 (dim -> dim·mult) and fc2 without bias."""
    b.norm(f"{p}.norm", dim, bias=True, component=component)
    b.linear(f"{p}.fc1", dim, dim * mult, component)
    b.linear(f"{p}.fc2", dim * mult, dim, component)
