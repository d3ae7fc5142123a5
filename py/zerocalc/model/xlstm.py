"""xLSTM (transformers 5.24 modeling_xlstm.py xLSTMForCausalLM, the built-in mLSTM blocks): ``backbone.embeddings``
(vocab x embedding_dim), num_blocks xLSTMBlock = norm_mlstm, mlstm_layer, norm_ffn, ffn; ``backbone.out_norm``;
lm_head (never tied: the class declares no tied weights).

- mlstm_layer (xLSTMLayer), qk = int(h x qk_dim_factor), v = int(h x v_dim_factor): weight_mode "single": q, k
  (h -> qk), v, ogate_preact (h -> v), igate_preact and fgate_preact (h -> num_heads, always biased); "fused":
  qkv_opreact (h -> 2 qk + 2 v), ifgate_preact (h -> 2 num_heads, biased); then multihead_norm (v) and out_proj
  (v -> h). use_bias biases the other linears and every norm.
- ffn (xLSTMFeedForward), up = h x ffn_proj_factor rounded up to ffn_round_up_to_multiple_of: "single":
  proj_up_gate and proj_up (h -> up), "fused": proj_up_gate_z (h -> 2 up); proj_down (up -> h).

The count is exact (tests/test_architectures.py). Activations: the mLSTM recurrence is not traced; the block is
costed as a classic block of the same linears, which ``support`` says.
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch


def xlstm(c: ConfigReader) -> ModelArch:
    h = c.int("hidden_size", "embedding_dim", default=4096)
    n_layers = c.int("num_blocks", "num_hidden_layers", default=32)
    vocab, heads = c.int("vocab_size", default=50304), c.int("num_heads", default=8)
    bias, fused = c.bool("use_bias", False), c.str("weight_mode", "single") == "fused"
    qk, v = int(h * c.cfg.get("qk_dim_factor", 0.5)), int(h * c.cfg.get("v_dim_factor", 1.0))
    m = c.int("ffn_round_up_to_multiple_of", default=64)
    up = int(((h * c.cfg.get("ffn_proj_factor", 2.667) + m - 1) // m) * m)   # round_up_to_next_multiple_of
    b = TensorList()
    b.matrix("backbone.embeddings", "weight", (vocab, c.int("embedding_dim", default=h)), "embedding")
    for i in range(n_layers):
        p = f"backbone.blocks.{i}"
        ml, ff = f"{p}.mlstm_layer", f"{p}.ffn"
        b.norm(f"{p}.norm_mlstm", h, bias=bias)
        if fused:
            b.linear(f"{ml}.qkv_opreact", h, 2 * qk + 2 * v, "attention", bias=bias)
            b.linear(f"{ml}.ifgate_preact", h, 2 * heads, "attention", bias=True)
        else:
            for name, d_out in (("q", qk), ("k", qk), ("v", v), ("ogate_preact", v)):
                b.linear(f"{ml}.{name}", h, d_out, "attention", bias=bias)
            b.linear(f"{ml}.igate_preact", h, heads, "attention", bias=True)
            b.linear(f"{ml}.fgate_preact", h, heads, "attention", bias=True)
        b.norm(f"{ml}.multihead_norm", v, bias=bias)
        b.linear(f"{ml}.out_proj", v, h, "attention", bias=bias)
        b.norm(f"{p}.norm_ffn", h, bias=bias)
        if fused:
            b.linear(f"{ff}.proj_up_gate_z", h, 2 * up, "mlp", bias=bias)
        else:
            b.linear(f"{ff}.proj_up_gate", h, up, "mlp", bias=bias)
            b.linear(f"{ff}.proj_up", h, up, "mlp", bias=bias)
        b.linear(f"{ff}.proj_down", up, h, "mlp", bias=bias)
    b.norm("backbone.out_norm", h)
    b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    qkv = (Linear("qkv_opreact", h, 2 * qk + 2 * v),) if fused else (
        Linear("q", h, qk), Linear("k", h, qk), Linear("v", h, v), Linear("ogate_preact", h, v))
    ffn = (Linear("proj_up_gate_z", h, 2 * up),) if fused else (Linear("proj_up_gate", h, up),)
    lins = qkv + (Linear("out_proj", v, h),) + ffn + (Linear("proj_up", h, up), Linear("proj_down", up, h))
    arch = recurrent_arch(c, "xlstm", b, h=h, n_layers=n_layers, vocab=vocab, tied=False, lins=lins, heads=heads,
                          hd=v // heads, inter=up, what="mLSTM recurrence is")
    # xLSTMForCausalLM.forward: `logits = soft_cap(lm_head(x).float(), config.output_logit_soft_cap)`, cap *
    # tanh(x / cap): the fp32 tanh output is kept (memory/logits.py; traced with tools/memtrace/ssm_trace.py's
    # stand-ins at h 1024, bf16-mixed b 2 s 512: logits 0.768 GiB, the engine 0.576 without the cap)
    arch = replace(arch, final_softcap=c.cfg.get("output_logit_soft_cap", 30.0) is not None)
    if fused:
        return arch
    # activations: memory/ssm_hybrids.py xlstm_layer (held to tests/data/xlstm_trace.json)
    dims = {"layout": "xlstm", "heads": heads, "qk": qk, "v": v, "chunk": c.int("chunk_size", default=64),
            "residual_fp32": False}
    return replace(arch, ssm=dims, gated_mlp=True, support="exact")


XLSTM = {"xlstm": xlstm}
