"""Composites whose tower is one already modelled (vision.py, vision_qwen.py) or a single linear, with the
projector each modelling file registers (transformers 5.24):

- Cohere2 Vision (modeling_cohere2_vision.py Cohere2VisionMultiModalProjector): a SigLIP tower, the
  pixel-shuffled features (vision h x downsample_factor^2) through linear_1 to alignment_intermediate_size,
  SwiGLU, linear_2 from half of it to the text width, both biased; no LayerNorm (Aya Vision's has one);
- Fuyu (modeling_fuyu.py FuyuModel.vision_embed_tokens): no tower, one biased linear from a flattened patch
  (patch_size^2 x num_channels, read from the top-level config) to the text width;
- HyperCLOVA X Vision V2 (modeling_hyperclovax_vision_v2.py): a Qwen2.5-VL tower (vision_qwen.py, its merger
  to out_hidden_size) and ``projector``, one biased linear to the text width;
- VideoLLaMA 3 (modeling_video_llama_3.py): a SigLIP-layer tower with rotary positions (no table, no head) and
  VideoLlama3Projector.readout: two biased linears, vision h -> text h -> text h;
- Idefics2 (modeling_idefics2.py): a SigLIP-layer tower without head; the connector's modality_projection
  (Idefics2MLP, no biases: gate/up vision h -> the text intermediate_size, down -> text h) and
  perceiver_resampler (latents n x H; resampler_depth layers of RMSNorms input_latents_norm,
  input_context_norm, post_attention_layernorm, q/o (resampler_n_heads x resampler_head_dim), k/v
  (num_key_value_heads x head_dim), an Idefics2MLP of 4H; a final RMSNorm), H the text width
  (Idefics2Config.__post_init__ sets the perceiver's hidden_size to it);
- Kimi K2.5 (modeling_kimi_k25.py Kimi_K25VisionModel, Kimi_K25VisionConfig's defaults): biased patch
  Conv2d, a learned pos_emb grid (pos_emb_height x pos_emb_width x h), layers of LayerNorm norm1/norm2, biased
  q/k/v_proj + proj and fc1/fc2, final_layernorm; mm_projector: pre_norm LayerNorm over
  projection_hidden_size, in_proj (h x merge area, square) and out_proj to the text width, biased;
- Aria (modeling_aria.py AriaProjector): an Idefics3 tower (SigLIP layers, no head), then ``query``
  (max_value_projector_patch_to_query_dict x vision h), cross_attn (q/k/v_proj square without bias, an
  nn.MultiheadAttention: in_proj 3h x h and out_proj, biased; a biased ``linear``; LayerNorms layer_norm and
  layer_norm_kv), a LayerNorm and feed_forward (linear_in vision h -> text h, linear_out text h square, no bias);
- Ovis2 (modeling_ovis2.py Ovis2VisionModel, Ovis2VisionConfig's defaults): biased patch Conv2d, positions
  (image/patch)^2 x h, an RMSNorm; layers of q/k/v/out_proj (qkv_bias), a gated MLP (mlp_bias) and RMSNorms
  rms_norm1/2; a final RMSNorm; head_linear (h x hidden_stride^2 -> vocab_size - num_visual_indicator_tokens,
  no bias) and head_norm (a LayerNorm over it); the model's visual_embeddings_table (vision vocab_size x the
  top-level hidden_size). Its lm_head (top-level hidden_size x vocab_size) is tied to the text embedding
  (Ovis2Config tie_word_embeddings True);
- Granite Docling (modeling_granite_docling.py GraniteDoclingVisionModel): a SigLIP-layer tower without head and
  its connector: ln_in, a coarse path (scale_factor) and with use_fine_route a fine one (scale_factor / 2), each
  a projection (h x s^2 -> out_hidden_size, no bias) and one DeepStackMerger per deepstack_visual_indexes entry
  (LayerNorm over h x s^2, biased linear_1 to out_hidden_size and linear_2); ln_mid, mlp_fc2 (no bias), ln_out;
  with density_router_hidden_size a density router (att h -> 1, a LayerNorm, fc1, fc2 -> 1, biased);
- HunYuan-VL (modeling_hunyuan_vl.py HunYuanVLVisionTransformer, HunYuanVLVisionConfig's defaults): biased patch
  Conv2d, positions ((max_image_size / patch)^2 + 1) x h, layers of LayerNorms and biased q/k/v/o and fc1/fc2;
  patch_merger: proj_conv (h -> 2h, kernel spatial_merge_size) and proj_out (2h -> 4h, 1x1), biased, a biased
  mlp (4h -> text_hidden_size, read from the vision config), image_newline (4h), image_begin / end / sep
  (text_hidden_size each), RMSNorms before_rms (h) and after_rms. The language model is HunYuan dense's block;
- Cosmos 3 Edge (modeling_cosmos3_edge.py): a SigLIP 2 tower without head, Cosmos3EdgePatchMerger (a LayerNorm
  over h, linear_fc1 h x merge^2 -> projector_hidden_size, linear_fc2 -> text h, biased); its language model
  (Cosmos3EdgeTextDecoderLayer) is Arcee's block, Llama's with an ungated ReLU^2 MLP, named fc1 / fc2.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from ..errors import PlanError
from .config import ConfigReader, TensorList
from .vision import vit
from .vision_qwen import QWEN2_5_VL, qwen_visual


def _linear(b: TensorList, m: str, d_in: int, d_out: int, comp: str = "projector", bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def cohere2_vision_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    vh = vit(b, "model.vision_tower", ConfigReader(cfg["vision_config"]), "siglip_vision_model")
    d_in = vh * c.int("downsample_factor", default=2) ** 2
    mid = c.int("alignment_intermediate_size", default=36864)
    _linear(b, "model.multi_modal_projector.linear_1", d_in, mid)
    _linear(b, "model.multi_modal_projector.linear_2", mid // 2, text_h)
    return b.tensors


def fuyu_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    c = ConfigReader(cfg)
    patch = c.int("patch_size", default=30)
    _linear(b, "model.vision_embed_tokens", patch * patch * c.int("num_channels", default=3), text_h, "vision")
    return b.tensors


def fuyu_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """Fuyu's patch linear (memory/vision.py): the flattened patch's width (FuyuConfig patch_size 30,
    num_channels 3, read from the top-level config); FuyuProcessor ends each row of image tokens with a
    |NEWLINE| token, so an image's patches are read from its tokens as Mistral 3's (memory/vision_pixtral.py)."""
    c = ConfigReader(cfg)
    return {"kind": "fuyu", "patch_dim": c.int("patch_size", default=30) ** 2 * c.int("num_channels", default=3),
            "breaks": True, "merge": 1, "text_hidden": text_h}


def hyperclovax_vision_v2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    b.tensors.extend(qwen_visual(cfg, "2.5"))
    out = ConfigReader(cfg.get("vision_config") or {}).int("out_hidden_size", default=QWEN2_5_VL["out_hidden_size"])
    _linear(b, "model.projector", out, text_h)
    return b.tensors


def video_llama_3_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg.get("vision_config") or {}), "video_llama_3_vision")
    _linear(b, "model.projector.readout.0", vh, text_h)
    _linear(b, "model.projector.readout.2", text_h, text_h)
    return b.tensors


def _gated(b: TensorList, m: str, d_in: int, inter: int, d_out: int) -> None:
    _linear(b, f"{m}.gate_proj", d_in, inter, bias=False)
    _linear(b, f"{m}.up_proj", d_in, inter, bias=False)
    _linear(b, f"{m}.down_proj", inter, d_out, bias=False)


def idefics2_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    vh = vit(b, "model.vision_model", ConfigReader(cfg.get("vision_config") or {}), "idefics2_vision")
    text_inter = ConfigReader(cfg.get("text_config") or {}).int("intermediate_size", default=14336)   # MistralConfig
    m = "model.connector"
    _gated(b, f"{m}.modality_projection", vh, text_inter, text_h)
    r = ConfigReader(cfg.get("perceiver_config") or {})
    heads, hd = r.int("resampler_n_heads", default=16), r.int("resampler_head_dim", default=96)
    kv = r.int("num_key_value_heads", default=4)
    p = f"{m}.perceiver_resampler"
    b.matrix(p, "latents", (r.int("resampler_n_latents", default=64), text_h), "projector")
    for i in range(r.int("resampler_depth", default=3)):
        q = f"{p}.layers.{i}"
        for n in ("input_latents_norm", "input_context_norm", "post_attention_layernorm"):
            b.param(f"{q}.{n}", "weight", text_h, "projector")
        _linear(b, f"{q}.self_attn.q_proj", text_h, heads * hd, bias=False)
        _linear(b, f"{q}.self_attn.k_proj", text_h, kv * hd, bias=False)
        _linear(b, f"{q}.self_attn.v_proj", text_h, kv * hd, bias=False)
        _linear(b, f"{q}.self_attn.o_proj", heads * hd, text_h, bias=False)
        _gated(b, f"{q}.mlp", text_h, 4 * text_h, text_h)
    b.param(f"{p}.norm", "weight", text_h, "projector")
    return b.tensors


# Kimi_K25VisionConfig (configuration_kimi_k25.py)
KIMI_K25 = {"patch_size": 14, "pos_emb_height": 64, "pos_emb_width": 64, "num_hidden_layers": 27,
            "hidden_size": 1152, "intermediate_size": 4304}


def kimi_k25_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=KIMI_K25[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"

    def ln(m: str, d: int, comp: str = "vision") -> None:
        b.param(m, "weight", d, comp)
        b.param(m, "bias", d, comp)

    b.matrix(f"{p}.patch_embed.proj", "weight", (h, 3 * get("patch_size") ** 2), "vision")
    b.param(f"{p}.patch_embed.proj", "bias", h, "vision")
    b.matrix(f"{p}.patch_embed.pos_emb", "position_embeddings", (get("pos_emb_height") * get("pos_emb_width"), h),
             "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        ln(f"{q}.norm1", h)
        ln(f"{q}.norm2", h)
        for name in ("proj", "q_proj", "k_proj", "v_proj"):
            _linear(b, f"{q}.attn.{name}", h, h, "vision")
        _linear(b, f"{q}.mlp.fc1", h, inter, "vision")
        _linear(b, f"{q}.mlp.fc2", inter, h, "vision")
    ln(f"{p}.final_layernorm", h)
    merge = v.cfg.get("merge_kernel_size", (2, 2))
    d = h * merge[0] * merge[1]
    ln("model.mm_projector.pre_norm", ConfigReader(cfg).int("projection_hidden_size", default=1152), "projector")
    _linear(b, "model.mm_projector.in_proj", d, d)
    _linear(b, "model.mm_projector.out_proj", d, text_h)
    return b.tensors


def aria_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    h = vit(b, "model.vision_tower", ConfigReader(cfg.get("vision_config") or {}), "idefics3_vision")
    m = "model.multi_modal_projector"
    b.matrix(m, "query", (ConfigReader(cfg).int("max_value_projector_patch_to_query_dict", default=256), h), "projector")
    for name in ("q_proj", "k_proj", "v_proj"):
        _linear(b, f"{m}.cross_attn.{name}", h, h, bias=False)
    b.matrix(f"{m}.cross_attn.multihead_attn", "in_proj_weight", (3 * h, h), "projector")
    b.param(f"{m}.cross_attn.multihead_attn", "in_proj_bias", 3 * h, "projector")
    _linear(b, f"{m}.cross_attn.multihead_attn.out_proj", h, h)
    _linear(b, f"{m}.cross_attn.linear", h, h)
    for ln in ("cross_attn.layer_norm", "cross_attn.layer_norm_kv", "layer_norm"):
        b.param(f"{m}.{ln}", "weight", h, "projector")
        b.param(f"{m}.{ln}", "bias", h, "projector")
    _linear(b, f"{m}.feed_forward.linear_in", h, text_h, bias=False)
    _linear(b, f"{m}.feed_forward.linear_out", text_h, text_h, bias=False)
    return b.tensors


# Ovis2VisionConfig (configuration_ovis2.py)
OVIS2 = {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24, "num_channels": 3, "image_size": 224,
         "patch_size": 14, "vocab_size": 16384, "hidden_stride": 1, "num_visual_indicator_tokens": 5}


def ovis2_parts(cfg: Mapping, text_h: int) -> list:
    if cfg.get("tie_word_embeddings") is False:
        # the untied head is top-level hidden_size x vocab_size, not the text model's: not modelled
        raise PlanError("model.tie_word_embeddings", "model_type 'ovis2' with an untied lm_head is not modelled")
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=OVIS2[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    qkv_bias, mlp_bias = v.bool("qkv_bias", False), v.bool("mlp_bias", False)
    e = f"{p}.transformer.embeddings"
    b.matrix(f"{e}.patch_embedding", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    b.param(f"{e}.patch_embedding", "bias", h, "vision")
    b.matrix(f"{e}.position_embedding", "weight", ((get("image_size") // get("patch_size")) ** 2, h), "vision")
    b.param(f"{e}.rms_norm", "weight", h, "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.transformer.encoder.layers.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            _linear(b, f"{q}.attention.{name}", h, h, "vision", qkv_bias)
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            _linear(b, f"{q}.ffn.{name}", d_in, d_out, "vision", mlp_bias)
        b.param(f"{q}.rms_norm1", "weight", h, "vision")
        b.param(f"{q}.rms_norm2", "weight", h, "vision")
    b.param(f"{p}.transformer.rms_norm", "weight", h, "vision")
    vocab = get("vocab_size") - get("num_visual_indicator_tokens")
    _linear(b, f"{p}.head_linear", h * get("hidden_stride") ** 2, vocab, "vision", False)
    b.param(f"{p}.head_norm", "weight", vocab, "vision")
    b.param(f"{p}.head_norm", "bias", vocab, "vision")
    b.matrix("model.visual_embeddings_table", "weight",
             (get("vocab_size"), ConfigReader(cfg).int("hidden_size", default=1536)), "projector")
    return b.tensors


def granite_docling_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    p = "model.vision_model"
    h = vit(b, p, v, "granite_docling_vision")
    out, sf = v.int("out_hidden_size", default=1024), v.int("scale_factor", default=4)
    deep = len(v.cfg.get("deepstack_visual_indexes") or ())

    def ln(m: str, d: int) -> None:
        b.param(m, "weight", d, "projector")
        b.param(m, "bias", d, "projector")

    c = f"{p}.connector"
    ln(f"{c}.ln_in", h)
    for path, s in (("coarse", sf),) + ((("fine", sf // 2),) if v.bool("use_fine_route", True) else ()):
        _linear(b, f"{c}.{path}.projection", h * s * s, out, bias=False)
        for j in range(deep):
            m = f"{c}.{path}.deepstack_mergers.{j}"
            ln(f"{m}.layer_norm", h * s * s)
            _linear(b, f"{m}.linear_1", h * s * s, out)
            _linear(b, f"{m}.linear_2", out, out)
    ln(f"{c}.ln_mid", out)
    _linear(b, f"{c}.mlp_fc2", out, out, bias=False)
    ln(f"{c}.ln_out", out)
    router = cfg.get("density_router_hidden_size")
    if router is not None:
        _linear(b, "model.density_router.att", h, 1)
        ln("model.density_router.norm", h)
        _linear(b, "model.density_router.fc1", h, int(router))
        _linear(b, "model.density_router.fc2", int(router), 1)
    return b.tensors


HUNYUAN_VL = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_channels": 3,
              "patch_size": 16, "spatial_merge_size": 2, "max_image_size": 2048, "text_hidden_size": 3072}


def hunyuan_vl_tower(b: TensorList, v: ConfigReader, defaults: Mapping) -> int:
    """HunYuanVLVisionTransformer's embeddings and layers under ``model.vision_tower`` (HY-V4-VL's too, its
    HYV4VLVisionModel subclasses it); returns the width."""
    get = lambda k: v.int(k, default=defaults[k])   # noqa: E731
    h, inter, p = get("hidden_size"), get("intermediate_size"), "model.vision_tower"
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, get("num_channels") * get("patch_size") ** 2), "vision")
    b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    b.matrix(f"{p}.embeddings.position_embedding", "weight", ((get("max_image_size") // get("patch_size")) ** 2 + 1, h),
             "vision")
    for i in range(get("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        for n in ("layer_norm1", "layer_norm2"):
            b.param(f"{q}.{n}", "weight", h, "vision")
            b.param(f"{q}.{n}", "bias", h, "vision")
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            _linear(b, f"{q}.self_attn.{name}", h, h, "vision")
        _linear(b, f"{q}.mlp.fc1", h, inter, "vision")
        _linear(b, f"{q}.mlp.fc2", inter, h, "vision")
    return h


def hunyuan_vl_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    get = lambda k: v.int(k, default=HUNYUAN_VL[k])   # noqa: E731
    h, th = hunyuan_vl_tower(b, v, HUNYUAN_VL), get("text_hidden_size")
    m, merge = "model.vision_tower.patch_merger", get("spatial_merge_size")
    b.param(m, "image_newline", 4 * h, "projector")
    for name in ("image_begin", "image_end", "image_sep"):
        b.param(m, name, th, "projector")
    b.matrix(f"{m}.proj_conv", "weight", (2 * h, h * merge * merge), "projector")
    b.param(f"{m}.proj_conv", "bias", 2 * h, "projector")
    b.matrix(f"{m}.proj_out", "weight", (4 * h, 2 * h), "projector")
    b.param(f"{m}.proj_out", "bias", 4 * h, "projector")
    _linear(b, f"{m}.mlp", 4 * h, th)
    b.param(f"{m}.before_rms", "weight", h, "projector")
    b.param(f"{m}.after_rms", "weight", th, "projector")
    return b.tensors


def cosmos3_edge_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    h = vit(b, "model.visual", v, "cosmos3_edge_vision")
    merged = h * v.int("spatial_merge_size", default=2) ** 2
    mid = ConfigReader(cfg).int("projector_hidden_size", default=11520)
    b.param("model.projector.norm", "weight", h, "projector")
    b.param("model.projector.norm", "bias", h, "projector")
    _linear(b, "model.projector.linear_fc1", merged, mid)
    _linear(b, "model.projector.linear_fc2", mid, text_h)
    return b.tensors


def cosmos3_edge_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    """Arcee's block (modeling_arcee.py) with its MLP's up_proj / down_proj named fc1 / fc2."""
    arch = build({**text, "model_type": "arcee"})
    names = {"up_proj": "fc1", "down_proj": "fc2"}

    def rename(t):
        if t.linear not in names:
            return t
        new = names[t.linear]
        return replace(t, name=t.name.replace(f".{t.linear}.", f".{new}."), module=t.module.replace(f".{t.linear}", f".{new}"),
                       linear=new)

    lin = lambda ls: tuple(replace(x, name=names.get(x.name, x.name)) for x in ls)   # noqa: E731
    return replace(arch, tensors=tuple(rename(t) for t in arch.tensors), block_linears=lin(arch.block_linears),
                   dense_block_linears=lin(arch.dense_block_linears))
