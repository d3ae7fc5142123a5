"""Hugging Face ``TrainingArguments`` snippet for a plan (transformers 5.24 argument names).

With DeepSpeed the snippet points ``deepspeed=`` at the "auto"-style ds_config (ds_config.py), whose "auto"
keys the Trainer fills from these arguments (integrations/deepspeed.py trainer_config_process); the values
here are the plan's, so the filled config is the estimated one. transformers 5.24 names gradient
checkpointing ``activation_checkpointing`` (``gradient_checkpointing`` is its deprecated alias) and offloads
checkpointed activations with ``activation_checkpointing_kwargs={"offload": True}``.
"""
from __future__ import annotations

from ..plan import Plan, as_plan
from ..runplan import DEFAULT
from .data_args import collator_lines, env_lines, hf_allocator_kwargs
from .ds_config import DS_OPTIMIZER_TYPES, ExportError, check_expressible
from .pyfmt import py_literal

# plan optimizer -> TrainingArguments.optim (transformers.training_args.OptimizerNames)
HF_OPTIM = {"adamw": "adamw_torch_fused", "adamw-8bit": "adamw_bnb_8bit", "paged-adamw-8bit": "paged_adamw_8bit",
            "paged-adamw-32bit": "paged_adamw_32bit", "adafactor": "adafactor", "sgd": "sgd", "lion": "lion_32bit"}
HF_ATTN = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
TORCH_DTYPE = {"bf16-mixed": None, "fp16-mixed": None, "fp32": None, "bf16-pure": "torch.bfloat16"}


def training_arguments_kwargs(plan, ds_config_path: str = "ds_config.json") -> dict:
    """The TrainingArguments keyword arguments that carry the plan (values as Python objects)."""
    plan = as_plan(plan)
    if plan.optimizer_in_backward:
        raise ExportError("optimizer_in_backward", "the HF Trainer has no optimizer-in-backward mode")
    prec, fw = plan.precision, plan.framework
    kw = {"output_dir": "out",
          "per_device_train_batch_size": plan.micro_batch_size,
          "gradient_accumulation_steps": plan.gradient_accumulation_steps}
    if prec == "bf16-mixed" or (prec == "bf16-pure" and fw == "deepspeed"):
        kw["bf16"] = True  # DeepSpeed: fills bf16.enabled; pure bf16 comes from the config's bf16 master keys
    elif prec == "fp16-mixed":
        kw["fp16"] = True
    if plan.activation_checkpointing == "full":
        kw["activation_checkpointing"] = True
        if plan.activation_offloading:
            kw["activation_checkpointing_kwargs"] = {"offload": True}
    kw["optim"] = HF_OPTIM[plan.optimizer]
    if plan.optimizer == "lion":
        kw["adam_beta2"] = 0.99  # Lion's usual (0.9, 0.99); the Trainer passes adam_beta1/2 as its betas
    gc = plan.deepspeed.get("gradient_clipping")
    if gc not in (None, "auto"):
        kw["max_grad_norm"] = float(gc)
    if fw == "deepspeed":
        check_expressible(plan)
        kw["deepspeed"] = ds_config_path
    elif fw == "fsdp":
        kw["fsdp"] = fsdp_option_string(plan)
    kw.update(run_arguments(plan))
    kw.update(hf_allocator_kwargs(plan))
    return kw


def run_arguments(plan: Plan) -> dict:
    """The plan's run block (Extension 5) as TrainingArguments: evaluation (eval_strategy, eval_steps,
    per_device_eval_batch_size, eval_accumulation_steps), saves (save_strategy, save_steps, save_only_model) and
    load_best_model_at_end; keys the plan leaves to the Trainer's defaults are not written."""
    r, kw = plan.run, {}
    if r.eval is None:
        kw["eval_strategy"] = "no"
    elif r.eval != DEFAULT:
        kw["eval_strategy"] = "steps"
        if r.eval.every_steps:
            kw["eval_steps"] = r.eval.every_steps
        if r.eval.batch_size != "auto":
            kw["per_device_eval_batch_size"] = r.eval.batch_size
        if r.eval.accumulation_steps:
            kw["eval_accumulation_steps"] = r.eval.accumulation_steps
    if r.save is None:
        kw["save_strategy"] = "no"
    elif r.save != DEFAULT:
        if r.save.every_steps:
            kw["save_strategy"], kw["save_steps"] = "steps", r.save.every_steps
        if not r.save.optimizer:
            kw["save_only_model"] = True
    if r.load_best_at_end:
        kw["load_best_model_at_end"] = True
    return kw


def fsdp_option_string(plan: Plan) -> str:
    """TrainingArguments.fsdp for an FSDP plan ("full_shard offload auto_wrap"); ExportError names the key
    FSDP cannot express."""
    stage = plan.zero_stage
    if stage not in (2, 3):
        raise ExportError("zero_stage", "FSDP shards at stage 2 (shard_grad_op) or 3 (full_shard)")
    parts = ["full_shard" if stage == 3 else "shard_grad_op"]
    if plan.offload_params == "cpu" or plan.offload_optimizer == "cpu":
        if plan.offload_params != plan.offload_optimizer:
            raise ExportError("offload_optimizer", "FSDP's CPU offload moves parameters, gradients and the optimizer "
                              "step together: offload_params and offload_optimizer must both be cpu")
        parts.append("offload")
    elif "nvme" in (plan.offload_params, plan.offload_optimizer):
        raise ExportError("offload_params", "FSDP cannot offload to NVMe")
    parts.append("auto_wrap")
    return " ".join(parts)


def training_arguments_snippet(plan, ds_config_path: str = "ds_config.json") -> str:
    """Python source: model loading line (attention, dtype) as a comment and the TrainingArguments call."""
    plan = as_plan(plan)
    kw = training_arguments_kwargs(plan, ds_config_path)
    lines = ["from transformers import TrainingArguments", ""]
    model = plan.model if isinstance(plan.model, str) else plan.model.get("name", "custom model")
    dtype = TORCH_DTYPE[plan.precision]
    load = f'attn_implementation="{HF_ATTN[plan.attention]}"' + (f", dtype={dtype}" if dtype else "")
    lines.append(f"# model: AutoModelForCausalLM.from_pretrained(<{model}>, {load})")
    lines.append(f"# sequences of {plan.seq_len} tokens (tokenizer / SFTConfig max_length)")
    lines += collator_lines(plan)
    lines += [f"# launch with {line[len('export '):]}" for line in env_lines(plan) if line.startswith("export ")]
    if plan.method in ("lora", "qlora"):
        lines.append("# LoRA/QLoRA: see `zerocalc export --to peft`")
    if plan.framework == "deepspeed" and plan.zero_stage == 3:
        if plan.deepspeed.get("zero_init", True):
            lines.append("# ZeRO-3: create these args BEFORE from_pretrained, so the model is built under "
                         "deepspeed.zero.Init (zero_init)")
        else:
            lines.append("# zero_init false: call from_pretrained BEFORE creating these args (each rank then "
                         "loads the whole model first)")
    if plan.run.resume:
        lines.append("# resume: trainer.train(resume_from_checkpoint=True)")
    if plan.run.eval not in (None, DEFAULT) and plan.run.eval.logits == "argmax":
        lines.append("# eval logits: pass preprocess_logits_for_metrics=lambda l, _: l.argmax(-1) to the Trainer")
    if plan.loss == "chunked":
        lines.append("# chunked loss: use_liger_kernel=True (needs liger-kernel) or a chunked cross-entropy")
    if plan.activation_checkpointing == "selective":
        lines.append("# selective checkpointing: not a TrainingArguments option (torchtune / custom wrapping)")
    if plan.activation_offloading and plan.activation_checkpointing != "full":
        lines.append("# activation offloading without checkpointing: not a TrainingArguments option")
    lines.append("args = TrainingArguments(")
    for k, v in kw.items():
        comment = ""
        if k == "optim" and plan.framework == "deepspeed" and plan.optimizer in DS_OPTIMIZER_TYPES:
            comment = "  # unused: the ds_config's optimizer block builds DeepSpeed's optimizer"
        if k == "deepspeed":
            comment = "  # zerocalc export --to ds --style auto > " + ds_config_path
        lines.append(f"    {k}={py_literal(v)},{comment}")
    lines.append(")")
    return "\n".join(lines) + "\n"
