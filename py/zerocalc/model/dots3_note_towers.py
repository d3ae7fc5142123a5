"""dots.3 Note's towers (transformers 5.24 modeling_dots3_note.py Dots3NoteModel), beside the dots3_note_text
language model (dots3_note.py).

- vision_tower (Dots3NoteVisionModel; Dots3NoteVisionConfig's defaults): patch_embed (a biased Conv2d,
  num_channels x patch^2 -> h, and an RMSNorm); num_hidden_layers blocks of norm1, attn (qkv, proj;
  attention_bias; per-head q_norm / k_norm), norm2 and an mlp: a SwiGLU of intermediate_size (mlp_bias) in
  ``dense`` layers of mlp_layer_types, else experts (fused gate_up / down of moe_intermediate_size) and the fp32
  gate, with that layer's num_local_experts from per_layer_config (the default: pyramid_num_routed, 25 dense
  layers then 4, 8, ..., 64, 64 experts); merger (ln_q LayerNorm over adapter_in_dim, mlp.0 square over
  adapter_in_dim x adapter_merge_size^2, mlp.2 to adapter_out_dim, biased); norm;
- audio_tower (Dots3NoteAudioModel; Dots3NoteAudioConfig's defaults): conv_stem (three biased 3x3 stride-2
  Conv2d, 1 -> downsample_hidden_size -> itself twice; conv_out downsample_hidden_size x ceil(feature_size / 8)
  -> h, no bias); layers of self_attn (q / v / o_proj biased by attention_bias, k_proj h -> h without bias),
  input_layernorm, mlp (gate_up_proj h -> 2 x intermediate, down_proj; biased), post_attention_layernorm;
  layer_norm; adapter (LayerNorm, fc1 -> adapter_out_dim, fc2; biased).
A legacy config whose fields __post_init__ renames (embed_dim, num_heads, use_bias, pyramid_num_routed,
whisper_config, whisper_adapter_*) is refused by name.
"""
from __future__ import annotations

from typing import Mapping

from ..errors import PlanError
from .config import ConfigReader, TensorList

VISION = {"hidden_size": 1536, "intermediate_size": 4224, "num_hidden_layers": 42, "num_attention_heads": 24,
          "num_channels": 3, "patch_size": 14, "moe_intermediate_size": 2112, "num_local_experts": 64,
          "adapter_in_dim": 1536, "adapter_out_dim": 5120, "adapter_merge_size": 2}
AUDIO = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "feature_size": 128,
         "downsample_hidden_size": 480, "adapter_input_size": 1280, "adapter_out_dim": 5120}
LEGACY = {"embed_dim", "num_heads", "use_bias", "pyramid_num_routed", "whisper_config", "whisper_adapter_in_dim",
          "whisper_adapter_out_dim", "adapter_output_size", "capacity_factor", "router_scale"}
PER_LAYER = {"num_local_experts", "num_experts_per_tok"}


def _legacy(cfg: Mapping) -> None:
    for part in ("vision_config", "audio_config"):
        sub = cfg.get(part) or {}
        extra = {k for v in (sub.get("per_layer_config") or {}).values() for k in v} - PER_LAYER
        if LEGACY & set(sub) or extra:
            raise PlanError("model.model_type", f"model_type 'dots3_note': {part} fields "
                            f"{sorted(LEGACY & set(sub) | extra)} are not modelled")


def _vision(b: TensorList, v: ConfigReader) -> None:
    g = lambda k: v.int(k, default=VISION[k])   # noqa: E731 - the class default when left out
    h, inter, n, p = g("hidden_size"), g("intermediate_size"), g("num_hidden_layers"), "model.vision_tower"
    kinds, per_layer = v.cfg.get("mlp_layer_types"), {int(k): x for k, x in (v.cfg.get("per_layer_config") or {}).items()}
    if kinds is None:        # Dots3NoteVisionConfig.__post_init__'s default pyramid_num_routed
        pyramid = [-1] * 25 + list(range(4, 65, 4)) + [64]
        kinds = ["sparse" if x > 0 else "dense" for x in pyramid]
        per_layer = {i: {"num_local_experts": x} for i, x in enumerate(pyramid) if x > 0}
    bias, mlp_bias, head = v.bool("attention_bias", False), v.bool("mlp_bias", False), h // g("num_attention_heads")
    b.matrix(f"{p}.patch_embed.proj", "weight", (h, g("num_channels"), g("patch_size"), g("patch_size")), "vision")
    b.param(f"{p}.patch_embed.proj", "bias", h, "vision")
    b.norm(f"{p}.patch_embed.norm", h, component="vision")
    for i in range(n):
        q = f"{p}.blocks.{i}"
        b.norm(f"{q}.norm1", h, component="vision")
        b.linear(f"{q}.attn.qkv", h, 3 * h, "vision", bias)
        b.linear(f"{q}.attn.proj", h, h, "vision", bias)
        b.norm(f"{q}.attn.q_norm", head, component="vision")
        b.norm(f"{q}.attn.k_norm", head, component="vision")
        b.norm(f"{q}.norm2", h, component="vision")
        if kinds[i] == "sparse":
            e, ei = int(per_layer.get(i, {}).get("num_local_experts") or g("num_local_experts")), g("moe_intermediate_size")
            b.matrix(f"{q}.mlp.experts", "gate_up_proj", (e, 2 * ei, h), "vision")
            b.matrix(f"{q}.mlp.experts", "down_proj", (e, h, ei), "vision")
            b.matrix(f"{q}.mlp.gate", "weight", (e, h), "vision")
        else:
            b.swiglu(f"{q}.mlp", h, inter, "vision", bias=mlp_bias)
    d_in, merged = g("adapter_in_dim"), g("adapter_in_dim") * g("adapter_merge_size") ** 2
    b.norm(f"{p}.merger.ln_q", d_in, bias=True, component="projector")
    b.linear(f"{p}.merger.mlp.0", merged, merged, "projector", True)
    b.linear(f"{p}.merger.mlp.2", merged, g("adapter_out_dim"), "projector", True)
    b.norm(f"{p}.norm", h, component="vision")


def _audio(b: TensorList, a: ConfigReader) -> None:
    g = lambda k: a.int(k, default=AUDIO[k])   # noqa: E731 - the class default when left out
    h, inter, ds, p = g("hidden_size"), g("intermediate_size"), g("downsample_hidden_size"), "model.audio_tower"
    for j, c_in in enumerate((1, ds, ds)):
        b.matrix(f"{p}.conv_stem.convs.{j}", "weight", (ds, c_in, 3, 3), "audio")
        b.param(f"{p}.conv_stem.convs.{j}", "bias", ds, "audio")
    b.linear(f"{p}.conv_stem.conv_out", ds * ((g("feature_size") + 7) // 8), h, "audio")
    bias = a.bool("attention_bias", True)
    for i in range(g("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        b.linear(f"{q}.self_attn.q_proj", h, h, "audio", bias)
        b.linear(f"{q}.self_attn.k_proj", h, h, "audio")
        b.linear(f"{q}.self_attn.v_proj", h, h, "audio", bias)
        b.linear(f"{q}.self_attn.o_proj", h, h, "audio", bias)
        b.norm(f"{q}.input_layernorm", h, component="audio")
        b.linear(f"{q}.mlp.gate_up_proj", h, 2 * inter, "audio", True)
        b.linear(f"{q}.mlp.down_proj", inter, h, "audio", True)
        b.norm(f"{q}.post_attention_layernorm", h, component="audio")
    b.norm(f"{p}.layer_norm", h, component="audio")
    d_in, out = g("adapter_input_size"), g("adapter_out_dim")
    b.norm(f"{p}.adapter.norm", d_in, bias=True, component="projector")
    b.linear(f"{p}.adapter.fc1", d_in, out, "projector", True)
    b.linear(f"{p}.adapter.fc2", out, out, "projector", True)


def dots3_note_parts(cfg: Mapping, text_h: int) -> list:
    _legacy(cfg)
    b = TensorList()
    _vision(b, ConfigReader(cfg.get("vision_config") or {}))
    _audio(b, ConfigReader(cfg.get("audio_config") or {}))
    return b.tensors
