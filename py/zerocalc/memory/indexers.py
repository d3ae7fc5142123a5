"""The sparse-attention indexers whose parameters a training step never gives a gradient (transformers 5.24):

- DeepSeek-V3.2 (modeling_deepseek_v32.py DeepseekV32Indexer) and GLM-MoE-DSA (modeling_glm_moe_dsa.py
  GlmMoeDsaIndexer): forward is @torch.no_grad();
- Mistral Large 4 (modeling_mistral_large4.py MistralLarge4TextIndexer): @torch.no_grad() too;
- HY-V4 (modeling_hy_v4.py HYV4Indexer; HY-V4-VL's modeling_hy_v4_vl.py HYV4VLIndexer): @torch.no_grad() too;
- MiniMax-M3 (modeling_minimax_m3_vl.py MiniMaxM3VLIndexer): it returns top-k block indices only, so no gradient
  flows back (PEFT's adapters on its q_proj / k_proj, which the leaf names match, none either).
torch's AdamW skips a parameter whose .grad is None: no gradient, no optimizer state; memory/inputs.py holds these
tensors as frozen. Checked: a CPU backward of tiny deepseek_v32 and glm_moe_dsa models leaves every indexer
parameter's .grad None and no other; traced: tools/memtrace/families.py mistral_large4, minimax_m3sp (the
tracer's warm-up leaves them out, trace.py never_run)."""
from __future__ import annotations

from ..model import ModelArch

NO_GRAD_INDEXERS = frozenset({"deepseek_v32", "glm_moe_dsa", "mistral_large4", "mistral_large4_text",
                              "minimax_m3_vl", "minimax_m3_vl_text",
                              "qwen4_exp", "qwen4_exp_text", "hy_v4", "hy_v4_vl",
                              # modeling_glm5_next.py Glm5NextTextIndexer.forward: @torch.no_grad() (its k-pool
                              # compress_ape / compress_gate parameters too)
                              "glm5_next", "glm5_next_text"})


def no_grad_tensors(arch: ModelArch) -> list:
    """The indexer's parameters in every layer that has one."""
    if arch.model_type not in NO_GRAD_INDEXERS:
        return []
    return [t for t in arch.tensors if ".self_attn.indexer." in t.name]
