"""Whole encoder-decoders of BART's layer (the seq2seq mapping of transformers 5.24), as data: per model_type
the base model's path, whether the token embedding is one shared table, the position tables, the embedding /
final LayerNorms, the encoder's attention (BART's four projections, LED's Longformer attention, PEGASUS-X's
global-local attention with its extra LayerNorm), the attention biases, the module names of the cross-attention
and feed-forward, and the sparse (MoE) layers. Both stacks' sizes are read by BART's encoder_* / decoder_*
field names. Sources, each checked against the meta-device build in tests/data/architectures.json:
- m2m_100 (modeling_m2m_100.py M2M100Model): model.shared, sinusoidal position buffers, encoder/decoder layer_norm.
- fsmt (modeling_fsmt.py FSMTModel): src / tgt embeddings of their own vocabularies, sinusoidal position tables
  that are nn.Embedding parameters (max + 2 rows, padding offset), decoder.output_projection.
- led (modeling_led.py LEDModel): led.shared; LEDLearnedPositionalEmbedding of max_encoder_position_embeddings /
  max_decoder_position_embeddings rows (no offset); LEDEncoderSelfAttention query/key/value and their *_global
  twins, then self_attn.output, all biased; layernorm_embedding on both sides, no final LayerNorm.
- pegasus_x (modeling_pegasus_x.py): sinusoidal positions without parameters, encoder.embed_global
  (num_global_tokens x d_model), PegasusXGlobalLocalAttention and the decoder's attentions without biases, a
  global_self_attn_layer_norm in each encoder layer, encoder/decoder layer_norm.
- nllb-moe (modeling_nllb_moe.py): M2M100's layout with cross_attention / ff_layer_norm / ffn.fc1 names; layer i
  is sparse when (i + 1) % encoder_sparse_step (decoder_sparse_step) == 0: ffn.router.classifier (d_model x
  num_experts, router_bias) and num_experts ffn.experts.expert_<e>.fc1/fc2.
- seamless_m4t / seamless_m4t_v2 (SeamlessM4T(v2)ForTextToText): shared, text_encoder / text_decoder of NLLB's
  layer names (ffn_layer_norm), sinusoidal position buffers, hidden_size for d_model; the speech encoder, the
  text-to-unit model and the vocoder are not in the text-to-text class.
Activations: memory/blocks_seq2seq.py by the switches `switches` reads (traced: M2M100, FSMT, LED, PEGASUS-X,
SeamlessM4T(v2); tools/memtrace/seq2seq.py); NLLB-MoE's feed-forwards by memory/blocks_nllb_moe.py (traced:
tools/memtrace/nllb_moe_trace.py)."""
from __future__ import annotations

from dataclasses import replace

from .arch import ModelArch
from .config import ConfigReader, TensorList
from .decoders import bart_arch, layer_switches

# traced (tools/memtrace/seq2seq.py): M2M100, LED, PEGASUS-X, SeamlessM4T(v2)'s text-to-text model
TRACED = ("m2m_100", "led", "pegasus_x", "seamless_m4t", "seamless_m4t_v2")
TRACED_SUPPORT = ("exact parameter count; activations traced (memory/blocks_seq2seq.py: tools/memtrace/golden/"
                  "seq2seq); LoRA adapters counted on one BART layer per block (not on the cross-attention)")

# FSMT: traced without checkpointing only, since the class has none (modeling_fsmt.py PretrainedFSMTModel sets no
# supports_gradient_checkpointing, so gradient_checkpointing_enable raises)
FSMT_SUPPORT = (TRACED_SUPPORT + "; FSMT has no gradient checkpointing in transformers (a checkpointed plan is "
                "costed by BART's checkpointing rule, not traced)")

SUPPORT = ("exact parameter count; activations approximate (BART's layer of memory/blocks_seq2seq.py, traced on "
           "M2M100 and LED, not on this model_type; MoE routing not modelled); LoRA adapters counted on one BART "
           "layer per block (not on the cross-attention nor on each expert)")

# transformers 5.24's NllbMoeSparseMLP hands the router's (tokens, E) top-1 dispatch mask to NllbMoeExperts.forward,
# which one-hot encodes it again (`one_hot(router_mask, num_classes=E)`): the 0/1 values name experts 0 and 1, so
# expert_0 runs on every (token, expert) pair the mask leaves 0 and expert_1 on the kept top-1 tokens, the other
# experts never (memory/blocks_nllb_moe.py: t·E rows a sparse layer; the others no gradient, no optimizer state)
NLLB_MOE_SUPPORT = ("exact parameter count; activations traced (memory/blocks_nllb_moe.py; tools/memtrace/"
                    "nllb_moe_trace.py), eager only (the model has no FA2 / SDPA path), transformers 5.24's routing "
                    "(NllbMoeExperts.forward one-hot encodes the top-1 dispatch mask again: expert_0 and expert_1 "
                    "run over t·E rows, experts 2+ never, without gradient or optimizer state); LoRA adapters "
                    "counted on one BART layer per block (not on the cross-attention nor on each expert)")

_BART_NAMES = ("encoder_attn", "fc1", "fc2", "final_layer_norm")
_SEAMLESS = {"base": "", "stacks": ("text_encoder", "text_decoder"),
             "names": ("cross_attention", "ffn.fc1", "ffn.fc2", "ffn_layer_norm")}
_DEFAULT = {"base": "model", "stacks": ("encoder", "decoder"), "shared": True, "positions": "none", "emb_ln": False,
            "final_ln": True,
            "encoder_attn": "bart", "attn_bias": True, "global_tokens": False, "names": _BART_NAMES, "sparse": False}
# model_type -> its differences from _DEFAULT; positions: "none" (a buffer), "offset2" (max + 2 rows), or the
# (encoder, decoder) fields naming the rows of learned tables
SEQ2SEQ = {
    "m2m_100": {},
    "fsmt": {"shared": False, "positions": "offset2", "final_ln": False},
    "led": {"base": "led", "positions": ("max_encoder_position_embeddings", "max_decoder_position_embeddings"),
            "emb_ln": True, "final_ln": False, "encoder_attn": "longformer"},
    "pegasus_x": {"encoder_attn": "global_local", "attn_bias": False, "global_tokens": True},
    "nllb-moe": {"names": ("cross_attention", "ffn.fc1", "ffn.fc2", "ff_layer_norm"), "sparse": True},
    # modeling_seamless_m4t(_v2).py *ForTextToText: the text encoder / decoder of NLLB's layer, at the top level
    "seamless_m4t": _SEAMLESS,
    "seamless_m4t_v2": _SEAMLESS,
}
_LONGFORMER = ("query", "key", "value", "query_global", "key_global", "value_global")


# BartModel (modeling_bart.py) as the language model of a composite (Florence-2): learned positions of max + 2
# rows, layernorm_embedding on both sides, no final LayerNorm; the base path is the composite's
BART_MODEL = {"positions": "offset2", "emb_ln": True, "final_ln": False}


def seq2seq(c: ConfigReader, model_type: str, row: dict | None = None) -> ModelArch:
    """The encoder-decoder of SEQ2SEQ[model_type], or of ``row`` (a composite's language model)."""
    row = {**_DEFAULT, **(SEQ2SEQ[model_type] if row is None else row)}
    base, shared, pos, bias = row["base"], row["shared"], row["positions"], row["attn_bias"]
    cross_name, fc1, fc2, ff_ln = row["names"]
    d = c.int("d_model", "hidden_size")
    heads = c.int("decoder_attention_heads")
    src = c.int("vocab_size", "src_vocab_size")
    tgt = c.int("tgt_vocab_size", default=src) if model_type == "fsmt" else src
    max_pos = c.int("max_position_embeddings", default=1024)
    experts = c.int("num_experts", default=128) if row["sparse"] else 0
    # transformers 5 ties the encoder's and decoder's embed_tokens to shared (and lm_head) only under
    # tie_word_embeddings (modeling_utils.PreTrainedModel.tie_weights over _tied_weights_keys)
    tied = c.bool("tie_word_embeddings", shared)
    b = TensorList()
    if shared:
        b.matrix(f"{base}.shared" if base else "shared", "weight", (src, d), "embedding")
    stacks = row["stacks"]
    for side, stack, vocab, cross in (("encoder", stacks[0], src, False), ("decoder", stacks[1], tgt, True)):
        path = f"{base}.{stack}" if base else stack
        n, ffn = c.int(f"{side}_layers"), c.int(f"{side}_ffn_dim")
        step = c.int(f"{side}_sparse_step", default=4, lo=0) if experts else 0
        if not shared or not tied:
            b.matrix(f"{path}.embed_tokens", "weight", (vocab, d), "embedding")
        if pos == "offset2":
            b.matrix(f"{path}.embed_positions", "weight", (max_pos + 2, d), "embedding")
        elif pos != "none":
            rows = c.int(pos[1] if cross else pos[0], default=1024 if cross else 16384)
            b.matrix(f"{path}.embed_positions", "weight", (rows, d), "embedding")
        if row["global_tokens"] and not cross:
            b.matrix(f"{path}.embed_global", "weight", (c.int("num_global_tokens", default=32), d), "embedding")
        for i in range(n):
            p = f"{path}.layers.{i}"
            if not cross and row["encoder_attn"] == "longformer":
                for name in _LONGFORMER:
                    b.linear(f"{p}.self_attn.longformer_self_attn.{name}", d, d, "attention", bias=True)
                b.linear(f"{p}.self_attn.output", d, d, "attention", bias=True)
                b.norm(f"{p}.self_attn_layer_norm", d, bias=True)
            else:
                for att in ("self_attn", cross_name) if cross else ("self_attn",):
                    for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
                        b.linear(f"{p}.{att}.{name}", d, d, "attention", bias=bias)
                    b.norm(f"{p}.{att}_layer_norm", d, bias=True)
                    if not cross and row["encoder_attn"] == "global_local":
                        b.norm(f"{p}.global_self_attn_layer_norm", d, bias=True)
            if step and (i + 1) % step == 0:
                b.linear(f"{p}.ffn.router.classifier", d, experts, "router", bias=c.bool("router_bias", False))
                for e in range(experts):
                    b.linear(f"{p}.ffn.experts.expert_{e}.fc1", d, ffn, "routed_experts", bias=True)
                    b.linear(f"{p}.ffn.experts.expert_{e}.fc2", ffn, d, "routed_experts", bias=True)
            else:
                b.linear(f"{p}.{fc1}", d, ffn, "mlp", bias=True)
                b.linear(f"{p}.{fc2}", ffn, d, "mlp", bias=True)
            b.norm(f"{p}.{ff_ln}", d, bias=True)
        if row["emb_ln"]:
            b.norm(f"{path}.layernorm_embedding", d, bias=True)
        if row["final_ln"]:
            b.norm(f"{path}.layer_norm", d, bias=True)
    if not tied:
        if model_type == "fsmt":   # inside the decoder, where tools/archgen files it as "other", not a head
            b.matrix(f"{base}.decoder.output_projection", "weight", (tgt, d), "other", "output_projection")
        else:
            b.matrix("lm_head", "weight", (tgt, d), "lm_head", "lm_head")
    n_layers = c.int("encoder_layers") + c.int("decoder_layers")
    arch = bart_arch(c, model_type, b, d, n_layers, heads, c.int("decoder_ffn_dim"), tgt, tied, max_pos,
                     TRACED_SUPPORT if model_type in TRACED else
                     FSMT_SUPPORT if model_type == "fsmt" else NLLB_MOE_SUPPORT if model_type == "nllb-moe" else
                     SUPPORT)
    return replace(arch, bart=switches(c, model_type, row))


def switches(c: ConfigReader, model_type: str, row: dict) -> dict:
    """memory/blocks_seq2seq.py's switches: decoders.py layer_switches (post-LN: modeling_led.py LEDEncoderLayer /
    LEDDecoderLayer and modeling_fsmt.py normalise after each residual add; M2M100, NLLB, SeamlessM4T and
    PEGASUS-X before each sublayer), both stacks running (decoder_only false), and the encoder's attention:
    LED's Longformer `attention_window` (an int or one per layer; modeling_led.py LEDEncoderSelfAttention
    one_sided_attn_window_size = window // 2), PEGASUS-X's `block_size`, `num_global_tokens` and
    `stagger_local_blocks` (modeling_pegasus_x.py PegasusXEncoder: layer i staggered when i is odd)."""
    sw = layer_switches(c, model_type, row["emb_ln"], row["final_ln"])
    sw.update(post_ln=sw["post_ln"] or model_type in ("led", "fsmt"), decoder_only=False,
              encoder_attn=row["encoder_attn"], time_major=model_type == "fsmt")
    if row["stacks"] == _SEAMLESS["stacks"]:
        # SeamlessM4T(v2)EncoderLayer / DecoderLayer: `self.ffn_dropout = nn.Dropout(config.activation_dropout)` after
        # the feed-forward (the attentions' attn_dropout is config.dropout)
        sw["ff_dropout"] = sw["act_dropout"]
    if row["encoder_attn"] == "longformer":
        w = c.cfg.get("attention_window", 512)
        n = c.int("encoder_layers")
        sw["windows"] = tuple(int(x) for x in w) if isinstance(w, (list, tuple)) else (int(w),) * n
    elif row["encoder_attn"] == "global_local":
        sw.update(block=c.int("block_size", default=512), globals=c.int("num_global_tokens", default=32),
                  stagger=c.bool("stagger_local_blocks", True))
    if row["sparse"]:
        # NllbMoeConfig: the sparse layers ((i + 1) % <side>_sparse_step == 0), E and moe_token_dropout, for
        # memory/blocks_nllb_moe.py
        steps = [c.int(f"{side}_sparse_step", default=4, lo=0) for side in ("encoder", "decoder")]
        sw["nllb"] = {"experts": c.int("num_experts", default=128),
                      "token_dropout": float(c.cfg.get("moe_token_dropout", 0.2) or 0.0),
                      "sparse": tuple(bool(st) and (i + 1) % st == 0
                                      for st, side in zip(steps, ("encoder", "decoder"))
                                      for i in range(c.int(f"{side}_layers")))}
    return sw
