"""Saved tensors of the BERT-lineage causal LMs (the *ForCausalLM classes model/encoders.py builds: RoBERTa and its
copies, ERNIE, BertGeneration, ELECTRA, RemBERT, RoCBert, BigBird, RoFormer, RoBERTa-PreLayerNorm, XLM-RoBERTa-XL,
Megatron-BERT) and XLM (XLMWithLMHeadModel: the same post-LayerNorm layer in parallel ModuleLists).

Each rule is the op sequence of transformers 5.24's modelling file and what each op keeps for backward, read off
fake-tensor traces of the real step with is_decoder=True (tools/memtrace/bert.py; fixtures in
tools/memtrace/golden/bert/, held within 3 % by tests/test_bert_grid.py).

- modeling_bert.py BertLayer (post-LayerNorm; RobertaLayer, ErnieLayer, BertGenerationLayer, ElectraLayer,
  BigBirdLayer, RoFormerLayer are copies): BertSelfAttention's query/key/value read the layer input;
  BertSelfOutput.forward `LayerNorm(dropout(dense(x)) + input_tensor)`; BertIntermediate dense -> GELU (F.gelu keeps
  its input); BertOutput.forward `LayerNorm(dropout(dense(x)) + input_tensor)`. Each LayerNorm keeps its input (the
  sum, a new tensor) and mean/rstd; each dropout its bool mask. Under autocast layer_norm runs in fp32, so the
  residual stream after the first LayerNorm is fp32 whatever the weights, and every linear reading it casts its own
  16-bit copy. Traced (bf16, FA2): 8·t·h + 2·t·I 16-bit elements and two t·h masks per layer.
- modeling_roberta_prelayernorm.py / modeling_xlm_roberta_xl.py / modeling_megatron_bert.py: a LayerNorm before
  each sublayer (attention.LayerNorm / self_attn_layer_norm / attention.ln, then intermediate.LayerNorm /
  LayerNorm / ln), the residual sums kept in the stream's dtype, a final LayerNorm before the head; the same
  8·t·h + 2·t·I per layer.
- modeling_xmod.py XmodLayer (X-MOD): the BertLayer, then XmodOutput.lang_adapter on the output LayerNorm's
  output: dense1 -> activation -> dense2 on the language's rows, dropout, the residual, output.LayerNorm again
  (_xmod_adapter).
- Attention: those that call ALL_ATTENTION_FUNCTIONS keep FA2's / SDPA's q, k, v, output and logsumexp; RemBERT
  (RemBertSelfAttention), BigBird (BigBirdSelfAttention in "original_full"; block_sparse and gelu_new:
  memory/blocks_big_bird.py), RoFormer
  (RoFormerSelfAttention: rotary on q and k, then matmul) and Megatron-BERT (MegatronBertSelfAttention) run their
  own eager matmul / softmax / dropout whatever the plan asks: q, k, v, the softmax output, the dropout mask and
  its output (memory/blocks.py attention_core, classic eager rule); XLM's MultiHeadAttention keeps an fp32 softmax
  and its bool mask (_xlm_attention).
- Outside the blocks (modeling_bert.py BertEmbeddings, BertLMPredictionHead): the embedding sum's LayerNorm (input,
  stats) and dropout mask (none in XLM-RoBERTa-XL and Megatron-BERT), RoCBert's map_inputs_layer input, ELECTRA's
  embeddings_project and RemBERT's embedding_hidden_mapping_in input; the head's transform dense -> GELU -> LayerNorm
  -> decoder, at the transform's width (ELECTRA's embedding_size, RemBERT's output_embedding_size; BertGeneration's
  head is the decoder alone).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, attention_core, linear
from .blocks_big_bird import band_mask, block_sparse, block_sparse_attention, gelu_new, gelu_new_saved
from .blocks_families import layernorm
from .lora import Adapter


@dataclass(frozen=True)
class Variant:
    pre_ln: bool = False          # a LayerNorm before each sublayer and a final one
    emb_ln: bool = True           # the embeddings' LayerNorm
    own_eager: bool = False       # the self-attention is the model's own matmul / softmax code
    mlp_dropout: bool = True      # the MLP output's dropout
    xlm: bool = False             # modeling_xlm.py MultiHeadAttention (fp32 softmax, a kept bool mask)
    xmod: bool = False            # modeling_xmod.py: a language adapter after the output LayerNorm (_xmod_adapter)


POST = Variant()
BERT = {**{t: POST for t in ("roberta", "camembert", "xlm-roberta", "data2vec-text", "ernie", "electra")},
        "bert-generation": POST, "roc_bert": POST, "rembert": Variant(own_eager=True),
        "big_bird": Variant(own_eager=True), "roformer": Variant(own_eager=True),
        "roberta-prelayernorm": Variant(pre_ln=True),
        # modeling_xlm_roberta_xl.py XLMRobertaXLOutput.forward: `dense(x) + input_tensor`, no dropout
        "xlm-roberta-xl": Variant(pre_ln=True, emb_ln=False, mlp_dropout=False),
        "megatron-bert": Variant(pre_ln=True, emb_ln=False, own_eager=True),
        "xlm": Variant(own_eager=True, xlm=True), "xmod": Variant(xmod=True)}


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _positional(linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> list[Adapter | None]:
    """The adapter of each linear in order (the block's three linears are all named ``dense``)."""
    pending, out = list(adapters), []
    for lin in linears:
        ad = next((a for a in pending if a.name == lin.name and a.d_in == lin.d_in and a.d_out == lin.d_out), None)
        if ad is not None:
            pending.remove(ad)
        out.append(ad)
    return out


def _stream(c: Ctx, var: Variant) -> Ctx:
    """The residual stream's dtype: under autocast a LayerNorm's output is fp32, and so is every residual sum after
    it: a post-LN layer's input is a LayerNorm's output, a pre-LN stream is fp32 from the embedding LayerNorm on
    (XLM-RoBERTa-XL and Megatron-BERT have none: their stream keeps the weights' dtype)."""
    return replace(c, res=4) if c.autocast and (var.emb_ln or not var.pre_ln) else c


def _dropout(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, d: int) -> None:
    if arch.dropout > 0 and not (c.first_layer and not c.train_base):
        ss.save(key, MASK * c.tokens * d)                        # CUDA native_dropout's bool mask


def _xlm_attention(ss: SavedSet, c: Ctx, arch: ModelArch) -> str:
    """modeling_xlm.py MultiHeadAttention.forward: `q / sqrt(head_dim)` (a new q), k and v made by the
    EncoderDecoderCache XLMModel.forward always builds (DynamicCache.update's cat), `masked_fill_` keeping the
    expanded `(mask == 0)` bool mask (b, 1, s, s) of a causal config (a non-causal one's is (b, 1, 1, s): 1/(7a) of the
    scores' bytes less), `softmax(scores.float()).type_as(scores)`: the fp32 softmax whatever the precision, dropout's
    mask and 16-bit output read by the matmul, the contiguous context read by out_lin. Returns out_lin's input key."""
    e = 2 if c.autocast else c.e
    t, scores = c.tokens, arch.num_heads * c.seq * c.seq * c.batch
    for name in ("q", "k", "v"):
        ss.save(f"attn.{name}", e * t * arch.q_dim)
    ss.save("attn.mask", c.batch * c.seq * c.seq)
    ss.save("attn.softmax", 4 * scores)
    ss.save("attn.probs", e * scores)
    if arch.dropout > 0:
        ss.save("attn.drop_mask", MASK * scores)
    return "attn.ctx"


def _bottleneck(arch: ModelArch) -> int:
    """XmodAdapter.bottleneck_size (hidden_size // adapter_reduction_factor), read off layer 0's first dense1."""
    return next(tt.shape[0] for tt in arch.tensors if tt.block and tt.shape and tt.module.endswith(".dense1"))


def _xmod_adapter(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, xb: int) -> None:
    """modeling_xmod.py XmodOutput.lang_adapter after `dense(x) + input_tensor` (post-LayerNorm layout,
    adapter_reuse_layer_norm or adapter_layer_norm: the LayerNorm bert_block books as ln2 comes first, its output
    ``x`` of ``xb`` bytes): `hidden_states[lang_mask]` copies the rows of the language (every row: one language
    per batch), whose dense1 keeps them (autocast: its 16-bit copy), the activation keeps its input, dense2 the
    activation's output; `new_hidden_states[lang_mask] = ...` (index_put_) and the index keep only the row indices;
    dropout keeps its mask, the `+= residual` nothing, and XmodLayer.forward's `self.output.LayerNorm(layer_output)`
    its input (the zeros_like of the LayerNorm output: fp32 under autocast) and mean/rstd; its output is the next
    layer's input. The other languages' adapters run on empty rows: their weights' autocast copies are
    autocast_weight_copies' (memory/activations.py, every linear of arch.tensors). Traced: tools/memtrace/golden/bert/
    xmod-*."""
    t, h, r = c.tokens, arch.hidden_size, _bottleneck(arch)
    e = 2 if c.autocast else c.e
    linear(ss, c, "adapter.rows", xb, Linear("dense1", h, r), None)
    ss.save("adapter.act.in", e * t * r)
    linear(ss, c, "adapter.act.out", e, Linear("dense2", r, h), None)
    _dropout(ss, c, arch, "adapter_drop", h)
    layernorm(ss, replace(c, res=xb), "ln3", "sum3", h)


def bert_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One BERT-lineage layer (module docstring): post- or pre-LayerNorm by BERT[model_type]."""
    var = BERT[arch.model_type]
    pre_ln = var.pre_ln
    ss = SavedSet()
    c = _stream(c, var)
    q, k, v, o, up, down = linears
    aq, ak, av, ao, aup, adown = _positional(linears, adapters)
    t, h = c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    if var.own_eager:
        c = replace(c, attention="eager")
    c2 = _later(c)
    if pre_ln:
        y, yb = layernorm(ss, c, "ln_attn", "resid", h)
    else:
        y, yb = "resid", c.res                                   # the previous LayerNorm's output
    for lin, ad in ((q, aq), (k, ak), (v, av)):
        linear(ss, c, y, yb, lin, ad)
    out_b = e
    if var.xlm:
        out = _xlm_attention(ss, c2, arch)
    elif block_sparse(arch, c):
        key_grad = not (c.first_layer and not c.train_base) or ak is not None
        out, out_b = block_sparse_attention(ss, c, arch, key_grad)   # memory/blocks_big_bird.py
    else:
        out = attention_core(ss, c2, arch, "attn", arch.q_dim, arch.q_dim)
    linear(ss, c2, out, out_b, o, ao)
    _dropout(ss, c2, arch, "attn_drop", h)
    if pre_ln:
        y2, yb2 = layernorm(ss, c2, "ln_mlp", "resid2", h)
    else:
        y2, yb2 = layernorm(ss, c2, "ln1", "sum1", h)
    linear(ss, c2, y2, yb2, up, aup)
    if gelu_new(arch):
        act_b = gelu_new_saved(ss, c2, "mlp", t * up.d_out)      # memory/blocks_big_bird.py
    else:
        ss.save("gelu.in", e * t * up.d_out)                     # F.gelu keeps its input
        act_b = e
    linear(ss, c2, "gelu.out", act_b, down, adown)
    if var.mlp_dropout:
        _dropout(ss, c2, arch, "mlp_drop", h)
    if not pre_ln:
        y3, yb3 = layernorm(ss, c2, "ln2", "sum2", h)
        if var.xmod:
            _xmod_adapter(ss, c2, arch, y3, yb3)
    return ss.total


# BertLMPredictionHead's transform dense (RoBERTa's lm_head.dense, ELECTRA's generator head, RemBERT's own) and the
# linears between the embeddings and layer 0 (ELECTRA's embeddings_project, RemBERT's embedding_hidden_mapping_in)
HEAD_DENSE = ("lm_head.dense", "predictions.transform.dense", "generator_predictions.dense", "cls.predictions.dense")
MAP_IN = "embeddings.map_inputs_layer"


def outside_widths(arch: ModelArch) -> tuple[int, int, int]:
    """(the word embeddings' width, RoCBert's map_inputs_layer input width or 0, the head transform's width or 0),
    read off the arch's tensors outside the blocks."""
    emb, map_in, head = arch.hidden_size, 0, 0
    for tt in arch.tensors:
        if tt.block or not tt.shape:
            continue
        if tt.module.endswith("embeddings.word_embeddings"):
            emb = tt.shape[1]
        elif tt.module.endswith(MAP_IN):
            map_in = tt.shape[1]
        elif tt.module.endswith(HEAD_DENSE):
            head = tt.shape[0]
    return emb, map_in, head


def head_width(arch: ModelArch) -> int:
    """lm_head's input width: the head transform's (ELECTRA's embedding_size, RemBERT's output_embedding_size)."""
    return outside_widths(arch)[2] or arch.hidden_size


def outside_saved(ss: SavedSet, c: Ctx, arch: ModelArch, head_adapter: Adapter | None, input_grads: bool) -> None:
    """The embeddings' and the LM head's saved tensors (module docstring). ``input_grads``: PEFT with checkpointing
    makes the embedding output require grad (enable_input_require_grads), so the embedding LayerNorm keeps its input
    and the dropout its mask."""
    var = BERT[arch.model_type]
    (emb, map_in, head), t, h = outside_widths(arch), c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    ce = replace(c, first_layer=not input_grads)                 # before the first trainable op
    ss.save("ids_labels", 16 * t)
    if input_grads and not c.train_base:
        # the hook's output (word_embeddings' output made to require grad), kept by the graph (traced:
        # roberta-lora-mixed-flash-gc, as memory/blocks_bart.py outside_blocks)
        ss.save("emb_leaf", c.res * t * emb)
    if map_in:
        # modeling_roc_bert.py RoCBertEmbeddings (concat_input): map_inputs_layer reads the words, shape and
        # pronunciation embeddings concatenated
        linear(ss, ce, "emb.cat", c.res, Linear("map_inputs_layer", map_in, h), None)
    x, xb = "emb.sum", c.res
    if var.emb_ln:
        x, xb = layernorm(ss, ce, "emb_ln", "emb.sum", emb)
    _dropout(ss, ce, arch, "emb_drop", emb)
    if emb != h:
        # ElectraModel.embeddings_project, RemBertEncoder.embedding_hidden_mapping_in: embedding width to hidden_size
        linear(ss, ce, "emb.drop", xb, Linear("embeddings_project", emb, h), None)
    c2 = _stream(_later(c), var)
    if var.pre_ln:
        y, yb = layernorm(ss, c2, "final_ln", "resid_final", h)
    else:
        y, yb = "resid_final", c2.res
    # BertPredictionHeadTransform: dense -> GELU -> LayerNorm (ELECTRA's generator head to embedding_size, RemBERT's
    # to output_embedding_size); BertGeneration's head is the decoder alone
    if head:
        linear(ss, c2, y, yb, Linear("head_dense", h, head), None)
        if gelu_new(arch):
            gelu_new_saved(ss, c2, "head", t * head)              # memory/blocks_big_bird.py
        else:
            ss.save("head.gelu.in", e * t * head)
        y, yb = layernorm(ss, c2, "head_ln", "head.gelu.out", head)
    linear(ss, c2, y, yb, Linear("lm_head", head or h, arch.vocab_size), head_adapter)


def checkpointed_inputs(arch: ModelArch, c: Ctx) -> int:
    """Full checkpointing keeps each layer's input: fp32 under autocast where a LayerNorm made the stream fp32
    (_stream), else in the weights' dtype (traced: the *-gc-* rows); BigBird's block_sparse band mask with them
    (memory/blocks_big_bird.py band_mask)."""
    kept = band_mask(arch, c) if block_sparse(arch, c) else 0
    return arch.num_layers * _stream(c, BERT[arch.model_type]).res * c.tokens * arch.hidden_size + kept
