"""LFM2-VL's SigLIP 2 NaFlex tower and pixel-unshuffle projector: the shape memory/vision_siglip2.py costs (the
parameters: model/vision.py lfm2_vl_parts)."""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader
from .vision import SIGLIP2


def lfm2_vl_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """The activation shape of LFM2-VL's tower and projector (memory/vision_siglip2.py), read by Siglip2VisionConfig's
    and Lfm2VlConfig's field names and defaults: every layer runs (get_image_features reads last_hidden_state)."""
    v, c = ConfigReader(cfg["vision_config"]), ConfigReader(cfg)
    act = v.str("hidden_act", "gelu_pytorch_tanh")
    return {"kind": "lfm2_vl", "hidden": v.int("hidden_size", default=SIGLIP2["hidden_size"]),
            "inter": v.int("intermediate_size", default=SIGLIP2["intermediate_size"]),
            "heads": v.int("num_attention_heads", default=12),
            "layers_run": v.int("num_hidden_layers", default=SIGLIP2["num_hidden_layers"]),
            "positions": v.int("num_patches", default=SIGLIP2["num_patches"]),
            "mlp_tensors": 3 if act == "quick_gelu" else 2, "factor": c.int("downsample_factor", default=2),
            "mid": c.int("projector_hidden_size", default=2560),
            "layernorm": c.bool("projector_use_layernorm", True), "text_hidden": text_h}
