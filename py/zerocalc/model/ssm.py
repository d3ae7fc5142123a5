"""State-space models: Mamba (modeling_mamba.py MambaForCausalLM, transformers 5.24), every block a selective
SSM mixer with no attention: ``backbone.layers.N.norm`` (RMSNorm) and ``mixer`` = A_log (I x N), D (I),
depthwise conv1d (I, 1, conv_kernel) with use_conv_bias, in_proj (h -> 2I, use_bias), x_proj (I -> R + 2N),
dt_proj (R -> I, biased), out_proj (I -> h, use_bias); ``backbone.norm_f``; lm_head tied by default.
I = intermediate_size (expand x h), N = state_size, R = time_step_rank ("auto": ceil(h / 16)).

The parameter count is exact (tests/test_architectures.py); the activations are not modelled for the scan
(the block is costed as a classic block of the same linears: ``support`` says so)."""
from __future__ import annotations

import math

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList


def mamba(c: ConfigReader) -> ModelArch:
    h = c.int("hidden_size")
    n_layers = c.int("num_hidden_layers")
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size", default=int(c.cfg.get("expand", 2) * h))
    n = c.int("state_size", default=16)
    k = c.int("conv_kernel", default=4)
    r = c.cfg.get("time_step_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else c.int("time_step_rank")
    bias, conv_bias = c.bool("use_bias", False), c.bool("use_conv_bias", True)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("backbone.embeddings", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        b.norm(f"{p}.norm", h)
        m = f"{p}.mixer"
        b.matrix(m, "A_log", (inter, n), "mlp")
        b.param(m, "D", inter, "mlp")
        b.matrix(f"{m}.conv1d", "weight", (inter, 1, k), "mlp")
        if conv_bias:
            b.param(f"{m}.conv1d", "bias", inter, "mlp")
        b.linear(f"{m}.in_proj", h, 2 * inter, "mlp", bias=bias)
        b.linear(f"{m}.x_proj", inter, r + 2 * n, "mlp")
        b.linear(f"{m}.dt_proj", r, inter, "mlp", bias=True)
        b.linear(f"{m}.out_proj", inter, h, "mlp", bias=bias)
    b.norm("backbone.norm_f", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("in_proj", h, 2 * inter), Linear("x_proj", inter, r + 2 * n), Linear("dt_proj", r, inter),
            Linear("out_proj", inter, h))
    return ModelArch(
        name=c.str("name", "mamba"), model_type="mamba", family="mamba", hidden_size=h, num_layers=n_layers,
        num_heads=1, num_kv_heads=1, head_dim=h, intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=None, gated_mlp=False, norm="rmsnorm", norms_per_layer=1, qk_norm="", causal_lm=True,
        moe=None, mla=None, attn_softcap=False, final_softcap=False, dropout=0.0, tensors=tuple(b.tensors),
        block_linears=lins, dense_block_linears=lins,
        support="exact parameter count; activations approximate (the selective scan is costed as a classic block)")
