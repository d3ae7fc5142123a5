"""Beam (transformers 5.24 modeling_beam.py BeamForCausalLM): per layer (BeamDecoderLayer)

- self_attn: q/k/v/o (attention_bias), per-head q_norm / k_norm (head_dim), the output gate gate_proj (h -> heads
  x d, no bias) and its gate_bias (heads);
- mlp: a SwiGLU MLP of intermediate_size in the ``dense`` layers of mlp_layer_types (BeamConfig's default: the
  first min(3, layers)), else BeamMoE: experts (E, 2I, h) / (E, h, I) and the fp32 gate (E x h, F.linear(x.float(),
  w.float()); e_score_correction_bias a buffer), no shared expert;
- Gemma 2's four norms (input, post_attention, pre_feedforward, post_feedforward).

``model.norm``; lm_head untied by default.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_moe.py beam_block, traced
(tools/memtrace/moe_trace.py beam, tests/test_beam_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import moe_block
from .recurrent import recurrent_arch


def beam(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=5120), c.int("vocab_size", default=151936)
    n_layers, heads = c.int("num_hidden_layers", default=52), c.int("num_attention_heads", default=48)
    kv, hd = c.int("num_key_value_heads", default=8), c.int("head_dim", default=128)
    inter, ei = c.int("intermediate_size", default=20480), c.int("moe_intermediate_size", default=2560)
    kinds = c.cfg.get("mlp_layer_types")
    if not isinstance(kinds, list):
        kinds = ["dense"] * min(3, n_layers) + ["sparse"] * (n_layers - min(3, n_layers))
    e = c.int("num_experts", default=256)
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=8), expert_intermediate=ei,
              shared_intermediate=0, dense_layers=sum(k != "sparse" for k in kinds), router_fp32="cast")
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=bias)
        b.norm(f"{a}.q_norm", hd)
        b.norm(f"{a}.k_norm", hd)
        b.linear(f"{a}.gate_proj", h, heads * hd, "attention")
        b.param(a, "gate_bias", heads, "attention")
        if kinds[i] == "sparse":
            moe_block(b, p, h, moe, "deepseek", [])
        else:
            b.swiglu(f"{p}.mlp", h, inter)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    # the attention's output gate under its module's prefix (its leaf, gate_proj, is the MLP's too: memory/lora.py
    # matches leaves, as PEFT's target_modules)
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("self_attn.gate_proj", h, heads * hd), Linear("o_proj", heads * hd, h))
    lins = attn + (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    sparse = attn + (Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e))
    arch = recurrent_arch(c, "beam", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=kv, hd=hd, inter=inter, moe=moe, what="")
    # memory/blocks_moe.py beam_block; the Llama lineage's head (final RMSNorm with the fp32 product: blocks.py
    # FP32_PRODUCT_NORMS) and rope
    # BeamConfig.final_logit_softcapping defaults to 30 (None turns it off)
    softcap = c.cfg.get("final_logit_softcapping", 30.0) is not None
    return replace(arch, family="llama", gated_mlp=True, norms_per_layer=4, block_linears=sparse, final_softcap=softcap,
                   dense_block_linears=lins,
                   layer_linears=tuple(sparse if k == "sparse" else lins for k in kinds),
                   support="exact")      # activations: tools/memtrace/moe_trace.py beam (tests/test_beam_blocks.py)


BEAM = {"beam": beam}
