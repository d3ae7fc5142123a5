"""Rules every HF-Trainer-based importer shares (axolotl, LLaMA-Factory, TrainingArguments / TRL): a GPTQ base,
accelerate's FSDP upcast of the trainable weights, options that run in one process only."""
from __future__ import annotations

from .builder import Builder, as_int

def set_gptq(b: Builder, key, bits=None, group_size=None, why="a GPTQ-quantized base"):
    """LoRA on a GPTQ base (auto-gptq / optimum / gptqmodel QuantLinear): plan-v1 Extension 1 ``quantization``
    type gptq under method qlora; bits and group size from the checkpoint's quantization_config when the
    file gives them, else GPTQ's usual 4 bits and group size 128 (stated in a warning)."""
    b.set(key, "method", "qlora")
    b.set(key, "quantization.type", "gptq")
    b.set(key, "quantization.bits", as_int(key, bits) if bits is not None else 4, default=bits is None)
    b.set(key, "quantization.group_size", as_int(key, group_size, minimum=-1) if group_size is not None else 128,
          default=group_size is None)
    if bits is None or group_size is None:
        b.warn("import-gptq-assumed", f"{key}: {why}; its quantization_config is not in this file: read as 4-bit "
                                      "GPTQ with group size 128 (paste the model's config.json for the exact bits)")


def fsdp_upcast_precision(b: Builder, key, prec: str) -> str:
    """A full fine-tune loaded in 16 bits under accelerate's FSDP with mixed precision on keeps fp32 trainable
    parameters: FSDP1 ``Accelerator.prepare_model`` upcasts every trainable FlatParameter
    (``param.data = param.data.to(torch.float32)`` "following DeepSpeed's strategy" when
    ``self.mixed_precision != "no"``), FSDP2 ``utils/fsdp_utils.py fsdp2_prepare_model`` upcasts every trainable
    parameter that is not a bnb Params4bit; the MixedPrecisionPolicy computes in bf16. So bf16-pure -> bf16-mixed."""
    if prec == "bf16-pure" and b.plan["framework"] == "fsdp" and b.plan["method"] == "full":
        b.set(key, "precision", "bf16-mixed")
        b.warn("import-fsdp-upcast", "accelerate's FSDP upcasts the bf16-loaded trainable weights to fp32 when bf16 "
                                     "mixed precision is on: read as bf16-mixed (fp32 master weights, sharded)")
        return "bf16-mixed"
    return prec


def single_process_only(b: Builder, key, value, why: str):
    """An option its trainer runs in one process only (layer-wise optimizers: transformers
    ``trainer_optimizer.py _setup_low_rank_optimizer`` raises "Layer-wise ... does not support DDP";
    LLaMA-Factory ``hparams/parser.py`` refuses layer-wise GaLore / APOLLO in distributed training): the plan
    runs on one GPU, with a warning."""
    b.set(key, "framework", "single")
    b.set(key, "gpus_per_node", 1)
    b.set(key, "nodes", 1)
    b.set(key, "offload_optimizer", "none", default=True)
    b.set(key, "offload_params", "none", default=True)
    b.warn("import-single-process", f"{key}: {value!r}: {why}; the plan runs one process on one GPU")


def trl_kbit_prepare(b: Builder, cfg: dict) -> None:
    """TRL's SFTTrainer up to 0.24 runs PEFT ``prepare_model_for_kbit_training`` on a 4-bit model that is not
    sharded (trl/trainer/sft_trainer.py ``__init__`` 0.7-0.14, ``_prepare_peft_model`` 0.15-0.21; skipped when
    the Params4bit sit on cpu/meta, i.e. FSDP or ZeRO-3 QLoRA), then under ``args.bf16`` casts the embeddings and
    lm_head back to bf16 (``peft_module_casting_to_bf16``; the norms stay fp32). A config that still names
    ``max_seq_length`` is TRL <= 0.19 (0.20's SFTConfig has ``max_length`` only): without bf16 its QLoRA model
    trains as prepare leaves it (stack.kbit_prepare true, memory/stack.py kbit_prepared), with bf16 in the mixed
    state (stack.kbit_prepare trl-bf16, memory/stack.py kbit_bf16_ends; TRL 0.7.x-0.8.x also cast the LoRA layers
    to bf16, which the plan does not say)."""
    if "max_seq_length" not in cfg or b.plan["method"] != "qlora":
        return
    if b.plan.get("quantization", {}).get("type") not in ("nf4", "fp4"):
        return
    sharded = b.plan["framework"] == "fsdp" or (b.plan["framework"] == "deepspeed" and b.plan["zero_stage"] == 3)
    if sharded:
        return
    b.set("max_seq_length", "stack.kbit_prepare", "trl-bf16" if b.plan["precision"].startswith("bf16") else True)
