"""Chameleon (modeling_chameleon.py ChameleonForConditionalGeneration, transformers 5.24): a Llama-shaped decoder
read from the flat top-level config whose attention has per-head LayerNorms q_norm / k_norm (ChameleonLayerNorm
over (heads, head_dim) and (kv heads, head_dim), weight and bias), and a VQ-VAE image tokenizer (``vqmodel``,
ChameleonVQVAEConfig's defaults):

- the encoder: conv_in (3x3, channels -> base_channels); per channel_multiplier level num_res_blocks ResNet
  blocks (GroupNorm norm1, conv1 3x3, GroupNorm norm2, conv2 3x3, a 1x1 nin_shortcut when the width changes),
  an attention block (GroupNorm, 1x1 q/k/v/proj_out) after each where the resolution is in attn_resolutions,
  and a 3x3 stride-2 downsample conv except at the last level; mid: block_1, attn_1 (attn_type "vanilla"),
  block_2; norm_out and conv_out (3x3 to latent_channels, twice with double_latent); every conv and norm biased;
- quantize.embedding (num_embeddings x embed_dim), quant_conv and post_quant_conv (1x1, biased).

Janus (modeling_janus.py JanusModel, the config classes' defaults) registers the same VQ-VAE with attention
blocks at the last level only (and always in mid), plus a decoder (conv_in from latent_channels, mid, up levels
from the last with num_res_blocks + 1 ResNet blocks, attention at the last level, a 3x3 upsample conv except at
level 0, norm_out, conv_out to out_channels); a SigLIP-shaped JanusVisionModel (biased patch conv, positions,
layers of LayerNorms, q/k/v (attention_bias), a biased projection_layer, with use_qk_norm q_norm / k_norm
LayerNorms over h, biased fc1/fc2 of h x mlp_ratio; post_layernorm); the aligner (fc1 h -> projection_dim,
depth - 1 hidden_layers); generation_embeddings (num_embeddings x embed_dim), generation_aligner (fc1 embed_dim ->
projection_dim, num_hidden_layers - 1 hidden_layers) and generation_head (proj_out image_token_embed_dim ->
projection_dim, vision_head -> num_embeddings), all biased.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from .config import ConfigReader, TensorList

VQ = {"embed_dim": 256, "num_embeddings": 8192, "latent_channels": 256, "resolution": 512, "in_channels": 3,
      "base_channels": 128, "num_res_blocks": 2}


def _conv(b: TensorList, m: str, c_in: int, c_out: int, k: int) -> None:
    b.matrix(m, "weight", (c_out, c_in * k * k), "vision")
    b.param(m, "bias", c_out, "vision")


def _gn(b: TensorList, m: str, c: int) -> None:
    b.param(m, "weight", c, "vision")
    b.param(m, "bias", c, "vision")


def _resnet(b: TensorList, m: str, c_in: int, c_out: int) -> None:
    _gn(b, f"{m}.norm1", c_in)
    _conv(b, f"{m}.conv1", c_in, c_out, 3)
    _gn(b, f"{m}.norm2", c_out)
    _conv(b, f"{m}.conv2", c_out, c_out, 3)
    if c_in != c_out:
        _conv(b, f"{m}.nin_shortcut", c_in, c_out, 1)


def _attn(b: TensorList, m: str, c: int) -> None:
    _gn(b, f"{m}.norm", c)
    for name in ("q", "k", "v", "proj_out"):
        _conv(b, f"{m}.{name}", c, c, 1)


def vq_encoder(b: TensorList, p: str, q: ConfigReader, janus: bool = False) -> int:
    """ChameleonVQVAEEncoder (JanusVQVAEEncoder with ``janus``) under ``p``; returns the latent channels."""
    get = lambda k: q.int(k, default=VQ[k])   # noqa: E731
    base, mult = get("base_channels"), list(q.cfg.get("channel_multiplier") or (1, 1, 2, 2, 4))
    attn_res, vanilla = q.cfg.get("attn_resolutions"), janus or q.str("attn_type", "vanilla") == "vanilla"
    _conv(b, f"{p}.conv_in", get("in_channels"), base, 3)
    res, ins = get("resolution"), (1,) + tuple(mult)
    block_in = base
    for i, m in enumerate(mult):
        block_in, block_out = base * ins[i], base * m
        for j in range(get("num_res_blocks")):
            _resnet(b, f"{p}.down.{i}.block.{j}", block_in, block_out)
            block_in = block_out
            if (i == len(mult) - 1) if janus else (attn_res is not None and res in attn_res and vanilla):
                _attn(b, f"{p}.down.{i}.attn.{j}", block_in)
        if i != len(mult) - 1:
            _conv(b, f"{p}.down.{i}.downsample.conv", block_in, block_in, 3)
            res //= 2
    _resnet(b, f"{p}.mid.block_1", block_in, block_in)
    if vanilla:
        _attn(b, f"{p}.mid.attn_1", block_in)
    _resnet(b, f"{p}.mid.block_2", block_in, block_in)
    _gn(b, f"{p}.norm_out", block_in)
    latent = get("latent_channels")
    _conv(b, f"{p}.conv_out", block_in, 2 * latent if q.bool("double_latent", False) else latent, 3)
    return latent


def chameleon_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    q = ConfigReader(cfg.get("vq_config") or {})
    latent = vq_encoder(b, "model.vqmodel.encoder", q)
    embed = q.int("embed_dim", default=VQ["embed_dim"])
    b.matrix("model.vqmodel.quantize.embedding", "weight", (q.int("num_embeddings", default=VQ["num_embeddings"]), embed),
             "vision")
    _conv(b, "model.vqmodel.quant_conv", latent, embed, 1)
    _conv(b, "model.vqmodel.post_quant_conv", embed, latent, 1)
    return b.tensors


def chameleon_text(text: Mapping, build: Callable, cfg: Mapping | None = None):
    """A Llama of the same sizes with q_norm / k_norm (weight and bias over heads x head_dim) per layer."""
    arch = build({k: v for k, v in text.items() if k not in ("vocabulary_map", "swin_norm")} | {"model_type": "llama"})
    c = ConfigReader(text)
    heads = c.int("num_attention_heads", default=32)
    kv = c.int("num_key_value_heads", default=heads)
    hd = arch.hidden_size // heads
    out, last = [], {}
    for t in arch.tensors:
        out.append(t)
        if t.layer is not None and t.linear == "o_proj":
            last[t.layer] = len(out)
    for i in sorted(last, reverse=True):
        b = TensorList()
        for name, n in (("q_norm", heads), ("k_norm", kv)):
            b.param(f"model.layers.{i}.self_attn.{name}", "weight", n * hd, "norm")
            b.param(f"model.layers.{i}.self_attn.{name}", "bias", n * hd, "norm")
        out[last[i]:last[i]] = b.tensors
    return replace(arch, tensors=tuple(out))


JANUS_VQ = {"embed_dim": 8, "num_embeddings": 16384, "latent_channels": 256, "base_channels": 128, "num_res_blocks": 2,
            "out_channels": 3, "projection_dim": 2048, "num_hidden_layers": 2, "image_token_embed_dim": 2048}
JANUS_VISION = {"hidden_size": 1024, "num_hidden_layers": 24, "num_channels": 3, "image_size": 384, "patch_size": 16,
                "projection_dim": 2048, "depth": 2}


def _lin(b: TensorList, m: str, d_in: int, d_out: int, comp: str, bias: bool = True) -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def janus_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    v = ConfigReader(cfg.get("vision_config") or {})
    gv = lambda k: v.int(k, default=JANUS_VISION[k])   # noqa: E731
    h, p = gv("hidden_size"), "model.vision_model"
    inter = int(h * float(v.cfg.get("mlp_ratio", 4.0)))
    b.matrix(f"{p}.embeddings.patch_embedding", "weight", (h, gv("num_channels") * gv("patch_size") ** 2), "vision")
    b.param(f"{p}.embeddings.patch_embedding", "bias", h, "vision")
    b.matrix(f"{p}.embeddings.position_embedding", "weight", ((gv("image_size") // gv("patch_size")) ** 2, h), "vision")
    bias, qk = v.bool("attention_bias", True), v.bool("use_qk_norm", False)
    for i in range(gv("num_hidden_layers")):
        q = f"{p}.encoder.layers.{i}"
        _gn(b, f"{q}.layer_norm1", h)
        for name in ("q_proj", "k_proj", "v_proj"):
            _lin(b, f"{q}.self_attn.{name}", h, h, "vision", bias)
        _lin(b, f"{q}.self_attn.projection_layer", h, h, "vision")
        if qk:
            _gn(b, f"{q}.self_attn.q_norm", h)
            _gn(b, f"{q}.self_attn.k_norm", h)
        _gn(b, f"{q}.layer_norm2", h)
        _lin(b, f"{q}.mlp.fc1", h, inter, "vision")
        _lin(b, f"{q}.mlp.fc2", inter, h, "vision")
    _gn(b, f"{p}.post_layernorm", h)
    pd = gv("projection_dim")
    _lin(b, "model.aligner.fc1", h, pd, "projector")
    for j in range(gv("depth") - 1):
        _lin(b, f"model.aligner.hidden_layers.{j}", pd, pd, "projector")
    q = ConfigReader(cfg.get("vq_config") or {})
    g = lambda k: q.int(k, default=JANUS_VQ[k])   # noqa: E731
    latent = vq_encoder(b, "model.vqmodel.encoder", ConfigReader({**JANUS_VQ, **q.cfg}), janus=True)
    embed, n_emb, base = g("embed_dim"), g("num_embeddings"), g("base_channels")
    b.matrix("model.vqmodel.quantize.embedding", "weight", (n_emb, embed), "vision")
    _conv(b, "model.vqmodel.quant_conv", latent, embed, 1)
    _conv(b, "model.vqmodel.post_quant_conv", embed, latent, 1)
    mult = list(q.cfg.get("channel_multiplier") or (1, 1, 2, 2, 4))
    d, block_in = "model.vqmodel.decoder", base * mult[-1]
    _conv(b, f"{d}.conv_in", latent, block_in, 3)
    _resnet(b, f"{d}.mid.block_1", block_in, block_in)
    _attn(b, f"{d}.mid.attn_1", block_in)
    _resnet(b, f"{d}.mid.block_2", block_in, block_in)
    for k, level in enumerate(reversed(range(len(mult)))):
        block_out = base * mult[level]
        for j in range(g("num_res_blocks") + 1):
            _resnet(b, f"{d}.up.{k}.block.{j}", block_in, block_out)
            block_in = block_out
            if level == len(mult) - 1:
                _attn(b, f"{d}.up.{k}.attn.{j}", block_in)
        if level != 0:
            _conv(b, f"{d}.up.{k}.upsample.conv", block_in, block_in, 3)
    _gn(b, f"{d}.norm_out", block_in)
    _conv(b, f"{d}.conv_out", block_in, g("out_channels"), 3)
    vpd = g("projection_dim")
    b.matrix("model.generation_embeddings", "weight", (n_emb, embed), "projector")
    _lin(b, "model.generation_aligner.fc1", embed, vpd, "projector")
    for j in range(g("num_hidden_layers") - 1):
        _lin(b, f"model.generation_aligner.hidden_layers.{j}", vpd, vpd, "projector")
    _lin(b, "model.generation_head.proj_out", g("image_token_embed_dim"), vpd, "projector")
    _lin(b, "model.generation_head.vision_head", vpd, n_emb, "projector")
    return b.tensors
