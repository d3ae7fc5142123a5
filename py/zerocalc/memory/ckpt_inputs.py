"""What full activation checkpointing keeps beyond memory/activations.py's res·t·h per layer input, for the families
whose layers are not called with the embedding output (reached through memory/blocks_mistral_large4.py
checkpointed_topk, the checkpointed stack's per-type hook).

- PEFT with checkpointing: transformers' enable_input_require_grads (PreTrainedModel, which PEFT calls under
  gradient checkpointing) hooks the input embeddings so that their (b, s, h) output requires grad: a leaf, held by
  its AccumulateGrad node until the backward ends. Where that output is layer 0's checkpoint input (the Llama
  lineage) it is already the first of the stack; here it is a tensor of its own: the hyper-connection models
  (arch.hyper: DeepSeek-V4, GLM-5 next, HY-V4; the layers read the (b, s, hc_mult, h) stream expanded from it) and
  ZAYA (its stream is the fp32 copy). Traced: glm5-next-4l-lora-attn-s512-ckpt (tools/memtrace/glm5_next_trace.py,
  the bf16 (1, 512, 1024) embedding output alive at forward end, 1 MiB: -5.3 % of the saved bytes before),
  hy-v4-narrow rows (tools/memtrace/hy_v4_trace.py), zaya-2l-lora-attn-s512-ckpt (tools/memtrace/more_moe_trace.py).
- ZAYA (modeling_zaya.py ZayaModel.forward): every layer is called with the fp32 residual stream
  (`(...).to(torch.float32)`) and, after layer 0, the previous layer's (b, s, r) router states (the router's
  down_proj output, 16-bit), both checkpoint inputs (traced: zaya-2l-lora-attn-s512-ckpt at the loss's backward:
  two fp32 (1, 512, 1024) inputs and one bf16 (1, 512, 256) state; -42 % of the activations before).
- Inkling 2 / 2 Loop (modeling_inkling2.py Inkling2TextModel.forward): every layer is called with
  `relative_distance`, the int64 (s, s) position difference the attention's relative logits clamp, one of the two
  the model always builds (relative_distance_mapping: full_attention and sliding_attention; traced at b = 1:
  tools/memtrace/inkling_trace.py inkling2_text, two (512, 512) `sub`s, 4 MiB, alive at the checkpointed rows'
  peaks).
"""
from __future__ import annotations

from ..model import ModelArch

ZAYA = ("zaya",)


def checkpointed_beyond(arch: ModelArch, batch: int, seq: int, res: int, lora: bool) -> int:
    """The bytes beyond the stack's res·t·h per layer (module docstring); `lora`: adapters, not full fine-tuning."""
    t, h, extra = batch * seq, arch.hidden_size, 0
    if arch.model_type in ZAYA:
        r = next(tt.shape[0] for tt in arch.tensors if tt.name.endswith("mlp.gate.down_proj.weight"))
        extra += arch.num_layers * (4 - res) * t * h + (arch.num_layers - 1) * 2 * t * r
    if arch.inkling2 is not None:
        extra += 2 * 8 * seq * seq    # both relative_distance tensors, checkpoint inputs of the layers
    if lora and (arch.hyper is not None or arch.model_type in ZAYA):
        extra += res * t * h          # the embedding output, in the (frozen) embedding's dtype
    return extra
