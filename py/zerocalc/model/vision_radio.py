"""Nemotron-H Omni (modeling_nemotron_h_omni.py NemotronH_Omni_Reasoning_V3, transformers 5.24) without its
audio branch: a RADIO tower, an RMSNorm + ReLU^2 projector and a Nemotron-H language model.

- RADIO (modeling_radio.py RadioModel, RadioConfig's defaults): patch_projection (patch_dim = channels x
  patch^2 -> h, no bias) and, with video_temporal_patch_size, video_patch_projection (that many patch_dims);
  position_embedding ((max_img_size / patch)^2 x h); cls_register_token ((num_cls_tokens + num_registers) x
  h); layers of LayerNorm norm1 / norm2, q/k/v_proj (qkv_bias) and a biased o_proj, layer_scale1/2 (lambda1,
  h), an MLP fc1/fc2 (h x mlp_ratio, biased) or with use_swiglu_ffn gate/up/down (two thirds of it rounded up
  to 8, biased);
- vision_final_layernorm (vision_hidden_size, biased) only when the language model has MTP layers
  (num_nextn_predict_layers > 0);
- the projector: RMSNorm over vision_hidden_size / downsample_ratio^2, linear_1 to projector_hidden_size and
  linear_2 to the text width, no biases.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

RADIO = {"hidden_size": 1280, "num_hidden_layers": 32, "num_channels": 3, "patch_size": 16, "max_img_size": 2048,
         "num_cls_tokens": 3, "num_registers": 7}


def _lin(b: TensorList, m: str, d_in: int, d_out: int, bias: bool, comp: str = "vision") -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def nemotron_h_omni_parts(cfg: Mapping, text_h: int) -> list:
    v, c = ConfigReader(cfg.get("vision_config") or {}), ConfigReader(cfg)
    get = lambda k: v.int(k, default=RADIO[k])   # noqa: E731
    h, p = get("hidden_size"), "vision_model"
    patch_dim = get("num_channels") * get("patch_size") ** 2
    inter = int(h * float(v.cfg.get("mlp_ratio", 4.0)))
    swiglu = v.bool("use_swiglu_ffn", False)
    if swiglu:
        inter = (int(inter * 2 / 3) + 7) // 8 * 8
    b = TensorList()
    _lin(b, f"{p}.embeddings.patch_projection", patch_dim, h, False)
    temporal = v.cfg.get("video_temporal_patch_size")
    if temporal is not None:
        _lin(b, f"{p}.embeddings.video_patch_projection", int(temporal) * patch_dim, h, False)
    b.matrix(f"{p}.embeddings", "position_embedding", ((get("max_img_size") // get("patch_size")) ** 2, h), "vision")
    b.matrix(f"{p}.embeddings", "cls_register_token", (get("num_cls_tokens") + get("num_registers"), h), "vision")
    qkv_bias = v.bool("qkv_bias", True)
    for i in range(get("num_hidden_layers")):
        q = f"{p}.encoder.layer.{i}"
        for n in ("norm1", "norm2"):
            b.param(f"{q}.{n}", "weight", h, "vision")
            b.param(f"{q}.{n}", "bias", h, "vision")
        for name in ("q_proj", "k_proj", "v_proj"):
            _lin(b, f"{q}.attention.{name}", h, h, qkv_bias)
        _lin(b, f"{q}.attention.o_proj", h, h, True)
        b.param(f"{q}.layer_scale1", "lambda1", h, "vision")
        b.param(f"{q}.layer_scale2", "lambda1", h, "vision")
        if swiglu:
            for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
                _lin(b, f"{q}.mlp.{name}", d_in, d_out, True)
        else:
            _lin(b, f"{q}.mlp.fc1", h, inter, True)
            _lin(b, f"{q}.mlp.fc2", inter, h, True)
    vh = c.int("vision_hidden_size", default=1280)
    if ConfigReader(cfg.get("text_config") or {}).int("num_nextn_predict_layers", default=0, lo=0) > 0:
        b.param("vision_final_layernorm", "weight", vh, "vision")
        b.param("vision_final_layernorm", "bias", vh, "vision")
    d_in = vh * int(1 / float(cfg.get("downsample_ratio", 0.5))) ** 2
    mid = c.int("projector_hidden_size", default=4096)
    b.param("multi_modal_projector.layer_norm", "weight", d_in, "projector")
    _lin(b, "multi_modal_projector.linear_1", d_in, mid, False, "projector")
    _lin(b, "multi_modal_projector.linear_2", mid, text_h, False, "projector")
    return b.tensors
