"""Audio towers of the composite models that are modelled (transformers 5.24): Whisper's encoder as
Qwen2-Audio, Voxtral and Audio Flamingo 3 / Music Flamingo register it, and their projectors. Component
``audio`` for the tower, ``projector`` for the projector; each checked against the meta-device build in
tests/data/architectures.json.

The encoder (modeling_qwen2_audio.py Qwen2AudioEncoder, modeling_voxtral.py VoxtralEncoder,
modeling_audioflamingo3.py AudioFlamingo3Encoder): conv1 (mel bins -> d, kernel 3) and conv2 (d -> d,
kernel 3), biased; embed_positions (max_source_positions x d, a parameter); layers of k_proj (no bias),
v/q/out_proj, self_attn_layer_norm, fc1/fc2, final_layer_norm, all else biased; a final layer_norm. The
configs name the sizes d_model / encoder_layers / encoder_ffn_dim (Qwen2AudioEncoderConfig) or hidden_size /
num_hidden_layers / intermediate_size (the newer encoder configs): read by either name.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

# Qwen2AudioEncoderConfig / VoxtralEncoderConfig / AudioFlamingo3EncoderConfig defaults (Whisper-large-v3's)
WHISPER_LARGE = {"num_mel_bins": 128, "layers": 32, "ffn": 5120, "d": 1280, "max_source_positions": 1500}


def whisper_encoder(b: TensorList, p: str, a: ConfigReader) -> tuple[int, int]:
    """The encoder's tensors under ``p``; returns (d, ffn)."""
    d = a.int("d_model", "hidden_size", default=WHISPER_LARGE["d"])
    ffn = a.int("encoder_ffn_dim", "intermediate_size", default=WHISPER_LARGE["ffn"])
    layers = a.int("encoder_layers", "num_hidden_layers", default=WHISPER_LARGE["layers"])

    def lin(m: str, d_in: int, d_out: int, bias: bool = True) -> None:
        b.matrix(m, "weight", (d_out, d_in), "audio", m.rsplit(".", 1)[-1])
        if bias:
            b.param(m, "bias", d_out, "audio")

    def ln(m: str) -> None:
        b.param(m, "weight", d, "audio")
        b.param(m, "bias", d, "audio")

    b.matrix(f"{p}.conv1", "weight", (d, a.int("num_mel_bins", default=WHISPER_LARGE["num_mel_bins"]) * 3), "audio")
    b.param(f"{p}.conv1", "bias", d, "audio")
    b.matrix(f"{p}.conv2", "weight", (d, d * 3), "audio")
    b.param(f"{p}.conv2", "bias", d, "audio")
    b.matrix(f"{p}.embed_positions", "weight",
             (a.int("max_source_positions", default=WHISPER_LARGE["max_source_positions"]), d), "audio")
    for i in range(layers):
        q = f"{p}.layers.{i}"
        lin(f"{q}.self_attn.k_proj", d, d, bias=False)
        for name in ("v_proj", "q_proj", "out_proj"):
            lin(f"{q}.self_attn.{name}", d, d)
        ln(f"{q}.self_attn_layer_norm")
        lin(f"{q}.fc1", d, ffn)
        lin(f"{q}.fc2", ffn, d)
        ln(f"{q}.final_layer_norm")
    ln(f"{p}.layer_norm")
    return d, ffn


def _projector(b: TensorList, name: str, d_in: int, d_out: int, bias: bool) -> None:
    m = f"model.multi_modal_projector.{name}"
    b.matrix(m, "weight", (d_out, d_in), "projector", name)
    if bias:
        b.param(m, "bias", d_out, "projector")


def qwen2_audio_parts(cfg: Mapping, text_h: int) -> list:
    """Qwen2-Audio: the encoder, then one biased linear (d -> text h)."""
    b = TensorList()
    d, _ = whisper_encoder(b, "model.audio_tower", ConfigReader(cfg.get("audio_config") or {}))
    _projector(b, "linear", d, text_h, True)
    return b.tensors


def voxtral_parts(cfg: Mapping, text_h: int) -> list:
    """Voxtral (VoxtralMultiModalProjector): the encoder's frames stacked by 4 (intermediate_size wide) through
    linear_1 to the text width and linear_2, no biases."""
    b = TensorList()
    _, ffn = whisper_encoder(b, "model.audio_tower", ConfigReader(cfg.get("audio_config") or {}))
    _projector(b, "linear_1", ffn, text_h, False)
    _projector(b, "linear_2", text_h, text_h, False)
    return b.tensors


def audioflamingo3_parts(cfg: Mapping, text_h: int) -> list:
    """Audio Flamingo 3 / Music Flamingo (AudioFlamingo3MultiModalProjector): linear_1 (d -> text h), GELU,
    linear_2, biased by projector_bias."""
    b = TensorList()
    d, _ = whisper_encoder(b, "model.audio_tower", ConfigReader(cfg.get("audio_config") or {}))
    bias = ConfigReader(cfg).bool("projector_bias", True)
    _projector(b, "linear_1", d, text_h, bias)
    _projector(b, "linear_2", text_h, text_h, bias)
    return b.tensors


def moss_transcribe_parts(cfg: Mapping, text_h: int) -> list:
    """MOSS Transcribe-Diarize (modeling_moss_transcribe_diarize.py, its VQ-style adaptor): the encoder, then
    linear_1 from audio_merge_size merged frames (d x merge) and linear_2 to the text width (projector_bias),
    and a biased LayerNorm."""
    b = TensorList()
    c = ConfigReader(cfg)
    d, _ = whisper_encoder(b, "model.audio_tower", ConfigReader(cfg.get("audio_config") or {}))
    bias = c.bool("projector_bias", True)
    _projector(b, "linear_1", d * c.int("audio_merge_size", default=4), text_h, bias)
    _projector(b, "linear_2", text_h, text_h, bias)
    b.param("model.multi_modal_projector.norm", "weight", text_h, "projector")
    b.param("model.multi_modal_projector.norm", "bias", text_h, "projector")
    return b.tensors


def whisper_tower_spec(cfg: Mapping, text_h: int) -> dict:
    """The activation shape of Qwen2-Audio's / Voxtral's encoder and projector (memory/vision_audio.py), read by
    Qwen2AudioEncoderConfig's / VoxtralEncoderConfig's field names and Whisper-large defaults."""
    a = ConfigReader(cfg.get("audio_config") or {})
    d = a.int("d_model", "hidden_size", default=WHISPER_LARGE["d"])
    ffn = a.int("encoder_ffn_dim", "intermediate_size", default=WHISPER_LARGE["ffn"])
    voxtral = cfg.get("model_type") == "voxtral"
    return {"kind": "audio", "hidden": d, "inter": ffn,
            "heads": a.int("encoder_attention_heads", "num_attention_heads", default=20),
            "layers_run": a.int("encoder_layers", "num_hidden_layers", default=WHISPER_LARGE["layers"]),
            "mel": a.int("num_mel_bins", default=WHISPER_LARGE["num_mel_bins"]),
            "positions": a.int("max_source_positions", default=WHISPER_LARGE["max_source_positions"]),
            "projector": "voxtral" if voxtral else "qwen2_audio", "stack_width": ffn, "text_hidden": text_h}
