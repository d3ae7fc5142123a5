"""The Llama lineage as data: per model_type, the switches its transformers 5.24 modelling file hard-codes,
and the config.json field that turns each of the others on (read by its own name, with the class default
for a config.json that omits it). `llama.py` builds every one of these from the same code, so a new model
in an existing family is a row here, not code.

A switch is either a constant (the modelling file fixes it) or ``(field, default)``: the config field and
the default of its configuration class (src/transformers/models/<x>/configuration_<x>.py). Sources per row:
src/transformers/models/<model_type>/modeling_<model_type>.py of transformers 5.24.0, the module tree checked
against the meta-device build in tests/data/architectures.json (tools/archgen).
"""
from __future__ import annotations

from types import MappingProxyType

BASE = MappingProxyType({
    "tie": ("tie_word_embeddings", False),
    "qkv_bias": ("attention_bias", False),    # q/k/v projections
    "o_bias": ("attention_bias", False),      # o_proj
    "mlp_bias": False,                        # gate/up/down (or c_fc/c_proj)
    "attn": "separate",                       # "separate" q/k/v, "fused" qkv_proj (Phi-3), "mla" (DeepSeek)
    "qk_norm": "",                            # "" | "head" (per head_dim) | "full" (over the projection)
    "qk_norm_names": ("q_norm", "k_norm"),
    "qk_norm_bias": False,                    # the per-head q/k norms are LayerNorms with a bias (Persimmon)
    "qk_norm_on": True,                       # or (field, default): the norm exists only when the flag is on
    "mlp": "gated",                           # "gated" gate/up/down, "fused" gate_up_proj, "plain" (no gate)
    "mlp_names": ("gate_proj", "up_proj", "down_proj"),
    "norm": "rms",                            # "rms" weight, "ln" weight + bias, "none" (no parameters)
    "block_norms": ("input_layernorm", "post_attention_layernorm"),   # registration order
    "extra_norms": ((), False),               # (names, switch): more block norms when the flag is on
    "moe": "",                                # "" | "mixtral" | "deepseek" | "qwen2_moe" | "gpt_oss" | "granitemoe"
    "sinks": False,                           # gpt-oss: one learned sink logit per head; "swa": sliding layers only
    "v_head_dim": (),                         # (field, class default) sizing v_proj's heads when not head_dim
    "shared_experts": 0,                      # the class's shared-expert count when the config omits it
    "swa_kv": 1,                              # key/value heads of sliding-window layers, times num_key_value_heads
    "swa_every": 0,                           # layer_types' class default: full at 0 and every n-th, else sliding
    "family": "llama",                        # the activation profile (memory/blocks.py)
    "lm_head_bias": False,
    "mlp_extra": (),                          # learned scalars of the MLP's activation (Apertus' xIELU)
    "mlp_module": "mlp",                      # the block's MLP module name (Llama 4: feed_forward)
    "dense_inter": "",                        # the field sizing dense MLPs of a MoE model, if not intermediate_size
    "first_dense": 0,                         # leading dense layers when the config says nothing
    "linear_attn": "",                        # "" | "fused" (Qwen3-Next) | "split" (Qwen3.5) | "lightning"
                                              # (MiniMax): hybrid.py
    "q_gate": False,                          # q_proj also projects the output gate (2 x heads x head_dim)
    "o_gate": False,                          # a separate self_attn.gate_proj (h -> heads x head_dim, no bias);
                                              # "g_proj": Laguna's, one gate per head unless gating is per-channel
    "refuse_if": "",                          # a config flag this builder does not model (refused when on)
    "head_dim": 0,                            # head_dim's class default when not hidden_size / heads
    "diff_lambdas": False,                    # DiffLlama: lambda_q1/k1/q2/k2 (head_dim each); its groupnorm has none
    "sub_norms": False,                       # BitNet: attn_sub_norm (h) before o_proj, ffn_sub_norm (I) before down
    "router_fp32": None,                      # the router's input upcast if not its MoE layout's (moe.ROUTER_FP32)
})

_GEMMA2_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm")
_OLMO2 = {"qk_norm": "full", "block_norms": ("post_attention_layernorm", "post_feedforward_layernorm")}
_GLM = {"qkv_bias": ("attention_bias", True), "o_bias": False, "mlp": "fused", "mlp_names": ("gate_up_proj", "down_proj")}

FAMILIES = {
    # Llama's block (modeling_llama.py: attention_bias on q/k/v/o, mlp_bias on the MLP)
    "llama": {"mlp_bias": ("mlp_bias", False)},
    "granite": {"mlp_bias": ("mlp_bias", False)},
    "exaone": {"mlp_bias": ("mlp_bias", False)},
    "iquestcoder": {"mlp_bias": ("mlp_bias", False)},
    "smollm3": {"tie": ("tie_word_embeddings", True), "mlp_bias": ("mlp_bias", False)},
    "cwm": {"qkv_bias": False, "o_bias": False, "mlp_bias": ("mlp_bias", False)},
    "helium": {"o_bias": False, "mlp_bias": ("mlp_bias", False)},
    "internlm3": {"qkv_bias": ("qkv_bias", False), "o_bias": ("bias", False), "mlp_bias": ("bias", False)},
    "mistral": {"qkv_bias": False, "o_bias": False},
    "ministral": {"qkv_bias": False, "o_bias": False},
    "ministral3": {"qkv_bias": False, "o_bias": False},
    "qwen2": {"qkv_bias": True, "o_bias": False},
    "seed_oss": {"qkv_bias": ("attention_bias", True), "o_bias": ("attention_out_bias", False),
                 "mlp_bias": ("mlp_bias", False)},
    "ernie4_5": {"tie": ("tie_word_embeddings", True), "qkv_bias": ("use_bias", False),
                 "o_bias": ("use_bias", False), "mlp_bias": ("use_bias", False)},
    # modeling_paddleocr_vl.py PaddleOCRDecoderLayer: ERNIE 4.5's block (use_bias on every linear)
    "paddleocr_vl_text": {"head_dim": 128, "tie": ("tie_word_embeddings", True), "qkv_bias": ("use_bias", False),
                          "o_bias": ("use_bias", False), "mlp_bias": ("use_bias", False)},
    # modeling_arcee.py: Llama's block with an ungated up/down ReLU² MLP
    "arcee": {"mlp": "plain", "mlp_names": ("up_proj", "down_proj"), "mlp_bias": ("mlp_bias", False)},
    # modeling_jais2.py: nn.LayerNorm (bias), ungated up/down MLP, attention_bias / mlp_bias default True
    "jais2": {"qkv_bias": ("attention_bias", True), "o_bias": ("attention_bias", True), "mlp_bias": ("mlp_bias", True),
              "mlp": "plain", "mlp_names": ("up_proj", "down_proj"), "norm": "ln"},
    # modeling_stablelm.py: nn.LayerNorm (bias), use_qkv_bias on q/k/v, per-head LayerNorms without bias
    # (qk_layernorm: heads x head_dim weights); use_parallel_residual drops a norm and is not modelled
    "stablelm": {"norm": "ln", "qkv_bias": ("use_qkv_bias", False), "o_bias": False, "qk_norm": "full",
                 "qk_norm_on": ("qk_layernorm", False), "qk_norm_names": ("q_layernorm", "k_layernorm"),
                 "refuse_if": "use_parallel_residual"},
    # modeling_hyperclovax.py: Llama's block with Peri-LN post_norm1/post_norm2 when use_post_norm (default on)
    "hyperclovax": {"mlp_bias": ("mlp_bias", False), "extra_norms": (("post_norm1", "post_norm2"),
                                                                     ("use_post_norm", True))},
    # modeling_nemotron.py: NemotronLayerNorm1P (weight and bias), ungated up/down ReLU² MLP, no biases
    "nemotron": {"norm": "ln", "mlp": "plain", "mlp_names": ("up_proj", "down_proj"), "mlp_bias": ("mlp_bias", False)},
    # modeling_exaone4.py: no biases, per-head q/k norm, norms after attention and after the MLP only
    "exaone4": {"qkv_bias": False, "o_bias": False, "qk_norm": "head",
                "block_norms": ("post_attention_layernorm", "post_feedforward_layernorm")},
    "qwen3": {"qk_norm": "head"},
    # modeling_apertus.py: per-head q/k norm, ungated up/down MLP whose xIELU holds alpha_p and alpha_n
    "apertus": {"qk_norm": "head", "mlp": "plain", "mlp_names": ("up_proj", "down_proj"),
                "mlp_extra": ("act_fn.alpha_p", "act_fn.alpha_n"), "mlp_bias": ("mlp_bias", False),
                "block_norms": ("attention_layernorm", "feedforward_layernorm")},
    # modeling_apertus1p5_text.py: Apertus' block
    "apertus1p5_text": {"qk_norm": "head", "mlp": "plain", "mlp_names": ("up_proj", "down_proj"),
                        "mlp_extra": ("act_fn.alpha_p", "act_fn.alpha_n"), "mlp_bias": ("mlp_bias", False),
                        "block_norms": ("attention_layernorm", "feedforward_layernorm")},
    # the language models of Qwen2-VL / Qwen2.5-VL (Qwen2 blocks, M-RoPE has no parameters) and Qwen3-VL
    "qwen2_vl_text": {"qkv_bias": True, "o_bias": False},
    "qwen2_5_vl_text": {"qkv_bias": True, "o_bias": False},
    "qwen3_vl_text": {"qk_norm": "head"},
    "hunyuan_v1_dense": {"qk_norm": "head", "qk_norm_names": ("query_layernorm", "key_layernorm")},
    "olmo2": _OLMO2,
    "olmo3": _OLMO2,
    # modeling_olmo.py OlmoLayerNorm: "LayerNorm but with no learnable weight or bias"
    "olmo": {"norm": "none"},
    # modeling_cohere.py: one input_layernorm feeds attention and MLP side by side (parallel block);
    # CohereLayerNorm has a weight only; q/k norm (use_qk_norm) is over (heads, head_dim)
    "cohere2": {"tie": ("tie_word_embeddings", True), "block_norms": ("input_layernorm",)},
    "cohere_compass_text": {"tie": ("tie_word_embeddings", True), "block_norms": ("input_layernorm",)},
    # modeling_cohere2_moe.py: Cohere 2's parallel block (one input_layernorm) with a sparse MLP in the
    # mlp_layer_types "sparse" layers; dense layers are prefix_dense_intermediate_size wide
    "cohere2_moe": {"head_dim": 128, "tie": ("tie_word_embeddings", True), "block_norms": ("input_layernorm",),
                    "moe": "cohere2_moe", "dense_inter": "prefix_dense_intermediate_size"},
    "cohere": {"tie": ("tie_word_embeddings", True), "block_norms": ("input_layernorm",), "qk_norm": "full",
               "qk_norm_on": ("use_qk_norm", False)},
    # modeling_starcoder2.py: nn.LayerNorm (bias), c_fc/c_proj GELU MLP, use_bias on every linear
    "starcoder2": {"tie": ("tie_word_embeddings", True), "qkv_bias": ("use_bias", True),
                   "o_bias": ("use_bias", True), "mlp_bias": ("use_bias", True), "mlp": "plain",
                   "mlp_names": ("c_fc", "c_proj"), "norm": "ln"},
    "glm": _GLM,
    # modeling_glm4.py: GLM's block with sandwich norms after attention and after the MLP
    "glm4": {**_GLM, "block_norms": ("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm",
                                     "post_mlp_layernorm")},
    # modeling_glm_ocr.py GlmOcrTextDecoderLayer: GLM-4's block with no bias anywhere
    "glm_ocr_text": {**_GLM, "qkv_bias": False, "block_norms": ("input_layernorm", "post_attention_layernorm",
                                                                "post_self_attn_layernorm", "post_mlp_layernorm")},
    "glm4v_text": {**_GLM, "qkv_bias": True, "block_norms": ("input_layernorm", "post_attention_layernorm",
                                                             "post_self_attn_layernorm", "post_mlp_layernorm")},
    "phi3": {"qkv_bias": False, "o_bias": False, "attn": "fused", "mlp": "fused",
             "mlp_names": ("gate_up_proj", "down_proj")},
    "gemma": {"tie": ("tie_word_embeddings", True), "family": "gemma"},
    "gemma2": {"tie": ("tie_word_embeddings", True), "family": "gemma", "block_norms": _GEMMA2_NORMS},
    # modeling_muse_glimmer.py MuseGlimmerTextDecoderLayer: Gemma 2's four centred RMSNorms (a weight each),
    # an output gate_proj beside o_proj, weightless q/k norm; the embedding's norm has no weight
    "muse_glimmer_text": {"head_dim": 128, "block_norms": _GEMMA2_NORMS, "o_gate": True},
    # modeling_vaultgemma.py: Gemma's block with input_layernorm and pre_feedforward_layernorm
    "vaultgemma": {"head_dim": 256, "tie": ("tie_word_embeddings", True), "family": "gemma",
                   "block_norms": ("input_layernorm", "pre_feedforward_layernorm")},
    "gemma3_text": {"tie": ("tie_word_embeddings", True), "family": "gemma", "block_norms": _GEMMA2_NORMS,
                    "qk_norm": "head"},
    # MoE (moe.py builds the sparse MLP)
    "mixtral": {"qkv_bias": False, "o_bias": False, "moe": "mixtral"},
    "qwen3_moe": {"qk_norm": "head", "moe": "mixtral"},
    # modeling_minimax.py: Mixtral's block with lightning attention in the linear_attention layers
    "minimax": {"qkv_bias": False, "o_bias": False, "moe": "mixtral", "linear_attn": "lightning"},
    "minimax_m2": {"qkv_bias": False, "o_bias": False, "qk_norm": "full", "moe": "mixtral"},
    "qwen2_moe": {"qkv_bias": ("qkv_bias", True), "o_bias": False, "moe": "qwen2_moe"},
    "granitemoe": {"moe": "granitemoe"},
    "granitemoeshared": {"moe": "granitemoeshared"},
    # modeling_granite_swa.py / modeling_granitemoe_swa.py: Granite (MoE, shared) with a learned sink per head
    "granite_swa": {"tie": ("tie_word_embeddings", True), "mlp_bias": ("mlp_bias", False), "sinks": True},
    "granitemoe_swa": {"moe": "granitemoeshared", "sinks": True},
    # modeling_nanochat.py: NanoChatRMSNorm has no weight; fc1/fc2 ReLU² MLP without biases
    "nanochat": {"norm": "none", "mlp": "plain", "mlp_names": ("fc1", "fc2")},
    # modeling_bitnet.py: Llama's block with attn_sub_norm and ffn_sub_norm
    "bitnet": {"sub_norms": True},
    # modeling_persimmon.py: biased fused query_key_value and dense, per-head biased q/k LayerNorms
    # (qk_layernorm, default on), biased dense_h_to_4h / dense_4h_to_h MLP, nn.LayerNorm
    "persimmon": {"qkv_bias": True, "o_bias": True, "attn": "fused", "qk_norm": "head", "qk_norm_bias": True,
                  "qk_norm_on": ("qk_layernorm", True), "qk_norm_names": ("q_layernorm", "k_layernorm"),
                  "mlp": "plain", "mlp_names": ("dense_h_to_4h", "dense_4h_to_h"), "mlp_bias": True, "norm": "ln"},
    # modeling_flint.py: per-head q/k norm, a sink per head, the kolibri MoE outside mlp_only_layers
    # (FlintConfig's default [0, 1]) every decoder_sparse_step-th layer
    "flint": {"head_dim": 128, "qk_norm": "head", "sinks": True, "moe": "kolibri", "first_dense": 2,
              "router_fp32": "forced"},     # FlintTopKRouter: F.linear(x.float(), w.float()) without autocast
    # modeling_diffllama.py: Llama's block with differential attention's four lambda vectors
    "diffllama": {"diff_lambdas": True},
    # modeling_kolibri1.py: GLM-4's sandwich norms, per-head q/k norm, no biases, a sparse MLP in every layer
    "kolibri1": {"head_dim": 128, "qkv_bias": False, "o_bias": False, "qk_norm": "head", "moe": "kolibri",
                 "block_norms": ("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm",
                                 "post_mlp_layernorm")},
    # modeling_dots1.py: per-head q/k norm, DeepSeek's MoE after first_k_dense_replace dense layers (default 0)
    "dots1": {"qk_norm": "head", "moe": "deepseek"},
    # modeling_flex_olmo.py: OLMoE's sparse block with OLMo 2's norms (after attention and MLP, q/k over the
    # projection)
    "flex_olmo": {"qk_norm": "full", "moe": "mixtral",
                  "block_norms": ("post_attention_layernorm", "post_feedforward_layernorm")},
    # modeling_exaone_moe.py: EXAONE 4's attention without post-norms; gate, experts and num_shared_experts x
    # moe_intermediate_size shared experts after first_k_dense_replace (default 1) dense layers
    "exaone_moe": {"qkv_bias": False, "o_bias": False, "qk_norm": "head", "moe": "hy", "first_dense": 1,
                   "shared_experts": 1},
    "hunyuan_v1_moe": {"qk_norm": "head", "qk_norm_names": ("query_layernorm", "key_layernorm"), "moe": "hunyuan"},
    # modeling_ernie4_5_moe.py: use_bias also biases the experts' neighbours and lm_head; refused when on
    "ernie4_5_moe": {"tie": ("tie_word_embeddings", True), "qkv_bias": False, "o_bias": False, "moe": "ernie",
                     "refuse_if": "use_bias"},
    # modeling_aria.py AriaTextMoELayer: mlp.router, experts of intermediate_size, moe_num_shared_experts x
    # intermediate_size shared_experts, in every layer
    "aria_text": {"qkv_bias": False, "o_bias": False, "moe": "aria"},
    # modeling_afmoe.py: per-head q/k norm, an output gate_proj, four block norms, MoE after num_dense_layers
    "afmoe": {"qkv_bias": ("attention_bias", False), "o_bias": ("attention_bias", False), "qk_norm": "head",
              "o_gate": True, "moe": "afmoe", "block_norms": ("input_layernorm", "post_attention_layernorm",
                                                              "pre_mlp_layernorm", "post_mlp_layernorm")},
    # modeling_laguna.py: per-head q/k norm and output gate g_proj, kolibri's MoE after one dense layer
    "laguna": {"qkv_bias": ("attention_bias", False), "o_bias": ("attention_bias", False), "qk_norm": "head",
               "o_gate": "g_proj", "moe": "laguna", "first_dense": 1},
    # modeling_axk1.py: DeepSeek-V3's MLA and MoE (plus a post_mlp_layernorm) after the first dense layer
    "axk1": {"attn": "mla", "moe": "axk1", "first_dense": 1},
    # modeling_phimoe.py: LayerNorm with bias, mlp.router then experts, lm_head_bias
    "phimoe": {"norm": "ln", "moe": "router_first", "lm_head_bias": ("lm_head_bias", False)},
    # hybrid Gated DeltaNet + gated attention (hybrid.py)
    "qwen3_next": {"qk_norm": "head", "linear_attn": "fused", "q_gate": True, "moe": "qwen2_moe"},
    "qwen3_5_text": {"qk_norm": "head", "linear_attn": "split", "q_gate": True},
    "qwen3_5_moe_text": {"qk_norm": "head", "linear_attn": "split", "q_gate": True, "moe": "qwen2_moe"},
    # modeling_lara_mini.py: Qwen3.5's Gated DeltaNet in the linear_attention layers, plain Qwen3 attention (no
    # query gate) elsewhere, a sparse block of experts, gate and an ungated shared_expert (kolibri's count; its
    # router: F.linear(x.float(), w.float()))
    "lara_mini": {"qk_norm": "head", "linear_attn": "split", "moe": "kolibri"},
    "qwen3_vl_moe_text": {"qk_norm": "head", "moe": "deepseek", "router_fp32": ""},   # F.linear(x, w)
    # modeling_llama4.py: weightless L2 q/k norm (Llama4TextL2Norm, on the RoPE layers when use_qk_norm: no
    # tensors, an activation rule: memory/blocks_families.py llama4_block), NoPE and chunked attention make no tensors
    "llama4_text": {"moe": "llama4", "mlp_module": "feed_forward", "dense_inter": "intermediate_size_mlp",
                    "qk_norm": "l2", "qk_norm_on": ("use_qk_norm", True)},
    "olmoe": {"qk_norm": "full", "moe": "mixtral"},
    "mellum": {"qk_norm": "head", "moe": "mixtral"},
    "solar_open": {"qkv_bias": ("attention_bias", False), "o_bias": False, "moe": "deepseek"},
    "sarvam_moe": {"qkv_bias": ("attention_bias", False), "o_bias": False, "qk_norm": "head",
                   "qk_norm_on": ("use_qk_norm", True), "moe": "deepseek", "first_dense": 1},
    "glm4_moe_lite": {"attn": "mla", "moe": "deepseek", "first_dense": 1},
    "hy_v3": {"qk_norm": "head", "moe": "hy", "mlp_bias": ("mlp_bias", False), "first_dense": 1},
    "glm4v_moe_text": {"qkv_bias": ("attention_bias", True), "o_bias": False, "moe": "deepseek", "first_dense": 1},
    # DeepSeek sparse attention: MLA + the lightning indexer (moe.mla_attention), DeepSeek MoE
    "deepseek_v32": {"attn": "mla_dsa", "moe": "deepseek", "first_dense": 3},
    "glm_moe_dsa": {"attn": "mla_dsa", "moe": "deepseek", "first_dense": 3},
    "mistral4": {"attn": "mla", "moe": "deepseek", "router_fp32": ""},   # Mistral4TopkRouter: F.linear(x, w)
    "sarvam_mla": {"attn": "mla", "moe": "deepseek", "first_dense": 1},
    # modeling_minicpm3.py: DeepSeek-V2's MLA on a dense SwiGLU block; attention_bias on q_a/kv_a/o (read as
    # MLA's), mlp_bias on the MLP
    "minicpm3": {"tie": ("tie_word_embeddings", True), "attn": "mla", "mlp_bias": ("mlp_bias", False)},
    "glm4_moe": {"qkv_bias": ("attention_bias", False), "o_bias": False, "qk_norm": "head",
                 "qk_norm_on": ("use_qk_norm", False), "moe": "deepseek", "first_dense": 1},
    "deepseek_v2": {"attn": "mla", "moe": "deepseek"},
    "deepseek_v3": {"attn": "mla", "moe": "deepseek", "first_dense": 3},
    "youtu": {"tie": ("tie_word_embeddings", True), "attn": "mla"},
    # modeling_mimo_v2_flash.py: sliding-window layers double the kv heads and hold sinks; v_proj/o_proj
    # sized by v_head_dim; DeepSeek-V3's MoE without shared experts after one dense layer
    "mimo_v2_flash": {"head_dim": 192, "o_bias": False, "v_head_dim": ("v_head_dim", 128), "swa_kv": 2, "swa_every": 6,
                      "sinks": "swa", "moe": "deepseek", "first_dense": 1},
    "gpt_oss": {"qkv_bias": ("attention_bias", True), "o_bias": ("attention_bias", True), "sinks": True,
                "moe": "gpt_oss"},
}

LLAMA_LIKE = frozenset(FAMILIES)


def spec_for(model_type: str) -> dict:
    return {**BASE, **FAMILIES[model_type]}
