"""Qwen4-Exp's language model (transformers 5.24 modeling_qwen4_exp.py Qwen4ExpForCausalLM, Qwen4ExpTextConfig):
``model.embed_tokens``; per layer (Qwen4ExpTextDecoderLayer)

- in ``linear_attention`` layers Gated DeltaNet (linear_attn: conv1d over 2K + V, no bias; dt_bias, A_log (value
  heads); a gated norm (value head dim); out_proj; in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), elsewhere
  (``indexed_attention``; a checkpoint's "full_attention" reads as it) self_attn: q_proj (h -> 2 x heads x d: query
  and gate), k/v/o (attention_bias), q_norm / k_norm (d) and the QSA indexer (index_qk_proj h -> (indexer_n_heads
  + indexer_kv_heads) x indexer_head_dim, q_layernorm / k_layernorm); layer_types default: indexed attention at
  every full_attention_interval-th (4) layer;
- mlp in every layer Qwen2-MoE's layout (moe.moe_block "qwen2_moe": gate E x h, experts (E, 2I, h) / (E, h, I),
  shared_expert of shared_expert_intermediate_size, shared_expert_gate h -> 1);
- at 1-indexed ple_layer_ids (default none) the PLE layer: the n-gram embedding ((ngram_size - 1) x
  heads_per_ngram heads, head i of PLE layer j of vocabulary the (j x heads + i + 1)-th prime after
  ngram_vocab_size_base - 1, summed and padded to make_ngram_vocab_size_divisible_by; width ple_embed_dim // heads),
  key_proj (ple_embed_dim -> hc x h), value_proj (-> h), norm_key / norm_query / norm_conv (hc x h) and a
  dilated depthwise conv1d (hc x h, 1, ple_conv_kernel_size), no biases;
- attn_hyper_connection and mlp_hyper_connection (Qwen4ExpTextGatedResidual: hc_norm (hc x h), input_mix_weight_down
  hc x h -> hc_lowrank, input_mix_weight_up back, block_inject_weight hc x h -> hc_count);

then ``model.hyper_connection_mixer`` (the same without block_inject_weight; there is no final norm); lm_head untied
by default. The composite qwen4_exp (with its vision tower) is not modelled here.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_qwen4_exp.py, traced
(tools/memtrace/qwen4_trace.py, tests/test_qwen4_exp_blocks.py), the composite's language model too; a PLE layer
is costed without its PLE module (not traced), which ``support`` says.
"""
from __future__ import annotations

import math
from functools import lru_cache

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import moe_block
from .recurrent import recurrent_arch


SUPPORT = ("exact parameter count; activations traced (memory/blocks_qwen4_exp.py: the hyper connections, Gated "
           "DeltaNet, QSA-indexed attention and Qwen2-MoE experts; tools/memtrace/qwen4_trace.py)")
# the per-layer embedding (Qwen4ExpTextPLELayer) is not traced: said only where a config has PLE layers
PLE_SUPPORT = "; PLE layers (ple_layer_ids) are not traced and are costed without their PLE module"


@lru_cache(maxsize=8)
def _primes_after(start: int, count: int) -> tuple[int, ...]:
    """The first ``count`` primes above ``start`` (modeling_qwen4_exp.py _find_nth_prime_after / _is_prime)."""
    out, v = [], start
    while len(out) < count:
        v += 1
        if v >= 2 and (v == 2 or v % 2) and all(v % d for d in range(3, math.isqrt(v) + 1, 2)):
            out.append(v)
    return tuple(out)


def qwen4_exp_text(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=2048), c.int("vocab_size", default=248320)
    n_layers, heads = c.int("num_hidden_layers", default=40), c.int("num_attention_heads", default=16)
    kv, hd = c.int("num_key_value_heads", default=2), c.int("head_dim", default=256)
    nk, nv = c.int("linear_num_key_heads", default=16), c.int("linear_num_value_heads", default=32)
    dk, dv = c.int("linear_key_head_dim", default=128), c.int("linear_value_head_dim", default=128)
    kernel = c.int("linear_conv_kernel_dim", default=4)
    ih, ikv, idim = c.int("indexer_n_heads"), c.int("indexer_kv_heads"), c.int("indexer_head_dim")
    hc, low = c.int("hc_count", default=4), c.int("hc_lowrank", default=320)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        step = c.int("full_attention_interval", default=4)
        kinds = ["linear_attention" if (i + 1) % step else "indexed_attention" for i in range(n_layers)]
    ple_ids = sorted(set(int(x) for x in c.cfg.get("ple_layer_ids") or ()))
    ple_dim = c.int("ple_embed_dim", default=h)
    ngram_heads = (c.int("ngram_size", default=3) - 1) * c.int("heads_per_ngram", default=8)
    ei, si = c.int("moe_intermediate_size", default=512), c.int("shared_expert_intermediate_size", default=512)
    moe = MoE(num_experts=c.int("num_experts", default=512), experts_per_token=c.int("num_experts_per_tok", default=10),
              expert_intermediate=ei, shared_intermediate=si, dense_layers=0)
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    key, val = nk * dk, nv * dv
    wide = hc * h
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")

    def hyper(m: str, combine: bool = True) -> None:
        b.norm(f"{m}.hc_norm", wide)
        b.linear(f"{m}.input_mix_weight_down", wide, low, "other")
        b.linear(f"{m}.input_mix_weight_up", low, wide, "other")
        if combine:
            b.linear(f"{m}.block_inject_weight", wide, hc, "other")

    per_layer: list[tuple[Linear, ...]] = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        out: list[Linear] = []
        if kinds[i] == "linear_attention":
            a = f"{p}.linear_attn"
            b.matrix(f"{a}.conv1d", "weight", (2 * key + val, 1, kernel), "attention")
            b.param(a, "dt_bias", nv, "attention")
            b.param(a, "A_log", nv, "attention")
            b.norm(f"{a}.norm", dv)
            b.linear(f"{a}.out_proj", val, h, "attention")
            for name, d_out in (("in_proj_qkv", 2 * key + val), ("in_proj_z", val), ("in_proj_b", nv),
                                ("in_proj_a", nv)):
                b.linear(f"{a}.{name}", h, d_out, "attention")
                out.append(Linear(name, h, d_out))
            out.append(Linear("out_proj", val, h))
        else:
            a = f"{p}.self_attn"
            for name, d_in, d_out in (("q_proj", h, 2 * heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{a}.{name}", d_in, d_out, "attention", bias=bias)
                out.append(Linear(name, d_in, d_out))
            b.norm(f"{a}.q_norm", hd)
            b.norm(f"{a}.k_norm", hd)
            b.linear(f"{a}.indexer.index_qk_proj", h, (ih + ikv) * idim, "attention")
            b.norm(f"{a}.indexer.q_layernorm", idim)
            b.norm(f"{a}.indexer.k_layernorm", idim)
        moe_block(b, p, h, moe, "qwen2_moe", out)
        if i + 1 in ple_ids:
            j, e = ple_ids.index(i + 1), f"{p}.ple"
            base = c.int("ngram_vocab_size_base", default=20_000_000)
            rows = sum(_primes_after(base - 1, (j + 1) * ngram_heads)[j * ngram_heads:])
            div = c.int("make_ngram_vocab_size_divisible_by", default=128)
            b.matrix(f"{e}.ple_embedding.ngram_embedding", "weight", (-(-rows // div) * div, ple_dim // ngram_heads),
                     "embedding")
            b.linear(f"{e}.key_proj", ple_dim, wide, "other")
            b.linear(f"{e}.value_proj", ple_dim, h, "other")
            for name in ("norm_key", "norm_query", "norm_conv"):
                b.norm(f"{e}.{name}", wide)
            b.matrix(f"{e}.conv1d", "weight", (wide, 1, c.int("ple_conv_kernel_size", default=4)), "other")
        hyper(f"{p}.attn_hyper_connection")
        hyper(f"{p}.mlp_hyper_connection")
        out += [Linear("input_mix_weight_down", wide, low), Linear("input_mix_weight_up", low, wide),
                Linear("block_inject_weight", wide, hc)]
        per_layer.append(tuple(out))
    hyper("model.hyper_connection_mixer", combine=False)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = recurrent_arch(c, "qwen4_exp_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=per_layer[0],
                          heads=heads, kv=kv, hd=hd, inter=si, moe=moe, family="llama",
                          support=SUPPORT + (PLE_SUPPORT if ple_ids else ""), what="")
    rope = c.cfg.get("rope_parameters") or {}
    rot = int(hd * float(rope.get("partial_rotary_factor", 1.0) if isinstance(rope, dict) else 1.0))
    # activations: memory/blocks_qwen4_exp.py (the layers; its qwen4_outside through memory/blocks_hyper.py OTHERS)
    return replace(arch, layer_linears=tuple(per_layer), hyper={"hc_mult": hc, "lowrank": low, "rope": rot},
                   deltanet={"key": key, "value": val, "nk": nk, "nv": nv})


QWEN4_EXP = {"qwen4_exp_text": qwen4_exp_text}
