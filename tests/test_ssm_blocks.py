"""Mamba-2's block, Bamba's, Nemotron-H's, Falcon-H1's, Granite 4's and LFM2's hybrid layers as they train on a
GPU (memory/ssm_blocks.py), held to traces.

The traced model (tools/memtrace/ssm_trace.py): Mamba-2's default config (transformers 5.24 Mamba2Config: 8 groups,
state 128, expand 2, residual_in_fp32) at h = 1024, 32 heads of 64 (inner I = 2048), 2 layers; in_proj
h -> I + (I + 2*8*128) + 32 = 6176. transformers' mixer hands in_proj's output to mamba_ssm's
mamba_split_conv1d_scan_combined in training; the trace stands that kernel in with an autograd.Function saving
what MambaSplitConv1dScanCombinedFn.forward saves (zxbcdt, out_x, the fp32 rstd per group), so norms, in_proj and
the residual stream are traced as transformers runs them. Before this rule the block was costed as a classic
block: activations +10.2 % (full, bf16), +4.7 % (bf16-mixed), -41.6 % (4 layers, checkpointed), +44.4 % (LoRA).

On the CPU fallback (no mamba_ssm) the same step keeps 368 MiB, not 93 MiB: the fp32 chunk-scan tensors; the
norm's tensors and in_proj's output (conv1d's input is a view of it) are the same there.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from zerocalc import Plan
from zerocalc.memory.activations import activations, context
from zerocalc.memory.blocks import SavedSet
from zerocalc.memory.inputs import dtypes_for, module_dtypes
from zerocalc.memory.lora import adapter_params
from zerocalc.memory.deltanet import mixer_saves
from zerocalc.memory.ssm_blocks import nemotron_moe
from zerocalc.memory.stack import effective_stack
from zerocalc.model import model_from_config

DATA = Path(__file__).parent / "data"
FIXTURES = ("ssm_trace", "bamba_trace", "nemotron_h_trace", "lfm2_trace", "falcon_h1_trace", "granitemoehybrid_trace",
            "mamba_trace", "jamba_trace", "zamba2_trace", "recurrent_gemma_trace", "rwkv_trace", "zamba_trace",
            "xlstm_trace", "qwen3_next_trace", "qwen3_5_trace", "granitemoehybrid_moe_trace", "nemotron_h_moe_trace",
            "falcon_mamba_trace", "lfm2_moe_trace", "olmo_hybrid_trace", "lfm3_trace",
            "lara_mini_trace", "gemma3n_text_trace", "nemotron_h_latent_trace")
TRACES = {name: json.loads((DATA / f"{name}.json").read_text()) for name in FIXTURES}
CASES = {c["id"]: c for trace in TRACES.values() for c in trace["cases"]}
H, I, P, G = 1024, 2048, 6176, 8


def acts(case_id: str):
    plan = CASES[case_id]["plan"]
    p = Plan.from_dict(plan)
    return activations(p, model_from_config(plan["model"]), module_dtypes(p, dtypes_for(p)))


def kernel(t: int) -> int:
    """What the fused kernel saves in bf16: zxbcdt 2*t*6176, out_x 2*t*2048, rstd 4*t*8."""
    return 2 * t * P + 2 * t * I + 4 * t * G


def test_full_bf16_layer_by_hand():
    """t = 512: the block norm's fp32 copy (4*512*1024 = 2,097,152), rsqrt (2,048), the normalised bf16 tensor
    (1,048,576), in_proj's input (1,048,576), and the kernel's 6,324,224 + 2,097,152 + 16,384: 12,634,112 B."""
    t = 512
    assert kernel(t) == 6_324_224 + 2_097_152 + 16_384
    assert acts("mamba2-2l-full-s512").layers == (4 * t * H + 4 * t + 2 * t * H + 2 * t * H + kernel(t),) * 2
    assert acts("mamba2-2l-full-s512").layers[0] == 12_634_112


def test_head_by_hand():
    """residual_in_fp32: norm_f gets the fp32 sum and keeps it (2,097,152), its rsqrt (2,048) and its fp32
    normalised tensor (2,097,152); lm_head keeps its bf16 copy (1,048,576); ids and labels 16*512."""
    t = 512
    assert acts("mamba2-2l-full-s512").head_saved == 4 * t * H + 4 * t + 4 * t * H + 2 * t * H + 16 * t \
        == 5_253_120


def test_mixed_layer_by_hand():
    """bf16-mixed: fp32 stream, so the norm keeps its input as is and an fp32 normalised tensor; in_proj keeps
    autocast's bf16 copy of it; the kernel's tensors are bf16 (in_proj ran under autocast). 13,682,688 B; the
    kernel's bf16 copy of out_proj's weight is among autocast_weight_copies."""
    t = 512
    a = acts("mamba2-2l-mixed-s512")
    assert a.layers[0] == 4 * t * H + 4 * t + 4 * t * H + 2 * t * H + kernel(t) == 13_682_688
    # every linear's bf16 copy (in_proj 6176 x 1024, out_proj 1024 x 2048, 2 layers) and the untied head (32768 x 1024)
    assert a.autocast_weight_copies == 2 * (2 * (P * H + H * I) + 32768 * H)


def test_lora_layers_by_hand():
    """LoRA r 16 on in_proj (bf16 base, fp32 adapters, autocast). Layer 0: the norm needs no gradient; lora_A keeps
    autocast's bf16 copy of its fp32 input (1,048,576) and its output (2*512*16); the kernel as above: 9,502,720 B.
    Layer 1 adds the norm's fp32 copy and rsqrt (frozen weight: no normalised tensor): 11,601,920 B."""
    t = 512
    layer0 = 2 * t * H + 2 * t * 16 + kernel(t)
    assert acts("mamba2-2l-lora-mixed-s512").layers == (layer0, layer0 + 4 * t * H + 4 * t) == (9_502_720, 11_601_920)


def test_checkpointed_stack_by_hand():
    """Four layers, s 1024, full checkpointing: layer 0 keeps the bf16 embedding output (2*1024*1024), layers 1-3
    the fp32 residual sums (3 * 4*1024*1024): 14,680,064 B (the classic rule's 5 * 2*t*h was 10,485,760)."""
    t = 1024
    assert acts("mamba2-4l-full-s1024-ckpt").stack_saved == 2 * t * H + 3 * 4 * t * H == 14_680_064


def test_bamba_layers_by_hand():
    """Bamba at h 1024, 4 layers, attention at layer 2 (16/4 heads of 64), MLP 2816, mixer of 32 heads of 64 with
    1 group of state 256 (in_proj 2048 + 2560 + 32 = 4640), bf16, t = 512. Both kinds: input_layernorm
    (4*t*h + 4*t + 2*t*h = 3,147,776), pre_ff_layernorm (the same), gate/up's input (2*t*h), SwiGLU gate, up, act,
    product (4 * 2*t*2816 = 11,534,336). A mixer layer adds in_proj's input (2*t*h), zxbcdt (2*t*4640), out_x
    (2*t*2048) and rstd (4*t*1): 26,777,600 B. The attention layer: q_proj's input (2*t*h), q (2*t*1024), k and v
    (2*t*256 each), the output (2*t*1024), the fp32 logsumexp (4*16*t): 22,581,248 B. (The trace keeps one more
    2*t*1024 there, -1.0 % of the step's activations: its FA2 stand-in copies the output of a query that partial
    RoPE's cat left head-major, tools/memtrace/build.py flash_attention_forward; FA2 writes (b, s, h, d).)"""
    t, h = 512, 1024
    both = 2 * (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 4 * 2 * t * 2816
    mixer = both + 2 * t * h + 2 * t * 4640 + 2 * t * 2048 + 4 * t
    attention = both + 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t
    assert acts("bamba-4l-full-s512").layers == (mixer, mixer, attention, mixer) \
        == (26_777_600, 26_777_600, 22_581_248, 26_777_600)


def test_bamba_lora_adapters_per_layer_kind():
    """LoRA r 16 on in_proj and q/k/v/o: three mixer layers adapt in_proj (16 * (1024 + 4640)), the attention layer
    q, k, v, o (16 * (2*(1024 + 1024) + 2*(1024 + 256))); before, every layer was counted as a mixer layer."""
    plan = CASES["bamba-4l-lora-mixed-s512"]["plan"]
    arch = model_from_config(plan["model"])
    assert adapter_params(arch, Plan.from_dict(plan)) == 3 * 16 * (1024 + 4640) + 16 * (2 * 2048 + 2 * 1280)


def test_nemotron_h_layers_by_hand():
    """Nemotron-H at h 1024, layers mamba / mlp / attention / mlp / mamba (mixer: 32 heads of 64, 8 groups of state
    128, in_proj 6176 as Mamba-2's; attention 8/2 heads of 128, no RoPE; ReLU² MLP 4096), bf16, t = 512.
    NemotronHRMSNorm multiplies in fp32: its fp32 input copy (2,097,152), rsqrt (2,048), fp32 normalised tensor
    (2,097,152) and the weight's fp32 copy (4*1024): 4,200,448 B in every layer. Then
      mixer: in_proj's input 2*t*h + the kernel (zxbcdt, out_x, rstd)               = 13,686,784 B
      mlp: up_proj's input 2*t*h, relu's output 2*t*4096, its square 2*t*4096      = 13,637,632 B
      attention: q_proj's input, q 2*t*1024, k and v 2*t*256, output, lse 4*8*t    =  7,886,848 B"""
    t, h = 512, 1024
    norm = 4 * t * h + 4 * t + 4 * t * h + 4 * h
    mixer = norm + 2 * t * h + kernel(t)
    mlp = norm + 2 * t * h + 2 * 2 * t * 4096
    attention = norm + 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 8 * t
    assert acts("nemotron-h-5l-full-s512").layers == (mixer, mlp, attention, mlp, mixer) \
        == (13_686_784, 13_637_632, 7_886_848, 13_637_632, 13_686_784)


def test_nemotron_h_relu2_under_autocast_by_hand():
    """bf16-mixed, t = 2*512: torch.square is aten::pow, which CUDA autocast runs in fp32: relu's bf16 output
    (2*t*4096), pow's fp32 copy of it (4*t*4096), down_proj's bf16 copy of the fp32 square (2*t*4096); the norm keeps
    the fp32 stream as is and its fp32 normalised tensor (no weight copy: the weight is fp32), up_proj autocast's
    bf16 copy of the norm output (2*t*h): 44,044,288 B."""
    t, h = 1024, 1024
    mlp = 4 * t * h + 4 * t + 4 * t * h + 2 * t * h + (2 + 4 + 2) * t * 4096
    assert acts("nemotron-h-5l-mixed-b2-s512").layers[1] == mlp == 44_044_288


def test_nemotron_h_moe_layer_by_hand():
    """Nemotron-H's MoE layer (tools/memtrace/ssm_trace.py nemotron_h_moe: layers M E * E M, 8 experts of 1024,
    top-2, a shared ReLU² expert of 1024), bf16, t = 512, k*t = 1024 routed rows. The fp32 block norm as above
    (4,200,448 B); NemotronHTopkRouter's `hidden_states.type(torch.float32)`, kept by its linear (4*t*h), sigmoid's
    fp32 output (4*t*8); grouped_mm's gathered rows (2*1024*h), relu's output and its square (2 * 2*1024*1024), the
    experts' output kept for the routing weights (2*1024*h), the sort / permutation indices (40*t*2 + 4*t); the
    shared expert's input (2*t*h), relu and square (2 * 2*t*1024): 17,891,328 B. Before this rule Nemotron-H with
    MoE layers was costed as the classic block: activations +6.2 % / -1.8 % / -20.0 % / +31.5 % (LoRA adapters
    +38.9 %: every layer took the last kind's linears)."""
    t, h = 512, 1024
    norm = 4 * t * h + 4 * t + 4 * t * h + 4 * h
    router = 4 * t * h + 4 * t * 8
    experts = 2 * 1024 * h + 2 * 2 * 1024 * 1024 + 2 * 1024 * h + 40 * t * 2 + 4 * t
    shared = 2 * t * h + 2 * 2 * t * 1024
    layers = acts("nemotron-h-moe-5l-full-s512").layers
    assert layers[1] == layers[3] == norm + router + experts + shared == 17_891_328


def test_nemotron_h_moe_relu2_under_autocast_by_hand():
    """LoRA on the mixer, attention and MLPs (experts frozen), bf16 base under autocast: the frozen experts keep
    neither the gathered rows nor the square, but the square (aten::pow, CUDA autocast's fp32 list) keeps an fp32
    copy of relu's bf16 output: 4*t*2*1024 B more than relu's 2*t*2*1024 (traced: without it -13.4 %)."""
    plan = CASES["nemotron-h-moe-5l-lora-mixed-s512"]["plan"]
    p, arch = Plan.from_dict(plan), model_from_config(plan["model"])
    ss = SavedSet()
    lins = {lin.name: lin for lin in arch.ssm["layers"][1]}
    nemotron_moe(ss, context(p, arch, module_dtypes(p, dtypes_for(p)), False, effective_stack(p)), arch, "y", lins, {})
    t = 512
    assert ss.items["moe.relu"] == 2 * t * 2 * 1024 and ss.items["moe.relu32"] == 4 * t * 2 * 1024
    assert "moe.gathered" not in ss.items and "moe.square" not in ss.items


def test_granite_4_moe_layers_by_hand():
    """Granite 4 with experts (ssm_trace.py granitemoehybrid_moe: the dense shapes above, 8 experts of 1024, top-2),
    bf16, t = 512, 1024 routed rows. Each layer adds to the dense one (test above) GraniteMoE's routed MoE on
    post_attention_layernorm's output, which the router's linear shares with the shared MLP: the fp32 router probs
    (4*t*8), the gathered rows (2*1024*h), gate_up's output (2*1024*2*1024), act and product (2 * 2*1024*1024), the
    experts' output (2*1024*h), the indices (40*t*2 + 4*t): 12,642,304 B. Before this rule Granite 4 with experts
    was costed as the classic block: activations -59.3 % / -48.8 % / 0 % / -49.6 % (LoRA adapters -57.3 %)."""
    t, h = 512, 1024
    both = 2 * (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 2 * t * 2 * 2048 + 2 * 2 * t * 2048
    experts = 4 * t * 8 + 2 * 1024 * h + 2 * 1024 * 2 * 1024 + 2 * 2 * 1024 * 1024 + 2 * 1024 * h + 40 * t * 2 + 4 * t
    assert experts == 12_642_304
    mixer = both + 2 * t * h + 2 * t * 4640 + 2 * t * 2048 + 4 * t + experts
    attention = both + 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t + experts
    assert acts("granitemoehybrid-moe-4l-full-s512").layers == (mixer, mixer, attention, mixer) \
        == (36_274_176, 36_274_176, 32_077_824, 36_274_176)


def test_falcon_mamba_layer_by_hand():
    """FalconMamba at h 1024 (ssm_trace.py falcon_mamba: I = 2048, state 16, time_step_rank 48), bf16, t = 512.
    FalconMambaMixer hands mamba_ssm's MambaInnerFn its weightless B / C / dt RMS norms; the kernel normalises inside
    its forward and keeps the normalised B and C where Mamba keeps the raw ones, so the layer is Mamba's: the block
    norm's fp32 copy, rsqrt and normalised tensor (4*t*h + 4*t + 2*t*h), in_proj's input (2*t*h), A and exp's output
    (2 * 4*2048*16), xz (2*t*4096), x_dbl (2*t*(48 + 32)), B and C (2 * 2*t*16), the fp32 D and dt bias (2 * 4*2048),
    the chunk states (4*2048*1*32), the scan output (2*t*2048): 11,143,168 B. Before, the selective scan was costed
    as a classic block: activations -8.2 % / +4.1 % / -37.4 % / +28.1 % (full, mixed b2 s2560, ckpt, LoRA)."""
    t, h, i = 512, 1024, 2048
    layer = (4 * t * h + 4 * t + 2 * t * h + 2 * t * h + 2 * 4 * i * 16 + 2 * t * 2 * i + 2 * t * 80 + 2 * 2 * t * 16
             + 2 * 4 * i + 4 * i * 32 + 2 * t * i)
    assert acts("falcon-mamba-2l-full-s512").layers == (layer, layer) == (11_143_168, 11_143_168)


def test_lfm2_layers_by_hand():
    """LFM2 at h 1024, layers conv conv attention conv (16/4 heads of 64, SwiGLU 2816), bf16, t = 512. Both kinds:
    operator_norm and ffn_norm (4*t*h + 4*t + 2*t*h = 3,147,776 each), w1/w3's input (2*t*h), SwiGLU
    (4 * 2*t*2816). The short conv: in_proj's input (2*t*h), its whole output BCx (2*t*3h, kept by B * x and C * conv),
    the conv's input B * x, the conv output, out_proj's contiguous input (2*t*h each): 26,218,496 B. Attention:
    q/k/v's input, the per-head q_layernorm (fp32 copy 4*t*1024, rsqrt 4*t*16, bf16 normalised 2*t*1024) and
    k_layernorm (4*t*256, 4*t*4, 2*t*256), FA2's q, k, v, output and lse (4*16*t): 26,554,368 B."""
    t, h = 512, 1024
    both = 2 * (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 4 * 2 * t * 2816
    conv = both + 2 * t * h + 2 * t * 3 * h + 3 * 2 * t * h
    q_norm, k_norm = 4 * t * 1024 + 4 * t * 16 + 2 * t * 1024, 4 * t * 256 + 4 * t * 4 + 2 * t * 256
    attention = both + 2 * t * h + q_norm + k_norm + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t
    assert acts("lfm2-4l-full-s512").layers == (conv, conv, attention, conv) \
        == (26_218_496, 26_218_496, 26_554_368, 26_218_496)


def test_lfm2_moe_layers_by_hand():
    """LFM2-MoE (ssm_trace.py lfm2_moe: LFM2's shapes above, layer 0 dense with the SwiGLU of intermediate_size 2816
    as is, layers 1-3 sparse: 8 experts of 1024, top-2), bf16, t = 512, 1024 routed rows. Layer 0 is LFM2's conv
    layer; a sparse layer swaps the SwiGLU's 2*t*h + 4 * 2*t*2816 for GraniteMoE's routed rule (memory/blocks.py
    sparse_moe): the router's input (the ffn_norm output, 2*t*h), the fp32 probs (4*t*8), the gathered rows
    (2*1024*h), gate_up's output (2*1024*2*1024), act and product (2 * 2*1024*1024), the experts' output (2*1024*h),
    the indices (40*t*2 + 4*t). Before, LFM2-MoE was costed as a classic block: activations -47.8 % / -34.0 % /
    -13.8 % / -15.0 % (LoRA adapters +75.6 %)."""
    t, h = 512, 1024
    norms = 2 * (4 * t * h + 4 * t + 2 * t * h)
    conv = norms + 2 * t * h + 2 * t * 3 * h + 3 * 2 * t * h
    experts = 2 * t * h + 4 * t * 8 + 2 * 1024 * h + 2 * 1024 * 2 * 1024 + 2 * 2 * 1024 * 1024 + 2 * 1024 * h \
        + 40 * t * 2 + 4 * t
    q_norm, k_norm = 4 * t * 1024 + 4 * t * 16 + 2 * t * 1024, 4 * t * 256 + 4 * t * 4 + 2 * t * 256
    attention = norms + 2 * t * h + q_norm + k_norm + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t
    dense = 2 * t * h + 4 * 2 * t * 2816
    assert acts("lfm2-moe-4l-full-s512").layers == (conv + dense, conv + experts, attention + experts, conv + experts)


def test_falcon_h1_layer_by_hand():
    """Falcon-H1 at h 1024 (mixer: 16 heads of 64 = mamba_d_ssm 1024, 1 group of state 256: in_proj 1024 + 1536 + 16
    = 2576; attention 8/2 heads of 128; SwiGLU 2816), bf16, t = 512, mamba_rms_norm off. input_layernorm
    (4*t*h + 4*t + 2*t*h), then two scaled copies of its output, kept by in_proj and by q/k/v (2*t*h each), zxbcdt
    (2*t*2576), out_x (2*t*1024), no rstd (no gated norm); q 2*t*1024, k and v 2*t*256, output 2*t*1024, lse 4*8*t;
    pre_ff_layernorm, gate/up's input, SwiGLU 4 * 2*t*2816: 27,299,840 B."""
    t, h = 512, 1024
    norm = 4 * t * h + 4 * t + 2 * t * h
    layer = norm + 2 * t * h + 2 * t * 2576 + 2 * t * 1024 + 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 \
        + 2 * t * 1024 + 4 * 8 * t + norm + 2 * t * h + 4 * 2 * t * 2816
    assert acts("falcon-h1-3l-full-s512").layers == (layer,) * 3 and layer == 27_299_840


def test_falcon_h1_mup_vector_keeps_zxbcdt_fp32_under_autocast():
    """bf16-mixed, t = 2*512, mamba_rms_norm on: in_proj's bf16 output times the fp32 mup_vector buffer is fp32, so
    the kernel keeps zxbcdt (4*t*2576) and out_x (4*t*1024) in fp32, and the gated norm's rstd (4*t*1). The rest:
    fp32 norms (input kept, rsqrt, fp32 normalised), autocast's bf16 copies for in_proj, q, k, v, gate, up (2*t*h
    each), FA2 in bf16, SwiGLU in bf16: 72,462,336 B."""
    t, h = 1024, 1024
    norm = 4 * t * h + 4 * t + 4 * t * h
    layer = norm + 2 * t * h + 4 * t * 2576 + 4 * t * 1024 + 4 * t + 3 * 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 \
        + 2 * t * 1024 + 4 * 8 * t + norm + 2 * 2 * t * h + 4 * 2 * t * 2816
    assert acts("falcon-h1-3l-mixed-b2-s512").layers[0] == layer == 72_462_336


def test_dense_granite_4_layers_by_hand():
    """Granite 4 without experts at h 1024 (mixer 32 heads of 64, 1 group of state 256: in_proj 4640; attention 16/4
    heads of 64 at layer 2; shared MLP 2048), bf16, t = 512. Both kinds: input and post-attention norms
    (4*t*h + 4*t + 2*t*h each), input_linear's input (2*t*h), its whole output (2*t*2*2048, chunked into gate and up),
    act and product (2*t*2048 each): 15,732,736 B. Mixer: in_proj's input, zxbcdt 2*t*4640, out_x 2*t*2048,
    rstd 4*t: 23,631,872 B. Attention: q/k/v's input, q 2*t*1024, k and v 2*t*256, output, lse 4*16*t:
    19,435,520 B. The scalar multipliers (embedding, residual, logits) keep nothing."""
    t, h = 512, 1024
    both = 2 * (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 2 * t * 2 * 2048 + 2 * 2 * t * 2048
    mixer = both + 2 * t * h + 2 * t * 4640 + 2 * t * 2048 + 4 * t
    attention = both + 2 * t * h + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t
    assert acts("granitemoehybrid-4l-full-s512").layers == (mixer, mixer, attention, mixer) \
        == (23_631_872, 23_631_872, 19_435_520, 23_631_872)


def test_mamba_layer_by_hand():
    """Mamba's default config (I 1536, state 16, dt rank 48) at h 1024, bf16, t = 512: the norm (4*t*h + 4*t +
    2*t*h), in_proj's input (2*t*h), then MambaInnerFn's saves: xz made contiguous (2*t*3072), x_dbl (2*t*80), B and C
    (2*t*16 each), the fp32 chunk states (4 * 1536 * ceil(512 / 2048) * 32), the scan output (2*t*1536); the mixer's
    fp32 exp(A_log) and A (2 * 4*1536*16) and D / dt bias fp32 copies (2 * 4*1536): 9,435,136 B."""
    t, h = 512, 1024
    layer = 4 * t * h + 4 * t + 2 * t * h + 2 * t * h + 2 * t * 3072 + 2 * t * 80 + 2 * 2 * t * 16 \
        + 4 * 1536 * 1 * 32 + 2 * t * 1536 + 2 * 4 * 1536 * 16 + 2 * 4 * 1536
    assert acts("mamba-2l-full-s512").layers == (layer, layer) and layer == 9_435_136


def test_mamba_scan_states_per_2048_positions():
    """b 2, s 2560: two chunks of the selective scan's fp32 states, 4 * 2 * 1536 * 2 * 32 = 786,432 B per layer."""
    two, one = acts("mamba-2l-mixed-b2-s2560").layers[0], acts("mamba-2l-full-s512").layers[0]
    assert 4 * 2 * 1536 * 2 * 32 == 786_432 and two > one


def test_jamba_layers_by_hand():
    """Jamba at h 1024, 4 layers (attention at 2, experts at 1 and 3: 4 of 2816, top-2; dense SwiGLU 2816), Mamba I
    2048, state 16, dt rank 64, bf16, t = 512. input_layernorm and pre_ff_layernorm (4*t*h + 4*t + 2*t*h each).
    The mixer as mamba_ssm / causal-conv1d run it: in_proj's input (2*t*h), its whole output (2*t*2I, the conv's
    input is a view), the conv output u (2*t*I, x_proj's and the scan's input), the dt / B / C RMSNorms (fp32 copy,
    rsqrt, bf16 normalised tensor: 64, 16, 16 wide), dt_proj's input (2*t*64), SelectiveScanFn's delta (2*t*I),
    contiguous B and C (2*t*16 each) and z (2*t*I), A and exp's output (2 * 4*I*16), D and dt bias in fp32 (2 * 4*I),
    the fp32 chunk states (4 * I * 1 * 32), out (2*t*I), out_proj's input out_z (2*t*I): 19,816,448 B with the
    first norm. Dense MLP: gate/up's input, gate, up, act, product (2*t*h + 4 * 2*t*2816): layer 0 35,547,136 B
    (traced: the same). The MoE layer: the router's input (2*t*h), fp32 softmax (4*t*4), the gathered tokens
    (2*t*2*h), grouped gate_up (2*t*2*5632), act and product (2 * 2*t*2*2816), the expert outputs (2*t*2*h), routing
    indices (40*t*2 + 4*t): 51,326,976 B (traced 51,318,800: the indices are 8 KiB fewer)."""
    t, h, inner, n, r = 512, 1024, 2048, 16, 64
    norm = 4 * t * h + 4 * t + 2 * t * h
    small_norms = (4 * t * r + 4 * t + 2 * t * r) + 2 * (4 * t * n + 4 * t + 2 * t * n)
    mixer = 2 * t * h + 2 * t * 2 * inner + 2 * t * inner + small_norms + 2 * t * r + 2 * t * inner + 2 * t * 2 * n \
        + 2 * t * inner + 2 * 4 * inner * n + 2 * 4 * inner + 4 * inner * 32 + 2 * t * inner + 2 * t * inner
    assert norm + mixer == 19_816_448
    dense = 2 * t * h + 4 * 2 * t * 2816
    moe = 2 * t * h + 4 * t * 4 + 2 * t * 2 * h + 2 * t * 2 * 5632 + 2 * 2 * t * 2 * 2816 + 2 * t * 2 * h + 40 * t * 2 \
        + 4 * t
    layers = acts("jamba-4l-full-s512").layers
    assert layers[0] == 2 * norm + mixer + dense == 35_547_136
    assert layers[1] == layers[3] == 2 * norm + mixer + moe == 51_326_976


def test_moe_experts_in_fp32_under_bf16_mixed():
    """bf16-mixed over fp32 weights, t = 2*512: transformers' grouped_mm experts cast their input to the weights'
    dtype (integrations/moe.py _grouped_mm; grouped_mm is not autocast-enabled), so the gathered tokens, gate_up,
    act, product and expert outputs are fp32; the router keeps autocast's bf16 copy of its input (gate_proj and
    up_proj of the dense MLP one each). Jamba's layer 1 minus layer 0 is the MoE minus the dense MLP:
    (2*t*h + 4*t*4 + 4*t*2*h + 4*t*2*5632 + 2 * 4*t*2*2816 + 4*t*2*h + 40*t*2 + 4*t) - (2 * 2*t*h + 4 * 2*t*2816)
    = 83,988,480 B (traced, autocast's weight copies left out: 83,976,192). Before, these were counted in 16 bits."""
    t, h = 1024, 1024
    layers = acts("jamba-4l-mixed-b2-s512").layers
    moe = 2 * t * h + 4 * t * 4 + 4 * t * 2 * h + 4 * t * 2 * 5632 + 2 * 4 * t * 2 * 2816 + 4 * t * 2 * h \
        + 40 * t * 2 + 4 * t
    assert layers[1] - layers[0] == moe - (2 * 2 * t * h + 4 * 2 * t * 2816) == 83_988_480


def test_zamba2_layers_by_hand():
    """Zamba2 at h 1024, layers mamba hybrid mamba hybrid (mixer: 32 heads of 64, 1 group of state 64: in_proj
    2048 + 2048 + 128 + 32 = 4256; the shared block: 16 heads of 128 over 2h = 2048, MLP 2816, gate_up adapter rank
    128), bf16, t = 512. A Mamba layer is Mamba-2's block: the norm, in_proj's input, zxbcdt, out_x, rstd:
    10,653,696 B. A hybrid layer first runs the shared block on the 2h concatenation: its norm (4*t*2h + 4*t +
    2*t*2h), q/k/v's input (2*t*2h), q, k, v (2*t*2048 each), the fp32 lse (4*16*t), the output (2*t*2048);
    pre_ff_layernorm (4*t*h + 4*t + 2*t*h), gate_up's and the adapter's input (2*t*h), the adapter's rank-wide
    middle (2*t*128), the sum gate_up + adapter (2*t*2*2816), act and product (2*t*2816 each), ``linear``'s input
    (2*t*h): 33,722,368 B, then the Mamba block: 44,376,064 B (traced: 44,376,320, the mixer's A adds 256)."""
    t, h, a, inter = 512, 1024, 2048, 2816
    mixer = (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 2 * t * 4256 + 2 * t * 2048 + 4 * t
    shared = (4 * t * a + 4 * t + 2 * t * a) + 2 * t * a + 3 * 2 * t * 2048 + 4 * 16 * t + 2 * t * 2048 \
        + (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 2 * t * 128 + 2 * t * 2 * inter + 2 * 2 * t * inter + 2 * t * h
    assert mixer == 10_653_696 and shared == 33_722_368
    assert acts("zamba2-4l-full-s512").layers == (mixer, shared + mixer, mixer, shared + mixer)


def test_zamba_layers_by_hand():
    """Zamba at h 1024, layers mamba hybrid mamba hybrid (mixer: 2 heads of 1024 = I 2048, state 16, dt rank 64;
    the shared block: 16 heads of 128 over 2h, MLP 2816 gate / up / down), bf16, t = 512. A Mamba layer: the norm
    (4*t*h + 4*t + 2*t*h), in_proj's input (2*t*h), the contiguous conv input and the conv output (2*t*I each),
    the per-head x_proj bmm's output (2*t*2*96), delta, z, the scans' out and out_proj's input (2*t*I each),
    A and exp's output (2 * 4*I*16), fp32 D and dt bias (2 * 4*I), the chunk states (4*I*32): 17,516,544 B (traced:
    the same). A hybrid layer adds Zamba2's shared block without the adapter (33,722,368 - 2*t*128)."""
    t, h, inner = 512, 1024, 2048
    mixer = (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h + 2 * 2 * t * inner + 2 * t * 2 * 96 + 4 * 2 * t * inner \
        + 2 * 4 * inner * 16 + 2 * 4 * inner + 4 * inner * 32
    shared = 33_722_368 - 2 * t * 128
    assert mixer == 17_516_544
    assert acts("zamba-4l-full-s512").layers == (mixer, shared + mixer, mixer, shared + mixer)


def test_zamba2_checkpointed_stack_by_hand():
    """s 1024, full checkpointing: the four layer inputs (2*t*h each), the embedding clone every layer is passed
    (original_hidden_states, 2*t*h) and each hybrid layer's ``linear`` output, a keyword argument of its
    checkpointed mamba_decoder (2 * 2*t*h): 14,680,064 B (the Mamba-2 rule alone: 8,388,608)."""
    t, h = 1024, 1024
    assert acts("zamba2-4l-full-s1024-ckpt").stack_saved == 4 * 2 * t * h + 2 * t * h + 2 * 2 * t * h == 14_680_064


def test_recurrent_gemma_layers_by_hand():
    """RecurrentGemma at h = lru_width = 1024 (4 heads of 256, 1 kv head; MLP 3072 halved: gate / up 1536; conv
    width 4), bf16, t = s = 512, layers recurrent recurrent attention. RecurrentGemmaRMSNorm: the fp32 copy, rsqrt,
    the fp32 normalised tensor and the fp32 (1 + weight) (4*t*h + 4*t + 4*t*h + 4*h = 4,200,448) twice a layer;
    the MLP keeps gate/up's input (2*t*h) and gate, act, up, product (4 * 2*t*1536). The recurrent block: linear_y's
    input (2*t*h), act's input and output, conv_1d's input (2*t*w each), its padded output (2*w*(512 + 3)), both
    sigmoids, -8 * gate, the two exps and 1 - a² (2*t*w each), softplus (2*w), two bool ~reset (t each), the
    multiplier and the gated input (2*t*w each), the 511 per-step fp32 gate copies and 511 running states plus the
    zero state (4*w each), the output buffer and the product x * y (2*t*w each): 35,668,992 B (traced: the same).
    Attention: q/k/v's input (2*t*h), the layer's rotary cos / sin (2 * 2*512*128), q (2*t*1024), k and v
    (2*t*256 each), the lse (4*4*t), the output (2*t*1024): 19,681,280 B (the trace keeps 1 MiB more: its FA2
    stand-in's copy of the output of a query partial RoPE's cat left head-major, as in Bamba)."""
    t, h, w = 512, 1024, 1024
    norm = 4 * t * h + 4 * t + 4 * t * h + 4 * h
    mlp = 2 * t * h + 4 * 2 * t * 1536
    recurrent = 2 * t * h + 3 * 2 * t * w + 2 * w * (512 + 3) + 6 * 2 * t * w + 2 * w + 2 * t + 2 * 2 * t * w \
        + (511 + 511 + 1) * 4 * w + 2 * 2 * t * w
    attention = 2 * t * h + 2 * 2 * 512 * 128 + 2 * t * 1024 + 2 * 2 * t * 256 + 4 * 4 * t + 2 * t * 1024
    assert norm == 4_200_448
    assert acts("recurrent-gemma-3l-full-s512").layers == (2 * norm + recurrent + mlp,) * 2 \
        + (2 * norm + attention + mlp,) == (35_668_992, 35_668_992, 19_681_280)


def test_recurrent_gemma_scan_under_autocast_by_hand():
    """bf16-mixed, b 2: softplus runs in fp32 (CUDA autocast's fp32 list) over the fp32 recurrent_param, so the
    gate chain is fp32: the two exps, 1 - a² and the reset-masked gate (4*t*w each; the scan's steps keep views of
    that one tensor, not copies), the running states (4*2*w * 512 with the zero state); the multiplier is cast
    back to 16 bits. The recurrent layer minus the attention one, from the parts that differ (t = 1024):
    linear_y / linear_x keep autocast copies (2 * 2*t*h) against q/k/v's three (3 * 2*t*h); the block's 16-bit
    tensors (act in/out, conv in, 2 sigmoids, -8 * gate, multiplier, gated, output, product: 10 * 2*t*w), the conv
    output (2*2*w*515), 4 fp32 (b, s, w) tensors, softplus (4*w), ~reset (2*t), the states (4*2*w*512), the
    baddbmm / conv weights' 16-bit copies (2 * 2*w*256 + 2*w*4), linear_out's input kept; attention's rope
    (2 * 2*512*128), q, k, v, output, lse."""
    t, h, w = 1024, 1024, 1024
    recurrent = 2 * 2 * t * h + 10 * 2 * t * w + 2 * 2 * w * 515 + 4 * 4 * t * w + 4 * w + 2 * t + 4 * 2 * w * 512 \
        + 2 * 2 * w * 256 + 2 * w * 4
    attention = 3 * 2 * t * h + 2 * 2 * 512 * 128 + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 4 * t
    layers = acts("recurrent-gemma-3l-mixed-b2-s512").layers
    assert layers[0] - layers[2] == recurrent - attention


def test_rwkv_layers_by_hand():
    """RWKV-4 at h = attention_hidden_size = 1024, FFN 4096, bf16, t = 512. LayerNorm keeps its input and mean /
    rstd (2*t*h + 4*t). Time mixing: the norm output and its one-step shift (2*t*h each, the mixes' gradients), three
    (1 - mix) vectors (3 * 2*h), key / value / receptance's own mixed inputs (3 * 2*t*h), sigmoid(receptance), the
    wkv kernel's key, value and output (2*t*1024 each) and fp32 -exp(time_decay) (4*1024), output's input
    receptance * wkv (2*t*1024): 11,546,624 B with ln1. Channel mixing: ln2, the output and shift, two (1 - mix), key
    and receptance's inputs, relu's output and its square (2*t*4096 each), sigmoid and value's output (2*t*h each):
    15,734,784 B. Layer 0 adds pre_ln (2*t*h + 4*t). 27,281,408 B a layer (traced: the same)."""
    t, h = 512, 1024
    ln = 2 * t * h + 4 * t
    att = ln + 2 * 2 * t * h + 3 * 2 * h + 3 * 2 * t * h + 2 * t * 1024 + 3 * 2 * t * 1024 + 4 * 1024 + 2 * t * 1024
    ffn = ln + 2 * 2 * t * h + 2 * 2 * h + 2 * 2 * t * h + 2 * 2 * t * 4096 + 2 * 2 * t * h
    assert (att, ffn) == (11_546_624, 15_734_784)
    assert acts("rwkv-2l-full-s512").layers == (ln + att + ffn, att + ffn) and att + ffn == 27_281_408


def test_xlstm_logits_soft_cap_by_hand():
    """xLSTMForCausalLM soft-caps `lm_head(x).float()` (output_logit_soft_cap 30: cap * tanh(x / cap)); tanh keeps its
    fp32 output, one more b*s*V tensor: 4 * 1024 * 50304 = 206,045,184 B at b 2, s 512, bf16-mixed (traced with the
    grid's stand-ins at h 1024, 2 layers, 4 heads: logits 0.768 GiB; the engine had 0.576 GiB without the cap)."""
    rows = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}
    cfg = rows["default:xlstm"]["config"] | {"hidden_size": 1024, "embedding_dim": 1024, "num_hidden_layers": 2,
                                             "num_blocks": 2, "num_heads": 4}
    plan = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-mixed", "method": "full",
            "micro_batch_size": 2, "seq_len": 512, "attention": "flash"}
    capped = engine_breakdown(plan)["components"]["logits"]
    plain = engine_breakdown({**plan, "model": cfg | {"output_logit_soft_cap": None}})["components"]["logits"]
    assert capped - plain == 4 * 1024 * 50304 == 206_045_184
    assert abs(capped / 2**30 - 0.768) < 0.001


def test_xlstm_layer_by_hand():
    """xLSTM at h 1024, 4 heads (qk 512: 128 a head, v 1024: 256 a head), chunks of 64 (8 at s 512), FFN 2752,
    bf16-mixed, t = 512, b = 1. norm_mlstm and norm_ffn over the fp32 stream (the input itself, rsqrt, the fp32
    normalised tensor); autocast's 16-bit copy for each of q, k, v, ogate, igate, fgate (6 * 2*t*h). The native
    chunkwise mLSTM: q, k, v head-major (2*t*512 twice, 2*t*1024), the gated keys cast per chunk (2*t*512), the gate
    exps (4*t*4 + 4*4*7), the (64 x 64) fp32 decay matrix and its two 16-bit companions (4*t*4*64, 2 * 2*t*4*64),
    fp32 normaliser terms (5 * 4*t*4), the chunk states in bf16 (2*4*8*128*257), q / k chunk copies (2 * 2*t*512),
    the 16-bit numerator (2*t*1024), the fp32 output (4*t*1024); multihead_norm's centred input and rsqrt
    (4*t*1024 + 4*t*4) and normalised tensor (4*t*1024), sigmoid(ogate) (2*t*1024), the weighted fp32 norm output
    (4*t*1024), out_proj's 16-bit input copy (2*t*1024); for the gates' gradients the tanh caps and logsigmoid (4 *
    2*t*4), chunk maxima (20*4*8 - 4*4*7), the fp32 C (4*4*128*256 * 8) and n states (4*4*128 * 8), the causal mask
    (64*64), the decay maxima (16*t*4); the SwiGLU (2 copies of 2*t*h, 4 * 2*t*2752): 50,733,696 B (traced: the
    same, autocast's weight copies aside)."""
    t, h, nh, qk, v, L, nc = 512, 1024, 4, 512, 1024, 64, 8
    norm = 4 * t * h + 4 * t + 4 * t * h
    kernel = 2 * 2 * t * qk + 2 * t * v + 2 * t * qk + (4 * t * nh + 4 * nh * (nc - 1)) + 4 * t * nh * L \
        + 2 * 2 * t * nh * L + 5 * 4 * t * nh + 2 * nh * nc * 128 * 257 + 2 * 2 * t * qk + 2 * t * v + 4 * t * v
    gates = 4 * 2 * t * nh + (20 * nh * nc - 4 * nh * (nc - 1)) + 4 * nh * 128 * 256 * nc + 4 * nh * 128 * nc \
        + L * L + 16 * t * nh
    mh_norm = 4 * t * v + 4 * t * nh + 4 * t * v + 2 * t * v + 4 * t * v + 2 * t * v
    ffn = 2 * 2 * t * h + 4 * 2 * t * 2752
    layer = norm + 6 * 2 * t * h + kernel + gates + mh_norm + norm + ffn
    assert acts("xlstm-2l-mixed-s512").layers == (layer, layer) and layer == 50_733_696


def test_which_state_space_types_are_exact():
    """Mamba, Mamba-2, Bamba, Falcon-H1, LFM2, Nemotron-H and Granite 4 (with and without their MoE layers) are
    exact, FalconMamba, LFM2-MoE, LFM3, OLMo Hybrid, Gemma 3n and Nemotron-H with a latent MoE projection too."""
    rows = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}
    for exact in ("mamba", "mamba2", "bamba", "lfm2", "falcon_h1", "jamba", "zamba", "zamba2", "recurrent_gemma",
                  "rwkv", "xlstm", "nemotron_h", "granitemoehybrid", "falcon_mamba", "lfm2_moe", "olmo_hybrid", "lfm3",
                  "gemma3n_text"):
        assert model_from_config(rows[f"default:{exact}"]["config"]).support == "exact"
    for case in ("nemotron-h-5l-full-s512", "granitemoehybrid-4l-full-s512", "nemotron-h-moe-5l-full-s512",
                 "granitemoehybrid-moe-4l-full-s512"):
        assert model_from_config(CASES[case]["plan"]["model"]).support == "exact"
    latent = model_from_config(rows["default:nemotron_h"]["config"] | {"moe_latent_size": 512})
    assert latent.ssm is not None and latent.support == "exact"


BEFORE = ("before these rules (the classic block of the mixer's linears), activations: mamba2 +10.2 % / +10.2 % / "
          "+4.7 % / -41.6 % / +44.4 %; bamba -45.6 % / -16.4 % / -13.2 % / -36.8 %; nemotron_h +19.5 % / +2.3 % / "
          "-20.0 % / +15.5 %; lfm2 -46.3 % / -20.1 % / -13.8 % / -26.3 %; jamba -64.3 % / -48.1 % / -12.5 % / -57.7 %; "
          "zamba2 -23.7 % / -17.1 % / -36.3 % / -22.3 %; recurrent_gemma -62.2 % / -15.1 % / -25.0 % / -46.2 % "
          "(and logits -14.3 %: the soft cap's tanh output); rwkv -38.2 % / -25.0 % / +25.1 % / -30.5 %; "
          "zamba -46.5 % / -32.3 % / -36.3 % / -43.5 %; xlstm -25.0 % / -35.4 % / 0.0 % / -56.1 % (and logits "
          "-25 %: the fp32 soft cap) (cases in fixture order)")


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_step_within_3_percent_of_the_trace(case):
    """tools/memtrace/ssm_trace.py [mamba | bamba | nemotron_h | lfm2 | falcon_h1 | granitemoehybrid | jamba | zamba2 |
    recurrent_gemma | rwkv | zamba | xlstm | qwen3_next | qwen3_5_text | granitemoehybrid_moe | nemotron_h_moe |
    falcon_mamba | lfm2_moe | olmo_hybrid | lfm3 | lara_mini | gemma3n_text | nemotron_h_latent]
    on fake
    tensors: every component at the peak and the peak within 3 % (tools/memtrace/compare.py); BEFORE says how
    far off the engine was."""
    eng = engine_breakdown(case["plan"])
    rows = compare(case, eng)
    assert all(r["ok"] for r in rows), f"{BEFORE}\n" + format_rows(case["id"], case, eng, rows)

def test_delta_rule_saves_by_hand():
    """fla ChunkGatedDeltaRuleFunction at t = 512, bf16, key 8*128 = 1024, value 16*128 = 2048: q and k
    (2*512*1024 each), their fp32 rstd (2 * 4*512*8), v (2*512*2048), fp32 g (4*512*16), A (2*512*16*64):
    1,048,576 * 2 + 32,768 + 2,097,152 + 32,768 + 1,048,576 = 5,308,416 B."""
    from zerocalc.memory.blocks import SavedSet
    from zerocalc.memory.deltanet import delta_rule_saves
    ss = SavedSet()
    delta_rule_saves(ss, 512, 2, 1024, 2048, 8, 16)
    assert ss.total == 2 * 1_048_576 + 32_768 + 2_097_152 + 32_768 + 1_048_576 == 5_308_416


def test_qwen3_next_linear_layer_by_hand():
    """Qwen3-Next at h 1024 (tools/memtrace/ssm_trace.py qwen3_next: Gated DeltaNet of 8 key / 16 value heads of
    128, key 1024, value 2048; dense MLP 2816), bf16, t = 512, a linear-attention layer. input_layernorm is Gemma's
    formula: its fp32 copy, rsqrt and fp32 normalised tensor (4*t*h + 4*t + 4*t*h); in_proj_qkvz / in_proj_ba's
    input (2*t*h); causal-conv1d's input (2*t*(2*1024 + 2048)); beta (2*t*16); softplus's fp32 input and output
    (2 * 4*t*16); the fla kernel's 5,308,416; the gated norm's fp32 copy (4*t*2048), rsqrt (4*t*16), normalised
    and weighted tensors (2 * 2*t*2048), fp32 gate and silu (2 * 4*t*2048); out_proj's input (2*t*2048);
    post_attention_layernorm as the first; the MLP's input (2*t*h) and gate, up, act, product (4 * 2*t*2816).
    Before this rule the linear-attention layers were costed as the attention layers: activations -41.8 % (full),
    -17.2 % (bf16-mixed b2), -9.0 % (checkpointed), -39.4 % (LoRA, whose in_proj adapters went uncounted: -26 %);
    Qwen3.5 (qwen3_5_trace) the same within 2.2 points."""
    t, h, v = 512, 1024, 2048
    norm = 4 * t * h + 4 * t + 4 * t * h
    mixer = (2 * t * h + 2 * t * 4096 + 2 * t * 16 + 2 * 4 * t * 16 + 5_308_416 + 4 * t * v + 4 * t * 16
             + 2 * 2 * t * v + 2 * 4 * t * v + 2 * t * v)
    mlp = 2 * t * h + 4 * 2 * t * 2816
    layers = acts("qwen3-next-4l-full-s512").layers
    assert layers[0] == layers[1] == layers[2] == 2 * norm + mixer + mlp == 50_515_968


def test_olmo_hybrid_layers_by_hand():
    """OLMo Hybrid at h 1024 (ssm_trace.py olmo_hybrid: Gated DeltaNet of 8 key / value heads of 64 / 128, key 512,
    value 1024; attention 8 heads of 128 at layer 3; SwiGLU 2816), bf16, t = 512. OlmoHybridRMSNorm keeps its fp32
    copy, rsqrt and fp32 normalised tensor (4*t*h + 4*t + 4*t*h) and copies no weight.
      linear layer: input_layernorm; q/k/v/a/b/g_proj's input (2*t*h); the conv's input cat(q, k, v) (2*t*2048);
        beta and `beta * 2.0` (2 * 2*t*8); softplus's fp32 input and output (2 * 4*t*8); fla's q, k (2*t*512 each),
        fp32 rstd (2 * 4*t*8), v (2*t*1024), fp32 g (4*t*8), A (2*t*8*64); o_norm's fp32 copy (4*t*1024), rsqrt
        (4*t*8), normalised and weighted tensors (2 * 2*t*1024), fp32 gate and silu (2 * 4*t*1024); o_proj's input
        (2*t*1024); post_attention_layernorm; the MLP's input (2*t*h), gate, up, act, product (4 * 2*t*2816)
        = 36,294,656 B;
      attention layer: q/k/v's input (2*t*h); q_norm and k_norm over 1024 (4*t*1024 + 4*t + 4*t*1024 each); FA2's
        q, k, v, output (2*t*1024 each; the output is o_proj's input) and lse (4*8*t); post_attention_layernorm; the
        MLP; post_feedforward_layernorm = 34,627,584 B.
    Before this rule both kinds were costed as a classic block: activations -60.6 % / -27.2 % / -26.3 % / -44.6 %
    (full, mixed b2, ckpt, LoRA)."""
    t, h = 512, 1024
    norm = 4 * t * h + 4 * t + 4 * t * h
    mlp = 2 * t * h + 4 * 2 * t * 2816
    delta = 2 * 2 * t * 512 + 2 * 4 * t * 8 + 2 * t * 1024 + 4 * t * 8 + 2 * t * 8 * 64
    gnorm = 4 * t * 1024 + 4 * t * 8 + 2 * 2 * t * 1024 + 2 * 4 * t * 1024
    linear = norm + 2 * t * h + 2 * t * 2048 + 2 * 2 * t * 8 + 2 * 4 * t * 8 + delta + gnorm + 2 * t * 1024 + norm + mlp
    qk = 2 * (4 * t * 1024 + 4 * t + 4 * t * 1024)
    attention = 2 * t * h + qk + 4 * 2 * t * 1024 + 4 * 8 * t + norm + mlp + norm
    assert acts("olmo-hybrid-4l-full-s512").layers == (linear, linear, linear, attention) \
        == (36_294_656, 36_294_656, 36_294_656, 34_627_584)


def test_olmo_hybrid_head_by_hand():
    """model.norm (OLMo 2's: fp32 copy, rsqrt, fp32 normalised tensor, no weight copy), lm_head's bf16 input, the
    fp32 RoPE cos / sin (2 * 4*512*128: OlmoHybridRotaryEmbedding, built because the default config has rope_theta),
    ids and labels (16*t): 5,777,408 B; a config without rope_theta (the released checkpoints) keeps no cos / sin."""
    t, h = 512, 1024
    assert acts("olmo-hybrid-4l-full-s512").head_saved == 4 * t * h + 4 * t + 4 * t * h + 2 * t * h \
        + 2 * 4 * t * 128 + 16 * t == 5_777_408
    plan = CASES["olmo-hybrid-4l-full-s512"]["plan"]
    nope = model_from_config(plan["model"] | {"rope_parameters": None})
    assert "rope_dim" not in nope.ssm and nope.support == "exact"


def test_lfm3_layers_by_hand():
    """LFM3 at h 1024 (ssm_trace.py lfm3: 16/4 heads of 64, SwiGLU 2816, layers conv conv full sliding), bf16,
    t = 512. Every norm is Lfm3RMSNorm (LlamaRMSNorm's formula: 4*t*h + 4*t + 2*t*h). A conv layer is LFM2's
    (test above) plus post_operator_norm and post_ffn_norm on the mixer's and the MLP's outputs: 32,514,048 B. An
    attention layer: operator_norm, q/k/v/g_proj's input (2*t*h), the per-head q_norm and k_norm, FA2's q, k, v,
    output and lse, the gate's sigmoid (2*t*16) and the gated product o_proj reads (2*t*1024), the sandwich norms,
    ffn_norm, the MLP: 33,914,880 B (both attention kinds). The head adds the two fp32 cos / sin pairs
    (2 * 2 * 4*t*64: one per attention layer type). Before, LFM3 was costed as a classic block: activations
    -57.2 % / -23.9 % / -17.6 % / -36.5 % (full, mixed b2, ckpt, LoRA)."""
    t, h = 512, 1024
    norm = 4 * t * h + 4 * t + 2 * t * h
    tail = norm + norm + 2 * t * h + 4 * 2 * t * 2816 + norm             # post_operator, ffn_norm + MLP, post_ffn
    conv = norm + 2 * t * h + 2 * t * 3 * h + 3 * 2 * t * h + tail
    q_norm, k_norm = 4 * t * 1024 + 4 * t * 16 + 2 * t * 1024, 4 * t * 256 + 4 * t * 4 + 2 * t * 256
    attention = (norm + 2 * t * h + q_norm + k_norm + 2 * t * 1024 + 2 * 2 * t * 256 + 2 * t * 1024 + 4 * 16 * t
                 + 2 * t * 16 + 2 * t * 1024 + tail)
    a = acts("lfm3-4l-full-s512")
    assert a.layers == (conv, conv, attention, attention) == (32_514_048, 32_514_048, 33_914_880, 33_914_880)
    assert a.head_saved == norm + 2 * t * h + 2 * 2 * 4 * t * 64 + 16 * t


def test_lara_mini_gated_norm_in_fp32_by_hand():
    """Lara-Mini (ssm_trace.py lara_mini: Qwen3.5's Gated DeltaNet of 8 key / 16 value heads of 128, value 2048),
    bf16, t = 512. LaraMiniRMSNormGated multiplies `self.weight.to(torch.float32)` into the fp32 normalised tensor:
    it keeps that tensor and the fp32 weighted product (4*t*2048 each) where Qwen3NextRMSNormGated keeps 16-bit ones
    (2*t*2048 each): 4,194,304 B more per linear-attention layer (before: activations -3.7 % full, -2.6 % LoRA; the
    rest of the layer, Qwen3 attention and the kolibri MoE with its ungated shared expert were already within 1 %)."""
    plan = CASES["lara-mini-4l-full-s512"]["plan"]
    p, arch = Plan.from_dict(plan), model_from_config(plan["model"])
    ctx = context(p, arch, module_dtypes(p, dtypes_for(p)), False, effective_stack(p))
    assert arch.deltanet["gnorm_fp32"] and arch.support == "exact"
    qwen, lara = SavedSet(), SavedSet()
    mixer_saves(qwen, ctx, {k: v for k, v in arch.deltanet.items() if k != "gnorm_fp32"})
    mixer_saves(lara, ctx, arch.deltanet)
    t = 512
    assert lara.items["gnorm.normed"] == lara.items["gnorm.weighted"] == 4 * t * 2048
    assert lara.total - qwen.total == 2 * (4 - 2) * t * 2048 == 4_194_304


def test_gemma3n_layers_by_hand():
    """Gemma 3n's text model at h 1024 (ssm_trace.py gemma3n_text: 4 AltUp streams, 8/2 heads of 128, LAuReL rank
    64, per-layer inputs of 256, SwiGLU-GELU 2816, layers sliding full sliding full, layer 0 sparse, layers 2-3
    reusing K/V), bf16, t = 512. Gemma3nRMSNorm over h keeps the fp32 copy, the mean square, its pow and the fp32
    normalised tensor: 8*t*h + 8*t. Layer 1:
      AltUp.predict: router_norm, modality_router's input (2*t*h), tanh's fp32 output (4*t*4), the modalities
        (2*t*4), the matmul's streams (2*4*t*h) and coefficients (2*t*16);
      input_layernorm and its output (2*t*h: q/k/v's and linear_left's input); linear_right's input (2*t*64),
      post_laurel_norm;
      attention: q_norm per head (fp32 copy 4*t*1024, 2 * 4*t*8, normalised 4*t*1024), k_norm likewise over 256,
        v_norm without weight (4*t*256 + 2 * 4*t*2), q, k, v, output, lse;
      post_attention, pre_feedforward (and the MLP's input 2*t*h), the MLP (4 * 2*t*2816), post_feedforward;
      AltUp.correct: router_norm, its linear's input, tanh, modalities and coefficients (2*t*4 each), the repeated
        innovation (2*4*t*h), the cloned stream 0 the output scale multiplies (2*t*h);
      the per-layer input gate's input (2*t*h), its output, GELU and product (3 * 2*t*256), post_per_layer_input_norm
    = 69,152,768 B. Layer 0 adds the activation sparsity's std input and output (2*t*2816 + 2*t); layers 2-3 have no
    k/v projections or norms (their attention keeps layers 0-1's K/V). Before, Gemma 3n was costed as a classic
    block: activations -80.7 % / -45.9 % / -84.3 % / -77.0 % (full, mixed b2, ckpt, LoRA) and its logits' soft cap
    was missed (-14.3 %)."""
    t, h, n = 512, 1024, 4
    norm = 8 * t * h + 8 * t
    predict = norm + 2 * t * h + 4 * t * n + 2 * t * n + 2 * n * t * h + 2 * t * n * n
    ln1_laurel = norm + 2 * t * h + 2 * t * 64 + norm
    kv = (4 * t * 2 * 2 + 4 * t * 256 * 2) + (4 * t * 2 * 2 + 4 * t * 256) + 2 * 2 * t * 256
    attn = (4 * t * 8 * 2 + 4 * t * 1024 * 2) + 2 * t * 1024 * 2 + 4 * 8 * t + kv
    ffw = norm + norm + 2 * t * h + 4 * 2 * t * 2816 + norm
    correct = norm + 2 * t * h + 4 * t * n + 2 * t * n + 2 * t * n + 2 * n * t * h + 2 * t * h
    pli = 2 * t * h + 3 * 2 * t * 256 + norm
    layer1 = predict + ln1_laurel + attn + ffw + correct + pli
    assert acts("gemma3n-text-4l-full-s512").layers == (layer1 + 2 * t * 2816 + 2 * t, layer1, layer1 - kv,
                                                         layer1 - kv) \
        and layer1 == 69_152_768


def test_nemotron_h_latent_moe_parameters_by_hand():
    """NemotronHMoE with moe_latent_size L (modeling_nemotron_h.py: NemotronHExperts' input_dim is L, fc1_latent_proj
    h -> L and fc2_latent_proj L -> h around them): per MoE layer the experts' up / down shrink from (E, I, h) to
    (E, I, L) and the two projections add 2*h*L. At h 1024, 8 experts of 7688, L 512, layers M E * E: 2 * (2*8*7688*
    (512 - 1024) + 2*1024*512) = -123,863,040 against the same config without L; transformers 5.24 on the meta device
    counts 446,934,112 for it (before, the projections were missing and the experts kept h: 4.2 M short at L = h).
    Its activations (ssm_trace.py nemotron_h_latent): the experts' gathered rows and output at width L (2 * 2*1024*512
    per MoE layer at t = 512, k = 2), fc1_latent_proj's input (the norm output the shared expert keeps anyway) and
    fc2_latent_proj's (2*t*512); before, as the classic block: activations +10.8 / +0.2 / -20.0 / +36.1 %."""
    rows = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}
    cfg = rows["default:nemotron_h"]["config"] | {"hidden_size": 1024, "mamba_num_heads": 32,
                                                   "layers_block_type": ["mamba", "moe", "attention", "moe"]}
    dense, latent = model_from_config(cfg), model_from_config(cfg | {"moe_latent_size": 512})
    assert latent.total_params - dense.total_params == 2 * (2 * 8 * 7688 * (512 - 1024) + 2 * 1024 * 512)
    assert latent.total_params == 446_934_112
    t = 512
    layers = acts("nemotron-h-latent-5l-full-s512").layers
    assert acts("nemotron-h-moe-5l-full-s512").layers[1] - layers[1] == 2 * 2 * 1024 * (1024 - 512) - 2 * t * 512


def test_gemma3n_streams_fp32_under_autocast_by_hand():
    """LoRA on q/k/v/o over a bf16 base under autocast (ssm_trace.py gemma3n_text LoRA row): the model rescales the
    projected streams by `torch.mean(hidden_states_0**2, -1, keepdim=True) ** 0.5`, which CUDA autocast computes in
    fp32, so the stack - and every stream-derived tensor in the layers - is fp32 though the weights are bf16: the
    repeated innovation in AltUp.correct is 4*4*t*h, not 2*4*t*h (before this rule: activations -24.3 %)."""
    from zerocalc.memory.blocks_gemma3n import gemma3n_block
    plan = CASES["gemma3n-text-4l-lora-mixed-s512"]["plan"]
    p, arch = Plan.from_dict(plan), model_from_config(plan["model"])
    ctx = context(p, arch, module_dtypes(p, dtypes_for(p)), False, effective_stack(p))
    assert ctx.res == 2 and ctx.autocast
    t, h = 512, 1024
    lins = arch.layer_linears[1]
    fp32 = gemma3n_block(arch, ctx, lins, ())
    assert fp32 - gemma3n_block(arch, replace(ctx, autocast=False), lins, ()) > (4 - 2) * 4 * t * h


def test_nemotron_h_published_config_fields():
    """The published Nemotron-H config.json files carry hybrid_override_pattern ("M" mamba, "-" mlp, "*" attention,
    "E" moe) and mamba_n_groups / mamba_d_conv / mamba_conv_bias, which NemotronHConfig.__post_init__ turns into
    layers_block_type, n_groups, conv_kernel, use_conv_bias. Before, such a config built no layers at all (65.5 M
    for the config below: embeddings, norm and head); transformers 5.24 on the meta device counts 112,342,304."""
    cfg = {"model_type": "nemotron_h", "vocab_size": 32000, "hidden_size": 1024, "num_hidden_layers": 7,
           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 4096,
           "mamba_num_heads": 32, "mamba_head_dim": 64, "ssm_state_size": 128, "mamba_n_groups": 4, "mamba_d_conv": 3,
           "mamba_conv_bias": False, "hybrid_override_pattern": "M-M*-ME", "n_routed_experts": 4,
           "moe_intermediate_size": 512, "moe_shared_expert_intermediate_size": 512, "tie_word_embeddings": False}
    explicit = {k: v for k, v in cfg.items()
                if not k.startswith("mamba_") or k in ("mamba_num_heads", "mamba_head_dim")}
    explicit |= {"n_groups": 4, "conv_kernel": 3, "use_conv_bias": False, "hybrid_override_pattern": None,
                 "layers_block_type": ["mamba", "mlp", "mamba", "attention", "mlp", "mamba", "moe"]}
    arch = model_from_config(cfg)
    assert arch.num_layers == 7 and arch.total_params == model_from_config(explicit).total_params == 112_342_304
    # one mixer layer by hand: norm 1024; dt_bias, A_log, D (32 each); conv1d over 2048 + 2*4*128 = 3072 channels of
    # kernel 3, no bias; in_proj 1024 -> 2048 + 3072 + 32; the gated norm 2048; out_proj 2048 -> 1024
    mixer = 1024 + 3 * 32 + 3072 * 3 + 1024 * (2048 + 3072 + 32) + 2048 + 2048 * 1024
    dense = {**explicit, "layers_block_type": ["mlp"]}
    assert model_from_config({**explicit, "layers_block_type": ["mamba"]}).total_params \
        - model_from_config(dense).total_params == mixer - (1024 + 2 * 1024 * 4096)
