"""The text-only builders outside the Llama lineage's data rows, by model_type (merged into
model/__init__.py's dispatch): recurrent.py (RWKV, RecurrentGemma), zamba.py (Zamba, Zamba 2),
jetmoe.py (JetMoE), doge.py (Doge), olmo_hybrid.py, kimi_linear.py, xlstm.py, longcat.py, lfm3.py,
minimax_m3.py (MiniMax-M3's text model), hy_v4.py, deepseek_v4.py, zaya.py, inkling.py, hrm_text.py, dory.py,
gemma4_assistant.py, bailing_hybrid.py, axk2.py, qwen4_exp.py (Qwen4-Exp's text model), inkling2.py (Inkling 2
and 2 Loop's text models), dots3_note.py (dots.3 Note's text model), gemma3n.py (Gemma 3n's text model), beam.py, mistral_large4.py (Mistral Large 4's text model),
glm5_next.py (GLM-5.3-Flash's text model), step3p7.py (Step 3.7's step3p5 text model),
unlimited_ocr.py (Unlimited-OCR's text model), muse_spark.py (Muse Spark's)."""
from __future__ import annotations

from .axk2 import AXK2
from .bailing_hybrid import BAILING_HYBRID
from .beam import BEAM
from .deepseek_v4 import DEEPSEEK_V4
from .doge import DOGE
from .dory import DORY
from .dots3_note import DOTS3_NOTE
from .gemma3n import GEMMA3N
from .gemma4_assistant import GEMMA4_ASSISTANT
from .glm5_next import GLM5_NEXT
from .hrm_text import HRM_TEXT
from .hy_v4 import HY_V4
from .inkling import INKLING
from .inkling2 import INKLING2
from .jetmoe import JETMOE
from .kimi_linear import KIMI_LINEAR
from .lfm3 import LFM3
from .longcat import LONGCAT
from .minimax_m3 import MINIMAX_M3
from .mistral_large4 import MISTRAL_LARGE4
from .olmo_hybrid import OLMO_HYBRID
from .qwen4_exp import QWEN4_EXP
from .recurrent import RECURRENT
from .step3p7 import STEP3P5
from .unlimited_ocr import UNLIMITED_OCR
from .muse_spark import MUSE_SPARK
from .xlstm import XLSTM
from .zamba import ZAMBA
from .zaya import ZAYA

TEXT_MODELS = {**RECURRENT, **ZAMBA, **JETMOE, **DOGE, **OLMO_HYBRID, **KIMI_LINEAR, **XLSTM, **LONGCAT, **LFM3, **MINIMAX_M3,
               **HY_V4, **DEEPSEEK_V4, **ZAYA, **INKLING,
               **HRM_TEXT, **DORY, **GEMMA4_ASSISTANT,
               **BAILING_HYBRID, **AXK2, **QWEN4_EXP, **INKLING2,
               **DOTS3_NOTE, **GEMMA3N, **BEAM, **MISTRAL_LARGE4, **GLM5_NEXT, **STEP3P5, **UNLIMITED_OCR, **MUSE_SPARK}
