"""T5Gemma (modeling_t5gemma.py T5GemmaForConditionalGeneration, transformers 5.24): an encoder and a decoder
of Gemma 2 layers, each with its own embed_tokens and final norm, read from the ``encoder`` / ``decoder``
sub-configs by their own field names. A layer: q/k/v/o (GQA, head_dim), pre/post self-attention RMSNorms, the
GeGLU MLP gate/up/down with pre/post feed-forward RMSNorms; a decoder layer adds cross_attn (q from the hidden
size, k/v from cross_attention_hidden_size) with its pre/post norms. The lm_head is the decoder's embedding
(tie_word_embeddings). Checked against the meta-device build in tests/data/architectures.json; activations by
memory/blocks_seq2seq.py t5gemma_stacks (traced: tools/memtrace/seq2seq.py t5gemma)."""
from __future__ import annotations

from typing import Mapping

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList


def t5gemma(cfg: Mapping) -> ModelArch:
    if not isinstance(cfg.get("encoder"), Mapping) or not isinstance(cfg.get("decoder"), Mapping):
        raise PlanError("model.encoder", "model_type 't5gemma' needs its encoder and decoder sub-configs")
    b = TensorList()
    out = {}
    for side in ("encoder", "decoder"):
        c = ConfigReader(cfg[side])
        h, n, inter = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("intermediate_size")
        heads, kv = c.int("num_attention_heads"), c.int("num_key_value_heads")
        hd, vocab = c.int("head_dim", default=h // heads), c.int("vocab_size")
        bias = c.bool("attention_bias", False)
        p = f"model.{side}"
        b.matrix(f"{p}.embed_tokens", "weight", (vocab, h), "embedding")
        blk: list[Linear] = []
        for i in range(n):
            q = f"{p}.layers.{i}"
            atts = [("self_attn", h)] + ([("cross_attn", c.int("cross_attention_hidden_size", default=h))]
                                         if side == "decoder" else [])
            for att, kv_in in atts:
                for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", kv_in, kv * hd),
                                          ("v_proj", kv_in, kv * hd), ("o_proj", heads * hd, h)):
                    b.linear(f"{q}.{att}.{name}", d_in, d_out, "attention", bias=bias)
                    if att == "self_attn" and i == 0:       # one block's linears (LoRA, activations)
                        blk.append(Linear(name, d_in, d_out))
                short = "self_attn" if att == "self_attn" else "cross_attn"
                b.norm(f"{q}.pre_{short}_layernorm", h)
                b.norm(f"{q}.post_{short}_layernorm", h)
            for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
                b.linear(f"{q}.mlp.{name}", d_in, d_out, "mlp")
                if i == 0:
                    blk.append(Linear(name, d_in, d_out))
            b.norm(f"{q}.pre_feedforward_layernorm", h)
            b.norm(f"{q}.post_feedforward_layernorm", h)
        b.norm(f"{p}.norm", h)
        out[side] = (c, h, n, heads, kv, hd, inter, vocab, blk)
    top = ConfigReader(cfg)
    c, h, n_dec, heads, kv, hd, inter, vocab, blk = out["decoder"]
    tied = top.bool("tie_word_embeddings", True)
    # T5GemmaDecoder's attention (eager: tanh(scores / cap) * cap) and T5GemmaForConditionalGeneration.forward's
    # `logits = tanh(logits / final_logit_softcapping) * final_logit_softcapping`, by the decoder's fields
    softcap = c.cfg.get("attn_logit_softcapping") is not None
    final_softcap = c.cfg.get("final_logit_softcapping") is not None
    if not tied:
        b.matrix("lm_head.out_proj", "weight", (vocab, h), "lm_head", "out_proj")
    return ModelArch(
        name=top.str("name", "t5gemma"), model_type="t5gemma", family="gemma", hidden_size=h,
        num_layers=out["encoder"][2] + n_dec, num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter,
        vocab_size=vocab, tied_embeddings=tied, max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=True,
        norm="rmsnorm", norms_per_layer=4, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=softcap,
        final_softcap=final_softcap, dropout=0.0, tensors=tuple(b.tensors), block_linears=tuple(blk),
        dense_block_linears=tuple(blk), t5gemma={"encoder_layers": out["encoder"][2]},
        support="exact parameter count; activations traced (memory/blocks_seq2seq.py t5gemma_stacks: Gemma 2 "
                "layers, the decoder's cross-attention; tools/memtrace/golden/seq2seq/t5gemma-*); LoRA adapters "
                "on the decoder's cross_attn not counted in the parameters")
