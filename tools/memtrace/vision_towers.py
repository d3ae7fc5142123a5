"""What more vision towers and projectors keep for backward, traced on CPU tensors (transformers 5.24).

Each case builds the composite's base model (tiny widths, bf16, SDPA unless the case says otherwise, trainable)
and runs its ``get_image_features`` on real CPU tensors, as vision_internvl.py does (the ops dispatch as on
FakeTensors; Pixtral's per-image positions and masks are data-dependent). The pooled features' sum stands for
the loss (the language model takes them by masked_scatter, which saves only its mask); the outputs are dropped
and the activation storages still alive are what autograd saved (vision_qwen.saved_after_forward).

- ``mistral3`` / ``lighton_ocr``: modeling_pixtral.py PixtralVisionModel (patch_conv, ln_pre RMSNorm, 2-D
  axial rotary, one packed sequence of every image's patches with a block-diagonal additive mask under SDPA,
  cu_seqlens under flash_attention_2; layers of attention_norm, q/k/v/o_proj, ffn_norm and a gated SiLU MLP)
  and modeling_mistral3.py Mistral3MultiModalProjector / modeling_lighton_ocr.py
  LightOnOcrMultiModalProjector (RMSNorm, patch_merger: per-image unfold of spatial_merge_size^2 patches and
  merging_layer, linear_1, GELU, linear_2); `images` (height, width) pixel sizes, padded into one batch as
  PixtralImageProcessor does (image_sizes gives each image's own size);
- ``mistral_large4``: modeling_mistral_large4.py MistralLarge4Model.get_image_features, the same Pixtral tower
  and a projector written as Mistral 3's;
- ``cohere2_vision``: modeling_siglip.py SiglipVisionModel (no head: last_hidden_state after post_layernorm)
  and modeling_cohere2_vision.py Cohere2VisionMultiModalProjector (pixel_shuffle by downsample_factor,
  linear_1 to alignment_intermediate_size, SwiGLU over its halves, linear_2); `tiles` crops of image_size;
- ``idefics3`` / ``smolvlm``: modeling_idefics3.py Idefics3Model.get_image_features / modeling_smolvlm.py
  (Idefics3VisionTransformer: SigLIP layers, post_layernorm, the real images picked by boolean index;
  Idefics3Connector: pixel_shuffle by scale_factor and modality_projection); `tiles` crops of one sample;
- ``blip-2``: modeling_blip_2.py Blip2ForConditionalGeneration.get_image_features (Blip2VisionModel: class
  token, fused qkv; Blip2QFormerModel over num_query_tokens queries with cross-attention to the ViT's tokens
  every cross_attention_frequency-th layer; language_projection), query_tokens and the Q-Former cast to fp32 as
  from_pretrained keeps its _keep_in_fp32_modules; `tiles` images;
- ``instructblip``: modeling_instructblip.py InstructBlipForConditionalGeneration.get_image_features, BLIP-2's
  ViT and Q-Former with `instruction` qformer_input_ids per image beside the queries (the Q-Former in the model
  dtype: only query_tokens is kept in fp32); `tiles` images;
- ``lfm2_vl``: modeling_lfm2_vl.py Lfm2VlModel.get_image_features (Siglip2VisionTransformer over each image's
  flattened patches with its spatial_shapes, the position table resized per image; the token gather and
  Lfm2VlMultiModalProjector's pixel unshuffle, LayerNorm, linear_1, GELU, linear_2); `grids` patch grids;
- ``qwen2_audio`` / ``voxtral``: modeling_qwen2_audio.py Qwen2AudioEncoder + Qwen2AudioMultiModalProjector (as
  Qwen2AudioForConditionalGeneration.forward runs them on unpadded 30 s clips: no mask), modeling_voxtral.py
  VoxtralForConditionalGeneration.get_audio_features; `tiles` clips of fp32 log-mel features;
- ``got_ocr2``: modeling_got_ocr2.py GotOcr2Model.get_image_features (GotOcr2VisionEncoder: SAM's ViTDet,
  windowed and global layers with decomposed relative positions, eager attention, GotOcr2VisionNeck;
  GotOcr2MultiModalProjector's two stride-2 convs and linear); `tiles` tiles of image_size;
- ``florence2``: modeling_florence2.py Florence2Model.get_image_features (Florence2VisionBackbone: DaViT's conv
  embeddings, spatial (windowed) and channel-attention blocks, drop_path; Florence2MultiModalProjector); images
  of `image_size` pixels; the attention kernels' saves stood in for in the ``flash_attention_2`` cases (CPU SDPA
  runs the channel attention, head dimension = token count, by its fp32 math path);
- ``aya_vision``: modeling_aya_vision.py AyaVisionModel.get_image_features (SiglipVisionModel without head,
  hidden_states[vision_feature_layer]: post_layernorm runs, its output unused; AyaVisionMultiModalProjector:
  pixel_shuffle by downsample_factor, LayerNorm over the shuffled width, linear_1 to alignment_intermediate_size,
  SwiGLU over its halves, linear_2); `tiles` crops of image_size;
- ``idefics2``: modeling_idefics2.py Idefics2Model.get_image_features (Idefics2VisionTransformer as Idefics3's;
  Idefics2Connector: modality_projection, a gated SiLU MLP to the text width, and Idefics2PerceiverResampler's
  resampler_depth layers of latents attending to the concatenated normed context and latents, GQA, and its
  final RMSNorm); `tiles` crops of one sample;
- ``video_llava``: modeling_video_llava.py VideoLlavaModel.get_image_features (image_tower: CLIPVisionModel,
  hidden_states[vision_feature_layer] without the class token; VideoLlavaMultiModalProjector as LLaVA's);
  `tiles` images;
- ``deepseek_vl``: modeling_deepseek_vl.py DeepseekVLModel.get_image_features (SiglipVisionModel with its
  head, last_hidden_state after post_layernorm; DeepseekVLAligner: linear1, GELU, linear2); `tiles` images;
- ``vipllava``: modeling_vipllava.py VipLlavaModel.get_image_features (CLIPVisionModel, the hidden states of
  vision_feature_layer without the class token, concatenated; VipLlavaMultiModalProjector: LayerNorm, linear_1,
  GELU, linear_2); `tiles` images;
- ``glm4v``: modeling_glm4v.py Glm4vModel.get_image_features (Glm4vVisionModel over every image's patches packed,
  cu_seqlens per image; GLM-4.6V and GLM-4.5V's glm4v_moe build the same tower); `tiles` images of `grid`^2
  patches;
- ``fuyu``: modeling_fuyu.py FuyuModel.get_image_features, one linear (vision_embed_tokens) over `patches`
  flattened 30 x 30 x 3 patches, bf16, or fp32 weights and patches under CPU autocast to bf16.

  python -m tools.memtrace.vision_towers > tests/data/vision_towers_trace.json      (a few seconds)
"""
from __future__ import annotations

import contextlib

import torch

from .vision_qwen import flash_attention_2, print_trace, saved_after_forward

PIXTRAL = {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 4, "num_attention_heads": 4,
           "head_dim": 32, "image_size": 256, "patch_size": 16, "model_type": "pixtral"}
SIGLIP = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
          "image_size": 128, "patch_size": 16, "model_type": "siglip_vision_model"}
TEXT = {"mistral3": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1, "num_attention_heads": 4,
                     "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1000, "model_type": "mistral"},
        "lighton_ocr": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                        "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1000,
                        "model_type": "qwen3"},
        "cohere2_vision": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                           "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
                           "model_type": "cohere2"}}
CASES = [{"id": "mistral3-i1-128x128", "model": "mistral3", "images": [(128, 128)]},
         {"id": "mistral3-i2-128x128-96x160", "model": "mistral3", "images": [(128, 128), (96, 160)]},
         {"id": "mistral3-i3-128x128", "model": "mistral3", "images": [(128, 128)] * 3},
         {"id": "mistral3-i1-128x128-layer-2", "model": "mistral3", "images": [(128, 128)], "vision_feature_layer": -2},
         # gradient checkpointing: each PixtralAttentionLayer is a GradientCheckpointingLayer
         {"id": "mistral3-i2-128x128-ac", "model": "mistral3", "images": [(128, 128)] * 2, "checkpointing": True},
         # attn_implementation flash_attention_2 (HF's varlen glue; the kernel's saves stood in for)
         {"id": "mistral3-i2-128x128-fa2", "model": "mistral3", "images": [(128, 128)] * 2,
          "attention": "flash_attention_2"},
         {"id": "lighton_ocr-i2-128x128", "model": "lighton_ocr", "images": [(128, 128)] * 2},
         {"id": "cohere2_vision-t1", "model": "cohere2_vision", "tiles": 1},
         {"id": "cohere2_vision-t3", "model": "cohere2_vision", "tiles": 3},
         {"id": "cohere2_vision-t2-ac", "model": "cohere2_vision", "tiles": 2, "checkpointing": True},
         {"id": "cohere2_vision-t2-fa2", "model": "cohere2_vision", "tiles": 2, "attention": "flash_attention_2"}]
COHERE2 = {"downsample_factor": 2, "alignment_intermediate_size": 512}
# BLIP-2: an EVA-style ViT (fused qkv, class token) and a Q-Former with cross-attention every 2nd layer
BLIP2_VISION = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
                "image_size": 112, "patch_size": 14}
# dropout 0: CPU's dropout keeps an input-dtype noise tensor (and SDPA with dropout_p > 0 falls back to the math
# path there), where CUDA's native_dropout keeps a bool mask and its SDPA kernels an RNG state
QFORMER = {"hidden_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 256,
           "cross_attention_frequency": 2, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
BLIP2_CASES = [{"id": "blip-2-i1", "model": "blip-2", "tiles": 1},
               {"id": "blip-2-i3", "model": "blip-2", "tiles": 3},
               {"id": "blip-2-i2-ac", "model": "blip-2", "tiles": 2, "checkpointing": True}]
TEXT["blip-2"] = {"model_type": "opt", "hidden_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
                  "ffn_dim": 512, "vocab_size": 1000, "word_embed_proj_dim": 256}
CASES += BLIP2_CASES
# InstructBLIP: BLIP-2's ViT and Q-Former, the Q-Former also reading `instruction` qformer_input_ids per image
# beside its queries (InstructBlipQFormerEmbeddings: word + position embeddings concatenated after the queries;
# only the queries cross-attend and take the *_query FFN, the instruction tokens the text FFN), only query_tokens
# in fp32 (_keep_in_fp32_modules), so the Q-Former runs in the model dtype
INSTRUCTBLIP_CASES = [{"id": "instructblip-i1-l16", "model": "instructblip", "tiles": 1, "instruction": 16},
                      {"id": "instructblip-i3-l24", "model": "instructblip", "tiles": 3, "instruction": 24},
                      {"id": "instructblip-i2-l16-ac", "model": "instructblip", "tiles": 2, "instruction": 16,
                       "checkpointing": True}]
TEXT["instructblip"] = dict(TEXT["blip-2"])
CASES += INSTRUCTBLIP_CASES
# the audio towers: Whisper-style encoders over `tiles` 30 s clips (here max_source_positions 64: 128 mel frames
# each), fed the feature extractor's fp32 log-mel features; Qwen2-Audio's avg_pooler, layer_norm and one linear,
# Voxtral's layer_norm, frames stacked by 4 (intermediate_size) and linear_1 / GELU / linear_2
AUDIO_ENCODER = {"d_model": 128, "encoder_layers": 3, "encoder_attention_heads": 4, "encoder_ffn_dim": 512,
                 "num_mel_bins": 16, "max_source_positions": 64, "dropout": 0.0, "attention_dropout": 0.0,
                 "activation_dropout": 0.0}
AUDIO_CASES = [{"id": "qwen2_audio-c1", "model": "qwen2_audio", "tiles": 1},
               {"id": "qwen2_audio-c3", "model": "qwen2_audio", "tiles": 3},
               {"id": "qwen2_audio-c2-ac", "model": "qwen2_audio", "tiles": 2, "checkpointing": True},
               {"id": "voxtral-c1", "model": "voxtral", "tiles": 1},
               {"id": "voxtral-c2", "model": "voxtral", "tiles": 2},
               {"id": "voxtral-c2-ac", "model": "voxtral", "tiles": 2, "checkpointing": True}]
TEXT["qwen2_audio"] = {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}
TEXT["voxtral"] = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                   "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "head_dim": 64}
CASES += AUDIO_CASES
# LFM2-VL: a SigLIP 2 NaFlex tower over each image's patches (padded to the batch's longest, a pixel_attention_mask),
# its position table resized per image, then the pixel-unshuffle projector; `images` (rows, cols) patch grids
SIGLIP2 = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
           "num_patches": 64, "patch_size": 16, "num_channels": 3, "model_type": "siglip2_vision_model",
           "vision_use_head": False}
LFM2_VL_CASES = [{"id": "lfm2_vl-i1-8x8", "model": "lfm2_vl", "tiles": 1, "grids": [(8, 8)]},
                 {"id": "lfm2_vl-i2-8x8", "model": "lfm2_vl", "tiles": 2, "grids": [(8, 8), (8, 8)]},
                 {"id": "lfm2_vl-i2-8x8-ac", "model": "lfm2_vl", "tiles": 2, "grids": [(8, 8), (8, 8)],
                  "checkpointing": True}]
TEXT["lfm2_vl"] = {"model_type": "lfm2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
                   "layer_types": ["conv", "full_attention"]}
CASES += LFM2_VL_CASES
# Fuyu: no tower, one linear over each flattened 30 x 30 x 3 patch; bf16 weights and patches, or fp32 weights
# and patches under autocast (bf16-mixed)
TEXT["fuyu"] = {"model_type": "persimmon", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                "num_attention_heads": 4, "vocab_size": 1000}
# GOT-OCR 2.0: a SAM ViTDet tower (windowed attention with padding to whole windows, global layers, decomposed
# relative positions, eager attention), its conv neck and the two strided convs of the projector
GOT_VISION = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "mlp_dim": 256,
              "image_size": 160, "patch_size": 16, "window_size": 4, "global_attn_indexes": [1, 3],
              "output_channels": 32}
TEXT["got_ocr2"] = {"model_type": "qwen2", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1,
                    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}
CASES += [{"id": "got_ocr2-t1", "model": "got_ocr2", "tiles": 1},
          {"id": "got_ocr2-t2", "model": "got_ocr2", "tiles": 2},
          {"id": "got_ocr2-t1-ac", "model": "got_ocr2", "tiles": 1, "checkpointing": True},
          # GOT-OCR 2.0's own widths (768, 12 heads, MLP 3072, 14-patch windows, 256 neck channels) on a 512 px
          # tile: a 32 x 32 grid padded to 42 x 42 for the windowed layer, one global layer
          {"id": "got_ocr2-512px-real-widths", "model": "got_ocr2", "tiles": 1,
           "tower": {"hidden_size": 768, "num_attention_heads": 12, "mlp_dim": 3072, "num_hidden_layers": 2,
                     "image_size": 512, "window_size": 14, "global_attn_indexes": [1], "output_channels": 256}}]
# Idefics3 / SmolVLM: a SigLIP-layer tower without head (post_layernorm) and the connector's pixel shuffle +
# modality_projection; pixel_values (batch, images, 3, H, W) of image_size crops
IDEFICS3_VISION = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
                   "image_size": 128, "patch_size": 16}
for name in ("idefics3", "smolvlm"):
    TEXT[name] = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                  "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}
CASES += [{"id": "idefics3-t1", "model": "idefics3", "tiles": 1},
          {"id": "idefics3-t3", "model": "idefics3", "tiles": 3},
          {"id": "idefics3-t2-ac", "model": "idefics3", "tiles": 2, "checkpointing": True},
          {"id": "smolvlm-t2", "model": "smolvlm", "tiles": 2}]
# Florence-2: DaViT (per stage a conv embedding and blocks of a windowed spatial block and a channel-attention
# block, each with depthwise convs and drop_path 0..drop_path_rate), the projector's pooled + flattened tokens
FLORENCE2_VISION = {"depths": [1, 1, 2, 1], "embed_dim": [32, 64, 96, 128], "num_heads": [2, 4, 6, 8],
                    "num_groups": [2, 4, 6, 8], "window_size": 3, "projection_dim": 128,
                    "max_position_embeddings": 16}
TEXT["florence2"] = {"model_type": "bart", "d_model": 128, "encoder_layers": 1, "decoder_layers": 1,
                     "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 256,
                     "decoder_ffn_dim": 256, "vocab_size": 1000}
CASES += [{"id": "florence2-96px", "model": "florence2", "tiles": 1, "image_size": 96},
          {"id": "florence2-112px-padded-i2", "model": "florence2", "tiles": 2, "image_size": 112},
          {"id": "florence2-96px-no-drop-path", "model": "florence2", "tiles": 1, "image_size": 96,
           "tower": {"drop_path_rate": 0.0}},
          # the attention kernels' saves stood in for (vision_qwen.flash_attention_2: q, k, v, out, lse), as CUDA's
          # SDPA keeps them; CPU SDPA runs the channel attention (head dim = the token count) by its fp32 math path
          {"id": "florence2-96px-kernel", "model": "florence2", "tiles": 1, "image_size": 96,
           "attention": "flash_attention_2"},
          {"id": "florence2-112px-padded-i2-kernel", "model": "florence2", "tiles": 2, "image_size": 112,
           "attention": "flash_attention_2"},
          # gradient_checkpointing_enable: DaViT's blocks are plain nn.Modules, not GradientCheckpointingLayers
          {"id": "florence2-96px-kernel-ac", "model": "florence2", "tiles": 1, "image_size": 96,
           "attention": "flash_attention_2", "checkpointing": True}]
# Aya Vision: the SigLIP tower of Cohere2 Vision (hidden_states[vision_feature_layer], before post_layernorm)
# and AyaVisionMultiModalProjector (pixel_shuffle, a LayerNorm over the shuffled width, linear_1, SwiGLU, linear_2)
TEXT["aya_vision"] = dict(TEXT["cohere2_vision"])
AYA = {"downsample_factor": 2, "alignment_intermediate_size": 512, "vision_feature_layer": -1,
       "vision_feature_select_strategy": "full"}
CASES += [{"id": "aya_vision-t1", "model": "aya_vision", "tiles": 1},
          {"id": "aya_vision-t3", "model": "aya_vision", "tiles": 3},
          {"id": "aya_vision-t2-ac", "model": "aya_vision", "tiles": 2, "checkpointing": True},
          {"id": "aya_vision-t2-layer-2", "model": "aya_vision", "tiles": 2, "vision_feature_layer": -2}]
# Idefics2: Idefics3's SigLIP-layer tower (Idefics2VisionTransformer, post_layernorm), then Idefics2Connector:
# modality_projection (a gated SiLU MLP, vision width -> text intermediate -> text width) and the perceiver
# resampler (latents attending to [normed context; normed latents], GQA, RMSNorms, a 4x gated MLP, a final norm)
IDEFICS2_PERCEIVER = {"model_type": "idefics2_perceiver", "resampler_n_latents": 8, "resampler_depth": 2,
                      "resampler_n_heads": 4, "resampler_head_dim": 32, "num_key_value_heads": 2}
TEXT["idefics2"] = {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}
CASES += [{"id": "idefics2-t1", "model": "idefics2", "tiles": 1},
          {"id": "idefics2-t3", "model": "idefics2", "tiles": 3},
          {"id": "idefics2-t2-ac", "model": "idefics2", "tiles": 2, "checkpointing": True},
          {"id": "idefics2-t2-fa2", "model": "idefics2", "tiles": 2, "attention": "flash_attention_2"}]
# Mistral Large 4: the Pixtral tower and Mistral 3's projector (MistralLarge4MultiModalProjector: RMSNorm, patch
# merger, linear_1, GELU, linear_2); a tiny MLA + MoE text model beside it (not run)
TEXT["mistral_large4"] = {"model_type": "mistral_large4_text", "hidden_size": 256, "intermediate_size": 512,
                          "moe_intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
                          "num_key_value_heads": 4, "n_routed_experts": 4, "n_shared_experts": 1,
                          "num_experts_per_tok": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16,
                          "qk_nope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1000, "index_head_dim": 32,
                          "index_n_heads": 2, "index_topk": 64}
CASES += [{"id": "mistral_large4-i2-128x128", "model": "mistral_large4", "images": [(128, 128)] * 2},
          {"id": "mistral_large4-i1-128x128-ac", "model": "mistral_large4", "images": [(128, 128)],
           "checkpointing": True}]
# Video-LLaVA's image path: a CLIP tower (class token, QuickGELU), hidden_states[-2] without the class token, and
# LLaVA's projector (linear_1, GELU, linear_2); the video tower is built beside it, not run for images
CLIP_VISION = {"model_type": "clip_vision_model", "hidden_size": 128, "intermediate_size": 512,
               "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": 112, "patch_size": 14,
               "projection_dim": 128}
TEXT["video_llava"] = dict(TEXT["idefics2"], model_type="llama")
CASES += [{"id": "video_llava-i1", "model": "video_llava", "tiles": 1},
          {"id": "video_llava-i3", "model": "video_llava", "tiles": 3},
          {"id": "video_llava-i2-ac", "model": "video_llava", "tiles": 2, "checkpointing": True}]
# DeepSeek-VL: SiglipVisionModel (its attention-pooling head runs, its output replaced) and DeepseekVLAligner
# (linear1, GELU, linear2) over last_hidden_state
TEXT["deepseek_vl"] = dict(TEXT["idefics2"], model_type="llama")
CASES += [{"id": "deepseek_vl-i1", "model": "deepseek_vl", "tiles": 1},
          {"id": "deepseek_vl-i3", "model": "deepseek_vl", "tiles": 3},
          {"id": "deepseek_vl-i2-ac", "model": "deepseek_vl", "tiles": 2, "checkpointing": True}]
# VipLLaVA: the CLIP tower, several hidden states without the class token concatenated (the default mixes
# negative and positive indices: -2, -5, -8, -11, 6), VipLlavaMultiModalProjector's LayerNorm, linear_1, GELU,
# linear_2
TEXT["vipllava"] = dict(TEXT["idefics2"], model_type="llama")
CASES += [{"id": "vipllava-i1-layers-2-4+1", "model": "vipllava", "tiles": 1, "vision_feature_layer": [-2, -4, 1]},
          {"id": "vipllava-i2-layers-2-4+1", "model": "vipllava", "tiles": 2, "vision_feature_layer": [-2, -4, 1]},
          {"id": "vipllava-i1-layer-2", "model": "vipllava", "tiles": 1, "vision_feature_layer": -2},
          {"id": "vipllava-i2-layers-2-4+1-ac", "model": "vipllava", "tiles": 2,
           "vision_feature_layer": [-2, -4, 1], "checkpointing": True}]
# GLM-4.1V / 4.6V: Glm4vVisionModel (Qwen-VL-like packed patches, RMSNorm blocks with an out_hidden_size-wide
# gated MLP, a bicubic grid_sample of the position table, downsample conv, merger) over `grid` x `grid` patches
GLM4V_VISION = {"depth": 2, "hidden_size": 128, "num_heads": 4, "intermediate_size": 256, "out_hidden_size": 256,
                "image_size": 112, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
TEXT["glm4v"] = {"model_type": "glm4v_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
CASES += [{"id": "glm4v-i1-8x8", "model": "glm4v", "tiles": 1, "grid": 8},
          {"id": "glm4v-i2-8x8", "model": "glm4v", "tiles": 2, "grid": 8},
          {"id": "glm4v-i2-8x8-ac", "model": "glm4v", "tiles": 2, "grid": 8, "checkpointing": True},
          {"id": "glm4v-i2-8x8-fa2", "model": "glm4v", "tiles": 2, "grid": 8, "attention": "flash_attention_2"}]
CASES += [{"id": "fuyu-p100", "model": "fuyu", "patches": 100},
          {"id": "fuyu-p100-autocast", "model": "fuyu", "patches": 100, "autocast": True}]


def config(case: dict) -> dict:
    model = case["model"]
    raw = {"model_type": model, "text_config": dict(TEXT[model]), "image_token_id": 999, "tie_word_embeddings": False}
    if model == "cohere2_vision":
        return {**raw, "vision_config": dict(SIGLIP), **COHERE2}
    if model == "aya_vision":
        return {**raw, "vision_config": {**SIGLIP, "vision_use_head": False}, **AYA,
                "vision_feature_layer": case.get("vision_feature_layer", -1)}
    if model == "florence2":
        return {**raw, "vision_config": {**FLORENCE2_VISION, **case.get("tower", {})}}
    if model == "glm4v":
        return {**raw, "vision_config": dict(GLM4V_VISION), "video_token_id": 998}
    if model == "vipllava":
        return {**raw, "vision_config": dict(CLIP_VISION), "vision_feature_layer": case["vision_feature_layer"]}
    if model == "deepseek_vl":
        return {**raw, "vision_config": {**SIGLIP, "vision_use_head": True}}
    if model == "video_llava":
        return {**raw, "vision_config": dict(CLIP_VISION), "vision_feature_layer": -2,
                "vision_feature_select_strategy": "default", "video_token_id": 998}
    if model == "idefics2":
        return {**raw, "vision_config": {**IDEFICS3_VISION, "model_type": "idefics2_vision"},
                "perceiver_config": dict(IDEFICS2_PERCEIVER)}
    if model in ("idefics3", "smolvlm"):
        return {**raw, "vision_config": {**IDEFICS3_VISION, "model_type": f"{model}_vision"}, "scale_factor": 2}
    if model == "got_ocr2":
        return {**raw, "vision_config": {**GOT_VISION, **case.get("tower", {})}}
    if model == "fuyu":
        return {**raw, "patch_size": 30, "num_channels": 3}
    if model == "lfm2_vl":
        return {**raw, "vision_config": dict(SIGLIP2), "downsample_factor": 2, "projector_hidden_size": 192,
                "image_token_id": 999}
    if model == "qwen2_audio":
        return {**raw, "audio_config": {**AUDIO_ENCODER, "model_type": "qwen2_audio_encoder"}, "audio_token_index": 999}
    if model == "voxtral":
        return {**raw, "audio_config": {**AUDIO_ENCODER, "model_type": "voxtral_encoder", "intermediate_size": 512,
                                        "hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4},
                "audio_token_id": 999}
    if model in ("blip-2", "instructblip"):
        return {**raw, "vision_config": dict(BLIP2_VISION), "qformer_config": dict(QFORMER), "num_query_tokens": 8}
    return {**raw, "vision_config": dict(PIXTRAL), "spatial_merge_size": 2,
            **({"vision_feature_layer": case.get("vision_feature_layer", -1)}
               if model in ("mistral3", "mistral_large4") else {})}


def _model(case: dict, raw: dict):
    from transformers import AutoConfig  # noqa: PLC0415
    from transformers.models.aya_vision.modeling_aya_vision import AyaVisionModel  # noqa: PLC0415
    from transformers.models.cohere2_vision.modeling_cohere2_vision import Cohere2VisionModel  # noqa: PLC0415
    from transformers.models.lighton_ocr.modeling_lighton_ocr import LightOnOcrModel  # noqa: PLC0415
    from transformers.models.mistral3.modeling_mistral3 import Mistral3Model  # noqa: PLC0415
    from transformers.models.mistral_large4.modeling_mistral_large4 import MistralLarge4Model  # noqa: PLC0415
    from transformers.models.blip_2.modeling_blip_2 import Blip2ForConditionalGeneration  # noqa: PLC0415
    from transformers.models.instructblip.modeling_instructblip import (  # noqa: PLC0415
        InstructBlipForConditionalGeneration)
    from transformers.models.qwen2_audio.modeling_qwen2_audio import (  # noqa: PLC0415
        Qwen2AudioForConditionalGeneration)
    from transformers.models.voxtral.modeling_voxtral import VoxtralForConditionalGeneration  # noqa: PLC0415
    from transformers.models.lfm2_vl.modeling_lfm2_vl import Lfm2VlModel  # noqa: PLC0415
    from transformers.models.deepseek_vl.modeling_deepseek_vl import DeepseekVLModel  # noqa: PLC0415
    from transformers.models.fuyu.modeling_fuyu import FuyuModel  # noqa: PLC0415
    from transformers.models.glm4v.modeling_glm4v import Glm4vModel  # noqa: PLC0415
    from transformers.models.got_ocr2.modeling_got_ocr2 import GotOcr2Model  # noqa: PLC0415
    from transformers.models.idefics2.modeling_idefics2 import Idefics2Model  # noqa: PLC0415
    from transformers.models.idefics3.modeling_idefics3 import Idefics3Model  # noqa: PLC0415
    from transformers.models.florence2.modeling_florence2 import Florence2Model  # noqa: PLC0415
    from transformers.models.smolvlm.modeling_smolvlm import SmolVLMModel  # noqa: PLC0415
    from transformers.models.video_llava.modeling_video_llava import VideoLlavaModel  # noqa: PLC0415
    from transformers.models.vipllava.modeling_vipllava import VipLlavaModel  # noqa: PLC0415
    cls = {"mistral3": Mistral3Model, "lighton_ocr": LightOnOcrModel, "cohere2_vision": Cohere2VisionModel,
           "blip-2": Blip2ForConditionalGeneration, "instructblip": InstructBlipForConditionalGeneration,
           "fuyu": FuyuModel, "qwen2_audio": Qwen2AudioForConditionalGeneration,
           "voxtral": VoxtralForConditionalGeneration, "lfm2_vl": Lfm2VlModel, "got_ocr2": GotOcr2Model,
           "idefics3": Idefics3Model, "smolvlm": SmolVLMModel, "florence2": Florence2Model,
           "aya_vision": AyaVisionModel, "idefics2": Idefics2Model,
           "mistral_large4": MistralLarge4Model, "video_llava": VideoLlavaModel,
           "deepseek_vl": DeepseekVLModel, "vipllava": VipLlavaModel,
           "glm4v": Glm4vModel}
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "model_type"}, model_type=raw["model_type"])
    torch.manual_seed(0)
    dtype = torch.float32 if case.get("autocast") else torch.bfloat16
    # GOT-OCR 2.0 supports no SDPA (its tower's attention is written out, eager): built eager
    attn = "eager" if case["model"] == "got_ocr2" else "sdpa"
    model = cls[case["model"]]._from_config(cfg, dtype=dtype, attn_implementation=attn)
    model.train()
    for name in getattr(model, "_keep_in_fp32_modules", None) or ():    # as from_pretrained keeps them (BLIP-2)
        part = getattr(model, name, None)
        if part is None:            # a text-model pattern (Mistral Large 4's indexer.weights_proj): not the tower's
            continue
        if isinstance(part, torch.nn.Parameter):
            part.data = part.data.float()
        else:
            part.float()
    if case.get("attention") == "flash_attention_2":
        for sub in (model.config, getattr(model.config, "vision_config", None),
                    getattr(model.config, "perceiver_config", None)):
            if sub is not None:
                sub._attn_implementation = "flash_attention_2"
    if case.get("checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _pooled(out):
    """Fuyu's get_image_features returns the patch embeddings as last_hidden_state only."""
    out.pooler_output = out.last_hidden_state
    return out


def trace_case(case: dict) -> dict:
    raw = config(case)
    model = _model(case, raw)
    if case["model"] == "fuyu":      # the processor's flattened patches: float32 (bf16 for a bf16 model)
        patches = case["patches"]
        pix = torch.randn(1, patches, 30 * 30 * 3, dtype=torch.float32 if case.get("autocast") else torch.bfloat16)
        inputs = (pix,)
        forward = lambda: _pooled(model.get_image_features(pixel_values=pix, return_dict=True))  # noqa: E731
    elif case["model"] in ("idefics3", "smolvlm", "idefics2"):       # one sample of `tiles` crops
        size = IDEFICS3_VISION["image_size"]
        pix = torch.randn(1, case["tiles"], 3, size, size, dtype=torch.bfloat16)
        inputs, forward = (pix,), lambda: model.get_image_features(pixel_values=pix, return_dict=True)
        patches = case["tiles"] * (size // IDEFICS3_VISION["patch_size"]) ** 2
    elif case["model"] == "glm4v":      # packed patches of 2 x 14 x 14 x 3 pixels, one grid_thw row an image
        g, vc = case["grid"], raw["vision_config"]
        grid = torch.tensor([[1, g, g]] * case["tiles"])
        patches = case["tiles"] * g * g
        pix = torch.randn(patches, 3 * vc["temporal_patch_size"] * vc["patch_size"] ** 2, dtype=torch.bfloat16)
        inputs = (pix, grid)
        forward = lambda: model.get_image_features(pixel_values=pix, image_grid_thw=grid,  # noqa: E731
                                                   return_dict=True)
    elif case["model"] == "florence2":
        size = case["image_size"]
        pix = torch.randn(case["tiles"], 3, size, size, dtype=torch.bfloat16)
        inputs, forward = (pix,), lambda: model.get_image_features(pixel_values=pix, return_dict=True)
        patches = case["tiles"] * (size // 4) ** 2
    elif case["model"] == "lfm2_vl":     # Lfm2VlImageProcessor's output: flattened patches, their grid, the mask
        grids, p = case["grids"], SIGLIP2["patch_size"]
        most = max(r * c for r, c in grids)
        pix = torch.randn(len(grids), most, 3 * p * p, dtype=torch.bfloat16)
        shapes = torch.tensor(grids)
        mask = torch.tensor([[1] * (r * c) + [0] * (most - r * c) for r, c in grids])
        inputs = (pix, shapes, mask)
        forward = lambda: model.get_image_features(pixel_values=pix, spatial_shapes=shapes,  # noqa: E731
                                                   pixel_attention_mask=mask, return_dict=True)
        patches = sum(r * c for r, c in grids)
    elif case["model"] in ("qwen2_audio", "voxtral"):     # `tiles` clips of fp32 log-mel features
        a = raw["audio_config"]
        feats = torch.randn(case["tiles"], a["num_mel_bins"], 2 * a["max_source_positions"], dtype=torch.float32)
        inputs = (feats,)
        if case["model"] == "voxtral":
            forward = lambda: model.get_audio_features(input_features=feats, return_dict=True)  # noqa: E731
        else:
            # Qwen2AudioForConditionalGeneration.forward: audio_tower (no padding: no mask) and the projector
            def forward():
                out = model.model.audio_tower(feats)
                out.pooler_output = model.model.multi_modal_projector(out.last_hidden_state)
                return out
        patches = case["tiles"] * a["max_source_positions"]
    elif case["model"] == "instructblip":      # `tiles` images, each with its own `instruction` Q-Former tokens
        size = raw["vision_config"]["image_size"]
        pix = torch.randn(case["tiles"], 3, size, size, dtype=torch.bfloat16)
        ids = torch.ones(case["tiles"], case["instruction"], dtype=torch.long)
        inputs = (pix, ids)
        forward = lambda: model.get_image_features(pixel_values=pix, qformer_input_ids=ids,  # noqa: E731
                                                   return_dict=True)
        patches = case["tiles"] * (size // raw["vision_config"]["patch_size"]) ** 2
    elif case["model"] in ("cohere2_vision", "blip-2", "got_ocr2", "aya_vision", "video_llava",
                           "deepseek_vl", "vipllava"):
        vc = raw["vision_config"]
        size = vc["image_size"]
        pix = torch.randn(case["tiles"], 3, size, size, dtype=torch.bfloat16)
        inputs, forward = (pix,), lambda: model.get_image_features(pixel_values=pix, return_dict=True)
        patches = case["tiles"] * (size // vc["patch_size"]) ** 2
    else:
        sizes = case["images"]
        hmax, wmax = max(h for h, _ in sizes), max(w for _, w in sizes)
        pix = torch.randn(len(sizes), 3, hmax, wmax, dtype=torch.bfloat16)
        image_sizes = torch.tensor(sizes)
        extra = ({"vision_feature_layer": raw["vision_feature_layer"]}
                 if case["model"] in ("mistral3", "mistral_large4") else {})
        inputs = (pix, image_sizes)
        forward = lambda: model.get_image_features(pixel_values=pix, image_sizes=image_sizes,  # noqa: E731
                                                   return_dict=True, **extra)
        patches = sum((h // PIXTRAL["patch_size"]) * (w // PIXTRAL["patch_size"]) for h, w in sizes)
    with flash_attention_2() if case.get("attention") == "flash_attention_2" else contextlib.nullcontext(), \
            torch.autocast("cpu", dtype=torch.bfloat16) if case.get("autocast") else contextlib.nullcontext():
        saved = saved_after_forward(model, inputs, forward)
    tower = sum(p.numel() for n, p in model.named_parameters()
                if not n.startswith(("language_model.", "text_model.", "lm_head.", "model.language_model.")))
    return {**case, "config": raw, "patches": patches, "saved_bytes_forward_end": saved,
            "tower_and_projector_params": tower}


def main() -> int:
    return print_trace("python -m tools.memtrace.vision_towers", CASES, trace_case)


if __name__ == "__main__":
    raise SystemExit(main())
