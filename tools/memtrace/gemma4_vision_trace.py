"""What Gemma 4's vision tower and embed_vision keep for backward, traced on CPU tensors (transformers 5.24).

Each case builds Gemma4Model (modeling_gemma4.py: a one-layer text model beside Gemma4VisionModel and
Gemma4MultimodalEmbedder; tiny widths, bf16, SDPA, trainable) and runs its ``get_image_features`` on real CPU
tensors: `images` images of a `grid` x `grid` patch grid (flattened 3·patch² pixels a patch, the (x, y) positions
Gemma4ImageProcessor writes), pooled by pooling_kernel_size 3 to grid² / 9 soft tokens an image, as the top-level
vision_soft_tokens_per_image says. The soft tokens' sum stands for the loss; the outputs are dropped and the
activation storages still alive are what autograd saved (vision_qwen.saved_after_forward). The engine's rule:
py/zerocalc/memory/vision_gemma4.py; the test: tests/test_gemma4_vision.py.

  python -m tools.memtrace.gemma4_vision_trace > tests/data/gemma4_vision_trace.json      (half a minute)
"""
from __future__ import annotations

import sys

import torch

from .vision_qwen import print_trace, saved_after_forward

TEXT = {"model_type": "gemma4_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "global_head_dim": 64, "vocab_size": 512,
        "hidden_size_per_layer_input": 0}
VISION = {"model_type": "gemma4_vision", "hidden_size": 128, "intermediate_size": 320, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 32, "patch_size": 8,
          "position_embedding_size": 64, "standardize": True}
CASES = [{"id": "gemma4-vision-i1-12x12", "images": 1, "grid": 12},
         {"id": "gemma4-vision-i2-12x12", "images": 2, "grid": 12},
         {"id": "gemma4-vision-i1-24x24", "images": 1, "grid": 24},
         {"id": "gemma4-vision-i1-12x12-l4", "images": 1, "grid": 12, "vision": {"num_hidden_layers": 4}},
         {"id": "gemma4-vision-i1-12x12-h96-heads5-hd16", "images": 1, "grid": 12,
          "vision": {"hidden_size": 96, "num_attention_heads": 5, "num_key_value_heads": 5, "head_dim": 16}},
         {"id": "gemma4-vision-i1-12x12-heads8-inter640", "images": 1, "grid": 12,
          "vision": {"num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 640}},
         {"id": "gemma4-vision-i1-12x12-nostd", "images": 1, "grid": 12, "vision": {"standardize": False}},
         {"id": "gemma4-vision-i2-12x12-ac", "images": 2, "grid": 12, "checkpointing": True}]


def config_of(case: dict) -> dict:
    return {"model_type": "gemma4", "text_config": TEXT, "vision_config": {**VISION, **case.get("vision", {})},
            "audio_config": None, "vision_soft_tokens_per_image": case["grid"] ** 2 // 9}


def trace(case: dict) -> dict:
    from transformers.models.gemma4.configuration_gemma4 import Gemma4Config  # noqa: PLC0415
    from transformers.models.gemma4.modeling_gemma4 import Gemma4Model  # noqa: PLC0415
    cfg_dict = config_of(case)
    cfg = Gemma4Config(**{k: v for k, v in cfg_dict.items() if k != "model_type"})
    for c in (cfg, cfg.vision_config, cfg.text_config):
        c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Gemma4Model(cfg).to(torch.bfloat16).train()
    if case.get("checkpointing"):
        model.vision_tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    g, images, p = case["grid"], case["images"], cfg.vision_config.patch_size
    pix = torch.rand(images, g * g, 3 * p * p, dtype=torch.bfloat16)
    ys, xs = torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")
    pos = torch.stack([xs.flatten(), ys.flatten()], -1).unsqueeze(0).repeat(images, 1, 1)
    saved = saved_after_forward(model, (pix, pos), lambda: model.get_image_features(pix, pos))
    return {**case, "config": cfg_dict, "checkpointing": bool(case.get("checkpointing")), "saved_bytes": saved}


def main() -> int:
    return print_trace("tools/memtrace/gemma4_vision_trace.py", CASES, trace)


if __name__ == "__main__":
    sys.exit(main())
