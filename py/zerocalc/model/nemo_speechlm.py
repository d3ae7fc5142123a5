"""Nemotron 3.5 Transcribe (transformers 5.24 modeling_nemotron3_5_transcribe.py, model_type nemo_speechlm):
a nemotron_h language model beside

- audio_tower (Nemotron3_5TranscribeAudioModel): asr_encoder (embedder: a feature-stacking Linear
  num_mel_bins x subsampling_factor -> h without bias; input_layer_norm; layers; layer_norm), the
  diarization model (Nemotron3DiarizationForAudioFrameClassification: the same encoder shape without q/k
  norms, proj audio width -> head width, a sub-pixel upsampler Conv1d head width -> x subsampling_factor of
  kernel 3, classifier dense + out_proj to num_speakers, silence_embeds), asr_norm and speaker_norm
  (num_speakers) LayerNorms; the speaker embedding is a buffer;
- multi_modal_projector (a biased Linear audio width -> text width);
- word_timestamp_encoder (upsampler ConvTranspose1d h -> h of kernel upsampling_factor, input_layer_norm,
  layers, layer_norm) and, beside lm_head, word_timestamp_head (a biased 1x1 Conv1d -> vocab_size).
An encoder layer: q_proj (heads x head_dim), k_proj (k/v heads), v_proj (heads x head_dim), none biased,
o_proj biased; the transcribe encoders' per-head q_norm / k_norm LayerNorms; layer_norm1, mlp fc1 / fc2 (biased),
layer_norm2. Defaults: the Nemotron3_5Transcribe* / Nemotron3Diarization* config classes.
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList

ASR = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 10,
       "num_mel_bins": 128, "subsampling_factor": 8}
DIAR = {"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 31, "num_attention_heads": 8,
        "num_mel_bins": 128, "subsampling_factor": 8}
HEAD = {"hidden_size": 192, "num_speakers": 8, "audio_hidden_size": 512, "subsampling_factor": 8}
WORD = {"hidden_size": 1280, "intermediate_size": 640, "num_hidden_layers": 2, "num_attention_heads": 16,
        "vocab_size": 23863, "upsampling_factor": 2}


def _layers(b: TensorList, p: str, c: ConfigReader, d: Mapping, qk_norm: bool) -> int:
    g = lambda k: c.int(k, default=d[k])   # noqa: E731 - the class default when left out
    h, inter, heads = g("hidden_size"), g("intermediate_size"), g("num_attention_heads")
    hd = c.int("head_dim", default=h // heads)
    kv = c.int("num_key_value_heads", default=heads)
    for i in range(g("num_hidden_layers")):
        q = f"{p}.layers.{i}"
        for name, d_out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", heads * hd)):
            b.linear(f"{q}.self_attn.{name}", h, d_out, "audio")
        b.linear(f"{q}.self_attn.o_proj", heads * hd, h, "audio", True)
        if qk_norm:
            b.norm(f"{q}.self_attn.q_norm", hd, bias=True, component="audio")
            b.norm(f"{q}.self_attn.k_norm", hd, bias=True, component="audio")
        b.norm(f"{q}.layer_norm1", h, bias=True, component="audio")
        b.linear(f"{q}.mlp.fc1", h, inter, "audio", True)
        b.linear(f"{q}.mlp.fc2", inter, h, "audio", True)
        b.norm(f"{q}.layer_norm2", h, bias=True, component="audio")
    b.norm(f"{p}.layer_norm", h, bias=True, component="audio")
    return h


def _encoder(b: TensorList, p: str, c: ConfigReader, d: Mapping, qk_norm: bool) -> int:
    g = lambda k: c.int(k, default=d[k])   # noqa: E731
    b.linear(f"{p}.embedder.projection", g("num_mel_bins") * g("subsampling_factor"), g("hidden_size"), "audio")
    b.norm(f"{p}.input_layer_norm", g("hidden_size"), bias=True, component="audio")
    return _layers(b, p, c, d, qk_norm)


def nemo_speechlm_parts(cfg: Mapping, text_h: int) -> list:
    audio = cfg.get("audio_config") or {}
    diar = audio.get("diarization_config") or {}
    head = ConfigReader(diar.get("head_config") or {})
    hg = lambda k: head.int(k, default=HEAD[k])   # noqa: E731
    p = "model.audio_tower"
    b = TensorList()
    h = _encoder(b, f"{p}.asr_encoder", ConfigReader(audio.get("asr_config") or {}), ASR, True)
    dp = f"{p}.diarization_model"
    dh = _encoder(b, f"{dp}.model.audio_tower", ConfigReader(diar.get("audio_config") or {}), DIAR, False)
    hh, sub = hg("hidden_size"), hg("subsampling_factor")
    b.linear(f"{dp}.model.proj", hg("audio_hidden_size"), hh, "audio", True)
    b.matrix(f"{dp}.model.upsampler.conv", "weight", (hh * sub, hh, 3), "audio")
    b.param(f"{dp}.model.upsampler.conv", "bias", hh * sub, "audio")
    b.linear(f"{dp}.classifier.dense", hh, hh, "audio", True)
    b.linear(f"{dp}.classifier.out_proj", hh, hg("num_speakers"), "audio", True)
    b.param(dp, "silence_embeds", dh, "audio")
    b.norm(f"{p}.asr_norm", h, bias=True, component="audio")
    b.norm(f"{p}.speaker_norm", hg("num_speakers"), bias=True, component="audio")
    b.linear("model.multi_modal_projector", h, text_h, "projector", True)
    w = ConfigReader(cfg.get("word_timestamp_config") or {})
    wh, wp = w.int("hidden_size", default=WORD["hidden_size"]), "model.word_timestamp_encoder"
    k = w.int("upsampling_factor", default=WORD["upsampling_factor"])
    b.matrix(f"{wp}.upsampler", "weight", (wh, wh, k), "audio")
    b.param(f"{wp}.upsampler", "bias", wh, "audio")
    b.norm(f"{wp}.input_layer_norm", wh, bias=True, component="audio")
    _layers(b, wp, w, WORD, True)
    vocab = w.int("vocab_size", default=WORD["vocab_size"])
    b.matrix("word_timestamp_head", "weight", (vocab, wh, 1), "audio")
    b.param("word_timestamp_head", "bias", vocab, "audio")
    return b.tensors
