"""HY-V4-VL's vision tower (transformers 5.24 modular_hy_v4_vl.py HYV4VLVisionModel, a
HunYuanVLVisionTransformer: vision_more.hunyuan_vl_tower) and its patch merger (HYV4VLVisionPatchMerger):
image_newline (out_hidden_size), proj_conv (a biased Conv2d h -> h x merge^2 of kernel spatial_merge_size),
proj_out (a biased 1x1 Conv2d -> out_hidden_size, the text width) and before_rms (an RMSNorm over h); no mlp,
after_rms or image begin / end / sep embeddings. Defaults: HYV4VLVisionConfig over HunYuanVLVisionConfig.
The language model is HY-V4's (HYV4VLTextModel subclasses HYV4Model; HYV4VLTextConfig's own defaults in TEXT): its
activations are traced fed text only (memory/blocks_hy_v4.py, tools/memtrace/hy_v4_trace.py hy_v4_vl); the tower's
are not modelled (memory/vision.py plan_support says so where a plan trains it or feeds it images).
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision_more import HUNYUAN_VL, hunyuan_vl_tower

VISION = {**HUNYUAN_VL, "hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 40,
          "out_hidden_size": 6144}
# HYV4VLTextConfig's defaults where they differ from HYV4Config's
TEXT = {"hidden_size": 6144, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 78,
        "num_attention_heads": 64, "q_lora_rank": 2048, "index_n_heads": 32}


def hy_v4_vl_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    b = TensorList()
    h = hunyuan_vl_tower(b, v, VISION)
    merge, out, m = v.int("spatial_merge_size", default=VISION["spatial_merge_size"]), v.int(
        "out_hidden_size", default=VISION["out_hidden_size"]), "model.vision_tower.patch_merger"
    b.param(m, "image_newline", out, "projector")
    b.matrix(f"{m}.proj_conv", "weight", (h * merge * merge, h, merge, merge), "projector")
    b.param(f"{m}.proj_conv", "bias", h * merge * merge, "projector")
    b.matrix(f"{m}.proj_out", "weight", (out, h * merge * merge, 1, 1), "projector")
    b.param(f"{m}.proj_out", "bias", out, "projector")
    b.norm(f"{m}.before_rms", h, component="projector")
    return b.tensors
