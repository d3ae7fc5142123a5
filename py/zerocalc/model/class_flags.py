"""What transformers' class for a model_type refuses to run: the plan's ``attention`` and checkpointing.

transformers 5.24 (modeling_utils.py) reads flags of the class a model_type is built as (the composite's, for models
that see images): ``PreTrainedModel._check_and_adjust_attn_implementation`` raises ValueError at load for
``attn_implementation="flash_attention_2"`` without ``_supports_flash_attn`` and for an explicit ``"sdpa"`` without
``_supports_sdpa`` (an unset one falls back to eager); ``activation_checkpointing_enable`` (the HF Trainer's
``gradient_checkpointing=True``) raises without ``supports_gradient_checkpointing``. Read off the classes by
tools/archgen/class_flags.py into tests/data/class_flags.json, which tests/test_class_flags.py holds these sets to.
Only the transformers model code follows them (torchtune, LitGPT and torchtitan run their own).
"""
from __future__ import annotations

# model_types whose class refuses FlashAttention (e.g. Gemma 3's and PaliGemma's conditional-generation classes:
# "Flash Attention drops the bidirectional mask over image tokens"; T5's relative position bias; Llama 4)
NO_FLASH = frozenset({
    "axk2", "big_bird", "bigbird_pegasus", "blip", "blip-2", "bloom", "blt", "cpmant", "deepseek_v32",
    "deepseek_v4", "doge", "dots3_note", "dots3_note_text", "evolla", "falcon_mamba", "fsmt", "gemma3", "gemma4",
    "gemma4_unified", "git", "glm5_next", "glm_moe_dsa", "got_ocr2", "gpt_neox_japanese", "granite_speech",
    "granite_speech_plus", "hy_v4", "hy_v4_vl", "idefics", "inkling2", "inkling2_loop", "inkling2_loop_text",
    "inkling2_text", "inkling_mm_model", "inkling_text", "kosmos-2", "led", "llama4", "llama4_text", "longt5",
    "mamba", "mamba2", "megatron-bert", "minimax_m3_vl", "minimax_m3_vl_text", "mistral_large4", "mllama",
    "molmo2", "mpt", "mt5", "mvp", "nllb-moe", "openai-gpt", "paligemma", "pi0", "pix2struct", "pp_chart2table",
    "pp_formulanet", "prophetnet", "qwen4_exp", "qwen4_exp_text", "reformer", "rembert", "roformer", "rwkv",
    "seamless_m4t", "seamless_m4t_v2", "shieldgemma2", "step3p7", "switch_transformers", "t5", "t5gemma2",
    "trocr", "udop", "umt5", "unlimited_ocr", "xglm", "xlm", "xlnet", "xlstm"
})
# model_types whose class has no SDPA path (Gemma 2's and gpt-oss' softcapping / sinks, the state-space models)
NO_SDPA = frozenset({
    "big_bird", "bigbird_pegasus", "blip", "bloom", "cpmant", "deepseek_v4", "falcon_mamba", "flint", "fsmt",
    "gemma2", "git", "got_ocr2", "gpt_neo", "gpt_neox_japanese", "gpt_oss", "granite_swa", "granitemoe_swa",
    "hy_v4", "hy_v4_vl", "inkling2", "inkling2_loop", "inkling2_loop_text", "inkling2_text", "led", "longt5",
    "mamba", "mamba2", "megatron-bert", "mimo_v2_flash", "mpt", "mvp", "nllb-moe", "openai-gpt", "pegasus_x",
    "pp_chart2table", "prophetnet", "reformer", "rembert", "roformer", "rwkv", "switch_transformers", "t5gemma",
    "trocr", "vaultgemma", "xglm", "xlm", "xlnet", "xlstm"
})
# model_types whose class has no gradient checkpointing (modeling_ctrl.py, modeling_xlnet.py, modeling_jetmoe.py ...)
NO_CHECKPOINTING = frozenset({
    "cpmant", "ctrl", "fsmt", "gpt_neox_japanese", "granite_speech", "granite_speech_plus", "jetmoe",
    "openai-gpt", "pix2struct", "reformer", "xlm", "xlnet"
})
# no attention layer (state-space and recurrent mixers): the plan's attention is moot and no one passes it
ATTENTION_FREE = frozenset({"falcon_mamba", "mamba", "mamba2", "rwkv", "xlstm"})


def unsupported_attention(model_type: str, attention: str) -> str:
    """"flash" or "sdpa" when transformers' class for ``model_type`` cannot run the plan's ``attention``, else ""."""
    if model_type in ATTENTION_FREE:
        return ""
    if attention == "flash" and model_type in NO_FLASH:
        return "flash"
    if attention == "sdpa" and model_type in NO_SDPA:
        return "sdpa"
    return ""

# model_types whose LoRA / QLoRA step with checkpointing raises in transformers 5.24: enable_input_require_grads
# (which the HF Trainer and PEFT call for checkpointed adapters) makes the word embeddings' output a leaf that
# requires grad, and the model then writes into it in place (RuntimeError: a leaf Variable that requires grad is
# being used in an in-place operation). Found by the traces that could not run those rows.
PEFT_CHECKPOINTING_RAISES = {
    "blip": "BlipTextEmbeddings.forward's `embeddings += position_embeddings` (tools/memtrace/bert_cross_trace.py)",
    "git": "GitEmbeddings.forward's `embeddings += position_embeddings` (tools/memtrace/bert_cross_trace.py)",
    "kosmos-2": "forward_embedding's `inputs_embeds[mask] = image_embeds` (tools/memtrace/kosmos_trace.py)",
    "udop": "combine_image_text_embeddings' `inputs_embeds += ...` (tools/memtrace/vision_seq2seq_trace.py)",
    "blt": "compute_hash_embeddings' in-place add of the hash embeddings (tools/memtrace/own_attention_trace.py)",
}
# model_types whose checkpointed step raises in transformers 5.24 whatever the method, though the class allows it
CHECKPOINTING_RAISES = {
    # the Gemma language model turns use_cache off under checkpointing, so PI0Model.forward's
    # `self.vlm(..., use_cache=True).cache` is None and `cache.get_seq_length()` raises AttributeError
    "pi0": "the prefix cache the action expert reads is None under checkpointing (tools/memtrace/odd_composites_trace.py)",
}
# steps that fail in transformers 5.24 for a precision or a method, checked on real CPU tensors by the traces
# (tools/memtrace/own_attention_trace.py NO_PURE, NO_LORA): (plan field, values, why)
STEP_RAISES = {
    "xlnet": (("precision", ("bf16-pure",), "XLNetRelativeAttention makes its q / k / v / o / r weights with "
               "torch.FloatTensor, fp32 whatever the model's dtype, and the first einsum meets bf16 states"),),
    "reformer": (("precision", ("bf16-pure",), "AxialPositionEmbeddings' weights are fp32, so the stream turns fp32 "
                  "and the first 16-bit LayerNorm / Linear fails"),
                 ("method", ("lora", "qlora"), "the reversible layers' only input is the frozen embeddings' output, "
                  "so the loss needs no gradient (\"element 0 of tensors does not require grad\") unless "
                  "enable_input_require_grads is called")),
}
