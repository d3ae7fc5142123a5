"""Parse a pasted config (JSON or YAML text) and recognise its format from its structure.

JSON is read with the standard library; anything else needs PyYAML (``yaml.safe_load``), imported only
then: the CLI has it installed, the page loads the pure-Python package into Pyodide only when a YAML
file is pasted (assets/import.js).

Recognition (``detect_format``) weighs each format's distinctive *structure*, never one key name: every
format has rules (a value shape, a section layout, a group of keys only its parser accepts), each with a
weight; a format's score is the noisy-or of its rules that hold, lowered by rules that speak against it
(keys of another trainer's vocabulary, which that format's parser refuses: HfArgumentParser and TRL's
parser reject unknown keys). Keys several trainers share (``lora_r``, ``load_in_4bit``, ``output_dir``,
``gradient_accumulation_steps``) weigh little. The confidence is the winner's score less half the
runner-up's; a file that scores high for two formats is reported as matching both (``ambiguous``), each
candidate with its evidence.
"""
from __future__ import annotations

import json

from .builder import ConfigImportError

FORMATS = ("ds_config", "hf-training-args", "trl", "accelerate", "axolotl", "llamafactory", "torchtune", "verl",
           "ms-swift", "openrlhf")   # openrlhf: command lines only (cmdline.py)
MAX_BYTES = 200 * 1024


def is_json(text: str) -> bool:
    """True when the text is JSON (so no YAML parser is needed)."""
    try:
        json.loads(text)
    except (ValueError, TypeError):
        return False
    return True


def parse_text(text, what: str = "config") -> dict:
    """Text (JSON or YAML) -> the top-level mapping; errors name ``what`` and the line."""
    if isinstance(text, dict):
        return text
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ConfigImportError(what, f"expected text, got {type(text).__name__}")
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise ConfigImportError(what, f"is {len(text.encode('utf-8')) // 1024} KB; configs over "
                                      f"{MAX_BYTES // 1024} KB are refused")
    if not text.strip():
        raise ConfigImportError(what, "is empty")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigImportError(what, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigImportError(what, "is YAML and the YAML parser (PyYAML) is not available") from None
        try:
            obj = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ConfigImportError(what, f"not valid YAML: {problem}{where}") from None
    if not isinstance(obj, dict):
        raise ConfigImportError(what, f"expected a mapping of keys at the top, got {type(obj).__name__}")
    bad = [k for k in obj if not isinstance(k, str)]
    if bad:
        raise ConfigImportError(what, f"top-level key {bad[0]!r} is not a name")
    return obj


# ------------------------------------------------------------------ structure rules

def _str(v) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _has(cfg, *keys) -> bool:
    return any(k in cfg for k in keys)


def _components(cfg) -> list:
    """Top-level sections that are torchtune ``_component_`` mappings (config.instantiate targets)."""
    return [k for k, v in cfg.items() if isinstance(v, dict) and "_component_" in v]


def _sections_with_name(cfg, keys) -> list:
    return [k for k in keys if isinstance(cfg.get(k), dict) and "name" in cfg[k]]


LF_V1_SECTIONS = ("peft_config", "dist_config", "kernel_config", "quant_config", "optim_config",
                  "lr_scheduler_config", "init_config")
LF_STAGES = ("pt", "sft", "rm", "ppo", "dpo", "kto")
ACCELERATE_TYPES = ("NO", "MULTI_GPU", "DEEPSPEED", "FSDP", "MULTI_CPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU",
                    "MULTI_SDAA", "MULTI_MUSA", "MULTI_HPU", "XLA", "TPU", "MEGATRON_LM")
# keys only one trainer's parser accepts (HfArgumentParser / TRL reject unknown keys; axolotl's and
# LLaMA-Factory's names differ from the HF ones for the same setting)
AXOLOTL_ONLY = ("base_model", "sequence_len", "adapter", "lora_target_linear", "sample_packing",
                "val_set_size", "dataset_prepared_path", "num_epochs", "wandb_project", "lora_model_dir",
                "special_tokens", "evals_per_epoch", "saves_per_epoch", "base_model_config", "tokenizer_type")
LF_ONLY = ("stage", "finetuning_type", "cutoff_len", "template", "lora_target", "quantization_bit",
           "flash_attn", "disable_gradient_checkpointing", "lora_rank", "pure_bf16", "max_samples", "plot_loss")
# TrainingArguments names that axolotl spells otherwise (micro_batch_size, eval_batch_size, num_epochs,
# lr_scheduler, optimizer); LLaMA-Factory takes them as they are (its training args are HF's)
HF_ONLY = ("per_device_train_batch_size", "per_device_eval_batch_size", "num_train_epochs", "lr_scheduler_type",
           "optim", "do_train", "do_eval")
HF_SHARED = ("eval_strategy", "evaluation_strategy", "save_strategy", "logging_strategy", "save_total_limit",
             "hub_model_id", "push_to_hub", "warmup_ratio", "logging_steps")
TRL_ONLY = ("use_peft", "max_seq_length", "dataset_text_field", "completion_only_loss", "assistant_only_loss",
            "num_generations", "max_prompt_length", "max_completion_length", "use_vllm", "dataset_mixer",
            "dataset_mixture", "dataset_splits", "dataset_num_proc", "use_bnb_nested_quant", "bnb_4bit_quant_type",
            "lora_task_type", "model_revision", "dataset_name", "dataset_train_split",
            # TRL's post-training configs (imports/trl_post.py)
            "precompute_ref_log_probs", "vllm_gpu_memory_utilization", "vllm_mode", "vllm_enable_sleep_mode",
            "steps_per_generation", "ds3_gather_for_generation", "rpo_alpha", "desirable_weight",
            "undesirable_weight", "center_rewards_coefficient", "cpo_alpha", "simpo_gamma")


def _present(cfg, keys) -> list:
    return [k for k in keys if k in cfg]


def _rules(cfg: dict) -> dict:
    """format -> [(weight, evidence)]: positive weights for structure that holds, negative against."""
    r = {f: [] for f in ("torchtune", "accelerate", "ds_config", "axolotl", "llamafactory", "hf", "verl", "ms-swift")}

    def add(fmt, w, ok, why):
        if ok:
            r[fmt].append((w, why))

    comps = _components(cfg)
    model = cfg.get("model")
    add("torchtune", 0.95, isinstance(model, dict) and "_component_" in model, "model is a `_component_` builder")
    add("torchtune", 0.8, len([c for c in comps if c != "model"]) >= 2,
        f"{len(comps)} sections are `_component_` mappings ({', '.join(comps[:4])})")
    add("torchtune", 0.3, _has(cfg, "batch_size") and _has(cfg, "epochs") and cfg.get("dtype") in ("bf16", "fp32"),
        "recipe keys batch_size, epochs, dtype")

    dt = cfg.get("distributed_type")
    add("accelerate", 0.9, isinstance(dt, str) and dt.upper() in ACCELERATE_TYPES,
        f"distributed_type: {dt} (accelerate's ClusterConfig)")
    add("accelerate", 0.6, _str(cfg.get("compute_environment")), "compute_environment")
    acc = _present(cfg, ("num_processes", "machine_rank", "main_training_function", "num_machines", "rdzv_backend",
                         "same_network", "downcast_bf16"))
    add("accelerate", 0.5, len(acc) >= 2, f"launcher keys {', '.join(acc)}")

    add("ds_config", 0.9, isinstance(cfg.get("zero_optimization"), dict), "zero_optimization section")
    add("ds_config", 0.6, _has(cfg, "train_micro_batch_size_per_gpu", "train_batch_size"),
        "DeepSpeed batch keys (train_batch_size / train_micro_batch_size_per_gpu)")
    add("ds_config", 0.4, any(isinstance(cfg.get(k), dict) and "enabled" in cfg[k] for k in ("fp16", "bf16")),
        "fp16/bf16 sections with `enabled`")

    add("axolotl", 0.8, _str(cfg.get("base_model")), "base_model")
    ds = cfg.get("datasets")
    add("axolotl", 0.6, isinstance(ds, list) and any(isinstance(d, dict) and "path" in d for d in ds),
        "datasets: a list of {path, type}")
    ax = _present(cfg, AXOLOTL_ONLY[1:])
    add("axolotl", min(0.9, 0.3 * len(ax)), bool(ax), f"axolotl's own keys {', '.join(ax[:5])}")
    add("axolotl", 0.5, cfg.get("adapter") in ("lora", "qlora"), f"adapter: {cfg.get('adapter')}")
    add("axolotl", 0.2, _has(cfg, "micro_batch_size"), "micro_batch_size (axolotl; LLaMA-Factory v1 too)")

    add("llamafactory", 0.8, cfg.get("stage") in LF_STAGES, f"stage: {cfg.get('stage')}")
    add("llamafactory", 0.7, cfg.get("finetuning_type") in ("lora", "full", "freeze", "oft"),
        f"finetuning_type: {cfg.get('finetuning_type')}")
    lf = _present(cfg, LF_ONLY[2:])
    add("llamafactory", min(0.8, 0.25 * len(lf)), bool(lf), f"LLaMA-Factory's own keys {', '.join(lf[:5])}")
    v1 = _sections_with_name(cfg, LF_V1_SECTIONS)
    add("llamafactory", 0.9, _str(model) and bool(v1),
        f"LLaMA-Factory v1 layout: model is a name, sections {', '.join(v1)} with `name`")
    add("llamafactory", 0.3, _has(cfg, "model_class") and _str(model), "model_class (v1)")

    hf = _present(cfg, HF_ONLY)
    add("hf", min(0.85, 0.3 * len(hf)), bool(hf), f"TrainingArguments fields {', '.join(hf[:5])}")
    shared = _present(cfg, HF_SHARED)
    add("hf", 0.1, bool(shared), f"TrainingArguments fields other trainers share ({', '.join(shared[:3])})")
    trl = _present(cfg, TRL_ONLY)
    add("hf", min(0.85, 0.35 * len(trl)), bool(trl), f"TRL config / ModelConfig / ScriptArguments keys "
                                                     f"{', '.join(trl[:5])}")
    add("hf", 0.4, _str(cfg.get("model_name_or_path")), "model_name_or_path (TRL ModelConfig)")
    add("hf", 0.35, _str(cfg.get("output_dir")), "output_dir (TrainingArguments' one required field)")
    add("hf", 0.2, _has(cfg, "gradient_checkpointing", "activation_checkpointing", "bf16", "fp16")
        and not any(isinstance(cfg.get(k), dict) for k in ("bf16", "fp16")), "TrainingArguments precision / "
                                                                              "checkpointing switches")
    add("hf", 0.3, _has(cfg, "max_length", "packing", "beta", "loss_type") and _has(cfg, "model_name_or_path", *HF_ONLY),
        "TRL trainer keys (max_length / packing / beta / loss_type)")

    # post-training trainers' own layouts (verl's Hydra config, ms-swift's RLHF arguments)
    arr = cfg.get("actor_rollout_ref")
    add("verl", 0.95, isinstance(arr, dict) and bool({"actor", "rollout", "model"} & set(arr)),
        "actor_rollout_ref section with actor / rollout / model (verl's Hydra config)")
    add("verl", 0.3, isinstance(cfg.get("trainer"), dict) and isinstance(cfg.get("data"), dict),
        "trainer and data sections")
    add("ms-swift", 0.9, _str(cfg.get("rlhf_type")), f"rlhf_type: {cfg.get('rlhf_type')} (ms-swift)")
    add("ms-swift", 0.3, _has(cfg, "train_type", "model_type", "sleep_level"), "ms-swift's train_type / sleep_level")
    if _str(cfg.get("rlhf_type")):
        add("hf", -0.7, True, "has ms-swift's rlhf_type (TRL's parser refuses it)")
    # against: another trainer's vocabulary, which this format's parser would refuse
    if ax or _str(cfg.get("base_model")):
        for f in ("hf", "llamafactory"):
            add(f, -0.6, True, "has axolotl's own keys")
    if cfg.get("stage") in LF_STAGES or cfg.get("finetuning_type") or (_str(model) and v1) or \
            _has(cfg, "cutoff_len", "template"):
        for f in ("hf", "axolotl"):
            add(f, -0.75, True, "has LLaMA-Factory's own keys")
    if hf or trl or _has(cfg, "model_name_or_path"):
        add("axolotl", -0.6, True, "has TrainingArguments / TRL names (axolotl spells them base_model, "
                                   "micro_batch_size, sequence_len)")
    if comps:
        for f in ("hf", "axolotl", "llamafactory"):
            add(f, -0.8, True, "has torchtune `_component_` sections")
    trainer = hf or trl or ax or lf or _has(cfg, "model_name_or_path", "base_model") or (_str(model) and v1)
    if trainer:
        add("ds_config", -0.9, True, "has trainer keys (a ds_config has none)")
    return r


def _score(rules) -> float:
    """Noisy-or of the rules that hold, times (1 - w) for each rule against."""
    miss, against = 1.0, 1.0
    for w, _ in rules:
        if w > 0:
            miss *= 1 - w
        else:
            against *= 1 + w
    return round((1 - miss) * against, 3)


def detect_format(cfg: dict) -> dict:
    """The format of a parsed config from its structure: {"format", "confidence", "ambiguous",
    "candidates": [{"format", "score", "evidence", "against"}] (best first)}; ConfigImportError when no format's
    structure is there."""
    scored = []
    for fam, rules in _rules(cfg).items():
        s = _score(rules)
        if s <= 0:
            continue
        fmt = fam
        if fam == "hf":
            from .hf_args import is_trl
            fmt = "trl" if is_trl(cfg) else "hf-training-args"
        scored.append({"format": fmt, "score": s, "evidence": [why for w, why in rules if w > 0],
                       "against": [why for w, why in rules if w < 0]})
    scored.sort(key=lambda c: -c["score"])
    if not scored or scored[0]["score"] < 0.3:
        raise ConfigImportError("config", "not a format zerocalc reads (ds_config, TrainingArguments/TRL, "
                                          "accelerate, axolotl, LLaMA-Factory or torchtune): none of their "
                                          "structures is here")
    s1 = scored[0]["score"]
    s2 = scored[1]["score"] if len(scored) > 1 else 0.0
    ambiguous = s2 >= 0.3 and s2 >= 0.6 * s1
    return {"format": scored[0]["format"], "confidence": round(max(0.0, s1 - s2 / 2), 2),
            "ambiguous": ambiguous, "candidates": [c for c in scored if c["score"] >= 0.3]}


def detect(cfg: dict) -> str:
    """The format of a parsed config (``detect_format``'s winner), or ConfigImportError."""
    return detect_format(cfg)["format"]
