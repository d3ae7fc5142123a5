"""Configs out for the trainers zerocalc also reads: axolotl, LLaMA-Factory and torchtune fragments holding
the plan's memory keys (model, method, LoRA, quantization, batch, sequence, checkpointing, attention, loss,
optimizer, precision, sharding). Each is the inverse of its importer (zerocalc.imports): importing the
fragment into the same plan gives the plan back for every key the fragment expresses; a plan a trainer
cannot express raises ExportError naming the key. A DeepSpeed plan refers to ``ds_config.json`` (write it
with ``zerocalc export --to ds``); FSDP under LLaMA-Factory comes from an accelerate config (``--to accelerate``).
Trainer semantics as documented in zerocalc/imports/{axolotl,llamafactory,torchtune}.py.
"""
from __future__ import annotations


from ..plan import Plan, as_plan
from ..presets import MODELS
from .accelerate import to_yaml
from .data_args import hf_allocator_kwargs, packing_value
from .ds_config import ExportError
from .hf import HF_ATTN, HF_OPTIM

TRAINER_TARGETS = ("axolotl", "llamafactory", "torchtune")
DS_PATH = "ds_config.json"


def _hub_id(p: Plan) -> str | None:
    m = p.model
    return MODELS[m].hf_repo if isinstance(m, str) and m in MODELS else None


def _no_selective(p):
    if p.activation_checkpointing not in ("none", "full"):
        raise ExportError("activation_checkpointing", f"{p.activation_checkpointing} checkpointing has no "
                                                      "switch in this trainer (full or none)")
    if p.activation_offloading and p.activation_checkpointing != "full":
        raise ExportError("activation_offloading", "this trainer offloads only checkpointed activations")


def _no_single_cluster(p):
    if p.framework == "single" and p.gpus_per_node * p.nodes > 1:
        raise ExportError("framework", "single runs one process: set gpus_per_node and nodes to 1")
    if p.framework in ("ddp", "single") and (p.offload_optimizer != "none" or p.offload_params != "none"):
        raise ExportError("offload_optimizer", "offload needs DeepSpeed or FSDP")


def _fsdp_offload(p) -> bool:
    if p.offload_optimizer != p.offload_params and p.zero_stage == 3 or \
            (p.zero_stage == 2 and p.offload_params != "none"):
        raise ExportError("offload_optimizer", "FSDP's CPU offload moves parameters and the optimizer step together")
    if "nvme" in (p.offload_optimizer, p.offload_params):
        raise ExportError("offload_optimizer", "FSDP offloads to cpu only")
    if p.zero_stage not in (2, 3):
        raise ExportError("zero_stage", "FSDP shards at stage 2 (shard_grad_op) or 3 (full_shard)")
    return p.offload_optimizer == "cpu"


def _dtype(p) -> str:
    return {"bf16-mixed": "bf16", "bf16-pure": "bf16", "fp16-mixed": "fp16", "fp32": "fp32"}[p.precision]


# ------------------------------------------------------------------ axolotl


def axolotl_config(plan) -> dict:
    """The axolotl keys for the plan (see zerocalc/imports/axolotl.py for their meaning)."""
    p = as_plan(plan)
    _no_selective(p)
    _no_single_cluster(p)
    if p.optimizer_in_backward:
        raise ExportError("optimizer_in_backward", "axolotl (HF Trainer) has no optimizer-in-backward mode")
    out = {}
    hub = _hub_id(p)
    if hub:
        out["base_model"] = hub
    dtype, method, fw = _dtype(p), p.method, p.framework
    # fp32 masters under DeepSpeed, with adapters, and under accelerate's FSDP, which upcasts the trainable
    # weights when mixed precision is on (imports/builder.py fsdp_upcast_precision)
    pure_ok = method == "full" and fw not in ("deepspeed", "fsdp")
    if p.precision == "bf16-pure" and not pure_ok:
        raise ExportError("precision", "axolotl keeps fp32 masters here (DeepSpeed / accelerate's FSDP / adapters): "
                                       "bf16-mixed")
    if p.precision == "bf16-mixed" and pure_ok and dtype == "bf16":
        raise ExportError("precision", "axolotl loads a full fine-tune in bf16 without fp32 masters: bf16-pure")
    if method != "full":
        q = p.quantization
        if method == "qlora" and q.type == "int8":
            out["adapter"], out["load_in_8bit"] = "lora", True
        elif method == "qlora":
            if q.compute_dtype != dtype:
                raise ExportError("quantization.compute_dtype", f"axolotl computes in the load dtype ({dtype})")
            out["adapter"], out["load_in_4bit"] = "qlora", True
            if q.type != "nf4" or not q.double_quant:
                out["bnb_config_kwargs"] = {"bnb_4bit_quant_type": q.type,
                                            "bnb_4bit_use_double_quant": q.double_quant}
        else:
            out["adapter"] = "lora"
        lo = p.lora
        out.update({"lora_r": lo.rank, "lora_alpha": lo.alpha, "lora_dropout": lo.dropout,
                    "lora_target_modules": list(lo.targets)})
    out.update({"sequence_len": p.seq_len, "micro_batch_size": p.micro_batch_size,
                "gradient_accumulation_steps": p.gradient_accumulation_steps,
                "gradient_checkpointing": p.activation_checkpointing == "full"})
    if packing_value(p) is not None:
        out["sample_packing"] = packing_value(p)
    if p.activation_offloading:
        out["activation_offloading"] = True
    out["attn_implementation"] = HF_ATTN[p.attention]
    if p.loss == "chunked":
        out["plugins"] = ["axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"]
    out["optimizer"] = HF_OPTIM[p.optimizer]
    out["bf16"] = dtype == "bf16"
    out["fp16"] = dtype == "fp16"
    if fw == "deepspeed":
        out["deepspeed"] = DS_PATH
    elif fw == "fsdp":
        off = _fsdp_offload(p)
        out["fsdp"] = ["full_shard" if p.zero_stage == 3 else "shard_grad_op", "auto_wrap"]
        out["fsdp_config"] = {"fsdp_offload_params": off}
    return out


# ------------------------------------------------------------------ LLaMA-Factory

LF_ATTN = {"flash": "fa2", "sdpa": "sdpa", "eager": "disabled"}


def llamafactory_config(plan) -> dict:
    """The LLaMA-Factory training arguments for the plan (see zerocalc/imports/llamafactory.py)."""
    p = as_plan(plan)
    _no_selective(p)
    _no_single_cluster(p)
    if p.optimizer_in_backward:
        raise ExportError("optimizer_in_backward", "LLaMA-Factory has no optimizer-in-backward mode")
    if p.activation_offloading:
        raise ExportError("activation_offloading", "LLaMA-Factory has no activation offloading switch")
    if p.framework == "fsdp":
        raise ExportError("framework", "LLaMA-Factory runs FSDP from an accelerate config: use --to accelerate")
    out = {}
    hub = _hub_id(p)
    if hub:
        out["model_name_or_path"] = hub
    out["stage"] = "sft"
    dtype, method = _dtype(p), p.method
    if method == "full":
        out["finetuning_type"] = "full"
    else:
        out["finetuning_type"] = "lora"
        if method == "qlora":
            q = p.quantization
            if q.type == "int8":
                out["quantization_bit"] = 8
            else:
                if q.compute_dtype != dtype:
                    raise ExportError("quantization.compute_dtype", f"LLaMA-Factory computes in {dtype}")
                out.update({"quantization_bit": 4, "quantization_type": q.type,
                            "double_quantization": q.double_quant})
        lo = p.lora
        out.update({"lora_rank": lo.rank, "lora_alpha": lo.alpha, "lora_dropout": lo.dropout,
                    "lora_target": ",".join(lo.targets)})
    out.update({"cutoff_len": p.seq_len, "per_device_train_batch_size": p.micro_batch_size,
                "gradient_accumulation_steps": p.gradient_accumulation_steps,
                "disable_gradient_checkpointing": p.activation_checkpointing == "none",
                "flash_attn": LF_ATTN[p.attention], "enable_liger_kernel": p.loss == "chunked",
                "optim": HF_OPTIM[p.optimizer]})
    if packing_value(p) is not None:
        out["packing"] = packing_value(p)
    out.update(hf_allocator_kwargs(p))
    prec = p.precision
    if prec == "bf16-pure":
        if p.framework == "deepspeed":
            raise ExportError("precision", "pure bf16 under DeepSpeed comes from the ds_config's bf16 master keys")
        out["pure_bf16"] = True
    elif prec == "bf16-mixed":
        out["bf16"] = True
    elif prec == "fp16-mixed":
        out["fp16"] = True
    if p.framework == "deepspeed":
        out["deepspeed"] = DS_PATH
    return out


# ------------------------------------------------------------------ torchtune

TT_OPTIM = {"adamw": "torch.optim.AdamW", "sgd": "torch.optim.SGD", "paged-adamw-32bit": "bitsandbytes.optim.PagedAdamW",
            "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
            "lion": "bitsandbytes.optim.Lion"}
TT_ATTN = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
TT_MLP = ("gate_proj", "up_proj", "down_proj")


def torchtune_config(plan) -> dict:
    """The torchtune recipe keys for the plan (see zerocalc/imports/torchtune.py); ``_recipe`` holds the
    ``tune run`` command (written as the header comment)."""
    from zerocalc.imports.torchtune import BUILDERS
    p = as_plan(plan)
    _no_selective(p)
    if p.attention != "sdpa":
        raise ExportError("attention", "torchtune's attention is torch SDPA: attention sdpa")
    builder = next((k for k, v in BUILDERS.items() if v == p.model), None)
    if builder is None:
        raise ExportError("model", f"no torchtune builder for {p.model!r}")
    method = p.method
    prefix = {"full": "", "lora": "lora_", "qlora": "qlora_"}[method]
    family = {"llama3_1": "llama3_1", "llama3_2": "llama3_2", "llama2_": "llama2", "qwen2_5": "qwen2_5",
              "gemma2": "gemma2", "phi3": "phi3", "phi4": "phi4"}
    fam = next(v for k, v in family.items() if builder.startswith(k))
    model = {"_component_": f"torchtune.models.{fam}.{prefix}{builder}"}
    if p.precision not in ("bf16-pure", "fp32"):
        raise ExportError("precision", "torchtune trains in bf16 (bf16-pure) or fp32")
    dtype = "bf16" if p.precision == "bf16-pure" else "fp32"
    if method != "full":
        t = list(p.lora.targets)
        mlp = [x for x in t if x in TT_MLP]
        if mlp and len(mlp) != 3:
            raise ExportError("lora.targets", "torchtune puts LoRA on all of w1, w2, w3 or none (apply_lora_to_mlp)")
        other = [x for x in t if x not in TT_ATTN and x not in TT_MLP and x != "lm_head"]
        if other:
            raise ExportError("lora.targets", f"torchtune has no LoRA on {other[0]!r}")
        attn = [TT_ATTN[x] for x in t if x in TT_ATTN]
        if not attn:
            raise ExportError("lora.targets", "torchtune needs at least one attention projection")
        # the importer lists attention modules, then w1/w2/w3, then the output: keep that order
        if t != [x for x in t if x in TT_ATTN] + list(TT_MLP if mlp else ()) + (["lm_head"] if "lm_head" in t else []):
            raise ExportError("lora.targets", "order as torchtune builds them: attention, gate/up/down, lm_head")
        model.update({"lora_attn_modules": attn, "apply_lora_to_mlp": bool(mlp),
                      "apply_lora_to_output": "lm_head" in t, "lora_rank": p.lora.rank,
                      "lora_alpha": p.lora.alpha, "lora_dropout": p.lora.dropout})
        if method == "qlora":
            q = p.quantization
            if q.type != "nf4" or not q.double_quant or q.compute_dtype != dtype:
                raise ExportError("quantization.type", f"torchtune QLoRA is NF4 with double quantization in {dtype}")
    out = {"model": model, "tokenizer": {"max_seq_len": p.seq_len}, "batch_size": p.micro_batch_size,
           "gradient_accumulation_steps": p.gradient_accumulation_steps}
    if p.optimizer not in TT_OPTIM:
        raise ExportError("optimizer", f"no torchtune optimizer component for {p.optimizer}")
    out["optimizer"] = {"_component_": TT_OPTIM[p.optimizer]}
    out["optimizer_in_bwd"] = p.optimizer_in_backward
    out["loss"] = {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss" if p.loss == "chunked"
                   else "torch.nn.CrossEntropyLoss"}
    out["dtype"] = dtype
    out["enable_activation_checkpointing"] = p.activation_checkpointing == "full"
    out["enable_activation_offloading"] = p.activation_offloading
    kind = "full_finetune" if method == "full" else "lora_finetune"
    fw = p.framework
    if fw == "single":
        if p.gpus_per_node * p.nodes != 1:
            raise ExportError("gpus_per_node", "a single-device recipe runs on one GPU")
        recipe = f"tune run {kind}_single_device"
    elif fw == "fsdp":
        off = _fsdp_offload(p)
        out["fsdp_reshard_after_forward"] = p.zero_stage == 3
        out["fsdp_cpu_offload"] = off
        if p.stack.fsdp_embedding_units:
            out["custom_sharded_layers"] = ["tok_embeddings", "output"]
        nodes = f"--nnodes {p.nodes} " if p.nodes > 1 else ""
        recipe = f"tune run {nodes}--nproc_per_node {p.gpus_per_node} {kind}_distributed"
    else:
        raise ExportError("framework", "torchtune runs one device or FSDP2: framework single or fsdp")
    out["_recipe"] = recipe
    return out


def trainer_yaml(plan, target: str) -> str:
    """The YAML text for ``zerocalc export --to axolotl|llamafactory|torchtune``."""
    if target == "axolotl":
        cfg, head = axolotl_config(plan), "# axolotl train config.yaml   (zerocalc export --to axolotl; memory keys only)"
    elif target == "llamafactory":
        cfg, head = llamafactory_config(plan), ("# llamafactory-cli train config.yaml   (zerocalc export --to "
                                                "llamafactory; memory keys only, add model/dataset keys)")
    elif target == "torchtune":
        cfg = torchtune_config(plan)
        head = f"# {cfg.pop('_recipe')} --config config.yaml   (zerocalc export --to torchtune; memory keys only)"
    else:
        raise ExportError("to", f"unknown target {target!r}; one of {', '.join(TRAINER_TARGETS)}")
    if cfg.get("deepspeed"):
        head += f"\n# write {DS_PATH} with: zerocalc export --to ds"
    return head + "\n" + to_yaml(cfg)
