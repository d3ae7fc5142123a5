"""ERNIE-4.5-VL-MoE (modeling_ernie4_5_vl_moe.py Ernie4_5_VLMoeForConditionalGeneration, transformers 5.24; the
config classes' defaults):

- the vision tower (Ernie4_5_VLMoeVisionTransformerPretrainedModel): a patch_embed linear (channels x patch^2 ->
  h, no bias), ``depth`` blocks of LayerNorms norm1/norm2, a biased fused qkv and proj, biased fc1/fc2
  (intermediate_size), a final LayerNorm ``ln``;
- the resampler (Ernie4_5_VLMoeVariableResolutionResamplerModel): spatial_linear (fc1 / fc2 over h x merge^2,
  biased, a LayerNorm) and temporal_linear (from h x merge^2 x temporal_merge_size), a biased mlp to the text
  width and an RMSNorm after_norm;
- the language model: ERNIE-4.5-MoE's block (modeling_ernie4_5_moe.py, moe.py) whose sparse layers
  (mlp_layer_types, default one dense layer then sparse) hold text_moe (moe_intermediate_size[0]) and
  shared_experts (moe_intermediate_size[0] x moe_num_shared_experts) as ERNIE-4.5-MoE does, plus vision_moe: a
  second router (num_experts x h, its e_score_correction_bias) and experts of moe_intermediate_size[1]. It is
  built as ERNIE-4.5-MoE and the vision experts are inserted. A text-only step never reaches them (no gradient,
  no optimizer state: memory/ernie_vl.py) and is traced; fed image tokens, their activations are costed with the
  text experts', which the plan's ``model_support`` says (memory/ernie_vl.py fed_support).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from ..errors import PlanError
from .config import ConfigReader, TensorList

VISION = {"depth": 32, "hidden_size": 1280, "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
          "intermediate_size": 5120, "temporal_merge_size": 2}
TEXT = {"vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
        "num_attention_heads": 20, "num_key_value_heads": 4, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_intermediate_size": [1536, 512]}


def _lin(b: TensorList, m: str, d_in: int, d_out: int, comp: str) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    b.param(m, "bias", d_out, comp)


def _ln(b: TensorList, m: str, d: int, comp: str) -> None:
    b.param(m, "weight", d, comp)
    b.param(m, "bias", d, comp)


def ernie4_5_vl_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=VISION[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    b = TensorList()
    b.matrix(f"{p}.patch_embed.proj", "weight", (h, get("in_channels") * get("patch_size") ** 2), "vision", "proj")
    for i in range(get("depth")):
        q = f"{p}.blocks.{i}"
        _ln(b, f"{q}.norm1", h, "vision")
        _ln(b, f"{q}.norm2", h, "vision")
        _lin(b, f"{q}.attn.qkv", h, 3 * h, "vision")
        _lin(b, f"{q}.attn.proj", h, h, "vision")
        _lin(b, f"{q}.mlp.fc1", h, inter, "vision")
        _lin(b, f"{q}.mlp.fc2", inter, h, "vision")
    _ln(b, f"{p}.ln", h, "vision")
    m, sd = "model.resampler_model", h * get("spatial_merge_size") ** 2
    for name, d_in in (("spatial_linear", sd), ("temporal_linear", sd * get("temporal_merge_size"))):
        _lin(b, f"{m}.{name}.fc1", d_in, sd, "projector")
        _lin(b, f"{m}.{name}.fc2", sd, sd, "projector")
        _ln(b, f"{m}.{name}.ln", sd, "projector")
    _lin(b, f"{m}.mlp", sd, text_h, "projector")
    b.param(f"{m}.after_norm", "weight", text_h, "projector")
    return b.tensors


def ernie4_5_vl_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    cfg = {**TEXT, **{k: v for k, v in text.items() if v is not None}}
    c = ConfigReader(cfg)
    n = c.int("num_hidden_layers")
    types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    sparse = [i for i, t in enumerate(types) if t == "sparse"]
    inter = cfg["moe_intermediate_size"]
    if not sparse or sparse != list(range(sparse[0], n)) or not isinstance(inter, list) or len(inter) != 2:
        raise PlanError("model.text_config.mlp_layer_types", "model_type 'ernie4_5_vl_moe' is modelled with dense "
                        "layers first, then sparse ones to the end, and two moe_intermediate_size entries")
    ernie = {k: v for k, v in cfg.items() if k not in ("mlp_layer_types", "moe_intermediate_size")}
    arch = build({**ernie, "model_type": "ernie4_5_moe", "moe_intermediate_size": inter[0],
                  "moe_layer_start_index": sparse[0], "moe_layer_interval": 1, "moe_layer_end_index": n - 1})
    h, e = c.int("hidden_size"), c.int("moe_num_experts")
    out, last = [], {}
    for t in arch.tensors:
        out.append(t)
        if t.layer in sparse and ".experts." in t.name:
            last[t.layer] = len(out)
    for i in sorted(last, reverse=True):
        b, q = TensorList(), f"model.layers.{i}.mlp.vision_moe"
        b.matrix(f"{q}.gate", "weight", (e, h), "router")
        b.param(f"{q}.gate.moe_statics", "e_score_correction_bias", e, "router")
        b.matrix(f"{q}.experts", "gate_up_proj", (e, h, 2 * inter[1]), "routed_experts")
        b.matrix(f"{q}.experts", "down_proj", (e, h, inter[1]), "routed_experts")
        out[last[i]:last[i]] = b.tensors
    # a text-only step runs text_moe alone (traced: tools/memtrace/families.py ernie_vl); fed image tokens the
    # vision experts' activations are not modelled (memory/ernie_vl.py fed_support says so per plan)
    return replace(arch, tensors=tuple(out), support=arch.support)
