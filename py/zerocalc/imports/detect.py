"""Parse a pasted config (JSON or YAML text) and recognise its format from the content.

JSON is read with the standard library; anything else needs PyYAML (``yaml.safe_load``), imported only
then: the CLI has it installed, the page loads the pure-Python package into Pyodide only when a YAML
file is pasted (assets/import.js). Formats, in the order they are recognised:

- ``torchtune``: a mapping whose ``model`` / ``optimizer`` / ``loss`` / ``checkpointer`` has ``_component_``;
- ``accelerate``: ``distributed_type`` or ``compute_environment`` (accelerate's ClusterConfig);
- ``ds_config``: ``zero_optimization`` or the ``train_*batch_size*`` keys, with no trainer keys;
- ``axolotl``: ``base_model`` or axolotl-only keys (``micro_batch_size`` + ``sequence_len``, ``adapter``...);
- ``llamafactory``: ``model_name_or_path`` with LLaMA-Factory keys (``stage``, ``finetuning_type``,
  ``cutoff_len``, ``template``, ``quantization_bit``);
- ``trl`` / ``hf-training-args``: TrainingArguments fields (``per_device_train_batch_size``, ``output_dir``...),
  TRL when SFT/DPO/GRPO-only keys are present.
"""
from __future__ import annotations

import json

from .builder import ConfigImportError

FORMATS = ("ds_config", "hf-training-args", "trl", "accelerate", "axolotl", "llamafactory", "torchtune")
AXOLOTL_KEYS = ("base_model", "adapter", "sequence_len", "micro_batch_size", "lora_target_linear", "sample_packing",
                "lora_r", "load_in_4bit", "flash_attention", "lora_target_modules")
LLAMA_FACTORY_KEYS = ("stage", "finetuning_type", "cutoff_len", "template", "quantization_bit", "lora_target",
                      "flash_attn", "disable_gradient_checkpointing")
HF_KEYS = ("per_device_train_batch_size", "output_dir", "gradient_accumulation_steps", "num_train_epochs",
           "optim", "gradient_checkpointing", "per_device_eval_batch_size", "eval_strategy", "evaluation_strategy")
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


def detect(cfg: dict) -> str:
    """The format of a parsed config, or ConfigImportError naming what was looked for."""
    for k in ("model", "optimizer", "loss", "checkpointer"):
        if isinstance(cfg.get(k), dict) and "_component_" in cfg[k]:
            return "torchtune"
    if "distributed_type" in cfg or "compute_environment" in cfg:
        return "accelerate"
    trainerish = any(k in cfg for k in AXOLOTL_KEYS + LLAMA_FACTORY_KEYS + ("per_device_train_batch_size",
                                                                            "output_dir", "model_name_or_path"))
    if not trainerish and ("zero_optimization" in cfg or "train_micro_batch_size_per_gpu" in cfg
                           or "train_batch_size" in cfg):
        return "ds_config"
    if "base_model" in cfg or sum(k in cfg for k in AXOLOTL_KEYS) >= 2:
        return "axolotl"
    if sum(k in cfg for k in LLAMA_FACTORY_KEYS) >= 1 and "per_device_train_batch_size" in cfg or \
            sum(k in cfg for k in LLAMA_FACTORY_KEYS) >= 2:
        return "llamafactory"
    from .hf_args import is_trl
    if any(k in cfg for k in HF_KEYS) or is_trl(cfg):
        return "trl" if is_trl(cfg) else "hf-training-args"
    raise ConfigImportError("config", "not a format zerocalc reads (ds_config, TrainingArguments/TRL JSON, "
                                      "accelerate, axolotl, LLaMA-Factory or torchtune): none of their keys is here")
