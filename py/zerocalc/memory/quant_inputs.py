"""The inputs old bitsandbytes' 4-bit linears keep for backward (memory/activations.py: `Stack.bnb_keeps_inputs`),
in the quantization compute dtype."""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan
from .lora import block_linears_per_layer

QUANT_COMPUTE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def quant_inputs_saved(plan: Plan, arch: ModelArch) -> int:
    """The distinct inputs of one block's 4-bit linears, in the quantization compute dtype, over all layers:
    the Llama lineage's q/k/v input, o_proj's input, gate/up's input and down_proj's input (6·s·b·h + 2·s·b·I
    per layer in bf16 for a multi-head-width attention); other blocks: every linear's input."""
    t = plan.seq_len * plan.micro_batch_size
    e = QUANT_COMPUTE_BYTES[plan.quantization.compute_dtype]
    total = 0
    for lins in block_linears_per_layer(arch):
        names = {lin.name: lin for lin in lins if lin.count == 1}
        if arch.family in ("llama", "gemma") and "down_proj" in names:
            widths = [arch.hidden_size, names["o_proj"].d_in if "o_proj" in names else arch.q_dim,
                      arch.hidden_size, names["down_proj"].d_in]
        else:
            widths = [lin.d_in for lin in names.values()]
        total += e * t * sum(widths)
    return total
