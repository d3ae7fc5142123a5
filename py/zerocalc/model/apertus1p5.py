"""Apertus 1.5's tokenizers (transformers 5.24 modeling_apertus1p5.py Apertus1p5Model): beside the
apertus1p5_text language model, ``model.vision_tokenizer`` and ``model.audio_tokenizer``.

- vision_tokenizer (Apertus1p5VisionTokenizerModel; Apertus1p5VisionTokenizerConfig's defaults): a VQ encoder
  whose tensors are Chameleon's (vision_vq.vq_encoder: conv_in; per channel_multiplier stage num_res_blocks
  ResNet blocks of GroupNorm / 3x3 convs with a 1x1 nin_shortcut where the width changes, an attention block
  after each where resolution // 2^stage is in attn_resolutions, a 3x3 downsample except at the last stage;
  mid; norm_out; conv_out; all biased; transformers names them stages.{i}.layers.{j}.resnet / .attention), then
  quantize.embedding (a Linear embed_dim -> codebook_size, no bias) and quant_conv (1x1, latent -> embed_dim);
- audio_tokenizer (WavTokenizerEncoderModel, modeling_wavtokenizer.py; WavTokenizerConfig's defaults): the
  SEANet encoder: a conv (audio_channels -> num_filters, kernel_size), then per reversed upsampling_ratios entry
  r num_residual_layers ResNet blocks (conv dim -> dim / compress of residual_kernel_size, conv back of kernel 1,
  a 1x1 shortcut conv with use_conv_shortcut) and a conv dim -> 2 dim of kernel 2r; an LSTM of num_lstm_layers
  over the last width (weight_ih, weight_hh, bias_ih, bias_hh per layer); a conv to hidden_size of
  last_kernel_size. Each conv is biased and either weight-normed (norm_type "weight_norm": the g (out, 1, 1) and
  v parametrizations) or followed by a GroupNorm(1, out) ("time_group_norm"). The quantizer's codebook is
  buffers only.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision_vq import vq_encoder

APERTUS_VQ = {"codebook_size": 131072, "embed_dim": 256, "latent_channels": 256, "in_channels": 3, "base_channels": 256,
              "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 4, "attn_resolutions": [16], "resolution": 256}
WAVTOKENIZER = {"audio_channels": 1, "num_filters": 32, "upsampling_ratios": [6, 5, 5, 4], "num_residual_layers": 1,
                "compress": 2, "kernel_size": 7, "last_kernel_size": 7, "residual_kernel_size": 3,
                "num_lstm_layers": 2, "hidden_size": 512}


def _conv1d(b: TensorList, m: str, c_in: int, c_out: int, k: int, weight_norm: bool) -> None:
    """WavTokenizerConv1d: the conv (weight-normed: g and v) and its bias, or a plain conv and a GroupNorm."""
    if weight_norm:
        b.matrix(f"{m}.conv.parametrizations.weight", "original0", (c_out, 1, 1), "audio")
        b.matrix(f"{m}.conv.parametrizations.weight", "original1", (c_out, c_in, k), "audio")
        b.param(f"{m}.conv", "bias", c_out, "audio")
    else:
        b.matrix(f"{m}.conv", "weight", (c_out, c_in, k), "audio")
        b.param(f"{m}.conv", "bias", c_out, "audio")
        b.norm(f"{m}.norm", c_out, bias=True, component="audio")


def wavtokenizer_encoder(b: TensorList, p: str, a: ConfigReader) -> None:
    get = lambda k: a.int(k, default=WAVTOKENIZER[k])   # noqa: E731 - the class default when left out
    wn = a.str("norm_type", "weight_norm") == "weight_norm"
    shortcut = a.bool("use_conv_shortcut", True)
    nf, i = get("num_filters"), 0
    _conv1d(b, f"{p}.layers.0", get("audio_channels"), nf, get("kernel_size"), wn)
    dim = nf
    for ratio in reversed(list(a.cfg.get("upsampling_ratios") or WAVTOKENIZER["upsampling_ratios"])):
        for _ in range(get("num_residual_layers")):
            i += 1
            q, hidden = f"{p}.layers.{i}", dim // get("compress")
            _conv1d(b, f"{q}.block.1", dim, hidden, get("residual_kernel_size"), wn)
            _conv1d(b, f"{q}.block.3", hidden, dim, 1, wn)
            if shortcut:
                _conv1d(b, f"{q}.shortcut", dim, dim, 1, wn)
        i += 2                                   # the ELU, then the strided conv
        _conv1d(b, f"{p}.layers.{i}", dim, 2 * dim, 2 * ratio, wn)
        dim *= 2
    i += 1
    for j in range(get("num_lstm_layers")):
        m = f"{p}.layers.{i}.lstm"
        b.matrix(m, f"weight_ih_l{j}", (4 * dim, dim), "audio")
        b.matrix(m, f"weight_hh_l{j}", (4 * dim, dim), "audio")
        b.param(m, f"bias_ih_l{j}", 4 * dim, "audio")
        b.param(m, f"bias_hh_l{j}", 4 * dim, "audio")
    _conv1d(b, f"{p}.layers.{i + 2}", dim, get("hidden_size"), get("last_kernel_size"), wn)


def apertus1p5_parts(cfg: Mapping, text_h: int) -> list:
    v = ConfigReader({**APERTUS_VQ, **(cfg.get("vision_config") or {})})
    b = TensorList()
    latent = vq_encoder(b, "model.vision_tokenizer.encoder", v)
    embed = v.int("embed_dim")
    b.linear("model.vision_tokenizer.quantize.embedding", embed, v.int("codebook_size"), "vision")
    b.matrix("model.vision_tokenizer.quant_conv", "weight", (embed, latent, 1, 1), "vision")
    b.param("model.vision_tokenizer.quant_conv", "bias", embed, "vision")
    wavtokenizer_encoder(b, "model.audio_tokenizer.encoder", ConfigReader(cfg.get("audio_config") or {}))
    return b.tensors
