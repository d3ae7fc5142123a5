"""The tensors autograd saves in one layer of the recurrent / hybrid families built around other blocks, as they
train on a GPU: Jamba (Mamba mixer + MoE), Zamba / Zamba2 (shared attention blocks on Mamba / Mamba-2),
RecurrentGemma (RG-LRU + local attention), RWKV-4 (time and channel mixing), xLSTM (mLSTM); and block_saved_bytes,
the state-space dispatch (memory/ssm_blocks.py has the Mamba / Mamba-2 mixers and the hybrids on them). Traced with
tools/memtrace/ssm_trace.py: tests/data/jamba_trace.json, zamba_trace.json, zamba2_trace.json,
recurrent_gemma_trace.json, rwkv_trace.json, xlstm_trace.json (tests/test_ssm_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import (Ctx, SavedSet, attention_core, block_saved_bytes as _classic_saved_bytes, gated_mlp, linear,
                     rmsnorm, sparse_moe)
from .deltanet import olmo_hybrid_layer
from .lora import Adapter
from .ssm_blocks import (MLP_NAMES, SCAN_CHUNK, block_norm, falcon_h1_layer, hybrid_layer, lfm2_layer,
                         mamba1_block, mamba2_block, single_mixer_layer)


def jamba_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Jamba (modeling_jamba.py JambaMambaDecoderLayer / JambaAttentionDecoderLayer): input_layernorm, the Mamba
    mixer or GQA attention without RoPE, residual add, pre_ff_layernorm, then JambaSparseMoeBlock (a router and
    top-k experts: memory/blocks.py sparse_moe, the MoE in ModelArch.ssm["moe"]) or the SwiGLU JambaMLP. An attention
    layer is blocks.py's llama_block (its experts too). Traced: tests/data/jamba_trace.json."""
    experts = any(lin.count > 1 for lin in linears)
    moe_arch = replace(arch, family="llama", moe=arch.ssm["moe"] if experts else None)
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    if "in_proj" not in lins:
        return _classic_saved_bytes(moe_arch, c, linears, adapters)
    ads = {ad.name: ad for ad in adapters}
    ss = SavedSet()
    y = rmsnorm(ss, c, "input_norm", "resid", arch.hidden_size)
    jamba_mixer(ss, c, arch.ssm, y, lins, ads)
    c2 = replace(c, first_layer=False)           # the mixer's output needs a gradient in every layer
    y2 = rmsnorm(ss, c2, "pre_ff_norm", "resid2", arch.hidden_size)
    if experts:
        sparse_moe(ss, c2, moe_arch, y2, c.res, lins, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def jamba_mixer(ss: SavedSet, c: Ctx, ssm, x: str, lins: dict, ads: dict) -> None:
    """JambaMambaMixer.forward (modeling_jamba.py) as a GPU trains it: with mamba_ssm and causal-conv1d installed
    its `causal_conv1d_fn` and `mamba_selective_scan` are their kernels (use_kernel_func_from_hub_with_fallback).
    in_proj's output (2I per token) is kept whole: the conv's input is a strided view of it, and causal-conv1d's
    CausalConv1dFn keeps x (causal_conv1d_interface.py). The conv output u (silu fused) is x_proj's input and the
    scan's u; dt / B / C go through the weight-only RMSNorms (dt_layernorm, b_layernorm, c_layernorm: each an fp32
    copy, rsqrt, normalised tensor; their outputs are fp32 under autocast - an fp32 weight times a 16-bit tensor);
    `dt_proj.weight @ time_step.T` keeps time_step (16-bit: autocast's copy under autocast). mamba_ssm's
    SelectiveScanFn (selective_scan_interface.py) with z keeps u, delta (I), contiguous copies of B and C (N each,
    in their dtype) and of the gate z (I), A = -exp(A_log.float()) (fp32 I x N; exp keeps its own output when
    A_log trains), D.float() and dt_proj.bias.float() (fp32 copies over 16-bit weights), its fp32 chunk states
    (b, I, ceil(s / 2048), 2N) and out (I), and returns out_z, out_proj's input (I). With b > 1 the (b, s, I)
    transposed views x_proj and out_proj read are copied by the matmul's reshape (traced)."""
    t = c.tokens
    linear(ss, c, x, c.res, lins["in_proj"], ads.get("in_proj"))
    if c.first_layer and not c.train_base and "in_proj" not in ads:
        return
    e, inner, n, r = 2 if c.autocast else c.e, ssm["inner"], ssm["state"], ssm["rank"]
    ss.save("xz", e * t * 2 * inner)
    ss.save("u", e * t * inner)
    linear(ss, c, "u" if c.batch == 1 else "u.x_proj", e, lins["x_proj"], ads.get("x_proj"))
    # the norms read x_proj's output (16-bit under autocast) and keep `hs.to(input_dtype)` in that dtype
    cn = replace(c, res=e, first_layer=False)
    for key, d in (("dt_norm", r), ("b_norm", n), ("c_norm", n)):
        rmsnorm(ss, cn, key, f"{key}.in", d)
    bc = 4 if c.autocast and c.res == 4 else e      # B, C: the norms' outputs (weight dtype times e)
    linear(ss, c, "dt_norm.out", 2 if c.autocast else e, lins["dt_proj"], ads.get("dt_proj"))
    ss.save("delta", e * t * inner)
    ss.save("B_C", bc * t * 2 * n)
    ss.save("z", e * t * inner)
    ss.save("A", 4 * inner * n)
    if c.train_base:
        ss.save("A_exp", 4 * inner * n)
    if c.res != 4:
        ss.save("D_dt_bias32", 2 * 4 * inner)
    ss.save("scan_states", 4 * c.batch * inner * -(-c.seq // SCAN_CHUNK) * 2 * n)
    ss.save("scan_out", e * t * inner)
    linear(ss, c, "out_z" if c.batch == 1 else "out_z.copy", e, lins["out_proj"], ads.get("out_proj"))


def zamba_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Zamba2 (modeling_zamba2.py) and Zamba (modeling_zamba.py). A Zamba2MambaDecoderLayer is Mamba-2's block
    (input_layernorm, in_proj, the fused kernel: mamba2_block); a ZambaMambaDecoderLayer is zamba_mamba_block. A
    hybrid layer (Zamba2HybridLayer / ZambaHybridLayer) first runs the shared attention decoder layer on
    `torch.concatenate([hidden_states, original_hidden_states], -1)` (2h wide; the concatenation itself is kept
    by nothing): input_layernorm over 2h, q/k/v from it, attention (no RoPE unless Zamba2's use_mem_rope), o_proj
    to h, pre_ff_layernorm (no residual in the shared block), the MLP - Zamba2MLP: gate_up_proj(x) + its per-layer
    adapter Sequential(Linear(h, rank), Linear(rank, 2I)) (the sum is the activation's input, chunked), act(gate) *
    up, down_proj; ZambaMLP: gate / up / down - then the layer's own ``linear`` (h x h) on it, added to the stream
    before the mixer's block."""
    lins = {lin.name: lin for lin in linears}
    mixer = zamba_mamba_block if arch.ssm.get("mixer") == "mamba1" else mamba2_block
    if "q_proj" not in lins:
        return mixer(arch, c, linears, adapters)
    ads = {ad.name: ad for ad in adapters}
    ss = SavedSet()
    t, e, a = c.tokens, 2 if c.autocast else c.e, arch.ssm["attn_hidden"]
    y = rmsnorm(ss, c, "shared_norm", "cat", a)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    out = attention_core(ss, c, arch, "attn", lins["q_proj"].d_out, lins["k_proj"].d_out)
    c2 = replace(c, first_layer=False)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    y2 = rmsnorm(ss, c2, "pre_ff_norm", "attn_out", arch.hidden_size)
    down = lins["down_proj"]
    if "gate_up_proj" in lins:
        gate_up = lins["gate_up_proj"]
        linear(ss, c2, y2, c.res, gate_up, ads.get("gate_up_proj"))
        ad0, ad1 = lins["gate_up_proj_adapter.0"], lins["gate_up_proj_adapter.1"]
        linear(ss, c2, y2, c.res, ad0, ads.get(ad0.name))
        linear(ss, c2, "adapter.mid", e, ad1, ads.get(ad1.name))
        ss.save("mlp.gate_up", e * t * gate_up.d_out)        # the sum: the activation reads its first half
        ss.save("mlp.act", e * t * down.d_in)
        linear(ss, c2, "mlp.prod", e, down, ads.get("down_proj"))
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, down.d_in)
    linear(ss, c2, "mlp.out", e, lins["linear"], ads.get("linear"))
    ss.items["mixer"] = mixer(arch, c2, linears, adapters)
    return ss.total


def zamba_mamba_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """ZambaMambaDecoderLayer (modeling_zamba.py): input_layernorm, then ZambaMambaMixer.forward with causal-conv1d
    and mamba_ssm as a GPU runs it: in_proj's output (2I, gate and conv input interleaved per channel); the conv
    input made contiguous (I, CausalConv1dFn keeps it); the conv output u (I, the per-head x_proj bmm's and the
    scans' input); the bmm's output - dt, B, C for every head, (R + 2N) x heads - kept by the dt_proj bmm (dt) and
    the scans (B, C are views); delta (I); A = -exp(A_log.float()) (exp's output too when A_log trains), the fp32
    dt bias and D; then one SelectiveScanFn per head (selective_scan_interface.py, with z): the gate made contiguous
    (I over the heads), the fp32 chunk states (b, I, ceil(s / 2048), 2N), out (I); the heads' out_z concatenated is
    out_proj's input (I). Traced: tests/data/zamba_trace.json."""
    ss, ssm, t = SavedSet(), arch.ssm, c.tokens
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    y = rmsnorm(ss, c, "norm", "resid", arch.hidden_size)
    linear(ss, c, y, c.res, lins["in_proj"], ads.get("in_proj"))
    if c.first_layer and not c.train_base and "in_proj" not in ads:
        return ss.total
    e, inner, n, r, heads = 2 if c.autocast else c.e, ssm["inner"], ssm["state"], ssm["rank"], ssm["heads"]
    for key, width in (("conv_in", inner), ("u", inner), ("x_proj_out", heads * (r + 2 * n)), ("delta", inner),
                       ("z", inner), ("scan_out", inner)):
        ss.save(key, e * t * width)
    ss.save("A", 4 * inner * n * (2 if c.train_base else 1))
    if c.res != 4:
        ss.save("D_dt_bias32", 2 * 4 * inner)
    ss.save("scan_states", 4 * c.batch * inner * -(-c.seq // SCAN_CHUNK) * 2 * n)
    if c.batch > 1:
        # the bmms broadcast over (heads, b): u made contiguous, and x_proj_weight / dt_proj_weight expanded and
        # copied per sample (in the compute dtype; traced)
        ss.save("u_heads", e * t * inner)
        ss.save("bmm_weights", e * c.batch * inner * (2 * r + 2 * n))
    # `out_proj(scan_output.transpose(1, 2).to(dtype))`, dtype the input's: the stream's (fp32 under autocast, which
    # then keeps its own 16-bit copy)
    linear(ss, c, "out_z_cat", c.res, lins["out_proj"], ads.get("out_proj"))
    return ss.total


def recurrent_gemma_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...],
                          adapters: tuple[Adapter, ...]) -> int:
    """RecurrentGemma (modeling_recurrent_gemma.py RecurrentGemmaDecoderLayer): temporal_pre_norm, the recurrent
    block or local attention, residual add, channel_pre_norm, the GeGLU MLP (gate / up / down, biased), residual
    add. The norms are RecurrentGemmaRMSNorm (block_norm, fp32_norm "one_plus"). RG-LRU has no kernel in
    transformers: a GPU runs the same PyTorch (rg_lru_saves). RecurrentGemmaAttention computes its own rotary
    cos / sin per layer ((1, s, head_dim / 2) each in q's dtype, kept by the rotation's products), q / k
    concatenated back after partial RoPE, then attention_core. Traced: tests/data/recurrent_gemma_trace.json."""
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    ss = SavedSet()
    e = 2 if c.autocast else c.e
    y = block_norm(ss, c, arch, "temporal_norm", "resid")
    if "linear_x" in lins:
        rg_lru_saves(ss, c, arch.ssm, y, lins, ads)
    else:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear(ss, c, y, c.res, lins[name], ads.get(name))
        if not (c.first_layer and not c.train_base and not {"q_proj", "k_proj"} & set(ads)):
            ss.save("rope_cos_sin", 2 * e * c.seq * arch.ssm["layer_rope_dim"])
        out = attention_core(ss, c, arch, "attn", lins["q_proj"].d_out, lins["k_proj"].d_out)
        linear(ss, replace(c, first_layer=False), out, e, lins["o_proj"], ads.get("o_proj"))
    c2 = replace(c, first_layer=False)
    y2 = block_norm(ss, c2, arch, "channel_norm", "resid2")
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def rg_lru_saves(ss: SavedSet, c: Ctx, ssm, y: str, lins: dict, ads: dict) -> None:
    """RecurrentGemmaRecurrentBlock.forward and RecurrentGemmaRglru.forward / _rnn_scan (modeling_recurrent_gemma.py),
    width w = lru_width. y = act(linear_y(x)) keeps linear_y's output and act's; linear_x's output is conv_1d's input
    (aten::convolution keeps it, frozen weight or not: traced under LoRA); conv_1d's padded output (b, w, s +
    conv1d_width - 1) is what the gates' baddbmm and `activations * input_gate` read; both sigmoid outputs; `-8.0 *
    gate` (kept by its product with softplus(recurrent_param) when that trains) and the softplus output (w); the two exp
    outputs (recurrent_gate, a²) and 1 - a² (SqrtBoundDerivative keeps its input); the two bool ~reset (b, s, 1); the
    multiplier in the input's dtype; the gated input; then the Python loop over s positions: each step's
    `recurrent_gate[:, t].type(fp32)` (a copy per step when the gate is 16-bit; under autocast the gate is fp32 -
    softplus is on CUDA autocast's fp32 list, and an fp32 parameter promotes the chain - so the steps keep views of one
    fp32 (b, s, w) tensor) and the fp32 running state (b, w) the next step multiplies; the output buffer (zeros_like,
    the input's dtype), the product x * y, linear_out's input. Under autocast over fp32 weights the baddbmms and the
    conv keep 16-bit copies of their weights (not linears: counted here)."""
    t, b, s, w = c.tokens, c.batch, c.seq, ssm["lru_width"]
    e = 2 if c.autocast else c.e
    g = 4 if c.autocast else e                          # the recurrent-gate chain's dtype
    linear(ss, c, y, c.res, lins["linear_y"], ads.get("linear_y"))
    linear(ss, c, y, c.res, lins["linear_x"], ads.get("linear_x"))
    if c.first_layer and not c.train_base and not {"linear_x", "linear_y"} & set(ads):
        return
    ss.save("y_branch", 2 * e * t * w)                  # act's input and output
    ss.save("conv_in", e * t * w)                       # aten::convolution keeps its input even over a frozen weight
    if c.train_base:
        ss.save("minus8_gate", e * t * w)
        if c.autocast and c.res == 4:
            ss.save("weights16", 2 * 2 * w * ssm["block_width"] + 2 * w * ssm["conv_width"])
    ss.save("conv_out", e * b * w * (s + ssm["conv_width"] - 1))
    ss.save("sigmoids", 2 * e * t * w)
    ss.save("softplus", g * w)
    ss.save("exp_a_a2_1ma2", 3 * g * t * w)
    ss.save("not_reset", 2 * t)
    ss.save("multiplier_gated", 2 * e * t * w)
    ss.save("scan_gate", 4 * t * w if g == 4 else 4 * b * w * (s - 1))
    ss.save("scan_states", 4 * b * w * s)
    ss.save("scan_out", e * t * w)
    linear(ss, c, "x_times_y", e, lins["linear_out"], ads.get("linear_out"))


def rwkv_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """RWKV-4 (modeling_rwkv.py RwkvBlock): pre_ln (layer 0), ln1, time mixing (RwkvSelfAttention), residual add,
    ln2, channel mixing (RwkvFeedForward), residual add. nn.LayerNorm keeps its input and mean / rstd (fp32 under
    autocast, whose layer_norm runs in fp32 and returns fp32). Each mixing sublayer shifts the norm output by one
    position (ZeroPad2d: a new tensor) and feeds every linear its own `x * mix + shifted * (1 - mix)`; with the
    mixes training, the products keep x and shifted, and each (1 - mix) vector is kept either way. Time mixing:
    sigmoid(receptance) kept; with the kernels-community/rwkv kernel a GPU loads (RwkvLinearAttention) the wkv
    keeps -exp(time_decay.float()) (fp32, a), key, value and its output (a each, the linears' dtype); receptance *
    wkv is output's input (without the `kernels` package RwkvSelfAttention falls back to rwkv_linear_attention_cpu's
    Python loop, not modelled). Channel mixing: square(relu(key(x))) - relu keeps its output, pow reads it (under
    autocast pow is on CUDA's fp32 list: an fp32 copy and an fp32 result value reads through autocast's copy) -
    then receptance * value keeps sigmoid's output and value's. Traced: tests/data/rwkv_trace.json."""
    t, h = c.tokens, arch.hidden_size
    e, f = 2 if c.autocast else c.e, 4 if c.autocast else c.res    # linear outputs; LayerNorm and mixes
    ss = SavedSet()
    att, ffn = linears[:4], linears[4:]

    def ad(lin: Linear) -> Adapter | None:
        return next((a for a in adapters if (a.name, a.d_in, a.d_out) == (lin.name, lin.d_in, lin.d_out)), None)

    def layer_norm(cn: Ctx, key: str, x_bytes: int) -> None:
        if not (cn.first_layer and not cn.train_base):
            ss.save(f"{key}.in", (4 if cn.autocast else x_bytes) * t * h)
            ss.save(f"{key}.stats", 4 * t)

    def mixes(cn: Ctx, key: str, lins: tuple[Linear, ...]) -> None:
        if cn.train_base:
            ss.save(f"{key}.x", f * t * h)
            ss.save(f"{key}.shifted", f * t * h)
        if not (cn.first_layer and not cn.train_base):
            ss.save(f"{key}.one_minus_mix", len(lins) * f * h)
        for lin in lins:
            linear(ss, cn, f"{key}.mixed.{lin.name}", f, lin, ad(lin))

    if c.first_layer:
        layer_norm(c, "pre_ln", c.res)
    layer_norm(c, "ln1", f if c.first_layer else c.res)
    mixes(c, "att", att[:3])
    key, value, receptance, output = att
    if not (c.first_layer and not c.train_base and not any(ad(lin) for lin in att[:3])):
        ss.save("att.sigmoid", e * t * receptance.d_out)
        ss.save("wkv.time_decay", 4 * key.d_out)
        ss.save("wkv.kv_out", 3 * e * t * key.d_out)
    c2 = replace(c, first_layer=False)
    linear(ss, c2, "att.r_wkv", e, output, ad(output))
    layer_norm(c2, "ln2", c.res)
    f_key, f_receptance, f_value = ({lin.name: lin for lin in ffn}[n] for n in ("key", "receptance", "value"))
    mixes(c2, "ffn", (f_key, f_receptance))
    ss.save("ffn.relu", e * t * f_key.d_out)
    if c.autocast:
        ss.save("ffn.relu32", 4 * t * f_key.d_out)
    linear(ss, c2, "ffn.square", 4 if c.autocast else e, f_value, ad(f_value))
    ss.save("ffn.sigmoid_value", 2 * e * t * h)
    return ss.total


def xlstm_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """xLSTM (modeling_xlstm.py xLSTMBlock, weight_mode "single", transformers' own backend: without the xlstm
    package a GPU runs the same PyTorch). norm_mlstm (an RMSNorm), q / k / v / ogate_preact / igate_preact /
    fgate_preact from it, the gates soft-capped (tanh kept, per head), then mlstm_chunkwise_native_autograd over
    s / chunk_size chunks: q, k, v made head-major (qk, qk, v per token), logsigmoid of the forget gate, the
    per-chunk recurrence (mlstm_chunkwise_recurrent_fw_C: each chunk's fp32 C (dqk x dv) and n (dqk) state per head,
    its bf16-cast gated keys, the fp32 exp of the gate vector) and the parallel part (mlstm_chunkwise_parallel_fw_H:
    the (L x L) fp32 decay matrix and its bf16 product, q / k chunk copies, the states cast to bf16, the bf16
    numerator, fp32 normaliser terms), the fp32 concatenated output; multihead_norm (fp32: the centred input, its
    normalised clone, rsqrt per head; its weighted output kept by the output gate's product), sigmoid(ogate),
    out_proj's input (fp32: autocast's copy); norm_ffn and the SwiGLU. Traced under bf16-mixed only
    (tests/data/xlstm_trace.json): in 16-bit weights without autocast the native kernel fails (fp32 gates times the
    bf16 keys, then `@` the bf16 values, mlstm_chunkwise_recurrent_fw_C)."""
    x = arch.ssm
    t, b, h, e = c.tokens, c.batch, arch.hidden_size, 2 if c.autocast else c.e
    nh, qk, v, L = x["heads"], x["qk"], x["v"], x["chunk"]
    nc, dqk, dv = c.seq // L, qk // nh, v // nh
    lins = {MLP_NAMES.get(lin.name, lin.name): lin for lin in linears}
    ads = {MLP_NAMES.get(ad.name, ad.name): ad for ad in adapters}
    ss = SavedSet()
    y = rmsnorm(ss, c, "norm_mlstm", "resid", h)
    for lin in (lins["q"], lins["k"], lins["v"], lins["ogate_preact"], Linear("igate_preact", h, nh),
                Linear("fgate_preact", h, nh)):
        linear(ss, c, y, c.res, lin, ads.get(lin.name))
    f = 4                                                 # the kernel's fp32 terms
    kept = {"qk_heads": 2 * e * t * qk, "v_heads": e * t * v, "k_gated16": e * t * qk,
            "chunk_exp": f * t * nh + f * b * nh * (nc - 1), "decay": f * t * nh * L, "norm_terms": 5 * f * t * nh,
            "C16_n16": e * b * nh * nc * dqk * (dv + 1), "q_k_chunks16": 2 * e * t * qk, "decay_cast16": e * t * nh * L,
            "h_num16": e * t * v, "H32": f * t * v, "mh_norm_centred": f * t * v + f * t * nh,
            "ogate_sigmoid": e * t * v}
    # what only the gates' gradients need: none in layer 0 of a LoRA run without adapters on the gate projections
    # (the gates then need no gradient, and a product keeps only its other factor: traced)
    if not (c.first_layer and not c.train_base and not {"igate_preact", "fgate_preact"} & set(ads)):
        kept |= {"gate_tanh": 2 * e * t * nh, "igate_t_logsig": 2 * e * t * nh,
                 "chunk_max": (8 + 4 + 4 + 4) * b * nh * nc - 4 * b * nh * (nc - 1),
                 "C_states": f * b * nh * dqk * dv * nc, "n_states": f * b * nh * dqk * nc, "tril": L * L,
                 "decay_max": (8 + 4 + 4) * t * nh, "decay16": e * t * nh * L}
    if not (c.first_layer and not c.train_base and "ogate_preact" not in ads):
        kept["h_norm32"] = f * t * v                      # kept by `h_norm * sigmoid(ogate)` for the gate's gradient
    if c.train_base:
        kept["mh_norm_normed"] = f * t * v                # multihead_norm's weight gradient
    for key, nbytes in kept.items():
        ss.save(key, nbytes)
    linear(ss, c, "h_gated", 4 if c.autocast else e, lins["out_proj"], ads.get("out_proj"))
    c2 = replace(c, first_layer=False)
    y2 = rmsnorm(ss, c2, "norm_ffn", "resid2", h)
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


# ModelArch.ssm["layout"] -> the layer's rule; no layout: Mamba-2's block, or hybrid_layer with per-layer linears
LAYOUTS = {"recurrent_gemma": recurrent_gemma_layer, "zamba2": zamba_layer, "jamba": jamba_layer,
           "mamba1": mamba1_block, "falcon_h1": falcon_h1_layer, "lfm2": lfm2_layer, "single": single_mixer_layer,
           "rwkv": rwkv_layer, "xlstm": xlstm_layer, "olmo_hybrid": olmo_hybrid_layer}


def block_saved_bytes(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """memory/blocks.py block_saved_bytes, with the state-space mixers modelled here taking their own rule."""
    if arch.ssm is None:
        return _classic_saved_bytes(arch, c, linears, adapters)
    rule = LAYOUTS.get(arch.ssm.get("layout"))
    if rule is None:
        rule = hybrid_layer if "layers" in arch.ssm else mamba2_block
    return rule(arch, c, linears, adapters)
