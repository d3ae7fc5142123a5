"""Saved tensors of the encoder-decoders the engine counts whole: T5 (model/classic.py t5: T5, mT5, UMT5, LongT5,
Switch) and BART's layer (model/seq2seq.py: M2M100, NLLB-MoE, FSMT, LED, PEGASUS-X, SeamlessM4T text-to-text).

Each rule is the op sequence of the transformers 5.24 modelling file (cited per rule) and what each op keeps for
backward, read off fake-tensor traces of the real step as AutoModelForSeq2SeqLM (tools/memtrace/seq2seq.py,
fixtures in tools/memtrace/golden/seq2seq/, held within 3 % by tests/test_seq2seq_grid.py). memory/activations.py
asks `encoder_decoder` first and uses its layers, its stack-level tensors and its head where it answers.

Sequence lengths: the plan's one seq_len is the encoder's and the decoder's (the traced batch: input_ids (b, s)
and labels (b, s), decoder_input_ids = shift_right(labels)), so every block runs at s·b tokens and a
cross-attention's scores are s × s.

Traced: T5 (ReLU, t5-small's layout) and T5 v1.1 (gated-gelu) with eager attention, with dropout 0 and with the
shipped dropout_rate 0.1 (t5_layer; v1.0, v1.1, mT5, UMT5, Switch, t5-base's layout checkpointed), M2M100 (BART's
pre-LN layer) with FA2, FSMT (post-LN, ReLU, fairseq's own eager bmm attention, time-major stacks) with eager, LED (post-LN, GELU, Longformer encoder attention) with eager, PEGASUS-X (pre-LN, GELU, block-local +
global-token encoder layer: memory/blocks_encoder_attn.py) with FA2, full / LoRA / checkpointed. Costed with the
same rules, not traced: a T5 plan asking flash or sdpa (T5 has no FA2 path, `_supports_flash_attn = False`, and
SDPA takes the position bias as a float mask: costed as eager), LED with global attention (a global_attention_mask:
costed as local only), UMT5's per-layer bias under checkpointing, LongT5's local attention (as T5's). NLLB-MoE's
feed-forwards are memory/blocks_nllb_moe.py's (traced). Switch's sparse feed-forward (switch_sparse_mlp) is traced
with its real router and a balanced assignment under capacity (tools/memtrace/routing.py), bf16-mixed full and LoRA;
its hidden dropout is counted over every token, not the routed rows (+0.4 % at half the tokens over capacity).

Shared facts:
- the encoder output (the encoder's final norm output) is one tensor that every decoder layer's cross-attention
  K/V projections read: saved once, not per decoder layer;
- the cross-attention K and V are projections of that output made in each decoder layer, saved per layer by the
  attention (SDPA keeps its k, v; eager T5 keeps a contiguous K^T and V);
- T5's relative position bias is computed once per stack (the first block's relative_attention_bias; UMT5: every
  self-attention has one) and handed to the later blocks.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, attention_core, linear, rmsnorm
from .blocks_bart import bart_mlp, checkpointed_inputs, eager_attention
from .blocks_bert_cross import MODEL_TYPES as BERT_CROSS, bert_cross_stacks
from .blocks_git import git_stacks
from .blocks_kosmos import MODEL_TYPES as KOSMOS, kosmos_stacks
from .blocks_nllb_moe import nllb_mlp
from .blocks_prophetnet import prophetnet_stacks
from .blocks_t5gemma2 import gemma_stacks, t5gemma2_stacks
from .blocks_vision_seq2seq import (eager_recompute, florence2_inputs, pix2struct_stacks,  # noqa: F401
                                    t5_dropouts, udop_stacks)
from .blocks_evolla import MODEL_TYPE as EVOLLA, evolla_stacks
from .blocks_pi0 import MODEL_TYPE as PI0, pi0_stacks
from .blocks_encoder_attn import global_local_layer, longformer
from .blocks_families import layernorm
from .lora import Adapter


@dataclass(frozen=True)
class EncDec:
    layers: tuple[int, ...]   # each block's saved bytes: the encoder's blocks, then the decoder's
    extra: int                # stack-level tensors kept without checkpointing (encoder output and final norm ...)
    ckpt_extra: int           # stack-level tensors kept under full checkpointing, besides each block's input
    head: int                 # the decoder's final norm, lm_head's input, the decoder's input ids


def stacks(arch: ModelArch) -> tuple[int, int] | None:
    """(encoder blocks, decoder blocks) read off the parameter names, or None for a model without a
    cross-attending decoder (model/arch.py, read once per model)."""
    return arch.encoder_decoder_blocks


def _needs_grad(c: Ctx) -> bool:
    return not (c.first_layer and not c.train_base)


def t5_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> str:
    """modeling_t5.py T5LayerNorm.forward: variance = x.to(float32).pow(2).mean(-1); x * rsqrt(variance + eps)
    (the 16-bit x times an fp32 rsqrt: mul keeps both), .to(weight dtype), weight * that (keeps the cast copy for
    the weight's gradient). 4·t·d (fp32 copy) + 4·t + res·t·d (x) + res·t·d (the cast, with a trainable weight);
    an fp32 x is its own fp32 copy, and the cast is then the normalised product itself."""
    if _needs_grad(c):
        ss.save(x if c.res == 4 else f"{key}.fp32", 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens)
        ss.save(x, c.res * c.tokens * d)
    if c.train_base:
        ss.save(f"{key}.cast", c.res * c.tokens * d)
    return f"{key}.out"


def t5_attention(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, x: str, kv_x: str, lins: dict, ads: dict,
                 kv: int = 0) -> None:
    """modeling_t5.py T5Attention.forward + eager_attention_forward (T5 has no FA2 path: `_supports_flash_attn =
    False`, its bias is a score term): q/k/v projections, matmul(q, k^T) keeps a contiguous q and K^T, softmax
    in q's dtype (no dtype=float32; fp32 under autocast, with matmul's 16-bit copy), matmul(probs, v) keeps the
    probabilities and a contiguous V, the output transposed and made contiguous is o's input. ``kv``: the key /
    value states a micro-batch when they are not the queries' (UDOP's cross-attention over text + image patches)."""
    e = 2 if c.autocast else c.e
    t, q = c.tokens, arch.num_heads * arch.head_dim
    t_kv = kv or t
    ckv = replace(c, tokens=t_kv)
    for name, src in (("q", x), ("k", kv_x), ("v", kv_x)):
        linear(ss, c if name == "q" else ckv, src, c.res, lins[name], ads.get(name))
    ss.save(f"{key}.q", e * t * q)
    ss.save(f"{key}.kT", e * t_kv * q)
    ss.save(f"{key}.v", e * t_kv * q)
    scores = arch.num_heads * c.seq * t_kv
    if c.autocast:
        ss.save(f"{key}.softmax", 4 * scores)
        ss.save(f"{key}.probs", 2 * scores)
    else:
        ss.save(f"{key}.softmax", e * scores)
    linear(ss, c, f"{key}.out", e, lins["o"], ads.get("o"))


def switch_rows(s: int, b: int, experts: int, capacity: int) -> int:
    """Rows a Switch sparse feed-forward runs through its experts: SwitchTransformersTop1Router keeps an expert's
    first `expert_capacity` tokens of each sequence (`token_priority = cumsum(expert_index, dim=-2)`,
    `token_priority <= expert_capacity`) and drops the rest; under a balanced router each of the E experts gets
    ⌈s/E⌉ or ⌊s/E⌋ tokens of a sequence (traced with tools/memtrace/routing.py's stand-in)."""
    return b * sum(min(len(range(j, s, experts)), capacity) for j in range(experts))


def switch_sparse_mlp(ss: SavedSet, c: Ctx, arch: ModelArch, y: str, lins: dict) -> None:
    """modeling_switch_transformers.py SwitchTransformersSparseMLP over the norm output y (dtype c.res).
    SwitchTransformersTop1Router: `hidden_states.to(float32)` (a copy from 16 bits), jitter `*=` a uniform tensor
    (mul_ keeps it, 4·t·h), the fp32 classifier (keeps its fp32 input; under autocast the 16-bit copy), softmax in
    fp32 (4·t·E), `max(router_probs, -1)` (int64 indices). SwitchTransformersExperts, per routed row (n rows:
    switch_rows): the int64 top_x / idx (torch.where's), `hidden_states[None, top_x]` read by wi (its input, or
    autocast's 16-bit copy), ReLU's output, wo's input (`hidden_states.to(self.wo.weight.dtype)`: fp32 weights
    under autocast make an fp32 copy and autocast a 16-bit one), wo's output and the gathered routing weight
    (router.input_dtype) kept by the product, and the product itself, kept by index_add_. Traced:
    tools/memtrace/golden/seq2seq/switch-*."""
    sw, t, h = arch.switch, c.tokens, arch.hidden_size
    e = 2 if c.autocast else c.e
    if c.train_base and c.res != 4:
        ss.save("router.fp32", 4 * t * h)              # .to(float32): the classifier's (fp32) input
    elif c.train_base:
        # an fp32 y is its own .to(float32): the classifier keeps it, or autocast's 16-bit copy of it
        ss.save(f"{y}.bf16.router" if c.autocast else y, (2 if c.autocast else 4) * t * h)
    if sw["jitter"] > 0:
        ss.save("router.jitter", 4 * t * h)
    ss.save("router.softmax", 4 * t * sw["experts"])
    ss.save("router.argmax", 8 * t)
    n = switch_rows(c.seq, c.batch, sw["experts"], sw["capacity"])
    cn = replace(c, tokens=n)
    inner = lins["wo"].d_in
    ss.save("experts.index", 2 * 8 * n)
    linear(ss, cn, "experts.in", c.res, lins["wi"], None)
    ss.save("experts.act", e * n * inner)
    fp32_wo = c.autocast and c.train_base
    linear(ss, cn, "experts.act.fp32" if fp32_wo else "experts.act", 4 if fp32_wo else e, lins["wo"], None)
    ss.save("experts.out", e * n * h)
    ss.save("experts.weight", c.res * n)
    ss.save("experts.prod", max(e, c.res) * n * h)


def t5_block(arch: ModelArch, c: Ctx, lins: dict, ads: dict, decoder: bool, sparse: bool = False,
             kv: int = 0) -> SavedSet:
    """modeling_t5.py T5Block: T5LayerSelfAttention (norm, attention, residual), in the decoder
    T5LayerCrossAttention (norm, attention over the encoder output), T5LayerFF (norm, DenseReluDense: wi, ReLU
    (keeps its output), `hidden_states.to(self.wo.weight.dtype)` (fp32 weights under autocast: an fp32 copy, and
    autocast's 16-bit one for wo), wo; gated: wi_0, the activation, wi_1 and their product; Switch's sparse
    feed-forward: switch_sparse_mlp)."""
    ss = SavedSet()
    h = arch.hidden_size
    y = t5_norm(ss, c, "ln_sa", "resid", h)
    t5_attention(ss, c, arch, "sa", y, y, lins, ads)
    c2 = replace(c, first_layer=False)
    if decoder:
        y = t5_norm(ss, c2, "ln_ca", "resid_ca", h)
        t5_attention(ss, c2, arch, "ca", y, "enc_out", lins, ads, kv)
    y = t5_norm(ss, c2, "ln_ff", "resid_ff", h)
    e = 2 if c.autocast else c.e
    inner = lins["wo"].d_in
    if sparse:
        switch_sparse_mlp(ss, c2, arch, y, lins)
    elif "wi" in lins:
        linear(ss, c2, y, c.res, lins["wi"], ads.get("wi"))
        ss.save("act.out", e * c.tokens * inner)         # ReLU keeps its output, wo's input
        fp32_wo = c.autocast and c.train_base            # DenseActDense casts to wo's fp32 weight dtype
        linear(ss, c2, "act.fp32" if fp32_wo else "act.out", 4 if fp32_wo else e, lins["wo"], ads.get("wo"))
    else:
        # T5DenseGatedActDense: act(wi_0(x)) * wi_1(x). gelu_new (activations.py NewGELUActivation, python:
        # 0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³)))) keeps x, tanh, 1 + tanh and 0.5·x (4·e per element; under
        # CUDA autocast pow runs in fp32: x's fp32 copy, tanh and 1 + tanh fp32, 0.5·x 16-bit, 14 bytes) and
        # gives an fp32 output under autocast; the product keeps it and wi_1's output, wo keeps the product
        n = c.tokens * inner
        for name in ("wi_0", "wi_1"):
            linear(ss, c2, y, c.res, lins[name], ads.get(name))
        act = 4 if c.autocast else e
        ss.save("gelu", (14 if c.autocast else 4 * e) * n)
        ss.save("act.out", act * n)
        ss.save("wi_1.out", e * n)
        linear(ss, c2, "act.prod", act, lins["wo"], ads.get("wo"))
    return ss


def t5_layer(arch: ModelArch, c: Ctx, lins: dict, ads: dict, decoder: bool, sparse: bool = False) -> SavedSet:
    """t5_block plus its dropouts (dropout_rate: 0.1 in the shipped T5 / mT5 / UMT5 / Flan-T5 configs;
    memory/blocks_vision_seq2seq.py t5_dropouts). Under LoRA with no adapter on key, the first block's self-attention
    (its input needs no gradient) keeps no q: k needs none, so matmul(q, kᵀ) keeps kᵀ only. Traced:
    tools/memtrace/golden/seq2seq/*drop-*."""
    ss = t5_block(arch, c, lins, ads, decoder, sparse)
    if not c.train_base and c.first_layer and "k" not in ads:
        ss.items.pop("sa.q", None)
    t5_dropouts(ss, c, arch, lins["wo"].d_in, decoder, c.seq)
    return ss


def bart_block(arch: ModelArch, c: Ctx, lins: dict, ads: dict, decoder: bool, layer: int = 0,
               last: bool = False, mlp=None) -> SavedSet:
    """BART's encoder / decoder layer by the arch's switches (model/seq2seq.py switches). Pre-LN
    (modeling_m2m_100.py M2M100EncoderLayer / M2M100DecoderLayer): LayerNorm -> q/k/v -> attention -> out_proj
    -> dropout -> residual; in the decoder LayerNorm -> q_proj, k_proj/v_proj of the encoder output -> attention
    -> out_proj -> residual; LayerNorm -> fc1 -> activation -> fc2 -> dropout -> residual. Post-LN
    (modeling_led.py LEDEncoderLayer / LEDDecoderLayer): each LayerNorm after its residual add, so q/k/v read the
    layer input (the previous norm's output). The feed-forward and dropouts as memory/blocks_bart.py's (GELU keeps
    its input and fc2 its output, ReLU one tensor). SDPA/FA2 keep q, k, v, the output and an fp32 logsumexp
    (memory/blocks.py attention_core); eager as blocks_bart.py eager_attention. LED's encoder attention and
    PEGASUS-X's encoder layer: memory/blocks_encoder_attn.py. `mlp`: another feed-forward rule of bart_mlp's
    signature (NLLB-MoE's: memory/blocks_nllb_moe.py)."""
    sw = arch.bart
    ss = SavedSet()
    if not decoder and sw["encoder_attn"] == "global_local":
        global_local_layer(ss, c, arch, lins, ads, sw["stagger"] and layer % 2 == 1, last)
        return ss
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False)
    post = sw["post_ln"]
    if post:
        y, yb = "resid", 4 if c.autocast and (sw["emb_ln"] or not c.first_layer) else c.res
    else:
        y, yb = layernorm(ss, c, "ln_sa", "resid", h)
    if not decoder and sw["encoder_attn"] == "longformer":
        out = longformer(ss, c, arch, y, yb, lins, ads, sw["windows"][min(layer, len(sw["windows"]) - 1)])
    else:
        copies = sw.get("time_major") and layer == 0 and not c.autocast
        for name in ("q_proj", "k_proj", "v_proj"):
            # FSMT's stacks run time-major: `x.transpose(0, 1)` of the embedding output (modeling_fsmt.py
            # FSMTEncoder / FSMTDecoder.forward) is non-contiguous, so each of layer 0's projections reshapes
            # it into its own contiguous copy (traced: fsmt-full-pure, a clone per q/k/v); under autocast each
            # has its own 16-bit cast copy anyway
            linear(ss, c, f"{y}.{name}" if copies else y, yb, lins[name], ads.get(name))
        out = _attention(ss, c2, arch, "sa")
    linear(ss, c2, out, e, lins["out_proj"], ads.get("out_proj"))
    _drop(ss, c2, sw, "sa_drop", h)
    if decoder:
        y, yb = layernorm(ss, c2, "ln_sa" if post else "ln_ca", "resid_ca", h)
        linear(ss, c2, y, yb, lins["q_proj"], ads.get("q_proj"))
        for name in ("k_proj", "v_proj"):
            linear(ss, c2, "enc_out", c.res, lins[name], ads.get(name))
        out = _attention(ss, c2, arch, "ca")
        linear(ss, c2, out, e, lins["out_proj"], ads.get("out_proj"))
        _drop(ss, c2, sw, "ca_drop", h)
    y, yb = layernorm(ss, c2, ("ln_ca" if decoder else "ln_sa") if post else "ln_ff", "resid_ff", h)
    (mlp or bart_mlp)(ss, c2, sw, y, yb, lins, ads)
    _drop(ss, c2, sw, "ff_drop", h, sw.get("ff_dropout", sw["dropout"]))
    if post:
        layernorm(ss, c2, "ln_ff", "resid_out", h)      # its output is the next layer's input (saved there)
    return ss


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch, key: str) -> str:
    if c.attention == "eager":
        return eager_attention(ss, c, arch, key, arch.bart["attn_dropout"])
    return attention_core(ss, c, arch, key, arch.q_dim, arch.q_dim)


def _drop(ss: SavedSet, c: Ctx, sw: dict, key: str, h: int, rate: float | None = None) -> None:
    if (sw["dropout"] if rate is None else rate) > 0:
        ss.save(key, MASK * c.tokens * h)               # CUDA native_dropout's bool mask


def _checkpointed_masks(arch: ModelArch, c: Ctx) -> int:
    """4-D masks that are checkpoint inputs of every layer of a stack under full checkpointing (one tensor each,
    in the embeddings' dtype; traced: led-full-pure-eager-gc): eager's additive causal mask (b, 1, s, s) of the
    decoder (masking_utils create_causal_mask; FA2 takes none), and LED's encoder mask, whose `[:, 0, 0, :]`
    slice keeps the whole (b, 1, s, s) storage of _prepare_4d_attention_mask_inverted alive
    (modeling_led.py LEDEncoder.forward)."""
    square = c.res * c.batch * c.seq * c.seq
    return square * ((c.attention == "eager") + (arch.bart["encoder_attn"] == "longformer"))


def _checkpointed_bart(arch: ModelArch, c: Ctx, n_enc: int, n_dec: int, input_grads: bool) -> int:
    """What full checkpointing keeps of BART's layer beyond each block's input in the residual dtype: under autocast
    the inputs made by a LayerNorm are fp32 (blocks_bart.py checkpointed_inputs, per stack), the encoder output too
    when a norm makes it (its final layer_norm, or a post-LN layer's); with `input_grads` each stack's embedding
    output, a leaf that requires grad (enable_input_require_grads' hook), and what follows it keeps for its gradient
    (layernorm_embedding's input, the dropout's mask). Traced: tools/memtrace/golden/seq2seq/*-lora-mixed-*-gc-*."""
    sw, t, h = arch.bart, c.tokens, arch.hidden_size
    extra = sum(checkpointed_inputs(arch, c.res, c.autocast, t, n) - n * c.res * t * h for n in (n_enc, n_dec))
    if c.autocast and (sw["final_ln"] or sw["post_ln"]):
        extra += (4 - c.res) * t * h
    if input_grads and not c.train_base:
        emb = SavedSet()
        _embeddings(emb, c, sw, h, True)
        extra += emb.total + 2 * c.res * t * h
    return extra


def _embeddings(ss: SavedSet, c: Ctx, sw: dict, h: int, needed: bool) -> None:
    """Each stack's layernorm_embedding input and embedding-dropout mask (modeling_led.py LEDEncoder.forward:
    `inputs_embeds + embed_pos` -> layernorm_embedding -> dropout), kept when the embedding outputs need a
    gradient (`needed`: they train, or enable_input_require_grads)."""
    if not needed:
        return
    for side in ("enc", "dec"):
        if sw["emb_ln"]:
            layernorm(ss, c, f"{side}.ln_emb", f"{side}.emb", h)
        _drop(ss, c, sw, f"{side}.emb_drop", h)


def _names(arch: ModelArch, lins: tuple[Linear, ...], ads: tuple[Adapter, ...]) -> tuple[dict, dict]:
    return {lin.name: lin for lin in lins}, {ad.name: ad for ad in ads}


def t5gemma_cross(ss: SavedSet, c: Ctx, arch: ModelArch, lins: dict, ads: dict) -> None:
    """modeling_t5gemma.py T5GemmaDecoderLayer's cross-attention block: pre_cross_attn_layernorm (Gemma's RMSNorm:
    the fp32 upcast, rsqrt and the fp32 product with 1 + weight), q_proj over its output, k_proj / v_proj over the
    encoder output (one tensor: the caller keeps it once), T5GemmaCrossAttention through the attention interface
    (FA2: q, k, v, the output and the logsumexp; eager: Gemma 2's softcapped scores), o_proj, and
    post_cross_attn_layernorm over o_proj's output."""
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    q_dim, kv_dim = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    y = rmsnorm(ss, c, "ln_ca", "resid_ca", h, gemma=True)
    linear(ss, c, y, c.res, lins["q_proj"], ads.get("q_proj"))
    for name in ("k_proj", "v_proj"):
        linear(ss, c, "enc_out", c.res, lins[name], ads.get(name))
    out = attention_core(ss, c, arch, "ca", q_dim, kv_dim)
    linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
    rmsnorm(ss, c, "post_ca_norm", "ca_out", h, gemma=True)


def t5gemma_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple[Linear, ...],
                   adapters: tuple[Adapter, ...], lm_head_adapter: Adapter | None) -> EncDec:
    """T5Gemma (modeling_t5gemma.py T5GemmaEncoder / T5GemmaDecoder): every layer Gemma 2's (memory/blocks.py
    llama_block: sandwich RMSNorms, GQA, GeGLU; the encoder's bidirectional attention keeps what the causal one
    does), each decoder layer with t5gemma_cross; the encoder's final norm and its output (read by every
    cross-attention's k_proj / v_proj), the decoder's final norm and lm_head's input. Traced:
    tools/memtrace/golden/seq2seq/t5gemma-*."""
    h, t = arch.hidden_size, c.tokens
    layers, fin, shared, head = gemma_stacks(arch, c_first, c, linears, adapters, lm_head_adapter, t5gemma_cross)
    return EncDec(layers=layers, extra=fin + shared + 8 * t, ckpt_extra=fin + c.res * t * h + 8 * t, head=head)


# composites whose stacks are their own module's (memory/blocks_<family>.py), all called alike
OWN_STACKS = {**{t: bert_cross_stacks for t in BERT_CROSS}, "git": git_stacks, **{t: kosmos_stacks for t in KOSMOS},
              PI0: pi0_stacks, EVOLLA: evolla_stacks}


def encoder_decoder(arch: ModelArch, c_first: Ctx, c: Ctx, linears: tuple[Linear, ...],
                    adapters: tuple[Adapter, ...], lm_head_adapter: Adapter | None = None,
                    input_grads: bool = False) -> EncDec | None:
    """The whole model's saved set for an encoder-decoder (None for any other model). The encoder's and the
    decoder's first block see an input that needs no gradient under LoRA (c_first); `input_grads`: LoRA under
    checkpointing, where PEFT's enable_input_require_grads makes the embedding outputs need one."""
    own = OWN_STACKS.get(arch.model_type)
    if own is not None:
        return EncDec(*own(arch, c_first, c, adapters, lm_head_adapter, input_grads))
    if arch.prophetnet is not None:              # memory/blocks_prophetnet.py: the main and ngram streams
        return EncDec(*prophetnet_stacks(arch, c_first, c, linears, adapters, lm_head_adapter, input_grads))
    if arch.model_type == "t5gemma2":            # memory/blocks_t5gemma2.py: the merged self + cross attention
        return EncDec(*t5gemma2_stacks(arch, c_first, c, linears, adapters, lm_head_adapter))
    if arch.model_type == "pix2struct":          # memory/blocks_vision_seq2seq.py: T5 decoder blocks, frozen encoder
        return EncDec(*pix2struct_stacks(arch, c_first, c, adapters, lm_head_adapter, input_grads, t5_block, t5_norm))
    if arch.model_type == "udop":                # memory/blocks_vision_seq2seq.py: image patches in the encoder
        return EncDec(*udop_stacks(arch, c_first, c, linears, adapters, lm_head_adapter, input_grads, t5_block,
                                   t5_norm))
    if arch.t5gemma is not None:
        return t5gemma_stacks(arch, c_first, c, linears, adapters, lm_head_adapter)
    if arch.family not in ("t5", "gpt2"):       # before the name scan: it reads every tensor of the model
        return None
    n = stacks(arch)
    if n is None or (arch.bart is not None and arch.bart["decoder_only"]):   # BartForCausalLM ...: blocks_bart.py
        return None
    n_enc, n_dec = n
    lins, ads = _names(arch, linears, adapters)
    t5 = arch.family == "t5"
    t, h, e = c.tokens, arch.hidden_size, 2 if c.autocast else c.e
    layers, shared = [], SavedSet()
    for i in range(n_enc + n_dec):
        decoder, ci = i >= n_enc, c_first if i in (0, n_enc) else c
        sparse = arch.switch is not None and arch.switch["sparse"][i]
        ss = (t5_layer(arch, ci, lins, ads, decoder, sparse) if t5 else
              bart_block(arch, ci, lins, ads, decoder, i - n_enc * decoder, i == n_enc - 1, nllb_mlp(arch, i)))
        if "enc_out" in ss.items:               # one tensor read by every decoder layer
            shared.save("enc_out", ss.items.pop("enc_out"))
        layers.append(ss.total)
    # the encoder's final norm (T5LayerNorm / nn.LayerNorm) over its last block's output, kept for backward
    fin = SavedSet()
    drop = MASK * t * h if t5 and arch.dropout > 0 else 0   # T5Stack.forward's dropout masks (blocks_seq2seq t5_layer)
    if t5:
        t5_norm(fin, c, "enc_final", "enc_last", h)
        fin.save("enc_final.drop_mask", drop)             # the encoder's final dropout (its output is enc_out)
        fin.save("emb.drop_masks", 2 * drop * (c.train_base or input_grads))   # each stack's embedding dropout
    else:
        if arch.bart["final_ln"]:
            layernorm(fin, c, "enc_final", "enc_last", h)
        _embeddings(fin, c, arch.bart, h, c.train_base)
    extra = fin.total + shared.total + 8 * t      # + the decoder's input ids (int64, shift_right's new tensor)
    ckpt_extra = fin.total + c.res * t * h + 8 * t
    if not t5:
        ckpt_extra += _checkpointed_masks(arch, c) + _checkpointed_bart(arch, c, n_enc, n_dec, input_grads)
    if t5:
        # relative_attention_bias is an nn.Embedding over (s, s) int64 bucket ids, computed once per stack
        # (T5Attention.compute_bias); its weight trains only in full fine-tuning. UMT5: in every self-attention
        per_layer = arch.model_type == "umt5"
        if c.train_base:
            extra += 8 * c.seq * c.seq * (n_enc + n_dec if per_layer else 2)
        # under checkpointing the later blocks take the bias (s, s, heads) as an input (T5Stack.forward
        # `position_bias` handed on), the decoder its additive causal mask (b, 1, s, s) in the model's dtype and the
        # cross-attention's zero bias (1, heads, s, s), created with requires_grad under checkpointing in the
        # scores' dtype (modeling_t5.py T5Attention.forward `torch.zeros(..., dtype=scores.dtype)`: 16-bit under
        # autocast; traced: switch-full-mixed-eager-gc)
        a, s2 = arch.num_heads, c.seq * c.seq
        if not per_layer:
            ckpt_extra += c.res * a * s2 * ((n_enc > 1) + (n_dec > 1))
        # (UMT5: each cross-attention makes its own zero bias, no checkpoint input; traced: umt5drop-full-pure-eager-gc)
        ckpt_extra += c.res * c.batch * s2 + (e * a * s2 if n_dec > 1 and not per_layer else 0)
        # enable_input_require_grads' leaves (each stack's embedding output) beside their dropouts' outputs
        ckpt_extra += 2 * c.res * t * h * bool(input_grads and drop)
    # the decoder's final norm and lm_head (T5 tied: `sequence_output * model_dim**-0.5` is lm_head's input)
    head = SavedSet()
    if t5:
        y, yb = t5_norm(head, c, "dec_final", "dec_last", h), c.res
        head.save("dec_final.drop_mask", drop)            # lm_head reads its output (scaled when tied, v1.0)
    elif arch.bart["final_ln"]:
        y, yb = layernorm(head, c, "dec_final", "dec_last", h)
    else:                       # post-LN: the last layer's final_layer_norm output
        y, yb = "dec_last", 4 if c.autocast and arch.bart["post_ln"] else c.res
    linear(head, c, y, yb, Linear("lm_head", h, arch.vocab_size), lm_head_adapter)
    # Florence-2: the batch's pixel_values and the image tokens' scatter mask (memory/blocks_vision_seq2seq.py)
    return EncDec(layers=tuple(layers), extra=extra, ckpt_extra=ckpt_extra,
                  head=head.total + florence2_inputs(arch, c, input_grads))
