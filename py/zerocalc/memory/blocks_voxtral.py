"""Saved tensors of Voxtral Realtime's language model (transformers 5.24 modeling_voxtral_realtime.py
VoxtralRealtimeTextDecoderLayer), read off fake-tensor traces of the real step fed text only (tools/memtrace/
own_blocks_trace.py voxtral_realtime, tests/data/voxtral_realtime_trace.json, held within 3 % by
tests/test_voxtral_realtime_blocks.py).

The layer is Mistral's (memory/blocks.py block_saved_bytes) but for VoxtralRealtimeTextDecoderLayer.forward's
`hidden_states = post_attention_layernorm(hidden_states) * (1 + ada_rms_norm(t_cond))` before the MLP: t_cond is
VoxtralRealtimeModel.forward's (1, 1, h) sinusoidal time embedding of num_delay_tokens, ada_rms_norm its
linear1 (h -> 32) -> GELU -> linear2 (32 -> h). The MLP reads the product, a new (b, s, h) tensor in the stream's
dtype; where the ada_rms_norm weights train, the multiply keeps the norm's output too for their gradient (one more
res·t·h per layer), and ada_rms_norm's own (1, h) / (1, 32) tensors. With the ada weights frozen (LoRA) the
multiply keeps only the (1, 1, h) factor, and the layer saves what Mistral's does.
"""
from __future__ import annotations

from ..model import Linear, ModelArch
from .blocks import Ctx, block_saved_bytes
from .lora import Adapter

ADA_DIM = 32        # VoxtralRealtimeTextAdaRmsNorm's fixed bottleneck


def voxtral_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Mistral's layer (memory/blocks.py) and the time conditioning's multiply (module docstring)."""
    total = block_saved_bytes(arch, c, linears, adapters)
    e, h = 2 if c.autocast else c.e, arch.hidden_size
    factor = e * h                                             # (1 + ada_rms_norm(t_cond)), (1, 1, h)
    if c.train_base:
        # the norm's output for the ada weights' gradient, GELU's input and linear2's input (1, 32); linear1's input
        # t_cond, one (h,) tensor every layer reads (a 16-bit copy per layer under autocast), is not counted
        total += c.res * c.tokens * h + 2 * e * ADA_DIM
    return total + factor
