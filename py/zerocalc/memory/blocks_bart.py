"""Saved tensors of the BART-lineage causal decoders (model/decoders.py: BartForCausalLM and the *ForCausalLM of
mBART, Marian, Pegasus, Blenderbot(-Small), PLBart, MVP, TrOCR, XGLM, Whisper, BigBird-Pegasus, BioGPT): the
decoder cut from an encoder-decoder, run without an encoder, so each layer's registered cross-attention
(encoder_attn) never runs and keeps nothing.

Each rule is the op sequence of the transformers 5.24 modelling file (cited per rule) and what each op keeps for
backward, read off fake-tensor traces of the real step as AutoModelForCausalLM (tools/memtrace/bart.py, fixtures
in tools/memtrace/golden/bart/, held within 3 % by tests/test_bart_grid.py): bart (post-LayerNorm, GELU,
layernorm_embedding), mbart (pre-LayerNorm, layernorm_embedding and a final layer_norm), marian (post-LayerNorm,
SiLU, no embedding norm), pegasus (pre-LayerNorm, ReLU with activation_dropout, attention_dropout, final
layer_norm), and beside them whisper, biogpt, xglm, blenderbot, blenderbot-small, plbart, mvp and trocr (XGLM, MVP
and TrOCR with their own eager attention whatever the plan asks, XGLM's clamped scores) and bigbird_pegasus
(its decoder's python gelu_new). memory/activations.py calls `layer_saved_bytes` here (this module's layer, else
memory/blocks_families.py's) and `outside_blocks` for what the decoder keeps around its layers.

What the traces show (per layer, t = s·b tokens, h = d_model, I = ffn, e the compute dtype's bytes):
- q/k/v read the layer input (post-LN: the previous layer's final_layer_norm output; pre-LN: the
  self_attn_layer_norm output); FA2 keeps q, k, v, the output and the fp32 logsumexp (memory/blocks.py
  attention_core); eager keeps q, K^T and V contiguous, the softmax (in q's dtype; fp32 under autocast, with the
  matmul's 16-bit copy), attention_dropout's mask and output, and out_proj's contiguous input;
- two LayerNorms keep their input (the residual add; fp32 under autocast) and mean / rstd;
- F.gelu / F.silu keep their input (fc1's output) and fc2 keeps their output: 2·e·t·I; ReLU keeps its output,
  which is fc2's input: e·t·I; activation_dropout adds its bool mask and a new fc2 input;
- `dropout` keeps a bool mask after out_proj and after fc2 (t·h each) and one after the embedding.
`embed_scale` multiplies by a python float (saves nothing); the positions are an embedding of int64 ids.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import MASK, Ctx, SavedSet, attention_core, linear
from .blocks_bert import BERT, bert_block
from .blocks_families import layernorm
from .blocks_moe import layer_saved_bytes as family_layer_saved_bytes
from .lora import Adapter


def eager_attention(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, p_drop: float, clamp: bool = False) -> str:
    """modeling_bart.py eager_attention_forward: `matmul(query, key.transpose(2, 3)) * scaling` keeps q and K^T
    (contiguous copies of the transposed projections), softmax without a dtype (on autocast's fp32 list), then
    `dropout(p=attention_dropout)`; `matmul(attn_weights, value)` keeps the probabilities (a 16-bit copy under
    autocast) and V; the output's `transpose(1, 2).contiguous()` is out_proj's input.
    `clamp`: XGLM's own attention (modeling_xglm.py XGLMAttention.forward: `attn_weights + attention_mask`, then
    `torch.max(attn_weights, torch.full((), finfo.min))`): maximum keeps its input, the masked scores, in the
    mask's dtype (the model's: fp32 under autocast, where the 16-bit bmm output is promoted by the fp32 mask;
    traced: tools/memtrace/golden/bart/xglm-*-eager-*)."""
    e = 2 if c.autocast else c.e
    t, q = c.tokens, arch.q_dim
    for name in ("q", "kT", "v"):
        ss.save(f"{key}.{name}", e * t * q)
    scores = arch.num_heads * c.seq * c.seq * c.batch
    if clamp:
        ss.save(f"{key}.masked", c.res * scores)
    if c.autocast:
        ss.save(f"{key}.softmax", 4 * scores)
        if p_drop > 0:
            ss.save(f"{key}.drop_mask", MASK * scores)
        ss.save(f"{key}.probs16", 2 * scores)
    else:
        ss.save(f"{key}.softmax", e * scores)
        if p_drop > 0:
            ss.save(f"{key}.drop_mask", MASK * scores)
            ss.save(f"{key}.probs", e * scores)
    return f"{key}.out"


def bart_mlp(ss: SavedSet, c: Ctx, sw: dict, x: str, x_bytes: int, lins: dict, ads: dict, key: str = "") -> None:
    """fc1 -> ACT2FN[activation_function] -> dropout(activation_dropout) -> fc2 (modeling_bart.py
    BartDecoderLayer.forward). ReLU's backward reads its output, GELU's and SiLU's their input."""
    e = 2 if c.autocast else c.e
    fc1, fc2 = lins["fc1"], lins["fc2"]
    linear(ss, c, x, x_bytes, fc1, ads.get("fc1"))
    n = c.tokens * fc1.d_out
    out, out_bytes = f"{key}act.out", e
    if sw["act"] == "gelu_new":
        # activations.py NewGELUActivation, python: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³))) keeps x, tanh,
        # 1 + tanh and 0.5·x (4·e per element); under CUDA autocast pow runs in fp32 (x's fp32 copy, tanh and
        # 1 + tanh fp32, 0.5·x 16-bit: 14 bytes) and the output is fp32, which fc2 reads through autocast's copy
        # (blocks_seq2seq.py t5_block's gated-gelu rule; traced: tools/memtrace/golden/bart/bigbird_pegasus-*)
        ss.save(f"{key}gelu_new", (14 if c.autocast else 4 * e) * n)
        out_bytes = 4 if c.autocast else e
    else:
        ss.save(f"{key}act.out" if sw["act"] == "relu" else f"{key}act.in", e * n)
    if sw["act_dropout"] > 0:
        ss.save(f"{key}act.drop_mask", MASK * n)
        out = f"{key}act.drop"
    linear(ss, c, out, out_bytes, fc2, ads.get("fc2"))


def bart_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One decoder layer without its cross-attention. Post-LN (modeling_bart.py BartDecoderLayer: self_attn ->
    dropout -> `residual + x` -> self_attn_layer_norm; fc1 ... fc2 -> dropout -> `residual + x` ->
    final_layer_norm): q/k/v read the layer input, the previous norm's output (fp32 under autocast; layer 0 reads
    the embedding's dropout output, fp32 only after layernorm_embedding). Pre-LN (modeling_mbart.py
    MBartDecoderLayer: each norm on its sublayer's input): the norms keep the residual stream."""
    sw = arch.bart
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    c2 = replace(c, first_layer=False) if c.first_layer else c
    if sw["post_ln"]:
        y, yb = "resid", 4 if c.autocast and (sw["emb_ln"] or not c.first_layer) else c.res
    else:
        y, yb = layernorm(ss, c, "ln_sa", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    if c.attention == "eager" or sw.get("own_attention"):
        out = eager_attention(ss, c2, arch, "attn", sw["attn_dropout"], clamp=sw.get("clamp", False))
    else:
        c_attn = replace(c2, attn_out_copied=True) if sw.get("out_copied") else c2
        out = attention_core(ss, c_attn, arch, "attn", arch.q_dim, arch.q_dim)
    linear(ss, c2, out, e, lins["out_proj"], ads.get("out_proj"))
    if sw["dropout"] > 0:
        ss.save("attn_drop", MASK * c.tokens * h)
    y2, yb2 = layernorm(ss, c2, "ln_sa" if sw["post_ln"] else "ln_ff", "resid_attn", h)
    bart_mlp(ss, c2, sw, y2, yb2, lins, ads)
    if sw["dropout"] > 0:
        ss.save("mlp_drop", MASK * c.tokens * h)
    if sw["post_ln"]:
        layernorm(ss, c2, "ln_ff", "resid_mlp", h)     # its output is the next layer's input (saved there)
    return ss.total


def never_run(arch: ModelArch, module: str) -> bool:
    """A BART-lineage causal decoder's cross-attention (encoder_attn and its encoder_attn_layer_norm): registered,
    never run without an encoder (modeling_bart.py BartDecoderLayer: `if encoder_hidden_states is not None`), so it
    gets no gradient, no optimizer state, and autocast casts none of its weights (traced:
    tools/memtrace/golden/bart)."""
    if arch.prophetnet is not None:
        # ProphetNetForCausalLM: ProphetNetDecoderLayer runs cross_attn only with encoder states (traced:
        # tools/memtrace/golden/prophetnet)
        return ".cross_attn" in module
    if arch.bart is not None and arch.bart.get("nllb") and ".ffn.experts.expert_" in module:
        # NLLB-MoE: transformers 5.24's NllbMoeExperts.forward runs only expert_0 and expert_1
        # (memory/blocks_nllb_moe.py): the others take no gradient either (traced: tools/memtrace/golden/nllb_moe)
        return int(module.split(".ffn.experts.expert_")[1].split(".")[0]) >= 2
    return arch.bart is not None and arch.bart["decoder_only"] and ".encoder_attn" in module


def layer_saved_bytes(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One block's saved bytes: the BART-lineage decoder layer above where the arch has its switches and the
    trainer runs transformers' code, else memory/blocks_moe.py's (its MoE families, then blocks_families.py's)."""
    if arch.bart is not None and arch.bart["decoder_only"] and not c.own_model:
        return bart_layer(arch, c, linears, adapters)
    if arch.model_type in BERT and arch.causal_lm and not c.own_model:
        return bert_block(arch, c, linears, adapters)           # memory/blocks_bert.py
    return family_layer_saved_bytes(arch, c, linears, adapters)


def outside_blocks(ss: SavedSet, c: Ctx, arch: ModelArch, input_grads: bool = False) -> tuple[str, int]:
    """Around the layers (modeling_bart.py BartDecoder.forward: `inputs_embeds + positions` ->
    layernorm_embedding -> dropout -> layers -> layer_norm (mBART, Pegasus ...) -> lm_head): layernorm_embedding's
    input and the embedding dropout's mask when the embedding output needs a gradient (it trains, or
    `input_grads`: PEFT under checkpointing calls enable_input_require_grads, whose hook makes the embedding output
    a leaf that requires grad, itself kept by the graph; nothing before layer 0 needs one under LoRA otherwise),
    the final norm's input. Returns lm_head's input and its bytes per element."""
    sw, h = arch.bart, arch.hidden_size
    if input_grads and not c.train_base:
        ss.save("emb_leaf", c.res * c.tokens * h)
    if c.train_base or input_grads:
        if sw["emb_ln"]:
            layernorm(ss, c, "ln_emb", "emb", h)
        if sw["dropout"] > 0:
            ss.save("emb_drop", MASK * c.tokens * h)
    if sw["final_ln"]:
        return layernorm(ss, c, "ln_final", "resid_final", h)
    if sw["post_ln"]:
        return "ln_ff.out", 4 if c.autocast else c.res      # the last layer's final_layer_norm output
    return "resid_final", c.res


def checkpointed_inputs(arch: ModelArch, res: int, autocast: bool, t: int, n: int = 0) -> int:
    """Full checkpointing keeps each layer's input. Under autocast a LayerNorm's output is fp32 and so is every
    residual sum after it: a post-LN layer's input is the previous final_layer_norm's output (layer 0's the
    embedding's, fp32 only after layernorm_embedding), and layernorm_embedding makes a pre-LN stream fp32 from the
    start (traced: tools/memtrace/golden/bart/*-lora-mixed-eager-gc-*). `n`: one stack's layers (an encoder-decoder's:
    memory/blocks_seq2seq.py), else the decoder's."""
    sw, n = arch.bart, n or arch.num_layers
    fp32 = 0 if not autocast else n if sw["emb_ln"] else n - 1 if sw["post_ln"] else 0
    return (4 * fp32 + res * (n - fp32)) * t * arch.hidden_size
