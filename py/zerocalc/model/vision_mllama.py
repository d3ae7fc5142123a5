"""Mllama (Llama 3.2 Vision), transformers 5.24 modeling_mllama.py: a tiled ViT, one projector and a Llama
language model whose ``cross_attention_layers`` are cross-attention decoder layers.

- MllamaVisionModel (MllamaVisionConfig's defaults): class_embedding, patch Conv2d (no bias),
  gated_positional_embedding (gate, embedding (patches + 1) x h, tile_embedding (max_aspect_ratio_id + 1) x
  (max_num_tiles x (patches + 1) x h), max_aspect_ratio_id = len(supported_aspect_ratios)), pre/post tile
  positional embeddings (gate, (max_aspect_ratio_id + 1) x (max_num_tiles x h)), layernorm_pre/post,
  ``transformer`` (num_hidden_layers) and ``global_transformer`` (num_global_layers, with gate_attn / gate_ffn)
  layers of q/k/v/o (no bias), biased fc1/fc2 and two LayerNorms; multi_modal_projector, one biased linear
  vision_output_dim -> text h.
- MllamaTextModel: embed_tokens of vocab_size + 8 rows; a MllamaSelfAttentionDecoderLayer is a Llama block; a
  MllamaCrossAttentionDecoderLayer has the same q/k/v/o, MLP and two RMSNorms plus q_norm / k_norm (head_dim)
  and the scalars cross_attn_attn_gate / cross_attn_mlp_gate. So the language model is built as a Llama and
  each cross-attention layer gains those four tensors. ``image_cross_layers`` names those layers: a step fed no
  images skips them (MllamaTextModel.forward: `continue` without cross_attention_states; memory/blocks_cross.py,
  traced in tools/memtrace/families.py's mllama rows); a step fed image tokens (vision.tokens_per_sample: the
  projected vision states) runs them over those states (memory/blocks_cross.py cross_layer; the mllamaimg rows).
  The tower's own activations are not modelled (vision.images_per_sample is refused).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from .config import ConfigReader, TensorList

# MllamaVisionConfig / MllamaTextConfig (configuration_mllama.py)
VISION = {"hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8, "num_channels": 3,
          "intermediate_size": 5120, "vision_output_dim": 7680, "image_size": 448, "patch_size": 14,
          "max_num_tiles": 4}
TEXT = {"vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}


def mllama_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=VISION[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_model"
    patches = (get("image_size") // get("patch_size")) ** 2 + 1
    tiles = get("max_num_tiles")
    ratios = len(v.cfg.get("supported_aspect_ratios") or [0] * 8) + 1
    b = TensorList()

    b.param(p, "class_embedding", h, "vision")
    b.matrix(f"{p}.patch_embedding", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    g = f"{p}.gated_positional_embedding"
    b.param(g, "gate", 1, "vision")
    b.matrix(g, "embedding", (patches, h), "vision")
    b.matrix(f"{g}.tile_embedding", "weight", (ratios, tiles * patches * h), "vision")
    for name in ("pre_tile_positional_embedding", "post_tile_positional_embedding"):
        b.param(f"{p}.{name}", "gate", 1, "vision")
        b.matrix(f"{p}.{name}.embedding", "weight", (ratios, tiles * h), "vision")
    b.norm(f"{p}.layernorm_pre", h, bias=True, component="vision")
    b.norm(f"{p}.layernorm_post", h, bias=True, component="vision")
    for stack, n, gated in (("transformer", get("num_hidden_layers"), False),
                            ("global_transformer", get("num_global_layers"), True)):
        for i in range(n):
            q = f"{p}.{stack}.layers.{i}"
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                b.linear(f"{q}.self_attn.{name}", h, h, "vision")
            b.linear(f"{q}.mlp.fc1", h, inter, "vision", bias=True)
            b.linear(f"{q}.mlp.fc2", inter, h, "vision", bias=True)
            b.norm(f"{q}.input_layernorm", h, bias=True, component="vision")
            b.norm(f"{q}.post_attention_layernorm", h, bias=True, component="vision")
            if gated:
                b.param(q, "gate_attn", 1, "vision")
                b.param(q, "gate_ffn", 1, "vision")
    b.linear("model.multi_modal_projector", get("vision_output_dim"), text_h, "projector", bias=True)
    return b.tensors


def mllama_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    """The language model: a Llama of the same sizes, 8 more embedding rows, and the cross-attention layers'
    q_norm / k_norm / gates inserted after each such layer's tensors."""
    cfg = {**TEXT, **{k: v for k, v in text.items() if v is not None}, "model_type": "llama"}
    c = ConfigReader(cfg)
    cross = set(cfg["cross_attention_layers"])
    arch = build({k: v for k, v in cfg.items() if k != "cross_attention_layers"})
    h = arch.hidden_size
    head_dim = c.int("head_dim", default=h // c.int("num_attention_heads"))
    out, last = [], {}
    for t in arch.tensors:
        if t.component == "embedding" and t.layer is None and len(t.shape) == 2:
            t = replace(t, numel=t.numel + 8 * h, shape=(t.shape[0] + 8, h))
        out.append(t)
        if t.layer in cross:
            last[t.layer] = len(out)
    for i in sorted(cross, reverse=True):
        b = TensorList()
        q = f"model.layers.{i}"
        b.param(f"{q}.cross_attn.q_norm", "weight", head_dim, "norm")
        b.param(f"{q}.cross_attn.k_norm", "weight", head_dim, "norm")
        b.param(q, "cross_attn_attn_gate", 1, "attention")
        b.param(q, "cross_attn_mlp_gate", 1, "attention")
        out[last[i]:last[i]] = b.tensors
    return replace(arch, tensors=tuple(out), image_cross_layers=tuple(sorted(cross)))
