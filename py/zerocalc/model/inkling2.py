"""Inkling 2 and Inkling 2 Loop's language models (transformers 5.24 modeling_inkling2.py Inkling2ForCausalLM,
modeling_inkling2_loop.py Inkling2LoopForCausalLM). Per layer, by layer_types (default: "hybrid" at every 6th,
else "hybrid_sliding"):

- attention_input (a learned query: h, or (3, h) in full layers; none in layer 0) and mlp_input (h);
- self_attn with the sliding (swa_* heads / head dim, rel_extent = sliding_window_size) or full (num_* heads,
  head_dim, rel_extent) shape: q_proj.linear and its clip's scale (heads, d); k_proj / v_proj .linear (kv x d)
  and their short conv: static depthwise conv1d (kv x d, 1, conv_kernel_size) in sliding layers, in full layers
  the dynamic one's static_weight (kernel, kv x d) and weight_proj (h -> kv x kernel); o_proj.gate_proj and
  .linear; sink_proj (h -> heads); relative_position_bias.linear (h -> heads x d_rel), .norm.scale (heads, d_rel),
  .proj (d_rel, rel_extent); no biases;
- mlp: experts (E, 2I, h) / (E, h, I) and the fp32 gate (E x h; e_score_correction_bias a buffer);
- input_layernorm (sliding) or q/k/v_input_layernorm (full), post_attention_layernorm, and the depthwise
  post_attention_convolution / post_mlp_convolution (h, 1, kernel);
- Inkling 2 Loop, in layers loop_layer_index_start <= i < loop_layer_index_end: q/k/v/mlp_message_gate
  (down_proj 2h -> loop_gate_rank, forget_gate_proj and message_gate_proj back to h), and the model's
  message_input query (loop layers, 4, h) (loop_config's core_start / core_end / gate_rank honoured).

``model.embed_tokens`` with its embed_norm, ``model.norm``, final_input (h); lm_head (unpadded_vocab_size x h)
never tied (_tied_weights_keys is empty). The composites inkling2 / inkling2_loop (vision tower) are not modelled.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_inkling2.py, one linears tuple and
one ``inkling2`` layout entry per layer call (each call's block-state counts; Inkling 2 Loop's loop layers run
loop_num_passes times, the later passes with messages and their gates), held to the traces of
tools/memtrace/inkling_trace.py (tests/test_inkling_blocks.py). The composites use the same rules.
"""
from __future__ import annotations

from dataclasses import replace

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch

SUPPORT = ("exact parameter count; activations traced (memory/blocks_inkling2.py, tools/memtrace/inkling_trace.py "
           "inkling2_text / inkling2_loop_text; eager attention, the only one the modelling code has)")
LOOP_NOTE = ("; the loop's step peaks inside a layer's backward, whose temporaries are not modelled (activations "
             "about 5 % low there, tests/test_inkling_blocks.py)")
# Inkling2TextConfig / Inkling2LoopTextConfig class defaults that differ
_DEFAULTS = {"inkling2_text": {"h": 4608, "layers": 48, "heads": 48, "ei": 2304, "e": 384},
             "inkling2_loop_text": {"h": 2304, "layers": 24, "heads": 24, "ei": 1152, "e": 128}}


def _inkling2(c: ConfigReader, model_type: str) -> ModelArch:
    dft = _DEFAULTS[model_type]
    h, n_layers = c.int("hidden_size", default=dft["h"]), c.int("num_hidden_layers", default=dft["layers"])
    vocab, out_vocab = c.int("vocab_size", default=201024), c.int("unpadded_vocab_size", default=200058)
    full = (c.int("num_attention_heads", default=dft["heads"]), c.int("num_key_value_heads", default=8),
            c.int("head_dim", default=128), c.int("rel_extent", default=1024))
    window = c.int("sliding_window_size", "sliding_window", default=1024)
    swa = (c.int("swa_num_attention_heads", default=dft["heads"]), c.int("swa_num_key_value_heads", default=8),
           c.int("swa_head_dim", default=128), window)
    d_rel, kernel = c.int("d_rel", default=16), c.int("conv_kernel_size", "sconv_kernel_size", default=4)
    e = c.int("n_routed_experts", "num_local_experts", default=dft["e"])
    ei = c.int("moe_intermediate_size", "intermediate_size", default=dft["ei"])
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        kinds = ["hybrid" if (i + 1) % 6 == 0 else "hybrid_sliding" for i in range(n_layers)]
    loop = model_type == "inkling2_loop_text"
    lc = c.cfg.get("loop_config") if isinstance(c.cfg.get("loop_config"), dict) else {}
    start = int(lc.get("core_start", c.int("loop_layer_index_start", default=6, lo=0)))
    end = int(lc.get("core_end", c.int("loop_layer_index_end", default=18, lo=0)))
    rank = int(lc.get("gate_rank", c.int("loop_gate_rank", default=64)))
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=8), expert_intermediate=ei,
              shared_intermediate=0, dense_layers=0, router_fp32="cast")
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    b.norm("model.embed_tokens.embed_norm", h)
    for i in range(n_layers):
        p, sliding = f"model.layers.{i}", kinds[i] == "hybrid_sliding"
        heads, kv, d, extent = swa if sliding else full
        if i:
            b.matrix(f"{p}.attention_input", "query", (h,) if sliding else (3, h), "other")
        b.param(f"{p}.mlp_input", "query", h, "other")
        a = f"{p}.self_attn"
        b.linear(f"{a}.q_proj.linear", h, heads * d, "attention")
        b.matrix(f"{a}.q_proj.norm", "scale", (heads, d), "attention")
        for name in ("k_proj", "v_proj"):
            b.linear(f"{a}.{name}.linear", h, kv * d, "attention")
            if sliding:
                b.matrix(f"{a}.{name}.sconv.conv1d", "weight", (kv * d, 1, kernel), "attention")
            else:
                b.matrix(f"{a}.{name}.sconv", "static_weight", (kernel, kv * d), "attention")
                b.linear(f"{a}.{name}.sconv.weight_proj", h, kv * kernel, "attention")
        b.linear(f"{a}.o_proj.gate_proj", h, heads * d, "attention")
        b.linear(f"{a}.o_proj.linear", heads * d, h, "attention")
        b.linear(f"{a}.sink_proj", h, heads, "attention")
        r = f"{a}.relative_position_bias"
        b.linear(f"{r}.linear", h, heads * d_rel, "attention")
        b.matrix(f"{r}.norm", "scale", (heads, d_rel), "attention")
        b.matrix(r, "proj", (d_rel, extent), "attention")
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, ei), "routed_experts")
        b.matrix(f"{p}.mlp.gate", "weight", (e, h), "router")
        norms = ("input_layernorm",) if sliding else ("q_input_layernorm", "k_input_layernorm", "v_input_layernorm")
        for name in norms + ("post_attention_layernorm",):
            b.norm(f"{p}.{name}", h)
        for name in ("post_attention_convolution", "post_mlp_convolution"):
            b.matrix(f"{p}.{name}.conv1d", "weight", (h, 1, kernel), "other")
        if loop and start <= i < end:
            for g in ("q", "k", "v", "mlp"):
                m = f"{p}.{g}_message_gate"
                b.linear(f"{m}.down_proj", 2 * h, rank, "other")
                b.linear(f"{m}.forget_gate_proj", rank, h, "other")
                b.linear(f"{m}.message_gate_proj", rank, h, "other")
    b.norm("model.norm", h)
    b.param("model.final_input", "query", h, "other")
    if loop:
        b.matrix("model.message_input", "query", (end - start, 4, h), "other")
    b.matrix("lm_head", "weight", (out_vocab, h), "lm_head", "lm_head")
    passes = int(lc.get("num_passes", c.int("loop_num_passes", default=3))) if loop else 1
    # memory/blocks_inkling2.py: one linears tuple per layer call (its block-residual inputs differ by index and
    # pass), in the modules' order: q/k/v_proj.linear, the dynamic convs' weight_proj (full layers),
    # o_proj.gate_proj, o_proj.linear, sink_proj, relative_position_bias.linear, the routed experts, then (a loop
    # layer's later passes) the q/k/v/mlp message gates' down_proj, forget_gate_proj, message_gate_proj
    every = c.int("n_layers_per_attn_res_block", default=6)
    calls = [(i, 0) for i in range(start if loop else n_layers)]
    if loop:
        calls += [(i, p) for p in range(passes) for i in range(start, end)] + [(i, 0) for i in range(end, n_layers)]
    layer_lins, layout, states, pre, prev = [], [], 0, 0, 0
    stack, made, pre_stack = 0, 0, 0           # which block-state tensor a call reads (a new one at each boundary)
    for i, p in calls:
        if loop and i == start:
            if p == 0:
                pre, pre_stack = states, stack
            else:
                prev, states = states - pre - 1, pre    # block_states[..., num_pre_loop_blocks + 1:], then restart
                stack = pre_stack
        sliding = kinds[i] == "hybrid_sliding"
        heads, kv, d, extent = swa if sliding else full
        lins = (Linear("linear", h, heads * d), Linear("linear", h, kv * d), Linear("linear", h, kv * d))
        if not sliding:
            lins += (Linear("weight_proj", h, kv * kernel), Linear("weight_proj", h, kv * kernel))
        lins += (Linear("gate_proj", h, heads * d), Linear("linear", heads * d, h), Linear("sink_proj", h, heads),
                 Linear("linear", h, heads * d_rel), Linear("gate_up_proj", h, 2 * ei, e),
                 Linear("down_proj", ei, h, e))
        if p:
            lins += (Linear("down_proj", 2 * h, rank), Linear("forget_gate_proj", rank, h),
                     Linear("message_gate_proj", rank, h)) * 4
        layer_lins.append(lins)
        boundary = i % every == 0
        layout.append({"sliding": sliding, "first": i == 0, "heads": heads, "kv": kv, "d": d, "d_rel": d_rel,
                       "extent": extent, "kernel": kernel, "attn_states": states + 1,
                       "mlp_states": states + 1 + boundary, "boundary": boundary,
                       "loop": loop and start <= i < end, "message_states": prev + 1 if p else 0,
                       "stack": stack})
        states += boundary
        if boundary:
            made += 1
            stack = made
    arch = recurrent_arch(c, model_type, b, h=h, n_layers=len(calls), vocab=out_vocab, tied=False,
                          lins=layer_lins[-1], heads=full[0], kv=full[1], hd=full[2], inter=ei, moe=moe, what="")
    return replace(arch, family="llama", gated_mlp=True, block_linears=layer_lins[-1],
                   dense_block_linears=layer_lins[-1], layer_linears=tuple(layer_lins), final_softcap=True,
                   inkling2={"layers": tuple(layout), "final_states": states + 1},
                   support=SUPPORT + (LOOP_NOTE if loop else ""))


def inkling2_text(c: ConfigReader) -> ModelArch:
    return _inkling2(c, "inkling2_text")


def inkling2_loop_text(c: ConfigReader) -> ModelArch:
    return _inkling2(c, "inkling2_loop_text")


INKLING2 = {"inkling2_text": inkling2_text, "inkling2_loop_text": inkling2_loop_text}
