"""fp8 linears (plan-v1 Extension 9, ``fp8``): torchao's Float8Linear (torchao 0.18.0 torchao/float8/
float8_linear.py, the module `convert_to_float8_training` swaps in for every nn.Linear it converts; torchtitan's
`model.converters = ["float8"]`). The weights, their gradients and the optimizer states stay as without fp8 (the
module keeps its bf16 `weight`), and so do the saved activations: `Float8Linear.forward` hands the bf16 input and
weight to `matmul_with_hp_or_float8_args`, whose forward saves exactly those two (`ctx.save_for_backward(input_hp,
weight_hp_t)`), for both recipes (traced: tools/fp8trace/saved.py, tests/data/fp8_saved.json: a bf16 linear, a
tensorwise and a rowwise Float8Linear save the same 1,310,720 bytes for 256 tokens x 512 -> 1024). Releases
before ao issue 2251 cast the tensorwise weight outside the function and saved that fp8 copy instead (the
now inert `force_recompute_fp8_weight_in_bwd`): not modelled.

What fp8 adds is casts, 1 byte per element plus a scalar or per-row scale: forward the input and the weight,
backward (matmul_with_hp_or_float8_args.backward, every cast a local alive until it returns) grad_output cast
for grad_input, the weight again, grad_output cast for grad_weight and the input: 2 t·d_out + t·d_in + d_in·d_out
bytes at once for the largest converted linear, during its backward.
"""
from __future__ import annotations

from ..plan import Plan
from .terms import BWD_END, Term, gpu


def fp8_linears(arch) -> list:
    """The linears Float8Linear converts, as (d_in, d_out): every 2-D linear weight inside the decoder blocks
    (torchtitan's converter skips the `output` head; fused 3-D MoE experts are no nn.Linear)."""
    return [(t.shape[1], t.shape[0]) for t in arch.tensors if t.linear and t.block and len(t.shape) == 2]


def fp8_terms(plan: Plan, arch) -> list[Term]:
    """The casts of one converted linear's backward (none without ``fp8``)."""
    if plan.fp8 == "none":
        return []
    tokens = plan.micro_batch_size * plan.seq_len
    casts = max((tokens * (2 * d_out + d_in) + d_in * d_out for d_in, d_out in fp8_linears(arch)), default=0)
    return [gpu("fp8_backward_casts", "activations", casts, BWD_END)] if casts else []


__all__ = ["fp8_terms", "fp8_linears"]
