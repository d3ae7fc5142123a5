"""The fused experts' backward: the rows their matmuls run on and the transient gradient buffers the grouped /
per-expert matmuls hold in a full fine-tune's backward (memory/activations.py costs them as moments of the step;
traced in tools/memtrace/moe_trace.py, held by tests/test_moe_families.py)."""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan
from .blocks_muse_spark import MODEL_TYPES as MUSE_SPARK, post_expert_norm_moment
from .head_backward import copies_before_head
from .lora import layer_adapters
from .precision import Dtypes
from .stack import Stack


EVERY_EXPERT = ("llama4_text", "llama4")         # Llama 4 text, and the composite whose text model it is
# dense first layers, yet the moment in the top sparse layer's backward over the gradients kept from the last
# micro-step (traced: tools/memtrace/more_moe_trace.py, tests/test_unlimited_ocr_blocks.py)
TOP_SPARSE_MOMENT = ("unlimited_ocr_text", "unlimited_ocr")   # the text model, and the composite
# experts looping over the experts hit, each indexing its slice of the fused weights (expert_loop_moment)
EXPERT_LOOP = ("step3p5", "step3p7")


def routed_rows(arch: ModelArch, t: int) -> int:
    """The rows the experts' matmuls run on: t·k routed tokens (transformers' MoE experts), or every token through
    every expert (modeling_llama4.py Llama4TextMoe: `hidden_states.repeat(E, 1)` times the router's scores)."""
    return t * (arch.moe.num_experts if arch.model_type in EVERY_EXPERT else arch.moe.experts_per_token)


def expert_grad_temp(plan: Plan, arch: ModelArch, dt: Dtypes, st: Stack, t: int, top_sparse: bool = True) -> int:
    """Full fine-tuning of fused 3-D experts, layer 0 sparse: the backward of layer 0's gate_up grouped matmul
    (transformers 5.24 integrations/moe.py _grouped_linear: torch._grouped_mm(x, weight.transpose(-2, -1)))
    holds a second gate_up-sized gradient (E·2I·h in the gradient dtype) beside the stored gradients, with the
    gradient of its output (t·k·2I) and of its gathered input (t·k·h) in the compute dtype. Traced (tests/data/
    moe_families_trace.json): one such copy in Mixtral, OLMoE, GraniteMoE (input_linear) and gpt-oss. A dense
    layer 0 (DeepSeek first_k_dense_replace) runs last: the sparse layers' transient passes before the
    embedding's and layer 0's gradients exist, and is not counted. Only where the gradients exist before the
    backward (accumulation steps > 1, or torch 1.x's zero_grad keeping them): the new gradient is then added
    into .grad; on the first micro-step AccumulateGrad steals it (traced, gradient_accumulation_steps 1: no such
    temporary, mixtral-2l-full-s512-ga1). Single process and DDP only: DeepSpeed's and FSDP's gradient hooks
    were not traced with MoE. Llama 4 (interleaved dense layers, its own bmm experts: every expert on every
    token) has the moment in its top sparse layer (traced: llama4-text-4l-full-s512, layers 1 and 3 sparse: the
    16·2048·4096 bf16 gradient, the gate_up output's and the input's gradients, 0.348 GiB of temporaries)."""
    moe = arch.moe
    if moe is not None and plan.method != "full" and arch.model_type in TOP_SPARSE_MOMENT:
        return unpermute_moment(arch, dt, t) if plan.framework in ("single", "ddp") else 0
    if moe is None or plan.method != "full" or plan.framework not in ("single", "ddp"):
        return 0
    if arch.model_type == "axk2":
        # AXK2's sigmoid router keeps fp32 routing weights: the un-permute's fp32 index backward (unpermute_moment)
        # is its sparse layer's moment under full fine-tuning too (traced: axk2-2l-full-s512-eager-ckpt, 3 x 32 MiB
        # of fp32 temporaries at index_put in the recomputed layer; activations -95.0 -> +0.9 %)
        return unpermute_moment(arch, dt, t)
    ie, h = moe.expert_intermediate, arch.hidden_size
    if arch.model_type == "dbrx":
        # modeling_dbrx.py DbrxExperts: `self.mlp.w1.view(-1, I, h)[expert_idx]` is a select, whose backward
        # (select_backward) writes each expert's (I, h) gradient into a zero tensor of the whole (E·I, h) weight;
        # autograd sums those per parameter before AccumulateGrad, so w1, v1 and w2 each hold a full-size buffer
        # while the next expert's adds a fourth, beside that expert's three (I, h) slice gradients, on every
        # micro-step (traced: dbrx-2l-full-s512, 896 + 42 MiB of temporaries at select_backward)
        return dt.grad * (4 * moe.num_experts + 3) * ie * h
    if arch.model_type == "jetmoe":
        # modeling_jetmoe.py JetMoeParallelExperts: `F.linear(input_list[i], self.weight[i])`, the same
        # select_backward per expert (above); the top layer's MLP input_linear (E, 2I, h) holds its summed buffer
        # and the next expert's, with that expert's (2I, h) slice and the gradients of its output and gathered input
        # (output_linear's loop is summed into .grad before; traced: jetmoe-2l-full-s512, 0.879 GiB of temporaries
        # with lm_head's pending tied gradient)
        return (dt.grad * (2 * moe.num_experts + 1) * 2 * ie * h
                + (2 if dt.autocast else dt.compute) * routed_rows(arch, t) * (2 * ie + h))
    if moe.zero_experts:
        # LongCat-Flash (modeling_longcat_flash.py LongcatFlashExperts): `self.gate_up_proj[expert_idx]` per expert,
        # so select_backward writes each expert's gradient into a zero tensor of the whole (E + Z, 2I, h) weight: the
        # summed buffer and the next expert's, the summed (E, h, I) down_proj buffer and one expert's (2I, h) slice,
        # beside three t·h gradients and one expert's rows' (traced: longcat-flash-2l-full-s512, 117.2 MiB of
        # temporaries at select_backward)
        e = 2 if dt.autocast else dt.compute
        n = moe.num_experts + moe.zero_experts
        return (dt.grad * (2 * n * 2 * ie * h + moe.num_experts * h * ie + 2 * ie * h)
                + e * (3 * t * h + -(-t * moe.experts_per_token // n) * h))
    if arch.model_type in EXPERT_LOOP:
        return expert_loop_moment(arch, dt, t)
    if arch.model_type in MUSE_SPARK:
        # memory/blocks_muse_spark.py: the post-expert norm's backward, a moment of its own in every micro-step;
        # memory/activations.py subtracts its default tail from this value (expert_loop_moment)
        e = 2 if dt.autocast else dt.compute
        return post_expert_norm_moment(arch, e, 4 if dt.autocast and dt.weight == 4 else e, t) + (
            e * routed_rows(arch, t) * (4 * moe.expert_intermediate + arch.hidden_size))
    if moe.dense_layers and not (arch.model_type in EVERY_EXPERT + TOP_SPARSE_MOMENT and top_sparse):
        return 0
    if plan.gradient_accumulation_steps == 1 and not st.grads_kept:
        return 0
    e, rows = 2 if dt.autocast else dt.compute, routed_rows(arch, t)
    # grouped_mm is not autocast-enabled: the experts run in their weights' dtype (memory/blocks.py sparse_moe), fp32
    # under bf16-mixed over fp32 weights, so the two gradients and what the layer has consumed (memory/activations.py
    # subtracts it at 16 bits: its default tail) are fp32 (traced: unlimited-ocr-2l-full-mixed-s512's (t·k, 2I) and
    # (t·k, h) fp32 gradients at new_empty; zaya-2l-full-mixed-s512's)
    ex = 4 if dt.autocast and dt.weight == 4 and arch.model_type not in EVERY_EXPERT else e
    consumed = rows * ((7 if arch.model_type == "gpt_oss" else 4) * ie + h)
    return dt.grad * moe.num_experts * 2 * ie * h + ex * rows * (2 * ie + h) - (ex - e) * consumed


def expert_loop_moment(arch: ModelArch, dt: Dtypes, t: int) -> int:
    """Step 3.7's experts (modeling_step3p7.py Step3p7Experts.forward: `F.linear(hidden_states[token_idx],
    self.gate_up_proj[expert_idx])` per expert hit): each expert's select_backward writes its gradient into a zero
    tensor of the whole (E, 2I, h) weight, which autograd sums before AccumulateGrad, so the moment comes at the
    second expert the backward visits (the loop's last ones first), on every micro-step: the summed gate_up buffer
    and that expert's, the summed (E, h, I) down_proj buffer and the expert's (2I, h) slice gradient, beside three
    t·h gradients and the expert's rows' input gradient (traced: step3p7-2l-full-s512, 85.25 MiB of temporaries at
    select_backward). By then the top layer's backward has consumed the first expert's saved rows and the second's
    but their gathered input (memory/blocks_step3p7.py step3p7_experts: per row the gathered input, gate_up's
    output, SiLU's, two clamps, the product, down's output and its copy in the stream's dtype, 20 bytes of weight
    and indices). memory/activations.py subtracts its default tail (routed_rows · (4·I + h), what a grouped
    matmul's layer has consumed) from this value; the loop's own consumed part replaces it here, so the value
    returned is the moment's bytes over the saved stack plus that default tail."""
    moe, h = arch.moe, arch.hidden_size
    e, ie, n = (2 if dt.autocast else dt.compute), moe.expert_intermediate, moe.num_experts
    per_expert = -(-t * moe.experts_per_token // n)
    temp = dt.grad * (2 * n * 2 * ie * h + n * h * ie + 2 * ie * h) + e * (3 * t * h + per_expert * h)
    res = 4 if dt.autocast and dt.weight == 4 else e            # the residual stream: fp32 under AMP over fp32
    row = e * h + 6 * e * ie + e * h + res * h + 20
    consumed = 2 * per_expert * row - per_expert * e * h
    return temp + e * routed_rows(arch, t) * (4 * ie + h) - consumed


def experts_trained(plan: Plan, arch: ModelArch, st: Stack, per_layer_linears) -> bool:
    """Whether the routed experts' fused weights get a gradient (full fine-tuning or adapters on them): only
    then do the grouped matmuls keep the product (memory/blocks.py sparse_moe)."""
    return plan.method == "full" or st.fsdp_adapters_in_units or any(ad.name.startswith("experts.") for lins in per_layer_linears
                                        for ad in layer_adapters(arch, plan, lins))


# the top layer's modules whose backward comes before its experts' (their autocast copies consumed by then)
TOP_CONSUMED = (".shared_experts.", ".mlps.", ".self_attn.1.")


def copies_at_expert_moment(arch: ModelArch, copies: int) -> int:
    """The autocast weight copies (memory/activations.py: 16-bit copies of the fp32 linear weights, full fine-tuning
    in bf16-mixed) still alive at the top layer's expert weight-gradient moment (expert_grad_temp, the `bwd_top`
    phase without checkpointing): every lower layer's, whose matmuls keep them for their backward, and the top
    layer's whose backward comes after its experts': its attention, its router. Gone by then: lm_head's (the
    head's backward ran first) and the top layer's modules that run after or beside the experts: the shared experts
    (modeling_deepseek_v2.py-style `moe(x) + shared_experts(x)`; Step 3.7's), LongCat-Flash's second sublayer and
    dense MLPs (modeling_longcat_flash.py LongcatFlashDecoderLayer: the shortcut MoE reads the first attention's
    output, its sum joins at the layer's end). Traced at the moment: zaya-2l-full-mixed-s512 12.3 MiB of copies,
    unlimited-ocr-2l-full-mixed-s512 75 MiB, step3p7-2l-full-mixed-s512 22 MiB (tools/memtrace/more_moe_trace.py),
    longcat-flash-2l-full-mixed-s512 47 MiB (tools/memtrace/moe_trace.py); before this term the engine booked none
    there: activations -7.2 %, -7.8 % (with the fp32 grouped_mm rows of expert_grad_temp), -6.6 %, -7.4 %; now -2.3 %,
    +0.7 %, +0.1 %, +2.2 %."""
    top = arch.num_layers - 1
    consumed = sum(tt.numel for tt in arch.tensors if tt.linear and tt.layer == top
                   and any(k in f".{tt.module}." for k in TOP_CONSUMED))
    return max(0, copies_before_head(arch, copies) - 2 * consumed)


def unpermute_moment(arch: ModelArch, dt: Dtypes, t: int) -> int:
    """Frozen experts (adapters elsewhere): the sparse layer's backward peaks at the un-permute's index backward
    (transformers 5.24 integrations/moe.py `weighted_out[inv_perm]`). The routing weights are fp32 (the router's
    softmax, never cast: modeling_unlimited_ocr.py's DeepSeek-V2 gate), so the weighted expert output and its
    gradient are fp32 (t·k, h): sum's expanded gradient made contiguous, the new_zeros and index_put's result, beside
    a second 16-bit t·h gradient in flight; the shared experts' backward (they run beside the routed ones) has
    consumed their saved gate/up outputs and SiLU's (3·t·I_shared). Traced: unlimited-ocr-2l-lora-attn-s512-ckpt,
    3 x 15 MiB of fp32 temporaries at index_put beside the recomputed layer (tools/memtrace/more_moe_trace.py; before
    this moment activations -35.1 %, the peak -4.7 %). memory/activations.py subtracts its default tail (the
    grouped-matmul moment's) from this value, so it is added back here."""
    moe, h, e = arch.moe, arch.hidden_size, 2 if dt.autocast else dt.compute
    rows = routed_rows(arch, t)
    moment = 3 * 4 * rows * h + e * t * h - 3 * e * t * moe.shared_intermediate
    return moment + e * rows * (4 * moe.expert_intermediate + h)
