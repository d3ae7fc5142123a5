"""Registry of the per-family block rules added after memory/blocks_moe.py reached its size: each family keeps
its rule in a module of its own (memory/blocks_<family>.py, with the trace it was held to) and registers it here
by model_type. memory/blocks_moe.py merges MORE_RULES into the rules `layer_saved_bytes` dispatches on, so a rule
here is used exactly where blocks_moe's own are (not for trainers running their own model code).
"""
from __future__ import annotations

from .blocks_inkling import RULES as INKLING_RULES
from .blocks_inkling2 import RULES as INKLING2_RULES

MORE_RULES: dict = {**INKLING_RULES, **INKLING2_RULES}
