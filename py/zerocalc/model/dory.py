"""Dory (transformers 5.24 modeling_dory.py DoryForCausalLM): nGPT-style layers on the unit sphere. Per layer
self_attn = q/k/v/o (attention_bias), the output gate gate_proj (h -> heads x d, no bias) and the per-channel
scales sqk, s_gate (heads x d); mlp = gate/up/down (mlp_bias) and suv_gate, suv_up (intermediate_size); the
residual rates lambda_1, lambda_2 (h). Every norm is a weightless DoryL2Norm. lm_head is DoryLMHead: the vocab x h
weight (tied to the embedding only with tie_word_embeddings, default off) and its own logit_scale (vocab).
DoryConfig.__post_init__: a released config.json lists attention and mlp as separate layer_types entries, so with
"mlp" in layer_types the list keeps every other entry and num_hidden_layers, n_input_layers, n_output_layers and
n_recurrent_layers are halved.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_dory.py per layer call
(DoryModel.forward runs the n_recurrent_layers middle layers n_recurrent_loops times), traced
(tools/memtrace/oneoff.py, tests/test_oneoff_grid.py).
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def dory(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=2560), c.int("vocab_size", default=131072)
    n_layers = c.int("num_hidden_layers", default=36)
    n_in, n_out = c.int("n_input_layers", default=8, lo=0), c.int("n_output_layers", default=8, lo=0)
    n_rec = c.cfg.get("n_recurrent_layers")
    kinds = c.cfg.get("layer_types")
    if isinstance(kinds, list) and "mlp" in kinds:
        n_layers, n_in, n_out = n_layers // 2, n_in // 2, n_out // 2
        n_rec = n_rec // 2 if isinstance(n_rec, int) else None
        kinds = kinds[::2]
    if not isinstance(kinds, list):
        # DoryConfig.__post_init__'s default: every 4th layer full attention, the others sliding
        kinds = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n_layers)]
    n_rec = n_rec if isinstance(n_rec, int) else n_layers - n_in - n_out
    loops = c.int("n_recurrent_loops", default=2)
    heads = c.int("num_attention_heads", default=16)
    kv, hd = c.int("num_key_value_heads", default=4), c.int("head_dim", default=256)
    inter = c.int("intermediate_size", default=7168)
    att_bias, mlp_bias = c.bool("attention_bias", False), c.bool("mlp_bias", False)
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        b.param(p, "lambda_1", h, "other")
        b.param(p, "lambda_2", h, "other")
        b.param(a, "sqk", heads * hd, "attention")
        b.param(a, "s_gate", heads * hd, "attention")
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=att_bias)
        b.linear(f"{a}.gate_proj", h, heads * hd, "attention")
        b.param(f"{p}.mlp", "suv_gate", inter, "mlp")
        b.param(f"{p}.mlp", "suv_up", inter, "mlp")
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{p}.mlp.{name}", d_in, d_out, "mlp", bias=mlp_bias)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    b.param("lm_head", "logit_scale", vocab, "lm_head")
    lins = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("gate_proj", h, heads * hd), Linear("o_proj", heads * hd, h), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    arch = recurrent_arch(c, "dory", b, h=h, n_layers=n_layers + (loops - 1) * n_rec, vocab=vocab, tied=tied,
                          lins=lins, heads=heads, kv=kv, hd=hd, inter=inter, support="exact",
                          what="looped nGPT layers are")
    # activations: memory/blocks_dory.py per layer call, the model.norm calls and one RoPE table per attention type
    return replace(arch, looped={"loops": loops, "rope_types": len(set(kinds[:n_layers]))})


DORY = {"dory": dory}
