"""Which software trains the model (contract plan-v1, Extension 1: ``stack``): the keys, their parsing, and
the combinations the software cannot run (refused naming the key). Keys that merely do not apply (an
optimizer_impl with a non-torch optimizer, fsdp_version without FSDP) are ignored, as the software ignores
them. What each trainer implies for memory is the engine's business (memory/stack.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import PlanError
from .values import check_choice, check_mapping, reject_unknown, show

# Extension 1: which software trains the model (contract plan-v1, "stack").
TRAINERS = ("hf-trainer", "custom-loop", "torchtune", "litgpt", "torchtitan")
OWN_MODEL_CODE = ("torchtune", "litgpt", "torchtitan")     # trainers that do not run transformers' models
TRANSFORMERS_ERAS = ("5", "4.46", "4.45")
ADAPTER_DTYPES = ("auto", "fp32", "base")
KBIT_PREPARE = ("auto", True, False, "trl-bf16")
BNB_ERAS = ("current", "0.42")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach", "single-tensor")
COMPILE_MODES = ("none", "model", "model+loss")
FSDP_VERSIONS = (1, 2)
CUDA_CONTEXTS = ("lazy", "eager")
TORCH_ERAS = ("2", "1")      # torch >= 2.0, torch 1.x (zero_grad's set_to_none default: memory/stack.py)

@dataclass(frozen=True)
class StackSettings:
    """Which software runs (contract Extension 1); "auto" values are the trainer's own (memory/stack.py)."""
    trainer: str = "hf-trainer"
    transformers: str = "5"
    peft_adapter_dtype: str = "auto"
    kbit_prepare: Any = "auto"
    bitsandbytes: str = "current"
    optimizer_impl: str = "auto"
    compile: str = "none"
    fsdp_version: int = 1
    cuda_context: str = "lazy"
    fsdp_embedding_units: bool = False
    torch: str = "2"


_STACK_CHOICES = {"trainer": TRAINERS, "transformers": TRANSFORMERS_ERAS, "peft_adapter_dtype": ADAPTER_DTYPES,
                  "kbit_prepare": KBIT_PREPARE, "bitsandbytes": BNB_ERAS, "optimizer_impl": OPTIMIZER_IMPLS,
                  "compile": COMPILE_MODES, "fsdp_version": FSDP_VERSIONS, "cuda_context": CUDA_CONTEXTS,
                  "fsdp_embedding_units": (False, True), "torch": TORCH_ERAS}
# true/false keys added to Extension 1 after v1: a plan omits them at their default (plan.plan_to_dict)
BOOL_KEYS = ("fsdp_embedding_units",)
LATE_KEYS = BOOL_KEYS + ("torch",)   # keys added after v1, omitted at their default by plan.plan_to_dict


def fsdp_version_of(settings: StackSettings) -> int:
    """The FSDP a trainer shards with: torchtune and torchtitan call fully_shard (FSDP2) whatever the key says."""
    return 2 if settings.trainer in ("torchtune", "torchtitan") else settings.fsdp_version


def parse_stack(value: Any) -> StackSettings:
    obj = check_mapping("stack", value)
    reject_unknown("stack", obj, tuple(_STACK_CHOICES))
    d = StackSettings()
    vals = {}
    for k, allowed in _STACK_CHOICES.items():
        v = obj.get(k, getattr(d, k))
        if k in ("transformers", "torch") and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)                       # 5 and 4.46 (torch 2 and 1) typed as numbers mean the same versions
        if k == "kbit_prepare":
            if v not in ("auto", "trl-bf16") and not isinstance(v, bool):
                raise PlanError("stack.kbit_prepare", f"must be auto, true, false or trl-bf16; got {show(v)}")
            vals[k] = v
            continue
        if k in BOOL_KEYS:
            if not isinstance(v, bool):
                raise PlanError(f"stack.{k}", f"must be true or false; got {show(v)}")
            vals[k] = v
            continue
        vals[k] = check_choice(f"stack.{k}", v, allowed)
    return StackSettings(**vals)



def check_stack(plan) -> None:
    """Software combinations that cannot run, refused naming the key (contract Extension 1)."""
    s, trainer = plan.stack, plan.stack.trainer
    if trainer in OWN_MODEL_CODE and s.transformers != "5":
        raise PlanError("stack.transformers", f"{trainer} runs its own model code, not transformers; leave "
                                              "stack.transformers at 5")
    if s.torch == "1" and trainer in OWN_MODEL_CODE:
        # torchtune's, LitGPT's and torchtitan's releases require torch 2 (their pyproject pins torch >= 2.x)
        raise PlanError("stack.torch", f"{trainer} runs on torch 2; leave stack.torch at 2")
    if s.torch == "1" and s.compile != "none":
        raise PlanError("stack.torch", "torch.compile came with torch 2.0; set stack.compile none or stack.torch 2")
    if trainer == "torchtitan" and plan.method != "full":
        raise PlanError("method", "torchtitan trains full models only (no LoRA/QLoRA)")
    if trainer == "torchtitan" and plan.framework not in ("fsdp", "single"):
        raise PlanError("framework", "torchtitan shards with FSDP2 (framework fsdp, or single on one GPU)")
    if trainer in ("torchtune", "litgpt") and plan.framework in ("deepspeed", "ddp"):
        raise PlanError("framework", f"{trainer}'s recipes run on one GPU or shard with FSDP; use single or fsdp")
    if trainer in OWN_MODEL_CODE and plan.method == "qlora" and plan.quantization.type == "gptq":
        raise PlanError("quantization.type", f"gptq bases load through transformers (auto-gptq/optimum), not {trainer}")
    if trainer in ("torchtune", "torchtitan") and s.bitsandbytes != "current":
        raise PlanError("stack.bitsandbytes", f"{trainer} does not use bitsandbytes (torchtune's QLoRA is torchao NF4)")
    if s.fsdp_embedding_units and plan.framework == "fsdp" and fsdp_version_of(s) != 2:
        raise PlanError("stack.fsdp_embedding_units", "modelled for FSDP2 (fully_shard, as torchtune's "
                                                      "custom_sharded_layers builds it); set stack.fsdp_version 2")
    if plan.activation_checkpointing == "selective-op" and trainer != "torchtitan":
        raise PlanError("activation_checkpointing", "selective-op is torchtitan's op-level policy; other trainers "
                                                    "have none, full or selective")
    if plan.quantization.type == "gptq" and plan.method == "qlora" and plan.precision == "fp32":
        raise PlanError("quantization.type", "GPTQ kernels compute in 16 bits; use a 16-bit precision")
