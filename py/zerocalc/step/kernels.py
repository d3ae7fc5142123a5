"""Kernel rates and per-op rules of a training step: what each kind of kernel achieves, and how many bytes
and launches the memory-bound ops of a decoder layer take. Tables only; ops.py evaluates them.

Every figure names where it comes from. No GPU was lent while these were written (issue 23): the curves
are published kernel results, not measurements of ours; a per-generation device table can replace them.

GEMM (shape-dependent): a matmul of (m x k) by (k x n) takes max(2mkn / (peak x best x s), bytes / (HBM x
MEMORY_EFFICIENCY)) (the roofline, Williams et al. 2009, CACM 52(4)), where ``best`` is the GPU's best-shape
matmul rate over its datasheet peak (MAMF, below) and s = d / (d + GEMM_TILE) for the smallest of m, n, k:
a dimension of one 128-wide tile leaves half of each tile idle (NVIDIA Deep Learning Performance Guide,
"Matrix Multiplication Background", tile and wave quantization: full efficiency needs dimensions that are
many multiples of the 128 x 128 / 256 x 128 thread-block tiles cuBLAS uses on Ampere and Hopper).

Memory-bound ops (norms, rotary, activations, residual adds, casts, softmax / cross-entropy over the vocabulary):
their bytes read + written per token and layer, by the width their outputs have (hidden h, MLP width i,
key/value width kv, vocabulary V), from the tracer's op logs (tools/memtrace/oplog.py, fixture
tests/data/step_oplog.json, checked by tests/test_step_ops.py), at MEMORY_EFFICIENCY of HBM bandwidth.
"""
from __future__ import annotations

# Best-shape ("maximum achievable matmul FLOPS", MAMF) bf16 GEMM TFLOP/s measured with mamf-finder.py
# (stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py; the results as tabulated in
# mag-/gpu_benchmark README.md "Stats", after stas00/ml-engineering compute/accelerator/README.md
# "Maximum Achievable Matmul FLOPS comparison table"), over the datasheet dense peak of presets/gpus.json.
MAMF = {
    "a100-sxm4-80gb": (267.9, "A100 SXM 267.9 of 312 TFLOP/s (MAMF, best shape 6912x16384x2048)"),
    "a100-sxm4-40gb": (267.9, "A100 SXM 267.9 of 312 TFLOP/s (MAMF)"),
    "a100-pcie-80gb": (256.4, "A100 PCIe 256.4 of 312 TFLOP/s (MAMF, best shape 2304x5120x1536)"),
    "a100-pcie-40gb": (256.4, "A100 PCIe 256.4 of 312 TFLOP/s (MAMF)"),
    "h100-sxm-80gb": (792.1, "H100 SXM 792.1 of 989.5 TFLOP/s (MAMF, best shape 6144x17920x2816)"),
    "h100-pcie-80gb": (499.5, "H100 PCIe 499.5 of 756 TFLOP/s (MAMF, best shape 6912x16384x2048)"),
    "rtx-4090": (165.2, "RTX 4090 178.5 TFLOP/s measured (MAMF), above the 165.2 datasheet figure: taken at the datasheet"),
    "mi300x": (758.3, "MI300X 758.3 of 1307 TFLOP/s (MAMF, best shape 4352x13568x3840)"),
}
# GPUs without their own MAMF entry take their generation's ratio (stated as an assumption in the notes)
MAMF_RATIO = {"sm70": 0.80, "sm80": 267.9 / 312, "sm8x": 0.85, "sm90": 792.1 / 989.5, "sm100": 0.80, "other": 0.80}
GEMM_TILE = 128
# Share of the kernel benchmarks' rates (MAMF, the FlashAttention papers: each kernel timed alone, in a loop)
# that the GEMM and attention kernels of a whole training step sustain (clocks under the step's sustained
# power draw, caches shared with the memory-bound kernels between them): one global constant, fitted together
# with MEMORY_EFFICIENCY on the fit half of validation/throughput.json (scripts/fit_step.py; README "Accuracy
# against measured throughput"; 0.825 when MEMORY_EFFICIENCY was held at 0.8).
KERNEL_SUSTAINED = 0.9
# Hopper (sm90) parts sustain less of their benchmark rates than Ampere's in a whole step: an H100 SXM draws its
# 700 W limit under dense bf16 tensor-core load and lowers its clock (the torchtitan H100 benchmark,
# benchmarks/llama3_h100_202412_torchtitan.md: "We used the default 500W power limit, although tuning it up to
# 700W TDP can potentially provide further speedups"), which kernel benchmarks timed in short loops (MAMF, the
# FlashAttention papers) see less of. Both validating origins with H100 rows (llm-foundry, torchtitan) read
# 10-20 % too fast under the Ampere share alone: a factor on KERNEL_SUSTAINED for sm90, fitted with it on the fit
# half (scripts/fit_step.py). Other generations have no measured rows to fit one on (sm8x's are torchtune's,
# inconsistent between its RTX 4090 and A6000 rows; none for sm100): 1.0 there.
HOPPER_SUSTAINED = 0.85

# FlashAttention kernel rates (fraction of the dense 16-bit peak at long sequences, head dim 128, causal), from
# the papers' measured figures: FlashAttention-2 (Dao 2023, arXiv 2307.08691, Figs. 4-6, A100): forward up to
# 73 % of peak (~230 TFLOP/s), backward ~ 60 % (190 TFLOP/s); on H100 FlashAttention-2 reaches ~ 35 % forward
# (~335-350 TFLOP/s) and ~ 30 % backward, FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608, Figs. 5-7)
# 61-75 % forward (600-740 TFLOP/s), ~ 50 % backward (1.5-1.75x FA2). Backward counts 2.5x the forward FLOPs
# (five matmuls against two; FA2 §4.1). Rates fall at short sequences: half the long-sequence rate at
# ATTN_SEQ_HALF tokens (FA2 Fig. 4, causal: 512 tokens reach about half the 16k rate).
ATTENTION_RATES = {
    # (kernel, generation): (forward fraction, backward fraction)
    ("fa2", "sm80"): (0.70, 0.55), ("fa2", "sm8x"): (0.60, 0.45), ("fa2", "sm90"): (0.35, 0.30),
    ("fa3", "sm90"): (0.65, 0.50), ("fa2", "sm70"): (0.30, 0.25), ("fa2", "other"): (0.35, 0.30),
    ("fa2", "sm100"): (0.35, 0.30),
}
ATTN_SEQ_HALF = 512
ATTENTION_SOURCE = ("attention: FlashAttention-2 (Dao 2023, arXiv 2307.08691, Figs. 4-6) / FlashAttention-3 "
                    "(Shah et al. 2024, arXiv 2407.08608, Figs. 5-7) measured rates, causal half of the square")

# Memory-bound ops stream at this share of HBM bandwidth (the roofline of the optimizer step, the norms, casts
# and the loss). PyTorch's vectorised elementwise kernels reach 80-90 % of the datasheet bandwidth on large
# contiguous tensors, the best case; a step's memory-bound ops are mostly reductions with fp32 upcasts (RMSNorm,
# log-softmax) and kernels of a few MB to tens of MB each, whose ramp-up and tail leave HBM idle. The stated
# 0.8 priced them too cheaply against the measured rows (the memory-heavy rows too fast, the GEMM-heavy ones
# too slow under one sustained share): fitted with KERNEL_SUSTAINED on the fit half (scripts/fit_step.py).
MEMORY_EFFICIENCY = 0.65

# Per decoder layer and token: bytes read + written by the memory-bound ops, by output width, and kernels,
# per phase, as the op log of one HF transformers layer (RMSNorm upcast to fp32, rotary, SwiGLU, residual
# adds) has them (tools/memtrace/oplog.py -> tests/data/step_oplog.json, memory_by_width divided by tokens x
# layers x width): "16bit" from llama1b-full-pure-flash (16-bit activations: bf16-pure, and the 16-bit base of
# LoRA / QLoRA and of FSDP / DeepSpeed mixed precision), "mixed" from llama1b-full-mixed-flash-gc-mb2 (autocast
# over fp32 master weights: the residual stream stays fp32). Values: (B per h, B per i, B per kv, kernels per
# layer). Backward holds the activation gradients' ops (the weight gradients are GEMMs). Checked against every
# fixture plan by tests/test_step_ops.py.
# The rotary embedding runs on the query and key widths (q = heads x head_dim, kv): the fixture's kv-width bytes
# are rotary's alone, and the query's rotary costs the same per element, so the llama h figure splits into
# h (two norms, two residual adds) and q (rotary on the query). Values: (B per h, B per q, B per kv, B per i,
# kernels per layer).
LAYER_MEMORY = {
    ("llama", "16bit", "forward"): (87.0, 19.0, 19.0, 10.0, 31),
    ("llama", "16bit", "backward"): (209.0, 31.0, 31.0, 18.0, 57),
    ("llama", "mixed", "forward"): (109.0, 35.0, 35.0, 10.0, 32),
    ("llama", "mixed", "backward"): (277.0, 57.0, 57.0, 18.0, 64),
    # LayerNorm / GELU blocks without rotary, from gpt2-full-mixed-flash-mb8-s1024 (HF GPT-2: native_layer_norm,
    # dropout 0.1 on the residual paths, addmm biases; autocast over fp32 weights, taken for 16-bit activations
    # too, an upper bound there) with its activation as one GELU kernel (torch.nn.GELU, F.gelu: MPT, NeoX, BERT,
    # Falcon; 4 B per element forward, 6 backward): HF GPT-2's own gelu_new is a chain of 8 pointwise ops,
    # GELU_NEW_EXTRA more (the test compares the fixture with both)
    ("layernorm", "16bit", "forward"): (63.0, 0.0, 0.0, 4.0, 20),
    ("layernorm", "16bit", "backward"): (84.0, 0.0, 0.0, 6.0, 28),
    ("layernorm", "mixed", "forward"): (63.0, 0.0, 0.0, 4.0, 20),
    ("layernorm", "mixed", "backward"): (84.0, 0.0, 0.0, 6.0, 28),
}
GELU_NEW_EXTRA = {"forward": (72.0, 7), "backward": (112.0, 10)}
# the residual dropouts of those blocks (two per layer: native_dropout over the fp32 residual and its mask, 9 B
# per element, and native_dropout_backward 9 B) are left out when the model's dropout is 0 (MPT, most LLMs)
LAYERNORM_DROPOUT = {"forward": (18.0, 2), "backward": (18.0, 2)}
# Qwen3 / OLMo 2 / Gemma 3 normalise queries and keys (qk_norm): one RMSNorm over q and kv per layer, at the cost
# per element of the layer's own RMSNorms (72 B over two norms forward, 2.3x that backward: the 16-bit table)
QK_NORM = {"forward": (36.0, 8), "backward": (83.0, 14)}
# one more RMSNorm over the hidden width (Gemma 2 / 3's post-attention and post-feedforward norms,
# norms_per_layer 4 against the traced Llama layer's 2): the same per-element cost, one norm's kernels
EXTRA_NORM = {"forward": (36.0, 4), "backward": (83.0, 7)}
# the loss head per token: bytes per vocabulary entry (logits upcast, log-softmax, NLL and their gradients) and
# kernels (same fixture: width V)
HEAD_MEMORY = {"forward": (14.0, 3), "backward": (34.0, 5)}
# eager attention (HF eager_attention_forward: scores, mask add, fp32 softmax, cast; and their gradients) per
# score element (batch x heads x s x s), from llama1b-full-pure-eager minus llama1b-full-pure-flash (width
# heads x s): forward 28 B in 5 kernels, backward 28 B in 4 kernels, besides its batched matmuls
EAGER_SCORES = {"forward": (28.0, 5), "backward": (28.0, 4)}
# PEFT LoraLayer per targeted linear (llama1b-lora-mixed-flash-s1024-mb2-drop and llama1b-qlora-mixed-flash-gc-
# s4096 against the full fine-tune): on the input (d_in), B per element: the cast to the fp32 adapter dtype and
# autocast's cast back (6 + 6, PEFT _cast_input_dtype with autocast_adapter_dtype=True), dropout (native_dropout
# over the fp32 input and its mask, 9) when lora.dropout > 0; on the output (d_out): scaling and the add into the
# base result, 10 forward, 4 backward; the backward of the input side 11 (+ 11 with dropout). Kernels (GEMMs
# included): forward 4 + 4 (fp32 adapters: the two weight casts and the input casts) + 1 (dropout),
# backward 6 + 2 + 1.
LORA_INPUT = {"forward": (12.0, 9.0), "backward": (11.0, 12.0)}       # (fp32-adapter casts, dropout), B/element
LORA_OUTPUT = {"forward": 10.0, "backward": 4.0}
LORA_KERNELS = {"forward": (4, 4, 1), "backward": (6, 2, 1)}

# fp8 linears (plan-v1 Extension 9, memory/fp8.py: torchao Float8Linear). The three GEMMs of a converted linear
# (output, grad_input, grad_weight: torch._scaled_mm in matmul_with_hp_or_float8_args) run at the GPU's dense fp8
# peak (presets/gpus.json fp8_dense_tflops) times the bf16 best-shape ratio (MAMF): no fp8 best-shape table is
# held here, a stated assumption. Each cast (hp_tensor_to_float8_dynamic: the amax reduction `tensor_to_amax`
# over the bf16 tensor, then the scaled cast) reads the 2-byte tensor twice and writes 1 byte per element, in two
# kernels: forward the input and the weight, backward grad_output twice (for grad_input and for grad_weight), the
# weight and the input again (torchao 0.18.0 matmul_with_hp_or_float8_args.backward). Rowwise (axiswise) scaling's
# GEMM is taken at tensorwise's rate: no measured ratio between the two is held here.
FP8_CAST_BYTES = 5.0
FP8_CAST_KERNELS = 2
FP8_SOURCE = ("fp8 linears: the block linears' GEMMs at the dense fp8 peak x the bf16 best-shape ratio (assumed), "
              "their casts memory-bound (amax read, read, fp8 write: 5 B per element)")

# torch.compile (inductor) fuses each chain of pointwise/reduction ops between two extern kernels (GEMM,
# attention) into one kernel (torch/_inductor/scheduler.py: fusion of pointwise and reduction nodes); the chain
# reads its inputs and writes its outputs once. For one layer: norm, rotary, add+norm, SwiGLU, add, i.e. per token
# forward about 11 h + 2 kv + 3 i elements (2 h + (2 q + 2 kv) + 4 h + 3 i + 3 h), backward twice that; kernels
# per layer forward 5, backward 10; the loss (model+loss) reads the logits once forward and once backward.
COMPILED_LAYER = {"forward": (11.0, 3.0, 2.0, 5), "backward": (22.0, 6.0, 4.0, 10)}
COMPILED_HEAD = {"forward": (2.0, 1), "backward": (4.0, 1)}
COMPILE_SOURCE = ("torch.compile: inductor fuses the pointwise/reduction chains between GEMMs and attention "
                  "(fewer kernels, each chain's tensors read and written once)")

# Host-side cost per launched kernel in eager PyTorch (Python module call, dispatcher, autograd bookkeeping,
# cudaLaunchKernel's few microseconds): a stated assumption of 8 us (scripts/fit_step.py finds the fit half
# insensitive to it between 2 and 20 us); launches overlap the GPU's work, so only the part of a phase's
# launch time beyond its GPU time shows (a step is launch-bound when its kernels are shorter than this).
LAUNCH_S = 8e-6
# compiled graphs launch from inductor's generated wrapper: a stated assumption of a third of the eager cost
COMPILED_LAUNCH_S = 3e-6

# GPU AdamW passes, in element-sized reads + writes per parameter (dtype of the states):
# fused (torch/optim/adamw.py _fused_adamw -> aten::_fused_adamw_): reads param, grad, exp_avg, exp_avg_sq and
# writes param, exp_avg, exp_avg_sq once: 7. foreach (_multi_tensor_adamw): _foreach_mul_ (weight decay, 2),
# _foreach_lerp_ (exp_avg, 3), _foreach_mul_ + _foreach_addcmul_ (exp_avg_sq, 2 + 3), _foreach_sqrt (2),
# _foreach_div_ (2), _foreach_add_ (eps, 2), _foreach_addcdiv_ (param, 4): 20. single-tensor: the same 20
# ops per parameter tensor (one kernel each). Checked against the op logs' step phase (llama1b-full-pure-flash:
# one _fused_adamw_; llama1b-full-pure-flash-foreach: the eight _foreach_ ops; tests/test_step_ops.py).
ADAMW_PASSES = {"fused": 7, "foreach": 20, "single-tensor": 20}
ADAMW_KERNELS_PER_TENSOR = {"fused": 1 / 36, "foreach": 9 / 36, "single-tensor": 9}   # multi_tensor_apply: 36 tensors a launch

# CPU optimizer bytes per parameter (offload). DeepSpeed's CPU Adam (csrc/adam/cpu_adam_impl.cpp Step_AVX:
# fp32 param, grad, exp_avg, exp_avg_sq read, param, exp_avg, exp_avg_sq written, plus the 16-bit copy
# back) 30 B; DeepSpeed CPU Lion (csrc/lion/cpu_lion_impl.cpp: param, grad, exp_avg read, two written, 16-bit
# copy) 22 B; DeepSpeed CPU Adagrad (csrc/adagrad: param, grad, exp_avg_sq read, two written, copy) 22 B.
# torch's own optimizer on CPU tensors (FSDP CPUOffload: optimizer.step() on the host shards; torch picks
# the single-tensor path for CPU tensors, _default_to_fused_or_foreach) makes the 20 AdamW passes over
# the parameter dtype (fp32 master under mixed precision, the 16-bit weights under bf16-pure).
DS_CPU_OPTIMIZER_BYTES = {"adamw": 30, "paged-adamw-32bit": 30, "lion": 22, "adafactor": 22}

# Communication overlapped with compute still costs compute: each NCCL channel runs as one thread block pinned to
# an SM for the collective's duration (NCCL src/device: one CTA per channel), so while a hidden collective runs
# the GEMMs and attention get the other SMs. NCCL_CHANNELS: the ring channels NCCL opens on an NVSwitch or
# InfiniBand node (NCCL_MIN_NCHANNELS .. NCCL_MAX_NCHANNELS; 16 on 8-GPU A100/H100 nodes as NCCL_DEBUG=INFO
# reports them: a stated assumption); SMS per GPU from the vendors' datasheets (A100 108, H100 SXM 132 ...).
NCCL_CHANNELS = 16
SMS = {"a100": 108, "h100-sxm": 132, "h100-pcie": 114, "h100-nvl": 132, "h200": 132, "gh200": 132, "l40s": 142,
       "rtx-4090": 128, "rtx-6000-ada": 142, "rtx-3090": 82, "a10": 72, "l4": 58, "v100": 80, "t4": 40, "b200": 148,
       "b300": 160, "gb200": 148, "rtx-5090": 170, "mi250x": 220, "mi300x": 304, "mi325x": 304}


def sm_count(gpu_id: str | None) -> int | None:
    """SMs (CUs) of a preset GPU, by the longest matching id prefix; None when unknown."""
    if not gpu_id:
        return None
    best = None
    for k, v in SMS.items():
        if gpu_id.startswith(k) and (best is None or len(k) > len(best[0])):
            best = (k, v)
    return best[1] if best else None
