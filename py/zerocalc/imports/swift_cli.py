"""ms-swift command lines (`swift rlhf --rlhf_type grpo ...`, `swift sft ...`, as the example scripts and README
show them, environment variables in front) -> plan, with ``post_training`` for `swift rlhf`.

Argument names and defaults read at modelscope/ms-swift (swift/arguments/rlhf_args.py `RLHFArguments`,
swift/rlhf_trainers/args_mixin.py `RolloutTrainerArgumentsMixin`, swift/arguments/base_args/model_args.py):
`rlhf_type` dpo (default) / orpo / simpo / kto / cpo / rm / ppo / grpo (gkd is not modelled); `beta` None ->
0.04 for GRPO (a reference model, or the disabled adapter under LoRA), `max_completion_length` 512,
`num_generations` 8, `use_vllm` false, `vllm_mode` colocate, `sleep_level` 0, `offload_model` /
`offload_optimizer` false (post_training.offload_between_updates), `move_model_batches` (not modelled); `torch_dtype` None = config.json's; `train_type`
lora (default) or full, `lora_rank` 8, `lora_alpha` 32, `target_modules` all-linear; `quant_bits` 4 -> QLoRA;
`deepspeed` zero0 ... zero3_offload (the configs ms-swift ships); `NPROC_PER_NODE` / `NNODES` the cluster.
"""
from __future__ import annotations

import re
import shlex

from .builder import NO_EFFECT, NOT_MODELLED, Builder, ConfigImportError, all_linear, as_bool, as_int, as_number
from .builder import set_model
from .trl_post import group_keys

COMMAND = re.compile(r"(^|[\s;&|])swift\s+(rlhf|sft|pt)\b")
RLHF_TYPES = {"dpo": "dpo", "orpo": "orpo", "simpo": "simpo", "kto": "kto", "cpo": "cpo", "rm": "rm",
              "ppo": "ppo", "grpo": "grpo"}
DEEPSPEED = {"zero0": (0, "none", "none"), "zero1": (1, "none", "none"), "zero2": (2, "none", "none"),
             "zero3": (3, "none", "none"), "zero2_offload": (2, "cpu", "none"), "zero3_offload": (3, "cpu", "cpu")}
DTYPES = {"bfloat16": ("bf16", "bf16-mixed"), "float16": ("fp16", "fp16-mixed"), "float32": ("fp32", "fp32")}
ATTN = {"flash_attn": "flash", "flash_attention_2": "flash", "flash_attention_3": "flash", "sdpa": "sdpa",
        "eager": "eager"}


def is_swift_command(text) -> bool:
    return isinstance(text, str) and bool(COMMAND.search(text))


def parse_swift_command(text: str) -> dict:
    """The first `swift` command in the text -> {flag: value} (a flag with several values: a list; a bare flag:
    "true"), with ``__command__`` (rlhf / sft / pt) and ``__env__`` (the VAR=value words before it)."""
    try:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise ConfigImportError("command", f"cannot split the command line: {e}") from None
    i = next((k for k in range(len(words) - 1) if words[k] == "swift" and words[k + 1] in ("rlhf", "sft", "pt")),
             None)
    if i is None:
        raise ConfigImportError("command", "no `swift rlhf|sft|pt` command found")
    env = {}
    for w in reversed(words[:i]):
        m = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(.*)", w)
        if not m:
            break
        env[m.group(1)] = m.group(2)
    out: dict = {"__command__": words[i + 1], "__env__": env}
    key = None
    for w in words[i + 2:]:
        if w in ("&&", ";", "|", "&"):
            break
        if w.startswith("--"):
            key = w[2:].replace("-", "_")
            out[key] = True
        elif key is not None:
            v, new = out[key], _value(w)
            out[key] = new if v is True else (v + [new] if isinstance(v, list) else [v, new])
    return out


def _value(w: str):
    """A command-line word as the argument parser would type it: true/false, an integer, a number, or text."""
    if w.lower() in ("true", "false"):
        return w.lower() == "true"
    for cast in (int, float):
        try:
            return cast(w)
        except ValueError:
            pass
    return w


def _cluster(b: Builder, env: dict) -> None:
    n = env.get("NPROC_PER_NODE")
    if n is None and env.get("CUDA_VISIBLE_DEVICES"):
        n = len([d for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
        b.warn("swift-gpus", "NPROC_PER_NODE not given: one process per visible GPU assumed")
    if n is not None:
        b.set("NPROC_PER_NODE", "gpus_per_node", as_int("NPROC_PER_NODE", _value(str(n))))
    if env.get("NNODES"):
        b.set("NNODES", "nodes", as_int("NNODES", _value(env["NNODES"])))


def _method(b: Builder, cfg: dict, take) -> None:
    tt = take("train_type") or "lora"
    quant = take("quant_bits")
    if tt == "full":
        b.set("train_type", "method", "full")
    elif tt in ("lora", "longlora"):
        b.set("train_type", "method", "qlora" if quant in (4, 8) else "lora",
              default="train_type" not in cfg)
        if quant is not None:
            b.set("quant_bits", "quantization.type", "nf4" if quant == 4 else "int8")
        r, a = take("lora_rank"), take("lora_alpha")
        b.set("lora_rank", "lora.rank", 8 if r is None else as_int("lora_rank", r), default=r is None)
        b.set("lora_alpha", "lora.alpha", 32 if a is None else as_number("lora_alpha", a), default=a is None)
        t = take("target_modules")
        if t is None or t == "all-linear":
            b.set("target_modules", "lora.targets", all_linear(b, "target_modules"), default=t is None)
        else:
            b.set("target_modules", "lora.targets", t if isinstance(t, list) else [t])
    else:
        b.skip("train_type", tt, NOT_MODELLED)


def _generator(b: Builder, cfg: dict, take) -> None:
    use = take("use_vllm")
    if use is None or not as_bool("use_vllm", use):
        return
    b.set("use_vllm", "post_training.generator.engine", "vllm")
    mode = take("vllm_mode") or "colocate"
    b.set("vllm_mode", "post_training.generator.mode", mode, default="vllm_mode" not in cfg)
    if mode == "server":
        b.set("vllm_mode", "post_training.generator.gpus", 1, default=True)
        b.warn("generator-gpus", "`swift rollout` runs on GPUs of its own; their number is not in this command: "
                                 "1 assumed (post_training.generator.gpus)")
        return
    u = take("vllm_gpu_memory_utilization")
    b.set("vllm_gpu_memory_utilization", "post_training.generator.gpu_memory_utilization",
          0.9 if u is None else as_number("vllm_gpu_memory_utilization", u), default=u is None)
    tp = take("vllm_tensor_parallel_size")
    if tp is not None:
        b.set("vllm_tensor_parallel_size", "post_training.generator.tensor_parallel_size",
              as_int("vllm_tensor_parallel_size", tp))
    s = take("sleep_level")
    b.set("sleep_level", "post_training.generator.sleep", 0 if s is None else as_int("sleep_level", s, minimum=0),
          default=s is None)


def _offloads(b: Builder, cfg: dict, take) -> None:
    """`offload_model` / `offload_optimizer`: the training model (and the reference) and the optimizer's states on
    the host while colocated vLLM generates (swift/rlhf_trainers/rollout_mixin.py v4.5.2 `enable_offload`, set in
    the colocate branch only; `_fast_infer` enters `offload_context` after `_move_model_to_vllm`)."""
    vals = {k: as_bool(k, take(k)) for k in ("offload_model", "offload_optimizer") if k in cfg}
    pt = b.plan.get("post_training") or {}
    g = pt.get("generator") or {}
    live = pt.get("method") == "grpo" and g.get("engine") == "vllm" and g.get("mode", "colocate") == "colocate"
    if not any(vals.values()):
        for k, v in vals.items():
            b.skip(k, v, "ms-swift's default (nothing moved between updates)")
        return
    if not live:
        for k, v in vals.items():
            b.skip(k, v, NO_EFFECT + " (ms-swift offloads around colocated vLLM's GRPO rollout only)")
        return
    key = "post_training.offload_between_updates."
    b.set("offload_model", key + "weights", vals.get("offload_model", False), default="offload_model" not in vals)
    b.set("offload_optimizer", key + "optimizer", vals.get("offload_optimizer", False),
          default="offload_optimizer" not in vals)


def _post_training(b: Builder, cfg: dict, take) -> None:
    kind = take("rlhf_type") or "dpo"
    if kind not in RLHF_TYPES:
        b.skip("rlhf_type", kind, NOT_MODELLED)
        return
    method = RLHF_TYPES[kind]
    b.set("rlhf_type", "post_training.method", method, default="rlhf_type" not in cfg)
    b.set("rlhf_type", "post_training.trainer", "ms-swift", default=True)
    total = cfg.get("max_length")
    if method in ("grpo", "ppo"):
        c = take("max_completion_length")
        b.set("max_completion_length", "post_training.completion_len",
              512 if c is None else as_int("max_completion_length", c), default=c is None)
        if total is not None:
            b.set("max_length", "post_training.prompt_len", as_int("max_length", total))
    elif total is not None:
        t = as_int("max_length", total)
        b.set("max_length", "post_training.prompt_len", t // 2)
        b.set("max_length", "post_training.completion_len", t - t // 2)
    if method == "grpo":
        group_keys(b, take)
        beta = take("beta")
        if beta is not None and as_number("beta", beta) == 0:
            b.set("beta", "post_training.reference", "none")      # "Use beta=0 to disable the reference model"
        _generator(b, cfg, take)
    rpo = take("rpo_alpha")
    if rpo is not None:
        if method in ("dpo", "ipo"):
            b.set("rpo_alpha", "post_training.rpo_alpha", as_number("rpo_alpha", rpo))
        else:
            b.skip("rpo_alpha", rpo, NO_EFFECT + f" (DPO's; rlhf_type {kind})")
    _offloads(b, cfg, take)
    for k in ("move_model_batches", "padding_free", "packing", "sequence_parallel_size"):
        if k in cfg:
            b.skip(k, take(k), NOT_MODELLED)


def import_swift(cfg: dict, plan, loader=None):
    """A parsed ms-swift command (parse_swift_command) -> ImportResult."""
    b = Builder("ms-swift", plan)
    seen = {"__command__", "__env__"}

    def take(k):
        seen.add(k)
        return cfg.get(k)

    env = cfg.get("__env__", {})
    for k in env:
        if k not in ("NPROC_PER_NODE", "NNODES", "CUDA_VISIBLE_DEVICES"):
            b.skip(k, env[k], NO_EFFECT)
    _cluster(b, env)
    if cfg.get("model"):
        set_model(b, "model", take("model"))
    _method(b, cfg, take)
    mb, ga = take("per_device_train_batch_size"), take("gradient_accumulation_steps")
    b.set("per_device_train_batch_size", "micro_batch_size", 1 if mb is None else as_int("per_device_train_batch_size",
                                                                                           mb), default=mb is None)
    if ga is not None:
        b.set("gradient_accumulation_steps", "gradient_accumulation_steps", as_int("gradient_accumulation_steps", ga))
    ml = take("max_length")
    if ml is not None:
        b.set("max_length", "seq_len", as_int("max_length", ml))
    ds = take("deepspeed")
    if ds in DEEPSPEED:
        stage, opt, par = DEEPSPEED[ds]
        b.set("deepspeed", "framework", "deepspeed")
        b.set("deepspeed", "zero_stage", stage)
        b.set("deepspeed", "offload_optimizer", opt)
        b.set("deepspeed", "offload_params", par)
    elif ds is not None:
        b.skip("deepspeed", ds, "a DeepSpeed config file: import it with --ds to set the ZeRO settings")
        b.set("deepspeed", "framework", "deepspeed")
    else:
        n = b.plan["gpus_per_node"] * b.plan["nodes"]
        b.set("deepspeed", "framework", "ddp" if n > 1 else "single", default=True)
        if n == 1:
            b.set("deepspeed", "offload_optimizer", "none", default=True)
            b.set("deepspeed", "offload_params", "none", default=True)
    dt = take("torch_dtype")
    if dt in DTYPES:
        b.set("torch_dtype", "run.load.dtype", DTYPES[dt][0])
        b.set("torch_dtype", "precision", DTYPES[dt][1])
    gc = take("gradient_checkpointing")
    on = True if gc is None else as_bool("gradient_checkpointing", gc)
    b.set("gradient_checkpointing", "activation_checkpointing", "full" if on else "none", default=gc is None)
    attn = take("attn_impl")
    if attn in ATTN:
        b.set("attn_impl", "attention", ATTN[attn])
    if cfg.get("__command__") == "rlhf":
        _post_training(b, cfg, take)
    b.rest(cfg, seen)
    return b.result()
