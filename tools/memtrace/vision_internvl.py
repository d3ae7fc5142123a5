"""What InternVL's InternViT tower and projector keep for backward, traced on CPU tensors.

modeling_internvl.py (transformers 5.24) InternVLModel.get_image_features: InternVLVisionModel (class token,
absolute positions, InternVLVisionLayer: layernorm_before, q/k/v, SDPA, projection_layer, lambda_1 layer scale,
layernorm_after, fc1 / GELU / fc2, lambda_2), the last hidden state (vision_feature_layer -1) without its class
token, pixel_shuffle (downsample_ratio 0.5: 4 patches to one token of 4h) and InternVLMultiModalProjector
(LayerNorm, linear_1, GELU, linear_2). The pooled features' sum stands for the loss (the language model takes
them by masked_scatter, which saves only its mask); the outputs are dropped and the activation storages still
alive are what autograd saved. Real CPU tensors of tiny widths (the ops dispatch as on FakeTensors), bf16, SDPA;
`tiles` 448-px-style tiles (images or crops of a dynamically tiled image) of `image_size` pixels each.

  python -m tools.memtrace.vision_internvl > tests/data/vision_internvl_trace.json      (a few seconds)
"""
from __future__ import annotations

import contextlib

import torch

from .vision_qwen import flash_attention_2, print_trace, saved_after_forward

TOWER = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
         "image_size": 112, "patch_size": 14, "model_type": "internvl_vision"}
TEXT = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 4, "vocab_size": 1000, "model_type": "qwen2"}
# InternViT-6B's switches (OpenGVLab/InternVL*-78B-hf vision_config): RMSNorm and q/k norms, no mean pooling
SIX_B = {"norm_type": "rms_norm", "use_qk_norm": True, "use_mean_pooling": False}
CASES = [{"id": "internvl-tiny-t1", "tiles": 1},
         {"id": "internvl-tiny-t3", "tiles": 3},
         {"id": "internvl-tiny-t2-layer-2", "tiles": 2, "vision_feature_layer": -2},
         {"id": "internvl-tiny-t2-6b-switches", "tiles": 2, "tower": SIX_B},
         {"id": "internvl-tiny-t2-ac", "tiles": 2, "checkpointing": True},
         # attn_implementation flash_attention_2: HF's glue, the kernel's saves stood in for (vision_qwen.py)
         {"id": "internvl-tiny-t2-fa2", "tiles": 2, "attention": "flash_attention_2"}]


def config(case: dict) -> dict:
    return {"model_type": "internvl", "text_config": dict(TEXT), "vision_config": {**TOWER, **case.get("tower", {})},
            "vision_feature_layer": case.get("vision_feature_layer", -1), "downsample_ratio": 0.5,
            "image_token_id": 999, "tie_word_embeddings": False}


def trace_case(case: dict) -> dict:
    from transformers import AutoConfig  # noqa: PLC0415
    from transformers.models.internvl.modeling_internvl import InternVLModel  # noqa: PLC0415
    raw = config(case)
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "model_type"}, model_type="internvl")
    torch.manual_seed(0)
    model = InternVLModel._from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.train()
    if case.get("attention") == "flash_attention_2":
        model.vision_tower.config._attn_implementation = "flash_attention_2"
    if case.get("checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    size = TOWER["image_size"]
    pix = torch.randn(case["tiles"], 3, size, size, dtype=torch.bfloat16)
    with flash_attention_2() if case.get("attention") == "flash_attention_2" else contextlib.nullcontext():
        saved = saved_after_forward(model, (pix,), lambda: model.get_image_features(
            pixel_values=pix, vision_feature_layer=raw["vision_feature_layer"],
            vision_feature_select_strategy="default", return_dict=True))
    tower = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("language_model."))
    return {**case, "config": raw, "patches": (size // TOWER["patch_size"]) ** 2,
            "saved_bytes_forward_end": saved, "tower_and_projector_params": tower}


def main() -> int:
    return print_trace("python -m tools.memtrace.vision_internvl", CASES, trace_case)


if __name__ == "__main__":
    raise SystemExit(main())
