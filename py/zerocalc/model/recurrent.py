"""Recurrent language models without a Llama block, as transformers 5.24 registers them:

- RWKV (modeling_rwkv.py RwkvForCausalLM): ``rwkv.embeddings``; per block ``pre_ln`` (block 0 only), ln1,
  ln2 (nn.LayerNorm, weight + bias), attention = time_decay, time_first (attention_hidden_size, A),
  time_mix_key / value / receptance (1, 1, h), key / value / receptance (h -> A), output (A -> h);
  feed_forward = time_mix_key / receptance, key (h -> I), receptance (h -> h), value (I -> h); no biases;
  ``rwkv.ln_out``; ``head`` unless tie_word_embeddings (default off). A defaults to h, I to 4h.
- RecurrentGemma (modeling_recurrent_gemma.py, Griffin): per ``block_types`` entry (cycled over the layers,
  RecurrentGemmaConfig.layers_block_type) temporal_pre_norm, a temporal block, channel_pre_norm and
  mlp_block (gate/up/down of intermediate_size // 2, biased). The recurrent block: linear_y, linear_x
  (h -> lru_width W, biased), linear_out (W -> h), depthwise conv_1d (W, 1, conv1d_width) with bias, rg_lru =
  recurrent_param (W), input / recurrent gate weights (heads, W/heads, W/heads) and biases (heads, W/heads).
  The attention block: q/k/v (attention_bias), o_proj with a bias. final_norm; lm_head tied by default.

The parameter counts are exact (tests/test_architectures.py). Activations: the recurrences are not traced;
their blocks are costed by memory/blocks.py classic_block over the block's linears (the "mamba" family, as
ssm.py's models), which ``support`` says, so advice's model-approximate warning names the model.
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList

APPROX = ("exact parameter count; activations approximate (the {what} costed as a classic block of the same "
          "linears; not traced)")


def llama_lins(h: int, heads: int, kv: int, hd: int, inter: int) -> tuple[Linear, ...]:
    """A Llama block's linears for recurrent_arch's ``lins``: q/k/v/o_proj, then the gated MLP's three."""
    return (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h), Linear("gate_proj", h, inter), Linear("up_proj", h, inter),
            Linear("down_proj", inter, h))


def recurrent_arch(c: ConfigReader, model_type: str, b: TensorList, *, h: int, n_layers: int, vocab: int,
                   tied: bool, lins: tuple[Linear, ...], what: str, heads: int = 1, kv: int = 1, hd: int = 0,
                   inter: int = 0, norm: str = "rmsnorm", moe: MoE | None = None, family: str = "mamba",
                   support: str = "") -> ModelArch:
    """The ModelArch of a block costed as memory/blocks.py classic_block: ``lins`` ends with the block's
    up / down projection (classic_block's MLP), the others are its input projections."""
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family=family, hidden_size=h,
        num_layers=n_layers, num_heads=heads, num_kv_heads=kv, head_dim=hd or h // heads,
        intermediate_size=inter or 4 * h, vocab_size=vocab, tied_embeddings=tied,
        max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=False, norm=norm, norms_per_layer=2,
        qk_norm="", causal_lm=True, moe=moe, mla=None, attn_softcap=False, final_softcap=False, dropout=0.0,
        tensors=tuple(b.tensors), block_linears=lins, dense_block_linears=lins,
        support=support or APPROX.format(what=what))


def rwkv(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    a = c.int("attention_hidden_size", default=h)
    inter = c.int("intermediate_size", default=4 * h)
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("rwkv.embeddings", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"rwkv.blocks.{i}"
        for name in ("pre_ln", "ln1", "ln2") if i == 0 else ("ln1", "ln2"):
            b.norm(f"{p}.{name}", h, bias=True)
        at, ff = f"{p}.attention", f"{p}.feed_forward"
        b.param(at, "time_decay", a, "attention")
        b.param(at, "time_first", a, "attention")
        for name in ("time_mix_key", "time_mix_value", "time_mix_receptance"):
            b.matrix(at, name, (1, 1, h), "attention")
        for name in ("key", "value", "receptance"):
            b.linear(f"{at}.{name}", h, a, "attention")
        b.linear(f"{at}.output", a, h, "attention")
        for name in ("time_mix_key", "time_mix_receptance"):
            b.matrix(ff, name, (1, 1, h), "mlp")
        b.linear(f"{ff}.key", h, inter, "mlp")
        b.linear(f"{ff}.receptance", h, h, "mlp")
        b.linear(f"{ff}.value", inter, h, "mlp")
    b.norm("rwkv.ln_out", h, bias=True)
    if not tied:
        # RwkvForCausalLM.head: tools/archgen files it under "other" (not named lm_head)
        b.matrix("head", "weight", (vocab, h), "other", "head")
    lins = (Linear("key", h, a), Linear("value", h, a), Linear("receptance", h, a), Linear("output", a, h),
            Linear("receptance", h, h), Linear("key", h, inter), Linear("value", inter, h))
    arch = recurrent_arch(c, "rwkv", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          what="time-mix recurrence is", inter=inter, norm="layernorm")
    # activations: memory/ssm_hybrids.py rwkv_layer (time mixing, then channel mixing: lins in that order), held to
    # tests/data/rwkv_trace.json
    return replace(arch, ssm={"layout": "rwkv", "residual_fp32": False}, support="exact")


def recurrent_gemma(c: ConfigReader) -> ModelArch:
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), h // heads
    w = c.int("lru_width", default=h)
    kernel = c.int("conv1d_width", default=4)
    mlp = c.int("intermediate_size", default=3 * h) // 2
    att_bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", True)
    kinds = c.cfg.get("block_types") or ["recurrent", "recurrent", "attention"]
    kinds = (list(kinds) * (n_layers // len(kinds) + 1))[:n_layers]
    bw = w // heads
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        t = f"{p}.temporal_block"
        b.norm(f"{p}.temporal_pre_norm", h)
        if kind == "recurrent":
            b.linear(f"{t}.linear_y", h, w, "attention", bias=True)
            b.linear(f"{t}.linear_x", h, w, "attention", bias=True)
            b.linear(f"{t}.linear_out", w, h, "attention", bias=True)
            b.matrix(f"{t}.conv_1d", "weight", (w, 1, kernel), "attention")
            b.param(f"{t}.conv_1d", "bias", w, "attention")
            r = f"{t}.rg_lru"
            b.param(r, "recurrent_param", w, "attention")
            for gate in ("input_gate", "recurrent_gate"):
                b.matrix(r, f"{gate}_weight", (heads, bw, bw), "attention")
                b.matrix(r, f"{gate}_bias", (heads, bw), "attention")
        else:
            b.qkv(t, h, heads, kv, hd, att_bias)
            b.linear(f"{t}.o_proj", heads * hd, h, "attention", bias=True)
        b.norm(f"{p}.channel_pre_norm", h)
        for name, d_in, d_out in (("gate_proj", h, mlp), ("up_proj", h, mlp), ("down_proj", mlp, h)):
            b.linear(f"{p}.mlp_block.{name}", d_in, d_out, "mlp", bias=True)
    b.norm("model.final_norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("linear_y", h, w), Linear("linear_x", h, w), Linear("linear_out", w, h),
            Linear("gate_proj", h, mlp), Linear("up_proj", h, mlp), Linear("down_proj", mlp, h))
    arch = recurrent_arch(c, "recurrent_gemma", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          what="RG-LRU recurrence and local attention are", heads=heads, kv=kv, hd=hd, inter=mlp)
    # activations: memory/ssm_blocks.py recurrent_gemma_layer, per layer its kind's linears (held to
    # tests/data/recurrent_gemma_trace.json); RecurrentGemmaForCausalLM soft-caps the logits (tanh(x / cap) * cap)
    mlp_lins = lins[3:]
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h)) + mlp_lins
    rope = int(hd * (c.cfg.get("rope_parameters") or {}).get("partial_rotary_factor", 0.5))
    dims = {"layout": "recurrent_gemma", "lru_width": w, "block_width": bw, "conv_width": kernel,
            "residual_fp32": False, "fp32_norm": "one_plus", "layer_rope_dim": rope,
            "layers": tuple(lins if kind == "recurrent" else attn for kind in kinds)}
    return replace(arch, ssm=dims, gated_mlp=True, final_softcap=c.cfg.get("logits_soft_cap") is not None,
                   support="exact")


RECURRENT = {"rwkv": rwkv, "recurrent_gemma": recurrent_gemma}
