"""What the image-to-text encoder-decoders keep beyond their text stacks (transformers 5.24), read off fake-tensor
traces of the real training step with the vision side frozen (vision.trainable's default: no graph there):
tools/memtrace/vision_seq2seq_trace.py, fixtures in tools/memtrace/golden/vision_seq2seq/, held within 3 % by
tests/test_vision_seq2seq_blocks.py.

- florence2 (modeling_florence2.py Florence2ForConditionalGeneration): Florence2Model.forward embeds input_ids,
  runs the frozen DaViT tower and multi_modal_projector on pixel_values, and scatters the image features into the
  embeddings at the image_token_id placeholders (`inputs_embeds.masked_scatter(special_image_mask,
  image_features)`: the plan's seq_len holds the image tokens, as a LLaVA prompt's do); the BART encoder and decoder
  then run as plain BART (memory/blocks_seq2seq.py bart_block, post-LN with layernorm_embedding). Beyond them: the
  batch's pixel_values (b x in_channels x H x W in the weights' dtype, alive the whole step, as input_ids are) and,
  where the embeddings need a gradient, masked_scatter's bool mask (b·s). The loss is self.loss_function
  (ForCausalLMLoss, shift_labels=labels: the logits upcast, an fp32 log-softmax; memory/logits.py UPCAST_SEQ2SEQ).
- pix2struct (modeling_pix2struct.py): its T5-style text decoder over a frozen vision encoder's seq_len patch states
  (pix2struct_stacks), no checkpointing (transformers refuses it).
- udop (modeling_udop.py): T5 stacks whose encoder also runs the page image's patches, with 2-D layout embeddings
  and biases (udop_stacks); LoRA with checkpointing raises in transformers (not traced).
Both: T5's block (memory/blocks_seq2seq.py t5_block) plus its dropouts (t5_dropouts, as blocks_seq2seq.py t5_layer).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, linear

FLORENCE2_CONV0 = "model.vision_tower.convs.0.conv.weight"


def florence2_inputs(arch: ModelArch, c: Ctx, input_grads: bool) -> int:
    """Florence-2's pixel_values and masked_scatter's mask (module docstring); 0 for any other model."""
    if arch.model_type != "florence2" or arch.tower is None:
        return 0
    channels = next(tt.shape[1] for tt in arch.tensors if tt.name == FLORENCE2_CONV0)
    side = int(arch.tower["image_size"])
    pixels = c.res * c.batch * channels * side * side
    mask = c.tokens if (c.train_base or input_grads) else 0
    return pixels + mask


# Pix2Struct's text decoder names (model/vision_encdec.py pix2struct) as memory/blocks_seq2seq.py t5_block reads them
PIX2STRUCT_PATCHES = "encoder.embeddings.patch_projection.weight"
PIX2STRUCT_NAMES = {"query": "q", "key": "k", "value": "v", "output": "o"}


def _t5_names(items) -> dict:
    """{t5_block's name: item} for the self-attention's and the feed-forward's linears / adapters (the
    encoder_decoder_attention's have the same shapes: t5_block reads them under the same names)."""
    return {PIX2STRUCT_NAMES.get(x.name, x.name): x for x in items if "." not in x.name}


def pix2struct_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple, lm_head_adapter, input_grads: bool,
                      t5_block, t5_norm):
    """Pix2StructForConditionalGeneration (modeling_pix2struct.py), its vision encoder frozen (vision.trainable's
    default: no graph) over the batch's flattened patches, n = seq_len of them a sample (the engine's one seq_len
    for both sides, as for T5), and Pix2StructTextModel's decoder: Pix2StructTextBlock is T5's decoder block
    (memory/blocks_seq2seq.py t5_block: Pix2StructLayerNorm is T5LayerNorm, the gated gelu_new feed-forward, eager
    attention only: `_supports_flash_attn = False`) plus the dropouts T5's traced rows ran without (dropout_rate):
    the attention probabilities' (a bool mask over the heads x s x s scores; without autocast its 16-bit output,
    read by matmul(probs, V), is kept beside the softmax), each sub-layer's output dropout (t x h masks: three a
    layer), the gated product's before wo (t x d_ff). Outside the layers: the embedding dropout's and the final
    dropout's masks, the final norm and lm_head's input, the relative-position bucket ids (s x s int64, once),
    the frozen encoder's output read by every cross-attention's key / value (once), the decoder_input_ids, and the
    processor's batch: flattened_patches (b x n x (2 + patch_embed_hidden_size), the weights' dtype) and its fp32
    attention_mask. The loss: Pix2StructTextModel's own CrossEntropyLoss on `logits.contiguous()` (no upcast:
    memory/logits.py NO_UPCAST)."""
    lins = _t5_names(arch.layer_linears[0] if arch.layer_linears else arch.block_linears)
    ads = _t5_names(adapters)
    t, h, s, b = c.tokens, arch.hidden_size, c.seq, c.batch
    scores = arch.num_heads * s * s * b
    ff = lins["wo"].d_in
    layers, shared = [], 0
    for i in range(arch.num_layers):
        ci = c_first if i == 0 else c
        ss = t5_block(arch, ci, lins, ads, True)
        enc = ss.items.pop("enc_out", 0)
        shared = max(shared, enc)
        if not c.train_base:
            # the frozen encoder's output needs no gradient: a LoRA dropout on it keeps no mask, and where key has
            # no adapter its k needs none either, so matmul(q, kᵀ) keeps kᵀ (for q's gradient) but not q; so in
            # layer 0's self-attention, whose input needs none (traced: pix2struct-lora-*)
            for name in ("k", "v"):
                ss.items.pop(f"enc_out.mask.{lins[name].name}", None)
            if "k" not in ads:
                ss.items.pop("ca.q", None)
                if ci.first_layer:
                    ss.items.pop("sa.q", None)
        t5_dropouts(ss, c, arch, ff, True, s)
        layers.append(ss.total)
    extra = shared + 8 * t
    if c.autocast and c.train_base and c.res == 4:
        # fp32 weights under autocast: the 16-bit copies of the cross-attentions' key / value weights are cached
        # but not kept (their input, the frozen encoder's output, needs no gradient), which memory/activations.py's
        # autocast_weight_copies counts for every trained linear: taken off here (traced: pix2struct-full-mixed)
        extra -= 2 * arch.num_layers * (lins["k"].d_in * lins["k"].d_out + lins["v"].d_in * lins["v"].d_out)
    if c.train_base:
        extra += 8 * s * s                                   # the bucket ids read by relative_attention_bias
    head = _pix2struct_head(arch, c, lm_head_adapter, t5_norm)
    width = next(tt.shape[1] for tt in arch.tensors if tt.name == PIX2STRUCT_PATCHES) + 2   # + row, column
    head += c.res * t * width + 4 * t                        # flattened_patches and its attention_mask
    ckpt = extra + c.res * t * h                             # no checkpointing: gradient_checkpointing_enable raises
    return tuple(layers), extra, ckpt, head


def _pix2struct_head(arch: ModelArch, c: Ctx, lm_head_adapter, t5_norm) -> int:
    head = SavedSet()
    t, h = c.tokens, arch.hidden_size
    if arch.dropout > 0:
        if c.train_base:
            head.save("emb.drop_mask", MASK * t * h)
        head.save("final.drop_mask", MASK * t * h)
    t5_norm(head, c, "dec_final", "dec_last", h)
    linear(head, c, "final.drop", c.res, Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    return head.total


def t5_dropouts(ss: SavedSet, c: Ctx, arch: ModelArch, ff: int, decoder: bool, kv_seq: int) -> None:
    """What T5's block keeps for its dropouts (dropout_rate), beside memory/blocks_seq2seq.py t5_block's (t5_layer
    adds them for T5's own stacks; traced: tools/memtrace/golden/seq2seq/*drop-*): each attention's probabilities' bool mask (heads x s x s_kv a sample) and, without
    autocast, the 16-bit dropout output matmul(probs, V) reads beside the softmax (under autocast it reads its own
    16-bit copy, counted); the masks of each sub-layer's output dropout (t x h) and of the feed-forward's hidden
    dropout (t x d_ff); DenseActDense's wo then reads the dropout's output, not ReLU's (a 16-bit tensor of its own
    where wo trains without autocast; the gated product is wo's input already)."""
    if arch.dropout <= 0:
        return
    t, h = c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    for key, kv in (("sa", c.seq),) + ((("ca", kv_seq),) if decoder else ()):
        scores = arch.num_heads * c.seq * kv * c.batch
        ss.save(f"{key}.drop_mask", MASK * scores)
        if not c.autocast:
            ss.save(f"{key}.drop_out", e * scores)
    for key in ("sa_out", "ff_out") + (("ca_out",) if decoder else ()):
        ss.save(f"{key}.drop_mask", MASK * t * h)
    ss.save("ff.drop_mask", MASK * t * ff)
    if not arch.gated_mlp and c.train_base and not c.autocast:
        ss.save("ff.drop_out", e * t * ff)


UDOP_PATCHES = "patch_embed.proj.weight"


def udop_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple, adapters: tuple, lm_head_adapter,
                input_grads: bool, t5_block, t5_norm):
    """UdopForConditionalGeneration (modeling_udop.py): T5 stacks (memory/blocks_seq2seq.py t5_block, ReLU or gated
    per feed_forward_proj, eager only: `_supports_flash_attn = False`) plus their dropouts (t5_dropouts), the
    encoder over T = s + n tokens a sample: UdopStack.forward embeds the page image (patch_embed.proj, a conv of
    16 px patches: n = (image_size / patch_size)² patch embeddings, trained with the embeddings) and
    combine_image_text_embeddings adds each token's patch to its embedding and appends the patches (those the
    tokens leave, zero-padded back to n), then cell_2d_embedding adds the 2-D layout embeddings of every box, and
    RelativePositionBiasAggregated sums the 1-D, horizontal and vertical biases into one (b, heads, T, T) bias every
    encoder layer adds. The decoder runs at s with T5's own bias and cross-attends to the T encoder states.
    Outside the layers, kept while the embeddings train: the gather's int64 index (b x s x d), the no-box mask,
    the patches' index, the box ids of the four layout lookups (b x T x 4 int64) and the three biases' bucket ids
    ((1 + 2b) x T x T int64), the decoder's (s x s), the embedding dropouts' masks; always: the encoder's final norm,
    its dropout's mask and output (read by every cross-attention's key / value), the decoder's final norm, dropout
    and lm_head's input, the decoder_input_ids, and the processor's batch (pixel_values in the weights' dtype, the
    fp32 boxes, the int64 attention_mask). Checkpointing keeps each layer's input (T tokens in the encoder), the
    encoder's bias (b x heads x T x T) and bidirectional mask (b x 1 x T x T), the decoder's bias, causal mask,
    cross mask (b x 1 x s x T) and zero cross bias (heads x s x T, made with requires_grad), in the weights' dtype.
    The loss: UdopForConditionalGeneration's own CrossEntropyLoss on the logits (no upcast: memory/logits.py)."""
    lins = {x.name: x for x in linears}
    ads = {a.name: a for a in adapters}
    n_img = arch.image_patches
    s, b, h, a = c.seq, c.batch, arch.hidden_size, arch.num_heads
    T = s + n_img
    t, te = c.tokens, T * b
    n_enc, n_dec = (len({tt.name.split(".")[2] for tt in arch.tensors if tt.name.startswith(f"{side}.block.")})
                    for side in ("encoder", "decoder"))
    ff = lins["wo"].d_in

    def enc(x: Ctx) -> Ctx:
        return replace(x, tokens=te, seq=T)
    layers, shared = [], 0
    for i in range(n_enc + n_dec):
        decoder = i >= n_enc
        ci = c_first if i in (0, n_enc) else c
        ci = ci if decoder else enc(ci)
        ss = t5_block(arch, ci, lins, ads, decoder, False, te if decoder else 0)
        shared = max(shared, ss.items.pop("enc_out", 0))
        if not c.train_base and ci.first_layer and "k" not in ads:
            ss.items.pop("sa.q", None)       # k needs no gradient: matmul(q, kᵀ) keeps kᵀ only (traced)
        t5_dropouts(ss, ci, arch, ff, decoder, T)
        layers.append(ss.total)
    fin = SavedSet()
    ce = enc(c)
    t5_norm(fin, ce, "enc_final", "enc_last", h)
    if arch.dropout > 0:
        fin.save("enc_final.drop_mask", MASK * te * h)
    fin.save("enc_out", c.res * te * h)                    # the dropout's output: every cross key / value reads it
    extra = fin.total + 8 * t
    emb = SavedSet()
    if c.train_base:
        emb.save("gather.index", 8 * t * h)
        emb.save("no_box.mask", MASK * t)
        emb.save("patches.index", 8 * n_img)
        emb.save("cell.box_ids", 8 * te * 4)
        emb.save("bias.buckets", 8 * T * T * (1 + 2 * b) + 8 * s * s)
        if arch.dropout > 0:
            emb.save("emb.drop_masks", MASK * (te + t) * h)
    extra += emb.total
    head = SavedSet()
    t5_norm(head, c, "dec_final", "dec_last", h)
    if arch.dropout > 0:
        head.save("dec_final.drop_mask", MASK * t * h)
    linear(head, c, "dec_final.scaled" if arch.tied_embeddings else "dec_final.drop", c.res,
           Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    side = next(tt.shape for tt in arch.tensors if tt.name == UDOP_PATCHES)
    pixels = side[1] * n_img * side[2] * side[3]
    batch = c.res * b * pixels + 4 * 4 * t + 8 * t           # pixel_values, bbox, attention_mask
    # checkpointing: the encoder layers' inputs beyond the s·b tokens the engine counts, the masks and biases
    ckpt = (fin.total + 8 * t + emb.total + n_enc * c.res * (te - t) * h + c.res * b * a * T * T + c.res * b * T * T
            + c.res * a * s * s * (n_dec > 1) + c.res * b * s * s + c.res * b * s * T
            + (2 if c.autocast else c.e) * a * s * T * (n_dec > 1))
    return tuple(layers), extra, ckpt, head.total + batch


def eager_recompute(arch: ModelArch, s: int, b: int, e: int, layer: int = 0) -> int:
    """A checkpointed eager layer's recompute peak (memory/activations.py): the softmax backward's fp32 softmax
    output, its gradient and its output, 12·a·n²·b, and 8 e-byte n·b x h tensors, over the longest stack's n
    positions a sample: the plan's seq_len, or UDOP's encoder with its image patches (traced:
    udop-full-pure-eager-gc). T5's blocks with dropout (each attention's mask and dropped-out probabilities beside
    the softmax): the recompute forward's end, the whole `layer` saved again beside the incoming gradient, is the
    larger (traced: a t5-base layout, 12 + 12 blocks, s 1024, b 4: the recompute's peak at a decoder layer's last
    native_dropout, the recomputed layer 749 MiB against the softmax backward's 624)."""
    n = s + arch.image_patches
    softmax_bwd = 12 * arch.num_heads * n * n * b + 8 * e * n * b * arch.hidden_size
    if arch.family != "t5" or arch.dropout <= 0:
        return softmax_bwd
    return max(softmax_bwd, layer + e * n * b * arch.hidden_size)
