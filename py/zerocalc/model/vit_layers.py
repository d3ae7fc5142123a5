"""ViT layer stacks that several towers share, in transformers' registration order (all linears and
LayerNorms biased):

- clip_layers: CLIPEncoderLayer's shape (self_attn k/v/q/out_proj, layer_norm1, mlp fc1 / fc2, layer_norm2):
  MiniMaxM3VLVisionEncoderLayer, UnlimitedOcrEncoderLayer;
- layer_scaled_vit: the same linears with layer scales lambda_1 / lambda_2 and layernorm_before / _after
  (Step3p7VisionEncoderLayer, Inkling2VisionEncoderLayer).
"""
from __future__ import annotations

from .config import TensorList


def clip_layers(b: TensorList, p: str, n: int, h: int, inter: int) -> None:
    for i in range(n):
        q = f"{p}.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            b.linear(f"{q}.self_attn.{name}", h, h, "vision", bias=True)
        b.norm(f"{q}.layer_norm1", h, bias=True, component="vision")
        b.linear(f"{q}.mlp.fc1", h, inter, "vision", bias=True)
        b.linear(f"{q}.mlp.fc2", inter, h, "vision", bias=True)
        b.norm(f"{q}.layer_norm2", h, bias=True, component="vision")


def layer_scaled_vit(b: TensorList, p: str, n: int, h: int, inter: int) -> None:
    for i in range(n):
        q = f"{p}.{i}"
        b.param(q, "lambda_1", h, "vision")
        b.param(q, "lambda_2", h, "vision")
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            b.linear(f"{q}.self_attn.{name}", h, h, "vision", bias=True)
        b.linear(f"{q}.mlp.fc1", h, inter, "vision", bias=True)
        b.linear(f"{q}.mlp.fc2", inter, h, "vision", bias=True)
        b.norm(f"{q}.layernorm_before", h, bias=True, component="vision")
        b.norm(f"{q}.layernorm_after", h, bias=True, component="vision")
