"""Step 3.7 (transformers 5.24 modeling_step3p7.py Step3p7ForConditionalGeneration): ``model.vision_model``,
``model.multi_modal_projector`` and the step3p5 language model ``model.language_model``.

Language model (Step3p7TextModel; Step3p7TextConfig's defaults), per layer:
- self_attn (Step3p7Attention, heads from per_layer_config[i] else num_attention_heads; a sliding_attention
  layer's default is num_sliding_attention_heads): q_proj, k_proj / v_proj (num_key_value_heads x head_dim),
  o_proj (attention_bias), per-head q_norm / k_norm, g_proj (h -> heads with per-head gating, the default, else
  heads x head_dim; no bias);
- mlp: Step3p7MLP (gate/up/down of intermediate_size, mlp_bias) in ``dense`` layers of mlp_layer_types (default:
  the first 3), else the sparse block: gate (n_routed_experts x h), experts (fused gate_up / down of
  moe_intermediate_size) and shared_experts (a Step3p7MLP of share_expert_dim);
- input_layernorm, post_attention_layernorm.
``norm``; multi-token-prediction layers are not built (num_nextn_predict_layers only names checkpoint keys to
ignore); lm_head untied unless the composite's tie_word_embeddings.

Vision (Step3p7VisionModel; Step3p7VisionConfig's defaults, with its width / layers / heads aliases): a patch
Conv2d without bias, (image_size / patch_size)^2 positions, pre_layernorm; layers of self_attn k/v/q/out_proj and
mlp fc1 / fc2 (int(hidden x mlp_ratio)), all biased, layernorm_before / layernorm_after and the layer scales
lambda_1 / lambda_2; downsampler1 (3x3 Conv2d h -> 2h) and downsampler2 (2h -> 4h), biased. Projector: a Linear
4h -> text width (projector_bias).

A legacy hub config (moe_layers_enum, attention_other_setting, MTP-padded per-layer lists) is read by
Step3p7TextConfig.__post_init__, which this module does not redo: such a config is refused by name.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..errors import PlanError
from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn
from .recurrent import recurrent_arch
from .vit_layers import layer_scaled_vit

TEXT = {"vocab_size": 128815, "hidden_size": 4096, "intermediate_size": 11264, "num_hidden_layers": 45,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "num_experts_per_tok": 8,
        "moe_intermediate_size": 1280, "n_routed_experts": 288, "share_expert_dim": 1280}
VISION = {"hidden_size": 1536, "num_hidden_layers": 47, "num_channels": 3, "image_size": 728, "patch_size": 14}
SUPPORT = ("exact parameter count; activations traced (memory/blocks_step3p7.py: output-gated attention, "
           "clamped SwiGLUs, the experts' loop; tools/memtrace/more_moe_trace.py)")
LEGACY = ("moe_layers_enum", "attention_other_setting", "moe_layer_freq", "sparse_attention_config")


def step3p5(c: ConfigReader) -> ModelArch:
    g = lambda k: c.int(k, default=TEXT[k])   # noqa: E731 - the config class's default when left out
    h, n_layers, vocab, hd = g("hidden_size"), g("num_hidden_layers"), g("vocab_size"), g("head_dim")
    heads, kv, inter = g("num_attention_heads"), g("num_key_value_heads"), g("intermediate_size")
    kinds, mlp = c.cfg.get("layer_types"), c.cfg.get("mlp_layer_types")
    if any(k in c.cfg for k in LEGACY) or (kinds is not None and len(kinds) != n_layers) or (
            mlp is not None and len(mlp) != n_layers):
        raise PlanError("model.model_type", "model_type 'step3p7' (text model 'step3p5'): a legacy hub config ("
                        "moe_layers_enum / attention_other_setting / MTP-padded layer lists) is not modelled")
    kinds = kinds or ["full_attention"] * n_layers
    mlp = mlp or ["dense" if i < 3 else "sparse" for i in range(n_layers)]
    per_layer = {int(k): v for k, v in (c.cfg.get("per_layer_config") or {}).items()}
    sliding = c.int("num_sliding_attention_heads", default=heads)
    per_head = c.cfg.get("gating", True) in (True, "per-head")
    moe = MoE(num_experts=c.int("n_routed_experts", "num_local_experts", default=TEXT["n_routed_experts"]),
              experts_per_token=g("num_experts_per_tok"), expert_intermediate=g("moe_intermediate_size"),
              shared_intermediate=g("share_expert_dim"), dense_layers=sum(1 for k in mlp if k != "sparse"))
    bias, mlp_bias, tied = c.bool("attention_bias", False), c.bool("mlp_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    ei, si = moe.expert_intermediate, moe.shared_intermediate
    shapes: dict = {}
    layer_lins = []
    for i in range(n_layers):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        lh = int(per_layer.get(i, {}).get("num_attention_heads")
                 or (sliding if kinds[i] == "sliding_attention" and i not in per_layer else heads))
        for name, d_out in (("q_proj", lh * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            b.linear(f"{a}.{name}", h, d_out, "attention", bias)
        b.linear(f"{a}.o_proj", lh * hd, h, "attention", bias)
        b.norm(f"{a}.q_norm", hd)
        b.norm(f"{a}.k_norm", hd)
        b.linear(f"{a}.g_proj", h, lh if per_head else lh * hd, "attention")
        deepseek_ffn(b, p, h, moe, inter, mlp[i] == "sparse", "step3p5", bias=mlp_bias)
        att = (Linear("q_proj", h, lh * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
               Linear("o_proj", lh * hd, h), Linear("g_proj", h, lh if per_head else lh * hd))
        ffn = ((Linear("gate_up_proj", h, 2 * ei, moe.num_experts), Linear("down_proj", ei, h, moe.num_experts),
                Linear("gate_proj", h, si), Linear("up_proj", h, si), Linear("down_proj", si, h))
               if mlp[i] == "sparse" else
               (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h)))
        layer_lins.append(shapes.setdefault(att + ffn, att + ffn))
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    dense = next((x for x in layer_lins if len(x) == 8), layer_lins[0])
    arch = recurrent_arch(c, "step3p5", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=layer_lins[-1],
                          heads=heads, kv=kv, hd=hd, inter=inter, moe=moe, family="llama", what="", support=SUPPORT)
    # memory/blocks_step3p7.py costs each layer from its own linears
    return replace(arch, gated_mlp=True, qk_norm="head", layer_linears=tuple(layer_lins), dense_block_linears=dense)


def step3p7_parts(cfg: Mapping, text_h: int) -> list:
    raw = cfg.get("vision_config") or {}
    v = ConfigReader({**raw, **{k: raw[a] for k, a in (("hidden_size", "width"), ("num_hidden_layers", "layers"))
                                if a in raw}})
    g = lambda k: v.int(k, default=VISION[k])   # noqa: E731 - the class default when left out
    h, patch = g("hidden_size"), g("patch_size")
    inter = int(h * float(raw.get("mlp_ratio", 8960 / 1536)))     # Step3p7VisionConfig.__post_init__
    p = "model.vision_model"
    b = TensorList()
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, g("num_channels"), patch, patch), "vision")
    b.matrix(f"{p}.embeddings.position_embedding", "weight", ((g("image_size") // patch) ** 2, h), "vision")
    b.norm(f"{p}.pre_layernorm", h, bias=True, component="vision")
    layer_scaled_vit(b, f"{p}.layers", g("num_hidden_layers"), h, inter)
    for name, c_in, c_out in (("downsampler1", h, 2 * h), ("downsampler2", 2 * h, 4 * h)):
        b.matrix(f"{p}.{name}", "weight", (c_out, c_in, 3, 3), "vision")
        b.param(f"{p}.{name}", "bias", c_out, "vision")
    b.linear("model.multi_modal_projector", 4 * h, text_h, "projector", cfg.get("projector_bias", False) is True)
    return b.tensors


STEP3P5 = {"step3p5": step3p5}
