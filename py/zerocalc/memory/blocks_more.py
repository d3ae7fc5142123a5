"""Registry of the per-family block rules added after memory/blocks_moe.py reached its size: each family keeps
its rule in a module of its own (memory/blocks_<family>.py, with the trace it was held to) and registers it here
by model_type. memory/blocks_moe.py merges MORE_RULES into the rules `layer_saved_bytes` dispatches on, so a rule
here is used exactly where blocks_moe's own are (not for trainers running their own model code).
"""
from __future__ import annotations

from ..model import ModelArch, Tensor
from .blocks import Ctx
from .blocks_blt import blt_checkpointed, blt_global_layer, blt_head
from .blocks_cpmant import cpmant_head, cpmant_layer
from .blocks_doge import doge_layer
from .blocks_axk2 import AXK2_HEADS
from .blocks_dots3 import DOTS3_HEADS
from .blocks_evolla import RULES as EVOLLA_RULES
from .blocks_gemma4_assistant import HEADS as G4A_HEADS, RULES as G4A_RULES
from .blocks_glm5_next import MODEL_TYPES as GLM5_NEXT, glm5_next_layer
from .blocks_hy_v4 import MODEL_TYPES as HY_V4, hy_v4_block
from .blocks_inkling import HEADS as INKLING_HEADS, RULES as INKLING_RULES
from .blocks_inkling2 import HEADS as INKLING2_HEADS, RULES as INKLING2_RULES
from .blocks_kosmos import MODEL_TYPES as KOSMOS, kosmos_layer
from .blocks_kimi_linear import MODEL_TYPES as KIMI_LINEAR, kimi_linear_block
from .blocks_muse_spark import MODEL_TYPES as MUSE_SPARK, muse_spark_block
from .blocks_prophetnet import prophetnet_layer
from .blocks_qwen4_exp import MODEL_TYPES as QWEN4_EXP, qwen4_exp_layer
from .blocks_reformer import reformer_head, reformer_layer
from .blocks_step3p7 import MODEL_TYPES as STEP3P7, step3p7_block
from .blocks_voxtral import voxtral_layer
from .blocks_xlnet import xlnet_head, xlnet_layer
from .blocks_zaya import MODEL_TYPES as ZAYA, zaya_block

MORE_RULES: dict = {
    "cpmant": cpmant_layer,                      # memory/blocks_cpmant.py
    "voxtral_realtime": voxtral_layer,           # memory/blocks_voxtral.py: the language model
    "doge": doge_layer,                          # memory/blocks_doge.py
    "xlnet": xlnet_layer,                        # memory/blocks_xlnet.py: one-stream relative attention
    "reformer": reformer_layer,                  # memory/blocks_reformer.py: reversible layers keep nothing
    "blt": blt_global_layer,                     # memory/blocks_blt.py: the global layers over the patches
    "prophetnet": prophetnet_layer,              # memory/blocks_prophetnet.py: ProphetNetForCausalLM's decoder
    **{t: step3p7_block for t in STEP3P7},       # memory/blocks_step3p7.py: Step 3.7's step3p5 text model
    **{t: muse_spark_block for t in MUSE_SPARK},  # memory/blocks_muse_spark.py: Muse Spark's text model
    **{t: zaya_block for t in ZAYA},             # memory/blocks_zaya.py: ZAYA1
    **INKLING_RULES,                             # memory/blocks_inkling.py: Inkling's text model
    **INKLING2_RULES,                            # memory/blocks_inkling2.py: Inkling 2 / 2 Loop's
    **{t: qwen4_exp_layer for t in QWEN4_EXP},   # memory/blocks_qwen4_exp.py: Qwen4-Exp's text model
    **{t: kimi_linear_block for t in KIMI_LINEAR},  # memory/blocks_kimi_linear.py: KDA / MLA / MoE layers
    **{t: hy_v4_block for t in HY_V4},           # memory/blocks_hy_v4.py: HY-V4 and HY-V4-VL's language model
    **{t: glm5_next_layer for t in GLM5_NEXT},   # memory/blocks_glm5_next.py: GLM-5.3-Flash's language model
    **{t: kosmos_layer for t in KOSMOS},         # memory/blocks_kosmos.py: Kosmos-2 / 2.5's text decoders
    **G4A_RULES,                                 # memory/blocks_gemma4_assistant.py: Gemma 4's MTP assistant
    **EVOLLA_RULES,                              # memory/blocks_evolla.py: the Llama layers and their adapters
}
# memory/blocks_hrm.py ONEOFF_HEADS (memory/activations.py _head_saved): what these keep around their layers
MORE_HEADS: dict = {"cpmant": cpmant_head, "xlnet": xlnet_head, "reformer": reformer_head, "blt": blt_head,
                    **INKLING_HEADS, **INKLING2_HEADS, **G4A_HEADS,
                    **AXK2_HEADS, **DOTS3_HEADS}   # memory/blocks_axk2.py rmsnorm_head: model.norm is Llama's RMSNorm


def no_autocast_copy(arch: ModelArch, tt: Tensor) -> bool:
    """A linear weight autocast keeps no 16-bit copy of under full fine-tuning (memory/activations.py's
    autocast_weight_copies): Reformer's layers, which run their forward under torch.no_grad (autocast caches nothing
    there) and their recompute in backward outside autocast (memory/blocks_reformer.py; traced: the -mixed rows keep
    lm_head's copy only); BLT's frozen patcher, whose copies die with its forward (memory/blocks_blt.py)."""
    if arch.model_type == "reformer":
        return bool(tt.block)
    return arch.model_type == "blt" and tt.name.startswith("model.patcher.")


def checkpointed_more(arch: ModelArch, c: Ctx) -> int:
    """Full checkpointing beside memory/activations.py's stack of layer inputs (memory/blocks_hrm.py's HRM-Text
    final norms besides): BLT's local layers, whose saved sets memory/blocks_blt.py books around the blocks, keep
    only their inputs, and its global layers run over the patches (blocks_blt.blt_checkpointed)."""
    return blt_checkpointed(arch, c) if arch.model_type == "blt" else 0
