"""Configs out for the trainers that read no YAML zerocalc writes elsewhere: a LitGPT command line and a
torchtitan TOML fragment, holding the plan's memory keys.

LitGPT 0.5 (`litgpt finetune_lora|finetune_full`, jsonargparse flags of litgpt/finetune/*.py: --devices,
--num_nodes, --precision, --quantize, --train.micro_batch_size, --train.global_batch_size,
--train.max_seq_length, --lora_r/--lora_alpha/--lora_dropout and --lora_query/key/value/projection/mlp/head);
torchtitan 0.3 (`torchtitan/config_manager.py` JobConfig sections [model], [training], [parallelism],
[activation_checkpoint], [optimizer]).
"""
from __future__ import annotations

from ..plan import Plan, as_plan
from ..presets import MODELS
from .ds_config import ExportError

LITGPT_PRECISION = {"bf16-pure": "bf16-true", "bf16-mixed": "bf16-mixed", "fp16-mixed": "16-mixed", "fp32": "32-true"}
LITGPT_LORA = (("lora_query", ("q_proj",)), ("lora_key", ("k_proj",)), ("lora_value", ("v_proj",)),
               ("lora_projection", ("o_proj",)), ("lora_mlp", ("gate_proj", "up_proj", "down_proj")),
               ("lora_head", ("lm_head",)))


def _repo(plan: Plan) -> str:
    return MODELS[plan.model].hf_repo if isinstance(plan.model, str) else "<checkpoint_dir>"


def litgpt_command(plan) -> str:
    plan = as_plan(plan)
    if plan.framework not in ("single", "fsdp"):
        raise ExportError("framework", "LitGPT's fine-tuning scripts run on one GPU or shard with FSDP")
    full = plan.method == "full"
    args = [f"litgpt {'finetune_full' if full else 'finetune_lora'} {_repo(plan)}",
            f"--devices {plan.gpus_per_node}", f"--num_nodes {plan.nodes}",
            f"--precision {LITGPT_PRECISION[plan.precision]}"]
    if plan.method == "qlora":
        q = plan.quantization
        if q.type == "gptq":
            raise ExportError("quantization.type", "LitGPT quantizes with bitsandbytes (nf4, fp4, int8), not GPTQ")
        args.append("--quantize " + ("bnb.int8-training" if q.type == "int8" else
                                     f"bnb.{q.type}" + ("-dq" if q.double_quant else "")))
    global_batch = plan.micro_batch_size * plan.gradient_accumulation_steps * plan.world_size
    args += [f"--train.micro_batch_size {plan.micro_batch_size}", f"--train.global_batch_size {global_batch}",
             f"--train.max_seq_length {plan.seq_len}"]
    if not full:
        lo = plan.lora
        args += [f"--lora_r {lo.rank}", f"--lora_alpha {lo.alpha}", f"--lora_dropout {lo.dropout}"]
        args += [f"--{flag} {'true' if any(t in lo.targets for t in names) else 'false'}" for flag, names in LITGPT_LORA]
    notes = []
    if plan.activation_checkpointing != "none":
        notes.append("# LitGPT's finetune scripts have no checkpointing flag (FSDP's activation_checkpointing_policy in code)")
    return "\n".join(notes + [" \\\n  ".join(args)]) + "\n"


def torchtitan_toml(plan) -> str:
    plan = as_plan(plan)
    if plan.method != "full":
        raise ExportError("method", "torchtitan trains full models only")
    ac = {"none": "none", "full": "full", "selective-op": "selective", "selective": "selective"}[
        plan.activation_checkpointing]
    lines = ["# torchtitan 0.3 job config (the plan's memory keys); model flavor from the torchtitan model registry",
             "[model]", f'name = "{plan.arch.model_type}"  # flavor: pick the one with {plan.arch.num_layers} layers, '
                        f"hidden {plan.arch.hidden_size}",
             "", "[training]", f"batch_size = {plan.micro_batch_size}", f"seq_len = {plan.seq_len}",
             f'mixed_precision_param = "{"float32" if plan.precision == "fp32" else "bfloat16"}"',
             f"compile = {'true' if plan.stack.compile != 'none' else 'false'}",
             "", "[parallelism]", f"data_parallel_shard_degree = {plan.world_size}",
             "", "[activation_checkpoint]", f'mode = "{ac}"']
    if ac == "selective":
        lines.append('selective_ac_option = "op"')
    lines += ["", "[optimizer]", 'name = "AdamW"',
              f'implementation = "{plan.stack.optimizer_impl if plan.stack.optimizer_impl != "auto" else "fused"}"']
    if plan.gradient_accumulation_steps > 1:
        lines.insert(0, "# torchtitan 0.3's loop takes no gradient accumulation: raise batch_size or the degree instead")
    return "\n".join(lines) + "\n"
