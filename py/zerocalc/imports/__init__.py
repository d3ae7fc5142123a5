"""Configs in: ds_config.json, a model's config.json (and trainer configs) -> a plan.

Imports never mutate: they return a new plan dict (or raise ConfigImportError naming the key, the current
plan untouched). Every key of a pasted config is accounted for: applied to the plan, or listed in
``not_represented`` with the reason.
"""
from .common import ConfigImportError, ImportResult
from .ds_config import import_ds_config
from .model_config import apply_model_config, import_model_config

__all__ = ["ConfigImportError", "ImportResult", "import_ds_config", "import_model_config", "apply_model_config"]
