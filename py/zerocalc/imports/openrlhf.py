"""OpenRLHF command lines (``openrlhf.cli.train_dpo`` / ``train_kto`` / ``train_rm`` / ``train_ppo_ray``, the
flat argparse flags of OpenRLHF's ``examples/scripts``) -> plan with ``post_training`` (plan-v1 Extension 7).

Defaults read in OpenRLHF's argparse (openrlhf/cli/train_dpo.py @006cd70, train_ppo_ray.py @021d1b0):
``--micro_train_batch_size`` 8 (DPO/RM/KTO) and 4 (PPO), ``--train_batch_size`` 128 (global:
``accumulated_gradient = train_batch_size // micro_train_batch_size // world_size``), ``--zero_stage`` 2,
``--max_len`` 512 (DPO/RM/KTO, prompt and response together: two halves), ``--prompt_max_len`` 1024,
``--generate_max_len`` 1024, ``--n_samples_per_prompt`` 1, ``--vllm_gpu_memory_utilization`` 0.95,
``--vllm_tensor_parallel_size`` 1, ``--init_kl_coef`` 0.01 (> 0 builds the reference group), LoRA
``--lora_rank`` 0 (off) / ``--lora_alpha`` 16 / ``--lora_dropout`` 0 / ``--target_modules all-linear``,
``--gradient_checkpointing`` off, ``--bf16`` off (``--param_dtype`` in newer releases). The method: the
program's name (train_dpo with ``--ipo`` is IPO); PPO-family by ``--advantage_estimator`` (gae: PPO with a
critic; group_norm / dr_grpo: GRPO; rloo: RLOO; reinforce / reinforce_baseline update the actor alone, as GRPO
does: train_ppo_ray.py drops the critic for every estimator but gae). vLLM engines run on GPUs of their own
(``mode: server``, ``vllm_num_engines × vllm_tensor_parallel_size`` GPUs) unless ``--colocate_all_models``.
OpenRLHF 0.11's dotted flags (``--ds.zero_stage``, ``--train.micro_batch_size``...) are read under these names
with 0.11's changed defaults (imports/openrlhf_dotted.py); the report names the flag as written.
"""
from __future__ import annotations

from .builder import NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, as_int, as_number, attention_from_impl, \
    set_model
from .openrlhf_dotted import flatten, is_dotted
from .post_common import (flag, not_modelled_flags, role_model, set_deepspeed, set_int, set_launcher_gpus, set_lora,
                          split_total)

PROGRAM_METHOD = {"train_dpo": "dpo", "train_kto": "kto", "train_rm": "rm", "train_ppo_ray": "ppo",
                  "train_ppo": "ppo"}
ESTIMATORS = {"gae": "ppo", "group_norm": "grpo", "dr_grpo": "grpo", "rloo": "rloo", "reinforce": "grpo",
              "reinforce_baseline": "grpo"}
PPO_ONLY = ("prompt_data", "n_samples_per_prompt", "advantage_estimator", "vllm_num_engines", "actor_num_gpus_per_node",
            "reward_pretrain", "rollout_batch_size", "generate_max_len", "init_kl_coef")
NOT_MODELLED_KEYS = ("packing_samples", "use_dynamic_batch", "ring_attn_size",
                     "ds_tensor_parallel_size", "micro_rollout_batch_size", "colocate_critic_reward",
                     "enable_prefix_caching", "zpg", "grad_accum_dtype", "deepcompile",
                     "async_train")


def _ds_sleep(b: Builder, v, online: bool, stage: int, adam: bool) -> None:
    """``--deepspeed_enable_sleep`` (0.11: ``--ds.enable_sleep``): the actor's (and critic's) ZeRO-3 optimizer
    states, fp32 master and gradient buffers on the host outside `fit`, the 16-bit weights kept (openrlhf/utils/
    deepspeed/deepspeed_utils.py `offload_deepspeed_states`, ppo_trainer.py `_run_sleep`, v0.9.5 and v0.11.0)."""
    key = "deepspeed_enable_sleep"
    if not v:
        b.skip(key, v, "OpenRLHF's default (nothing moved between updates)")
    elif not online:
        b.skip(key, v, NO_EFFECT + " (the PPO-family trainer's; this program has no rollout)")
    elif adam:
        b.skip(key, v, NO_EFFECT + " (offload_deepspeed_states returns at once with adam_offload)")
    elif stage != 3:
        b.skip(key, v, f"not mapped: offload_deepspeed_states supports ZeRO-3 only up to DeepSpeed 0.17.5 "
                       f"(\"Only Zero stage 3 is currently supported\"), the plan runs stage {stage}")
    else:
        b.set(key, "post_training.offload_between_updates", {"weights": False, "optimizer": True})


def openrlhf_method(text: str, opt: dict) -> str:
    """The method of an OpenRLHF command: its program (train_dpo...), else the options only PPO has."""
    for prog, method in PROGRAM_METHOD.items():
        if prog in text:
            return method
    if any(k in opt for k in PPO_ONLY):
        return "ppo"
    raise ConfigImportError("(program)", "an OpenRLHF command without its program (openrlhf.cli.train_dpo, "
                                         "train_kto, train_rm or train_ppo_ray) and without PPO's options: "
                                         "paste the whole command")


def import_openrlhf(opt: dict, plan, cmd=None, text: str = ""):
    b = Builder("openrlhf", plan)
    seen = set()
    dotted = is_dotted(opt)
    origin: dict = {}
    if dotted:
        opt, origin = flatten(opt)

    def take(k):
        seen.add(k)
        return opt.get(k)

    method = openrlhf_method(text, opt)
    online = method == "ppo"
    set_launcher_gpus(b, cmd)
    if online:
        set_int(b, take, "actor_num_gpus_per_node", "gpus_per_node", 8)
        set_int(b, take, "actor_num_nodes", "nodes", 1)
        est = take("advantage_estimator") or "gae"
        if not isinstance(est, str) or est not in ESTIMATORS:
            raise ConfigImportError("advantage_estimator", f"unknown estimator {est!r}; OpenRLHF has "
                                                          f"{', '.join(ESTIMATORS)}")
        method = ESTIMATORS[est]
        b.set("advantage_estimator", "post_training.method", method, default="advantage_estimator" not in opt)
    else:
        if method == "dpo" and flag(opt, take, "ipo"):
            method = "ipo"
        b.set("(program)", "post_training.method", method)
    b.set("(program)", "post_training.trainer", "openrlhf")
    pre = take("pretrain")
    if isinstance(pre, str):
        set_model(b, "pretrain", pre)
    # --- method: LoRA / QLoRA
    rank = opt.get("lora_rank")
    if rank is not None and as_int("lora_rank", rank, minimum=0) > 0:
        if flag(opt, take, "load_in_4bit"):
            b.set("load_in_4bit", "method", "qlora")
            b.set("load_in_4bit", "quantization.type", "nf4", default=True)   # openrlhf/models/actor.py nf4
        else:
            b.set("lora_rank", "method", "lora")
        set_lora(b, opt, take, "lora_rank", 0, "lora_alpha", 16, "lora_dropout", 0.0, "target_modules",
                 "OpenRLHF --target_modules all-linear")
    else:
        take("lora_rank")
        b.set("lora_rank", "method", "full", default=rank is None)
    # --- batch
    mb_default = (1 if dotted else 4) if online else 8     # 0.11 train_ppo_ray.py: --train.micro_batch_size 1
    micro = set_int(b, take, "micro_train_batch_size", "micro_batch_size", mb_default)
    tb = take("train_batch_size")
    world = b.plan["gpus_per_node"] * b.plan["nodes"]
    total = 128 if tb is None else as_int("train_batch_size", tb)
    if total % (micro * world) == 0:
        b.set("train_batch_size", "gradient_accumulation_steps", total // (micro * world), default=tb is None)
    else:
        b.skip("train_batch_size", total, f"not mapped: {total} is not a multiple of micro_train_batch_size "
                                          f"{micro} x {world} GPUs")
    # --- lengths
    if online and dotted:
        _lengths_011(b, take)
        n = take("n_samples_per_prompt")
        b.set("n_samples_per_prompt", "post_training.num_generations", 1 if n is None else
              as_int("n_samples_per_prompt", n), default=n is None)
    elif online:
        set_int(b, take, "prompt_max_len", "post_training.prompt_len", 1024)
        set_int(b, take, "generate_max_len", "post_training.completion_len", 1024)
        if "max_len" in opt:
            b.skip("max_len", take("max_len"), "read: deprecated in train_ppo_ray.py; the prompt and generation "
                                               "limits above decide")
        n = take("n_samples_per_prompt")
        b.set("n_samples_per_prompt", "post_training.num_generations", 1 if n is None else
              as_int("n_samples_per_prompt", n), default=n is None)
    else:
        ml = take("max_len")
        split_total(b, "max_len", 512 if ml is None else as_int("max_len", ml), default=ml is None)
    # --- precision, checkpointing, attention
    pd = take("param_dtype")
    if pd is not None:
        if pd not in ("bf16", "fp16"):
            raise ConfigImportError("param_dtype", f"expected bf16 or fp16, got {pd!r}")
        b.set("param_dtype", "precision", f"{pd}-mixed")
    elif flag(opt, take, "bf16"):
        b.set("bf16", "precision", "bf16-mixed")
    else:
        b.set("bf16", "precision", "bf16-mixed", default=True)
        if not dotted:                                    # 0.11: --ds.param_dtype defaults to bf16
            b.warn("openrlhf-dtype", "neither --bf16 nor --param_dtype: OpenRLHF releases with --param_dtype "
                                     "default to bf16 (assumed); older ones without --bf16 train in fp32")
    gc = flag(opt, take, "gradient_checkpointing")
    b.set("gradient_checkpointing", "activation_checkpointing", "full" if gc else "none", default=not gc)
    impl = take("attn_implementation")
    if impl is not None:
        a = attention_from_impl(impl)
        if a:
            b.set("attn_implementation", "attention", a)
        else:
            b.skip("attn_implementation", impl, NOT_MODELLED)
    elif flag(opt, take, "flash_attn"):
        b.set("flash_attn", "attention", "flash")
    # --- DeepSpeed
    zs = take("zero_stage")
    set_deepspeed(b, "zero_stage", 2 if zs is None else as_int("zero_stage", zs, minimum=0), default=zs is None)
    adam = flag(opt, take, "adam_offload")
    if adam:
        b.set("adam_offload", "offload_optimizer", "cpu")
    if "deepspeed_enable_sleep" in opt:
        _ds_sleep(b, flag(opt, take, "deepspeed_enable_sleep"), online, 2 if zs is None else as_int("zero_stage", zs), adam)
    if not online and (cmd is None or cmd.launcher_gpus is None):
        b.warn("openrlhf-gpus", f"the launcher's GPU count is not in the text (deepspeed without --num_gpus uses "
                                f"every visible GPU): the plan keeps {b.plan['gpus_per_node']} GPUs per node")
    # --- reference, reward, critic, generator
    if online:
        _ppo_models(b, opt, take, method, pre)
    elif method in ("dpo", "ipo", "kto"):
        if flag(opt, take, "ref_offload"):
            b.set("ref_offload", "post_training.reference", "cpu")
        if opt.get("ref_pretrain") not in (None, "", pre):
            b.skip("ref_pretrain", take("ref_pretrain"), "not mapped: a reference other than the policy's "
                                                         "checkpoint; the estimate gives it the policy's size")
    not_modelled_flags(b, opt, take, NOT_MODELLED_KEYS)
    if flag(opt, take, "use_liger_kernel"):
        b.set("use_liger_kernel", "loss", "chunked")
    for k in ("beta", "label_smoothing", "nll_loss_coef", "aux_loss_coef", "l2", "max_norm", "kl_estimator",
              "use_kl_estimator_k3", "gamma", "lambd", "eps_clip", "value_clip", "ptx_coef", "normalize_reward",
              "vllm_sync_backend", "enable_vllm_is_correction", "local_rank", "full_determinism"):
        if k in opt:
            b.skip(k, take(k), NO_EFFECT)
    for k, v in opt.items():
        if k not in seen and k.endswith(("_num_nodes", "_num_gpus_per_node")):
            b.skip(k, take(k), "read: a Ray group's GPUs (the training GPUs are the actor's)")
    b.rest(opt, seen)
    res = b.result()
    for entry in res.applied + res.not_represented:      # name the flag as the command wrote it
        entry["key"] = origin.get(entry["key"], entry["key"])
    return res


def _lengths_011(b: Builder, take) -> None:
    """OpenRLHF 0.11 PPO: ``--data.max_len`` (2048) bounds prompt and response together; ``--rollout.
    max_new_tokens`` (None: max_len - prompt_len per sample) the response."""
    ml = take("max_len")
    total = 2048 if ml is None else as_int("data.max_len", ml)
    new = take("generate_max_len")
    if new is None:
        split_total(b, "max_len", total, default=ml is None)
        return
    completion = as_int("rollout.max_new_tokens", new)
    if completion >= total:
        raise ConfigImportError("rollout.max_new_tokens", f"{completion} new tokens leave no room for a prompt in "
                                                    f"max_len {total}")
    b.set("generate_max_len", "post_training.completion_len", completion)
    b.set("max_len", "post_training.prompt_len", total - completion, default=ml is None)


def _ppo_models(b: Builder, opt: dict, take, method: str, pre) -> None:
    """PPO / GRPO / RLOO: the reference (``--init_kl_coef`` 0: none), the reward model (``--reward_pretrain``;
    a ``--remote_rm_url`` is a server), the critic (gae only: ``--critic_pretrain``, else the reward model's
    checkpoint) and the generator."""
    colocate_all = flag(opt, take, "colocate_all_models")
    colocate_ref = flag(opt, take, "colocate_actor_ref") or colocate_all
    kl = take("init_kl_coef")
    if kl is not None and as_number("init_kl_coef", kl) == 0:
        b.set("init_kl_coef", "post_training.reference", "none")
    elif kl is not None:
        b.skip("init_kl_coef", kl, "read: > 0, so OpenRLHF builds the reference group (train_ppo_ray.py)")
    elif flag(opt, take, "ref_reward_offload") or flag(opt, take, "ref_offload"):      # 0.11: --ref.offload
        b.set("ref_reward_offload", "post_training.reference", "cpu")
    elif not colocate_ref:
        b.warn("openrlhf-ref-gpus", "the reference runs in its own Ray group (no --colocate_actor_ref / "
                                    "--colocate_all_models): the estimate still counts it on the training GPUs")
    placement = "same-gpus" if colocate_all else "own-gpus"
    rm = take("reward_pretrain")
    if take("remote_rm_url"):
        b.skip("remote_rm_url", opt["remote_rm_url"], "read: a reward server outside the plan's GPUs")
    elif isinstance(rm, str):
        b.set("reward_pretrain", "post_training.reward_model",
              role_model(b, "reward_pretrain", rm.split(",")[0], pre, placement))
    if method == "ppo":
        critic = take("critic_pretrain") or (rm.split(",")[0] if isinstance(rm, str) else pre)
        b.set("critic_pretrain" if "critic_pretrain" in opt else "(critic)", "post_training.value_model",
              role_model(b, "critic_pretrain", critic, pre, placement), default="critic_pretrain" not in opt)
    engines = take("vllm_num_engines")
    tp = take("vllm_tensor_parallel_size")
    tp = 1 if tp is None else as_int("vllm_tensor_parallel_size", tp)
    if engines is None or as_int("vllm_num_engines", engines, minimum=0) == 0:
        b.set("vllm_num_engines", "post_training.generator", {"engine": "hf"}, default=engines is None)
        return
    g = "post_training.generator."
    b.set("vllm_num_engines", g + "engine", "vllm")
    b.set("vllm_tensor_parallel_size", g + "tensor_parallel_size", tp, default="vllm_tensor_parallel_size" not in opt)
    b.set("enforce_eager", g + "enforce_eager", flag(opt, take, "enforce_eager"), default="enforce_eager" not in opt)
    u = take("vllm_gpu_memory_utilization")
    if colocate_all:
        b.set("colocate_all_models", g + "mode", "colocate")
        b.set("vllm_gpu_memory_utilization", g + "gpu_memory_utilization",
              0.95 if u is None else as_number("vllm_gpu_memory_utilization", u), default=u is None)
        sleep = flag(opt, take, "vllm_enable_sleep")       # openrlhf/trainer/ray/vllm_engine.py sleep(level=1)
        b.set("vllm_enable_sleep", g + "sleep", 1 if sleep else 0, default=not sleep)
    else:
        b.set("colocate_all_models", g + "mode", "server", default=True)
        b.set("vllm_num_engines", g + "gpus", as_int("vllm_num_engines", engines) * tp)
        for k in ("vllm_gpu_memory_utilization", "vllm_enable_sleep"):
            if k in opt:
                b.skip(k, take(k), NO_EFFECT + " on the training GPUs (the engines have their own)")
