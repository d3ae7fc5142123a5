"""Bytes per element of each kind of tensor, by precision regime and framework.

The regimes as the tools really run them:
- DeepSpeed with `bf16`/`fp16` enabled: the module holds 16-bit weights; the ZeRO optimizer keeps an
  fp32 master partition and fp32 Adam states (deepspeed/runtime/zero/stage_1_and_2.py,
  stage3.py). bf16-pure in DeepSpeed is `bf16.bf16_master_weights_and_grads` +
  `bf16_optimizer_states` (stages 1-3; base_optimizer._configure_master_weights): master copy,
  gradients and Adam moments all bf16, which is what the ds_config export writes.
- PyTorch AMP (single, DDP: HF Trainer `bf16=True`): weights, gradients and optimizer states stay
  fp32; autocast makes 16-bit copies for the matmuls (torch.amp.autocast; docs/tracer.md §4).
- FSDP MixedPrecision(param_dtype=bf16): fp32 sharded parameters and gradients, 16-bit gathered
  copies for compute.
- bf16-pure (torchtune style): everything bf16, AdamW states in the parameter dtype.
- fp32: everything 4 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..plan import Plan
from .stack import Stack, effective_stack


@dataclass(frozen=True)
class Dtypes:
    weight: int          # resident trainable weights as the module holds them (DeepSpeed: 16-bit flat)
    compute: int         # activations and the weights the matmuls read
    grad: int            # gradients as autograd produces them
    master: int          # separate fp32 master copy per trainable element (0 = none)
    state: int           # optimizer state element (Adam m or v) for 32-bit optimizers
    frozen: int          # frozen (LoRA base) weights
    adapter: int         # LoRA adapter weights (PEFT keeps them fp32 by default: autocast_adapter_dtype)
    autocast: bool       # matmuls under torch.autocast (16-bit copies of fp32 tensors)


def dtypes_for(plan: Plan, stack: Stack | None = None) -> Dtypes:
    """The plan's dtypes; ``stack`` is the plan's resolved stack (memory/inputs.py resolves it once)."""
    dt = _regime(plan)
    stack = stack or effective_stack(plan)
    if plan.method != "full" and plan.framework != "deepspeed" and dt.compute == 2:
        # PEFT >= 0.12 keeps adapters fp32 on a 16-bit base (autocast_adapter_dtype); older PEFT, torchtune and
        # LitGPT build them in the base dtype (memory/stack.py)
        dt = replace(dt, adapter=4 if stack.adapter_dtype == "fp32" else 2)
    if stack.fabric_mixed and plan.method != "full":
        # Fabric "bf16-mixed" builds the whole model in fp32, the frozen base and LitGPT's LoRA layers alike
        dt = replace(dt, frozen=4, adapter=4)
    if stack.kbit_prepare:
        # peft prepare_model_for_kbit_training: every non-quantized parameter (embeddings, norms, head) to fp32,
        # so the residual stream the layers read and save is fp32 too
        dt = replace(dt, frozen=4)
    return dt


def _regime(plan: Plan) -> Dtypes:
    p, fw = plan.precision, plan.framework
    if p == "fp32":
        return Dtypes(weight=4, compute=4, grad=4, master=0, state=4, frozen=4, adapter=4, autocast=False)
    if p == "bf16-pure" and fw != "deepspeed":
        return Dtypes(weight=2, compute=2, grad=2, master=0, state=2, frozen=2, adapter=2, autocast=False)
    if fw == "deepspeed" and p == "bf16-pure":
        return Dtypes(weight=2, compute=2, grad=2, master=2, state=2, frozen=2, adapter=2, autocast=False)
    if fw == "deepspeed":
        # 16-bit module weights and grads, fp32 master + states inside the ZeRO/FP16 optimizer. The
        # engine casts the whole module (adapters included) to 16 bits and does not autocast
        # (engine._configure_distributed_model: module.bfloat16() / module.half()).
        return Dtypes(weight=2, compute=2, grad=2, master=4, state=4, frozen=2, adapter=2, autocast=False)
    if plan.method != "full":
        # HF Trainer bf16=True with PEFT: 16-bit frozen base, fp32 adapters, autocast on.
        return Dtypes(weight=2, compute=2, grad=4, master=0, state=4, frozen=2, adapter=4, autocast=True)
    # AMP full fine-tuning (single / DDP / FSDP mixed precision): fp32 weights, grads, states.
    return Dtypes(weight=4, compute=2, grad=4, master=0, state=4, frozen=4, adapter=4, autocast=True)


def module_dtypes(plan: Plan, dt: Dtypes) -> Dtypes:
    """The dtypes the module computes with, for the activation model. FSDP with accelerate's bf16/fp16
    policy, MixedPrecision(param_dtype=reduce_dtype=buffer_dtype=16-bit) (accelerate
    FullyShardedDataParallelPlugin.set_mixed_precision), gathers 16-bit copies of the fp32 shards:
    autocast finds 16-bit weights and makes no copies, and the residual stream is 16-bit. LoRA adapters
    keep their stored dtype here: PEFT casts each adapter's input to `lora_A.weight.dtype` before the
    adapter's own FSDP unit gathers it, so it sees the fp32 shard and every adapter keeps a 16-bit
    autocast copy of its input, as without FSDP. Measured on CPU ranks (tools/fsdpprobe). Elsewhere the
    module holds what it stores."""
    if plan.framework == "fsdp" and dt.autocast:
        return replace(dt, weight=dt.compute, frozen=dt.compute)
    return dt
