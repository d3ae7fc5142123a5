"""Trainer configs in (plan-v1 Extension 4) on the trainers' own example configs.

Every expectation below was written by reading the file (tests/data/configs/<trainer>/, sources in each
SOURCES.md), with the trainer's documented default where the file is silent (noted inline); none is
copied from the importer's output. Base plan: the default plan (4 GPUs, ZeRO-2, llama-3.1-8b)."""
import json
import os
import subprocess
import sys

import pytest

from zerocalc.imports import ConfigImportError, detect, import_config, parse_text

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "configs")
ALL8 = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # Llama/Qwen/Gemma linears


def load(trainer, name, plan=None, loader=None):
    with open(os.path.join(DATA, trainer, name), encoding="utf-8") as f:
        return import_config(f.read(), plan or {}, loader=loader)


def check(res, expected):
    for k, v in expected.items():
        cur = res.plan
        for part in k.split("."):
            cur = cur[part]
        assert cur == v, f"{k}: {cur!r} != {v!r}"


def unmapped(res):
    return {n["key"] for n in res.not_represented}


# ---------------------------------------------------------------- axolotl (bf16: auto read as bf16)
AXOLOTL = {
    # adapter lora, lora_r 16 / alpha 32 / dropout 0.05, explicit 7 targets, sequence_len 2048, micro 2, GA 2,
    # adamw_8bit, gradient_checkpointing, flash_attention_2; no deepspeed/fsdp on 4 GPUs -> DDP
    "llama-3__lora-1b.yml": {"model": "llama-3.2-1b", "method": "lora", "lora.rank": 16, "lora.alpha": 32,
                             "lora.dropout": 0.05, "seq_len": 2048, "micro_batch_size": 2,
                             "gradient_accumulation_steps": 2, "optimizer": "adamw-8bit",
                             "activation_checkpointing": "full", "attention": "flash", "framework": "ddp",
                             "precision": "bf16-mixed",
                             "lora.targets": ["gate_proj", "down_proj", "up_proj", "q_proj", "v_proj", "k_proj",
                                              "o_proj"]},
    # qlora + load_in_4bit: axolotl's nf4 double-quant, compute dtype bf16
    "llama-3__qlora-1b.yml": {"model": "llama-3.2-1b", "method": "qlora", "quantization.type": "nf4",
                              "quantization.double_quant": True, "quantization.compute_dtype": "bf16",
                              "lora.rank": 32, "lora.alpha": 16, "seq_len": 2048, "micro_batch_size": 2,
                              "gradient_accumulation_steps": 4, "optimizer": "adamw-8bit"},
    # full fine-tune loaded in bf16 without DeepSpeed: no fp32 master -> bf16-pure; paged_adamw_8bit
    "llama-3__fft-8b.yaml": {"model": "llama-3.1-8b", "method": "full", "precision": "bf16-pure",
                             "seq_len": 8192, "micro_batch_size": 1, "gradient_accumulation_steps": 8,
                             "optimizer": "paged-adamw-8bit", "framework": "ddp"},
    # liger fused linear CE -> chunked; fsdp full_shard + fsdp_offload_params -> FSDP stage 3, CPU offload.
    # bf16-mixed, not bf16-pure: under FSDP1 accelerate upcasts the bf16-loaded trainable FlatParameters to fp32
    # when mixed precision is on (accelerate src/accelerate/accelerator.py Accelerator.prepare_model, FSDP branch:
    # `if self.mixed_precision != "no": ... param.data = param.data.to(torch.float32)`, commit 16cb6eb8)
    "llama-3__fft-8b-liger-fsdp.yaml": {"model": "llama-3.1-8b", "loss": "chunked", "framework": "fsdp",
                                        "zero_stage": 3, "offload_params": "cpu", "offload_optimizer": "cpu",
                                        "micro_batch_size": 2, "gradient_accumulation_steps": 4,
                                        "precision": "bf16-mixed", "optimizer": "adamw"},
    # lora + load_in_8bit: 8-bit base (method qlora, int8); lora_target_linear -> all linear layers of the
    # plan's model (Meta-Llama-3-8B is not a preset: the plan keeps llama-3.1-8b, same linears)
    "llama-3__lora-8b.yml": {"model": "llama-3.1-8b", "method": "qlora", "quantization.type": "int8",
                             "lora.targets": ALL8, "lora.rank": 32, "lora.alpha": 16},
    "llama-3__instruct-lora-8b.yml": {"method": "qlora", "quantization.type": "int8", "lora.targets": ALL8},
    "llama-2__lora.yml": {"model": "llama-2-7b", "method": "qlora", "quantization.type": "int8",
                          "lora.targets": ALL8, "seq_len": 4096, "optimizer": "adamw-8bit"},
    "llama-2__qlora.yml": {"model": "llama-2-7b", "method": "qlora", "quantization.type": "nf4",
                           "optimizer": "paged-adamw-32bit", "lora.targets": ALL8},
    # sequence_len 512, fsdp full_shard with fsdp_offload_params true
    "llama-3__qlora-fsdp-70b.yaml": {"method": "qlora", "seq_len": 512, "framework": "fsdp", "zero_stage": 3,
                                     "offload_params": "cpu", "lora.rank": 8, "micro_batch_size": 1},
    # lora_target_modules (7, in the file's order) plus lora_target_linear (adds nothing new)
    "mistral__qlora.yml": {"method": "qlora", "seq_len": 8192,
                           "lora.targets": ["gate_proj", "down_proj", "up_proj", "q_proj", "v_proj", "k_proj", "o_proj"]},
    "gemma3__gemma-3-1b-qlora.yml": {"model": "gemma-3-1b", "method": "qlora", "lora.rank": 32, "lora.dropout": 0,
                                     "micro_batch_size": 1, "gradient_accumulation_steps": 4,
                                     "optimizer": "adamw-8bit", "attention": "flash", "lora.targets": ALL8},
    # gradient_checkpointing: offload -> checkpointing + offloaded activations; CutCrossEntropyPlugin -> chunked;
    # no lora_target_modules and no lora_target_linear (layer targets given as a regex-free list? no): see file
    "qwen3__32b-qlora.yaml": {"model": "qwen3-32b", "method": "qlora", "activation_checkpointing": "full",
                              "activation_offloading": True, "loss": "chunked", "seq_len": 2048, "lora.rank": 16},
    "qwen3__8b-lora-fused-attn.yaml": {"model": "qwen3-8b", "method": "lora", "attention": "flash",
                                       "lora.rank": 32, "lora.alpha": 64, "lora.dropout": 0.0, "lora.targets": ALL8},
    # phi3: lora_target_linear -> Phi-3's fused linears
    "phi__phi3-ft.yml": {"model": "phi-3-mini-4k", "method": "lora", "lora.rank": 64,
                         "lora.targets": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]},
    # deepspeed_configs/zero3_bf16.json as axolotl ships it: stage 3, bf16 enabled; CCE plugin; offloaded acts
    "gpt-oss__gpt-oss-20b-fft-deepspeed-zero3.yaml": {"model": "gpt-oss-20b", "framework": "deepspeed",
                                                      "zero_stage": 3, "precision": "bf16-mixed", "loss": "chunked",
                                                      "activation_offloading": True, "micro_batch_size": 1,
                                                      "deepspeed.stage3_max_live_parameters": 0},
    # fsdp_config version 2, reshard_after_forward true, offload_params false; FSDP2 upcasts the trainable
    # params to fp32 too (accelerate src/accelerate/utils/fsdp_utils.py fsdp2_prepare_model: "Upcast to fp32
    # master weights; MixedPrecisionPolicy.param_dtype handles compute cast") -> bf16-mixed
    "gpt-oss__gpt-oss-20b-fft-fsdp2.yaml": {"model": "gpt-oss-20b", "framework": "fsdp", "zero_stage": 3,
                                            "offload_params": "none", "precision": "bf16-mixed", "attention": "flash"},
    # zero3_bf16_cpuoffload_params.json: stage 3, parameters offloaded to CPU, optimizer on the GPU
    "mistral__bigstral__bigstral-ds-zero3.yaml": {"framework": "deepspeed", "zero_stage": 3, "offload_params": "cpu",
                                                  "offload_optimizer": "none", "seq_len": 2048},
}
AXOLOTL_UNMAPPED = {
    "llama-3__lora-1b.yml": {"datasets", "learning_rate", "wandb_project", "special_tokens"},
    "mistral__qlora.yml": {"base_model"},  # Mistral-7B-v0.1 is not a preset (v0.3 is)
    "llama-3__lora-8b.yml": {"base_model"},  # Llama 3 (not 3.1) 8B: not a preset
    "gpt-oss__gpt-oss-20b-fft-fsdp2.yaml": {"optimizer"},  # torchao adamw_torch_8bit
}


@pytest.mark.parametrize("name", sorted(AXOLOTL))
def test_axolotl_examples(name):
    res = load("axolotl", name)
    assert res.format == "axolotl"
    check(res, AXOLOTL[name])
    assert AXOLOTL_UNMAPPED.get(name, set()) <= unmapped(res)


# ---------------------------------------------------------------- LLaMA-Factory
# defaults: lora_alpha = 2 x rank, lora_dropout 0, lora_target all, gradient checkpointing on, flash_attn auto (sdpa)
LF_LORA = {"method": "lora", "lora.rank": 8, "lora.alpha": 16, "lora.dropout": 0.0, "lora.targets": ALL8,
           "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 8, "precision": "bf16-mixed",
           "activation_checkpointing": "full", "attention": "sdpa", "framework": "ddp"}
LLAMA_FACTORY = {
    "train_lora__qwen3_lora_sft.yaml": LF_LORA,
    "train_lora__qwen3_lora_dpo.yaml": LF_LORA,
    "train_lora__qwen3_lora_pretrain.yaml": LF_LORA,
    "train_lora__qwen3_lora_reward.yaml": LF_LORA,
    "extras__loraplus__llama3_lora_sft.yaml": LF_LORA,
    "extras__pissa__llama3_lora_sft.yaml": LF_LORA,
    # a pre-quantized GPTQ checkpoint (TechxGenus/Meta-Llama-3-8B-Instruct-GPTQ, 4-bit) with LoRA: QLoRA on GPTQ
    # (plan-v1 Extension 1 quantization type gptq), not LoRA over a 16-bit base
    "train_qlora__llama3_lora_sft_gptq.yaml": {**LF_LORA, "method": "qlora", "quantization.type": "gptq",
                                              "quantization.bits": 4},
    "train_qlora__llama3_lora_sft_awq.yaml": LF_LORA,
    # quantization_bit 4 (bnb): nf4 with double quantization
    "train_qlora__qwen3_lora_sft_otfq.yaml": {**LF_LORA, "method": "qlora", "quantization.type": "nf4",
                                             "quantization.double_quant": True},
    "extras__fsdp_qlora__llama3_lora_sft.yaml": {**LF_LORA, "method": "qlora", "quantization.type": "nf4"},
    # examples/deepspeed/ds_z3_config.json as LLaMA-Factory ships it; GA 2
    "train_lora__qwen3_lora_sft_ds3.yaml": {**LF_LORA, "framework": "deepspeed", "zero_stage": 3,
                                           "gradient_accumulation_steps": 2, "deepspeed.overlap_comm": False},
    "train_full__qwen3_full_sft.yaml": {"method": "full", "framework": "deepspeed", "zero_stage": 3,
                                       "gradient_accumulation_steps": 2, "precision": "bf16-mixed"},
    # pure_bf16, GA 1
    "extras__galore__llama3_full_sft.yaml": {"method": "full", "precision": "bf16-pure",
                                            "gradient_accumulation_steps": 1, "seq_len": 2048},
    # neither bf16 nor fp16: trainable weights in fp32
    "extras__badam__llama3_full_sft.yaml": {"method": "full", "precision": "fp32", "gradient_accumulation_steps": 8},
    # ds_z3_fp8_config.json is not bundled: DeepSpeed named, its settings listed as not read
    "extras__fp8__llama3_fp8_deepspeed_sft.yaml": {"framework": "deepspeed", "seq_len": 1024},
}
LF_UNMAPPED = {
    "train_lora__qwen3_lora_dpo.yaml": {"pref_beta"},          # stage dpo -> post_training (test_post_training)
    "extras__galore__llama3_full_sft.yaml": {"use_galore"},
    "extras__badam__llama3_full_sft.yaml": {"use_badam"},
    "extras__fp8__llama3_fp8_deepspeed_sft.yaml": {"deepspeed"},
    "train_qlora__llama3_lora_sft_gptq.yaml": {"model_name_or_path"},
    "train_lora__qwen3_lora_sft.yaml": {"model_name_or_path", "dataset", "learning_rate"},  # Qwen3-4B-Instruct-2507
}


@pytest.mark.parametrize("name", sorted(LLAMA_FACTORY))
def test_llamafactory_examples(name):
    res = load("llamafactory", name)
    assert res.format == "llamafactory"
    check(res, LLAMA_FACTORY[name])
    assert LF_UNMAPPED.get(name, set()) <= unmapped(res)


# ---------------------------------------------------------------- torchtune 0.6.1 recipe configs
# every file: dtype bf16 (pure), CEWithChunkedOutputLoss, torch SDPA; lora_attn_modules + apply_lora_to_mlp
QVO_MLP = ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TT_COMMON = {"precision": "bf16-pure", "loss": "chunked", "attention": "sdpa"}
TORCHTUNE = {
    "llama3_1__8B_lora.yaml": {"model": "llama-3.1-8b", "method": "lora", "framework": "fsdp", "zero_stage": 3,
                               "lora.rank": 8, "lora.alpha": 16, "lora.dropout": 0.0, "lora.targets": QVO_MLP,
                               "micro_batch_size": 2, "gradient_accumulation_steps": 8,
                               "activation_checkpointing": "none", "optimizer": "adamw"},
    # custom_sharded_layers: ['tok_embeddings', 'output']: FSDP2 units of their own
    "llama3_1__8B_full.yaml": {"model": "llama-3.1-8b", "method": "full", "framework": "fsdp",
                               "activation_checkpointing": "full", "gradient_accumulation_steps": 1,
                               "stack.fsdp_embedding_units": True},
    "llama3_1__8B_qlora_single_device.yaml": {"method": "qlora", "framework": "single", "gpus_per_node": 1,
                                              "quantization.type": "nf4", "activation_checkpointing": "full"},
    "llama3_1__70B_lora.yaml": {"model": "llama-3.1-70b", "method": "lora", "framework": "fsdp", "lora.rank": 16},
    "llama3_1__405B_qlora.yaml": {"model": "llama-3.1-405b", "method": "qlora", "framework": "fsdp",
                                  "micro_batch_size": 1},
    "llama3_2__1B_full_single_device.yaml": {"model": "llama-3.2-1b", "framework": "single", "micro_batch_size": 4,
                                             "optimizer": "paged-adamw-8bit", "optimizer_in_backward": True,
                                             "gradient_accumulation_steps": 1},
    "llama3_2__1B_lora_single_device.yaml": {"model": "llama-3.2-1b", "method": "lora", "lora.rank": 64,
                                             "lora.alpha": 128, "micro_batch_size": 4},
    "llama3_2__3B_qlora_single_device.yaml": {"model": "llama-3.2-3b", "method": "qlora", "lora.rank": 64},
    "qwen2_5__7B_lora.yaml": {"model": "qwen2.5-7b", "method": "lora", "framework": "fsdp"},
    "qwen2_5__0.5B_full_single_device.yaml": {"model": "qwen2.5-0.5b", "framework": "single"},
    "gemma2__9B_lora.yaml": {"model": "gemma-2-9b", "method": "lora", "micro_batch_size": 4},
    "phi3__mini_full.yaml": {"model": "phi-3-mini-4k", "method": "full", "framework": "fsdp"},
    "llama2__7B_qlora_single_device.yaml": {"model": "llama-2-7b", "method": "qlora", "framework": "single"},
    # low-memory full: PagedAdamW, optimizer_in_bwd, activation checkpointing + offloading
    "mistral__7B_full_low_memory.yaml": {"method": "full", "optimizer": "paged-adamw-32bit",
                                         "optimizer_in_backward": True, "activation_offloading": True,
                                         "activation_checkpointing": "full", "framework": "single"},
}
TT_UNMAPPED = {
    "mistral__7B_full_low_memory.yaml": {"model._component_"},  # torchtune's mistral_7b is v0.1
    "llama3_1__8B_lora.yaml": {"tokenizer.max_seq_len", "optimizer.lr", "checkpointer"},
}


@pytest.mark.parametrize("name", sorted(TORCHTUNE))
def test_torchtune_examples(name):
    res = load("torchtune", name)
    assert res.format == "torchtune"
    check(res, {**TT_COMMON, **TORCHTUNE[name]})
    assert TT_UNMAPPED.get(name, set()) <= unmapped(res)


# ---------------------------------------------------------------- accelerate
ACCELERATE = {
    "config_yaml_templates__multi_gpu.yaml": {"framework": "ddp", "gpus_per_node": 2, "precision": "bf16-mixed"},
    "config_yaml_templates__multi_node.yaml": {"framework": "ddp", "gpus_per_node": 4, "nodes": 2},
    "config_yaml_templates__single_accelerator.yaml": {"framework": "single", "gpus_per_node": 1,
                                                        "precision": "bf16-mixed"},
    "config_yaml_templates__fsdp.yaml": {"framework": "fsdp", "zero_stage": 3, "gpus_per_node": 2,
                                         "offload_params": "none", "precision": "bf16-mixed"},
    "config_yaml_templates__deepspeed.yaml": {"framework": "deepspeed", "gpus_per_node": 2},
    "config_yaml_templates__fp8.yaml": {"framework": "single"},
    "llamafactory__fsdp_config.yaml": {"framework": "fsdp", "zero_stage": 3, "gpus_per_node": 2},
    "llamafactory__fsdp2_config.yaml": {"framework": "fsdp", "zero_stage": 3, "gpus_per_node": 2},
    "llamafactory__fsdp_config_offload.yaml": {"framework": "fsdp", "offload_params": "cpu",
                                               "offload_optimizer": "cpu"},
    "llamafactory__fsdp_config_multiple_nodes.yaml": {"gpus_per_node": 8, "nodes": 2, "framework": "fsdp"},
    "slurm__fsdp_config.yaml": {"framework": "fsdp", "zero_stage": 3},
    "tests__test_configs__latest.yaml": {"framework": "single", "gpus_per_node": 1, "precision": "fp32"},
    "tests__test_configs__0_12_0.yaml": {"framework": "single", "gpus_per_node": 1, "precision": "fp32"},
    "tests__test_configs__latest_fsdp.yaml": {"framework": "fsdp", "gpus_per_node": 1, "precision": "fp32"},
}
ACCELERATE.update({
    # TRL's accelerate configs: 8 processes on 1 machine, bf16
    "trl__deepspeed_zero1.yaml": {"framework": "deepspeed", "zero_stage": 1, "gpus_per_node": 8,
                                  "precision": "bf16-mixed", "deepspeed.zero_init": False},
    "trl__deepspeed_zero2.yaml": {"framework": "deepspeed", "zero_stage": 2, "offload_optimizer": "none",
                                  "deepspeed.zero_init": False},
    "trl__deepspeed_zero3.yaml": {"framework": "deepspeed", "zero_stage": 3, "offload_params": "none",
                                  "deepspeed.zero_init": True},
    # fsdp_reshard_after_forward FULL_SHARD (FSDP1 spelling) / true (FSDP2): fully sharded
    "trl__fsdp1.yaml": {"framework": "fsdp", "zero_stage": 3, "activation_checkpointing": "none"},
    "trl__fsdp2.yaml": {"framework": "fsdp", "zero_stage": 3, "offload_params": "none"},
    "trl__multi_gpu.yaml": {"framework": "ddp", "gpus_per_node": 8, "nodes": 1},
})
ACC_UNMAPPED = {
    "config_yaml_templates__deepspeed.yaml": {"deepspeed_config.deepspeed_config_file"},  # the JSON is not beside it
    "config_yaml_templates__fp8.yaml": {"mixed_precision"},
}


@pytest.mark.parametrize("name", sorted(ACCELERATE))
def test_accelerate_examples(name):
    res = load("accelerate", name)
    assert res.format == "accelerate"
    check(res, ACCELERATE[name])
    assert ACC_UNMAPPED.get(name, set()) <= unmapped(res)


# ---------------------------------------------------------------- TrainingArguments / TRL JSON
HF = {
    # a GRPOConfig dump: fp16, paged_adamw_8bit, micro 6, GA 2, no deepspeed/fsdp
    "grpo-accounting-finetune__model_file_training_args.json": ("trl", {
        "precision": "fp16-mixed", "optimizer": "paged-adamw-8bit", "micro_batch_size": 6,
        "gradient_accumulation_steps": 2, "framework": "ddp", "activation_checkpointing": "none"}),
    # TRL CLI config: model Qwen2.5-0.5B; SFTConfig defaults max_length 1024, gradient checkpointing, bf16;
    # TrainingArguments' per_device_train_batch_size 8
    "trl__cli_configs__example_config.yaml": ("trl", {
        "model": "qwen2.5-0.5b", "seq_len": 1024, "activation_checkpointing": "full", "precision": "bf16-mixed",
        "micro_batch_size": 8, "gradient_accumulation_steps": 1, "framework": "ddp"}),
    "DRMOE__training_args.json": ("hf-training-args", {"precision": "fp16-mixed", "micro_batch_size": 8,
                                                       "gradient_accumulation_steps": 1, "framework": "deepspeed"}),
    "cbdetect__training_args.json": ("hf-training-args", {"precision": "fp16-mixed", "micro_batch_size": 8}),
    # optim adamw_torch, no precision flag -> fp32
    "torgo_inference_on_cluster__training_args.json": ("hf-training-args", {
        "precision": "fp32", "micro_batch_size": 4, "gradient_accumulation_steps": 2, "optimizer": "adamw"}),
}
for _f in sorted(os.listdir(os.path.join(DATA, "hf"))):
    if _f.startswith("transformers5__") and _f.endswith(".json"):
        with open(os.path.join(DATA, "hf", _f.replace(".json", ".expected"))) as _e:
            HF[_f] = tuple(json.load(_e))


@pytest.mark.parametrize("name", sorted(HF))
def test_hf_training_args(name):
    fmt, expected = HF[name]
    res = load("hf", name)
    assert res.format == fmt
    check(res, expected)


def test_hf_unmapped_lists_every_other_key():
    res = load("hf", "DRMOE__training_args.json")
    # src/ds.config is not beside the file: DeepSpeed is named, its settings cannot be read
    assert {"deepspeed", "learning_rate", "lora_rank", "expert_num", "generation_config"} <= unmapped(res)


def test_not_a_trainer_config():
    with pytest.raises(ConfigImportError, match="not a format zerocalc reads"):
        load("hf", "AgriFinConnectRwanda__AI_Chatbot_model_training_args.json")


# ---------------------------------------------------------------- DeepSpeed JSON beside the file


def test_axolotl_reads_the_deepspeed_file_given_beside_it():
    ds = {"zero_optimization": {"stage": 1}, "bf16": {"enabled": True}, "train_micro_batch_size_per_gpu": "auto",
          "gradient_accumulation_steps": "auto"}
    seen = []

    def loader(path):
        seen.append(path)
        return json.dumps(ds)
    res = load("axolotl", "gpt-oss__gpt-oss-20b-fft-deepspeed-zero3.yaml", loader=loader)
    assert seen == ["deepspeed_configs/zero3_bf16.json"]
    check(res, {"framework": "deepspeed", "zero_stage": 1, "micro_batch_size": 1})  # micro 1 from the YAML


def test_bundled_deepspeed_names_without_a_loader():
    text = "base_model: Qwen/Qwen3-8B\nmicro_batch_size: 1\ndeepspeed: deepspeed_configs/zero2.json\n"
    res = import_config(text, {})
    # axolotl's zero2.json: stage 2 with offload_optimizer cpu
    check(res, {"framework": "deepspeed", "zero_stage": 2, "offload_optimizer": "cpu", "model": "qwen3-8b"})


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("text,needle", [
    ("base_model: x\nlora_r: [1\n", "not valid YAML"),
    ('{"per_device_train_batch_size": 2,', "not valid JSON"),
    ("- a\n- b\n", "mapping"),
    ("base_model: meta-llama/Llama-3.2-1B\nmicro_batch_size: two\n", "micro_batch_size"),
    ("base_model: meta-llama/Llama-3.2-1B\nadapter: lora\nlora_r: 0\n", "lora_r"),
    ("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 7\n", "deepspeed_config.zero_stage"),
    ("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n  lora_rank: -1\n", "model.lora_rank"),
    ("", "empty"),
    ("x" * (200 * 1024 + 1), "200 KB"),
])
def test_bad_input_one_line(text, needle):
    with pytest.raises(ConfigImportError) as e:
        import_config(text, {})
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_detect_needs_no_yaml_for_json():
    assert detect(parse_text('{"zero_optimization": {"stage": 3}}')) == "ds_config"


def test_plan_keys_the_file_does_not_set_are_kept():
    res = import_config("distributed_type: MULTI_GPU\nnum_processes: 8\n", {"model": "qwen3-8b", "seq_len": 1234})
    check(res, {"model": "qwen3-8b", "seq_len": 1234, "gpus_per_node": 8, "framework": "ddp"})


# ---------------------------------------------------------------- CLI


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.path.join(HERE, "..", "py")}
    return subprocess.run([sys.executable, "-m", "zerocalc", *args], capture_output=True, text=True, env=env)


def test_cli_import_config(tmp_path):
    r = _cli("import", "--config", os.path.join(DATA, "torchtune", "llama3_2__1B_lora_single_device.yaml"))
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["model"] == "llama-3.2-1b" and plan["method"] == "lora" and plan["gpus_per_node"] == 1
    assert "not in the plan: optimizer.lr (no memory effect)" in r.stderr


def test_cli_import_reads_deepspeed_beside(tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True},
                                                  "train_micro_batch_size_per_gpu": "auto"}))
    (tmp_path / "a.yml").write_text("base_model: Qwen/Qwen3-8B\nmicro_batch_size: 3\ndeepspeed: ds.json\n")
    r = _cli("import", "--config", str(tmp_path / "a.yml"))
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert (plan["zero_stage"], plan["micro_batch_size"], plan["model"]) == (3, 3, "qwen3-8b")


def test_cli_bad_file_exit_2(tmp_path):
    (tmp_path / "bad.yaml").write_text("base_model: x\n  lora_r: : 3\n")
    r = _cli("import", "--config", str(tmp_path / "bad.yaml"))
    assert r.returncode == 2 and r.stderr.startswith("zerocalc: ") and "bad.yaml" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_cli_ds_still_works():
    r = _cli("import", "--ds", os.path.join(DATA, "llamafactory", "deepspeed", "ds_z3_config.json"))
    assert r.returncode == 0 and json.loads(r.stdout)["zero_stage"] == 3


def test_transformers5_activation_checkpointing_offload():
    # transformers 5 TrainingArguments: activation_checkpointing + activation_checkpointing_kwargs {"offload": true}
    text = json.dumps({"output_dir": "o", "per_device_train_batch_size": 2, "activation_checkpointing": True,
                       "activation_checkpointing_kwargs": {"offload": True}, "gradient_checkpointing": True})
    check(import_config(text, {}), {"activation_checkpointing": "full", "activation_offloading": True,
                                    "micro_batch_size": 2})
    bad = json.dumps({"output_dir": "o", "activation_checkpointing": True, "gradient_checkpointing": False})
    with pytest.raises(ConfigImportError, match="gradient_checkpointing"):
        import_config(bad, {})


# The software-stack keys (plan-v1 Extension 1) the files set, written from the files: the trainer each format
# runs under, axolotl's `fsdp_version: 2`, accelerate's `fsdp_config.fsdp_version: 2`, torchtune's
# `optimizer: {fused: True}` and `compile: False`.
STACK_FROM_FILES = [
    ("axolotl", "gpt-oss__gpt-oss-20b-fft-fsdp2.yaml", {"trainer": "hf-trainer", "fsdp_version": 2}),
    ("accelerate", "llamafactory__fsdp2_config.yaml", {"fsdp_version": 2}),
    ("torchtune", "llama3_1__8B_lora.yaml", {"trainer": "torchtune", "optimizer_impl": "fused", "compile": "none"}),
]


@pytest.mark.parametrize("trainer, name, stack", STACK_FROM_FILES)
def test_stack_keys_read_from_the_files(trainer, name, stack):
    text = open(os.path.join(DATA, trainer, name), encoding="utf-8").read()
    res = import_config(text, {"framework": "fsdp", "zero_stage": 3} if trainer == "accelerate" else None)
    for k, v in stack.items():
        assert res.plan["stack"][k] == v, k


# TRL <= 0.19 (max_seq_length; 0.20's SFTConfig has max_length only): SFTTrainer runs prepare_model_for_kbit_training
# on an unsharded 4-bit model; under bf16 it casts embeddings and lm_head back (peft_module_casting_to_bf16)
_TRL_OLD_QLORA = {"model_name_or_path": "meta-llama/Llama-3.2-1B", "use_peft": True, "load_in_4bit": True,
                  "max_seq_length": 2048, "per_device_train_batch_size": 1}


@pytest.mark.parametrize("extra, kbit", [
    ({"fp16": True}, True),                            # fp16 AMP: nothing casts back -> prepared state
    ({"bf16": True}, "trl-bf16"),                      # bf16: fp32 norms + bf16 embeddings / lm_head
    ({"fp16": True, "fsdp": "full_shard"}, "auto"),    # FSDP-QLoRA: Params4bit on meta/cpu, TRL skips
])
def test_old_trl_sft_qlora_sets_kbit_prepare(extra, kbit):
    res = import_config(json.dumps({**_TRL_OLD_QLORA, **extra}), {})
    assert res.format == "trl"
    assert res.plan.get("stack", {}).get("kbit_prepare", "auto") == kbit
    assert not any(w["id"] == "import-trl-kbit-bf16" for w in res.warnings)


def test_current_trl_sft_qlora_leaves_kbit_prepare_auto():
    cfg = {k: v for k, v in _TRL_OLD_QLORA.items() if k != "max_seq_length"}
    res = import_config(json.dumps({**cfg, "max_length": 2048, "fp16": True}), {})   # TRL >= 0.26: no prepare
    assert res.plan.get("stack", {}).get("kbit_prepare", "auto") == "auto"
