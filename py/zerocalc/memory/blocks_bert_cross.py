"""Saved tensors of the BERT-decoder composites: EncoderDecoderModel with BERT-lineage sides (model/encdec.py,
model_type "encoder-decoder") and VisionEncoderDecoderModel's ViT + BERT decoder (model/vision_encdec.py,
"vision-encoder-decoder"). Read off fake-tensor traces of the real training step (tools/memtrace/bert_cross_trace.py,
fixtures in tools/memtrace/golden/bert_cross/, held within 3 % by tests/test_bert_cross_blocks.py).

What a step runs (transformers 5.24):
- modeling_encoder_decoder.py EncoderDecoderModel.forward: the encoder (BertModel) over input_ids, its last hidden
  state (the last BertLayer's output.LayerNorm output: fp32 under autocast) handed to every decoder layer as
  encoder_hidden_states; decoder_input_ids = shift_tokens_right(labels) and a decoder_attention_mask (both int64, new
  tensors); the decoder (BertLMHeadModel); the loss `CrossEntropyLoss()(logits.reshape(-1, V), labels.view(-1))` on
  the logits as they are (memory/logits.py NO_UPCAST). Under full fine-tuning both stacks train; under LoRA PEFT's
  adapters sit on both stacks' and the crossattention's targets, so the encoder states need a gradient.
- modeling_vision_encoder_decoder.py VisionEncoderDecoderModel.forward: the ViT over pixel_values instead, frozen
  (vision.trainable's default): no graph, its last hidden state (ViTModel.layernorm's output) a leaf read by the
  decoder's crossattention key / value, whose number of states is the ViT's patches + 1.
- modeling_bert.py BertLayer.forward with encoder_hidden_states: attention (memory/blocks_bert.py bert_block's
  self-attention half: q/k/v read the layer input, attention.output: dense, dropout, LayerNorm of the sum), then
  crossattention = a second BertAttention whose BertSelfAttention reads query from the attention output and key /
  value from the encoder states (non-causal, no mask), its BertSelfOutput dense -> dropout -> LayerNorm(+ the
  attention output), then intermediate / output as bert_block's. The crossattention adds per layer: query's input
  (the attention LayerNorm's output, already kept by intermediate.dense in a layer without cross-attention: here
  kept once for query, and the cross LayerNorm's output for intermediate), q (t·h), k and v (t_enc·h each), the
  FA2 output and logsumexp (eager: the t × t_enc scores' softmax, mask and probabilities), dense's input, the
  dropout mask, the cross LayerNorm's input and mean / rstd. key and value keep the encoder states themselves
  (one tensor for all decoder layers: ``extra``), or under autocast each its own 16-bit copy (per layer).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, attention_core, linear
from .blocks_bert import outside_saved
from .blocks_families import layernorm
from .lora import Adapter


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _stream(c: Ctx) -> Ctx:
    return replace(c, res=4) if c.autocast else c          # post-LayerNorm: the stream is a LayerNorm's output


def _dropout(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, d: int) -> None:
    """memory/blocks_bert.py's: CUDA native_dropout's bool mask, none before the first trainable op."""
    if arch.dropout > 0 and not (c.first_layer and not c.train_base):
        ss.save(key, MASK * c.tokens * d)


def _positional(linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> list[Adapter | None]:
    """The adapter of each linear in order (memory/blocks_bert.py's: three linears are all named ``dense``)."""
    pending, out = list(adapters), []
    for lin in linears:
        ad = next((a for a in pending if a.name == lin.name and a.d_in == lin.d_in and a.d_out == lin.d_out), None)
        if ad is not None:
            pending.remove(ad)
        out.append(ad)
    return out


MODEL_TYPES = ("encoder-decoder", "vision-encoder-decoder", "blip")
# the decoders whose encoder states are a frozen tower's (vision.trainable's default), and the tensor holding its
# positions (patches + 1 rows): ViTModel's (1, n, h) parameter, BlipVisionEmbeddings' (n, h)
TOWER_POSITIONS = {"vision-encoder-decoder": ("encoder.embeddings.position_embeddings", 1),
                   "blip": ("vision_model.embeddings.position_embedding", 0),
                   "git": ("git.image_encoder.vision_model.embeddings.position_embedding.weight", 0)}
# modeling_blip_text.py BlipTextSelfAttention: its own matmul / softmax / dropout whatever attn_implementation says
OWN_EAGER = ("blip",)


def _view(arch: ModelArch) -> ModelArch:
    return replace(arch, model_type="roberta")        # memory/blocks_bert.py POST: the post-LayerNorm BertLayer


def kv_tokens(arch: ModelArch, c: Ctx) -> int:
    """The encoder states the crossattention reads per micro-batch: the text encoder's s·b, or the ViT's
    (patches + 1)·b (its embeddings.position_embeddings rows)."""
    if arch.model_type in TOWER_POSITIONS:
        name, dim = TOWER_POSITIONS[arch.model_type]
        return next(tt.shape[dim] for tt in arch.tensors if tt.name == name) * c.batch
    return c.tokens


def pixel_numel(arch: ModelArch) -> int:
    """One image's pixel_values elements, 3 x H x W, H = W = patch x sqrt(patches): the batch's input, alive the
    whole step, in the weights' dtype (bf16-pure casts it; bf16-mixed keeps the processor's fp32 with fp32 weights)."""
    name, dim = TOWER_POSITIONS[arch.model_type]
    n = next(tt.shape[dim] for tt in arch.tensors if tt.name == name) - 1
    patch_in = next(tt.shape for tt in arch.tensors if tt.name.endswith(("patch_embeddings.projection.weight",
                                                                          "embeddings.patch_embedding.weight")))
    per_patch = 1
    for d in patch_in[1:]:
        per_patch *= d                                 # channels x patch x patch: (h, c, p, p) or (h, c·p·p)
    return n * per_patch


def _cross_core(ss: SavedSet, c: Ctx, arch: ModelArch, t_kv: int) -> str:
    """BertSelfAttention over (t query tokens, t_kv encoder states): FA2's q, k, v, output and logsumexp, or eager's
    (the BERT rule of memory/blocks.py attention_core, s × s_enc scores). Returns the output's key."""
    e = 2 if c.autocast else c.e
    t, h, a = c.tokens, arch.hidden_size, arch.num_heads
    if c.attention != "eager":
        ss.save("x.q", e * t * h)
        ss.save("x.k", e * t_kv * h)
        ss.save("x.v", e * t_kv * h)
        ss.save("x.out", e * t * h)
        ss.save("x.lse", 4 * a * t)
        return "x.out"
    ss.save("x.q", e * t * h)
    ss.save("x.k", e * t_kv * h)
    ss.save("x.v", e * t_kv * h)
    scores = a * t * (t_kv // c.batch)
    if c.autocast:
        ss.save("x.softmax", 4 * scores)
        if arch.dropout > 0:
            ss.save("x.drop_mask", MASK * scores)
        ss.save("x.probs", 2 * scores)
    else:
        ss.save("x.softmax", e * scores)
        if arch.dropout > 0:
            ss.save("x.drop_mask", MASK * scores)
            ss.save("x.drop", e * scores)
    return "x.out"


def bert_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...],
               kv: tuple[Ctx, str, int] | None = None) -> SavedSet:
    """One post-LayerNorm BertLayer (memory/blocks_bert.py bert_block for Variant()), with the crossattention
    between the attention and the MLP where ``linears`` has its four (model/encdec.py cross_linears). ``kv``: the
    encoder states' context (its tokens; first_layer when nothing before them needs a gradient), key and bytes."""
    if arch.model_type in OWN_EAGER:
        c = replace(c, attention="eager")
    arch = _view(arch)
    ss = SavedSet()
    c = _stream(c)
    ads = _positional(linears, adapters)
    cross = len(linears) == 10
    q, k, v, o = linears[:4]
    up, down = linears[-2:]
    t, h = c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    for lin, ad in zip((q, k, v), ads[:3]):
        linear(ss, c, "resid", c.res, lin, ad)
    c2 = _later(c)
    out = attention_core(ss, c2, arch, "attn", arch.q_dim, arch.q_dim)
    linear(ss, c2, out, e, o, ads[3])
    _dropout(ss, c2, arch, "attn_drop", h)
    y, yb = layernorm(ss, c2, "ln1", "sum1", h)
    if cross:
        cq, ck, cv, co = linears[4:8]
        linear(ss, c2, y, yb, cq, ads[4])
        ckv, x, xb = kv
        for lin, ad in ((ck, ads[5]), (cv, ads[6])):
            linear(ss, ckv, x, xb, lin, ad)
        out = _cross_core(ss, c2, arch, ckv.tokens)
        linear(ss, c2, out, e, co, ads[7])
        _dropout(ss, c2, arch, "x_drop", h)
        y, yb = layernorm(ss, c2, "lnx", "sumx", h)
    linear(ss, c2, y, yb, up, ads[-2])
    ss.save("gelu.in", e * t * up.d_out)                         # F.gelu keeps its input
    linear(ss, c2, "gelu.out", e, down, ads[-1])
    _dropout(ss, c2, arch, "mlp_drop", h)
    layernorm(ss, c2, "ln2", "sum2", h)
    return ss


def _kv(arch: ModelArch, c: Ctx) -> tuple[Ctx, str, int]:
    """The encoder states' context, key and bytes: fp32 under autocast (a LayerNorm's output), else the stream's
    dtype; the ViT's are a frozen leaf (first_layer: no LoRA dropout mask), the text encoder's need a gradient."""
    frozen_leaf = arch.model_type in TOWER_POSITIONS
    ckv = replace(c, tokens=kv_tokens(arch, c), first_layer=frozen_leaf)
    return ckv, "enc_out", 4 if c.autocast else c.res


def _vit_graph(ss: SavedSet, c: Ctx, arch: ModelArch, t_kv: int) -> None:
    """LoRA under checkpointing: transformers' enable_input_require_grads (PreTrainedModel, which PEFT calls) hooks
    every input embedding, the frozen ViT's patch_embeddings too, so the ViT runs a graph: its hooked patch output
    (patches, no class token), each checkpointed ViTLayer's input, the final layernorm's input (its fp32 copy under
    autocast) and mean / rstd (traced: vised-lora-mixed-flash-gc)."""
    e = 2 if c.autocast else c.e
    h = arch.hidden_size
    n_vit = len({tt.name.split(".")[2] for tt in arch.tensors if tt.name.startswith("encoder.layers.")})
    ss.save("vit.patch_leaf", e * (t_kv - c.batch) * h)
    ss.save("vit.layer_inputs", n_vit * e * t_kv * h)
    ss.save("vit.ln_in", (4 if c.autocast else e) * t_kv * h)
    ss.save("vit.ln_stats", 8 * t_kv)


def _decoder_adapters(arch: ModelArch, adapters: tuple[Adapter, ...], lins: tuple[Linear, ...]) -> tuple:
    """PEFT's adapters on a decoder layer, from the first layer's (its leaf names are the plan's matched targets)."""
    if not adapters:
        return ()
    targets = {a.name.rpartition(".")[2] for a in adapters}
    # memory/lora.py layer_adapters: PEFT matches a target against the module name's last segment
    return tuple(Adapter(lin.name, lin.d_in, lin.d_out, adapters[0].rank) for lin in lins
                 if lin.name.rpartition(".")[2] in targets)


def bert_cross_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple[Adapter, ...],
                      lm_head_adapter: Adapter | None, input_grads: bool):
    """The whole model's saved set (memory/blocks_seq2seq.py encoder_decoder asks this first for MODEL_TYPES): the
    text encoder's layers (none for the frozen ViT), the decoder's, the encoder states once, and outside the layers
    the encoder's embeddings (LayerNorm, dropout), the decoder's embeddings and BertLMPredictionHead
    (memory/blocks_bert.py outside_saved)."""
    lls = arch.layer_linears
    n_enc = sum(1 for x in lls if len(x) == 6)
    dec_ads = _decoder_adapters(arch, adapters, lls[-1])
    enc_ads = adapters if n_enc else ()
    t, h = c.tokens, arch.hidden_size
    layers = []
    for i, lins in enumerate(lls):
        decoder = i >= n_enc
        ci = c_first if i in (0, n_enc) else c
        ss = bert_layer(arch, ci, lins, dec_ads if decoder else enc_ads, _kv(arch, c) if decoder else None)
        ss.items.pop("enc_out", None)
        layers.append(ss.total)
    ckv, _, xb = _kv(arch, c)
    shared = SavedSet()
    if c.train_base or any(a.name.endswith(("key", "value")) and a.name.startswith("cross") for a in dec_ads):
        # key / value keep the encoder states (a LoRA adapter's dropout on them keeps its own output instead)
        if not (c.autocast and xb == 4) and c.train_base:
            shared.save("enc_out", xb * ckv.tokens * h)
    head = SavedSet()
    view = _view(arch)
    outside_saved(head, replace(c, res=c.res), view, lm_head_adapter, input_grads)
    head.save("dec_ids_mask", 16 * t)                         # shift_tokens_right's ids, decoder_attention_mask
    if n_enc:
        # the encoder's BertEmbeddings: the LayerNorm of the sum and the dropout (before its first trainable op
        # under LoRA without checkpointing)
        ce = replace(c, first_layer=not input_grads)
        cs = _stream(ce)
        layernorm(head, cs, "enc_emb_ln", "enc_emb.sum", h)
        _dropout(head, ce, view, "enc_emb_drop", h)
    if arch.model_type in TOWER_POSITIONS:
        head.save("pixel_values", c.res * c.batch * pixel_numel(arch))
    if input_grads and n_enc:
        head.save("enc_emb_leaf", c.res * t * h)             # the encoder's hooked word-embedding output
    elif input_grads:
        _vit_graph(head, c, arch, ckv.tokens)
    res = _stream(c).res
    # checkpointing: each layer's input (fp32 under autocast: a LayerNorm's output) and the encoder states, an input
    # of every decoder layer's checkpoint
    ckpt = len(lls) * res * t * h - arch.num_layers * c.res * t * h + xb * ckv.tokens * h
    return tuple(layers), shared.total, ckpt, head.total      # memory/blocks_seq2seq.py EncDec's fields
