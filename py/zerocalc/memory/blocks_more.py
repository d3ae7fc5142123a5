"""Registry of the per-family block rules added after memory/blocks_moe.py reached its size: each family keeps
its rule in a module of its own (memory/blocks_<family>.py, with the trace it was held to) and registers it here
by model_type. memory/blocks_moe.py merges MORE_RULES into the rules `layer_saved_bytes` dispatches on, so a rule
here is used exactly where blocks_moe's own are (not for trainers running their own model code).
"""
from __future__ import annotations

from .blocks_cpmant import cpmant_head, cpmant_layer
from .blocks_doge import doge_layer
from .blocks_glm5_next import MODEL_TYPES as GLM5_NEXT, glm5_next_layer
from .blocks_kimi_linear import kimi_linear_head, kimi_linear_layer
from .blocks_voxtral import voxtral_layer

MORE_RULES: dict = {"cpmant": cpmant_layer, "voxtral_realtime": voxtral_layer, "doge": doge_layer,
                    "kimi_linear": kimi_linear_layer, "bailing_hybrid": kimi_linear_layer,
                    **{t: glm5_next_layer for t in GLM5_NEXT}}
# memory/blocks_hrm.py ONEOFF_HEADS (memory/activations.py _head_saved): what these keep around their layers
MORE_HEADS: dict = {"cpmant": cpmant_head, "kimi_linear": kimi_linear_head}
