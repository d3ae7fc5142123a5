"""HRM-Text (transformers 5.24 modeling_hrm_text.py HrmTextForCausalLM): ``model.embed_tokens``; two stacks,
``model.L_module`` and ``model.H_module`` (HrmTextStack), each of ``num_layers_per_stack`` HrmTextDecoderLayers:
self_attn = q/k/v/o (heads x head_dim, MHA: every projection heads x d wide, attention_bias) and the sigmoid output
gate gate_proj (h -> heads x d, attention_bias); mlp gate/up/down (mlp_bias). HrmTextRMSNorm has no weight (the
layers' two norms and each stack's final_norm). ``model.z_L_init`` (h, requires_grad=False, still a parameter);
lm_head untied by default. HrmTextConfig.__post_init__: without num_layers_per_stack, num_hidden_layers is the
per-stack count (and is then rewritten to num_layers_per_stack x H_cycles x (L_cycles + 1)).

The count is exact (tests/test_architectures.py). Activations: memory/blocks_hrm.py's layer per layer call that
keeps its graph (HrmTextModel.forward runs the first L_cycles - L_bp_cycles_padded[h] inner L passes of each high
cycle under torch.no_grad; the rest and the H pass keep theirs): the weightless fp32 norms, the sigmoid attention
gate and each stack call's final_norm, traced within 1 % (tools/memtrace/oneoff.py, tests/test_oneoff_grid.py).
"""
from __future__ import annotations

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def hrm_text(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size"), c.int("vocab_size")
    stack = c.int("num_layers_per_stack", "num_hidden_layers", default=16)
    heads = c.int("num_attention_heads")
    hd = c.int("head_dim", default=128)
    inter = c.int("intermediate_size")
    att_bias, mlp_bias = c.bool("attention_bias", False), c.bool("mlp_bias", False)
    tied = c.bool("tie_word_embeddings", False)
    hi, lo = c.int("H_cycles", default=2), c.int("L_cycles", default=3)
    raw = c.cfg.get("L_bp_cycles")
    raw = [int(x) for x in raw] if isinstance(raw, list) else [1]
    bp = [1] * max(0, hi - len(raw)) + raw
    graph_calls = sum(min(lo, bp[i] if i < len(bp) else 1) + 1 for i in range(hi)) * stack
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for mod in ("L_module", "H_module"):
        for i in range(stack):
            p = f"model.{mod}.layers.{i}"
            a = f"{p}.self_attn"
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, heads * hd),
                                      ("v_proj", h, heads * hd), ("o_proj", heads * hd, h),
                                      ("gate_proj", h, heads * hd)):
                b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=att_bias)
            for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
                b.linear(f"{p}.mlp.{name}", d_in, d_out, "mlp", bias=mlp_bias)
    b.param("model", "z_L_init", h, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, heads * hd), Linear("v_proj", h, heads * hd),
            Linear("o_proj", heads * hd, h), Linear("gate_proj", h, heads * hd), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    return recurrent_arch(c, "hrm_text", b, h=h, n_layers=graph_calls, vocab=vocab, tied=tied, lins=lins,
                          heads=heads, kv=heads, hd=hd, inter=inter, support="exact",
                          what="gated-attention layer calls that keep their graph are")


HRM_TEXT = {"hrm_text": hrm_text}
