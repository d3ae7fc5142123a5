"""PEFT ``LoraConfig`` and transformers ``BitsAndBytesConfig`` snippets for LoRA / QLoRA plans.

Argument names: peft 0.21 LoraConfig (r, lora_alpha, lora_dropout, target_modules, bias, task_type);
transformers 5.24 BitsAndBytesConfig (load_in_4bit / load_in_8bit, bnb_4bit_quant_type, bnb_4bit_use_double_quant,
bnb_4bit_compute_dtype, bnb_4bit_quant_storage). Sharded QLoRA (FSDP, ZeRO-3) stores the 4-bit weights in a
bf16 container (bnb_4bit_quant_storage) so they can be flattened with the bf16 parameters; the bytes are the same.
"""
from __future__ import annotations

from ..plan import as_plan
from .ds_config import ExportError
from .pyfmt import py_literal

DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


def lora_config_kwargs(plan) -> dict:
    plan = as_plan(plan)
    if plan.method not in ("lora", "qlora"):
        raise ExportError("method", f"method is {plan.method}: a PEFT config applies to lora or qlora")
    lo = plan.lora
    return {"r": lo.rank, "lora_alpha": lo.alpha, "lora_dropout": float(lo.dropout),
            "target_modules": list(lo.targets), "bias": "none", "task_type": "CAUSAL_LM"}


def bnb_config_kwargs(plan):
    """BitsAndBytesConfig kwargs (dtypes as "torch.<name>" strings), or None when the plan is not QLoRA."""
    plan = as_plan(plan)
    if plan.method != "qlora":
        return None
    q = plan.quantization
    if q.type == "int8":
        return {"load_in_8bit": True}
    kw = {"load_in_4bit": True, "bnb_4bit_quant_type": q.type,
          "bnb_4bit_use_double_quant": q.double_quant,
          "bnb_4bit_compute_dtype": DTYPES[q.compute_dtype]}
    if plan.framework == "fsdp" or (plan.framework == "deepspeed" and plan.zero_stage == 3):
        kw["bnb_4bit_quant_storage"] = "torch.bfloat16"
    return kw


def peft_snippet(plan) -> str:
    lora = lora_config_kwargs(plan)
    bnb = bnb_config_kwargs(plan)
    lines = []
    if bnb:
        lines += ["import torch", "from transformers import BitsAndBytesConfig"]
    lines += ["from peft import LoraConfig", ""]
    if bnb:
        lines.append("bnb_config = BitsAndBytesConfig(")
        for k, v in bnb.items():
            lines.append(f"    {k}={v if isinstance(v, str) and v.startswith('torch.') else py_literal(v)},")
        lines += [")", "# model = AutoModelForCausalLM.from_pretrained(..., quantization_config=bnb_config)", ""]
    lines.append("lora_config = LoraConfig(")
    for k, v in lora.items():
        lines.append(f"    {k}={py_literal(v)},")
    lines.append(")")
    return "\n".join(lines) + "\n"
