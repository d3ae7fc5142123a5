"""lm_head's backward as a moment of its own (the ``head_bwd`` phase, memory/terms.py): after the loss's backward
has freed its logits, lm_head's mm backward holds the logits' gradient, the new (V, h) weight gradient (beside the
accumulated `.grad` under gradient accumulation: autograd adds it in afterwards; without accumulation it becomes
`.grad`, which the gradients term does not count before the backward's end) and the input's gradient, beside every
saved activation and the head's own (its input). Where the loss's backward holds only a few t·V tensors (a 16-bit
loss, or an fp32 head whose logits need no upcast) and V·h is large beside t·V, this moment is the step's peak.

Counted for these types (HEAD_MOMENT), full fine-tuning in pure 16 bits on one GPU or DDP:
- CPM-Ant (modeling_cpmant.py CpmAntForCausalLM: an untied lm_head, the loss on the 16-bit logits): the trace
  peaks in lm_head's backward mm with the 16-bit logits' gradient (2·t·V), the (30720, 1024) bf16 weight gradient
  and the (t, h) input gradient (tools/memtrace/own_blocks_trace.py cpmant-2l-full-s512: 30 + 60 + 1 MiB);
- HY-V4 and HY-V4-VL (the fp32 lm_head kept by _keep_in_fp32_modules_strict, memory/blocks_hy_v4.py
  fp32_head_numel): the fp32 logits' gradient (4·t·V), the fp32 weight gradient and the fp32 input gradient
  (tools/memtrace/hy_v4_trace.py hy-v4-3l-full-s512: 16 + 32 + 2 MiB).
- AXK2 under bf16-mixed over fp32 weights (MIXED_HEAD_MOMENT): the peak is the cast of lm_head's 16-bit weight
  gradient to the fp32 parameter's dtype, both (V, h) alive, with the input's gradient cast to the fp32 stream
  (4·t·h), lm_head's autocast copy (head_copy_freed) and the logits' gradient already freed, gradient accumulation
  1 included (tools/memtrace/axk2_trace.py axk2-2l-full-mixed-s512-eager: 125 + 250 + 4 MiB of temporaries;
  activations -30.7 % before, +0.1 % after).
Before this moment the engine peaked at the loss's backward with the same total (within 0.5 %) but booked
activations -44 % (CPM-Ant) and -14 % (HY-V4), logits +200 %.

Llama-like decoders (family "llama": the transformers 5 loss, `logits.float()` then cross-entropy, 12·t·V at the
loss's backward) reach the same moment once V·h is large beside t·V and the weight gradient is a new tensor beside
the accumulated `.grad` (gradient accumulation > 1), with an untied lm_head, full fine-tuning, the HF loss (no
chunking, compiling or LitGPT / torchtune loss), on one GPU or DDP (llama_like_head):
- bf16-pure: the moment above, 2·t·V + 2·V·h + 2·t·h (tools/memtrace/head_bwd_trace.py llama3-2l-h1024-pure-
  s128-ga2, V 128256, h 1024, t 128: 31 + 245 + 0.25 MiB; the engine's loss-backward peak was -3.7 %);
- bf16-mixed (fp32 weights and gradients): a moment later, inside the backward of lm_head's autocast cast
  (ToCopyBackward0): the logits' gradient and lm_head's bf16 weight copy (saved by the mm) are freed, the bf16
  weight gradient 2·V·h and its fp32 cast 4·V·h exist beside the input gradient (llama3-2l-h1024-mixed-s128-ga2:
  the peak op _to_copy, 734 MiB of temporaries; the engine was -5.9 %). Booked as 6·V·h + 2·t·h with the autocast
  copies less lm_head's (head_copy_freed, memory/inputs.py).
Traced with and without full checkpointing, Llama 3 and Qwen3 shapes at 2 layers and Llama 3.1 8B / Qwen2.5 7B at
full size (tests/test_head_bwd_llama.py), single GPU only (DDP's, the same autograd order, is not traced); the gate
takes the whole "llama" activation family less the heads of their own (NO_UPCAST, softcaps, looped, ProphetNet, GIT).
Traced not to peak there: s 512 at h 1024 (the loss's backward, 12·t·V, stays larger), gradient accumulation 1 (the
new weight gradient is the `.grad`, and the end of backward holds every gradient), and a tied lm_head (the
embedding's backward holds its gradient beside lm_head's pending contribution, memory/frameworks.py, which is more).
"""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan
from .blocks_git import image_tokens
from .blocks_hy_v4 import fp32_head_numel
from .logits import NO_UPCAST
from .precision import Dtypes
from .stack import Stack

HEAD_MOMENT = ("cpmant", "hy_v4", "hy_v4_vl")
MIXED_HEAD_MOMENT = ("axk2",)


def llama_like_head(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack) -> bool:
    """Whether the Llama-like moment applies (module docstring): family "llama", an untied lm_head, the plain
    transformers 5 loss, gradient accumulation, 16-bit compute (bf16-pure, or bf16-mixed with fp32 gradients)."""
    return (arch.family == "llama" and arch.model_type not in NO_UPCAST + HEAD_MOMENT and not arch.tied_embeddings
            and plan.gradient_accumulation_steps > 1 and plan.loss == "standard" and stack.loss_path == "hf5"
            and stack.compile == "none"
            and not stack.loop_keeps_output and dt.compute == 2 and (not dt.autocast or dt.grad == 4)
            and not arch.final_softcap and arch.prophetnet is None and arch.looped is None and not image_tokens(arch))


def head_copy_freed(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack) -> bool:
    """bf16-mixed, the Llama-like moment: lm_head's autocast copy is freed before it (module docstring)."""
    return dt.autocast and _gate(plan, arch) and (llama_like_head(plan, arch, dt, stack) or _mixed(arch, dt))


def _mixed(arch: ModelArch, dt: Dtypes) -> bool:
    return dt.autocast and dt.weight == 4 and arch.model_type in MIXED_HEAD_MOMENT


def _gate(plan: Plan, arch: ModelArch) -> bool:
    return (arch.causal_lm and plan.method == "full" and plan.framework in ("single", "ddp")
            and any(tt.name == "lm_head.weight" for tt in arch.tensors))


def head_backward_moment(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack) -> tuple[int, int]:
    """(the logits' gradient, the weight's and the input's gradients) in lm_head's backward; (0, 0) where not
    counted (module docstring)."""
    if not _gate(plan, arch):
        return 0, 0
    head = next(tt for tt in arch.tensors if tt.name == "lm_head.weight")
    t, v, h = plan.seq_len * plan.micro_batch_size, arch.vocab_size, head.numel // arch.vocab_size
    if llama_like_head(plan, arch, dt, stack):
        if dt.autocast:        # inside the cast's backward: the bf16 weight gradient and its fp32 copy
            return 0, (dt.compute + dt.grad) * v * h + dt.compute * t * h
        return dt.compute * t * v, dt.compute * v * h + dt.compute * t * h
    if _mixed(arch, dt):        # AXK2: the same cast's backward, the input gradient cast to the fp32 stream
        return 0, (dt.compute + 4) * v * h + 4 * t * h
    if arch.model_type not in HEAD_MOMENT or dt.autocast:
        return 0, 0
    e = 4 if fp32_head_numel(arch, plan.framework, dt.compute) else dt.compute
    return e * t * v, max(e, dt.grad) * v * h + e * t * h


def copies_before_head(arch: ModelArch, copies: int) -> int:
    """The autocast weight copies (memory/activations.py) less lm_head's: what exists before the head runs (inside the
    top layer's forward) or after its backward (memory/expert_backward.py copies_at_expert_moment)."""
    head = next((tt.numel for tt in arch.tensors if tt.name == "lm_head.weight"),
                arch.vocab_size * arch.hidden_size if arch.tied_embeddings and arch.causal_lm else 0)
    return max(0, copies - 2 * head)
