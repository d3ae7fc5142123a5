"""BART-lineage and OPT-style decoders (the causal-LM classes of transformers 5.24: BartForCausalLM, MBart,
Marian, Pegasus, Blenderbot(-Small), PLBart, MVP, TrOCR, XGLM, OPT, BioGPT), as data: per model_type the
decoder's path, the config fields naming its sizes, its position table, whether each layer also registers
the cross-attention of the encoder-decoder it was cut from (``encoder_attn``: counted, never run by the
causal LM), and its embedding / final LayerNorms. Sources: src/transformers/models/<model_type>/
modeling_<x>.py (*Decoder, *DecoderLayer, *LearnedPositionalEmbedding: max_position_embeddings + 2 rows for
BART's offset; *SinusoidalPositionalEmbedding: an nn.Embedding whose table is a parameter in Marian and
Pegasus, a buffer in XGLM and TrOCR), each checked against the meta-device build in
tests/data/architectures.json. Activations: memory/blocks_bart.py's decoder layer (TRACED: tools/memtrace/bart.py,
held by tests/test_bart_grid.py), OPT's memory/blocks_families.py opt_block."""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

# parameters checked against transformers (tests/test_architectures.py); activations not traced for these
SUPPORT = ("exact parameter count; activations approximate (costed as the classic block of memory/blocks.py, "
           "not traced); LoRA adapters on a kept cross-attention (encoder_attn) not counted")

# activations: memory/blocks_bart.py's decoder layer, traced on these (tools/memtrace/bart.py, tests/test_bart_grid.py)
TRACED = ("bart", "mbart", "marian", "pegasus", "whisper", "biogpt", "xglm", "blenderbot", "blenderbot-small", "plbart",
          "mvp", "trocr", "bigbird_pegasus")
TRACED_SUPPORT = ("exact parameter count; activations traced (memory/blocks_bart.py: tools/memtrace/golden/bart); "
                  "LoRA adapters on a kept cross-attention (encoder_attn) not counted")
RULE_SUPPORT = ("exact parameter count; activations approximate (memory/blocks_bart.py's decoder layer, traced on "
                "bart / mbart / marian / pegasus / whisper / biogpt / xglm / blenderbot(-small) / plbart / mvp / trocr / "
                "bigbird_pegasus, "
                "not on this model_type); LoRA adapters on a kept cross-attention (encoder_attn) not counted")

# OPT's decoder layer: memory/blocks_families.py opt_block, traced pre-LN (opt-125m's layout) and post-LN with
# project_in / project_out (opt-350m's: tools/memtrace/families.py opt and opt350 rows, held within 3 % by
# tests/test_family_grid.py); OPTForCausalLM builds no cross-attention
OPT_SUPPORT = "exact"

_BART = ("d_model", "decoder_layers", "decoder_ffn_dim", "decoder_attention_heads")
_OPT = ("hidden_size", "num_hidden_layers", "ffn_dim", "num_attention_heads")

# model_type -> (decoder path, size fields, positions, cross-attention, embedding LayerNorm, final LayerNorm)
# positions: "offset2" learned (max + 2), "learned" (max), "table" sinusoidal parameter, "none" (a buffer);
# a LayerNorm switch is a constant or (field, default)
DECODERS = {
    "bart": ("model.decoder", _BART, "offset2", True, True, False),
    "mbart": ("model.decoder", _BART, "offset2", True, True, True),
    "plbart": ("model.decoder", _BART, "offset2", True, True, False),
    "mvp": ("model.decoder", _BART, "offset2", True, True, False),
    "marian": ("model.decoder", _BART, "table", True, False, False),
    "pegasus": ("model.decoder", _BART, "table", True, False, True),
    "blenderbot": ("model.decoder", _BART, "learned", True, False, True),
    "blenderbot-small": ("model.decoder", _BART, "learned", True, True, False),
    # modeling_trocr.py: learned positions (offset 2) when use_learned_position_embeddings, else a buffer
    "trocr": ("model.decoder", _BART, ("use_learned_position_embeddings", True), True,
              ("layernorm_embedding", True), False),
    "xglm": ("model", ("d_model", "num_layers", "ffn_dim", "attention_heads"), "none",
             ("add_cross_attention", False), False, True),
    # modeling_opt.py: final_layer_norm when do_layer_norm_before (and not _remove_final_layer_norm),
    # project_in / project_out when word_embed_proj_dim differs from hidden_size, biases by enable_bias
    "opt": ("model.decoder", _OPT, "offset2", False, False, ("do_layer_norm_before", True)),
    # modeling_whisper.py WhisperDecoder: max_target_positions learned positions, k_proj without bias
    "whisper": ("model.decoder", _BART, "learned", True, False, True),
    # modeling_bigbird_pegasus.py BigBirdPegasusDecoder: attention biased by use_bias (default off)
    "bigbird_pegasus": ("model.decoder", _BART, "learned", True, False, True),
    "biogpt": ("biogpt", ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads"),
               "offset2", False, False, True),
}


# the decoder layers that normalise after each residual add (`residual + x`, then self_attn_layer_norm /
# final_layer_norm: modeling_bart.py BartDecoderLayer and its copies in plbart, mvp, marian, blenderbot_small,
# trocr); the others normalise each sublayer's input (modeling_mbart.py MBartDecoderLayer, pegasus, blenderbot,
# xglm, whisper, bigbird_pegasus, biogpt)
POST_LN = ("bart", "plbart", "mvp", "marian", "blenderbot-small", "trocr")
# the decoders whose attention is their own eager code (layer_switches)
OWN_ATTENTION = ("xglm", "mvp", "trocr")
# BioGPT's dropout fields (configuration_biogpt.py); the others use BART's names (configuration_bart.py)
_DROPOUT_FIELDS = {"biogpt": ("hidden_dropout_prob", "attention_probs_dropout_prob", "hidden_act")}

# per model_type: the positions' size field, and the attention projections' biases (all four by default)
POSITIONS_FIELD = {"whisper": "max_target_positions"}
ATTN_BIAS = {"whisper": ("k_proj",), "bigbird_pegasus": ("use_bias", False), "opt": ("enable_bias", True)}


def _attn_bias(c: ConfigReader, model_type: str, name: str) -> bool:
    rule = ATTN_BIAS.get(model_type, True)
    if rule is True:
        return True
    if isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[1], bool):
        return c.bool(rule[0], rule[1])
    return name not in rule          # the projections listed have no bias


def _switch(c: ConfigReader, v) -> bool:
    return c.bool(v[0], v[1]) if isinstance(v, tuple) else bool(v)


def bart_decoder(c: ConfigReader, model_type: str) -> ModelArch:
    path, (hk, nk, fk, ak), pos, cross, emb_ln, final_ln = DECODERS[model_type]
    h, n, ffn, heads = c.int(hk), c.int(nk), c.int(fk), c.int(ak)
    vocab = c.int("vocab_size")
    if model_type == "marian":
        vocab = c.int("decoder_vocab_size", default=vocab)
    max_pos = c.int(POSITIONS_FIELD.get(model_type, "max_position_embeddings"), default=1024)
    bias = c.bool("enable_bias", True) if model_type == "opt" else True
    proj = c.int("word_embed_proj_dim", default=h) if model_type == "opt" else h
    if isinstance(pos, tuple):
        pos = "offset2" if _switch(c, pos) else "none"
    b = TensorList()
    b.matrix(f"{path}.embed_tokens", "weight", (vocab, proj), "embedding")
    if pos != "none":
        b.matrix(f"{path}.embed_positions", "weight", (max_pos + 2 * (pos == "offset2"), h), "embedding")
    if model_type == "opt":
        if _switch(c, final_ln) and not c.bool("_remove_final_layer_norm", False):
            b.norm(f"{path}.final_layer_norm", h, bias=True)
        if proj != h:
            b.linear(f"{path}.project_out", h, proj, "other")
            b.linear(f"{path}.project_in", proj, h, "other")
    if model_type == "trocr" and _switch(c, emb_ln):
        b.norm(f"{path}.layernorm_embedding", h, bias=True)
    with_cross = _switch(c, cross)
    for i in range(n):
        p = f"{path}.layers.{i}"
        for att in ("self_attn", "encoder_attn") if with_cross else ("self_attn",):
            for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
                b.linear(f"{p}.{att}.{name}", h, h, "attention", bias=_attn_bias(c, model_type, name))
            b.norm(f"{p}.{att}_layer_norm", h, bias=True)
        b.linear(f"{p}.fc1", h, ffn, "mlp", bias=bias)
        b.linear(f"{p}.fc2", ffn, h, "mlp", bias=bias)
        b.norm(f"{p}.final_layer_norm", h, bias=True)
    if model_type != "trocr" and _switch(c, emb_ln):
        b.norm(f"{path}.layernorm_embedding", h, bias=True)
    if model_type != "opt" and _switch(c, final_ln):
        b.norm(f"{path}.layer_norm", h, bias=True)
    # BigBirdPegasusForCausalLM declares no _tied_weights_keys (modeling_bigbird_pegasus.py): its lm_head is its own
    tied = c.bool("tie_word_embeddings", True) and model_type != "bigbird_pegasus"
    if not tied:
        b.matrix("lm_head" if model_type != "biogpt" else "output_projection", "weight", (vocab, proj), "lm_head",
                 "lm_head")
    arch = bart_arch(c, model_type, b, h, n, heads, ffn, vocab, tied, max_pos)
    if model_type == "opt":                     # memory/blocks_families.py opt_block (traced on its own)
        return replace(arch, support=OPT_SUPPORT)
    return replace(arch, bart=layer_switches(c, model_type, _switch(c, emb_ln), _switch(c, final_ln)),
                   support=TRACED_SUPPORT if model_type in TRACED else RULE_SUPPORT)


def _rate(c: ConfigReader, key: str) -> float:
    v = c.cfg.get(key, 0.0)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def layer_switches(c: ConfigReader, model_type: str, emb_ln: bool, final_ln: bool) -> dict:
    """What memory/blocks_bart.py needs of the decoder layer beside its sizes: where its LayerNorms sit (POST_LN),
    the embedding and final LayerNorms, the activation (`ACT2FN[config.activation_function]`) and the dropouts
    after the activation (`activation_dropout`) and on the attention probabilities (`attention_dropout`); the
    residual and embedding dropout is ModelArch.dropout (`dropout`)."""
    drop, attn, act = _DROPOUT_FIELDS.get(model_type, ("dropout", "attention_dropout", "activation_function"))
    # XGLM's, MVP's and TrOCR's attention is their own bmm / softmax code (modeling_xglm.py XGLMAttention,
    # modeling_mvp.py MvpAttention, modeling_trocr.py TrOCRAttention: no attention interface, no
    # `_supports_flash_attn`, so transformers refuses flash_attention_2 and sdpa runs the same code): costed as
    # eager whatever the plan's attention; XGLM's also clamps the masked scores (`clamp`)
    # WhisperAttention makes q `.transpose(1, 2).contiguous()` (modeling_whisper.py): the flash kernel writes its
    # output in q's (b, a, s, d) layout (flash_attn's mha_fwd `out = torch::empty_like(q)`; CPU SDPA in the trace
    # alike), so `attn_output.reshape(*input_shape, -1)` is a copy, out_proj's input beside the kept output
    return {"own_attention": model_type in OWN_ATTENTION, "clamp": model_type == "xglm",
            "out_copied": model_type == "whisper",
            "post_ln": model_type in POST_LN, "emb_ln": emb_ln,
            "final_ln": final_ln, "decoder_only": True,
            "act": c.str(act, "gelu"), "act_dropout": _rate(c, "activation_dropout"), "attn_dropout": _rate(c, attn),
            "dropout": _rate(c, drop)}


def bart_arch(c: ConfigReader, model_type: str, b: TensorList, h: int, n: int, heads: int, ffn: int, vocab: int,
              tied: bool, max_pos: int, support: str = SUPPORT) -> ModelArch:
    """The ModelArch of a BART-layer model: its block's linears (self-attention and fc1/fc2; the kept
    cross-attention never runs in a causal LM), LayerNorm, classic activations."""
    blk = (Linear("k_proj", h, h), Linear("v_proj", h, h), Linear("q_proj", h, h), Linear("out_proj", h, h),
           Linear("fc1", h, ffn), Linear("fc2", ffn, h))
    drop = c.cfg.get("dropout", 0.0)
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="gpt2", hidden_size=h, num_layers=n,
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads, intermediate_size=ffn, vocab_size=vocab,
        tied_embeddings=tied, max_positions=max_pos, gated_mlp=False, norm="layernorm", norms_per_layer=2,
        qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool) else 0.0,
        tensors=tuple(b.tensors), block_linears=blk, dense_block_linears=blk, support=support)
