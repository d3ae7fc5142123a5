"""BLT, the Byte Latent Transformer (transformers 5.24, modeling_blt.py BltForCausalLM), counted whole from its
encoder_config / global_config / decoder_config / patcher_config by their own field names. Checked against the
meta-device build in tests/data/architectures.json.

- a BltTransformerLayer (every stack): self_attn q/k/v/o_proj (heads x hidden / heads, GQA), the gated
  gate/up/down MLP, two RMSNorms, no biases; a BltCrossAttention: q/k/v/o_proj and q_norm / k_norm over hidden.
- local_encoder: layers, patch_embedding_projection (hidden -> hidden·cross_attn_k), embed_tokens (vocab),
  cross_attn_layers (every layer when cross_attn_all_layers, else one);
- global_transformer: layers, token_embedding_projection when the encoder's hidden·cross_attn_k differs from
  the global width (BltConfig's encoder_cross_output_size);
- local_decoder: layers, patch_embedding_projection (hidden_size_global -> hidden·cross_attn_k), norm,
  cross_attn_layers;
- encoder_hash_tok_embedding: encoder_hash_byte_group_vocab x nb_functions x len(group sizes) rows;
- the patcher when patch_in_forward (layers, embed_tokens, norm, lm_head; frozen in BltModel);
- lm_head (decoder hidden -> vocab), the local encoder's embed_tokens tied to it under tie_word_embeddings.
The global transformer's layers are the blocks; the local and patcher layers are counted outside them.
Activations: memory/blocks_blt.py (the global layers as Llama blocks over s / patch_size patches, the byte-level
stacks and the cross-attentions around them; traced).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .encdec import require_sub_configs

SUPPORT = ("exact parameter count; activations traced (memory/blocks_blt.py; tools/memtrace/own_attention_trace.py) "
           "with patches of patch_size bytes assumed (entropy patching depends on the data)")


def _sizes(c: ConfigReader) -> tuple[int, int, int, int, int]:
    h, heads = c.int("hidden_size"), c.int("num_attention_heads")
    return h, heads, c.int("num_key_value_heads", default=heads), h // heads, c.int("intermediate_size")


def _layer(b: TensorList, p: str, c: ConfigReader) -> None:
    h, heads, kv, hd, inter = _sizes(c)
    for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                              ("o_proj", heads * hd, h)):
        b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention")
    b.swiglu(f"{p}.mlp", h, inter)
    b.norm(f"{p}.input_layernorm", h)
    b.norm(f"{p}.post_attention_layernorm", h)


def _cross(b: TensorList, p: str, c: ConfigReader) -> None:
    h, heads, kv, hd, _ = _sizes(c)
    b.qkv(p, h, heads, kv, hd)
    b.linear(f"{p}.o_proj", heads * hd, h, "attention")
    b.norm(f"{p}.q_norm", h)
    b.norm(f"{p}.k_norm", h)


def blt(cfg: Mapping) -> ModelArch:
    require_sub_configs(cfg, "blt", "encoder_config", "global_config", "decoder_config", "patcher_config")
    top = ConfigReader(cfg)
    enc, glob, dec, pat = (ConfigReader(cfg[k]) for k in ("encoder_config", "global_config", "decoder_config",
                                                         "patcher_config"))
    vocab, k = top.int("vocab_size", default=260), top.int("cross_attn_k", default=2)
    tied = top.bool("tie_word_embeddings", False)
    local = TensorList()
    for side, c in (("local_encoder", enc), ("local_decoder", dec)):
        p = f"model.{side}"
        h = c.int("hidden_size")
        for i in range(c.int("num_hidden_layers")):
            _layer(local, f"{p}.layers.{i}", c)
        d_in = h if side == "local_encoder" else c.int("hidden_size_global", default=2048)
        # the local stacks read their own cross_attn_k; the global projection the top-level one (BltConfig)
        local.linear(f"{p}.patch_embedding_projection", d_in, h * c.int("cross_attn_k", default=k), "other")
        if side == "local_encoder" and not tied:
            local.matrix(f"{p}.embed_tokens", "weight", (vocab, h), "embedding")
        if side == "local_decoder":
            local.norm(f"{p}.norm", h)
        for i in range(c.int("num_hidden_layers") if c.bool("cross_attn_all_layers", side == "local_decoder") else 1):
            _cross(local, f"{p}.cross_attn_layers.{i}", c)
    b = TensorList()
    gh = glob.int("hidden_size")
    for i in range(glob.int("num_hidden_layers")):
        _layer(b, f"model.global_transformer.layers.{i}", glob)
    eh = enc.int("hidden_size")
    if eh * k != gh:
        b.linear("model.global_transformer.token_embedding_projection", eh * k, gh, "other")
    groups = cfg.get("encoder_hash_byte_group_size") or [3, 4, 5, 6, 7, 8]
    rows_per = top.int("encoder_hash_byte_group_vocab", default=500002)
    rows = rows_per * top.int("encoder_hash_byte_group_nb_functions", default=1) * len(groups)
    local.matrix("model.encoder_hash_tok_embedding", "weight", (rows, eh), "embedding")
    if top.bool("patch_in_forward", True):
        ph = pat.int("hidden_size")
        for i in range(pat.int("num_hidden_layers")):
            _layer(local, f"model.patcher.layers.{i}", pat)
        pv = pat.int("vocab_size", default=vocab)
        local.matrix("model.patcher.embed_tokens", "weight", (pv, ph), "embedding")
        local.norm("model.patcher.norm", ph)
        local.matrix("model.patcher.lm_head", "weight", (pv, ph), "lm_head", "lm_head")
    local.matrix("lm_head", "weight", (vocab, dec.int("hidden_size")), "lm_head", "lm_head")
    _, heads, kv, hd, inter = _sizes(glob)
    blk = (Linear("q_proj", gh, heads * hd), Linear("k_proj", gh, kv * hd), Linear("v_proj", gh, kv * hd),
           Linear("o_proj", heads * hd, gh), Linear("gate_proj", gh, inter), Linear("up_proj", gh, inter),
           Linear("down_proj", inter, gh))
    return ModelArch(
        name=top.str("name", "blt"), model_type="blt", family="llama", hidden_size=gh,
        num_layers=glob.int("num_hidden_layers"), num_heads=heads, num_kv_heads=kv, head_dim=hd,
        intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=top.int("max_position_embeddings", default=4096), gated_mlp=True, norm="rmsnorm",
        norms_per_layer=2, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=0.0, tensors=tuple(replace(t, block="", layer=None) for t in local.tensors) + tuple(b.tensors),
        block_linears=blk, dense_block_linears=blk, support=SUPPORT,
        # BltModel.__init__: `for param in self.patcher.parameters(): param.requires_grad = False`
        config_frozen=tuple(t.name for t in local.tensors if t.name.startswith("model.patcher.")),
        own={"patch_size": top.int("patch_size", default=4), "cross_attn_k": k, "hash_lookups": rows // rows_per,
             "encoder": _stack(enc, False), "decoder": _stack(dec, True)})


def _stack(c: ConfigReader, all_default: bool) -> dict:
    """A local stack's dims for memory/blocks_blt.py: (h, heads, kv heads, head_dim, I), its layers and how many
    of them have a cross-attention (every one under cross_attn_all_layers, else one)."""
    n = c.int("num_hidden_layers")
    return {"dims": _sizes(c), "layers": n, "cross_layers": n if c.bool("cross_attn_all_layers", all_default) else 1}
