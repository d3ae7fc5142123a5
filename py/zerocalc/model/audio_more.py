"""More audio composites (transformers 5.24): an audio encoder, a projector and a language model that already
counts. Component ``audio`` for the encoder, ``projector`` for the projector; each checked against the
meta-device build in tests/data/architectures.json.

- GLM-ASR (modeling_glmasr.py GlmAsrEncoder, GlmAsrEncoderConfig's defaults): conv1 (mel bins -> h, kernel 3)
  and conv2 (h -> h, kernel 3), biased; layers of q_proj (biased), k_proj (no bias), v_proj / o_proj (biased;
  num_key_value_heads x head_dim, head_dim = h / heads), biased fc1 / fc2 and LayerNorms input_layernorm /
  post_attention_layernorm; a final LayerNorm ``norm``; projector linear_1 (intermediate_size -> 2 x text h),
  linear_2 (-> text h), biased;
- Omnilingual ASR (modeling_omniasr.py OmniASRAudioModel): wav2vec2's feature subsampler (conv_layers of Conv1d
  conv_dim / conv_kernel, biased by conv_bias, each with a LayerNorm; a LayerNorm over the last conv width
  and a biased projection to h), a grouped positional Conv1d (h x h / num_conv_pos_embedding_groups x
  num_conv_pos_embeddings, biased), layers of biased k/v/q/out_proj, layer_norm, biased intermediate_dense /
  output_dense, final_layer_norm; a final LayerNorm; projector one biased linear (h -> text h);
- Qwen3-ASR (modeling_qwen3_asr.py Qwen3ASREncoder): conv2d1 (1 -> downsample_hidden_size, 3x3) and conv2d2 /
  conv2d3 (3x3), biased; conv_out (no bias) from downsample_hidden_size x the mel bins halved three times
  (ceil) to d_model; sinusoidal positions (a buffer); Whisper-style layers with all four attention
  projections biased; ln_post; projector linear_1 (d -> d) and linear_2 (d -> output_dim), biased;
- Qwen2.5-Omni's thinker (modeling_qwen2_5_omni.py Qwen2_5OmniAudioEncoder, its config's defaults): Whisper's
  conv1 / conv2 and layers (k_proj without bias), sinusoidal positions (a buffer), audio_bos_eos_token (2 x
  output_dim), ln_post and proj (d -> output_dim, biased); its vision tower is Qwen2.5-VL's (vision_qwen.py).
"""
from __future__ import annotations

from typing import Mapping

from .config import ConfigReader, TensorList
from .vision_qformer import qformer


def _lin(b: TensorList, m: str, d_in: int, d_out: int, bias: bool = True, comp: str = "audio") -> None:
    b.matrix(m, "weight", (d_out, d_in), comp, m.rsplit(".", 1)[-1])
    if bias:
        b.param(m, "bias", d_out, comp)


def _ln(b: TensorList, m: str, d: int) -> None:
    b.param(m, "weight", d, "audio")
    b.param(m, "bias", d, "audio")


def glmasr_parts(cfg: Mapping, text_h: int) -> list:
    a = ConfigReader(cfg.get("audio_config") or {})
    h, inter = a.int("hidden_size", default=1280), a.int("intermediate_size", default=5120)
    heads = a.int("num_attention_heads", default=20)
    hd = a.int("head_dim", default=h // heads)
    kv = a.int("num_key_value_heads", default=heads) * hd
    b, p = TensorList(), "model.audio_tower"
    b.matrix(f"{p}.conv1", "weight", (h, a.int("num_mel_bins", default=128) * 3), "audio")
    b.param(f"{p}.conv1", "bias", h, "audio")
    b.matrix(f"{p}.conv2", "weight", (h, h * 3), "audio")
    b.param(f"{p}.conv2", "bias", h, "audio")
    for i in range(a.int("num_hidden_layers", default=32)):
        q = f"{p}.layers.{i}"
        _lin(b, f"{q}.self_attn.q_proj", h, heads * hd)
        _lin(b, f"{q}.self_attn.k_proj", h, kv, bias=False)
        _lin(b, f"{q}.self_attn.v_proj", h, kv)
        _lin(b, f"{q}.self_attn.o_proj", heads * hd, h)
        _lin(b, f"{q}.mlp.fc1", h, inter)
        _lin(b, f"{q}.mlp.fc2", inter, h)
        _ln(b, f"{q}.input_layernorm", h)
        _ln(b, f"{q}.post_attention_layernorm", h)
    _ln(b, f"{p}.norm", h)
    _lin(b, "model.multi_modal_projector.linear_1", inter, 2 * text_h, comp="projector")
    _lin(b, "model.multi_modal_projector.linear_2", 2 * text_h, text_h, comp="projector")
    return b.tensors


# OmniASRAudioConfig (configuration_omniasr.py)
OMNIASR = {"hidden_size": 1024, "conv_dim": (512,) * 7, "conv_kernel": (10, 3, 3, 3, 3, 2, 2),
           "num_hidden_layers": 24, "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
           "intermediate_size": 4096}


def omniasr_parts(cfg: Mapping, text_h: int) -> list:
    a = ConfigReader(cfg.get("audio_config") or {})
    get = lambda k: a.cfg.get(k) if a.cfg.get(k) is not None else OMNIASR[k]   # noqa: E731
    h, inter = a.int("hidden_size", default=OMNIASR["hidden_size"]), a.int("intermediate_size", default=4096)
    dims, kernels, bias = list(get("conv_dim")), list(get("conv_kernel")), a.bool("conv_bias", True)
    b, p = TensorList(), "model.audio_tower"
    for i, (d_out, k) in enumerate(zip(dims, kernels)):
        q = f"{p}.subsampling.conv_layers.{i}"
        b.matrix(f"{q}.conv", "weight", (d_out, (dims[i - 1] if i else 1) * k), "audio")
        if bias:
            b.param(f"{q}.conv", "bias", d_out, "audio")
        _ln(b, f"{q}.layer_norm", d_out)
    _ln(b, f"{p}.subsampling.layer_norm", dims[-1])
    _lin(b, f"{p}.subsampling.projection", dims[-1], h)
    groups = a.int("num_conv_pos_embedding_groups", default=16)
    b.matrix(f"{p}.encode_positions.conv", "weight", (h, h // groups * a.int("num_conv_pos_embeddings", default=128)),
             "audio")
    b.param(f"{p}.encode_positions.conv", "bias", h, "audio")
    for i in range(a.int("num_hidden_layers", default=24)):
        q = f"{p}.layers.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            _lin(b, f"{q}.attention.{name}", h, h)
        _ln(b, f"{q}.layer_norm", h)
        _lin(b, f"{q}.feed_forward.intermediate_dense", h, inter)
        _lin(b, f"{q}.feed_forward.output_dense", inter, h)
        _ln(b, f"{q}.final_layer_norm", h)
    _ln(b, f"{p}.layer_norm", h)
    _lin(b, "model.multi_modal_projector", h, text_h, comp="projector")
    return b.tensors


# Qwen3ASREncoderConfig and Qwen3OmniMoeAudioEncoderConfig (configuration_qwen3_omni_moe.py) defaults
QWEN3_ASR = {"d_model": 1024, "encoder_ffn_dim": 4096, "encoder_layers": 24}
QWEN3_OMNI = {"d_model": 1280, "encoder_ffn_dim": 5120, "encoder_layers": 32}


def qwen3_asr_parts(cfg: Mapping, text_h: int, defaults: Mapping = QWEN3_ASR) -> list:
    """Qwen3-ASR's encoder and projector; Qwen3-Omni-MoE's thinker registers the same encoder with proj1 /
    proj2 of the same shapes (modeling_qwen3_omni_moe.py Qwen3OmniMoeAudioEncoder)."""
    a = ConfigReader(cfg.get("audio_config") or {})
    d, ffn = a.int("d_model", default=defaults["d_model"]), a.int("encoder_ffn_dim", default=defaults["encoder_ffn_dim"])
    ds, mel = a.int("downsample_hidden_size", default=480), a.int("num_mel_bins", default=128)
    b, p = TensorList(), "model.audio_tower"
    for name, c_in in (("conv2d1", 1), ("conv2d2", ds), ("conv2d3", ds)):
        b.matrix(f"{p}.{name}", "weight", (ds, c_in * 9), "audio")
        b.param(f"{p}.{name}", "bias", ds, "audio")
    _lin(b, f"{p}.conv_out", ds * ((((mel + 1) // 2 + 1) // 2 + 1) // 2), d, bias=False)
    for i in range(a.int("encoder_layers", default=defaults["encoder_layers"])):
        q = f"{p}.layers.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            _lin(b, f"{q}.self_attn.{name}", d, d)
        _ln(b, f"{q}.self_attn_layer_norm", d)
        _lin(b, f"{q}.fc1", d, ffn)
        _lin(b, f"{q}.fc2", ffn, d)
        _ln(b, f"{q}.final_layer_norm", d)
    _ln(b, f"{p}.ln_post", d)
    _lin(b, "model.multi_modal_projector.linear_1", d, d, comp="projector")
    _lin(b, "model.multi_modal_projector.linear_2", d, a.int("output_dim", default=3584), comp="projector")
    return b.tensors


def qwen2_5_omni_audio(cfg: Mapping) -> list:
    a = ConfigReader(cfg.get("audio_config") or {})
    d, ffn, out = a.int("d_model", default=1280), a.int("encoder_ffn_dim", default=5120), a.int("output_dim", default=3584)
    b, p = TensorList(), "model.audio_tower"
    b.matrix(f"{p}.conv1", "weight", (d, a.int("num_mel_bins", default=128) * 3), "audio")
    b.param(f"{p}.conv1", "bias", d, "audio")
    b.matrix(f"{p}.conv2", "weight", (d, d * 3), "audio")
    b.param(f"{p}.conv2", "bias", d, "audio")
    b.matrix(f"{p}.audio_bos_eos_token", "weight", (2, out), "audio")
    for i in range(a.int("encoder_layers", default=32)):
        q = f"{p}.layers.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            _lin(b, f"{q}.self_attn.{name}", d, d, bias=name != "k_proj")
        _ln(b, f"{q}.self_attn_layer_norm", d)
        _lin(b, f"{q}.fc1", d, ffn)
        _lin(b, f"{q}.fc2", ffn, d)
        _ln(b, f"{q}.final_layer_norm", d)
    _ln(b, f"{p}.ln_post", d)
    _lin(b, f"{p}.proj", d, out)
    return b.tensors


GRANITE_SPEECH = {"input_dim": 160, "num_layers": 10, "hidden_dim": 1024, "feedforward_mult": 4, "num_heads": 8,
                  "output_dim": 42, "max_pos_emb": 512, "conv_kernel_size": 15, "conv_expansion_factor": 2}


def granite_speech_parts(cfg: Mapping, text_h: int) -> list:
    a = ConfigReader(cfg.get("encoder_config") or {})
    get = lambda k: a.int(k, default=GRANITE_SPEECH[k])   # noqa: E731
    h, p = get("hidden_dim"), "model.encoder"
    inner_attn = get("num_heads") * a.int("dim_head", default=h // get("num_heads"))
    inner = h * get("conv_expansion_factor")
    b = TensorList()
    _lin(b, f"{p}.input_linear", get("input_dim"), h)
    for i in range(get("num_layers")):
        q = f"{p}.layers.{i}"
        for ff in ("ff1", "ff2"):
            _ln(b, f"{q}.{ff}.pre_norm", h)
            _lin(b, f"{q}.{ff}.up_proj", h, h * get("feedforward_mult"))
            _lin(b, f"{q}.{ff}.down_proj", h * get("feedforward_mult"), h)
        _ln(b, f"{q}.attn.pre_norm", h)
        _lin(b, f"{q}.attn.to_q", h, inner_attn, bias=False)
        _lin(b, f"{q}.attn.to_kv", h, 2 * inner_attn, bias=False)
        _lin(b, f"{q}.attn.to_out", inner_attn, h)
        b.matrix(f"{q}.attn.rel_pos_emb", "weight", (2 * get("max_pos_emb") + 1, inner_attn // get("num_heads")), "audio")
        _ln(b, f"{q}.conv.norm", h)
        b.matrix(f"{q}.conv.up_conv", "weight", (2 * inner, h), "audio")
        b.param(f"{q}.conv.up_conv", "bias", 2 * inner, "audio")
        b.matrix(f"{q}.conv.depth_conv.conv", "weight", (inner, get("conv_kernel_size")), "audio")
        _ln(b, f"{q}.conv.batch_norm", inner)
        b.matrix(f"{q}.conv.down_conv", "weight", (h, inner), "audio")
        b.param(f"{q}.conv.down_conv", "bias", h, "audio")
        _ln(b, f"{q}.post_norm", h)
    _lin(b, f"{p}.out", h, get("output_dim"))
    _lin(b, f"{p}.out_mid", get("output_dim"), h)
    c, qc = ConfigReader(cfg), ConfigReader(cfg.get("projector_config") or {})
    qh = qc.int("hidden_size", default=768)
    b.matrix("model.projector", "query", (c.int("window_size", default=15) // c.int("downsample_rate", default=5), qh),
             "projector")
    qformer(b, "model.projector.qformer", qc)
    _lin(b, "model.projector.linear", qh, text_h, comp="projector")
    return b.tensors


# VibeVoiceAcousticTokenizerEncoderConfig (configuration_vibevoice_acoustic_tokenizer.py)
VIBEVOICE = {"channels": 1, "hidden_size": 64, "kernel_size": 7, "num_filters": 32, "ffn_expansion": 4}


def _vibevoice_encoder(b: TensorList, p: str, a: ConfigReader) -> int:
    get = lambda k: a.int(k, default=VIBEVOICE[k])   # noqa: E731
    k, nf, ex = get("kernel_size"), get("num_filters"), get("ffn_expansion")
    ratios = list(a.cfg.get("downsampling_ratios") or (2, 2, 4, 5, 5, 8))
    depths = list(a.cfg.get("depths") or (3, 3, 3, 3, 3, 3, 8))

    def conv(m: str, c_in: int, c_out: int, kernel: int, groups: int = 1) -> None:
        b.matrix(m, "weight", (c_out, c_in // groups * kernel), "audio")
        b.param(m, "bias", c_out, "audio")

    def stage(q: str, h: int, n: int) -> None:
        for j in range(n):
            m = f"{q}.stage.{j}"
            b.param(f"{m}.norm", "weight", h, "audio")
            b.param(f"{m}.ffn_norm", "weight", h, "audio")
            _lin(b, f"{m}.ffn.linear1", h, ex * h)
            _lin(b, f"{m}.ffn.linear2", ex * h, h)
            b.param(m, "gamma", h, "audio")
            b.param(m, "ffn_gamma", h, "audio")
            conv(f"{m}.mixer.conv", h, h, k, groups=h)

    conv(f"{p}.stem.conv", get("channels"), nf, k)
    stage(f"{p}.stem", nf, depths[0])
    for i, r in enumerate(ratios):
        conv(f"{p}.conv_layers.{i}.conv", nf * 2 ** i, nf * 2 ** (i + 1), 2 * r)
        stage(f"{p}.conv_layers.{i}", nf * 2 ** (i + 1), depths[i + 1])
    conv(f"{p}.head.conv", nf * 2 ** len(ratios), get("hidden_size"), k)
    return get("hidden_size")


def vibevoice_asr_parts(cfg: Mapping, text_h: int) -> list:
    b = TensorList()
    for name in ("acoustic", "semantic"):
        h = _vibevoice_encoder(b, f"model.{name}_tokenizer_encoder",
                               ConfigReader(cfg.get(f"{name}_tokenizer_encoder_config") or {}))
        m = f"model.multi_modal_projector.{name}"
        _lin(b, f"{m}_linear_1", h, text_h, comp="projector")
        b.param(f"{m}_norm", "weight", text_h, "projector")
        _lin(b, f"{m}_linear_2", text_h, text_h, comp="projector")
    return b.tensors
