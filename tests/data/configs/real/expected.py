"""Expected plan keys for every file of the real-config corpus (tests/data/configs/real/, SOURCES.md).

Written by hand from reading each file and, where the file is silent, the trainer's own documented default
(noted inline with where it comes from); never copied from the importer's output. Base plan: the default plan
(llama-3.1-8b, 4 GPUs on 1 node, DeepSpeed ZeRO-2, bf16-mixed, full fine-tune, micro 2, seq 4096).
Each entry: (format, {dotted plan key: value}).
"""
ALL7 = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]   # all linears, plan order
QVO_MLP = ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]         # torchtune q,v,output_proj + mlp

EXPECTED = {
    # ---------------------------------------------------------------- axolotl
    # GPTQ base (gptq: true, TheBloke/Llama-2-7B-GPTQ: a 4-bit GPTQ checkpoint): LoRA on a GPTQ base = QLoRA on
    # GPTQ (plan-v1 Extension 1); float16: true -> fp16; 4 explicit targets; no deepspeed/fsdp on 4 GPUs -> DDP;
    # no attention flag -> transformers' sdpa
    "axolotl__llama-2__gptq-lora.yml": ("axolotl", {
        "model": "llama-2-7b", "method": "qlora", "quantization.type": "gptq", "quantization.bits": 4,
        "lora.rank": 8, "lora.alpha": 32, "lora.dropout": 0.05, "lora.targets": ["k_proj", "o_proj", "q_proj", "v_proj"],
        "seq_len": 4096, "micro_batch_size": 1, "gradient_accumulation_steps": 1, "optimizer": "adamw",
        "precision": "fp16-mixed", "activation_checkpointing": "full", "framework": "ddp", "attention": "sdpa"}),
    # qlora + load_in_4bit (nf4, double quant: axolotl loaders/model.py), lora_target_linear -> all linears,
    # fsdp [full_shard, auto_wrap] + fsdp_offload_params -> FSDP fully sharded, params and optimizer on the CPU
    "axolotl__llama-2__qlora-fsdp.yml": ("axolotl", {
        "model": "llama-2-7b", "method": "qlora", "quantization.type": "nf4", "quantization.double_quant": True,
        "lora.rank": 32, "lora.alpha": 16, "lora.dropout": 0.05, "lora.targets": ALL7, "seq_len": 512,
        "micro_batch_size": 4, "gradient_accumulation_steps": 4, "framework": "fsdp", "zero_stage": 3,
        "offload_params": "cpu", "offload_optimizer": "cpu", "attention": "flash", "precision": "bf16-mixed",
        "activation_checkpointing": "full"}),
    # full fine-tune, bf16: auto (bf16), FSDP1 (no fsdp_version: accelerate's FSDP1): accelerate upcasts the
    # trainable flat params to fp32 (Accelerator.prepare_model) -> bf16-mixed; DeepSeek-V2-Lite is no preset
    "axolotl__deepseek-v2__fft-fsdp-16b.yaml": ("axolotl", {
        "model": "llama-3.1-8b", "method": "full", "framework": "fsdp", "zero_stage": 3, "offload_params": "cpu",
        "offload_optimizer": "cpu", "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 8,
        "optimizer": "adamw", "precision": "bf16-mixed", "activation_checkpointing": "full", "attention": "flash",
        "stack.fsdp_version": 1}),
    # FSDP2 (fsdp_version 2), offload_params, full fine-tune bf16 (fsdp2_prepare_model upcasts trainable params
    # to fp32 when mixed precision is on -> bf16-mixed), CCE plugin -> chunked, checkpointing + offloading
    "axolotl__gpt-oss__gpt-oss-20b-fft-fsdp2-offload.yaml": ("axolotl", {
        "model": "gpt-oss-20b", "method": "full", "framework": "fsdp", "zero_stage": 3, "offload_params": "cpu",
        "offload_optimizer": "cpu", "stack.fsdp_version": 2, "seq_len": 4096, "micro_batch_size": 1,
        "gradient_accumulation_steps": 2, "optimizer": "adamw", "precision": "bf16-mixed", "attention": "flash",
        "activation_checkpointing": "full", "activation_offloading": True, "loss": "chunked"}),
    # a pre-quantized bnb NF4 checkpoint of Llama 3.1 405B; qlora, all linears, FSDP offload
    "axolotl__llama-3__qlora-fsdp-405b.yaml": ("axolotl", {
        "model": "llama-3.1-405b", "method": "qlora", "quantization.type": "nf4", "lora.rank": 16, "lora.alpha": 16,
        "lora.targets": ALL7, "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 4,
        "framework": "fsdp", "zero_stage": 3, "offload_params": "cpu", "precision": "bf16-mixed", "attention": "flash"}),

    # ---------------------------------------------------------------- LLaMA-Factory, the v1 layout
    # v1 defaults (src/llamafactory/v1/config/*.py, plugins): bf16 true, enable_activation_checkpointing true,
    # flash_attn sdpa, cutoff_len 2048, global_batch_size = DP x micro (no accumulation); LoRA r 8 / alpha 16 /
    # dropout 0.05 / target all; FSDP2Engine: reshard_after_forward true, offload_params false; full fine-tune:
    # weights kept in the checkpoint dtype with a bf16 MixedPrecisionPolicy (no fp32 master) -> bf16-pure
    "llamafactory__v1__train_lora_sft.yaml": ("llamafactory", {
        "model": "qwen3-4b", "method": "lora", "lora.rank": 16, "lora.alpha": 32, "lora.dropout": 0.05,
        "lora.targets": ALL7, "framework": "fsdp", "stack.fsdp_version": 2, "zero_stage": 3,
        "offload_params": "none", "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 1,
        "activation_checkpointing": "full", "attention": "sdpa"}),
    "llamafactory__v1__train_full_fsdp2.yaml": ("llamafactory", {
        "model": "qwen3-0.6b", "method": "full", "framework": "fsdp", "stack.fsdp_version": 2, "zero_stage": 3,
        "precision": "bf16-pure", "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 1,
        "activation_checkpointing": "full", "loss": "standard"}),
    # dist_config deepspeed with examples/deepspeed/ds_z3_config.json (stage 3, bf16 auto -> DeepSpeed's bf16
    # with fp32 masters)
    "llamafactory__v1__train_full_deepspeed.yaml": ("llamafactory", {
        "model": "qwen3-0.6b", "method": "full", "framework": "deepspeed", "zero_stage": 3, "seq_len": 2048,
        "micro_batch_size": 1, "precision": "bf16-mixed"}),
    # quant_config bnb 4 bit: BnbParams nf4, double quantization, compute_dtype float16 (v1 quantization.py)
    "llamafactory__v1__quantization.yaml": ("llamafactory", {
        "model": "qwen3-0.6b", "method": "qlora", "quantization.type": "nf4", "quantization.double_quant": True,
        "quantization.compute_dtype": "fp16", "lora.rank": 16, "lora.alpha": 32, "lora.targets": ALL7,
        "framework": "fsdp", "stack.fsdp_version": 2, "seq_len": 2048, "micro_batch_size": 1}),
    # kernel_config liger_kernel: liger's defaults include the fused linear cross-entropy -> chunked
    "llamafactory__v1__train_full_liger_kernel.yaml": ("llamafactory", {
        "model": "qwen3-0.6b", "method": "full", "loss": "chunked", "framework": "fsdp", "precision": "bf16-pure",
        "seq_len": 2048}),

    # ---------------------------------------------------------------- LLaMA-Factory (v0 layout)
    # layer-wise GaLore / APOLLO: LLaMA-Factory refuses them in distributed training (hparams/parser.py) ->
    # one process on one GPU; pure_bf16; GA 1; gradient checkpointing on by default
    "llamafactory__extras__galore__llama3_full_sft.yaml": ("llamafactory", {
        "method": "full", "framework": "single", "gpus_per_node": 1, "nodes": 1, "precision": "bf16-pure",
        "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 1, "activation_checkpointing": "full"}),
    "llamafactory__extras__apollo__llama3_full_sft.yaml": ("llamafactory", {
        "method": "full", "framework": "single", "gpus_per_node": 1, "nodes": 1, "precision": "bf16-pure",
        "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 1}),
    # fsdp [full_shard, auto_wrap] (HF TrainingArguments fsdp): FSDP fully sharded; full + bf16 under
    # accelerate's FSDP -> bf16-mixed (fp32 trainable params)
    "llamafactory__extras__fp8__llama3_fp8_fsdp_sft.yaml": ("llamafactory", {
        "method": "full", "framework": "fsdp", "zero_stage": 3, "offload_params": "none", "precision": "bf16-mixed",
        "seq_len": 1024, "micro_batch_size": 1, "gradient_accumulation_steps": 8}),
    # a GPTQ checkpoint (-GPTQ; TechxGenus' is 4-bit) with finetuning_type lora -> QLoRA on GPTQ
    "llamafactory__train_qlora__llama3_lora_sft_gptq.yaml": ("llamafactory", {
        "method": "qlora", "quantization.type": "gptq", "quantization.bits": 4, "lora.rank": 8, "lora.alpha": 16,
        "lora.targets": ALL7, "seq_len": 2048, "micro_batch_size": 1, "gradient_accumulation_steps": 8,
        "precision": "bf16-mixed", "framework": "ddp"}),

    # ---------------------------------------------------------------- DeepSpeed JSON
    "deepspeed__llamafactory__ds_z0_config.json": ("ds_config", {
        "framework": "deepspeed", "zero_stage": 0, "offload_optimizer": "none", "offload_params": "none"}),
    "deepspeed__llamafactory__ds_z2_offload_config.json": ("ds_config", {
        "framework": "deepspeed", "zero_stage": 2, "offload_optimizer": "cpu", "offload_params": "none"}),

    # ---------------------------------------------------------------- torchtune (header: tune run <recipe>)
    "torchtune__qwen3__8B_lora.yaml": ("torchtune", {
        "model": "qwen3-8b", "method": "lora", "framework": "fsdp", "zero_stage": 3, "lora.rank": 8,
        "lora.alpha": 16, "lora.dropout": 0.0, "lora.targets": QVO_MLP, "micro_batch_size": 2,
        "gradient_accumulation_steps": 8, "activation_checkpointing": "none", "precision": "bf16-pure",
        "loss": "chunked", "optimizer": "adamw", "stack.optimizer_impl": "fused", "stack.trainer": "torchtune"}),
    "torchtune__qwen3__0.6B_lora_single_device.yaml": ("torchtune", {
        "model": "qwen3-0.6b", "method": "lora", "framework": "single", "gpus_per_node": 1, "lora.rank": 32,
        "lora.alpha": 64, "micro_batch_size": 2, "gradient_accumulation_steps": 8, "activation_checkpointing": "none",
        "precision": "bf16-pure", "loss": "chunked"}),
    "torchtune__qwen3__4B_full_single_device.yaml": ("torchtune", {
        "model": "qwen3-4b", "method": "full", "framework": "single", "gpus_per_node": 1, "micro_batch_size": 2,
        "gradient_accumulation_steps": 1, "activation_checkpointing": "full", "precision": "bf16-pure",
        "loss": "chunked", "optimizer": "adamw"}),
    "torchtune__qwen3__32B_lora.yaml": ("torchtune", {
        "model": "qwen3-32b", "method": "lora", "framework": "fsdp", "lora.rank": 8, "lora.alpha": 16,
        "micro_batch_size": 2, "gradient_accumulation_steps": 8, "activation_checkpointing": "none"}),
    # llama3_3 builders are llama3_1_70b (torchtune/models/llama3_3/_model_builders.py aliases them)
    "torchtune__llama3_3__70B_lora.yaml": ("torchtune", {
        "model": "llama-3.1-70b", "method": "lora", "framework": "fsdp", "lora.rank": 16, "lora.alpha": 32,
        "lora.targets": QVO_MLP, "micro_batch_size": 2, "gradient_accumulation_steps": 1,
        "activation_checkpointing": "full"}),
    "torchtune__llama3_3__70B_qlora.yaml": ("torchtune", {
        "model": "llama-3.1-70b", "method": "qlora", "quantization.type": "nf4", "framework": "fsdp",
        "lora.rank": 16, "micro_batch_size": 2}),
    "torchtune__llama3_3__70B_full.yaml": ("torchtune", {
        "model": "llama-3.1-70b", "method": "full", "framework": "fsdp", "offload_params": "cpu",
        "offload_optimizer": "cpu", "stack.fsdp_embedding_units": True, "micro_batch_size": 2,
        "gradient_accumulation_steps": 1, "activation_checkpointing": "full", "stack.optimizer_impl": "foreach"}),
    # qwen2_5_3b: no zerocalc preset of Qwen2.5-3B: the plan keeps llama-3.1-8b
    "torchtune__qwen2_5__3B_lora_single_device.yaml": ("torchtune", {
        "model": "llama-3.1-8b", "method": "lora", "framework": "single", "gpus_per_node": 1, "lora.rank": 8,
        "lora.alpha": 16, "micro_batch_size": 2, "gradient_accumulation_steps": 8, "activation_checkpointing": "full"}),
    "torchtune__qwen2_5__1.5B_lora.yaml": ("torchtune", {
        "model": "qwen2.5-1.5b", "method": "lora", "framework": "fsdp", "lora.rank": 32, "lora.alpha": 64,
        "micro_batch_size": 2, "gradient_accumulation_steps": 8, "activation_checkpointing": "none"}),

    # ---------------------------------------------------------------- TRL / alignment-handbook recipes
    # TRL ModelConfig: use_peft + load_in_4bit -> QLoRA, bnb_4bit_quant_type nf4, use_bnb_nested_quant false
    # (trl/trainer/model_config.py defaults); max_seq_length (TRL < 0.20 name); Mistral-7B-v0.1 is no preset
    "handbook__zephyr-7b-beta__sft__config_qlora.yaml": ("trl", {
        "model": "llama-3.1-8b", "method": "qlora", "quantization.type": "nf4", "quantization.double_quant": False,
        "lora.rank": 16, "lora.alpha": 16, "lora.dropout": 0.05, "lora.targets": ALL7, "seq_len": 2048,
        "micro_batch_size": 4, "gradient_accumulation_steps": 2, "activation_checkpointing": "full",
        "attention": "flash", "precision": "bf16-mixed", "framework": "ddp"}),
    "handbook__zephyr-7b-beta__dpo__config_qlora.yaml": ("trl", {
        "method": "qlora", "quantization.type": "nf4", "lora.rank": 128, "lora.alpha": 128, "seq_len": 1024,
        "micro_batch_size": 4, "gradient_accumulation_steps": 4, "optimizer": "paged-adamw-32bit",
        "activation_checkpointing": "full", "attention": "flash", "precision": "bf16-mixed"}),
    # full fine-tune loaded in bfloat16 (torch_dtype), no DeepSpeed/FSDP in the file: DDP steps the bf16 weights
    "handbook__zephyr-7b-beta__sft__config_full.yaml": ("trl", {
        "method": "full", "seq_len": 2048, "micro_batch_size": 16, "gradient_accumulation_steps": 1,
        "activation_checkpointing": "full", "attention": "flash", "precision": "bf16-pure", "framework": "ddp"}),
    "handbook__smollm3__sft__sft.yaml": ("trl", {
        "seq_len": 65536, "micro_batch_size": 1, "gradient_accumulation_steps": 2, "activation_checkpointing": "full",
        "loss": "chunked", "attention": "flash", "precision": "bf16-pure"}),

    # ---------------------------------------------------------------- accelerate configs (alignment-handbook)
    "handbook__accelerate_configs__fsdp.yaml": ("accelerate", {
        "framework": "fsdp", "zero_stage": 3, "gpus_per_node": 8, "nodes": 1, "offload_params": "none",
        "precision": "bf16-mixed"}),
    "handbook__accelerate_configs__zero3.yaml": ("accelerate", {
        "framework": "deepspeed", "zero_stage": 3, "gpus_per_node": 8, "offload_params": "none",
        "offload_optimizer": "none", "deepspeed.zero_init": True, "precision": "bf16-mixed"}),
    "handbook__accelerate_configs__ddp.yaml": ("accelerate", {
        "framework": "ddp", "gpus_per_node": 8, "nodes": 1, "precision": "bf16-mixed"}),
}

# ================================================================ post-training (plan-v1 Extension 7, issue 22)
# Command lines (verl Hydra overrides, OpenRLHF / ms-swift / TRL flags) and preference / RL YAMLs. Defaults as the
# trainers' argparse / config files state them (cited in imports/verl.py, openrlhf.py, swift_cli.py, lf_post.py).
PT = "post_training."
G = PT + "generator."
EXPECTED.update({
    # ---------------------------------------------------------------- verl (python3 -m verl.trainer.main_ppo ...)
    # adv_estimator grpo; n 5; 8 GPUs; micro 40 per GPU; accumulation = 256 prompts x 5 / 8 GPUs / 40 = 4;
    # use_kl_loss True, no LoRA -> a reference verl forces to the CPU; rollout vLLM TP 2 at 0.6, free_cache_engine
    # (rollout.yaml default true) -> sleep 2 (the newest verl read, 0.7.0: VLLM_SLEEP_LEVEL 2 on vLLM >= 0.8.5;
    # post/defaults.py verl_sleep_level; the script's own commit 3f38806 still slept at level 1, which the
    # command line cannot tell: the importer warns, verl-sleep-level); gradient checkpointing on; FSDP full shard
    "verl__grpo_trainer__run_qwen2-7b.sh": ("verl", {
        PT + "method": "grpo", PT + "trainer": "verl", PT + "prompt_len": 512, PT + "completion_len": 1024,
        PT + "num_generations": 5, PT + "reference": "cpu", G + "engine": "vllm", G + "mode": "colocate",
        G + "gpu_memory_utilization": 0.6, G + "tensor_parallel_size": 2, G + "sleep": 2, G + "enforce_eager": False,
        "gpus_per_node": 8, "nodes": 1, "framework": "fsdp", "zero_stage": 3, "method": "full",
        "micro_batch_size": 40, "gradient_accumulation_steps": 4, "activation_checkpointing": "full",
        "offload_params": "none", "offload_optimizer": "none", PT + "packing.remove_padding": True,
        PT + "packing.score_micro_batch_size": 40}),
    # use_remove_padding=True in both scripts: the micro-batch packed into one row (post/defaults.py packed_shape);
    # no use_dynamic_bsz, so no token budget; the 7B's log-prob passes (rollout and its full reference) split by
    # log_prob_micro_batch_size_per_gpu 40 each; the LoRA one's reference is the actor's pass (rollout's settings)
    # LoRA rank 64 alpha 32 (targets: verl's all-linear default); 2 GPUs; 16 prompts x 5 / 2 / 40 = 1;
    # use_kl_loss with LoRA -> the actor without its adapter (ref_in_actor); layered_summon True (load_format
    # safetensors) -> the sync one layer at a time, and sleep level 1 (vLLMRollout: layered_summon keeps level 1)
    "verl__grpo_trainer__run_qwen2_5-3b_gsm8k_grpo_lora.sh": ("verl", {
        PT + "method": "grpo", PT + "num_generations": 5, PT + "reference": "adapter-disabled",
        PT + "prompt_len": 512, PT + "completion_len": 1024, "method": "lora", "lora.rank": 64, "lora.alpha": 32,
        "lora.targets": ALL7, "gpus_per_node": 2, "micro_batch_size": 40, "gradient_accumulation_steps": 1,
        G + "gpu_memory_utilization": 0.6, G + "tensor_parallel_size": 2, G + "sleep": 1,
        G + "layered_summon": True, PT + "packing.remove_padding": True, PT + "packing.score_micro_batch_size": 40}),

    # ---------------------------------------------------------------- OpenRLHF
    # torchrun --nproc-per-node ${NPROC_PER_NODE:-8} -> 8 GPUs; accumulation 256 / (1 x 8) = 32; max_len 8192 as
    # 4096 + 4096; --param_dtype bf16; zero_stage default 2; --gradient_checkpointing; flash_attention_2
    "openrlhf__scripts__train_dpo_llama.sh": ("openrlhf", {
        PT + "method": "dpo", PT + "trainer": "openrlhf", PT + "prompt_len": 4096, PT + "completion_len": 4096,
        "gpus_per_node": 8, "micro_batch_size": 1, "gradient_accumulation_steps": 32, "precision": "bf16-mixed",
        "framework": "deepspeed", "zero_stage": 2, "activation_checkpointing": "full", "attention": "flash",
        "method": "full"}),
    # 64 / (1 x 8) = 8
    "openrlhf__scripts__train_kto_llama.sh": ("openrlhf", {
        PT + "method": "kto", PT + "prompt_len": 4096, PT + "completion_len": 4096, "gpus_per_node": 8,
        "micro_batch_size": 1, "gradient_accumulation_steps": 8, "zero_stage": 2}),
    # deepspeed without --num_gpus: the plan's 4 GPUs kept (warned); 128 / (1 x 4) = 32; max_len 1536 = 768 + 768;
    # --bf16; zero_stage 3; no --gradient_checkpointing (off by default); Llama-2-7b-chat -> llama-2-7b
    "openrlhf__scripts__train_rm_llama.sh": ("openrlhf", {
        PT + "method": "rm", PT + "prompt_len": 768, PT + "completion_len": 768, "model": "llama-2-7b",
        "gpus_per_node": 4, "micro_batch_size": 1, "gradient_accumulation_steps": 32, "zero_stage": 3,
        "precision": "bf16-mixed", "activation_checkpointing": "none"}),
    # group_norm -> grpo (no critic); actor 1 x 8 GPUs; 128 / (8 x 8) = 2; colocate_all_models -> vLLM colocated
    # at 0.6, TP 4, enforce_eager, vllm_enable_sleep -> sleep 1; reward model on the same GPUs; adam_offload
    "openrlhf__scripts__train_grpo_ray_hybrid_engine.sh": ("openrlhf", {
        PT + "method": "grpo", PT + "num_generations": 1, PT + "prompt_len": 1024, PT + "completion_len": 1024,
        PT + "reward_model": {"model": None, "placement": "same-gpus"}, G + "engine": "vllm", G + "mode": "colocate",
        G + "gpu_memory_utilization": 0.6, G + "tensor_parallel_size": 4, G + "sleep": 1, G + "enforce_eager": True,
        "gpus_per_node": 8, "micro_batch_size": 8, "gradient_accumulation_steps": 2, "zero_stage": 3,
        "offload_optimizer": "cpu", "activation_checkpointing": "full"}),
    # gae (default) -> PPO with a critic (the reward model's checkpoint, train_ppo_ray.py) on the same GPUs
    "openrlhf__scripts__train_ppo_llama_ray_hybrid_engine.sh": ("openrlhf", {
        PT + "method": "ppo", PT + "value_model": {"model": None, "placement": "same-gpus"},
        PT + "reward_model": {"model": None, "placement": "same-gpus"}, G + "gpu_memory_utilization": 0.5,
        G + "tensor_parallel_size": 2, G + "sleep": 1, "gpus_per_node": 8, "micro_batch_size": 8,
        "gradient_accumulation_steps": 2, "zero_stage": 3, "offload_optimizer": "none",
        # --deepspeed_enable_sleep at ZeRO-3: offload_deepspeed_states outside fit, the 16-bit weights kept
        PT + "offload_between_updates": {"weights": False, "optimizer": True}}),

    # ---------------------------------------------------------------- ms-swift (swift rlhf ...)
    # CUDA_VISIBLE_DEVICES=6 -> 1 GPU (no DeepSpeed: one process); LoRA 8/32, all-linear; max_length 2048 as
    # 1024 + 1024; torch_dtype bfloat16 -> load bf16; gradient checkpointing (ms-swift default on)
    "ms-swift__rlhf__dpo__lora.sh": ("ms-swift", {
        PT + "method": "dpo", PT + "trainer": "ms-swift", PT + "prompt_len": 1024, PT + "completion_len": 1024,
        "model": "qwen2.5-7b", "method": "lora", "lora.rank": 8, "lora.alpha": 32, "lora.targets": ALL7,
        "gpus_per_node": 1, "framework": "single", "micro_batch_size": 1, "gradient_accumulation_steps": 16,
        "run.load.dtype": "bf16", "activation_checkpointing": "full"}),
    # CUDA_VISIBLE_DEVICES=0,1 -> 2 GPUs; zero2; 16 generations; micro 16 x 2 x 1 = 32 divisible by 16;
    # use_vllm -> colocate at 0.5, sleep 0 (sleep_level default 0)
    "ms-swift__grpo__internal__lora_vllm.sh": ("ms-swift", {
        PT + "method": "grpo", PT + "num_generations": 16, PT + "completion_len": 1024, G + "engine": "vllm",
        G + "mode": "colocate", G + "gpu_memory_utilization": 0.5, G + "sleep": 0, "model": "qwen2.5-7b",
        "gpus_per_node": 2, "framework": "deepspeed", "zero_stage": 2, "method": "lora", "micro_batch_size": 16,
        "gradient_accumulation_steps": 1}),

    # ---------------------------------------------------------------- TRL command lines and YAML
    # the LoRA command of trl/scripts/dpo.py's docstring: the script is DPO; DPOConfig max_length 1024 -> 512 + 512;
    # use_peft lora_r 32 alpha 16 (targets: the plan's, TRL ModelConfig default None = PEFT's per-model default)
    "trl__scripts__dpo.py__docstring_lora.sh": ("trl", {
        PT + "method": "dpo", PT + "trainer": "trl", PT + "prompt_len": 512, PT + "completion_len": 512,
        "method": "lora", "lora.rank": 32, "lora.alpha": 16, "micro_batch_size": 2,
        "gradient_accumulation_steps": 8, "activation_checkpointing": "full"}),
    # grpo_vlm.py's docstring (Qwen2.5-VL): use_vllm + vllm_mode colocate at TRL's 0.3; num_generations default 8;
    # max_prompt_length 2048, max_completion_length 1024; use_peft with q_proj, v_proj
    "trl__examples__grpo_vlm.py__docstring_qwen.sh": ("trl", {
        PT + "method": "grpo", PT + "prompt_len": 2048, PT + "completion_len": 1024, PT + "num_generations": 8,
        G + "engine": "vllm", G + "mode": "colocate", G + "gpu_memory_utilization": 0.3, "method": "lora",
        "lora.targets": ["q_proj", "v_proj"], "activation_checkpointing": "full"}),
    # DPOConfig max_length 1024 with max_prompt_length 512 -> 512 + 512; beta 0.01; per device 8, accumulation 2
    "handbook__zephyr-7b-beta__dpo__config_full.yaml": ("trl", {
        PT + "method": "dpo", PT + "prompt_len": 512, PT + "completion_len": 512, "method": "full",
        "micro_batch_size": 8, "gradient_accumulation_steps": 2, "activation_checkpointing": "full",
        "optimizer": "adamw", "precision": "bf16-mixed"}),

    # ---------------------------------------------------------------- LLaMA-Factory stages
    # stage dpo, pref_loss sigmoid -> dpo; cutoff_len 2048 as 1024 + 1024; LoRA rank 8 alpha 16 (2 x rank)
    "llamafactory__train_lora__llama3_lora_dpo.yaml": ("llamafactory", {
        PT + "method": "dpo", PT + "trainer": "llamafactory", PT + "prompt_len": 1024, PT + "completion_len": 1024,
        "method": "lora", "lora.rank": 8, "lora.alpha": 16, "micro_batch_size": 1, "gradient_accumulation_steps": 8,
        "precision": "bf16-mixed"}),
    "llamafactory__train_lora__qwen3_lora_kto.yaml": ("llamafactory", {
        PT + "method": "kto", PT + "prompt_len": 1024, PT + "completion_len": 1024, "method": "lora",
        "lora.rank": 8}),
    # PPO: prompt up to cutoff_len 2048, response max_new_tokens 512. The reward model is a LoRA adapter on the
    # policy's base (reward_model_type lora, the default) and the critic a value head on the policy: Extension 7
    # has no way to say "no network" for PPO (null = one the policy's size), so those two keys are not checked here
    "llamafactory__train_lora__llama3_lora_ppo.yaml": ("llamafactory", {
        PT + "method": "ppo", PT + "prompt_len": 2048, PT + "completion_len": 512,
        "method": "lora", "lora.rank": 8, "gradient_accumulation_steps": 8}),
})
