"""OpenRLHF 0.11's dotted command-line flags (``--ds.zero_stage``, ``--train.micro_batch_size``, ...) as the flat
names of 0.10 and before (``--zero_stage``, ``--micro_train_batch_size``), so one importer reads both.

Read in OpenRLHF v0.11.0's argparse (openrlhf/cli/train_ppo_ray.py, train_dpo.py, train_rm.py): every option moved
into a dotted group; the ones the importer reads keep their meaning under the new name. Defaults that changed
with the names (train_ppo_ray.py v0.11.0): ``--train.micro_batch_size`` 1 (was ``--micro_train_batch_size`` 4),
and the lengths: ``--data.max_len`` 2048 is prompt and response together, ``--rollout.max_new_tokens`` None
("dynamically computed as max_len - prompt_len per sample") in place of ``--prompt_max_len`` /
``--generate_max_len`` 1024 each. A dotted flag not listed here is left as written, so the import reports it.
"""
from __future__ import annotations

DOTTED = {
    # models and GPUs
    "actor.model_name_or_path": "pretrain", "model.model_name_or_path": "pretrain",
    "actor.num_gpus_per_node": "actor_num_gpus_per_node", "actor.num_nodes": "actor_num_nodes",
    "critic.model_name_or_path": "critic_pretrain", "reward.model_name_or_path": "reward_pretrain",
    "reward.remote_url": "remote_rm_url", "ref.offload": "ref_offload",
    # method
    "algo.advantage.estimator": "advantage_estimator", "algo.kl.init_coef": "init_kl_coef",
    "model.ipo_enable": "ipo",
    # batch and lengths
    "train.micro_batch_size": "micro_train_batch_size", "train.batch_size": "train_batch_size",
    "rollout.n_samples_per_prompt": "n_samples_per_prompt", "rollout.batch_size": "rollout_batch_size",
    "rollout.micro_batch_size": "micro_rollout_batch_size", "rollout.max_new_tokens": "generate_max_len",
    "data.max_len": "max_len",
    # colocation and vLLM
    "train.colocate_actor_ref": "colocate_actor_ref", "train.colocate_all": "colocate_all_models",
    "train.colocate_critic_reward": "colocate_critic_reward",
    "vllm.num_engines": "vllm_num_engines", "vllm.tensor_parallel_size": "vllm_tensor_parallel_size",
    "vllm.gpu_memory_utilization": "vllm_gpu_memory_utilization", "vllm.enable_sleep": "vllm_enable_sleep",
    "vllm.enforce_eager": "enforce_eager", "vllm.sync_backend": "vllm_sync_backend",
    "vllm.enable_prefix_caching": "enable_prefix_caching",
    # DeepSpeed, precision, LoRA, kernels
    "ds.zero_stage": "zero_stage", "ds.param_dtype": "param_dtype", "ds.adam_offload": "adam_offload",
    "ds.attn_implementation": "attn_implementation", "ds.load_in_4bit": "load_in_4bit",
    "ds.lora.rank": "lora_rank", "ds.lora.alpha": "lora_alpha", "ds.lora.dropout": "lora_dropout",
    "ds.lora.target_modules": "target_modules", "ds.use_liger_kernel": "use_liger_kernel",
    "ds.packing_samples": "packing_samples", "ds.enable_sleep": "deepspeed_enable_sleep",
    "ds.ring_attn_size": "ring_attn_size", "ds.tensor_parallel_size": "ds_tensor_parallel_size",
    "ds.zpg": "zpg", "ds.grad_accum_dtype": "grad_accum_dtype", "ds.deepcompile": "deepcompile",
    "actor.gradient_checkpointing_enable": "gradient_checkpointing",
    "model.gradient_checkpointing_enable": "gradient_checkpointing",
    # read, no effect on memory
    "model.beta": "beta", "model.label_smoothing": "label_smoothing", "model.nll_loss_coef": "nll_loss_coef",
    "model.aux_loss_coef": "aux_loss_coef", "actor.aux_loss_coef": "aux_loss_coef", "actor.eps_clip": "eps_clip",
    "critic.value_clip": "value_clip", "algo.advantage.gamma": "gamma", "algo.advantage.lambd": "lambd",
    "algo.kl.estimator": "kl_estimator", "reward.normalize_enable": "normalize_reward",
    "algo.advantage.is_correction_enable": "enable_vllm_is_correction",
    "train.full_determinism_enable": "full_determinism", "train.async_enable": "async_train",
    "train.dynamic_batch_enable": "use_dynamic_batch",
}


def is_dotted(opt: dict) -> bool:
    """A command of OpenRLHF 0.11 or later: any of its dotted option groups."""
    return any("." in k and k.split(".")[0] in GROUPS for k in opt)


GROUPS = {k.split(".")[0] for k in DOTTED} | {"ckpt", "logger", "eval", "adam", "muon"}


def flatten(opt: dict) -> tuple[dict, dict]:
    """(options under the flat names, flat name -> the dotted flag it came from, for the report)."""
    out, origin = {}, {}
    for k, v in opt.items():
        flat = DOTTED.get(k)
        if flat is None or flat in out:
            out[k] = v
            continue
        out[flat] = v
        origin[flat] = k
    return out, origin
