"""What every trainer-config importer shares: the result being built, typed reads, model resolution,
the HF optimizer and attention names, and the DeepSpeed / FSDP settings that several trainers embed.

An importer never mutates the given plan: it starts from a full plan-v1 dict and records every file key
either in ``applied`` ({key, plan_key, value}) or in ``not_represented`` ({key, value, reason}).
"""
from __future__ import annotations

import copy
import json
import re

# The one line that reaches the ds_config importer; after the engine refactor it is zerocalc.imports.common /
# zerocalc.imports.ds_config (the lead repoints it at merge).
from ..model import resolve_model
from .common import ConfigImportError, ImportResult, parse_json  # noqa: F401  (re-exported for the importers)
from .ds_config import RUN_DEFAULT, import_ds_config  # noqa: F401
from ..errors import PlanError
from ..memory.stack import effective_stack
from ..plan import Plan
from ..presets import MODELS
from ..run.defaults import save_writer

NO_EFFECT = "no memory effect"
NOT_MODELLED = "changes memory but zerocalc does not model it"
EMPTY = "empty: the trainer's default"
# the trainer each format's file runs under (plan-v1 Extension 1 stack.trainer)
TRAINER_OF = {"axolotl": "hf-trainer", "llamafactory": "hf-trainer", "hf-training-args": "hf-trainer",
              "trl": "hf-trainer", "torchtune": "torchtune"}

# Key-name patterns of settings that move no GPU memory (data, logging, schedule, saving, evaluation, hub).
_NO_EFFECT_RE = re.compile(
    r"(^|_)(lr|learning_rate|warmup|scheduler|epochs?|seed|logging|log|wandb|mlflow|comet|swanlab|trackio|"
    r"tensorboard|report|save|saves|eval|evals|evaluation|output|hub|push|dataset|datasets|data|template|"
    r"tokenizer|token|tokens|prompt|chat|special|weight_decay|adam|beta1|beta2|epsilon|max_grad_norm|"
    r"clip|resume|checkpoint_dir|cache|overwrite|preprocessing|num_workers|dataloader|shuffle|val|test|"
    r"split|metric|early_stopping|profiler|plot|run|project|entity|seed|strict|trust_remote_code|"
    r"train_on_inputs|device_map|ddp_timeout|max_steps|steps|loss_watchdog|"
    r"resize|padding|pad|streaming|shuffle_merged_datasets|tf32|debug|metric_logger|max_steps_per_epoch)(_|$)")


def no_effect_reason(key: str) -> str:
    """Why a key the importer does not map is left out: a known no-memory kind, or simply unread."""
    if _NO_EFFECT_RE.search(key.lower()):
        return NO_EFFECT + " (data, schedule, logging, saving or evaluation)"
    return "not read: zerocalc knows no memory effect of this option"


class Builder:
    """The import being built: the new full plan dict plus what was applied and what was not."""

    def __init__(self, fmt: str, plan):
        self.fmt = fmt
        self.base = full_plan(plan)
        self.plan = copy.deepcopy(self.base)
        self.applied: list = []
        self.not_represented: list = []
        self.warnings: list = []
        if fmt in TRAINER_OF:
            self.set("(format)", "stack.trainer", TRAINER_OF[fmt], default=True)

    def set_fsdp_version(self, key, value):
        """FSDP1 (FullyShardedDataParallel) or FSDP2 (fully_shard): stack.fsdp_version."""
        v = as_int(key, value)
        if v not in (1, 2):
            raise ConfigImportError(key, f"FSDP version is 1 or 2, got {v}")
        self.set(key, "stack.fsdp_version", v)

    def set_compile(self, key, value, mode="model"):
        """torch.compile of the model (HF Trainer torch_compile) or of the model and the loss (torchtune)."""
        self.set(key, "stack.compile", mode if as_bool(key, value) else "none")
    def set(self, key, plan_key, value, default=False):
        """Set ``plan_key`` (dotted) from file key ``key`` (default=True: the trainer's default, the file
        does not set it)."""
        d = self.plan
        parts = plan_key.split(".")
        for p in parts[:-1]:
            if not isinstance(d.get(p), dict):
                d[p] = {}
            d = d[p]
        d[parts[-1]] = copy.deepcopy(value)
        item = {"key": key, "plan_key": plan_key, "value": copy.deepcopy(value)}
        if default:
            item["default"] = True
        self.applied = [a for a in self.applied if a["plan_key"] != plan_key] + [item]

    def skip(self, key, value, reason):
        self.not_represented.append({"key": key, "value": value, "reason": reason})

    def warn(self, wid, message):
        self.warnings.append({"id": wid, "severity": "warning", "message": message})

    def rest(self, cfg: dict, seen, prefix=""):
        """Every key of ``cfg`` not in ``seen``: listed as not represented with its reason."""
        for k, v in cfg.items():
            if k in seen:
                continue
            if v is None or v == "" or v == [] or v == {}:
                self.skip(prefix + k, v, EMPTY)
            else:
                self.skip(prefix + k, v, no_effect_reason(k))

    def merge(self, res: ImportResult, prefix: str):
        """Take over an embedded ds_config import (its plan replaces ours; its keys get ``prefix``)."""
        self.plan = res.plan
        for a in res.applied:
            self.applied = [x for x in self.applied if x["plan_key"] != a["plan_key"] or a["plan_key"] is None]
            self.applied.append({**a, "key": prefix + a["key"]})
        for n in res.not_represented:
            self.not_represented.append({**n, "key": prefix + n["key"]})
        self.warnings.extend(res.warnings)

    def result(self) -> ImportResult:
        from zerocalc import Plan, PlanError
        gptq_half_precision(self)
        try:
            Plan.from_dict(self.plan)
        except PlanError as e:
            src = [a["key"] for a in self.applied if a["plan_key"] == e.key]
            raise ConfigImportError(src[-1] if src else e.key, f"gives plan {e}") from None
        return ImportResult(plan=self.plan, applied=self.applied, not_represented=self.not_represented,
                            warnings=self.warnings)


def full_plan(plan) -> dict:
    """The full plan-v1 dict of ``plan`` (a Plan, a dict or None), plain JSON types, never aliased."""
    from zerocalc import Plan
    if plan is None:
        plan = {}
    p = plan if hasattr(plan, "to_dict") else Plan.from_dict(plan)
    return json.loads(json.dumps(p.to_dict()))


# ------------------------------------------------------------------ typed reads


def as_int(key, v, minimum=1):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ConfigImportError(key, f"expected an integer, got {v!r}")
    if v < minimum:
        raise ConfigImportError(key, f"must be >= {minimum}, got {v!r}")
    return int(v)


def as_number(key, v, minimum=0.0):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigImportError(key, f"expected a number, got {v!r}")
    if v < minimum:
        raise ConfigImportError(key, f"must be >= {minimum}, got {v!r}")
    return v


def as_bool(key, v):
    """YAML spellings included: true/false already parsed; 'true'/'false' strings accepted."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ConfigImportError(key, f"expected true or false, got {v!r}")


def as_list(key, v):
    """A list of names: a YAML list, or a comma-separated string (LLaMA-Factory, HF), or a Hydra list override
    ``[q_proj,v_proj]`` (verl's command line; items may be quoted)."""
    if isinstance(v, str):
        if len(v) >= 2 and v.startswith("[") and v.endswith("]"):
            return [s.strip().strip("'\"") for s in v[1:-1].split(",") if s.strip().strip("'\"")]
        return [s.strip() for s in v.split(",") if s.strip()]
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v):
        return list(v)
    raise ConfigImportError(key, f"expected a list of module names, got {v!r}")


def as_obj(key, v):
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigImportError(key, f"expected a mapping, got {type(v).__name__}")
    return v


# ------------------------------------------------------------------ models

_VARIANT_WORDS = {"instruct", "chat", "it", "hf", "base", "pt"}


# suffixes of pre-quantized checkpoints of a model (TheBloke/Llama-2-7B-GPTQ, hugging-quants/...-BNB-NF4-BF16,
# unsloth/...-bnb-4bit, Qwen/...-Int4): the same architecture, its linears stored quantized
_QUANT_WORDS = {"gptq", "awq", "bnb", "nf4", "4bit", "8bit", "int4", "int8", "bf16", "fp16", "exl2", "aqlm"}


def _norm(name: str) -> str:
    """Hub repo name -> comparable form: no owner, lower case, no 'meta-' prefix, no variant words
    (Instruct / chat / it / hf / Base / pt), which share the base model's architecture, and no
    pre-quantization suffixes (GPTQ, AWQ, BNB-NF4, bnb-4bit, Int4)."""
    n = name.strip().rstrip("/").split("/")[-1].lower()
    if n.startswith("meta-"):
        n = n[len("meta-"):]
    return "-".join(p for p in n.split("-") if p not in _VARIANT_WORDS and p not in _QUANT_WORDS)


def gptq_checkpoint(name) -> bool:
    """A Hub id naming a GPTQ checkpoint (``TheBloke/Llama-2-7B-GPTQ``, ``...-Instruct-GPTQ-Int4``)."""
    return isinstance(name, str) and "gptq" in name.rsplit("/", 1)[-1].lower().replace("_", "-").split("-")


_BY_REPO = {}
for _m in MODELS.values():
    if _m.hf_repo:
        _BY_REPO.setdefault(_norm(_m.hf_repo), _m.id)


def preset_for_hub_id(name) -> str | None:
    """A Hub id (``meta-llama/Llama-3.1-8B-Instruct``) -> the preset with the same architecture, or None.
    Matches presets' ``hf_repo`` by name only (instruct/chat/base variants of the same model); no
    network call, no guessing between sizes or generations."""
    if not isinstance(name, str) or not name.strip():
        return None
    if name in MODELS:
        return name
    return _BY_REPO.get(_norm(name))


def set_model(b: Builder, key: str, name):
    """Set the plan's model from a Hub id in the file, or keep the plan's model and say so."""
    preset = preset_for_hub_id(name)
    if preset:
        b.set(key, "model", preset)
    else:
        b.skip(key, name, f"not a zerocalc preset; the plan keeps model {describe_model(b.plan['model'])} "
                          "(paste the model's config.json to use its exact shape)")


def describe_model(m) -> str:
    return m if isinstance(m, str) else str(m.get("name", "custom"))


def all_linear(b: Builder, key: str) -> list:
    """PEFT/axolotl/LLaMA-Factory 'all linear layers' for the plan's model (lm_head excluded, as
    peft's find_all_linear_names / axolotl find_all_linear_names / LLaMA-Factory find_all_linear_modules do)."""
    try:
        return list(resolve_model(b.plan["model"]).linear_names())
    except Exception as e:  # a custom model object the engine refuses: the plan check names it later
        raise ConfigImportError(key, f"cannot list the model's linear layers: {e}") from None


# ------------------------------------------------------------------ HF names

# transformers OptimizerNames (training_args.py) -> plan optimizer; the rest are not modelled.
HF_OPTIMIZERS = {
    "adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_hf": "adamw", "adamw_apex_fused": "adamw",
    "adamw_torch_xla": "adamw", "adamw_torch_npu_fused": "adamw", "adam": "adamw", "adamw": "adamw",
    "adamw_bnb_8bit": "adamw-8bit", "adamw_8bit": "adamw-8bit", "adam_8bit": "adamw-8bit",
    "paged_adamw_8bit": "paged-adamw-8bit", "paged_adamw_32bit": "paged-adamw-32bit", "paged_adamw": "paged-adamw-32bit",
    "adafactor": "adafactor", "sgd": "sgd", "lion_32bit": "lion", "lion": "lion",
}


def set_optimizer(b: Builder, key, name, default=False):
    mapped = HF_OPTIMIZERS.get(str(name).lower()) if isinstance(name, str) else None
    if mapped:
        b.set(key, "optimizer", mapped, default=default)
    else:
        b.skip(key, name, f"optimizer {name!r} is not modelled; the plan keeps {b.plan['optimizer']}")


def attention_from_impl(name) -> str | None:
    """attn_implementation -> plan attention: flash_attention_2/3 and kernels-community flash kernels
    keep no s x s scores; sdpa; eager. flex_attention and others: None (not modelled)."""
    if not isinstance(name, str):
        return None
    n = name.lower()
    if "flash" in n:
        return "flash"
    if n in ("sdpa", "eager"):
        return n
    return None


# ------------------------------------------------------------------ embedded DeepSpeed config


def import_deepspeed_ref(b: Builder, key, value, loader, bundled: dict):
    """A trainer's ``deepspeed`` setting: a path (read by ``loader(path)`` when the CLI or page has the
    file; else one of the configs the trainer ships, by file name) or an inline ds_config mapping."""
    if value is None or value == "":
        b.skip(key, value, EMPTY)
        return
    if isinstance(value, dict):
        cfg, where = value, "inline"
    elif isinstance(value, str):
        text = loader(value) if loader else None
        if text is not None:
            cfg, where = text, value
        else:
            base = value.replace("\\", "/").rsplit("/", 1)[-1]
            if base not in bundled:
                b.skip(key, value, "the DeepSpeed config file is not given beside this file and is not one the "
                                   "trainer ships; import it with --ds (or paste it) to set the ZeRO settings")
                b.set(key, "framework", "deepspeed")
                return
            cfg, where = bundled[base], f"{base} as the trainer ships it"
    else:
        raise ConfigImportError(key, f"expected a path or a mapping, got {type(value).__name__}")
    cfg = _normalise_ds(b, key, cfg)
    from ..errors import PlanError
    try:
        res = import_ds_config(cfg, b.plan)
    except ConfigImportError as e:
        raise ConfigImportError(f"{key} ({where}): {e.key}", str(e).split(": ", 1)[-1]) from None
    except PlanError as e:  # the plan read so far is bad (a value out of range): name the file key that set it
        src = [a["key"] for a in b.applied if a["plan_key"] == e.key]
        raise ConfigImportError(src[-1] if src else e.key, f"gives plan {e}") from None
    b.merge(res, f"{key}:")
    b.applied.append({"key": key, "plan_key": "framework", "value": "deepspeed", "source": where})


def _normalise_ds(b: Builder, key, cfg):
    """``sub_group_size: 0`` (axolotl's zero3 configs): DeepSpeed's stage3 ``_create_fp16_sub_groups`` then
    closes a sub-group after every parameter, exactly as with 1, the smallest size a plan takes."""
    if isinstance(cfg, str):
        cfg = parse_json(cfg, key)
    zero = cfg.get("zero_optimization")
    if isinstance(zero, dict) and zero.get("sub_group_size") == 0:
        cfg = {**cfg, "zero_optimization": {**zero, "sub_group_size": 1}}
        b.warn("ds-sub-group-size-0", f"{key}: sub_group_size 0 puts every parameter in its own sub-group, "
                                      "as 1 does; the plan uses 1")
    return cfg


def not_deepspeed_or_fsdp(b: Builder, key):
    """No DeepSpeed and no FSDP in the file: the HF Trainer runs DDP on several GPUs, else one process."""
    if b.plan["framework"] in ("deepspeed", "fsdp"):
        fw = "ddp" if b.plan["gpus_per_node"] * b.plan["nodes"] > 1 else "single"
        b.set(key, "framework", fw, default=True)
        b.set(key, "offload_optimizer", "none", default=True)
        b.set(key, "offload_params", "none", default=True)


_SHARDING = {"full_shard": 3, "shard_grad_op": 2, "hybrid_shard": 3, "hybrid_shard_zero2": 2, "no_shard": 0,
             "1": 3, "2": 2, "3": 0, "4": 3, "5": 2}


def set_fsdp(b: Builder, key, fsdp, config, cfg_key):
    """HF TrainingArguments ``fsdp`` (str or list: full_shard / shard_grad_op / hybrid_shard / offload /
    auto_wrap; ``true`` in transformers 5, whose fsdp_config carries reshard_after_forward and cpu_offload)
    plus ``fsdp_config`` (keys with or without the ``fsdp_`` prefix, as accelerate writes them:
    sharding_strategy, offload_params, reshard_after_forward (FSDP2), version, activation_checkpointing)."""
    words = as_list(key, fsdp) if fsdp and not isinstance(fsdp, bool) else []  # transformers >= 5.x: fsdp: true
    words = [w2 for w in words for w2 in w.split()]
    conf = {k[5:] if k.startswith("fsdp_") else k: (k, v) for k, v in as_obj(cfg_key, config).items()}
    stage = None
    for w in words:
        if w.lower() in _SHARDING:
            stage = _SHARDING[w.lower()]
    offload = "offload" in [w.lower() for w in words]
    seen = set()
    if "sharding_strategy" in conf:
        k, v = conf["sharding_strategy"]
        seen.add(k)
        s = _SHARDING.get(str(v).lower())
        if s is None:
            raise ConfigImportError(f"{cfg_key}.{k}", f"unknown sharding strategy {v!r}")
        stage = s
    if "reshard_after_forward" in conf:
        k, v = conf["reshard_after_forward"]
        seen.add(k)
        if isinstance(v, bool):
            stage = 3 if v else 2
        elif str(v).lower() in _SHARDING:
            stage = _SHARDING[str(v).lower()]
    if "cpu_offload" in conf and "offload_params" not in conf:  # transformers 5 fsdp_config spelling
        conf["offload_params"] = conf.pop("cpu_offload")
    if "offload_params" in conf:
        k, v = conf["offload_params"]
        seen.add(k)
        offload = as_bool(f"{cfg_key}.{k}", v)
    if stage is None:
        stage = 3  # FULL_SHARD: accelerate's and the HF Trainer's default strategy
    if stage == 0:
        b.skip(key, fsdp, "FSDP NO_SHARD is DDP: the plan runs ddp")
        b.set(key, "framework", "ddp")
        return seen
    b.set(key, "framework", "fsdp")
    b.set(key, "zero_stage", stage)
    dev = "cpu" if offload else "none"
    # FSDP CPUOffload(offload_params=True) keeps parameters and gradients on the host and steps there.
    b.set(f"{cfg_key}.offload_params" if "offload_params" in conf else key, "offload_params", dev if stage == 3 else "none")
    b.set(f"{cfg_key}.offload_params" if "offload_params" in conf else key, "offload_optimizer", dev)
    if "activation_checkpointing" in conf:
        k, v = conf["activation_checkpointing"]
        seen.add(k)
        if as_bool(f"{cfg_key}.{k}", v):
            b.set(f"{cfg_key}.{k}", "activation_checkpointing", "full")
    if "version" in conf:
        k, v = conf["version"]
        seen.add(k)
        b.set_fsdp_version(f"{cfg_key}.{k}", v)
    if "state_dict_type" in conf:
        k, v = conf["state_dict_type"]
        seen.add(k)
        fsdp_state_dict_type(b, f"{cfg_key}.{k}", v)
    for name, (k, v) in conf.items():
        if k not in seen:
            b.skip(f"{cfg_key}.{k}", v, NO_EFFECT if name in _FSDP_NO_EFFECT else no_effect_reason(name))
    return seen


_FSDP_NO_EFFECT = {"auto_wrap_policy", "transformer_layer_cls_to_wrap", "state_dict_type", "sync_module_states",
                   "use_orig_params", "backward_prefetch", "forward_prefetch", "min_num_params",
                   "cpu_ram_efficient_loading", "limit_all_gathers", "xla", "xla_fsdp_v2", "xla_fsdp_grad_ckpt"}


def _auto_writer(b) -> str | None:
    """The save writer the plan built so far gets by default (None while it is not yet a valid plan)."""
    try:
        plan = Plan.from_dict({k: v for k, v in b.plan.items() if k != "run"})
    except PlanError:
        return None
    return save_writer(plan, effective_stack(plan), "auto")


def fsdp_state_dict_type(b, key: str, value) -> None:
    """FSDP's state_dict_type (accelerate `fsdp_state_dict_type`, HF fsdp_config): FULL_STATE_DICT -> fsdp-full,
    SHARDED_STATE_DICT / LOCAL_STATE_DICT -> fsdp-sharded."""
    v = str(value).split(".")[-1].upper()
    writer = "fsdp-full" if v == "FULL_STATE_DICT" else "fsdp-sharded"
    if b.plan.get("method", "full") != "full" or _auto_writer(b) == writer:
        b.skip(key, value, RUN_DEFAULT)
        return
    b.set(key, "run.save.weights", writer)


def gptq_half_precision(b: Builder):
    """GPTQ QuantLinear kernels compute in 16 bits and GPTQ checkpoints store their other weights in float16
    (transformers ``quantizers/quantizer_gptq.py update_dtype`` suggests ``dtype=torch.float16``; transformers 5
    loads the checkpoint's dtype): a file with neither bf16 nor fp16 on runs the base in fp16 -> fp16-mixed."""
    if b.plan.get("quantization", {}).get("type") == "gptq" and b.plan["precision"] == "fp32":
        b.set("(GPTQ base)", "precision", "fp16-mixed", default=True)
        b.warn("import-gptq-fp16", "no bf16/fp16 in the file: a GPTQ base is loaded and computed in float16 "
                                   "(fp16-mixed)")
