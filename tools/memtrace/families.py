"""The family grid: one small config per decoder family the engine counts beside Llama and GPT-2, traced on
FakeTensors (issue 20, item 3). Every block's saved set is traced on the real transformers code; the fixtures
(tools/memtrace/golden/families/<id>.json: the plan, the component bytes at the peak, the saved activations at
forward end) are what tests/test_family_grid.py holds the engine to, within 3 %, without torch.

The configs are small (4 layers, h 640-1024, a real family's field names and switches: OPT's ReLU and
pre-LayerNorm, Pythia's parallel residual and 25 % rotary, GPT-J's, CodeGen's and Phi-2's partial rotary with a
parallel block, Phi-2's head_dim 80); each family gets a full bf16 row with FlashAttention-2's profile, a bf16-mixed
LoRA row with adapter dropout and residual dropout, an fp32-weight autocast row with eager attention and a full bf16
row with gradient checkpointing.

    python -m tools.memtrace.families            # trace all rows and (re)write the fixtures (make trace-families)
    python -m tools.memtrace.families opt-       # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import GPU, run_grid, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "families")

CONFIGS = {
    # facebook/opt-125m's layout (do_layer_norm_before, ReLU, learned positions), 4 layers
    "opt": {"model_type": "opt", "hidden_size": 768, "ffn_dim": 3072, "num_attention_heads": 12,
            "num_hidden_layers": 4, "vocab_size": 50272, "max_position_embeddings": 2048,
            "word_embed_proj_dim": 768, "do_layer_norm_before": True, "dropout": 0.0, "attention_dropout": 0.0,
            "activation_function": "relu", "enable_bias": True, "tie_word_embeddings": True},
    # EleutherAI/pythia-160m's layout: parallel residual, rotary_pct 0.25, untied embed_out
    "neox": {"model_type": "gpt_neox", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
             "num_hidden_layers": 4, "vocab_size": 50304, "max_position_embeddings": 2048, "rotary_pct": 0.25,
             "use_parallel_residual": True, "hidden_act": "gelu", "attention_dropout": 0.0, "hidden_dropout": 0.0,
             "tie_word_embeddings": False},
    # EleutherAI/gpt-j-6b's layout: head_dim 256 with rotary_dim 64, gelu_new, parallel block
    "gptj": {"model_type": "gptj", "n_embd": 1024, "n_head": 4, "n_layer": 4, "vocab_size": 50400,
             "n_positions": 2048, "rotary_dim": 64, "n_inner": None, "activation_function": "gelu_new",
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": False},
    # microsoft/phi-2's layout: head_dim 80, partial_rotary_factor 0.4, gelu_new, parallel block
    "phi": {"model_type": "phi", "hidden_size": 640, "intermediate_size": 2560, "num_attention_heads": 8,
            "num_key_value_heads": 8, "num_hidden_layers": 4, "vocab_size": 51200, "max_position_embeddings": 2048,
            "partial_rotary_factor": 0.4, "hidden_act": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attention_dropout": 0.0, "qk_layernorm": False, "tie_word_embeddings": False},
    # bigcode/starcoder2-3b's layout: GQA, biased LayerNorm and linears, c_fc/c_proj tanh-GELU MLP
    "starcoder2": {"model_type": "starcoder2", "hidden_size": 768, "intermediate_size": 3072,
                   "num_attention_heads": 12, "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 49152,
                   "max_position_embeddings": 4096, "use_bias": True, "norm_epsilon": 1e-05,
                   "hidden_act": "gelu_pytorch_tanh", "residual_dropout": 0.0, "embedding_dropout": 0.0,
                   "attention_dropout": 0.0, "sliding_window": None, "tie_word_embeddings": True},
    # stabilityai/stablelm-2-1_6b's layout: LayerNorm, partial_rotary_factor 0.25, q/k/v biases, sequential residual
    "stablelm": {"model_type": "stablelm", "hidden_size": 768, "intermediate_size": 2048, "num_attention_heads": 12,
                 "num_key_value_heads": 12, "num_hidden_layers": 4, "vocab_size": 50304,
                 "partial_rotary_factor": 0.25, "use_qkv_bias": True, "qk_layernorm": False,
                 "use_parallel_residual": False, "hidden_dropout": 0.0, "attention_dropout": 0.0,
                 "tie_word_embeddings": False},
    # allenai/OLMo-1B-hf's layout: weightless LayerNorms (OlmoLayerNorm), SwiGLU
    "olmo": {"model_type": "olmo", "hidden_size": 768, "intermediate_size": 2048, "num_attention_heads": 12,
             "num_key_value_heads": 12, "num_hidden_layers": 4, "vocab_size": 50304, "clip_qkv": None,
             "tie_word_embeddings": False},
    # CohereForAI/c4ai-command-r's layout: one LayerNorm per parallel block, GQA, logit_scale, tied head
    "cohere": {"model_type": "cohere", "hidden_size": 768, "intermediate_size": 2048, "num_attention_heads": 12,
               "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 32000, "use_qk_norm": False,
               "logit_scale": 0.0625, "tie_word_embeddings": True},
    # microsoft/Phi-3-mini-4k-instruct's layout: fused qkv_proj and gate_up_proj, GQA here (Phi-3-small/medium)
    "phi3": {"model_type": "phi3", "hidden_size": 768, "intermediate_size": 2048, "num_attention_heads": 12,
             "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 32064, "max_position_embeddings": 4096,
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0, "partial_rotary_factor": 1.0,
             "tie_word_embeddings": False},
    # bigcode/starcoderbase-1b's layout (GPT-BigCode): multi-query attention, fused c_attn, tanh-GELU
    "bigcode": {"model_type": "gpt_bigcode", "n_embd": 768, "n_head": 12, "n_layer": 4, "n_inner": 3072,
                "vocab_size": 49152, "n_positions": 2048, "multi_query": True,
                "activation_function": "gelu_pytorch_tanh", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                "attn_pdrop": 0.0},
    # Qwen/Qwen3-0.6B's layout: per-head q/k RMSNorms (Qwen3RMSNorm: weight * hs.to(input_dtype)), GQA, head_dim 128
    "qwen3": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
              "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 4, "vocab_size": 151936,
              "max_position_embeddings": 40960, "attention_dropout": 0.0, "tie_word_embeddings": True},
    # tiiuae/falcon-7b's layout: multi_query (one K/V head in the fused query_key_value), parallel_attn (one
    # LayerNorm feeds attention and MLP), no biases, GELU, head_dim 64, tied head
    "falcon": {"model_type": "falcon", "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 16,
               "num_hidden_layers": 4, "vocab_size": 65024, "multi_query": True, "parallel_attn": True,
               "new_decoder_architecture": False, "bias": False, "alibi": False, "activation": "gelu",
               "hidden_dropout": 0.0, "attention_dropout": 0.0, "max_position_embeddings": 2048,
               "tie_word_embeddings": True},
    # tiiuae/falcon-40b's layout: new_decoder_architecture (ln_attn and ln_mlp, grouped K/V: num_kv_heads 8 of 128
    # heads, here 4 of 16), parallel block, no biases, untied head
    "falcon40b": {"model_type": "falcon", "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 16,
                  "num_kv_heads": 4, "num_hidden_layers": 4, "vocab_size": 65024, "new_decoder_architecture": True,
                  "parallel_attn": True, "bias": False, "alibi": False, "activation": "gelu", "hidden_dropout": 0.0,
                  "attention_dropout": 0.0, "max_position_embeddings": 2048, "tie_word_embeddings": False},
    # google/gemma-4-E2B's text layout (Gemma4TextConfig): sliding layers of head_dim 256, full-attention layers
    # of global_head_dim 512 (Gemma4TextConfig.__post_init__'s per_layer_config), one KV head, the last 2 of 4
    # layers reusing the K/V of the last earlier layer of their type (num_kv_shared_layers) with the double-wide
    # MLP, per-layer inputs (hidden_size_per_layer_input 128 of a 32768-row table), final logit soft-capping 30,
    # tied head
    "gemma4": {"model_type": "gemma4_text", "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512,
               "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
               "sliding_window": 512, "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
               "hidden_size_per_layer_input": 128, "vocab_size": 32768, "vocab_size_per_layer_input": 32768,
               "final_logit_softcapping": 30.0, "attention_dropout": 0.0, "max_position_embeddings": 4096,
               "tie_word_embeddings": True},
    # MiniMaxAI/MiniMax-Text-01's layout (MiniMaxConfig): lightning (linear) attention layers with qkv_proj, SiLU,
    # block_size 256 decay blocks, a gated RMSNorm'd output, between softmax GQA layers (head_dim 128, kv 2 of 6
    # heads here), a Mixtral MoE (4 experts, top-2) in every layer, post-norm residuals
    "minimax": {"model_type": "minimax", "hidden_size": 768, "intermediate_size": 1024, "num_hidden_layers": 4,
                "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 32000,
                "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
                "block_size": 256, "num_local_experts": 4, "num_experts_per_tok": 2, "hidden_act": "silu",
                "attention_dropout": 0.0, "max_position_embeddings": 4096, "router_jitter_noise": 0.0,
                "tie_word_embeddings": False},
    # EleutherAI/gpt-neo-125m's layout: global and local (window 256) attention alternating, no q/k scaling, gelu_new
    "gpt_neo": {"model_type": "gpt_neo", "hidden_size": 768, "num_heads": 12, "num_layers": 4,
                "attention_types": [[["global", "local"], 2]], "window_size": 256, "intermediate_size": None,
                "vocab_size": 50257, "max_position_embeddings": 2048, "activation_function": "gelu_new",
                "resid_dropout": 0.0, "embed_dropout": 0.0, "attention_dropout": 0.0, "tie_word_embeddings": True},
    # mosaicml/mpt-7b's layout: ALiBi (no positions), no biases, fused Wqkv, expansion_ratio 4, tied head
    "mpt": {"model_type": "mpt", "d_model": 1024, "n_heads": 16, "n_layers": 4, "expansion_ratio": 4,
            "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True, "resid_pdrop": 0.0, "emb_pdrop": 0.0,
            "attn_config": {"alibi": True, "attn_pdrop": 0, "qk_ln": False, "clip_qkv": None},
            "tie_word_embeddings": True},
    # Salesforce/codegen-350M-mono's layout: fused qkv_proj, rotary_dim 32 of head_dim 64, parallel block, gelu_new
    "codegen": {"model_type": "codegen", "n_embd": 1024, "n_head": 16, "n_layer": 4, "rotary_dim": 32,
                "n_inner": None, "vocab_size": 51200, "n_positions": 2048, "n_ctx": 2048,
                "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
                "tie_word_embeddings": False},
    # Salesforce/ctrl's layout (h 1280, dff 8192, 48 layers, vocab 246534) made small: sinusoidal positions
    # (a buffer), pre-LN blocks, biased q/k/v/dense, ReLU MLP, tied head with a bias
    "ctrl": {"model_type": "ctrl", "n_embd": 768, "n_head": 12, "n_layer": 4, "dff": 3072, "vocab_size": 32000,
             "n_positions": 1024, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "tie_word_embeddings": True},
    # openai-community/openai-gpt's layout: post-LN blocks, Conv1D c_attn / c_proj, GELU, learned positions (1024
    # here: the rows run s 1024)
    "openai": {"model_type": "openai-gpt", "n_embd": 768, "n_head": 12, "n_layer": 4, "vocab_size": 40478,
               "n_positions": 1024, "afn": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
               "tie_word_embeddings": True},
    # abeja/gpt-neox-japanese-2.7b's layout made small: fused query_key_value, full rotary, GELU, biased LayerNorms
    "neoxjp": {"model_type": "gpt_neox_japanese", "hidden_size": 768, "num_attention_heads": 12,
               "num_hidden_layers": 4, "intermediate_multiple_size": 4, "vocab_size": 32000,
               "max_position_embeddings": 2048, "hidden_act": "gelu", "attention_dropout": 0.0,
               "hidden_dropout": 0.0, "tie_word_embeddings": True},
    # jhu-clsp/ettin-decoder-150m's layout (ModernBertDecoderConfig): LayerNorms without bias, no attn_norm in
    # layer 0, GeGLU Wi (h -> 2 x 1152) / Wo, sliding (128) and full layers, embedding LayerNorm, dense + GELU +
    # LayerNorm prediction head, decoder tied with a bias
    "modernbert": {"model_type": "modernbert-decoder", "hidden_size": 768, "intermediate_size": 1152,
                   "num_hidden_layers": 4, "num_attention_heads": 12, "vocab_size": 50368,
                   "max_position_embeddings": 8192, "hidden_activation": "gelu", "local_attention": 128,
                   "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
                   "norm_bias": False, "attention_bias": False, "mlp_bias": False, "decoder_bias": True,
                   "attention_dropout": 0.0, "embedding_dropout": 0.0, "mlp_dropout": 0.0,
                   "tie_word_embeddings": True},
    # kyutai/moshiko's text model (MoshiForCausalLM) made small: fp32 RMSNorms, q/k/v/o_proj as MoshiLinear, the
    # gating MLP fc1 (h -> ffn_dim) / fc2 (ffn_dim / 2 -> h) with SiLU, untied lm_head
    "moshi": {"model_type": "moshi", "hidden_size": 768, "num_attention_heads": 12, "num_key_value_heads": 12,
              "head_dim": 64, "num_hidden_layers": 4, "ffn_dim": 4096, "vocab_size": 32000,
              "max_position_embeddings": 3000, "sliding_window": 3000, "hidden_act": "silu", "num_codebooks": 8,
              "attention_dropout": 0.0, "tie_word_embeddings": False},
    # facebook/opt-350m's layout: post-LN layers (do_layer_norm_before false, no final_layer_norm), word embeddings
    # of 512 projected in and out (project_in / project_out), ReLU, learned positions, 4 layers
    "opt350": {"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_attention_heads": 16,
               "num_hidden_layers": 4, "vocab_size": 50272, "max_position_embeddings": 2048,
               "word_embed_proj_dim": 512, "do_layer_norm_before": False, "dropout": 0.0,
               "attention_dropout": 0.0, "activation_function": "relu", "enable_bias": True,
               "tie_word_embeddings": True},
    # meta-llama/Llama-3.2-11B-Vision's layout (MllamaConfig), the language model scaled down: a cross-attention
    # decoder layer (MllamaCrossAttentionDecoderLayer) at index 3 of 5 (the checkpoint's every 5th from 3), GQA 16/4,
    # vocab_size + 8 embedding rows, untied head; a tiny frozen vision tower and projector (counted, never run: the
    # rows feed text only, so MllamaTextModel.forward skips the cross-attention layer)
    "mllama": {"model_type": "mllama", "image_token_index": 128256,
               "text_config": {"model_type": "mllama_text_model", "hidden_size": 1024, "intermediate_size": 3584,
                               "num_hidden_layers": 5, "num_attention_heads": 16, "num_key_value_heads": 4,
                               "vocab_size": 128256, "cross_attention_layers": [3], "dropout": 0.0,
                               "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False},
               "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 64, "intermediate_size": 128,
                                 "num_hidden_layers": 1, "num_global_layers": 1, "attention_heads": 2,
                                 "vision_output_dim": 128, "intermediate_layers_indices": [0], "image_size": 56,
                                 "patch_size": 14, "max_num_tiles": 2,
                                 "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]]}},
    # mistralai/Mistral-Large-4's layout (MistralLarge4Config, modeling_mistral_large4.py), the language model scaled
    # down: latent attention without a q latent (kv_lora_rank, rope / nope split, v_head_dim = the q head dim),
    # per-head softmax scaling, the DSA indexer in every layer (index_topk above seq_len: every key kept), NoPE at
    # layer 3 (every 4th), a dense first layer then 4 routed experts (top-2) and a shared one, untied head; the
    # Pixtral tower and projector tiny and frozen (counted, never run: the rows feed text only)
    "mistral_large4": {"model_type": "mistral_large4", "image_token_index": 10, "spatial_merge_size": 2,
                       "text_config": {"model_type": "mistral_large4_text", "hidden_size": 512,
                                       "intermediate_size": 1536, "moe_intermediate_size": 256,
                                       "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
                                       "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
                                       "first_k_dense_replace": 1, "kv_lora_rank": 128, "qk_rope_head_dim": 32,
                                       "qk_nope_head_dim": 32, "v_head_dim": 64, "vocab_size": 32768,
                                       "index_head_dim": 64, "index_n_heads": 4, "index_topk": 4096,
                                       "max_position_embeddings": 4096, "final_logit_softcapping": 30.0,
                                       "tie_word_embeddings": False},
                       "vision_config": {"model_type": "pixtral", "hidden_size": 64, "intermediate_size": 128,
                                         "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 32,
                                         "image_size": 64, "patch_size": 16}},
    # MiniMax-M3's language model (MiniMaxM3VLForCausalLM, modeling_minimax_m3_vl.py), scaled down: GQA 8/2 of 64
    # with Gemma-style per-head q/k norms, a dense first layer (gate_up_proj of dense_intermediate_size), then 4
    # routed experts (top-2, sigmoid routing, gpt-oss's clamped gate) and a shared one; full attention layers
    "minimax_m3": {"model_type": "minimax_m3_vl_text", "hidden_size": 512, "num_attention_heads": 8,
                   "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 4, "num_local_experts": 4,
                   "num_experts_per_tok": 2, "intermediate_size": 256, "shared_intermediate_size": 256,
                   "dense_intermediate_size": 1024, "vocab_size": 32768, "max_position_embeddings": 4096,
                   "layer_types": ["full_attention"] * 4, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
                   "tie_word_embeddings": False},
    # baidu/ERNIE-4.5-VL's layout (Ernie4_5_VLMoeConfig), the language model scaled down: GQA 4/2 of 128 (the
    # 3-D rope's mrope_section fills 128 dims), a dense first
    # layer, then text experts (4, top-2, of moe_intermediate_size[0]) with a shared expert, and vision experts (of
    # moe_intermediate_size[1]) that only image tokens reach; a tiny frozen vision tower and resampler (counted, never
    # run: the rows feed text only, so Ernie4_5_VLMoeMoeBlock runs text_moe alone)
    "ernie_vl": {"model_type": "ernie4_5_vl_moe",
                 "text_config": {"model_type": "ernie4_5_vl_moe_text", "hidden_size": 512, "intermediate_size": 1024,
                                 "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                                 "vocab_size": 32768, "moe_k": 2, "moe_num_experts": 4, "moe_num_shared_experts": 1,
                                 "moe_intermediate_size": [256, 128],
                                 "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
                                 "max_position_embeddings": 4096, "tie_word_embeddings": False},
                 "vision_config": {"model_type": "ernie4_5_vl_moe_vision", "depth": 1, "hidden_size": 64,
                                   "intermediate_size": 128, "num_heads": 2, "patch_size": 14,
                                   "spatial_merge_size": 2, "temporal_merge_size": 2}},
}
# MiniMax-M3 with its sparse-attention layers (layer_types minimax_m3_sparse at 1 and 3): the lightning indexer
# (index_n_heads = the KV heads) picks index_topk_blocks key blocks of index_block_size per query
CONFIGS["minimax_m3sp"] = {**CONFIGS["minimax_m3"], "index_n_heads": 2, "index_head_dim": 64, "index_block_size": 64,
                           "index_topk_blocks": 4, "index_local_blocks": 1,
                           "layer_types": ["full_attention", "minimax_m3_sparse"] * 2}
# the same Mllama fed two images through its frozen tower (trace.py image_inputs: the projected states and a
# cross_attention_mask of ones): image_size 224 / patch 14 -> 257 patches a tile, 4 tiles, 2 x 4 x 257 = 2056
# vision tokens a sample, more than the text (as Llama 3.2 Vision's 4 x 1025 per image)
CONFIGS["mllamaimg"] = {**CONFIGS["mllama"], "vision_config": {**CONFIGS["mllama"]["vision_config"], "image_size": 224,
                                                                "max_num_tiles": 4}}
# HuggingFaceM4/idefics-9b's layout (IdeficsConfig), scaled down: a Llama decoder (MHA, no bias) with a gated
# cross-attention layer (IdeficsGatedCrossAttentionLayer: tanh-gated cross-attention over the CLIP states and a
# tanh-gated Llama MLP) before every cross_layer_interval-th layer, no resampler; freeze_text_layers (the
# checkpoint's value): the decoder layers, the final norm and embed_tokens frozen by the modelling code. Fed two
# images' tower output (trace.py idefics_image_inputs): 2 x ((224 / 14)^2 + 1) = 514 vision states a sample
CONFIGS["idefics"] = {"model_type": "idefics", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
                      "num_attention_heads": 16, "cross_layer_interval": 2, "vocab_size": 32000,
                      "additional_vocab_size": 0, "dropout": 0.0, "max_position_embeddings": 4096,
                      "tie_word_embeddings": False, "use_resampler": False,
                      "vision_config": {"embed_dim": 256, "intermediate_size": 512, "num_hidden_layers": 1,
                                        "num_attention_heads": 4, "image_size": 224, "patch_size": 14}}
# the same with idefics-80b's qk_layer_norms (IdeficsRMSNorm over head_dim on the gated layers' q and k) and
# alpha_type "vector" (h-wide tanh gates)
CONFIGS["idefics-qk"] = {**CONFIGS["idefics"], "qk_layer_norms": True, "alpha_type": "vector"}
# and with the released checkpoints' perceiver resampler (use_resampler; frozen with the tower, vision.trainable's
# default): 2 images x 64 latents = 128 vision states a sample
CONFIGS["idefics-res"] = {**CONFIGS["idefics"], "use_resampler": True,
                          "perceiver_config": {"resampler_n_latents": 64, "resampler_depth": 2, "resampler_n_heads": 4,
                                               "resampler_head_dim": 32, "qk_layer_norms_perceiver": False}}
IMAGE_TOKENS = {"mllamaimg": 2056, "idefics": 514, "idefics-qk": 514, "idefics-res": 128}
# modelling code without FlashAttention-2 (_supports_flash_attn False): their rows run SDPA. Mistral Large 4's
# sparse attention turns the indexer's top-k into a boolean mask for SDPA (flash-mla kernels not wired up)
NO_FLASH = {"mistral_large4", "minimax_m3", "minimax_m3sp"}
# LoRA targets per family: every linear of the block
TARGETS = {**{fam: ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"] for fam in ("opt", "opt350")},
           "neox": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
           "gptj": ["q_proj", "k_proj", "v_proj", "out_proj", "fc_in", "fc_out"],
           "phi": ["q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"],
           "starcoder2": ["q_proj", "k_proj", "v_proj", "o_proj", "c_fc", "c_proj"],
           **{fam: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
              for fam in ("stablelm", "olmo", "cohere", "qwen3", "gemma4")},
           "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
           "bigcode": ["c_attn", "c_proj", "c_fc"],
           "gpt_neo": ["q_proj", "k_proj", "v_proj", "out_proj", "c_fc", "c_proj"],
           "mpt": ["Wqkv", "out_proj", "up_proj", "down_proj"],
           "codegen": ["qkv_proj", "out_proj", "fc_in", "fc_out"],
           "modernbert": ["q_proj", "k_proj", "v_proj", "Wo", "Wi"],
           "moshi": ["fc1", "fc2"],                 # q/k/v/o_proj are MoshiLinear wrappers, not nn.Linear
           "ctrl": ["Wq", "Wk", "Wv", "dense"],         # peft's suffix match takes "0" / "2" for h.0 / h.2
           "openai": ["c_attn", "c_proj", "c_fc"],
           "neoxjp": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
           # the language model's (build.py lora_targets: the frozen tower's q/k/v/o_proj get none)
           **{fam: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
              for fam in ("mllama", "mllamaimg", "idefics", "idefics-qk", "idefics-res")},
           "ernie_vl": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
           **{fam: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"]
              for fam in ("minimax_m3", "minimax_m3sp")},
           "mistral_large4": ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "gate_proj", "up_proj",
                              "down_proj"],
           "minimax": ["q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "out_proj", "output_gate"],
           **{fam: ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"] for fam in ("falcon", "falcon40b")}}
# the config's residual dropout switch (the LoRA row turns it on, as the real checkpoints ship it). Not for
# StarCoder2's residual_dropout, StableLM's hidden_dropout and Phi-3's resid_pdrop: the engine's Llama-shaped
# builder does not read them yet (model/llama.py), so those rows trace without; OLMo and Cohere have none
DROPOUT = {"opt": "dropout", "opt350": "dropout", "neox": "hidden_dropout", "gptj": "resid_pdrop", "phi": "resid_pdrop",
           "bigcode": "resid_pdrop", "falcon": "hidden_dropout", "falcon40b": "hidden_dropout",
           "codegen": "resid_pdrop", "gpt_neo": "resid_dropout",
           # openai-community/openai-gpt ships resid, attn and embd dropout 0.1 each (the engine reads resid_pdrop)
           "openai": ("resid_pdrop", "attn_pdrop", "embd_pdrop"),
           # abeja/gpt-neox-japanese-2.7b: attention_dropout 0.1, hidden_dropout 0.0
           "neoxjp": "attention_dropout", "ctrl": "resid_pdrop"}


def _plan(fam: str, method: str, precision: str, attention: str, mb: int, seq: int, dropout: float = 0.0,
          ckpt: str = "none") -> dict:
    model = dict(CONFIGS[fam])
    if dropout:
        for field in (DROPOUT[fam],) if isinstance(DROPOUT[fam], str) else DROPOUT[fam]:
            model[field] = dropout
    d = {"schema": 1, "model": model, "gpu": GPU, "framework": "single", "gpus_per_node": 1, "nodes": 1,
         "zero_stage": 0, "precision": precision, "optimizer": "adamw", "micro_batch_size": mb,
         "gradient_accumulation_steps": 1, "seq_len": seq, "activation_checkpointing": ckpt,
         "attention": attention, "loss": "standard", "method": method}
    if fam in IMAGE_TOKENS:
        d["vision"] = {"tokens_per_sample": IMAGE_TOKENS[fam]}
    if method == "lora":
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.05, "targets": TARGETS[fam]}
    return d


# the families whose transformers class has only its own eager attention (modeling_mpt.py MptAttention,
# modeling_openai.py Attention._attn, modeling_gpt_neox_japanese.py GPTNeoXJapaneseAttention._attn: no
# AttentionInterface, no _supports_sdpa / _supports_flash_attn): their rows run eager where the others run flash
EAGER_ONLY = ("mpt", "openai", "neoxjp")
# *PreTrainedModel without supports_gradient_checkpointing ("... does not support activation checkpointing"):
# modeling_ctrl.py, modeling_openai.py, modeling_gpt_neox_japanese.py; no checkpointing row
NO_GC = ("ctrl", "openai", "neoxjp")


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        # Mllama's modelling code has no FlashAttention-2 (_supports_flash_attn False: its cross-attention
        # takes a 4-D mask): fed images, the rows run SDPA
        fl = "eager" if fam in EAGER_ONLY else "sdpa" if fam in IMAGE_TOKENS or fam in NO_FLASH else "flash"
        out.append({"id": f"{fam}-full-pure-{fl}-s512-b2", **_plan(fam, "full", "bf16-pure", fl, 2, 512)})
        out.append({"id": f"{fam}-lora-mixed-{fl}-s1024-b2-drop",
                    **_plan(fam, "lora", "bf16-mixed", fl, 2, 1024, dropout=0.1 if fam in DROPOUT else 0.0)})
        out.append({"id": f"{fam}-full-mixed-eager-s256-b2", **_plan(fam, "full", "bf16-mixed", "eager", 2, 256)})
        if fam not in NO_GC:
            out.append({"id": f"{fam}-full-pure-{fl}-gc-s1024-b2",
                        **_plan(fam, "full", "bf16-pure", fl, 2, 1024, ckpt="full")})
    return out


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=2), OUT)
