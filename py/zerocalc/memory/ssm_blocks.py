"""The tensors autograd saves in one state-space block, as it trains on a GPU.

Mamba-2 (transformers 5.24 models/mamba2/modeling_mamba2.py Mamba2Block / Mamba2Mixer.forward): in training
without a cache the mixer hands in_proj's output to `mamba2_split_conv1d_scan_combined`, the hub kernel
"mamba_split_conv1d_scan_combined" of mamba_ssm (conv1d, chunked scan, gated RMSNorm and out_proj in one
autograd Function). Where mamba_ssm is installed (any real GPU run) its
mamba_ssm/ops/triton/ssd_combined.py MambaSplitConv1dScanCombinedFn.forward saves, besides parameters,
``zxbcdt`` (in_proj's output, kept whole: gate, conv input, dt), ``out_x`` (the scan output before the gate,
inner per token in zxbcdt's dtype) and ``rstd`` (the gated norm's fp32 1/rms per group and token,
layernorm_gated.py _layer_norm_fwd); the norm output and out_proj's input are recomputed in backward. Under
autocast it casts outproj_weight to the autocast dtype and saves that copy. The PyTorch fallback the CPU build
runs keeps about ten times more (fp32 chunk tensors); it is not what a GPU trains with.

Traced with the kernel's saves stood in on fake tensors (tools/memtrace/ssm_trace.py, tests/data/ssm_trace.json):
the block's own RMSNorm, in_proj and residual_in_fp32 as transformers runs them. The hybrids on the same mixer
call: Bamba and Granite 4 (hybrid_layer; tests/data/bamba_trace.json, granitemoehybrid_trace.json, with experts
granitemoehybrid_moe_trace.json), Nemotron-H (single_mixer_layer, its MoE layers nemotron_moe; nemotron_h_trace.json,
nemotron_h_moe_trace.json), Falcon-H1's parallel mixer and
attention (falcon_h1_layer; falcon_h1_trace.json); and LFM2's short convolution (lfm2_layer, the causal-conv1d
kernel; lfm2_trace.json). Each layer gets its kind's linears from ModelArch.ssm["layers"]. The families built
around other blocks (Jamba, Zamba2, RecurrentGemma) and the dispatch by ModelArch.ssm["layout"] are in
memory/ssm_hybrids.py.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import (Ctx, SavedSet, attention_core, block_saved_bytes as _classic_saved_bytes, gated_mlp, linear,
                     rmsnorm, sparse_moe)
from .lora import Adapter


def block_norm(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, x: str) -> str:
    """The layer's RMSNorm: Mamba2RMSNorm / BambaRMSNorm are LlamaRMSNorm's code; NemotronHRMSNorm
    (modeling_nemotron_h.py) multiplies in fp32, `(self.weight.to(torch.float32) * hidden_states).to(input_dtype)`:
    it keeps the fp32 normalised tensor (blocks.py's Gemma rule) and, over 16-bit weights, the weight's fp32 copy."""
    if not arch.ssm.get("fp32_norm"):
        return rmsnorm(ss, c, key, x, arch.hidden_size)
    out = rmsnorm(ss, c, key, x, arch.hidden_size, gemma=True)
    # RecurrentGemmaRMSNorm (fp32_norm "one_plus"): `output * (1.0 + self.weight.float())`, a new fp32 vector
    # whatever the weights' dtype
    if (c.res != 4 or arch.ssm["fp32_norm"] == "one_plus") and not (c.first_layer and not c.train_base):
        ss.save(f"{key}.weight32", 4 * arch.hidden_size)
    return out


def mamba2_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Mamba2Block: norm(x.to(norm dtype)) -> in_proj -> the fused kernel (its saves above) -> + residual.

    The block norm is Mamba2RMSNorm (LlamaRMSNorm's code): its input is `hidden_states.to(norm.weight.dtype)`
    and residual_in_fp32 keeps the stream in fp32 only in the residual sum, so the norm sees the weights' dtype
    (c.res) like a Llama block's."""
    ss = SavedSet()
    t, ssm = c.tokens, arch.ssm
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    y = block_norm(ss, c, arch, "norm", "resid")
    mixer_saves(ss, c, ssm, y, lins["in_proj"], ads.get("in_proj"))
    # fp32 weights under autocast: the kernel saves `outproj_weight.to(torch.get_autocast_gpu_dtype())`, a 16-bit
    # copy of out_proj's weight per layer, which autocast_weight_copies (memory/activations.py) already counts
    return ss.total


def mixer_saves(ss: SavedSet, c: Ctx, ssm, x: str, in_proj: Linear, adapter: Adapter | None) -> None:
    """in_proj reading `x`, then what MambaSplitConv1dScanCombinedFn keeps: zxbcdt, out_x and - with the gated
    RMSNorm (rmsnorm_weight given; Falcon-H1 only under mamba_rms_norm) - its fp32 rstd per group."""
    t = c.tokens
    linear(ss, c, x, c.res, in_proj, adapter)
    # nothing before the kernel needs a gradient in layer 0 of a LoRA run without an in_proj adapter: autograd
    # records no node and the saved tensors go with the forward
    if c.first_layer and not c.train_base and adapter is None:
        return
    e = 2 if c.autocast else c.e                         # in_proj's output dtype
    if ssm.get("mup"):
        # Falcon-H1: zxbcdt = in_proj(x) * mup_vector, a buffer in the weights' dtype: fp32 over fp32 weights even
        # under autocast (mul is not an autocast op), and out_x follows zxbcdt's dtype (traced)
        e = max(e, c.res)
    ss.save("zxbcdt", e * t * in_proj.d_out)
    ss.save("out_x", e * t * ssm["inner"])
    if ssm.get("gated_norm", True):
        ss.save("rstd", 4 * t * ssm["groups"])


def falcon_h1_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Falcon-H1 (modeling_falcon_h1.py FalconH1DecoderLayer): input_layernorm, then the Mamba-2 mixer and GQA
    attention side by side on scaled copies of the norm output (`hidden_states * ssm_in_multiplier`, `*
    attention_in_multiplier`: new tensors, which in_proj and q/k/v keep; the norm output itself is kept by
    nothing), their scaled sum, pre_ff_layernorm and the SwiGLU (gate_proj's output times gate_multiplier is what
    silu keeps: the same size). in_proj's output times the mup_vector buffer is the kernel's zxbcdt."""
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    ss = SavedSet()
    h, e = arch.hidden_size, 2 if c.autocast else c.e
    y = rmsnorm(ss, c, "input_norm", "resid", h)
    mixer_saves(ss, c, arch.ssm, f"{y}.ssm_in", lins["in_proj"], ads.get("in_proj"))
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, f"{y}.attn_in", c.res, lins[name], ads.get(name))
    out = attention_core(ss, c, arch, "attn", lins["q_proj"].d_out, lins["k_proj"].d_out)
    linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
    c2 = replace(c, first_layer=False)
    y2 = rmsnorm(ss, c2, "pre_ff_norm", "resid2", h)
    gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    return ss.total


def ssm_final_norm(ss: SavedSet, c: Ctx, h: int, ssm) -> tuple[str, int]:
    """The backbone's norm_f and lm_head's input; returns (key, bytes per element) of what lm_head reads.

    With residual_in_fp32 (Mamba2Block: `residual = residual.to(torch.float32)`) the last block returns the fp32
    sum, so Mamba2RMSNorm's `.to(float32)` is a no-op: it keeps that fp32 input, the fp32 rsqrt and, for the
    weight's gradient, its fp32 normalised tensor (`self.weight * hidden_states.to(input_dtype)`, input_dtype
    fp32); Mamba2ForCausalLM.forward casts it to lm_head's dtype (a 16-bit copy lm_head keeps; under autocast
    the cast is a no-op and autocast makes that copy). Traced: tests/data/ssm_trace.json."""
    if ssm.get("layout") == "rwkv":
        # RwkvModel.ln_out, an nn.LayerNorm: its input and mean / rstd (fp32 under autocast, like its output)
        f = 4 if c.autocast else c.res
        ss.save("ln_out.in", f * c.tokens * h)
        ss.save("ln_out.stats", 4 * c.tokens)
        return "ln_out.out", f
    if "rope_dim" in ssm:
        # the attention layers' rotary cos/sin, (1, s, rotary dim) each (Bamba: partial_rotary_factor 0.5), in the
        # stream's dtype or fp32 (OLMo Hybrid: OLMo 2's rotary keeps them fp32 and rotates fp32 copies of q, k)
        # (LFM3: fp32 as well, one pair per attention layer type, each with its own rotary embedding)
        ss.save("rope_cos_sin", ssm.get("rope_tables", 1) * 2 * ssm.get("rope_bytes", c.res) * c.seq * ssm["rope_dim"])
    if ssm.get("fp32_norm"):
        # NemotronHRMSNorm / RecurrentGemmaRMSNorm (block_norm); its `.to(input_dtype)` output is what lm_head reads.
        # OlmoHybridRMSNorm ("product": `(self.weight * hidden_states).to(input_dtype)`) copies no weight
        out = rmsnorm(ss, c, "final_norm", "resid_final", h, gemma=True)
        if (c.res != 4 and ssm["fp32_norm"] != "product") or ssm["fp32_norm"] == "one_plus":
            ss.save("final_norm.weight32", 4 * h)
        return out, c.res
    if not ssm["residual_fp32"]:
        return rmsnorm(ss, c, "final_norm", "resid_final", h), c.res
    y = rmsnorm(ss, replace(c, res=4), "final_norm", "resid_final", h)
    return (y, 4) if c.autocast else (f"{y}.to_head", c.res)


def checkpointed_inputs(arch: ModelArch, res: int, t: int, e: int) -> int:
    """Full checkpointing: each Mamba2Block keeps its input. Layer 0 reads the embedding output (the weights'
    dtype); with residual_in_fp32 every later layer reads the fp32 sum `residual.to(float32) + mixer_out`
    (no dropout, so nothing else is kept; traced: tests/data/ssm_trace.json, the 4-layer checkpointed case).

    Zamba2 (modeling_zamba2.py Zamba2Model.forward) passes every layer `original_hidden_states =
    torch.clone(inputs_embeds)`, one more tensor the checkpoints keep; and Zamba2HybridLayer calls its
    mamba_decoder, itself a GradientCheckpointingLayer, with `transformer_hidden_states=` (the ``linear``'s output,
    e per element): GradientCheckpointingLayer.__call__ checkpoints `partial(super().__call__, **kwargs)`, so the
    keyword tensor lives with the partial until backward, one per hybrid layer (traced: zamba2_trace.json)."""
    later = 4 if arch.ssm["residual_fp32"] else res
    stack = res * t * arch.hidden_size + later * t * arch.hidden_size * (arch.num_layers - 1)
    if arch.ssm.get("layout") == "zamba2":
        hybrid = sum(1 for lins in arch.ssm["layers"] if any(lin.name == "q_proj" for lin in lins))
        stack += res * t * arch.hidden_size + hybrid * e * t * arch.hidden_size
    return stack


# other families' MLP linears under blocks.py gated_mlp's names: LFM2's w1/w3/w2, Granite 4's shared_mlp
MLP_NAMES = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj", "input_linear": "gate_up_proj",
             "output_linear": "down_proj", "proj_up_gate": "gate_proj", "proj_up": "up_proj", "proj_down": "down_proj"}


def hybrid_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Bamba (modeling_bamba.py BambaDecoderLayer): input_layernorm, then the Mamba-2 mixer or GQA attention,
    residual add, pre_ff_layernorm, the SwiGLU feed_forward, residual add - a Llama layer with its attention
    swapped where layer_types says linear_attention. An attention layer is blocks.py's llama_block. Dense Granite 4
    (modeling_granitemoehybrid.py GraniteMoeHybridDecoderLayer without experts) is the same with shared_mlp and
    scalar multipliers (embedding, attention, residual: new tensors nothing keeps)."""
    # Granite 4's shared_mlp: input_linear (h -> 2 x shared_intermediate_size) chunked into act(gate) * up, then
    # output_linear - the fused gate_up of blocks.py's gated_mlp; the names are renamed for it (LoRA targets keep
    # the modelling names: the adapters were matched before)
    linears = tuple(replace(lin, name=MLP_NAMES.get(lin.name, lin.name)) for lin in linears)
    adapters = tuple(replace(ad, name=MLP_NAMES.get(ad.name, ad.name)) for ad in adapters)
    experts = tuple(lin for lin in linears if lin.count > 1)
    if experts:
        linears = tuple(lin for lin in linears if lin.count == 1)
    if "in_proj" not in {lin.name for lin in linears}:
        saved = _classic_saved_bytes(replace(arch, family="llama"), c, linears, adapters)
        if not experts:
            return saved
        # the attention layer with experts: the classic block (its norms, attention and shared MLP) plus the
        # routed experts on post_attention_layernorm's output, which the shared MLP's input_linear keeps already
        ss = SavedSet()
        sparse_moe(ss, replace(c, first_layer=False), replace(arch, family="llama", moe=arch.ssm["moe"]), "ln2",
                   c.res, {}, {ad.name: ad for ad in adapters})
        ss.items.pop("ln2", None)
        return saved + ss.total
    ss = SavedSet()
    ss.items["mixer"] = mamba2_block(arch, c, linears, adapters)
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    c2 = replace(c, first_layer=False)           # the mixer's output needs a gradient in every layer
    y = rmsnorm(ss, c2, "ln2", "resid2", arch.hidden_size)
    gated_mlp(ss, c2, "mlp", y, c.res, lins, ads, lins["down_proj"].d_in)
    if experts:
        # Granite 4 with experts (GraniteMoeHybridDecoderLayer: `block_sparse_moe(hidden_states) +
        # shared_mlp(hidden_states)`): GraniteMoeHybridTopKRouter is GraniteMoE's (F.linear on the norm output,
        # softmax over the top-k logits) and GraniteMoeHybridExperts run through transformers' grouped_mm
        # (integrations/moe.py grouped_mm_experts_forward): memory/blocks.py sparse_moe, held for GraniteMoE in
        # tests/data/moe_families_trace.json and here in granitemoehybrid_moe_trace.json
        sparse_moe(ss, c2, replace(arch, family="llama", moe=arch.ssm["moe"]), y, c.res, {}, ads)
    return ss.total


def single_mixer_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Nemotron-H (modeling_nemotron_h.py NemotronHBlock): norm(x.to(norm dtype)), then one mixer by
    layers_block_type - the Mamba-2 mixer, GQA attention without RoPE (NemotronHAttention), or the MLP
    down(relu2(up(x))) (NemotronHMLP, activations.py ReLUSquaredActivation: relu keeps its output for its
    backward, square reads the same tensor, down_proj keeps the square) - and the residual add. Traced:
    tests/data/nemotron_h_trace.json."""
    lins = {lin.name: lin for lin in linears}
    if "in_proj" in lins:
        return mamba2_block(arch, c, linears, adapters)
    ss = SavedSet()
    ads = {ad.name: ad for ad in adapters}
    y = block_norm(ss, c, arch, "norm", "resid")
    e = 2 if c.autocast else c.e
    if "q_proj" in lins:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear(ss, c, y, c.res, lins[name], ads.get(name))
        out = attention_core(ss, c, arch, "attn", lins["q_proj"].d_out, lins["k_proj"].d_out)
        linear(ss, c, out, e, lins["o_proj"], ads.get("o_proj"))
        return ss.total
    if "experts.up_proj" in lins:
        nemotron_moe(ss, c, arch, y, lins, ads)
    else:
        relu2_mlp(ss, c, "mlp", y, lins["up_proj"], lins["down_proj"], ads)
    return ss.total


def relu2_mlp(ss: SavedSet, c: Ctx, key: str, x: str, up: Linear, down: Linear, ads: dict) -> None:
    """NemotronHMLP: down(relu2(up(x))) (activations.py ReLUSquaredActivation: relu keeps its output for its
    backward, square reads the same tensor, down_proj keeps the square)."""
    e = 2 if c.autocast else c.e
    linear(ss, c, x, c.res, up, ads.get(up.name))
    if not (c.first_layer and not c.train_base and up.name not in ads):
        ss.save(f"{key}.relu", e * c.tokens * up.d_out)
        if c.autocast:
            # torch.square is aten::pow, on CUDA autocast's fp32 list: it keeps an fp32 copy of relu's output and
            # returns fp32, which down_proj reads through autocast's 16-bit copy (tools/memtrace/cuda_autocast.py)
            ss.save(f"{key}.relu32", 4 * c.tokens * up.d_out)
    linear(ss, c, f"{key}.square", 4 if c.autocast else e, down, ads.get(down.name))


def nemotron_moe(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, lins: dict, ads: dict) -> None:
    """NemotronHMoE (modeling_nemotron_h.py) on the block norm's output x. NemotronHTopkRouter:
    `F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))` (an fp32 copy of x its weight's
    gradient keeps; autocast's 16-bit copies under autocast: memory/blocks.py sparse_moe's "cast" router), sigmoid
    keeps its fp32 output (t x E), then top-k and gather. NemotronHExperts, `@use_experts_implementation(has_gate=
    False)`, run transformers' grouped_mm (integrations/moe.py grouped_mm_experts_forward) in the experts' weight
    dtype: the gathered tokens (t·k rows, kept for the weights' gradient only), up's output through relu2 (relu
    keeps its output, the square reads the same tensor; the square is down's input, kept when the experts train),
    down's output kept for the routing-weight product, and the sort / permutation indices. The shared expert is a
    NemotronHMLP on x (`self.shared_experts(residuals)`). With moe_latent_size the experts run at that width between
    fc1_latent_proj (reading x) and fc2_latent_proj (reading the experts' sum in fc1's output dtype)."""
    moe, t, h = arch.ssm["moe"], c.tokens, arch.hidden_size
    e = c.res                                           # grouped_mm: `input.to(weight.dtype)`
    k = moe.experts_per_token
    w = lins["experts.up_proj"].d_in                    # h, or moe_latent_size between fc1 / fc2_latent_proj
    if c.train_base:
        xr, xr_bytes = (f"{x}.fp32", 4) if c.res != 4 else (x, c.res)
        linear(ss, c, xr, xr_bytes, Linear("router", h, moe.num_experts), None)
    ss.save("router.probs", 4 * t * moe.num_experts)
    if "fc1_latent_proj" in lins:
        linear(ss, c, x, c.res, lins["fc1_latent_proj"], ads.get("fc1_latent_proj"))
    trained = c.train_base or any(name.startswith("experts.") for name in ads)
    n = t * k * moe.expert_intermediate
    if trained:
        ss.save("moe.gathered", e * t * k * w)
    ss.save("moe.relu", e * n)
    if c.autocast and e != 4:
        # the square (aten::pow, autocast's fp32 list) keeps an fp32 copy of a 16-bit relu output and returns
        # fp32, which `input.to(weight.dtype)` casts back for down's grouped_mm (traced: the LoRA row)
        ss.save("moe.relu32", 4 * n)
    if trained:
        ss.save("moe.square", e * n)
    ss.save("moe.expert_out", e * t * k * w)
    ss.save("moe.routing_index", 40 * t * k + 4 * t)
    if "fc2_latent_proj" in lins:
        # `final_hidden_states.to(hidden_states.dtype)`: fc1_latent_proj's output dtype
        linear(ss, c, "moe.latent_out", 2 if c.autocast else c.e, lins["fc2_latent_proj"], ads.get("fc2_latent_proj"))
    if moe.shared_intermediate:
        relu2_mlp(ss, c, "shared", x, lins["up_proj"], lins["down_proj"], ads)


def lfm2_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """LFM2 (modeling_lfm2.py Lfm2DecoderLayer): operator_norm, then the short convolution or GQA attention with
    per-head q/k RMSNorms, residual add, ffn_norm, SwiGLU w2(silu(w1(x)) * w3(x)), residual add. LFM3
    (modeling_lfm3.py Lfm3DecoderLayer) is the same layer with the attention's sigmoid gate and the sandwich norms
    post_operator_norm / post_ffn_norm (traced: tests/data/lfm3_trace.json).

    Lfm2ShortConv: BCx = in_proj(x).transpose(-1, -2); B, C, x = BCx.chunk(3); B * x keeps B and x (one storage,
    in_proj's whole output); causal_conv1d_fn(B * x) - the causal-conv1d kernel's CausalConv1dFn keeps its input
    (causal_conv1d_interface.py ctx.save_for_backward(x, weight, bias, ...)), as the F.conv1d fallback does; C * conv
    keeps the conv output; out_proj keeps the `.transpose(-1, -2).contiguous()` copy of the product."""
    lins = {MLP_NAMES.get(lin.name, lin.name): lin for lin in linears}
    ads = {MLP_NAMES.get(ad.name, ad.name): ad for ad in adapters}
    ss = SavedSet()
    t, h, e = c.tokens, arch.hidden_size, 2 if c.autocast else c.e
    y = rmsnorm(ss, c, "operator_norm", "resid", h)
    c2 = replace(c, first_layer=False)
    if "in_proj" in lins:
        linear(ss, c, y, c.res, lins["in_proj"], ads.get("in_proj"))
        if not (c.first_layer and not c.train_base and "in_proj" not in ads):
            ss.save("conv.BCx", e * t * 3 * h)
            ss.save("conv.Bx", e * t * h)
            ss.save("conv.out", e * t * h)
        linear(ss, c2, "conv.y", e, lins["out_proj"], ads.get("out_proj"))
    else:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear(ss, c, y, c.res, lins[name], ads.get(name))
        q_dim, kv_dim = lins["q_proj"].d_out, lins["k_proj"].d_out
        # the per-head norms read q_proj / k_proj outputs: 16-bit under autocast, so `hs.to(input_dtype)` (the
        # normalised tensor the weight's gradient needs) is 16-bit even over fp32 weights (traced)
        cq = replace(c2, res=2) if c.autocast else c2
        rmsnorm(ss, cq, "q_norm", "q", q_dim, groups=arch.num_heads)
        rmsnorm(ss, cq, "k_norm", "k", kv_dim, groups=arch.num_kv_heads)
        out = attention_core(ss, c, arch, "attn", q_dim, kv_dim)
        if "g_proj" in lins:
            # LFM3's use_attention_gate (modeling_lfm3.py Lfm3Attention): `attn_output *
            # torch.sigmoid(self.g_proj(hidden_states)).unsqueeze(-1)`: sigmoid keeps its output (one per head),
            # the product (o_proj's input) is a new tensor; the attention output is kept by both already
            linear(ss, c, y, c.res, lins["g_proj"], ads.get("g_proj"))
            ss.save("attn.gate", e * t * arch.num_heads)
            out = "attn.gated"
        o = "o_proj" if "o_proj" in lins else "out_proj"
        linear(ss, c, out, e, lins[o], ads.get(o))
    if arch.ssm.get("sandwich"):
        # LFM3's use_sandwich_norm: post_operator_norm on the mixer's output (the linear's dtype)
        rmsnorm(ss, c2, "post_operator_norm", "op_out", h, x_bytes=e)
    y2 = rmsnorm(ss, c2, "ffn_norm", "resid2", h)
    if "experts.gate_up_proj" in lins:
        # LFM2-MoE (modeling_lfm2_moe.py Lfm2MoeSparseMoeBlock): Lfm2MoeTopKRouter's F.linear and sigmoid, the
        # fused experts through transformers' grouped_mm (memory/blocks.py sparse_moe); tests/data/lfm2_moe_trace.json
        sparse_moe(ss, c2, replace(arch, family="llama", moe=arch.ssm["moe"]), y2, c.res, {}, ads)
    else:
        gated_mlp(ss, c2, "mlp", y2, c.res, lins, ads, lins["down_proj"].d_in)
    if arch.ssm.get("sandwich"):
        rmsnorm(ss, c2, "post_ffn_norm", "mlp_out", h, x_bytes=e)
    return ss.total


SCAN_CHUNK = 2048   # mamba_ssm csrc/selective_scan/selective_scan.cpp: n_chunks = (seqlen + 2048 - 1) / 2048


def mamba1_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Mamba (modeling_mamba.py MambaBlock): norm, in_proj, then `mamba_inner_fn` - with mamba_ssm installed its
    MambaInnerFn (mamba_ssm/ops/selective_scan_interface.py, checkpoint_lvl 1: conv1d_out and delta recomputed)
    keeps xz (in_proj's output made contiguous: the mixer passes `.transpose(1, 2)`, a copy; 2I per token), x_dbl
    (x_proj's output, R + 2N), B and C made contiguous (N each), the scan's fp32 chunk states (b, I, ceil(s / 2048),
    2N) and its output (I), besides parameters; the mixer's A = -exp(A_log.float()) (exp keeps its fp32 output, A
    is another fp32 I x N tensor), D.float() and dt_proj.bias.float() (copies over 16-bit weights). Under
    autocast it casts x_proj / dt_proj / out_proj weights (autocast_weight_copies counts them)."""
    ss, ssm, t = SavedSet(), arch.ssm, c.tokens
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    y = block_norm(ss, c, arch, "norm", "resid")
    linear(ss, c, y, c.res, lins["in_proj"], ads.get("in_proj"))
    if c.first_layer and not c.train_base and "in_proj" not in ads:
        return ss.total
    e, inner, n = 2 if c.autocast else c.e, ssm["inner"], ssm["state"]
    ss.save("xz", e * t * 2 * inner)
    ss.save("x_dbl", e * t * (ssm["rank"] + 2 * n))
    ss.save("B_C", e * t * 2 * n)
    ss.save("scan_states", 4 * c.batch * inner * -(-c.seq // SCAN_CHUNK) * 2 * n)
    ss.save("scan_out", e * t * inner)
    if c.train_base:
        ss.save("A", 2 * 4 * inner * n)                  # exp's output and A, fp32
        if c.res != 4:
            ss.save("D_dt_bias32", 2 * 4 * inner)        # D.float(), dt_proj.bias.float()
    return ss.total
