"""Unlimited-OCR (transformers 5.24 modeling_unlimited_ocr.py UnlimitedOcrForConditionalGeneration).

Vision (UnlimitedOcrVisionModel, ``model.vision_tower``): sam_encoder, SAM's ViT and neck (vision_sam.sam_vit)
and proj (conv1 3x3 output_channels -> downsample_channels[0], conv2 3x3 -> downsample_channels[1], no bias);
vision_encoder, a CLIP encoder without a patch embedding (it reads SAM's features): class_embedding,
position_embedding ((image_size / patch_size)^2 + 1), pre_layrnorm and CLIP layers (vit_layers.clip_layers),
no post-layernorm. ``model.multi_modal_projector`` a biased Linear (downsample_channels[-1] + CLIP width ->
text width); ``model.view_separator`` and ``model.image_newline`` (text width each).

Language model (UnlimitedOcrTextModel; UnlimitedOcrTextConfig's defaults): per layer q/k/v/o_proj
(num_attention_heads / num_key_value_heads x head_dim, attention_bias), a SwiGLU mlp (mlp_bias) in ``dense``
layers of mlp_layer_types (default: sparse from first_k_dense_replace, 1) else experts (fused gate_up / down of
moe_intermediate_size), the gate and shared_experts (moe_intermediate_size x n_shared_experts, mlp_bias);
input_layernorm, post_attention_layernorm. norm; lm_head untied unless the top-level tie_word_embeddings.
The reference sliding window holds no parameters.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn
from .recurrent import llama_lins, recurrent_arch
from .vision_sam import sam_vit
from .vit_layers import clip_layers

TEXT = {"vocab_size": 129280, "hidden_size": 1280, "intermediate_size": 6848, "num_hidden_layers": 12,
        "num_attention_heads": 10, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
        "moe_intermediate_size": 896}
SUPPORT = ("exact parameter count; activations traced (memory/blocks.py llama_block and sparse_moe, the experts' "
           "gradient moment in the top sparse layer, memory/expert_backward.py; tools/memtrace/more_moe_trace.py)")
CLIP_ENCODER = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "image_size": 224,
                "patch_size": 14}


def unlimited_ocr_text(c: ConfigReader) -> ModelArch:
    g = lambda k: c.int(k, default=TEXT[k], lo=0)   # noqa: E731 - the config class's default when left out
    h, n_layers, vocab, heads, inter = (g("hidden_size"), g("num_hidden_layers"), g("vocab_size"),
                                        g("num_attention_heads"), g("intermediate_size"))
    kv, hd = c.int("num_key_value_heads", default=heads), c.int("head_dim", default=h // heads)
    kinds = c.cfg.get("mlp_layer_types")
    if not isinstance(kinds, list):
        first = c.int("first_k_dense_replace", default=1, lo=0)
        kinds = ["sparse" if i >= first else "dense" for i in range(n_layers)]
    # UnlimitedOcrTextTopkRouter.forward: F.linear(hidden_states.type(torch.float32), self.weight.type(float32))
    moe = MoE(num_experts=c.int("n_routed_experts", "num_experts", default=TEXT["n_routed_experts"]),
              experts_per_token=g("num_experts_per_tok"), expert_intermediate=g("moe_intermediate_size"),
              shared_intermediate=g("n_shared_experts") * g("moe_intermediate_size"),
              dense_layers=sum(1 for k in kinds if k != "sparse"), router_fp32="cast")
    bias, mlp_bias, tied = c.bool("attention_bias", False), c.bool("mlp_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    ei, shared = moe.expert_intermediate, moe.shared_intermediate
    att = llama_lins(h, heads, kv, hd, inter)[:4]
    sparse_lins = att + (Linear("gate_up_proj", h, 2 * ei, moe.num_experts),
                         Linear("down_proj", ei, h, moe.num_experts), Linear("gate_proj", h, shared),
                         Linear("up_proj", h, shared), Linear("down_proj", shared, h))
    dense_lins = llama_lins(h, heads, kv, hd, inter)
    for i in range(n_layers):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        b.qkv(a, h, heads, kv, hd, bias)
        b.linear(f"{a}.o_proj", heads * hd, h, "attention", bias)
        deepseek_ffn(b, p, h, moe, inter, kinds[i] == "sparse", bias=mlp_bias)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    per_layer = tuple(sparse_lins if k == "sparse" else dense_lins for k in kinds)
    arch = recurrent_arch(c, "unlimited_ocr_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied,
                          lins=per_layer[-1], heads=heads, kv=kv, hd=hd, inter=inter, moe=moe, family="llama",
                          what="", support=SUPPORT)
    return replace(arch, gated_mlp=True, layer_linears=per_layer, dense_block_linears=dense_lins)


def unlimited_ocr_parts(cfg: Mapping, text_h: int) -> list:
    vision = cfg.get("vision_config") or {}
    sam = ConfigReader(vision.get("sam_config") or {})
    e = ConfigReader(vision.get("encoder_config") or {})
    g = lambda k: e.int(k, default=CLIP_ENCODER[k])   # noqa: E731 - the class default when left out
    p, down = "model.vision_tower", list(sam.cfg.get("downsample_channels") or (512, 1024))
    b = TensorList()
    _, oc = sam_vit(b, f"{p}.sam_encoder", sam)
    b.matrix(f"{p}.sam_encoder.proj.conv1", "weight", (down[0], oc, 3, 3), "vision")
    b.matrix(f"{p}.sam_encoder.proj.conv2", "weight", (down[1], down[0], 3, 3), "vision")
    h, q = g("hidden_size"), f"{p}.vision_encoder"
    b.param(f"{q}.embeddings", "class_embedding", h, "vision")
    b.matrix(f"{q}.embeddings.position_embedding", "weight", ((g("image_size") // g("patch_size")) ** 2 + 1, h),
             "vision")
    b.norm(f"{q}.pre_layrnorm", h, bias=True, component="vision")
    clip_layers(b, f"{q}.encoder.layers", g("num_hidden_layers"), h, g("intermediate_size"))
    b.linear("model.multi_modal_projector", down[-1] + h, text_h, "projector", bias=True)
    b.param("model", "view_separator", text_h, "projector")
    b.param("model", "image_newline", text_h, "projector")
    return b.tensors


UNLIMITED_OCR = {"unlimited_ocr_text": unlimited_ocr_text}
