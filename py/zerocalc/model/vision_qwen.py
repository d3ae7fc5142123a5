"""The Qwen vision towers (``model.visual``), as transformers 5.24 registers them; the merger projects to
the text width, so the tower and its projector are one module (component ``vision``, the merger's tensors
``projector``).

- Qwen2-VL (modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel): patch_embed.proj Conv3d
  (embed_dim, in_channels x temporal_patch_size x patch_size^2, no bias); ``depth`` blocks of norm1/norm2
  LayerNorm, attn.qkv + attn.proj and mlp.fc1/fc2 (embed_dim x mlp_ratio), all biased; merger: ln_q
  LayerNorm(embed_dim) and mlp.0 / mlp.2 from embed_dim x spatial_merge_size^2 to ``hidden_size``.
- Qwen2.5-VL (modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel): RMSNorm norm1/norm2, a
  biased gated MLP (gate_proj/up_proj/down_proj, ``intermediate_size``), merger ln_q RMSNorm to
  ``out_hidden_size``.
- Qwen3-VL (modeling_qwen3_vl.py Qwen3VLVisionModel): biased Conv3d, a learned pos_embed
  (num_position_embeddings x hidden_size), LayerNorm blocks with linear_fc1/linear_fc2, a merger (norm over
  hidden_size) and one more per ``deepstack_visual_indexes`` entry (norm over the merged width); Qwen3.5's
  tower is the same without deepstack mergers.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

QWEN2_VL = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "in_channels": 3,
            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
QWEN2_5_VL = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "in_channels": 3, "patch_size": 14,
              "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584}
QWEN3_VL = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "in_channels": 3, "patch_size": 16,
            "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584,
            "num_position_embeddings": 2304, "deepstack_visual_indexes": (8, 16, 24)}

# Qwen3.5 (modeling_qwen3_5.py Qwen3_5VisionModel): Qwen3-VL's tower without the deepstack mergers
QWEN3_5 = {**QWEN3_VL, "deepstack_visual_indexes": ()}


def _lin(b: TensorList, m: str, d_in: int, d_out: int, comp: str = "vision") -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    b.param(m, "bias", d_out, comp)


def _norm(b: TensorList, m: str, d: int, bias: bool, comp: str = "vision") -> None:
    b.param(m, "weight", d, comp)
    if bias:
        b.param(m, "bias", d, comp)


def qwen_visual(cfg: Mapping, version: str, kv_heads_default: int | None = None) -> list:
    """The tensors of ``model.visual`` for version "2", "2.5", "3" or "3.5". EXAONE 4.5's tower
    (modeling_exaone4_5.py Exaone4_5_VisionAttention) is Qwen2.5-VL's with grouped k/v in the fused qkv
    (num_key_value_heads of num_heads, ``kv_heads_default`` its config's default)."""
    v = ConfigReader(cfg.get("vision_config") or {})
    d = {"2": QWEN2_VL, "2.5": QWEN2_5_VL, "3": QWEN3_VL, "3.5": QWEN3_5}[version]
    version = "3" if version == "3.5" else version
    get = lambda k: v.int(k, default=d[k])   # noqa: E731 - the class default when the field is left out
    p = "model.visual"
    h = get("embed_dim") if version == "2" else get("hidden_size")
    kernel = get("in_channels") * get("temporal_patch_size") * get("patch_size") ** 2
    b = TensorList()
    b.matrix(f"{p}.patch_embed.proj", "weight", (h, kernel), "vision")
    if version == "3":
        b.param(f"{p}.patch_embed.proj", "bias", h, "vision")
        b.matrix(f"{p}.pos_embed", "weight", (get("num_position_embeddings"), h), "vision")
    ln = version != "2.5"
    heads = v.int("num_heads", default=16)
    kv_dim = h if kv_heads_default is None else v.int("num_key_value_heads", default=kv_heads_default) * (h // heads)
    inter = h * get("mlp_ratio") if version == "2" else get("intermediate_size")
    for i in range(get("depth")):
        q = f"{p}.blocks.{i}"
        _norm(b, f"{q}.norm1", h, ln)
        _norm(b, f"{q}.norm2", h, ln)
        _lin(b, f"{q}.attn.qkv", h, h + 2 * kv_dim)
        _lin(b, f"{q}.attn.proj", h, h)
        if version == "2":
            _lin(b, f"{q}.mlp.fc1", h, inter)
            _lin(b, f"{q}.mlp.fc2", inter, h)
        elif version == "2.5":
            _lin(b, f"{q}.mlp.gate_proj", h, inter)
            _lin(b, f"{q}.mlp.up_proj", h, inter)
            _lin(b, f"{q}.mlp.down_proj", inter, h)
        else:
            _lin(b, f"{q}.mlp.linear_fc1", h, inter)
            _lin(b, f"{q}.mlp.linear_fc2", inter, h)
    merged = h * get("spatial_merge_size") ** 2
    out = get("hidden_size") if version == "2" else get("out_hidden_size")
    if version == "3":
        mergers = [(f"{p}.merger", h)] + [(f"{p}.deepstack_merger_list.{j}", merged)
                                          for j in range(len(v.cfg.get("deepstack_visual_indexes",
                                                                       d["deepstack_visual_indexes"])))]
        for m, nd in mergers:
            _norm(b, f"{m}.norm", nd, True, "projector")
            _lin(b, f"{m}.linear_fc1", merged, merged, "projector")
            _lin(b, f"{m}.linear_fc2", merged, out, "projector")
    else:
        _norm(b, f"{p}.merger.ln_q", h, ln, "projector")
        _lin(b, f"{p}.merger.mlp.0", merged, merged, "projector")
        _lin(b, f"{p}.merger.mlp.2", merged, out, "projector")
    return b.tensors


GLM4V = {"depth": 24, "hidden_size": 1536, "in_channels": 3, "image_size": 336, "patch_size": 14,
         "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 4096, "intermediate_size": 13696}


def glm4v_visual(cfg: Mapping) -> list:
    """GLM-4.1V / GLM-4.6V (modeling_glm4v.py Glm4vVisionModel): learned position embedding
    ((image_size / patch_size)^2 x h), biased Conv3d patch_embed, ``depth`` blocks of RMSNorm norm1/norm2,
    attn.qkv (attention_bias) + attn.proj (no bias) and a bias-free gated MLP of width out_hidden_size;
    merger (proj, LayerNorm post_projection_norm, gate/up/down to intermediate_size, no biases),
    post_conv_layernorm, downsample Conv2d (h -> out_hidden_size, kernel spatial_merge_size, biased),
    post_layernorm."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=GLM4V[k])   # noqa: E731
    p, h, out = "model.visual", get("hidden_size"), get("out_hidden_size")
    qkv_bias = v.bool("attention_bias", False)
    b = TensorList()
    b.matrix(f"{p}.embeddings.position_embedding", "weight", ((get("image_size") // get("patch_size")) ** 2, h),
             "vision")
    b.matrix(f"{p}.patch_embed.proj", "weight",
             (h, get("in_channels") * get("temporal_patch_size") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.patch_embed.proj", "bias", h, "vision")
    for i in range(get("depth")):
        q = f"{p}.blocks.{i}"
        _norm(b, f"{q}.norm1", h, False)
        _norm(b, f"{q}.norm2", h, False)
        b.matrix(f"{q}.attn.qkv", "weight", (3 * h, h), "vision", "qkv")
        if qkv_bias:
            b.param(f"{q}.attn.qkv", "bias", 3 * h, "vision")
        b.matrix(f"{q}.attn.proj", "weight", (h, h), "vision", "proj")
        for name, d_in, d_out in (("gate_proj", h, out), ("up_proj", h, out), ("down_proj", out, h)):
            b.matrix(f"{q}.mlp.{name}", "weight", (d_out, d_in), "vision", name)
    m, inter = f"{p}.merger", get("intermediate_size")
    b.matrix(f"{m}.proj", "weight", (out, out), "projector", "proj")
    _norm(b, f"{m}.post_projection_norm", out, True, "projector")
    for name, d_in, d_out in (("gate_proj", out, inter), ("up_proj", out, inter), ("down_proj", inter, out)):
        b.matrix(f"{m}.{name}", "weight", (d_out, d_in), "projector", name)
    _norm(b, f"{p}.post_conv_layernorm", h, False)
    merge = get("spatial_merge_size")
    b.matrix(f"{p}.downsample", "weight", (out, h * merge * merge), "vision")
    b.param(f"{p}.downsample", "bias", out, "vision")
    _norm(b, f"{p}.post_layernorm", h, False)
    return b.tensors


GLM_OCR = {"depth": 24, "hidden_size": 1024, "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
           "temporal_patch_size": 2, "out_hidden_size": 1536, "intermediate_size": 4096, "num_heads": 16}


def glm_ocr_visual(cfg: Mapping) -> list:
    """GLM-OCR (modeling_glm_ocr.py GlmOcrVisionModel, GlmOcrVisionConfig's defaults): GLM-4V's tower without
    the learned position embedding and post_conv_layernorm; each block's qkv and proj and its gated MLP
    (intermediate_size) biased by attention_bias (default True), RMSNorm q_norm/k_norm over head_dim
    (hidden_size / num_heads); the merger (no biases) is out_hidden_size wide with gate/up/down to
    out_hidden_size x in_channels."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=GLM_OCR[k])   # noqa: E731
    p, h, out, inter = "model.visual", get("hidden_size"), get("out_hidden_size"), get("intermediate_size")
    bias = v.bool("attention_bias", True)
    head_dim = h // get("num_heads")
    b = TensorList()
    b.matrix(f"{p}.patch_embed.proj", "weight",
             (h, get("in_channels") * get("temporal_patch_size") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.patch_embed.proj", "bias", h, "vision")

    def lin(m: str, d_in: int, d_out: int, with_bias: bool, comp: str = "vision") -> None:
        b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
        if with_bias:
            b.param(m, "bias", d_out, comp)

    for i in range(get("depth")):
        q = f"{p}.blocks.{i}"
        _norm(b, f"{q}.norm1", h, False)
        _norm(b, f"{q}.norm2", h, False)
        lin(f"{q}.attn.qkv", h, 3 * h, bias)
        lin(f"{q}.attn.proj", h, h, bias)
        _norm(b, f"{q}.attn.q_norm", head_dim, False)
        _norm(b, f"{q}.attn.k_norm", head_dim, False)
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            lin(f"{q}.mlp.{name}", d_in, d_out, bias)
    m, ctx = f"{p}.merger", out * get("in_channels")
    lin(f"{m}.proj", out, out, False, "projector")
    _norm(b, f"{m}.post_projection_norm", out, True, "projector")
    for name, d_in, d_out in (("gate_proj", out, ctx), ("up_proj", out, ctx), ("down_proj", ctx, out)):
        lin(f"{m}.{name}", d_in, d_out, False, "projector")
    merge = get("spatial_merge_size")
    b.matrix(f"{p}.downsample", "weight", (out, h * merge * merge), "vision")
    b.param(f"{p}.downsample", "bias", out, "vision")
    _norm(b, f"{p}.post_layernorm", h, False)
    return b.tensors


# the activation of the tower's MLP by the config class's default hidden_act (Qwen2VLVisionConfig quick_gelu,
# Qwen2_5_VLVisionConfig silu, Qwen3VLVisionConfig / Qwen3_5VisionConfig gelu_pytorch_tanh)
QWEN_ACT = {"2": "quick_gelu", "2.5": "silu", "3": "gelu_pytorch_tanh", "3.5": "gelu_pytorch_tanh"}


def qwen_tower_spec(cfg: Mapping, version: str, text_hidden: int, projector: str = "merger",
                    kv_heads_default: int | None = None) -> dict:
    """The activation shape of ``model.visual`` (memory/vision_qwen.py) for version "2", "2.5", "3" or "3.5",
    read from the vision config by its own field names with the config classes' defaults (the dicts above):
    width, MLP width, heads, depth, the norm (Qwen2.5-VL's RMSNorm, else LayerNorm), whether the MLP is gated
    (Qwen2.5-VL's gate/up/down) and how many tensors its activation keeps beyond its input (QuickGELU
    x * sigmoid(1.702 x): the sigmoid and the product; one kernel: its output), the merge factor (image tokens
    = patches / spatial_merge_size^2), Qwen3-VL's deepstack mergers and learned position embedding, 2.5-VL's
    window index. ``projector`` "linear": HyperCLOVA X Vision V2's model.projector after the merger;
    ``kv_heads_default``: EXAONE 4.5's grouped k/v (num_key_value_heads, as in qwen_visual), the k/v width."""
    v = ConfigReader(cfg.get("vision_config") or {})
    d = {"2": QWEN2_VL, "2.5": QWEN2_5_VL, "3": QWEN3_VL, "3.5": QWEN3_5}[version]
    get = lambda k: v.int(k, default=d[k])   # noqa: E731
    h = get("embed_dim") if version == "2" else get("hidden_size")
    act = v.str("hidden_act", QWEN_ACT[version])
    heads = v.int("num_heads", default=16)
    kv = h if kv_heads_default is None else v.int("num_key_value_heads", default=kv_heads_default) * (h // heads)
    return {"kind": "qwen", "version": version, "hidden": h, "heads": heads, "kv": kv,
            "inter": h * get("mlp_ratio") if version == "2" else get("intermediate_size"),
            "layers": get("depth"), "norm": "rmsnorm" if version == "2.5" else "layernorm",
            "gated": version == "2.5", "act_tensors": 2 if act == "quick_gelu" else 1,
            "merge": get("spatial_merge_size"), "windowed": version == "2.5", "pos_embed": version in ("3", "3.5"),
            "deepstack": len(v.cfg.get("deepstack_visual_indexes", d["deepstack_visual_indexes"]))
            if version in ("3", "3.5") else 0,
            "out": get("hidden_size") if version == "2" else get("out_hidden_size"),
            "projector": projector, "text_hidden": text_hidden}


def glm4v_tower_spec(cfg: Mapping, text_hidden: int) -> dict:
    """The activation shape of GLM-4.1V's / GLM-4.6V's ``model.visual`` (memory/vision_qwen.py glm4v_saved_bytes):
    Glm4vVisionConfig's field names and defaults; its blocks' MLP is out_hidden_size wide, the merger's
    intermediate_size."""
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=GLM4V[k])   # noqa: E731
    h = get("hidden_size")
    return {"kind": "glm4v", "hidden": h, "inter": get("out_hidden_size"), "heads": v.int("num_heads", default=12),
            "kv": h, "layers": get("depth"), "merge": v.int("spatial_merge_size", default=2), "norm": "rmsnorm",
            "gated": True, "act_tensors": 1, "out": get("out_hidden_size"), "merger_inter": get("intermediate_size"),
            "positions": (get("image_size") // get("patch_size")) ** 2, "text_hidden": text_hidden}
