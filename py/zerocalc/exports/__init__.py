"""Configs out: ds_config, HF TrainingArguments, PEFT, accelerate, launch (configs in: zerocalc.imports).

Pure functions of a typed ``zerocalc.Plan`` (a plan-v1 dict is parsed first); they return dicts/strings, do
no I/O and never estimate, so the page (Pyodide) and the CLI share them.
"""
from __future__ import annotations

import json

from ..plan import as_plan
from ..stack import OWN_MODEL_CODE

from .accelerate import accelerate_config, accelerate_yaml
from .ds_config import ExportError, check_expressible, ds_config, ds_key_notes, ds_warnings, placeholders
from .hf import training_arguments_kwargs, training_arguments_snippet
from .launch import launch_commands, launch_text
from .launchers import litgpt_command, torchtitan_toml
from .trainers import TRAINER_TARGETS, trainer_yaml
from .peft import bnb_config_kwargs, lora_config_kwargs, peft_snippet
from .trl import trl_config_kwargs, trl_snippet
from .verl import verl_command, verl_overrides

HF_TARGETS = ("ds", "hf", "peft", "accelerate", "launch")
TARGETS = HF_TARGETS + TRAINER_TARGETS + ("litgpt", "torchtitan", "trl", "verl")
STYLES = ("explicit", "auto")


def run_export(plan, target: str, style: str = "explicit") -> str:
    """The text for ``zerocalc export --plan FILE --to TARGET [--style explicit|auto]``.

    ds: the ds_config JSON (style explicit or auto); trl: the TRL config of a post-training plan (DPOConfig,
    GRPOConfig, ...); verl: the
    ``python3 -m verl.trainer.main_ppo`` overrides of an online post-training plan; hf: TrainingArguments snippet (pair it with the auto
    ds_config); peft: LoraConfig (+ BitsAndBytesConfig for QLoRA); accelerate: YAML; launch: commands.
    Raises ExportError (``.key`` names the plan key) when the plan cannot be written in that format."""
    if target not in TARGETS:
        raise ExportError("to", f"unknown target {target!r}; one of {', '.join(TARGETS)}")
    if style not in STYLES:
        raise ExportError("style", f"unknown style {style!r}; one of {', '.join(STYLES)}")
    trainer = as_plan(plan).stack.trainer
    if target in ("hf", "peft", "accelerate") and trainer in OWN_MODEL_CODE:
        raise ExportError("stack.trainer", f"this plan runs {trainer}, not the Hugging Face Trainer; "
                                           f"export --to {trainer} instead")
    if target in TRAINER_TARGETS:
        return trainer_yaml(plan, target)
    if target == "trl":
        return trl_snippet(plan)
    if target == "verl":
        return verl_command(plan)
    if target == "litgpt":
        return litgpt_command(plan)
    if target == "torchtitan":
        return torchtitan_toml(plan)
    if target == "ds":
        return json.dumps(ds_config(plan, style), indent=2) + "\n"
    if target == "hf":
        return training_arguments_snippet(plan)
    if target == "peft":
        return peft_snippet(plan)
    if target == "accelerate":
        return accelerate_yaml(plan)
    return launch_text(plan)


# ds_warnings ids the engine's advice already gives under its own ids (advice._deepspeed_warnings:
# offload-params-ignored, nvme-path-required; the Plan refuses optimizer offload at stage 0).
_ENGINE_HAS = {"ds-offload-param-ignored", "ds-nvme-path", "ds-offload-optimizer-ignored"}


def export_warnings(plan) -> list:
    """The export warnings {id, severity, message} the engine does not give itself, for the engine to merge
    into its warnings: a client optimizer with optimizer offload, activation offloading that a ds_config
    cannot express. (ds_config.ds_warnings has the full list, for a ds_config shown on its own.)"""
    return [w for w in ds_warnings(plan) if w["id"] not in _ENGINE_HAS]


__all__ = ["run_export", "export_warnings", "ExportError", "ds_config", "ds_key_notes", "ds_warnings",
           "placeholders", "check_expressible", "training_arguments_kwargs", "training_arguments_snippet",
           "lora_config_kwargs", "bnb_config_kwargs", "peft_snippet", "accelerate_config", "accelerate_yaml",
           "launch_commands", "launch_text", "litgpt_command", "torchtitan_toml", "trainer_yaml", "trl_config_kwargs", "trl_snippet",
           "verl_command", "verl_overrides", "TARGETS",
           "STYLES"]
