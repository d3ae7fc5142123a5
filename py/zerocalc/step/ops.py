"""The compute of one micro-step from the operations it runs, evaluated from compact rules (kernels.py).

    micro_step(arch, plan, rates) -> MicroStep(forward=Pass, backward=Pass)

Each pass sums GEMM time (every linear's matmuls at the shape's rate, kernels.py GEMM rule), attention time
(the kernel the plan's ``attention`` picks: FlashAttention-2 / -3 by GPU generation, or eager's two batched
matmuls plus the score softmax), memory-bound time (the layer's norms, rotary, activations, adds and casts
by their bytes, the loss over the vocabulary, LoRA's dropout / scale / add, bitsandbytes' dequantization) and
counts kernels; a pass takes the larger of its GPU time and its kernels' launch time (eager launches are
asynchronous: the host runs ahead while kernels are long, the GPU waits when they are short).
Backward holds the recompute of activation checkpointing. Recorded ops come from tools/memtrace/oplog.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..memory.stack import effective_stack
from .kernels import (ATTENTION_RATES, ATTN_SEQ_HALF, COMPILED_HEAD, COMPILED_LAUNCH_S, COMPILED_LAYER, EAGER_SCORES,
                      FP8_CAST_BYTES, FP8_CAST_KERNELS, GEMM_TILE, HEAD_MEMORY, HOPPER_SUSTAINED, KERNEL_SUSTAINED, LAUNCH_S, LAYER_MEMORY, LORA_INPUT, LORA_KERNELS,
                      LAYERNORM_DROPOUT, LORA_OUTPUT, MEMORY_EFFICIENCY, QK_NORM, EXTRA_NORM)


class Pass(NamedTuple):
    """One pass's times (a named tuple: built a few dozen times per estimate, cheaper than a frozen dataclass)."""
    gemm_s: float = 0.0
    attention_s: float = 0.0
    memory_s: float = 0.0
    kernels: float = 0.0
    launch_s: float = 0.0          # host launch time beyond the GPU time (exposed)

    @property
    def gpu_s(self) -> float:
        return self.gemm_s + self.attention_s + self.memory_s

    @property
    def time_s(self) -> float:
        return self.gpu_s + self.launch_s

    def __add__(self, o: "Pass") -> "Pass":
        return Pass(self.gemm_s + o.gemm_s, self.attention_s + o.attention_s, self.memory_s + o.memory_s,
                    self.kernels + o.kernels, self.launch_s + o.launch_s)


@dataclass(frozen=True)
class MicroStep:
    forward: Pass
    backward: Pass               # recompute included
    kernel: str                  # attention kernel: fa2, fa3, eager
    compiled: bool

    @property
    def time_s(self) -> float:
        return self.forward.time_s + self.backward.time_s


def sustained(rates) -> float:
    """Share of the kernel benchmarks' rates a whole step sustains (kernels.KERNEL_SUSTAINED), times
    kernels.HOPPER_SUSTAINED on sm90 parts (power-limited under a step's sustained tensor-core load)."""
    return KERNEL_SUSTAINED * (HOPPER_SUSTAINED if rates.generation == "sm90" else 1.0)


def gemm_s(m: float, k: float, n: float, es: int, rates, batch: float = 1.0) -> float:
    """One (m x k) @ (k x n) matmul (``batch`` of them): roofline of FLOPs at the shape's rate and bytes."""
    if m <= 0 or k <= 0 or n <= 0:
        return 0.0
    d = min(m, k, n)
    rate = rates.peak_flops * rates.gemm_best * sustained(rates) * d / (d + GEMM_TILE)
    flops = 2.0 * m * k * n * batch
    nbytes = es * (m * k + k * n + m * n) * batch
    return max(flops / rate, nbytes / (rates.hbm_bytes_s * MEMORY_EFFICIENCY))


def mem_s(nbytes: float, rates) -> float:
    return nbytes / (rates.hbm_bytes_s * MEMORY_EFFICIENCY)


def attention_kernel(plan, rates) -> str:
    """flash (flash-attn) and sdpa (PyTorch's flash backend, FlashAttention-2 kernels) run FlashAttention-2;
    FlashAttention-3 only where a stack ships it for Hopper (torchtitan's and torchtune's SDPA stay on FA2
    kernels in the validated versions), so FA2 everywhere but eager."""
    return "eager" if plan.attention == "eager" else "fa2"


def fp32_masters_autocast(plan) -> bool:
    """Full fine-tuning under autocast over fp32 weights (single GPU, DDP): each forward casts every weight to
    16 bits, each backward casts its weight gradients to fp32, and the residual stream stays fp32. FSDP's and
    DeepSpeed's mixed precision compute on 16-bit copies; LoRA's base is stored 16-bit."""
    return plan.precision.endswith("mixed") and plan.framework in ("single", "ddp") and plan.method == "full"


# Families whose decoder layer the op-log tables model (kernels.LAYER_MEMORY): traced Llama-style layers
# (RMSNorm, rotary, SwiGLU: Llama, Mistral, Qwen, Gemma's GeGLU at the same op count) and the LayerNorm / GELU
# table (traced on GPT-2; MPT, NeoX, BERT, Falcon, BLOOM, Phi, StarCoder share its norm / activation pattern)
TRACED_FAMILIES = {"llama": "Llama", "gemma": "Llama", "gpt2": "GPT-2", "bert": "GPT-2", "falcon": "GPT-2",
                   "bloom": "GPT-2", "neox": "GPT-2", "phi": "GPT-2", "bigcode": "GPT-2"}


def model_assumptions(arch) -> tuple:
    """What the step rules assumed about a model they were not traced on (no silent fallbacks, issue 23):
    a family outside TRACED_FAMILIES is priced with the Llama table (state-space scans, T5's relative
    attention, DBRX's LayerNorm blocks are not in the op logs). Gemma 2 / 3's extra norms are priced
    (_layer_memory: EXTRA_NORM), not assumed."""
    fam = arch.family
    table = "Llama" if not (arch.norm == "layernorm" and not arch.gated_mlp) else "GPT-2"
    out = []
    if fam not in TRACED_FAMILIES:
        kind = {"mamba": "state-space (Mamba) mixers and their scans", "t5": "encoder-decoder blocks and "
                "relative position bias", "dbrx": "LayerNorm MoE blocks"}.get(fam, f"{fam} layers")
        out.append(f"{arch.model_type}: its {kind} are not in the traced op logs; every layer's memory-bound ops "
                   f"priced as a {table} decoder layer's, its matmuls from its linears")
    return tuple(out)


def _layer_linears(arch):
    moe = arch.moe
    dense = moe.dense_layers if moe else arch.num_layers
    out = []
    if dense:
        out.append((dense, arch.dense_block_linears or arch.block_linears))
    if arch.num_layers - dense:
        out.append((arch.num_layers - dense, arch.block_linears))
    return out


def _linears_pass(arch, plan, rates, T, es, trainable_base: bool, st):
    """GEMMs (+ LoRA adapters, QLoRA dequantization, autocast weight casts) of every block linear."""
    moe = arch.moe
    lora = plan.method != "full"
    qlora = plan.method == "qlora"
    r = plan.lora.rank if lora else 0
    targets = set(plan.lora.targets) if lora else set()
    cast = fp32_masters_autocast(plan)
    dropout = lora and plan.lora.dropout > 0
    fp32_adapters = lora and st.adapter_dtype == "fp32" and plan.precision != "fp32"
    compiled = st.compile != "none"
    hf_loop = st.trainer == "hf-trainer" and st.loss_path != "hf5"   # transformers 4.x: a loop over experts
    fp8 = plan.fp8 != "none" and rates.fp8_flops > 0                  # kernels.FP8_*: the converted linears
    rates8 = replace(rates, peak_flops=rates.fp8_flops) if fp8 else rates
    tot = [0.0] * 6            # forward gemm, memory, kernels; backward gemm, memory, kernels
    for layers, linears in _layer_linears(arch):
        for lin in linears:
            count = lin.count
            if count > 1 and moe:
                m = T * moe.experts_per_token / count
                calls = count
                loop_kernels = 6 * count if hf_loop else 2
            else:
                m, calls, loop_kernels = T, 1, 0
            conv = fp8 and count == 1              # fused 3-D experts are no nn.Linear: never converted
            r_g, e_g = (rates8, 1) if conv else (rates, es)
            g_f = calls * gemm_s(m, lin.d_in, lin.d_out, e_g, r_g)
            g_b = calls * gemm_s(m, lin.d_out, lin.d_in, e_g, r_g)                 # activation gradient
            if trainable_base:
                g_b += calls * gemm_s(lin.d_out, m, lin.d_in, e_g, r_g)            # weight gradient
            k_f, k_b = calls + loop_kernels, calls * (2 if trainable_base else 1) + loop_kernels
            mf = mb = 0.0
            n = lin.d_in * lin.d_out * count
            if conv:
                mf += FP8_CAST_BYTES * (T * lin.d_in + n)
                mb += FP8_CAST_BYTES * (2 * T * lin.d_out + T * lin.d_in + n)
                k_f += 2 * FP8_CAST_KERNELS
                k_b += 4 * FP8_CAST_KERNELS
            if qlora:
                # bitsandbytes dequantize_4bit per pass (MatMul4Bit forward and backward): 0.5 B codes + absmax in,
                # the compute-dtype weight out
                dq = n * (0.5 + es) + n / 64 * 4
                mf += dq
                mb += dq
                k_f += count
                k_b += count
            if cast:
                # autocast: the fp32 weight read and its 16-bit copy written each forward; the 16-bit weight
                # gradient cast to the fp32 .grad in backward (op log: _to_copy of the weight's width)
                mf += n * 6
                mb += n * 6
                k_f += count
                k_b += count
            if lin.name in targets and count == 1:
                # PEFT LoraLayer.forward: result + lora_B(lora_A(dropout(x))) * scaling (kernels.LORA_*)
                g_f += gemm_s(T, lin.d_in, r, es, rates) + gemm_s(T, r, lin.d_out, es, rates)
                g_b += (gemm_s(T, lin.d_out, r, es, rates) + gemm_s(lin.d_out, T, r, es, rates)
                        + gemm_s(T, r, lin.d_in, es, rates) + gemm_s(r, T, lin.d_in, es, rates))
                if compiled:            # fused into the surrounding chains: the adapter output read and added once
                    mf += es * T * lin.d_out
                    mb += es * T * (lin.d_out + lin.d_in)
                    k_f += 2
                    k_b += 4
                else:
                    for phase in ("forward", "backward"):
                        cast_b, drop_b = LORA_INPUT[phase]
                        per_in = (cast_b if fp32_adapters else 0.0) + (drop_b if dropout else 0.0)
                        nbytes = T * (per_in * lin.d_in + LORA_OUTPUT[phase] * lin.d_out) * es / 2
                        k0, k_cast, k_drop = LORA_KERNELS[phase]
                        kern = k0 - (2 if phase == "forward" else 4) + (k_cast if fp32_adapters else 0) + \
                            (k_drop if dropout else 0)          # the GEMMs are counted apart
                        if phase == "forward":
                            mf += nbytes
                            k_f += kern + 2
                        else:
                            mb += nbytes
                            k_b += kern + 4
            tot[0] += layers * g_f
            tot[1] += layers * mf
            tot[2] += layers * k_f
            tot[3] += layers * g_b
            tot[4] += layers * mb
            tot[5] += layers * k_b
    return (Pass(gemm_s=tot[0], memory_s=mem_s(tot[1], rates), kernels=tot[2]),
            Pass(gemm_s=tot[3], memory_s=mem_s(tot[4], rates), kernels=tot[5]))


def _attention_pass(arch, plan, rates, es, kernel: str):
    """One forward and one backward of the attention core over all layers."""
    b_, s, L = plan.micro_batch_size, plan.seq_len, arch.num_layers
    heads, hd = arch.num_heads, arch.head_dim
    if kernel == "eager":
        # HF eager_attention_forward: matmul(q, kᵀ), + mask, softmax in fp32, cast, matmul(p, v): the full square
        bh = b_ * heads
        g_f = gemm_s(s, hd, s, es, rates, bh) + gemm_s(s, s, hd, es, rates, bh)
        g_b = 2 * g_f
        sq = bh * s * s
        (b_f, k_f), (b_b, k_b) = EAGER_SCORES["forward"], EAGER_SCORES["backward"]
        scale = es / 2
        return (Pass(gemm_s=L * g_f, memory_s=L * mem_s(sq * b_f * scale, rates), kernels=L * (k_f + 2)),
                Pass(gemm_s=L * g_b, memory_s=L * mem_s(sq * b_b * scale, rates), kernels=L * (k_b + 4)))
    gen = rates.generation
    f_fwd, f_bwd = ATTENTION_RATES.get((kernel, gen), ATTENTION_RATES[("fa2", "other")])
    ramp = s / (s + ATTN_SEQ_HALF) * sustained(rates)
    flops = 4.0 * b_ * heads * s * s * hd / 2          # causal: the kernels skip the masked half
    t_f = flops / (rates.peak_flops * f_fwd * ramp)
    t_b = 2.5 * flops / (rates.peak_flops * f_bwd * ramp)
    return Pass(attention_s=L * t_f, kernels=L * 1), Pass(attention_s=L * t_b, kernels=L * 2)


def _layer_memory(arch, plan, rates, T, es, compiled: bool):
    """((layers forward, head forward), (layers backward, head backward)): the norms, rotary, activation,
    residual adds (and their gradients) of every layer, and the loss over the vocabulary (+ embedding)."""
    h, i, kv, L, V = arch.hidden_size, arch.intermediate_size, arch.kv_dim, arch.num_layers, arch.vocab_size
    q = arch.q_dim
    kind = "mixed" if fp32_masters_autocast(plan) else "16bit"
    family = "layernorm" if (arch.norm == "layernorm" and not arch.gated_mlp) else "llama"
    scale = 2.0 if plan.precision == "fp32" else 1.0          # fp32 activations: twice the 16-bit bytes
    out = []
    loss_compiled = compiled and plan.stack.compile == "model+loss"
    for phase in ("forward", "backward"):
        if compiled:
            ch, ci, ckv, k = COMPILED_LAYER[phase]
            layer = es * (ch * h + ci * i + ckv * kv)
        else:
            ch, cq, ckv, ci, k = LAYER_MEMORY[(family, kind, phase)]
            if family == "layernorm" and not arch.dropout:
                cd, kd = LAYERNORM_DROPOUT[phase]
                ch, k = ch - cd, k - kd
            layer = scale * (ch * h + cq * q + ckv * kv + ci * i)
            if arch.qk_norm:
                cn, kn = QK_NORM[phase]
                layer += scale * cn * (q + kv)
                k += kn
            extra = arch.norms_per_layer - 2 if family == "llama" else 0
            if extra > 0:          # Gemma 2 / 3: post-attention and post-feedforward norms beside the traced two
                cn, kn = EXTRA_NORM[phase]
                layer += scale * cn * extra * h
                k += kn * extra
        hv, hk = (COMPILED_HEAD if loss_compiled else HEAD_MEMORY)[phase]
        head = (hv * es if loss_compiled else hv * scale) * V if arch.causal_lm else 0.0
        head += h * es * 2 if phase == "forward" else 0.0          # the embedding gather
        out.append((Pass(memory_s=mem_s(T * L * layer, rates), kernels=L * k),
                    Pass(memory_s=mem_s(T * head, rates), kernels=hk + 1)))
    return out


def micro_step(arch, plan, rates) -> MicroStep:
    """Forward and backward (recompute included) of one micro-step on one GPU (see the module docstring)."""
    st = effective_stack(plan)
    compiled = st.compile != "none"
    T = plan.micro_batch_size * plan.seq_len
    es = 4 if plan.precision == "fp32" else 2
    full = plan.method == "full"
    kernel = attention_kernel(plan, rates)
    lin_f, lin_b = _linears_pass(arch, plan, rates, T, es, full, st)
    att_f, att_b = _attention_pass(arch, plan, rates, es, kernel)
    (mem_f, loss_f), (mem_b, loss_b) = _layer_memory(arch, plan, rates, T, es, compiled)
    head_f = head_b = Pass()
    if arch.causal_lm:
        V, h = arch.vocab_size, arch.hidden_size
        cast = 6.0 * V * h if fp32_masters_autocast(plan) else 0.0      # the lm_head weight's casts (as above)
        head_f = Pass(gemm_s=gemm_s(T, h, V, es, rates), memory_s=mem_s(cast, rates), kernels=1 + bool(cast))
        hb = gemm_s(T, V, h, es, rates) + (gemm_s(V, T, h, es, rates) if full else 0.0)
        head_b = Pass(gemm_s=hb, memory_s=mem_s(cast, rates), kernels=(2 if full else 1) + bool(cast))
    fwd = lin_f + att_f + mem_f + head_f + loss_f
    bwd = lin_b + att_b + mem_b + head_b + loss_b
    ac = plan.activation_checkpointing
    if ac == "full":
        bwd = bwd + lin_f + att_f + mem_f          # every layer's forward again (the head is not checkpointed)
    elif ac == "selective":
        bwd = bwd + att_f
    elif ac == "selective-op":
        bwd = bwd + Pass(gemm_s=lin_f.gemm_s / 2, kernels=lin_f.kernels / 2)
    launch = COMPILED_LAUNCH_S if compiled else LAUNCH_S
    out = []
    for p in (fwd, bwd):
        host = p.kernels * launch
        out.append(Pass(p.gemm_s, p.attention_s, p.memory_s, p.kernels, max(0.0, host - p.gpu_s)))
    return MicroStep(forward=out[0], backward=out[1], kernel=kernel, compiled=compiled)


__all__ = ["Pass", "MicroStep", "micro_step", "sustained", "model_assumptions", "TRACED_FAMILIES", "gemm_s", "mem_s", "attention_kernel", "fp32_masters_autocast"]
