"""What a text-only step of ERNIE-4.5-VL-MoE (transformers 5.24 modeling_ernie4_5_vl_moe.py) does differently from
ERNIE-4.5-MoE's language model, whose blocks memory/blocks.py costs:

- Ernie4_5_VLMoeMoeBlock.forward runs ``text_moe`` alone when no token is an image token
  (`moe_mm_token_type_ids is not None and moe_mm_token_type_ids.any()` false): the vision experts and their
  router (``mlp.vision_moe``) take no gradient, so no optimizer state either (torch AdamW skips a parameter whose
  .grad is None);
- Ernie4_5_VLMoeTextRotaryEmbedding.forward builds the 3-D rope's cos and sin per sample in fp32
  (`position_ids.expand(3, -1, -1)`, `.float()`, never cast back): (b, s, head_dim) each, which the rotation keeps
  (and full checkpointing keeps as every layer's input), not the Llama lineage's (1, s, head_dim) in the stream's
  dtype.

Traced: tools/memtrace/families.py ernie_vl (tools/memtrace/golden/families/ernie_vl-*, held within 3 % by
tests/test_family_grid.py). A step fed image tokens routes them to the vision experts, not modelled: model/
vision_ernie.py's ``support`` says so."""
from __future__ import annotations

from ..model import ModelArch

MODEL_TYPE = "ernie4_5_vl_moe"


def text_only_idle(arch: ModelArch, images_fed: bool) -> list:
    """The vision experts and their router, idle in a step without image tokens."""
    if arch.model_type != MODEL_TYPE or images_fed:
        return []
    return [t for t in arch.tensors if ".mlp.vision_moe." in t.name]


def rope_cos_sin(arch: ModelArch, seq: int, batch: int, emb: int) -> int:
    """The rotary embedding's cos and sin kept for the rotation: fp32 (b, s, head_dim) each for ERNIE-4.5-VL's 3-D
    rope, else the Llama lineage's (1, s, head_dim) in the embedding output's dtype ``emb``."""
    if arch.model_type == MODEL_TYPE:
        return 2 * 4 * batch * seq * arch.head_dim
    return 2 * emb * seq * arch.head_dim


IMAGE_TOKENS = ("exact parameter count; activations approximate (the vision experts, which only image tokens reach, "
                "are costed with the text experts)")


def fed_support(arch: ModelArch, images_fed: bool) -> str:
    """The model's ``support``, or for ERNIE-4.5-VL fed image tokens the vision experts' approximation (a text-only
    step is traced)."""
    return IMAGE_TOKENS if arch.model_type == MODEL_TYPE and images_fed and arch.support == "exact" else arch.support
