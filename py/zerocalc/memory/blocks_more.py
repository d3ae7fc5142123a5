"""Registry of the per-family block rules added after memory/blocks_moe.py reached its size: each family keeps
its rule in a module of its own (memory/blocks_<family>.py, with the trace it was held to) and registers it here
by model_type. memory/blocks_moe.py merges MORE_RULES into the rules `layer_saved_bytes` dispatches on, so a rule
here is used exactly where blocks_moe's own are (not for trainers running their own model code).
"""
from __future__ import annotations

from .blocks_cpmant import cpmant_head, cpmant_layer
from .blocks_doge import doge_layer
from .blocks_qwen4_exp import MODEL_TYPES as QWEN4_EXP, qwen4_exp_layer
from .blocks_voxtral import voxtral_layer

MORE_RULES: dict = {"cpmant": cpmant_layer, "voxtral_realtime": voxtral_layer, "doge": doge_layer,
                    **{t: qwen4_exp_layer for t in QWEN4_EXP}}
# memory/blocks_hrm.py ONEOFF_HEADS (memory/activations.py _head_saved): what these keep around their layers
MORE_HEADS: dict = {"cpmant": cpmant_head}
