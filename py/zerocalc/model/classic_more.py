"""Language models (mostly of the pre-Llama era) whose blocks are their own (transformers 5.24), read from
config.json by their own field names; each checked against the meta-device build in tests/data/architectures.json.
Activations: costed by another family's block of memory/blocks.py (named in each SUPPORT string; not traced),
but XLM's, CPM-Ant's, ModernBERT-decoder's and Moshi's: memory/blocks_bert.py, memory/blocks_cpmant.py,
memory/blocks_modernbert.py, memory/blocks_moshi.py (traced).

- xlm (modeling_xlm.py XLMWithLMHeadModel): position_embeddings, lang_embeddings (n_langs > 1 and
  use_lang_emb), embeddings, layer_norm_emb; four parallel ModuleLists attentions (q/k/v/out_lin, biased),
  layer_norm1, ffns (lin1 emb_dim -> 4·emb_dim, lin2), layer_norm2 (post-norm, BERT-like); pred_layer.proj
  (tied to the embeddings, its own bias). The adaptive softmax (asm) is refused.
- xlnet (modeling_xlnet.py XLNetLMHeadModel): mask_emb, word_embedding; rel_attn q/k/v/o/r parameters of
  d_model x n_head x d_head, r_r/r_s/r_w biases, seg_embed, layer_norm; ff layer_norm, layer_1/layer_2;
  lm_loss (tied) with its bias.
- reformer (modeling_reformer.py ReformerModelWithLMHead): word_embeddings, axial position weights (one per
  axis: axial_pos_shape[k] x axial_pos_embds_dim[k]) or a max_position_embeddings table; per attn_layers entry
  a LayerNorm, LSH (query_key, value) or local (query, key, value) projections without bias, output.dense, a
  feed-forward LayerNorm and dense/output (biased); encoder.layer_norm over 2·hidden; lm_head.bias and
  lm_head.decoder (2·hidden -> vocab, biased, never tied).
- prophetnet (modeling_prophetnet.py ProphetNetForCausalLM): the wrapper's word_embeddings (the decoder's and
  lm_head tied to it), position_embeddings, ngram_embeddings; ngram self-attention key/value/query/out_proj and
  relative_pos_embeddings (hidden -> num_buckets·heads), all biased; cross_attn when add_cross_attention;
  feed_forward intermediate/output; embeddings_layer_norm.
- cpmant (modeling_cpmant.py CpmAntForCausalLM): pre-norm blocks of weight-only LayerNorms, project_q/k/v and
  attention_out (heads·dim_head), a gated w_0/w_1/w_out feed-forward, all without bias; output_layernorm,
  segment_embedding, input_embedding (vocab + prompt_types·prompt_length rows), the relative position bias
  (segment_types² + position_bias_num_buckets) x heads, an untied lm_head (_tied_weights_keys is empty).
- modernbert-decoder (modeling_modernbert_decoder.py ModernBertDecoderForCausalLM): tok_embeddings and their
  LayerNorm (norm_bias); attn_norm in every layer but the first (nn.Identity there), q/k/v_proj and Wo
  (attention_bias), mlp_norm, Wi (hidden -> 2·intermediate) / Wo (mlp_bias); final_norm; lm_head.dense
  (classifier_bias) and norm; the decoder tied to tok_embeddings, its bias by decoder_bias.
- moshi (modeling_moshi.py MoshiForCausalLM, the text model): embed_tokens of vocab_size + 1 rows; RMSNorms;
  q/k/v/o_proj as MoshiLinear wrapping an nn.Linear (``.linear``; GQA by num_key_value_heads x head_dim), the
  gating MLP fc1 (hidden -> ffn_dim) / fc2 (ffn_dim / 2 -> hidden), no biases; an untied lm_head. This is what
  AutoModelForCausalLM builds from every Moshi config (MoshiConfig always carries audio_encoder_config and
  depth_decoder_config); the depth decoder and Mimi codec of MoshiForConditionalGeneration are not counted, as
  model_support says.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

_NOT_TRACED = "exact parameter count; activations approximate (costed as the {} block of memory/blocks.py, not traced)"
# memory/blocks_bert.py's XLM layer (MultiHeadAttention's fp32 softmax and kept mask), traced as a causal LM
# (tools/memtrace/bert.py xlm rows, tests/test_bert_grid.py)
SUPPORT = {"xlm": "exact",
           # memory/blocks_xlnet.py, traced (tools/memtrace/own_attention_trace.py xlnet): the one stream a step
           # without target_mapping runs
           "xlnet": "exact parameter count; activations traced (memory/blocks_xlnet.py; "
                    "tools/memtrace/own_attention_trace.py) in bf16-mixed and fp32: XLNetRelativeAttention's "
                    "torch.FloatTensor parameters stay fp32 in a 16-bit build (no bf16-pure step runs)",
           # memory/blocks_reformer.py, traced (tools/memtrace/own_attention_trace.py reformer): what the reversible
           # layers keep at forward end and the layer recomputed in backward, where the step peaks
           "reformer": "exact parameter count; activations traced (memory/blocks_reformer.py; "
                       "tools/memtrace/own_attention_trace.py) in fp32 and bf16-mixed full fine-tuning, with the "
                       "reversible layers' recompute in backward (no bf16-pure, LoRA or checkpointing step runs)",
           # memory/blocks_prophetnet.py, traced (tools/memtrace/prophetnet_trace.py)
           "prophetnet": "exact parameter count; activations traced (memory/blocks_prophetnet.py; "
                         "tools/memtrace/prophetnet_trace.py), eager (its own einsum attention); the never-run "
                         "cross_attn takes no gradient, and LoRA adapters PEFT puts on it are not counted",
           # memory/blocks_cpmant.py, traced (tools/memtrace/own_blocks_trace.py cpmant)
           "cpmant": "exact parameter count; activations traced (memory/blocks_cpmant.py; "
                     "tools/memtrace/own_blocks_trace.py)",
           # memory/blocks_moshi.py, traced (tools/memtrace/families.py moshi rows)
           "moshi": "exact parameter count; activations traced (memory/blocks_moshi.py); the text model "
                    "(MoshiForCausalLM) only, without the depth decoder and audio codec",
           # memory/blocks_modernbert.py, traced (tools/memtrace/families.py modernbert rows)
           "modernbert-decoder": "exact"}


# a CPM-Ant config with dropout_p > 0: the traced layer has none (openbmb/cpm-ant-10b's 0.0)
CPMANT_DROPOUT = ("exact parameter count; activations approximate (memory/blocks_cpmant.py's traced layer, its "
                  "dropout_p not modelled)")


def xlm(c: ConfigReader) -> ModelArch:
    if c.bool("asm", False):
        raise PlanError("model.asm", "model_type 'xlm' with an adaptive softmax (asm) is not modelled")
    h, n, heads, vocab = c.int("emb_dim"), c.int("n_layers"), c.int("n_heads"), c.int("vocab_size")
    max_pos, langs = c.int("max_position_embeddings", default=512), c.int("n_langs", default=1)
    t = "transformer"
    b = TensorList()
    b.matrix(f"{t}.position_embeddings", "weight", (max_pos, h), "embedding")
    if langs > 1 and c.bool("use_lang_emb", True):
        b.matrix(f"{t}.lang_embeddings", "weight", (langs, h), "embedding")
    b.matrix(f"{t}.embeddings", "weight", (vocab, h), "embedding")
    b.norm(f"{t}.layer_norm_emb", h, bias=True)
    for i in range(n):                                      # XLMModel's four ModuleLists, in their order
        for name in ("q_lin", "k_lin", "v_lin", "out_lin"):
            b.linear(f"{t}.attentions.{i}.{name}", h, h, "attention", bias=True)
    for i in range(n):
        b.norm(f"{t}.layer_norm1.{i}", h, bias=True)
    for i in range(n):
        b.linear(f"{t}.ffns.{i}.lin1", h, 4 * h, "mlp", bias=True)
        b.linear(f"{t}.ffns.{i}.lin2", 4 * h, h, "mlp", bias=True)
    for i in range(n):
        b.norm(f"{t}.layer_norm2.{i}", h, bias=True)
    tied = c.bool("tie_word_embeddings", True)
    b.param("pred_layer.proj", "bias", vocab, "other")
    if not tied:
        b.matrix("pred_layer.proj", "weight", (vocab, h), "lm_head", "proj")
    blk = [Linear(x, h, h) for x in ("q_lin", "k_lin", "v_lin", "out_lin")] + [Linear("lin1", h, 4 * h),
                                                                               Linear("lin2", 4 * h, h)]
    return _arch(c, "xlm", b, "bert", h, n, heads, h // heads, 4 * h, vocab, tied, max_pos, blk,
                 c.cfg.get("dropout"), per_layer_block=f"{t}.layer")


def xlnet(c: ConfigReader) -> ModelArch:
    h, n, heads, vocab = c.int("d_model"), c.int("n_layer"), c.int("n_head"), c.int("vocab_size")
    hd, inner = c.int("d_head", default=h // heads), c.int("d_inner")
    t = "transformer"
    b = TensorList()
    b.matrix(t, "mask_emb", (1, 1, h), "embedding")
    b.matrix(f"{t}.word_embedding", "weight", (vocab, h), "embedding")
    for i in range(n):
        p = f"{t}.layer.{i}"
        for name in ("q", "k", "v", "o", "r"):
            b.matrix(f"{p}.rel_attn", name, (h, heads, hd), "attention")
        for name in ("r_r_bias", "r_s_bias", "r_w_bias"):
            b.matrix(f"{p}.rel_attn", name, (heads, hd), "attention")
        b.matrix(f"{p}.rel_attn", "seg_embed", (2, heads, hd), "attention")
        b.norm(f"{p}.rel_attn.layer_norm", h, bias=True)
        b.norm(f"{p}.ff.layer_norm", h, bias=True)
        b.linear(f"{p}.ff.layer_1", h, inner, "mlp", bias=True)
        b.linear(f"{p}.ff.layer_2", inner, h, "mlp", bias=True)
    tied = c.bool("tie_word_embeddings", True)
    if not tied:
        b.matrix("lm_loss", "weight", (vocab, h), "lm_head", "lm_loss")
    b.param("lm_loss", "bias", vocab, "other")
    # q/k/v/o/r are nn.Parameters (PEFT's LoRA cannot target them); listed for the block's matmuls
    blk = [Linear(x, h, heads * hd) for x in ("q", "k", "v", "o", "r")] + [Linear("layer_1", h, inner),
                                                                          Linear("layer_2", inner, h)]
    return _arch(c, "xlnet", b, "bert", h, n, heads, hd, inner, vocab, tied, None, blk, c.cfg.get("dropout"))


def reformer(c: ConfigReader) -> ModelArch:
    h, heads, vocab = c.int("hidden_size"), c.int("num_attention_heads"), c.int("vocab_size")
    hs, ff = c.int("attention_head_size", default=64), c.int("feed_forward_size", default=512)
    kinds = c.cfg.get("attn_layers") or ["local", "lsh", "local", "lsh", "local", "lsh"]
    if not isinstance(kinds, list) or not set(kinds) <= {"lsh", "local"}:
        raise PlanError("model.attn_layers", "model_type 'reformer' needs attn_layers of 'lsh' / 'local'")
    a, n, max_pos = heads * hs, len(kinds), c.int("max_position_embeddings", default=4096)
    b = TensorList()
    p = "reformer.embeddings"
    b.matrix(f"{p}.word_embeddings", "weight", (vocab, h), "embedding")
    if c.bool("axial_pos_embds", True):
        shape, dims = c.cfg.get("axial_pos_shape") or [64, 64], c.cfg.get("axial_pos_embds_dim") or [64, 192]
        for k, (rows, dim) in enumerate(zip(shape, dims)):
            b.matrix(f"{p}.position_embeddings.weights", str(k), (rows, dim), "embedding")
    else:
        b.matrix(f"{p}.position_embeddings.embedding", "weight", (max_pos, h), "embedding")
    for i, kind in enumerate(kinds):
        q = f"reformer.encoder.layers.{i}"
        b.norm(f"{q}.attention.layer_norm", h, bias=True)
        for name in ("query_key", "value") if kind == "lsh" else ("query", "key", "value"):
            b.linear(f"{q}.attention.self_attention.{name}", h, a, "attention")
        b.linear(f"{q}.attention.output.dense", a, h, "attention")
        b.norm(f"{q}.feed_forward.layer_norm", h, bias=True)
        b.linear(f"{q}.feed_forward.dense.dense", h, ff, "mlp", bias=True)
        b.linear(f"{q}.feed_forward.output.dense", ff, h, "mlp", bias=True)
    b.norm("reformer.encoder.layer_norm", 2 * h, bias=True)
    b.param("lm_head", "bias", vocab, "lm_head")
    b.linear("lm_head.decoder", 2 * h, vocab, "lm_head", bias=True)
    blk = [Linear(x, h, a) for x in ("query", "key", "value")] + [Linear("dense", a, h), Linear("dense", h, ff),
                                                                 Linear("dense", ff, h)]
    arch = _arch(c, "reformer", b, "gpt2", h, n, heads, hs, ff, vocab, False, max_pos, blk,
                 c.cfg.get("hidden_dropout_prob"))
    # memory/blocks_reformer.py: the LSH layers' buckets _ReversibleFunction keeps (ctx.all_buckets)
    # and the layer recomputed in backward (reversible_backward_moment): each kind's chunking and dropout
    chunking = {kind: (c.int(f"{kind}_attn_chunk_length", default=64),
                       c.int(f"{kind}_num_chunks_before", default=1, lo=0),
                       c.int(f"{kind}_num_chunks_after", default=0, lo=0),
                       float(c.cfg.get(f"{kind}_attention_probs_dropout_prob", 0.05 if kind == "local" else 0.0)
                             or 0.0)) for kind in ("local", "lsh")}
    return replace(arch, own={"lsh_layers": kinds.count("lsh"), "num_hashes": c.int("num_hashes", default=1),
                              "kinds": tuple(kinds), "ff_chunk": c.int("chunk_size_feed_forward", default=0, lo=0),
                              **chunking})


def prophetnet(c: ConfigReader) -> ModelArch:
    h, vocab, max_pos = c.int("hidden_size"), c.int("vocab_size"), c.int("max_position_embeddings", default=512)
    n, heads, ffn = c.int("num_decoder_layers"), c.int("num_decoder_attention_heads"), c.int("decoder_ffn_dim")
    buckets, cross = c.int("num_buckets", default=32), c.bool("add_cross_attention", True)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("prophetnet.word_embeddings", "weight", (vocab, h), "embedding")
    d = "prophetnet.decoder"
    if not tied:
        b.matrix(f"{d}.word_embeddings", "weight", (vocab, h), "embedding")
    b.matrix(f"{d}.position_embeddings", "weight", (max_pos, h), "embedding")
    b.matrix(f"{d}.ngram_embeddings", "weight", (c.int("ngram", default=2), h), "embedding")
    for i in range(n):
        p = f"{d}.layers.{i}"
        for att in ("self_attn", "cross_attn") if cross else ("self_attn",):
            for name in ("key_proj", "value_proj", "query_proj", "out_proj"):
                b.linear(f"{p}.{att}.{name}", h, h, "attention", bias=True)
            if att == "self_attn":
                b.linear(f"{p}.self_attn.relative_pos_embeddings", h, buckets * heads, "attention", bias=True)
            b.norm(f"{p}.{att}_layer_norm", h, bias=True)
        b.linear(f"{p}.feed_forward.intermediate", h, ffn, "mlp", bias=True)
        b.linear(f"{p}.feed_forward.output", ffn, h, "mlp", bias=True)
        b.norm(f"{p}.feed_forward_layer_norm", h, bias=True)
    b.norm(f"{d}.embeddings_layer_norm", h, bias=True)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    blk = [Linear(x, h, h) for x in ("key_proj", "value_proj", "query_proj", "out_proj")] + \
          [Linear("intermediate", h, ffn), Linear("output", ffn, h)]
    pn = {"ngram": c.int("ngram", default=2), "buckets": buckets,
          "attn_dropout": float(c.cfg.get("attention_dropout", 0.1) or 0.0),
          "act_dropout": float(c.cfg.get("activation_dropout", 0.1) or 0.0)}
    return replace(_arch(c, "prophetnet", b, "gpt2", h, n, heads, h // heads, ffn, vocab, tied, max_pos, blk,
                         c.cfg.get("dropout")), prophetnet=pn)


def cpmant(c: ConfigReader) -> ModelArch:
    h, n, heads, vocab = _sizes(c)
    hd, ff = c.int("dim_head", default=128), c.int("dim_ff", default=10240)
    seg = c.int("segment_types", default=32)
    prompts = c.int("prompt_types", default=32, lo=0) * c.int("prompt_length", default=32, lo=0)
    b = TensorList()
    for i in range(n):
        p = f"cpmant.encoder.layers.{i}"
        b.norm(f"{p}.self_att.layernorm_before_attention", h)
        for name in ("project_q", "project_k", "project_v"):
            b.linear(f"{p}.self_att.self_attention.{name}", h, heads * hd, "attention")
        b.linear(f"{p}.self_att.self_attention.attention_out", heads * hd, h, "attention")
        b.norm(f"{p}.ffn.layernorm_before_ffn", h)
        b.linear(f"{p}.ffn.ffn.w_in.w_0", h, ff, "mlp")
        b.linear(f"{p}.ffn.ffn.w_in.w_1", h, ff, "mlp")
        b.linear(f"{p}.ffn.ffn.w_out", ff, h, "mlp")
    b.norm("cpmant.encoder.output_layernorm", h)
    b.matrix("cpmant.segment_embedding", "weight", (seg, h), "embedding")
    b.matrix("cpmant.input_embedding", "weight", (vocab + prompts, h), "embedding")
    b.matrix("cpmant.position_bias", "relative_attention_bias",
             (seg * seg + c.int("position_bias_num_buckets", default=512), heads), "attention")
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    blk = [Linear(x, h, heads * hd) for x in ("project_q", "project_k", "project_v")] + \
          [Linear("attention_out", heads * hd, h), Linear("w_0", h, ff), Linear("w_1", h, ff), Linear("w_out", ff, h)]
    arch = _arch(c, "cpmant", b, "gpt2", h, n, heads, hd, ff, vocab, False, None, blk, c.cfg.get("dropout_p"),
                 gated=True, norm="rmsnorm")
    # CpmAntModel.forward prepends prompt_length prompt tokens to every sequence (memory/blocks_cpmant.py)
    support = arch.support if arch.dropout == 0 else CPMANT_DROPOUT
    return replace(arch, prompt_tokens=c.int("prompt_length", default=32, lo=0), support=support)


def modernbert_decoder(c: ConfigReader) -> ModelArch:
    h, n, heads, vocab = _sizes(c)
    inter = c.int("intermediate_size")
    nb, ab, mb = c.bool("norm_bias", False), c.bool("attention_bias", False), c.bool("mlp_bias", False)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embeddings.tok_embeddings", "weight", (vocab, h), "embedding")
    b.norm("model.embeddings.norm", h, bias=nb)
    for i in range(n):
        p = f"model.layers.{i}"
        if i:
            b.norm(f"{p}.attn_norm", h, bias=nb)
        for name in ("q_proj", "k_proj", "v_proj", "Wo"):
            b.linear(f"{p}.attn.{name}", h, h, "attention", bias=ab)
        b.norm(f"{p}.mlp_norm", h, bias=nb)
        b.linear(f"{p}.mlp.Wi", h, 2 * inter, "mlp", bias=mb)
        b.linear(f"{p}.mlp.Wo", inter, h, "mlp", bias=mb)
    b.norm("model.final_norm", h, bias=nb)
    b.linear("lm_head.dense", h, h, "lm_head", bias=c.bool("classifier_bias", False))
    b.param("lm_head.norm", "weight", h, "lm_head")
    if nb:
        b.param("lm_head.norm", "bias", h, "lm_head")
    if not tied:
        b.matrix("decoder", "weight", (vocab, h), "lm_head", "decoder")
    if c.bool("decoder_bias", True):
        b.param("decoder", "bias", vocab, "other")
    blk = [Linear(x, h, h) for x in ("q_proj", "k_proj", "v_proj", "Wo")] + [Linear("Wi", h, 2 * inter),
                                                                          Linear("Wo", inter, h)]
    return _arch(c, "modernbert-decoder", b, "gpt2", h, n, heads, h // heads, inter, vocab, tied,
                 c.cfg.get("max_position_embeddings"), blk, c.cfg.get("attention_dropout"), gated=True)


def moshi(c: ConfigReader) -> ModelArch:
    h, n, heads, vocab = _sizes(c)
    kv, ffn = c.int("num_key_value_heads", default=heads), c.int("ffn_dim", default=22528)
    hd = c.int("head_dim", default=h // heads)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab + 1, h), "embedding")
    for i in range(n):
        p = f"model.layers.{i}"
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.matrix(f"{p}.self_attn.{name}.linear", "weight", (d_out, d_in), "attention", name)
        b.linear(f"{p}.mlp.fc1", h, ffn, "mlp")
        b.linear(f"{p}.mlp.fc2", ffn // 2, h, "mlp")
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
    b.norm("model.norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    blk = [Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
           Linear("o_proj", heads * hd, h), Linear("fc1", h, ffn), Linear("fc2", ffn // 2, h)]
    arch = _arch(c, "moshi", b, "gpt2", h, n, heads, hd, ffn // 2, vocab, False,
                 c.cfg.get("max_position_embeddings"), blk, c.cfg.get("attention_dropout"), gated=True, norm="rmsnorm")
    return replace(arch, num_kv_heads=kv)


def _sizes(c: ConfigReader) -> tuple[int, int, int, int]:
    return c.int("hidden_size"), c.int("num_hidden_layers"), c.int("num_attention_heads"), c.int("vocab_size")


CLASSIC_MORE = {"xlm": xlm, "xlnet": xlnet, "reformer": reformer, "prophetnet": prophetnet, "cpmant": cpmant,
                "modernbert-decoder": modernbert_decoder, "moshi": moshi}


def _arch(c: ConfigReader, model_type: str, b: TensorList, family: str, h: int, n: int, heads: int, hd: int,
          inter: int, vocab: int, tied: bool, max_pos, blk: list, drop, gated: bool = False, norm: str = "layernorm",
          per_layer_block: str = "") -> ModelArch:
    tensors = tuple(b.tensors)
    if per_layer_block:      # parallel ModuleLists (XLM): one block per layer index, as FSDP would wrap a layer
        tensors = tuple(replace(t, block=f"{per_layer_block}.{t.layer}") if t.block else t for t in tensors)
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family=family, hidden_size=h, num_layers=n,
        num_heads=heads, num_kv_heads=heads, head_dim=hd, intermediate_size=inter, vocab_size=vocab,
        tied_embeddings=tied, max_positions=max_pos if isinstance(max_pos, int) else None, gated_mlp=gated,
        norm=norm, norms_per_layer=2, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False,
        final_softcap=False,
        dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool) else 0.0,
        tensors=tensors, block_linears=tuple(blk), dense_block_linears=tuple(blk), support=SUPPORT[model_type])
