"""Voxtral Realtime (transformers 5.24 modeling_voxtral_realtime.py VoxtralRealtimeForConditionalGeneration):
``model.audio_tower``, ``model.multi_modal_projector`` and a Mistral language model whose layers each add an
ada_rms_norm (VoxtralRealtimeTextAdaRmsNorm: linear1 h -> 32, linear2 32 -> h, no biases).

- audio_tower (VoxtralRealtimeEncoder; VoxtralRealtimeEncoderConfig's defaults): embedder conv1
  (num_mel_bins -> h, kernel 3) and conv2 (h -> h, kernel 3), biased; num_hidden_layers layers of self_attn
  (q_proj biased, k_proj not, v_proj and o_proj biased; num_attention_heads x head_dim, k/v heads = heads),
  self_attn_layer_norm and final_layer_norm RMSNorms and a gated mlp (gate / up without bias, down_proj biased);
  norm;
- multi_modal_projector: linear_1 (audio width x downsample_factor -> text width), linear_2, no biases;
- the time embedding holds a buffer only. lm_head tied by the top-level tie_word_embeddings (default True).
Activations: the language model's layers, Mistral's with the ada_rms_norm time conditioning (memory/blocks_voxtral.py,
traced fed text only: tools/memtrace/own_blocks_trace.py voxtral_realtime); the audio tower is not run.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from .config import ConfigReader, TensorList

ENCODER = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_mel_bins": 128, "head_dim": 64}
# VoxtralRealtimeConfig.sub_configs_defaults' text init_kwargs
TEXT = {"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072, "head_dim": 128,
        "sliding_window": 8192}
ADA_DIM = 32        # VoxtralRealtimeTextAdaRmsNorm's fixed bottleneck


def voxtral_realtime_parts(cfg: Mapping, text_h: int) -> list:
    a = ConfigReader(cfg.get("audio_config") or {})
    g = lambda k: a.int(k, default=ENCODER[k])   # noqa: E731 - the class default when left out
    h, inter, qd = g("hidden_size"), g("intermediate_size"), g("num_attention_heads") * g("head_dim")
    p = "model.audio_tower"
    b = TensorList()
    for name, c_in in (("conv1", g("num_mel_bins")), ("conv2", h)):
        b.matrix(f"{p}.embedder.{name}", "weight", (h, c_in, 3), "audio")
        b.param(f"{p}.embedder.{name}", "bias", h, "audio")
    for i in range(g("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        for name, bias in (("q_proj", True), ("k_proj", False), ("v_proj", True)):
            b.linear(f"{q}.self_attn.{name}", h, qd, "audio", bias)
        b.linear(f"{q}.self_attn.o_proj", qd, h, "audio", True)
        b.norm(f"{q}.self_attn_layer_norm", h, component="audio")
        b.norm(f"{q}.final_layer_norm", h, component="audio")
        b.linear(f"{q}.mlp.gate_proj", h, inter, "audio")
        b.linear(f"{q}.mlp.up_proj", h, inter, "audio")
        b.linear(f"{q}.mlp.down_proj", inter, h, "audio", True)
    b.norm(f"{p}.norm", h, component="audio")
    m = "model.multi_modal_projector"
    b.linear(f"{m}.linear_1", h * ConfigReader(cfg).int("downsample_factor", default=4), text_h, "projector")
    b.linear(f"{m}.linear_2", text_h, text_h, "projector")
    return b.tensors


def voxtral_realtime_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    """Mistral's decoder of the same sizes with each layer's ada_rms_norm after its post_attention_layernorm."""
    arch = build({**text, "model_type": "mistral"})
    out, ends = [], {}
    for t in arch.tensors:
        out.append(t)
        if t.layer is not None:
            ends[t.layer] = len(out)
    for i in sorted(ends, reverse=True):
        b = TensorList()
        b.linear(f"model.layers.{i}.ada_rms_norm.linear1", arch.hidden_size, ADA_DIM, "norm")
        b.linear(f"model.layers.{i}.ada_rms_norm.linear2", ADA_DIM, arch.hidden_size, "norm")
        out[ends[i]:ends[i]] = b.tensors
    return replace(arch, tensors=tuple(out),
                   support="exact parameter count; activations traced (memory/blocks_voxtral.py; "
                           "tools/memtrace/own_blocks_trace.py): the language model, fed text only")
