"""Composite configs (a ``text_config`` beside a ``vision_config`` / ``audio_config``: LLaVA, Gemma 3, Qwen2-VL,
Mistral 3, InternVL, Qwen2-Audio, ...). transformers builds the whole model from them (the image-text-to-text
class: tower + projector + language model) and ties the head by the *composite* config's
``tie_word_embeddings`` (PreTrainedModel.tie_weights reads ``self.config``'s flag; several composite
configs' __post_init__ also take a True from text_config, see TIE). A composite whose towers are not modelled
is refused by name: counting its text tower alone would be 4-50 % low without a word
(research/architectures.md). Hub configs of Qwen2-VL / Qwen2.5-VL are flat (the text fields at the top
level, Qwen2VLConfig.__post_init__ moves them into text_config): read the same way."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from ..errors import PlanError
from .config import ConfigReader
from .vision import (TOWER_DEFAULTS, gemma3_parts, internvl_parts, internvl_tower_spec, lfm2_vl_parts, llama4_parts, llava_parts, minicpmv4_6_parts,
                     mistral3_parts, muse_glimmer_parts, paddleocr_vl_parts, paligemma_parts, pixtral_tower_spec)
from .vision_siglip2 import lfm2_vl_tower_spec
from .audio import audioflamingo3_parts, moss_transcribe_parts, qwen2_audio_parts, voxtral_parts, whisper_tower_spec
from .audio_more import (QWEN3_OMNI, glmasr_parts, granite_speech_parts, omniasr_parts, qwen2_5_omni_audio, qwen3_asr_parts,
                         vibevoice_asr_parts)
from .vision_llava import (aya_vision_parts, deepseek_vl_parts, idefics3_parts, llava_onevision_parts, video_llava_parts,
                           vipllava_parts)
from .vision_qwen import glm4v_tower_spec, glm4v_visual, glm_ocr_visual, qwen_tower_spec, qwen_visual
from .vision_more import (aria_parts, cohere2_vision_parts, cosmos3_edge_parts, cosmos3_edge_text, fuyu_parts, fuyu_tower_spec, granite_docling_parts, hunyuan_vl_parts,
                          hyperclovax_vision_v2_parts, idefics2_parts, kimi_k25_parts, ovis2_parts, video_llama_3_parts)
from .vision_sam import deepseek_vl_hybrid_parts, got_ocr2_parts, got_ocr2_tower_spec
from .vision_mllama import mllama_parts, mllama_text
from .vision_molmo2 import molmo2_parts, molmo2_text
from .vision_ernie import ernie4_5_vl_parts, ernie4_5_vl_text
from .vision_vq import chameleon_parts, chameleon_text, janus_parts
from .vision_idefics import idefics_parts, idefics_text
from .vision_qformer import blip2_parts, blip2_tower_spec, granite4_vision_parts
from .vision_radio import nemotron_h_omni_parts
from .vision_lfm3 import lfm3_vl_parts
from .apertus1p5 import apertus1p5_parts
from .step3p7 import step3p7_parts
from .vision_inkling2 import inkling2_parts
from .unlimited_ocr import unlimited_ocr_parts
from .dots3_note_towers import dots3_note_parts
from .vision_inkling import inkling_mm_parts
from .nemo_speechlm import nemo_speechlm_parts
from .muse_spark import muse_spark_parts
from .vision_hy_v4 import TEXT as HY_V4_VL_TEXT, hy_v4_vl_parts
from .voxtral_realtime import TEXT as VOXTRAL_REALTIME_TEXT, voxtral_realtime_parts, voxtral_realtime_text
from .glm5_next import glm5_next_visual
from .phi4_multimodal import PHI4_TEXT, phi4_multimodal_parts
from .vision_minimax_m3 import minimax_m3_vl_parts

SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "speech_config", "vision_tower_config",
               "encoder_config", "decoder_config", "audio_encoder_config", "vq_config", "perceiver_config")
# the sub-configs beside the tower's that a composite reads (Idefics' perceivers, Janus's VQ-VAE; sub-configs
# outside SUB_CONFIGS, like Molmo 2's adapter_config, are not checked)
EXTRA_CONFIGS = {"idefics2": {"perceiver_config"}, "janus": {"vq_config"}, "idefics": {"perceiver_config"}}

# model_type -> (tower model_types it is modelled with (None: any, the tower is its own), the text model_type
# when text_config names none, the tower + projector tensors (cfg, text hidden size) -> tensors, tie rule)
# tie rules: "or" = top-level flag (default False) or the text config's (LlavaConfig/Qwen2VLConfig
# __post_init__: "pre-v5 saves placed tie_word_embeddings inside text_config"); "top:True"/"top:False" = the
# top-level flag with that default, text_config's ignored (Gemma3Config, PaliGemmaConfig, Qwen3VLConfig);
# "or:True" = "or" with a top-level default of True (PaddleOCRVLConfig)
COMPOSITES = {
    "llava": (("clip_vision_model",), "llama", lambda cfg, h: llava_parts(cfg, h), "or"),
    "llava_next": (("clip_vision_model",), "llama", lambda cfg, h: llava_parts(cfg, h, newline=True), "or"),
    "llava_next_video": (("clip_vision_model",), "llama", lambda cfg, h: llava_parts(cfg, h, newline=True), "or"),
    "gemma3": (("siglip_vision_model",), "gemma3_text", gemma3_parts, "top:True"),
    "paligemma": (("siglip_vision_model",), "gemma", paligemma_parts, "top:True"),
    "qwen2_vl": (None, "qwen2_vl_text", lambda cfg, h: qwen_visual(cfg, "2"), "or"),
    "qwen2_5_vl": (None, "qwen2_5_vl_text", lambda cfg, h: qwen_visual(cfg, "2.5"), "or"),
    "qwen3_vl": (None, "qwen3_vl_text", lambda cfg, h: qwen_visual(cfg, "3"), "top:False"),
    "mistral3": (("pixtral",), "mistral", mistral3_parts, "top:True"),
    "internvl": (("internvl_vision",), "qwen2", internvl_parts, "top:True"),
    "qwen2_audio": (None, "qwen2", qwen2_audio_parts, "top:False"),
    "voxtral": (None, "llama", voxtral_parts, "top:False"),
    "audioflamingo3": (None, "qwen2", audioflamingo3_parts, "top:False"),
    "musicflamingo": (None, "qwen2", audioflamingo3_parts, "top:False"),
    "moss_transcribe_diarize": (None, "qwen3", moss_transcribe_parts, "top:False"),
    "llama4": (None, "llama4_text", llama4_parts, "top:False"),
    "glm4v": (None, "glm4v_text", lambda cfg, h: glm4v_visual(cfg), "or"),
    "glm4v_moe": (None, "glm4v_moe_text", lambda cfg, h: glm4v_visual(cfg), "or"),
    "glm46v": (None, "glm4v_text", lambda cfg, h: glm4v_visual(cfg), "top:False"),
    "qwen3_5": (None, "qwen3_5_text", lambda cfg, h: qwen_visual(cfg, "3.5"), "top:False"),
    "qwen3_5_moe": (None, "qwen3_5_moe_text", lambda cfg, h: qwen_visual(cfg, "3.5"), "top:False"),
    "qwen3_vl_moe": (None, "qwen3_vl_moe_text", lambda cfg, h: qwen_visual(cfg, "3"), "top:False"),
    # Qwen4ExpVisionModel subclasses Qwen3_5MoeVisionModel (modular_qwen4_exp.py): Qwen3.5's tower
    "lfm3_vl": (("lfm3_vl_vision",), "lfm3", lfm3_vl_parts, "top:True"),
    # MiniMaxM3VLConfig.__post_init__ takes a True tie_word_embeddings from text_config
    "minimax_m3_vl": (("minimax_m3_vl_vision",), "minimax_m3_vl_text", minimax_m3_vl_parts, "or"),
    "qwen4_exp": (None, "qwen4_exp_text", lambda cfg, h: qwen_visual(cfg, "3.5"), "top:False"),
    "glm_ocr": (None, "glm_ocr_text", lambda cfg, h: glm_ocr_visual(cfg), "or"),
    "lfm2_vl": (("siglip2_vision_model",), "lfm2", lfm2_vl_parts, "top:True"),
    "paddleocr_vl": (None, "paddleocr_vl_text", paddleocr_vl_parts, "or:True"),
    "minicpmv4_6": (("minicpmv4_6_vision",), "qwen3_5_text", minicpmv4_6_parts, "top:False"),
    "muse_glimmer": (None, "muse_glimmer_text", muse_glimmer_parts, "top:False"),
    "llava_onevision": (("siglip_vision_model",), "qwen2", llava_onevision_parts, "or"),
    "vipllava": (("clip_vision_model",), "llama", vipllava_parts, "or"),
    "video_llava": (("clip_vision_model",), "llama", video_llava_parts, "or"),
    "aya_vision": (("siglip_vision_model",), "cohere2", aya_vision_parts, "or"),
    "idefics3": (("idefics3_vision",), "llama", idefics3_parts, "or"),
    "smolvlm": (("smolvlm_vision",), "llama", idefics3_parts, "or"),
    "deepseek_vl": (("siglip_vision_model",), "llama", deepseek_vl_parts, "or"),
    # ShieldGemma 2 is Gemma3ForConditionalGeneration under its own model_type (configuration_shieldgemma2.py)
    "shieldgemma2": (("siglip_vision_model",), "gemma3_text", gemma3_parts, "top:True"),
    # multimodal composites added by issue 20 (vision_more.py)
    "cosmos3_omni": (None, "qwen3_vl_text", lambda cfg, h: qwen_visual(cfg, "3"), "top:False"),
    "cohere2_vision": (("siglip_vision_model",), "cohere2", cohere2_vision_parts, "top:True"),
    "lighton_ocr": (("pixtral",), "qwen3", mistral3_parts, "top:True"),
    # MistralLarge4Config subclasses Mistral3Config: Pixtral + Mistral 3's projector; tie_word_embeddings False
    "mistral_large4": (("pixtral",), "mistral_large4_text", mistral3_parts, "top:False"),
    "fuyu": (None, "persimmon", fuyu_parts, "top:False"),
    "hyperclovax_vision_v2": (None, "hyperclovax", hyperclovax_vision_v2_parts, "top:True"),
    "video_llama_3": (None, "qwen2", video_llama_3_parts, "or"),
    "qianfan_ocr": (None, "qwen3", lambda cfg, h: internvl_parts(cfg, h, qkv_bias_default=True), "top:False"),
    "idefics2": (None, "mistral", idefics2_parts, "top:False"),
    "got_ocr2": (None, "qwen2", got_ocr2_parts, "top:True"),
    "pp_chart2table": (None, "qwen2", got_ocr2_parts, "top:True"),
    "kimi_k25": (None, "deepseek_v3", kimi_k25_parts, "top:True"),
    "deepseek_vl_hybrid": (("siglip_vision_model",), "llama", deepseek_vl_hybrid_parts, "top:True"),
    "mllama": (None, "mllama_text_model", mllama_parts, "top:False"),
    # Glm46VForConditionalGeneration under its own model_type (configuration_glmga.py); EXAONE 4.5: a Qwen2.5-VL
    # tower with grouped k/v; MiniCPM-V 4.7 and MiniCPM-OCR subclass MiniCPM-V 4.6 (modular_minicpmv4_7.py)
    # GLM-5.3-Flash (glm5_next.py): tie_word_embeddings False at the top level
    "glm5_next": (None, "glm5_next_text", glm5_next_visual, "top:False"),
    "glmga": (None, "glm4v_text", lambda cfg, h: glm4v_visual(cfg), "top:False"),
    "exaone4_5": (None, "exaone4", lambda cfg, h: qwen_visual(cfg, "2.5", kv_heads_default=8), "top:False"),
    "minicpmv4_7": (("minicpmv4_7_vision",), "qwen3_5_text", minicpmv4_6_parts, "top:False"),
    "minicpm_ocr": (("minicpm_ocr_vision",), "qwen3_5_text", minicpmv4_6_parts, "top:True"),
    "aria": (("idefics3_vision",), "aria_text", aria_parts, "top:False"),
    "ovis2": (None, "qwen2", ovis2_parts, "top:True"),
    "granite4_vision": (("clip_vision_model",), "granite4_vision_text", granite4_vision_parts, "top:False"),
    "blip-2": (None, "opt", blip2_parts, "top:True"),
    "instructblip": (None, "opt", lambda cfg, h: blip2_parts(cfg, h, instruct=True), "top:True"),
    "instructblipvideo": (None, "opt", lambda cfg, h: blip2_parts(cfg, h, instruct=True), "top:True"),
    "granite_speech": (None, "granite", granite_speech_parts, "top:True"),
    "granite_speech_plus": (None, "granite", granite_speech_parts, "top:True"),
    "nemotron_h_omni": (("radio",), "nemotron_h", nemotron_h_omni_parts, "or"),
    "vibevoice_asr": (None, "qwen2", vibevoice_asr_parts, "top:False"),
    "granite_docling": (None, "granite_docling_text", granite_docling_parts, "top:True"),
    "hunyuan_vl": (None, "hunyuan_vl_text", hunyuan_vl_parts, "top:True"),
    "molmo2": (None, "molmo2_text", molmo2_parts, "top:False"),
    "ernie4_5_vl_moe": (None, "ernie4_5_vl_moe_text", ernie4_5_vl_parts, "top:True"),
    # CohereCompassVisionConfig subclasses Qwen3VLVisionConfig (modular_cohere_compass.py): Qwen3-VL's tower
    "cohere_compass": (None, "cohere_compass_text", lambda cfg, h: qwen_visual(cfg, "3"), "top:False"),
    "chameleon": (None, "llama", chameleon_parts, "top:False"),
    "janus": (None, "llama", janus_parts, "top:True"),
    "idefics": (None, "llama", idefics_parts, "top:False"),
    "cosmos3_edge": (None, "cosmos3_edge_text", cosmos3_edge_parts, "top:False"),
    # the omni thinkers: an audio and a vision tower (OMNI)
    "qwen2_5_omni_thinker": (None, "qwen2", lambda cfg, h: qwen2_5_omni_audio(cfg) + qwen_visual(cfg, "2.5"),
                             "top:False"),
    "qwen3_omni_moe_thinker": (None, "qwen3_moe", lambda cfg, h: qwen3_asr_parts(cfg, h, QWEN3_OMNI)
                               + qwen_visual(cfg, "3"), "top:False"),
    "glmasr": (None, "llama", glmasr_parts, "top:True"),
    # Muse Spark (muse_spark.py): vision + audio towers; its head is never tied (no _tied_weights_keys)
    "muse_spark": (("muse_spark_vision",), "muse_spark_text", muse_spark_parts, "top:False"),
    # Nemotron 3.5 Transcribe (nemo_speechlm.py): ASR + diarization encoders, word-timestamp encoder and head
    "nemo_speechlm": (None, "nemotron_h", nemo_speechlm_parts, "top:False"),
    # Inkling (vision_inkling.py): the HMLP vision encoder and audio-token embeddings; no tie_word_embeddings field
    "inkling_mm_model": (("inkling_vision",), "inkling_text", inkling_mm_parts, "top:False"),
    # dots.3 Note (dots3_note_towers.py): an MoE vision tower and an audio tower; tie_word_embeddings False
    "dots3_note": (("dots3_note_vision_encoder",), "dots3_note_text", dots3_note_parts, "top:False"),
    # HY-V4-VL (vision_hy_v4.py): HunYuan-VL's tower, its own merger, HY-V4's language model
    "hy_v4_vl": (("hy_v4_vl_vision",), "hy_v4_vl_text", hy_v4_vl_parts, "top:False"),
    # Unlimited-OCR (unlimited_ocr.py): SAM + CLIP towers; tie_word_embeddings False
    "unlimited_ocr": (("unlimited_ocr_vision",), "unlimited_ocr_text", unlimited_ocr_parts, "top:False"),
    # Inkling 2 / 2 Loop (vision_inkling2.py): no tie_word_embeddings field (getattr default False)
    "inkling2": (("inkling2_vision",), "inkling2_text", inkling2_parts, "top:False"),
    "inkling2_loop": (("inkling2_vision",), "inkling2_loop_text", inkling2_parts, "top:False"),
    # Voxtral Realtime (voxtral_realtime.py): its own encoder, Mistral + ada RMSNorms; tie_word_embeddings True
    "voxtral_realtime": (None, "voxtral_realtime_text", voxtral_realtime_parts, "top:True"),
    # Step 3.7 (step3p7.py): Step3p7Config has no tie_word_embeddings field (getattr default False)
    "step3p7": (("step3p5_vision",), "step3p5", step3p7_parts, "top:False"),
    # Apertus 1.5: a VQ image tokenizer and the WavTokenizer encoder (apertus1p5.py); tie_word_embeddings False
    "apertus1p5": (("apertus1p5_vision_tokenizer",), "apertus1p5_text", apertus1p5_parts, "top:False"),
    # Phi-4-multimodal: a flat Phi-3 text config beside vision_config and audio_config (phi4_multimodal.py)
    "phi4_multimodal": (None, "phi4_multimodal_text", phi4_multimodal_parts, "top:False"),
    "omniasr": (None, "llama", omniasr_parts, "top:False"),
    "qwen3_asr": (None, "qwen3", qwen3_asr_parts, "top:True"),
}

# composites whose only sub-config among SUB_CONFIGS is text_config (Fuyu: the tower is one linear; VibeVoice ASR:
# its encoders' configs are acoustic_ / semantic_tokenizer_encoder_config)
NO_TOWER_CONFIG = ("fuyu", "vibevoice_asr")
# composites whose tower is an audio_config
AUDIO = ("qwen2_audio", "voxtral", "voxtral_realtime", "nemo_speechlm", "audioflamingo3", "musicflamingo", "moss_transcribe_diarize", "glmasr", "omniasr",
         "qwen3_asr")
OMNI = ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker", "phi4_multimodal", "apertus1p5", "dots3_note",
        "inkling_mm_model", "muse_spark")   # an audio_config and a vision_config
# composites whose tower sits under another sub-config
TOWER_CONFIGS = {"chameleon": {"vq_config"}, "granite_speech": {"encoder_config"},
                 "granite_speech_plus": {"encoder_config"}}
# composites whose language model is not a text model_type of its own:
# (text config, model_from_config, the whole config) -> arch
TEXT_BUILDERS = {"mllama": mllama_text, "molmo2": molmo2_text, "ernie4_5_vl_moe": ernie4_5_vl_text,
                 "chameleon": chameleon_text, "idefics": idefics_text, "cosmos3_edge": cosmos3_edge_text,
                 "voxtral_realtime": voxtral_realtime_text}
# text model_types whose decoder is another's, layer for layer: modeling_qwen2_5_omni.py Qwen2_5OmniDecoderLayer
# (Qwen2's biased q/k/v), modeling_qwen3_omni_moe.py Qwen3OmniMoeThinkerTextDecoderLayer (Qwen3-MoE's),
# Exaone4_5_Config.__post_init__ (the first release's name for exaone4), configuration_granite4_vision.py /
# configuration_granite_docling.py (GraniteConfig's fields), modeling_hunyuan_vl.py HunYuanVLDenseV1DecoderLayer
TEXT_AS = {"qwen2_5_omni_text": "qwen2", "qwen3_omni_moe_text": "qwen3_moe", "exaone4_5_text": "exaone4",
           "granite4_vision_text": "granite", "granite_docling_text": "granite", "hunyuan_vl_text": "hunyuan_v1_dense", "phi4_multimodal_text": "phi3",
           "hy_v4_vl_text": "hy_v4"}


def is_composite(cfg: Mapping) -> bool:
    return any(isinstance(cfg.get(k), Mapping) for k in SUB_CONFIGS)


def composite(cfg: Mapping, build: Callable):
    """The whole model of a modelled composite; any other is refused by name. ``build`` is
    model_from_config, for the language model."""
    model_type = cfg.get("model_type", "composite")
    parts = [k for k in SUB_CONFIGS if isinstance(cfg.get(k), Mapping)]
    spec = COMPOSITES.get(model_type)
    vision = cfg.get("vision_config")
    tower = vision.get("model_type") if isinstance(vision, Mapping) else None
    towers = TOWER_CONFIGS.get(model_type) or (
        {"audio_config"} if model_type in AUDIO else set() if model_type in NO_TOWER_CONFIG
        else {"audio_config", "vision_config"} if model_type in OMNI else {"vision_config"})
    if (spec is None or not set(parts) <= {"text_config"} | towers | EXTRA_CONFIGS.get(model_type, set())
            or not towers <= set(parts)
            or (spec[0] is not None and tower not in spec[0])):
        raise PlanError("model.model_type", f"model_type {model_type!r} is a composite model ({', '.join(parts)}"
                        + (f"; vision tower {tower!r}" if tower else "") + "): its towers and projector are not "
                        "modelled, and its text tower alone would be counted low")
    _, text_type, parts_of, tie_rule = spec
    if isinstance(cfg.get("text_config"), Mapping):
        text = dict(cfg["text_config"])
    else:   # flat (Qwen2-VL hub configs)
        text = {k: v for k, v in cfg.items() if k not in SUB_CONFIGS and k != "model_type"}
    text = {**TEXT_DEFAULTS.get(text.get("model_type", text_type), {}), "model_type": text_type, **text}
    text["model_type"] = TEXT_AS.get(text["model_type"], text["model_type"])
    text["name"] = cfg.get("name", model_type)
    if tie_rule.startswith("or"):
        if cfg.get("tie_word_embeddings", tie_rule == "or:True"):
            text["tie_word_embeddings"] = True
    else:
        text["tie_word_embeddings"] = cfg.get("tie_word_embeddings", tie_rule == "top:True") is not False
    arch = TEXT_BUILDERS[model_type](text, build, cfg) if model_type in TEXT_BUILDERS else build(text)
    extra = [replace(t, block="", layer=None) for t in parts_of(cfg, arch.hidden_size)]
    return replace(arch, model_type=model_type, tensors=tuple(extra) + arch.tensors, tower=tower_spec(cfg, arch.hidden_size))


# composites whose tower is a CLIP / SigLIP ViT of fixed resolution, and the projector after it
VIT_TOWERS = {"llava": "llava", "llava_next": "llava", "llava_next_video": "llava", "llava_onevision": "llava",
              "gemma3": "gemma3", "shieldgemma2": "gemma3", "paligemma": "paligemma", "cohere2_vision": "cohere2",
              "idefics3": "idefics3", "smolvlm": "idefics3", "aya_vision": "aya",
              "idefics2": "idefics2", "video_llava": "llava", "deepseek_vl": "deepseek_vl",
              "vipllava": "vipllava"}
# the SigLIP-layer towers of their own config class (Idefics3VisionConfig / SmolVLMVisionConfig: 16 heads)
OWN_VIT_KINDS = {"idefics3_vision": 16, "smolvlm_vision": 16, "idefics2_vision": 12}
# composites whose tower is Pixtral (vision.pixtral_tower_spec): whether the processor adds row-break tokens
PIXTRAL_TOWERS = {"mistral3": True, "lighton_ocr": False, "mistral_large4": True}
# composites whose tower is a Qwen-VL ``model.visual`` (vision_qwen.qwen_tower_spec): its version, its projector
# (and EXAONE 4.5's default k/v heads)
QWEN_TOWERS = {"qwen2_vl": ("2", "merger"), "qwen2_5_vl": ("2.5", "merger"), "qwen3_vl": ("3", "merger"),
               "qwen3_vl_moe": ("3", "merger"), "qwen3_5": ("3.5", "merger"), "qwen3_5_moe": ("3.5", "merger"),
               "qwen4_exp": ("3.5", "merger"),
               "hyperclovax_vision_v2": ("2.5", "linear"), "exaone4_5": ("2.5", "merger", 8)}


# the projectors that read vision_feature_layer (VipLlavaConfig also as vision_feature_layers), and its default
FEATURE_DEFAULTS = {"llava": -2, "aya": -1, "vipllava": [-2, -5, -8, -11, 6]}


def tower_spec(cfg: Mapping, text_hidden: int) -> Mapping | None:
    """The shape of the vision tower's activations (memory/vision.py), read from the vision config by its
    own field names with the tower config class's defaults (CLIPVisionConfig, SiglipVisionConfig):
    width, MLP width, heads, the layers the selected features depend on, tokens per image (CLIP adds the
    class token), whether the MLP is QuickGELU (x * sigmoid(1.702 x): three tensors of the MLP width kept)
    or one GELU kernel (two), and the projector's kind. None where the tower's activations are not modelled."""
    model_type = cfg.get("model_type")
    if model_type == "internvl":
        return internvl_tower_spec(cfg, text_hidden)
    if model_type in QWEN_TOWERS:
        version, projector, *kv = QWEN_TOWERS[model_type]
        return qwen_tower_spec(cfg, version, text_hidden, projector, *kv)
    if model_type in ("glm4v", "glm4v_moe", "glm46v", "glmga"):    # one Glm4vVisionModel (glm4v_moe's a copy)
        return glm4v_tower_spec(cfg, text_hidden)
    if model_type == "fuyu":
        return fuyu_tower_spec(cfg, text_hidden)
    if model_type in ("got_ocr2", "pp_chart2table"):     # both GotOcr2ForConditionalGeneration (modeling_auto.py)
        return got_ocr2_tower_spec(cfg, text_hidden)
    if model_type == "blip-2":
        return blip2_tower_spec(cfg, text_hidden)
    if model_type == "lfm2_vl":
        return lfm2_vl_tower_spec(cfg, text_hidden)         # memory/vision_siglip2.py
    if model_type in ("qwen2_audio", "voxtral"):
        return whisper_tower_spec(cfg, text_hidden)         # memory/vision_audio.py
    if model_type == "instructblip":
        # BLIP-2's ViT and Q-Former, the Q-Former also reading the instruction tokens (memory/vision_qformer.py)
        return {**blip2_tower_spec(cfg, text_hidden), "instruct": True}
    if model_type in PIXTRAL_TOWERS:
        return pixtral_tower_spec(cfg, text_hidden, PIXTRAL_TOWERS[model_type])
    projector = VIT_TOWERS.get(model_type)
    if projector is None:
        return None
    v = ConfigReader(cfg["vision_config"])
    kind = cfg["vision_config"].get("model_type")
    if projector in ("idefics3", "idefics2"):
        kind = kind if kind in OWN_VIT_KINDS else f"{model_type}_vision"
    elif kind not in ("clip_vision_model", "siglip_vision_model"):     # LLaVA's default tower is CLIP's
        kind = "clip_vision_model" if projector in ("llava", "vipllava") else "siglip_vision_model"
    d = TOWER_DEFAULTS[kind]
    layers = v.int("num_hidden_layers", default=d["num_hidden_layers"])
    patches = (v.int("image_size", default=d["image_size"]) // v.int("patch_size", default=d["patch_size"])) ** 2
    feature = cfg.get("vision_feature_layer", cfg.get("vision_feature_layers", FEATURE_DEFAULTS.get(projector, -1))) \
        if projector in FEATURE_DEFAULTS else -1
    feature = list(feature) if isinstance(feature, (list, tuple)) else feature
    # hidden_states[k]: the output of layer k - 1 (k < 0 from the end); the deepest selected one decides
    run = max(layers + 1 + f if f < 0 else f for f in (feature if isinstance(feature, list) else [feature]))
    act = v.str("hidden_act", "quick_gelu" if kind == "clip_vision_model" else "gelu_pytorch_tanh")
    return {"kind": kind, "hidden": v.int("hidden_size", default=d["hidden_size"]),
            "inter": v.int("intermediate_size", default=d["intermediate_size"]),
            "heads": v.int("num_attention_heads", default=OWN_VIT_KINDS.get(kind, 12)),
            "layers_run": max(0, min(layers, run)),
            "patches": patches, "cls": kind == "clip_vision_model", "image_size": v.int("image_size", default=d["image_size"]), "mlp_tensors": 3 if act == "quick_gelu" else 2,
            "features": len(feature) if isinstance(feature, list) else 1, "projector": projector,
            "text_hidden": text_hidden,
            "tokens_per_image": ConfigReader(cfg).int("mm_tokens_per_image", default=256),
            # Cohere2VisionConfig: pixel_shuffle's factor and linear_1's width (the SwiGLU's two halves)
            **({"downsample": ConfigReader(cfg).int("downsample_factor", default=2),
                "mid": ConfigReader(cfg).int("alignment_intermediate_size", default=36864)}
               if projector == "cohere2" else {}),
            # AyaVisionConfig: pixel_shuffle's factor; linear_1's width, the text width where the config has none
            **({"downsample": ConfigReader(cfg).int("downsample_factor", default=2),
                "mid": ConfigReader(cfg).int("alignment_intermediate_size", default=text_hidden)}
               if projector == "aya" else {}),
            **(idefics2_connector(cfg) if projector == "idefics2" else {})}


def idefics2_connector(cfg: Mapping) -> dict:
    """Idefics2Connector's widths (memory/vision_perceiver.py): the text intermediate (MistralConfig's default)
    and Idefics2PerceiverConfig's resampler, read by their own field names."""
    r = ConfigReader(cfg.get("perceiver_config") or {})
    return {"text_inter": ConfigReader(cfg.get("text_config") or {}).int("intermediate_size", default=14336),
            "latents": r.int("resampler_n_latents", default=64), "depth": r.int("resampler_depth", default=3),
            "resampler_heads": r.int("resampler_n_heads", default=16),
            "resampler_head_dim": r.int("resampler_head_dim", default=96),
            "resampler_kv_heads": r.int("num_key_value_heads", default=4)}


# a composite's config.json keeps only the text_config fields that differ from the text config class's
# defaults (LLaVA-1.5's has no hidden_size): LlamaConfig's (configuration_llama.py)
TEXT_DEFAULTS = {"phi4_multimodal_text": PHI4_TEXT, "hy_v4_vl_text": HY_V4_VL_TEXT, "voxtral_realtime_text": VOXTRAL_REALTIME_TEXT,
                 "llama": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                           "num_attention_heads": 32, "vocab_size": 32000, "max_position_embeddings": 2048},
                 # GlmOcrTextConfig (configuration_glm_ocr.py)
                 "glm_ocr_text": {"vocab_size": 59392, "hidden_size": 1024, "intermediate_size": 4096,
                                  "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 8,
                                  "max_position_embeddings": 131072},
                 # PaddleOCRTextConfig (configuration_paddleocr_vl.py)
                 "paddleocr_vl_text": {"vocab_size": 103424, "hidden_size": 1024, "intermediate_size": 3072,
                                       "num_hidden_layers": 18, "num_attention_heads": 16, "num_key_value_heads": 2,
                                       "head_dim": 128, "max_position_embeddings": 131072}}
