"""Gemma 3n's language model (transformers 5.24 modeling_gemma3n.py Gemma3nForCausalLM, Gemma3nTextConfig's
defaults): ``model.embed_tokens``; per layer (Gemma3nTextDecoderLayer)

- self_attn: q_proj, q_norm (head_dim) and o_proj; unless the layer reuses an earlier layer's K/V (the last
  num_kv_shared_layers: kv_sharing_modes "reuse") k_proj, v_proj and k_norm (v_norm has no weight); biases by
  attention_bias;
- the gated MLP of that layer's intermediate_size (a list, or one value for every layer) and Gemma 2's four norms;
- altup (correct_output_scale (h), correction_coefs n x n, prediction_coefs n -> n^2, modality_router h -> n,
  router_norm; n = altup_num_inputs), laurel (linear_left h -> laurel_rank, linear_right back, post_laurel_norm),
  per_layer_input_gate (h -> hidden_size_per_layer_input), per_layer_projection (back) and
  post_per_layer_input_norm; no biases;

then ``model.norm``, embed_tokens_per_layer (vocab_size_per_layer_input x layers x hidden_size_per_layer_input),
per_layer_model_projection (h -> layers x per-layer width), per_layer_projection_norm, and n - 1 altup_projections
and altup_unembed_projections (h x h each). lm_head tied by default. The composite gemma3n (vision and audio
towers) is not modelled here.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_gemma3n.py (AltUp's n streams, LAuReL,
activation sparsity, the per-layer inputs; traced: tools/memtrace/ssm_trace.py gemma3n_text).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import llama_lins, recurrent_arch


# the marker linear (0 x 0, no weight, no FLOPs) of a layer whose Gemma3nTextMLP has activation_sparsity > 0
# (_gaussian_topk), read by memory/blocks_gemma3n.py
SPARSE = "activation_sparsity"


def gemma3n_text(c: ConfigReader) -> ModelArch:
    h, n, vocab = c.int("hidden_size", default=2048), c.int("num_hidden_layers", default=35), c.int(
        "vocab_size", default=262400)
    heads, kv = c.int("num_attention_heads", default=8), c.int("num_key_value_heads", default=2)
    hd = c.int("head_dim", default=256)
    inter = c.cfg.get("intermediate_size", 16384)
    inters = [int(x) for x in inter] if isinstance(inter, list) else [c.int("intermediate_size", default=16384)] * n
    if len(inters) != n:    # Gemma3nTextConfig.__post_init__ raises the same
        raise PlanError("model.intermediate_size", f"needs one value per layer ({n}), got {len(inters)}")
    hpl, alt = c.int("hidden_size_per_layer_input", default=256), c.int("altup_num_inputs", default=4)
    rank = c.int("laurel_rank", default=64)
    shared = c.int("num_kv_shared_layers", default=15, lo=0)
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n):
        p, a, w = f"model.layers.{i}", f"model.layers.{i}.self_attn", inters[i]
        b.linear(f"{a}.q_proj", h, heads * hd, "attention", bias=bias)
        b.norm(f"{a}.q_norm", hd)
        if i < n - shared:
            b.linear(f"{a}.k_proj", h, kv * hd, "attention", bias=bias)
            b.linear(f"{a}.v_proj", h, kv * hd, "attention", bias=bias)
            b.norm(f"{a}.k_norm", hd)
        b.linear(f"{a}.o_proj", heads * hd, h, "attention", bias=bias)
        b.swiglu(f"{p}.mlp", h, w)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
        b.param(f"{p}.altup", "correct_output_scale", h, "other")
        b.linear(f"{p}.altup.correction_coefs", alt, alt, "other")
        b.linear(f"{p}.altup.prediction_coefs", alt, alt * alt, "other")
        b.linear(f"{p}.altup.modality_router", h, alt, "other")
        b.norm(f"{p}.altup.router_norm", h)
        b.linear(f"{p}.laurel.linear_left", h, rank, "other")
        b.linear(f"{p}.laurel.linear_right", rank, h, "other")
        b.norm(f"{p}.laurel.post_laurel_norm", h)
        b.linear(f"{p}.per_layer_input_gate", h, hpl, "other")
        b.linear(f"{p}.per_layer_projection", hpl, h, "other")
        b.norm(f"{p}.post_per_layer_input_norm", h)
    b.norm("model.norm", h)
    b.matrix("model.embed_tokens_per_layer", "weight", (c.int("vocab_size_per_layer_input", default=262144), n * hpl),
             "embedding")
    b.linear("model.per_layer_model_projection", h, n * hpl, "other")
    b.norm("model.per_layer_projection_norm", hpl)
    for group in ("altup_projections", "altup_unembed_projections"):
        for j in range(alt - 1):
            b.linear(f"model.{group}.{j}", h, h, "other")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    # activations: memory/blocks_gemma3n.py gemma3n_block, each layer its own linears (Gemma 4's, model/gemma4.py)
    sparsity = c.cfg.get("activation_sparsity_pattern") or [0.0] * n
    per_layer, interned = [], {}
    for i in range(n):
        w = inters[i]
        att = [Linear("q_proj", h, heads * hd)]
        if i < n - shared:
            att += [Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd)]
        att += [Linear("o_proj", heads * hd, h), Linear("gate_proj", h, w), Linear("up_proj", h, w),
                Linear("down_proj", w, h), Linear("modality_router", h, alt),
                Linear("prediction_coefs", alt, alt * alt), Linear("correction_coefs", alt, alt),
                Linear("linear_left", h, rank), Linear("linear_right", rank, h),
                Linear("per_layer_input_gate", h, hpl), Linear("per_layer_projection", hpl, h)]
        if i < len(sparsity) and float(sparsity[i]) > 0:
            att.append(Linear(SPARSE, 0, 0))        # Gemma3nTextMLP._gaussian_topk: a marker, no weight
        per_layer.append(interned.setdefault(tuple(att), tuple(att)))
    lins = llama_lins(h, heads, kv, hd, inters[0])
    arch = recurrent_arch(c, "gemma3n_text", b, h=h, n_layers=n, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=kv, hd=hd, inter=inters[0], what="", family="gemma", support="exact")
    return replace(arch, gated_mlp=True, norms_per_layer=4, qk_norm="head", layer_linears=tuple(per_layer),
                   final_softcap=bool(c.cfg.get("final_logit_softcapping", 30.0)))


GEMMA3N = {"gemma3n_text": gemma3n_text}
