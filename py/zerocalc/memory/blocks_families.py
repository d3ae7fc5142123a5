"""Saved tensors of the decoder blocks transformers writes with LayerNorms: OPT, GPT-NeoX (Pythia), GPT-J, Phi
(1, 1.5, 2), GPT-BigCode, Falcon, the Llama-shaped StarCoder2, StableLM and OLMo, Cohere's parallel block, and what
Phi-3 keeps beside its Llama block (the MoE families with an expert loop of their own: memory/blocks_moe.py).

Each rule is the op sequence of the transformers 5.24 modelling file (cited per rule) and what each op keeps for
backward, read off fake-tensor traces of the real step (tools/memtrace/families.py, fixtures in
tools/memtrace/golden/families/, held within 3 % by tests/test_family_grid.py; docs/tracer.md §3b).
memory/activations.py calls `layer_saved_bytes`, which falls back to memory/blocks.py's blocks where this module
has no rule (this module imports blocks.py's op rules, so the hook cannot live in blocks.py without an import
cycle).

Shared facts of these blocks:
- nn.LayerNorm (native_layer_norm) keeps its input and the per-row mean and rstd (fp32 on CUDA: 8 bytes per token);
  under autocast it runs in fp32, so its input and output are fp32 and every linear reading the output casts its
  own 16-bit copy (memory/blocks.py linear).
- SDPA's output takes the query's memory layout (torch 2.13 _meta_registrations.py
  meta__scaled_dot_product_flash_attention_for_cpu `torch.empty_like(query)`; flash-attn's mha_fwd likewise
  `torch::empty_like(q)`): a query made by a transpose of a (b, s, a, d) projection gives an output whose
  `transpose(1, 2).contiguous()` is a view, a query made by `torch.cat` (GPT-NeoX's partial rotary) one that
  HF copies before the output projection.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .deltanet import gated_deltanet_layer
from .blocks import MASK, Ctx, SavedSet, attention_core, block_saved_bytes, gated_mlp, linear
from .blocks_gemma4 import GEMMA4, gemma4_block
from .blocks_lightning import minimax_block
from .blocks_minimax_m3 import MODEL_TYPES as MINIMAX_M3, minimax_m3_block
from .blocks_mistral_large4 import mistral_large4_block
from .lora import Adapter
from .ssm_hybrids import block_saved_bytes as ssm_saved_bytes  # blocks.py's, with the state-space mixers


def layernorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> tuple[str, int]:
    """nn.LayerNorm over d: keeps its input (fp32 under autocast) and mean/rstd when anything before it or its
    weight needs a gradient. Returns the output's key and bytes per element."""
    if not (c.first_layer and not c.train_base):
        ss.save(x if not c.autocast or c.res == 4 else f"{key}.in_fp32", (4 if c.autocast else c.res) * c.tokens * d)
        ss.save(f"{key}.stats", 8 * c.tokens)
    return f"{key}.out", 4 if c.autocast else c.res


def _later(c: Ctx) -> Ctx:
    return replace(c, first_layer=False) if c.first_layer else c


def _attention(ss: SavedSet, c: Ctx, arch: ModelArch, q_dim: int, kv_dim: int) -> str:
    """Flash/SDPA via blocks.attention_core; eager with the fp32 softmax and its 16-bit copy these files
    share (`softmax(..., dtype=torch.float32).to(query.dtype)`), i.e. the Llama lineage's eager rule."""
    view = arch if c.attention != "eager" else replace(arch, family="llama")
    return attention_core(ss, c, view, "attn", q_dim, kv_dim)


def _residual_dropout(ss: SavedSet, c: Ctx, arch: ModelArch, key: str) -> None:
    if arch.dropout > 0:
        ss.save(key, MASK * c.tokens * arch.hidden_size)   # CUDA native_dropout's bool mask


def opt_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_opt.py OPTDecoderLayer (do_layer_norm_before): LN -> q/k/v -> SDPA -> out_proj -> dropout ->
    residual; LN -> fc1 -> ReLU -> fc2 -> dropout -> residual. `q_proj(x) * scaling` is a new tensor (SDPA keeps
    it, not q_proj's output); ReLU keeps its output, which is fc2's input (the config's activation_function is
    "relu" in every OPT checkpoint). Traced: 8·t·h + t·I 16-bit elements per layer, plus the fp32 logsumexp."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    e = 2 if c.autocast else c.e
    y, yb = layernorm(ss, c, "ln1", "resid", arch.hidden_size)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    c2 = _later(c)
    out = _attention(ss, c2, arch, arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, e, lins["out_proj"], ads.get("out_proj"))
    _residual_dropout(ss, c2, arch, "attn_drop")
    y2, yb2 = layernorm(ss, c2, "ln2", "resid2", arch.hidden_size)
    fc1, fc2 = lins["fc1"], lins["fc2"]
    linear(ss, c2, y2, yb2, fc1, ads.get("fc1"))
    ss.save("relu.out", e * c.tokens * fc1.d_out)                 # threshold_backward reads the output
    linear(ss, c2, "relu.out", e, fc2, ads.get("fc2"))
    _residual_dropout(ss, c2, arch, "mlp_drop")
    return ss.total


def neox_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_gpt_neox.py GPTNeoXLayer with use_parallel_residual (every Pythia and GPT-NeoX-20B config):
    both LayerNorms read the layer input. GPTNeoXAttention: `qkv.chunk(3)` views one query_key_value output and V
    stays a view of it, so SDPA's saved V keeps the whole (q + 2·kv)-wide output; the partial rotary
    `torch.cat([q_rot, q_pass])` makes new q and k; SDPA's output has the cat's (b, a, s, d) layout, so
    `reshape(...).contiguous()` copies it for dense. MLP: dense_h_to_4h -> GELU (F.gelu keeps its input) ->
    dense_4h_to_h (keeps the GELU output). Traced: 10·t·h + 2·t·I 16-bit elements per layer (h = q = kv)."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e = c.tokens, 2 if c.autocast else c.e
    h, q_dim, kv_dim = arch.hidden_size, arch.q_dim, arch.kv_dim
    y, yb = layernorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, yb, lins["query_key_value"], ads.get("query_key_value"))
    c2 = _later(c)
    if c.attention == "eager":
        out = _attention(ss, c2, arch, q_dim, kv_dim)
    else:
        ss.save("qkv.out", e * t * (q_dim + 2 * kv_dim))        # V is a view: the whole output stays
        ss.save("attn.q", e * t * q_dim)                        # torch.cat after the partial rotary
        ss.save("attn.k", e * t * kv_dim)
        ss.save("attn.v", 0)                                    # inside qkv.out
        ss.save("attn.out", e * t * q_dim)
        ss.save("attn.lse", 4 * arch.num_heads * t)
        out = "attn.out_copy"                                   # reshape(...).contiguous(): dense's input
    linear(ss, c2, out, e, lins["dense"], ads.get("dense"))
    # parallel residual: post_attention_layernorm reads the same layer input (its input is already saved)
    y2, yb2 = layernorm(ss, c, "ln2", "resid", h)
    up, down = lins["dense_h_to_4h"], lins["dense_4h_to_h"]
    linear(ss, c, y2, yb2, up, ads.get(up.name))
    ss.save("gelu.in", e * t * up.d_out)
    linear(ss, c2, "gelu.out", e, down, ads.get(down.name))
    _residual_dropout(ss, c2, arch, "attn_drop")
    _residual_dropout(ss, c2, arch, "mlp_drop")
    return ss.total


def parallel_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_gptj.py GPTJBlock and modeling_phi.py PhiDecoderLayer: one LayerNorm feeds attention and MLP side
    by side; q/k/v projections, gelu_new MLP (python: the input, x³'s factor, tanh, 1 + tanh and the product kept:
    4·t·I, as GPT-2's; fc_out/fc2 keeps the product). GPTJAttention rotates q and k in (b, s, a, d) layout
    (`torch.cat([k_rot, k_pass], -1)`, then permute), so SDPA's output is a view for out_proj; PhiAttention's
    partial rotary cats in (b, a, s, d) layout, so `reshape(...).contiguous()` copies the output for dense.
    GPT-J's eager `matmul(query.to(float32), key.to(float32))` keeps fp32 q and k (autocast's 16-bit copies of them
    under AMP), softmax in fp32, then `.to(value.dtype)`. Traced: GPT-J 6·t·h + 5·t·I, Phi 7·t·h + 5·t·I 16-bit
    elements per layer."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e = c.tokens, 2 if c.autocast else c.e
    h, q_dim, kv_dim = arch.hidden_size, arch.q_dim, arch.kv_dim
    gptj = arch.model_type == "gptj"
    o_name, up_name, down_name = ("out_proj", "fc_in", "fc_out") if gptj else ("dense", "fc1", "fc2")
    y, yb = layernorm(ss, c, "ln1", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    c2 = _later(c)
    if c.attention == "eager" and gptj:
        scores = arch.num_heads * c.seq * c.seq * c.batch
        # the fp32 q and k, or under autocast (matmul runs in 16 bits) the 16-bit copies autocast makes of them
        qk = 2 if c.autocast else 4
        ss.save("attn.q32", qk * t * q_dim)
        ss.save("attn.k32", qk * t * kv_dim)
        ss.save("attn.softmax", 4 * scores)
        ss.save("attn.probs", e * scores)
        ss.save("attn.v", e * t * kv_dim)
        out = "attn.out"
    else:
        out = _attention(ss, c2, arch, q_dim, kv_dim)
        if not gptj and c.attention != "eager":
            out = "attn.out_copy"                               # the cat's layout: contiguous() copies
    linear(ss, c2, out, e, lins[o_name], ads.get(o_name))
    up, down = lins[up_name], lins[down_name]
    linear(ss, c, y, yb, up, ads.get(up.name))
    n = t * up.d_out
    if c.compiled or c.fused_gelu:
        ss.save("gelu", e * n)
        out_bytes = e
    else:
        # under CUDA autocast `pow` runs in fp32: its input copy, tanh and 1 + tanh are fp32 (memory/blocks.py)
        gelu_bytes, out_bytes = (14, 4) if c.autocast else (4 * e, e)
        ss.save("gelu", gelu_bytes * n)
    linear(ss, c2, "gelu.out", out_bytes, down, ads.get(down.name))
    _residual_dropout(ss, c2, arch, "attn_drop")
    _residual_dropout(ss, c2, arch, "mlp_drop")
    return ss.total


def prenorm_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """The Llama-shaped pre-norm blocks whose norms are LayerNorms: modeling_starcoder2.py Starcoder2DecoderLayer
    (nn.LayerNorm with bias; c_fc -> gelu_pytorch_tanh -> c_proj, F.gelu keeping its input), modeling_stablelm.py
    StableLmDecoderLayer (nn.LayerNorm, gated SiLU MLP; the partial rotary cats q and k in (b, a, s, d) layout,
    so o_proj reads a contiguous copy of SDPA's output) and modeling_olmo.py OlmoDecoderLayer (OlmoLayerNorm:
    `F.layer_norm(x.to(float32), ..., None, None).to(orig_dtype)`, no weights: the fp32 upcast is what
    layer_norm keeps; RoPE in fp32 cast back, so q and k are new 16-bit tensors). Traced per layer (16-bit
    elements): StarCoder2 6·t·h + 2·t·kv + 2·t·I, StableLM 9·t·h + 4·t·I, OLMo 8·t·h + 4·t·I and two fp32
    t·h."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e, h = c.tokens, 2 if c.autocast else c.e, arch.hidden_size
    olmo = arch.model_type == "olmo"
    norm = _olmo_norm if olmo else layernorm
    y, yb = norm(ss, c, "ln1", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    c2 = _later(c)
    out = _attention(ss, c2, arch, arch.q_dim, arch.kv_dim)
    if arch.model_type == "stablelm" and c.attention != "eager":
        out = "attn.out_copy"                                   # the cat's layout: contiguous() copies
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    y2, yb2 = norm(ss, c2, "ln2", "resid2", h)
    if "c_fc" in lins:
        up, down = lins["c_fc"], lins["c_proj"]
        linear(ss, c2, y2, yb2, up, ads.get(up.name))
        ss.save("gelu.in", e * t * up.d_out)
        linear(ss, c2, "gelu.out", e, down, ads.get(down.name))
    else:
        gated_mlp(ss, c2, "mlp", y2, yb2, lins, ads, lins["down_proj"].d_in)
    return ss.total


def _olmo_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> tuple[str, int]:
    """OlmoLayerNorm: layer_norm keeps its fp32 input (the upcast copy, or the fp32 residual itself) and
    mean/rstd; the output is cast back to the input's dtype."""
    if not (c.first_layer and not c.train_base):
        ss.save(x if c.res == 4 else f"{key}.in_fp32", 4 * c.tokens * d)
        ss.save(f"{key}.stats", 8 * c.tokens)
    return f"{key}.out", c.res


def cohere_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_cohere.py CohereDecoderLayer: one input_layernorm feeds attention and the gated MLP side by side;
    RoPE runs on `q.float()` / `k.float()` and casts back (new 16-bit q and k in the projections' layout, so
    SDPA's output is a view for o_proj); use_qk_norm (Command R+) puts a CohereLayerNorm over each head of q and
    k before (from the source, not traced). Traced per layer: 5·t·h + 2·t·kv + 4·t·I 16-bit elements and the
    norm's three fp32 t·h."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    e, h = 2 if c.autocast else c.e, arch.hidden_size
    y, yb = cohere_norm(ss, c, "ln1", "resid", h)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, yb, lins[name], ads.get(name))
    c2 = _later(c)
    if arch.qk_norm:
        cohere_norm(ss, c2, "q_norm", "q", arch.q_dim, arch.num_heads)
        cohere_norm(ss, c2, "k_norm", "k", arch.kv_dim, arch.num_kv_heads)
    out = _attention(ss, c2, arch, arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    gated_mlp(ss, c, "mlp", y, yb, lins, ads, lins["down_proj"].d_in)
    return ss.total


def cohere_norm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, groups: int = 1) -> tuple[str, int]:
    """CohereLayerNorm in python, in fp32: `(x - mean)` is computed twice, once kept by pow and once by the product
    with the fp32 rsqrt (groups per token); `weight.float() * normed` keeps the fp32 normalised tensor when the
    weight trains. The output is cast back to the input's dtype."""
    if not (c.first_layer and not c.train_base):
        ss.save(f"{key}.centered_pow", 4 * c.tokens * d)
        ss.save(f"{key}.centered_mul", 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens * groups)
    if c.train_base:
        ss.save(f"{key}.normed", 4 * c.tokens * d)
    return f"{key}.out", c.res


def phi3_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_phi3.py Phi3DecoderLayer: the Llama block (memory/blocks.py llama_block, fused qkv_proj and
    gate_up_proj) plus what Phi3Attention keeps beside it with FlashAttention-2's profile: q/k/v are slices of one
    qkv_proj output and V stays a view of it, so its q and k parts stay alive; `apply_rotary_pos_emb` cats
    `[rotated, pass]` in (b, a, s, d) order, so SDPA's output takes that layout and o_proj reads (and, when it
    trains, keeps) a contiguous copy. Eager attention expands V with repeat_kv (a copy), so nothing extra.
    Traced: 2·t·h + t·kv 16-bit elements per layer above the Llama block (full bf16)."""
    total = block_saved_bytes(arch, c, linears, adapters)
    if c.attention == "eager" or not (c.train_base or adapters):
        return total
    e, t = 2 if c.autocast else c.e, c.tokens
    total += e * t * (arch.q_dim + arch.kv_dim)                 # the q and k parts of the kept qkv output
    if c.train_base:
        total += e * t * arch.q_dim                             # o_proj's contiguous copy of SDPA's output
    return total


def bigcode_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_gpt_bigcode.py GPTBigCodeBlock (multi_query): ln_1 -> c_attn (q and one K/V head, one output:
    SDPA's q, k and v are views of it, so it stays whole) -> attention -> c_proj -> resid_dropout; ln_2 -> c_fc ->
    gelu_pytorch_tanh (F.gelu keeps its input) -> c_proj -> dropout. Eager expands K and V to every head and makes
    them contiguous (copies; k transposed), keeps the fp32 softmax and its 16-bit copy, and o's input is a
    contiguous copy. Traced per layer (16-bit elements): FA2 4·t·h + 2·t·kv + 2·t·I; eager 6·t·h + 2·t·I and
    6 bytes per score."""
    ss = SavedSet()
    ads = {ad.name: ad for ad in adapters}
    t, e, h = c.tokens, 2 if c.autocast else c.e, arch.hidden_size
    attn_in, attn_out, up, down = linears                       # c_attn, attn.c_proj, c_fc, mlp.c_proj
    y, yb = layernorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, yb, attn_in, ads.get(attn_in.name))
    c2 = _later(c)
    if c.attention == "eager":
        scores = arch.num_heads * c.seq * c.seq * c.batch
        for name in ("q", "k_rep", "v_rep"):
            ss.save(f"attn.{name}", e * t * arch.q_dim)
        ss.save("attn.softmax", 4 * scores)
        ss.save("attn.probs", e * scores)
        out = "attn.out_copy"
    else:
        ss.save("attn.qkv", e * t * (arch.q_dim + 2 * arch.kv_dim))   # q, k, v: views of c_attn's output
        ss.save("attn.out", e * t * arch.q_dim)
        ss.save("attn.lse", 4 * arch.num_heads * t)
        out = "attn.out"
    linear(ss, c2, out, e, attn_out, ads.get(attn_out.name))
    _residual_dropout(ss, c2, arch, "attn_drop")
    y2, yb2 = layernorm(ss, c2, "ln2", "resid2", h)
    linear(ss, c2, y2, yb2, up, ads.get(up.name))
    ss.save("gelu.in", e * t * up.d_out)
    linear(ss, c2, "gelu.out", e, down, ads.get(down.name))
    _residual_dropout(ss, c2, arch, "mlp_drop")
    return ss.total


def falcon_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """modeling_falcon.py FalconDecoderLayer with parallel_attn (Falcon-7B/1B layout: one input_layernorm feeds
    attention and the MLP side by side, one `dropout_add` after their sum). FalconAttention: one fused
    query_key_value output; with multi_query `_split_heads` indexes the one K/V head out of it (`[..., [-2], :]`, a
    copy), so SDPA / FA2 keeps q, k and v at one head's width (num_kv_heads > 1, the new_decoder_architecture's
    `broadcast_to(...).flatten(2, 3)`: at every query head's width, from the source, not traced); q is made by
    `transpose(1, 2).reshape` in (b, s, a, d) memory order, so FA2's output is a view for dense
    (FalconFlashAttention2). Eager (`query_layer @ key_layer.transpose(-1, -2)`, `softmax(...,
    dtype=hidden_states.dtype)`, `attention_scores @ value_layer`): matmul's broadcasting copies the one K/V head
    to every head (saved at q's width) and q itself (its (b, s, a, d) order); the softmax keeps its output in the
    hidden dtype (fp32 under autocast: the LayerNorm's output is fp32) and under autocast the matmul a 16-bit
    copy; dense reads a contiguous copy of the permuted output. MLP: dense_h_to_4h -> GELU (keeps its input) ->
    dense_4h_to_h (keeps the GELU output). Traced (tools/memtrace/families.py falcon, 16-bit elements per layer):
    FA2 5·t·h + 2·t·d + 2·t·I and the fp32 logsumexp; eager under AMP 3·t·h fp32 + 5·t·h + 2·t·I and 6 bytes per
    score. new_decoder_architecture (Falcon-40B / 180B): ln_attn feeds attention and ln_mlp the MLP, both reading
    the layer input; K and V broadcast to every query head (traced: families.py falcon40b). The sequential layout
    (parallel_attn false, Falcon-RW's, with ALiBi) is costed as the two-LayerNorm parallel block: its second
    LayerNorm's input (t·h) and attention-dropout mask are not counted, nor ALiBi's eager scores."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    t, e, h = c.tokens, 2 if c.autocast else c.e, arch.hidden_size
    q_dim = arch.q_dim
    kv_dim = arch.kv_dim if arch.num_kv_heads == 1 else q_dim
    y, yb = layernorm(ss, c, "ln1", "resid", h)
    linear(ss, c, y, yb, lins["query_key_value"], ads.get("query_key_value"))
    c2 = _later(c)
    if c.attention == "eager":
        scores = arch.num_heads * c.seq * c.seq * c.batch
        for name in ("q", "k_rep", "v_rep"):                    # matmul's broadcast / layout copies
            ss.save(f"attn.{name}", e * t * q_dim)
        ss.save("attn.softmax", (4 if c.autocast else e) * scores)
        if c.autocast:
            ss.save("attn.probs", 2 * scores)                   # autocast's 16-bit copy for probs @ V
        out = "attn.out_copy"
    else:
        out = attention_core(ss, c2, arch, "attn", q_dim, kv_dim)
    linear(ss, c2, out, e, lins["dense"], ads.get("dense"))
    up, down = lins["dense_h_to_4h"], lins["dense_4h_to_h"]
    if arch.norms_per_layer == 2:
        # the new decoder architecture's ln_mlp reads the same layer input (saved already): its stats and output
        y, yb = layernorm(ss, c, "ln_mlp", "resid", h)
    linear(ss, c, y, yb, up, ads.get(up.name))                  # parallel: one LayerNorm output or ln_mlp's
    ss.save("gelu.in", e * t * up.d_out)
    linear(ss, c2, "gelu.out", e, down, ads.get(down.name))
    _residual_dropout(ss, c2, arch, "mlp_drop")
    return ss.total


def final_norm(ss: SavedSet, c: Ctx, arch: ModelArch, x: str) -> str:
    """The final norm of the Llama-shaped LayerNorm models above (StarCoder2, StableLM: nn.LayerNorm; OLMo:
    OlmoLayerNorm; Cohere: CohereLayerNorm), as their blocks' norms. Returns the output's key."""
    norm = {"olmo": _olmo_norm, "cohere": cohere_norm}.get(arch.model_type, layernorm)
    return norm(ss, c, "final_norm", x, arch.hidden_size)[0]


RULES = {"opt": opt_block, "gpt_neox": neox_block, "gptj": parallel_block, "phi": parallel_block,
         "starcoder2": prenorm_block, "stablelm": prenorm_block, "olmo": prenorm_block,
         "cohere": cohere_block, "phi3": phi3_block, "gpt_bigcode": bigcode_block, "falcon": falcon_block,
         "minimax": minimax_block, **{t: gemma4_block for t in GEMMA4},
         **{t: mistral_large4_block for t in ("mistral_large4", "mistral_large4_text")},
         **{t: minimax_m3_block for t in MINIMAX_M3}}


def layer_saved_bytes(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One block's saved bytes: this module's rule for the model_type (transformers' modelling code), else
    memory/ssm_blocks.py's for a state-space / hybrid block, else memory/blocks.py's (also for the trainers that
    run their own model code: LitGPT, torchtune, torchtitan)."""
    rule = block_saved_bytes if c.own_model else RULES.get(arch.model_type, ssm_saved_bytes)
    if arch.deltanet is not None and not c.own_model:
        rule = gated_deltanet_layer               # memory/deltanet.py (its full-attention layers: blocks.py's)
    return rule(arch, c, linears, adapters)


LAYERNORM_HEADS = ("starcoder2", "stablelm", "olmo", "cohere")   # memory/activations.py: final_norm, not RMSNorm
