"""BERT-lineage encoders built as causal LMs (the ``*ForCausalLM`` classes of transformers 5.24's causal-LM
mapping: RobertaForCausalLM, ErnieForCausalLM, ElectraForCausalLM, ...), as data: per model_type the base
model's attribute name, the embeddings it registers, the order of a layer's tensors, the final norm and pooler
if any, and the LM head (a transform dense + LayerNorm, a vocabulary bias; its decoder is the word embedding
unless ``tie_word_embeddings`` is false). Sources: src/transformers/models/<model_type>/modeling_<x>.py
(the *Embeddings, *Layer, *LMHead / *OnlyMLMHead classes); every row checked against the meta-device build
in tests/data/architectures.json. With ``add_cross_attention`` (the decoder of an encoder-decoder) each layer's
crossattention is counted; ``base_model`` builds the bare encoder of model/encdec.py.
Activations: memory/blocks_bert.py's layers for the types in TRACED (traced as causal LMs: tools/memtrace/bert.py),
else the BERT block of memory/blocks.py (classic_block)."""
from __future__ import annotations

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

# parameters checked against transformers (tests/test_architectures.py); activations not traced for these
SUPPORT = ("exact parameter count; activations approximate (costed as the BERT block of memory/blocks.py, "
           "not traced)")
# activations: memory/blocks_bert.py's layers, traced on each of these as a causal LM (tools/memtrace/bert.py,
# tests/test_bert_grid.py); a config with add_cross_attention (registered, not run without an encoder) is not
TRACED = ("roberta", "camembert", "xlm-roberta", "data2vec-text", "ernie", "bert-generation", "electra", "big_bird",
          "roformer", "roberta-prelayernorm", "xlm-roberta-xl", "megatron-bert", "rembert", "roc_bert", "xmod")
# exact: nothing for advice.py's model-approximate warning to say
TRACED_SUPPORT = "exact"
# BigBird: both attention types traced (original_full: tools/memtrace/bert.py; block_sparse, which
# modeling_big_bird.py BigBirdModel.forward runs above (5 + 2·num_random_blocks)·block_size tokens, and the default
# gelu_new: tools/memtrace/own_attention_trace.py big_bird, memory/blocks_big_bird.py)

_ROBERTA_EMB = ("word", "token_type", "ln", "position")
_BERT_EMB = ("word", "position", "token_type", "ln")
_POST = ("attn", "attn_out_ln", "mlp", "out_ln")                 # BertLayer: post-LayerNorm
_ROBERTA_HEAD = ("lm_head", "lm_head.dense", "lm_head.layer_norm")
_CLS_HEAD = ("cls.predictions", "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm")

# model_type -> (base attribute, embeddings, layer order, final norm ("" none), pooler, head (bias module,
# transform dense ("" none), transform norm), tie default)
ENCODERS = {
    "roberta": ("roberta", _ROBERTA_EMB, _POST, "", False, _ROBERTA_HEAD),
    "camembert": ("roberta", _ROBERTA_EMB, _POST, "", False, _ROBERTA_HEAD),
    "xlm-roberta": ("roberta", _ROBERTA_EMB, _POST, "", False, _ROBERTA_HEAD),
    "data2vec-text": ("data2vec_text", _ROBERTA_EMB, _POST, "", False, _ROBERTA_HEAD),
    # modeling_roberta_prelayernorm.py: attention.LayerNorm and intermediate.LayerNorm before each sublayer,
    # a final LayerNorm on the base model
    "roberta-prelayernorm": ("roberta_prelayernorm", _ROBERTA_EMB,
                             ("attn", "attn_ln", "inter_ln", "mlp"), "LayerNorm", False, _ROBERTA_HEAD),
    # modeling_xlm_roberta_xl.py: no embedding LayerNorm, pre-norm layers, encoder.LayerNorm at the end
    "xlm-roberta-xl": ("roberta", ("word", "token_type", "position"), ("attn", "self_attn_ln", "mlp", "ln"),
                       "encoder.LayerNorm", False, _ROBERTA_HEAD),
    "ernie": ("ernie", _BERT_EMB, _POST, "", False, _CLS_HEAD),
    # modeling_big_bird.py BigBirdForCausalLM keeps the pooler (add_pooling_layer=True)
    "big_bird": ("bert", _BERT_EMB, _POST, "", True, _CLS_HEAD),
    # modeling_megatron_bert.py: no embedding LayerNorm, attention.ln / ln before each sublayer, encoder.ln
    "megatron-bert": ("bert", ("word", "position", "token_type"), ("attn_pre_ln", "attn", "pre_ln", "mlp"),
                      "encoder.ln", False, _CLS_HEAD),
    # modeling_bert_generation.py: no token types; BertGenerationOnlyLMHead is the decoder and its bias
    "bert-generation": ("bert", ("word", "position", "ln"), _POST, "", False, ("lm_head", "", "")),
    # modeling_roformer.py: no learned positions (encoder.embed_positions, a sinusoidal nn.Embedding of
    # max_position_embeddings x head_dim, is a parameter all the same)
    "roformer": ("roformer", ("word", "token_type", "ln"), _POST, "", False, _CLS_HEAD),
    # modeling_electra.py: embeddings of embedding_size, embeddings_project to hidden_size when they differ;
    # the generator head: dense hidden -> embedding_size, LayerNorm, generator_lm_head (tied) + bias
    "electra": ("electra", _BERT_EMB, _POST, "", False, ("generator_lm_head", "generator_predictions.dense",
                                                         "generator_predictions.LayerNorm")),
    # modeling_roc_bert.py RoCBertEmbeddings: pronunciation and shape embeddings concatenated with the words
    # (concat_input) through map_inputs_layer
    "roc_bert": ("roc_bert", ("word", "pron", "shape", "position", "token_type", "map_in", "ln"), _POST, "", False,
                 _CLS_HEAD),
    # modeling_xmod.py: RoBERTa with per-language bottleneck adapters in each layer's output (dense1/dense2,
    # hidden / adapter_reduction_factor; an adapter_layer_norm when asked)
    "xmod": ("roberta", _ROBERTA_EMB, ("attn", "attn_out_ln", "mlp", "out_ln", "adapters"), "", False,
             _ROBERTA_HEAD),
    # modeling_rembert.py: input_embedding_size embeddings mapped to hidden_size (encoder.embedding_hidden_mapping_in),
    # an untied output head of output_embedding_size (dense, decoder with its bias, LayerNorm)
    "rembert": ("rembert", _BERT_EMB, _POST, "", False, ("cls.predictions", "", "")),
}


# BertLMHeadModel (modeling_bert.py): a decoder of the encoder-decoder composite; a bare "bert" config is BertModel
# (classic.py), as the engine's presets count it
LM_ONLY = {"bert": ("bert", _BERT_EMB, _POST, "", False, _CLS_HEAD),
           # modeling_blip_text.py BlipTextLMHeadModel: no token types; every layer of a decoder (is_decoder) has
           # a crossattention whose key/value read encoder_hidden_size (the vision tower's width)
           "blip_text_model": ("bert", ("word", "position", "ln"), _POST, "", False, _CLS_HEAD),
           # modeling_git.py GitModel's text side (its head, ``output``, is vision_encdec.py's)
           "git": ("git", ("word", "position", "ln"), _POST, "", False, ("", "", ""))}
# the base models AutoModel builds without a pooler (ElectraModel, BertGenerationEncoder, RoFormerModel, GitModel)
NO_POOLER = ("electra", "bert-generation", "roformer", "git")
_ATTENTION_PARTS = ("attn", "attn_out_ln", "attn_ln", "self_attn_ln", "attn_pre_ln")


def encoder_lm(c: ConfigReader, model_type: str, *, base_model: bool = False) -> ModelArch:
    """The *ForCausalLM of a BERT-lineage config; ``base_model``: the bare AutoModel (no LM head, the pooler
    except in NO_POOLER, no ``<base>.`` prefix), the encoder of an encoder-decoder. With ``add_cross_attention``
    every layer registers a ``crossattention`` copy of its attention (four biased linears and the attention's
    LayerNorm: *Layer.__init__), counted though a causal LM alone never runs it."""
    row = ENCODERS.get(model_type) or LM_ONLY[model_type]
    base, emb, order, final, pooler, (bias_mod, dense, head_norm) = row
    cross = c.bool("add_cross_attention", False) or (model_type == "blip_text_model" and c.bool("is_decoder", True))
    if base_model:
        pooler = model_type not in NO_POOLER
    att = [part for part in order if part in _ATTENTION_PARTS]
    if cross:                                # crossattention is registered after attention, before the MLP
        i = max(order.index(part) for part in att) + 1
        order = order[:i] + tuple("cross_" + part for part in att) + order[i:]
    h, n = c.int("hidden_size"), c.int("num_hidden_layers")
    heads, vocab = c.int("num_attention_heads"), c.int("vocab_size")
    inter = c.int("intermediate_size", default=4 * h)
    e = (c.int("embedding_size", default=h) if model_type in ("electra", "roformer")
         else c.int("input_embedding_size", default=256) if model_type == "rembert" else h)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    sizes = {"word": (vocab, e), "position": (c.int("max_position_embeddings", default=512), e),
             "token_type": (c.int("type_vocab_size", default=2), e)}
    pron, shape = c.int("pronunciation_embed_dim", default=768), c.int("shape_embed_dim", default=512)
    sizes |= {"pron": (c.int("pronunciation_vocab_size", default=910), pron),
              "shape": (c.int("shape_vocab_size", default=24858), shape)}
    for part in emb:
        if part == "ln":
            b.norm(f"{base}.embeddings.LayerNorm", e, bias=True)
        elif part in ("pron", "shape"):
            b.matrix(f"{base}.embeddings.{'pronunciation' if part == 'pron' else 'shape'}_embed", "weight",
                     sizes[part], "embedding")
        elif part == "map_in":
            b.linear(f"{base}.embeddings.map_inputs_layer", h + pron + shape, h, "embedding", bias=True)
        else:
            b.matrix(f"{base}.embeddings.{part}_embeddings", "weight", sizes[part], "embedding")
    if e != h:
        mapping = "encoder.embedding_hidden_mapping_in" if model_type == "rembert" else "embeddings_project"
        b.linear(f"{base}.{mapping}", e, h, "other", bias=True)
    if model_type == "roformer":
        b.matrix(f"{base}.encoder.embed_positions", "weight", (sizes["position"][0], h // heads), "embedding")
    norms = {"attn_out_ln": "attention.output.LayerNorm", "out_ln": "output.LayerNorm", "attn_ln": "attention.LayerNorm",
             "inter_ln": "intermediate.LayerNorm", "self_attn_ln": "attention.self_attn_layer_norm", "ln": "LayerNorm",
             "attn_pre_ln": "attention.ln", "pre_ln": "ln"}
    kv_cross = c.int("encoder_hidden_size", default=h) if model_type == "blip_text_model" else h
    for i in range(n):
        p = f"{base}.encoder.layer.{i}"
        for part in order:
            mod = "attention"
            if part.startswith("cross_"):
                mod, part = "crossattention", part[len("cross_"):]
            if part == "attn":
                kv_in = kv_cross if mod == "crossattention" else h
                for name, d_in in (("query", h), ("key", kv_in), ("value", kv_in)):
                    b.linear(f"{p}.{mod}.self.{name}", d_in, h, "attention", bias=True)
                b.linear(f"{p}.{mod}.output.dense", h, h, "attention", bias=True)
            elif part == "mlp":
                b.linear(f"{p}.intermediate.dense", h, inter, "mlp", bias=True)
                b.linear(f"{p}.output.dense", inter, h, "mlp", bias=True)
            elif part == "adapters":
                if c.bool("adapter_layer_norm", False):
                    b.norm(f"{p}.output.adapter_layer_norm", h, bias=True)
                bottleneck = h // c.int("adapter_reduction_factor", default=2)
                for lang in c.cfg.get("languages") or ["en_XX"]:
                    b.linear(f"{p}.output.adapter_modules.{lang}.dense1", h, bottleneck, "mlp", bias=True)
                    b.linear(f"{p}.output.adapter_modules.{lang}.dense2", bottleneck, h, "mlp", bias=True)
            else:
                b.norm(f"{p}.{norms[part].replace('attention.', mod + '.', 1)}", h, bias=True)
    if final:
        b.norm(f"{base}.{final}", h, bias=True)
    if pooler:
        b.linear(f"{base}.pooler.dense", h, h, "other", bias=True)
    if base_model:
        bias_mod = dense = ""
        tied = True
    elif model_type == "rembert":
        out = c.int("output_embedding_size", default=1664)
        b.linear("cls.predictions.dense", h, out, "lm_head", bias=True)
        b.linear("cls.predictions.decoder", out, vocab, "lm_head", bias=True)
        b.norm("cls.predictions.LayerNorm", out, bias=True)
        bias_mod = ""                        # the head is complete: its decoder is its own, with its bias
    # transformers files ELECTRA's generator head outside lm_head (tests/data/architectures.json parts)
    head = "other" if model_type == "electra" else "lm_head"
    if bias_mod:
        b.param(bias_mod, "bias", vocab, head)
    if dense:
        b.linear(dense, h, e, head, bias=True)
        b.param(head_norm, "weight", e, head)
        b.param(head_norm, "bias", e, head)
    if not tied and model_type != "rembert":
        b.matrix(f"{bias_mod}.decoder" if bias_mod != "generator_lm_head" else bias_mod, "weight", (vocab, e),
                 "lm_head", "decoder")
        if bias_mod != "generator_lm_head":
            # *LMPredictionHead.decoder is nn.Linear(..., bias=True): its bias is tied to the head's own bias
            # only with the weight (transformers 5 tie_weights); untied it is one more vocab-sized vector
            b.param(f"{bias_mod}.decoder", "bias", vocab, "lm_head")
    blk = (Linear("query", h, h), Linear("key", h, h), Linear("value", h, h), Linear("dense", h, h),
           Linear("dense", h, inter), Linear("dense", inter, h))
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="bert", hidden_size=h, num_layers=n,
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads, intermediate_size=inter, vocab_size=vocab,
        tied_embeddings=tied, max_positions=sizes["position"][0], gated_mlp=False, norm="layernorm",
        norms_per_layer=2, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False,
        final_softcap=False, dropout=float(c.cfg.get("hidden_dropout_prob", 0.1) or 0.0), tensors=tuple(b.tensors),
        block_linears=blk, dense_block_linears=blk,
        support=_support(c, model_type, cross), own=_own(c, model_type, cross))


def _own(c: ConfigReader, model_type: str, cross: bool) -> dict | None:
    """BigBird's switches for memory/blocks_big_bird.py (BigBirdConfig's defaults): block_sparse unless
    add_cross_attention (BigBirdModel.__init__ sets original_full then), block_size, num_random_blocks, hidden_act
    (gelu_new by default: the layers' and the head transform's activation)."""
    if model_type != "big_bird":
        return None
    sparse = c.str("attention_type", "block_sparse") == "block_sparse" and not cross
    return {"block_sparse": sparse, "block_size": c.int("block_size", default=64),
            "random_blocks": c.int("num_random_blocks", default=3), "act": c.str("hidden_act", "gelu_new")}


def _support(c: ConfigReader, model_type: str, cross: bool) -> str:
    if cross:
        return SUPPORT + "; LoRA adapters on the crossattention not counted"
    if model_type == "xmod" and (c.bool("pre_norm", False) or not (c.bool("adapter_reuse_layer_norm", True)
                                                                    or c.bool("adapter_layer_norm", False))):
        # traced: the post-LayerNorm layer with a LayerNorm before the adapter (memory/blocks_bert.py _xmod_adapter)
        return SUPPORT
    return TRACED_SUPPORT if model_type in TRACED else SUPPORT
