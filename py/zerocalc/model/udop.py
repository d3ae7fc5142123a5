"""UDOP (transformers 5.24, modeling_udop.py UdopForConditionalGeneration): T5 stacks with image and layout
inputs, read from config.json by its own field names. Checked against the meta-device build in
tests/data/architectures.json (and untied / gated variants).

- shared (vocab x d_model) and patch_embed.proj (a Conv2d num_channels -> d_model of patch_size, biased);
- each UdopStack: embed_tokens (tied to shared), embed_patches.proj (the encoder's tied to patch_embed, the
  decoder's its own), T5 blocks (layer.0.SelfAttention q/k/v/o (heads·d_kv, no bias), block 0's
  relative_attention_bias, layer_norm; the decoder's layer.1.EncDecAttention; the DenseReluDense wi (or gated
  wi_0/wi_1, is_gated_act / feed_forward_proj "gated-*") / wo and layer_norm, weight-only norms),
  final_layer_norm, the encoder's cell_2d_embedding (x / y: max_2d_position_embeddings x hidden), and
  relative_bias.biases: one Embedding(relative_attention_num_buckets (+2 with prefix_bucket and not expand),
  heads) per relative_bias_args entry, the first tied to the encoder's block-0 relative bias;
- lm_head tied to shared.
Every tie above is one of UdopForConditionalGeneration._tied_weights_keys, which transformers 5 applies only
under tie_word_embeddings: untied, each is a parameter of its own.
Activations: memory/blocks_vision_seq2seq.py udop_stacks (T5 blocks, the encoder over seq_len text tokens + the
(image_size / patch_size)² image patches, ModelArch.image_patches; the layout embeddings and biases), traced
(tools/memtrace/vision_seq2seq_trace.py).
"""
from __future__ import annotations

from typing import Mapping

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

SUPPORT = ("exact parameter count; activations traced (memory/blocks_vision_seq2seq.py: T5 blocks, the encoder over "
           "seq_len text tokens + the image patches, the 2-D layout embeddings and biases; "
           "tools/memtrace/vision_seq2seq_trace.py; eager only)")
DEFAULT_BIASES = ({"type": "1d"}, {"type": "horizontal"}, {"type": "vertical"})


def udop(cfg: Mapping) -> ModelArch:
    c = ConfigReader(cfg)
    d, d_kv, d_ff, heads = c.int("d_model", default=1024), c.int("d_kv", default=64), c.int("d_ff", default=4096), \
        c.int("num_heads", default=16)
    n_enc = c.int("num_layers", default=24)
    n_dec = c.int("num_decoder_layers", default=n_enc)
    vocab, buckets = c.int("vocab_size", default=33201), c.int("relative_attention_num_buckets", default=32)
    patch, ch = c.int("patch_size", default=16), c.int("num_channels", default=3)
    gated = c.bool("is_gated_act", c.str("feed_forward_proj", "relu").startswith("gated"))
    tied = c.bool("tie_word_embeddings", True)
    inner = heads * d_kv
    biases = cfg.get("relative_bias_args") or DEFAULT_BIASES
    b = TensorList()
    b.matrix("shared", "weight", (vocab, d), "embedding")

    def patches(m: str) -> None:
        b.matrix(m, "weight", (d, ch, patch, patch), "embedding")
        b.param(m, "bias", d, "embedding")

    patches("patch_embed.proj")
    mlp = ("wi_0", "wi_1") if gated else ("wi",)
    for side, n in (("encoder", n_enc), ("decoder", n_dec)):
        if not tied:
            b.matrix(f"{side}.embed_tokens", "weight", (vocab, d), "embedding")
        if side == "decoder" or not tied:
            patches(f"{side}.embed_patches.proj")
        for i in range(n):
            p = f"{side}.block.{i}"
            atts = ("SelfAttention", "EncDecAttention") if side == "decoder" else ("SelfAttention",)
            for j, att in enumerate(atts):
                for name in ("q", "k", "v"):
                    b.linear(f"{p}.layer.{j}.{att}.{name}", d, inner, "attention")
                b.linear(f"{p}.layer.{j}.{att}.o", inner, d, "attention")
                if i == 0 and att == "SelfAttention":
                    b.matrix(f"{p}.layer.0.SelfAttention.relative_attention_bias", "weight", (buckets, heads),
                             "attention")
                b.norm(f"{p}.layer.{j}.layer_norm", d)
            f = f"{p}.layer.{len(atts)}"
            for name in mlp:
                b.linear(f"{f}.DenseReluDense.{name}", d, d_ff, "mlp")
            b.linear(f"{f}.DenseReluDense.wo", d_ff, d, "mlp")
            b.norm(f"{f}.layer_norm", d)
        b.norm(f"{side}.final_layer_norm", d)
        if side == "encoder":
            rows = c.int("max_2d_position_embeddings", default=1024)
            for axis in ("x", "y"):
                b.matrix(f"{side}.cell_2d_embedding.{axis}_position_embeddings", "weight", (rows, d), "embedding")
        for k, args in enumerate(biases):
            if k == 0 and tied:
                continue                        # tied to encoder.block.0's relative_attention_bias
            a = ConfigReader(args if isinstance(args, Mapping) else {})
            extra = 2 if a.bool("prefix_bucket", False) and not a.bool("expand", False) else 0
            b.matrix(f"{side}.relative_bias.biases.{k}.relative_attention_bias", "weight",
                     (a.int("relative_attention_num_buckets", default=32) + extra, heads), "attention")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, d), "lm_head", "lm_head")
    blk = tuple([Linear(x, d, inner) for x in ("q", "k", "v")] + [Linear("o", inner, d)]
                + [Linear(x, d, d_ff) for x in mlp] + [Linear("wo", d_ff, d)])
    drop = cfg.get("dropout_rate", 0.1)
    return ModelArch(
        name=c.str("name", "udop"), model_type="udop", family="t5", hidden_size=d, num_layers=n_enc + n_dec,
        num_heads=heads, num_kv_heads=heads, head_dim=d_kv, intermediate_size=d_ff, vocab_size=vocab,
        tied_embeddings=tied, max_positions=None, gated_mlp=gated, norm="rmsnorm", norms_per_layer=2, qk_norm="",
        causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool) else 0.0,
        tensors=tuple(b.tensors), block_linears=blk, dense_block_linears=blk, support=SUPPORT,
        image_patches=(c.int("image_size", default=224) // patch) ** 2)
