"""lm_head's backward as a moment of its own (the ``head_bwd`` phase, memory/terms.py): after the loss's backward
has freed its logits, lm_head's mm backward holds the logits' gradient, the new (V, h) weight gradient (beside the
accumulated `.grad` under gradient accumulation: autograd adds it in afterwards; without accumulation it becomes
`.grad`, which the gradients term does not count before the backward's end) and the input's gradient, beside every
saved activation and the head's own (its input). Where the loss's backward holds only a few t·V tensors (a 16-bit
loss, or an fp32 head whose logits need no upcast) and V·h is large beside t·V, this moment is the step's peak.

Counted for the traced types only (HEAD_MOMENT), full fine-tuning in pure 16 bits on one GPU or DDP:
- CPM-Ant (modeling_cpmant.py CpmAntForCausalLM: an untied lm_head, the loss on the 16-bit logits): the trace
  peaks in lm_head's backward mm with the 16-bit logits' gradient (2·t·V), the (30720, 1024) bf16 weight gradient
  and the (t, h) input gradient (tools/memtrace/own_blocks_trace.py cpmant-2l-full-s512: 30 + 60 + 1 MiB);
- HY-V4 and HY-V4-VL (the fp32 lm_head kept by _keep_in_fp32_modules_strict, memory/blocks_hy_v4.py
  fp32_head_numel): the fp32 logits' gradient (4·t·V), the fp32 weight gradient and the fp32 input gradient
  (tools/memtrace/hy_v4_trace.py hy-v4-3l-full-s512: 16 + 32 + 2 MiB).
- AXK2 under bf16-mixed over fp32 weights (MIXED_HEAD_MOMENT): the peak is the cast of lm_head's 16-bit weight
  gradient to the fp32 parameter's dtype, both (V, h) alive, with the input's gradient cast to the fp32 stream,
  lm_head's autocast copy and the logits' gradient already freed (tools/memtrace/axk2_trace.py
  axk2-2l-full-mixed-s512-eager: 125 + 250 + 4 MiB of temporaries; activations -30.7 % before, +0.1 % after).
Before this moment the engine peaked at the loss's backward with the same total (within 0.5 %) but booked
activations -44 % (CPM-Ant) and -14 % (HY-V4), logits +200 %. Other families' head backward is not traced as a
peak (Llama's upcast loss holds 12·t·V there), so they are left without the moment.
"""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan
from .blocks_hy_v4 import fp32_head_numel
from .precision import Dtypes

HEAD_MOMENT = ("cpmant", "hy_v4", "hy_v4_vl")
MIXED_HEAD_MOMENT = ("axk2",)


def head_backward_moment(plan: Plan, arch: ModelArch, dt: Dtypes) -> tuple[int, int]:
    """(the logits' gradient, the weight's and the input's gradients) in lm_head's backward; (0, 0) where not
    counted (module docstring)."""
    mixed = dt.autocast and dt.weight == 4 and arch.model_type in MIXED_HEAD_MOMENT
    if (not (arch.model_type in HEAD_MOMENT and not dt.autocast or mixed) or not arch.causal_lm
            or plan.method != "full" or plan.framework not in ("single", "ddp")):
        return 0, 0
    head = next((tt for tt in arch.tensors if tt.name == "lm_head.weight"), None)
    if head is None:
        return 0, 0
    t, v, h = plan.seq_len * plan.micro_batch_size, arch.vocab_size, head.numel // arch.vocab_size
    if mixed:
        # bf16-mixed over fp32 weights, at the weight gradient's cast: the 16-bit weight gradient and its fp32 cast
        # for the fp32 parameter, the input's gradient cast to the fp32 stream; the logits' gradient and lm_head's
        # autocast copy (booked by autocast_weight_copies, 2·V·h) are freed by then
        return 0, (2 + 4) * v * h + 4 * t * h - 2 * v * h
    e = 4 if fp32_head_numel(arch, plan.framework, dt.compute) else dt.compute
    return e * t * v, max(e, dt.grad) * v * h + e * t * h


def copies_before_head(arch: ModelArch, copies: int) -> int:
    """The autocast weight copies (memory/activations.py) less lm_head's: what exists before the head runs (inside the
    top layer's forward) or after its backward (memory/expert_backward.py copies_at_expert_moment)."""
    head = next((tt.numel for tt in arch.tensors if tt.name == "lm_head.weight"),
                arch.vocab_size * arch.hidden_size if arch.tied_embeddings and arch.causal_lm else 0)
    return max(0, copies - 2 * head)
