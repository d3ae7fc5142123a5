"""GPT-2-era decoders that are not GPT-2 (transformers 5.24): GPT-Neo, GPT-J, CodeGen, OpenAI GPT, CTRL, MPT,
GPT-NeoX-Japanese. Each registers LayerNorm'd blocks of one attention and one ungated MLP; what differs is
data: module names, which linears carry a bias, fused or separate q/k/v, learned positions, the final norm,
a head bias. Sources: src/transformers/models/<model_type>/modeling_<x>.py, each checked against the
meta-device build in tests/data/architectures.json. Activations: memory/blocks.py classic_block (not traced).

- gpt_neo (GPTNeoBlock): wte, wpe; ln_1, attn.attention k/v/q (no bias), out_proj (bias); ln_2; mlp c_fc/c_proj
  (intermediate_size or 4h); ln_f; tied head. Activations: memory/blocks.py's classic block (traced), each
  layer's (max_positions)^2 bool causal-mask buffer memory/inputs.py CAUSAL_MASK_BUFFERS.
- gptj / codegen (GPTJBlock, CodeGenBlock): ln_1 only (the parallel block), k/v/q/out (CodeGen: one qkv_proj)
  without biases, mlp fc_in/fc_out (n_inner or 4h) with biases; ln_f; an untied lm_head with a bias. Both blocks'
  activations: memory/blocks_families.py parallel_block (traced).
- openai-gpt (Block): tokens_embed, positions_embed; Conv1D c_attn/c_proj, ln_1, c_fc/c_proj, ln_2 (post-norm),
  no final norm; tied head. Activations: memory/blocks.py's classic block (traced; Attention._attn is eager only,
  so every plan is costed eager), each layer's (n_positions)^2 causal-mask buffer memory/inputs.py
  CAUSAL_MASK_BUFFERS.
- ctrl (EncoderLayer): w; Wq/Wk/Wv/dense, ffn.0 (dff) / ffn.2, layernorm1/2, all biased; sinusoidal positions
  are a buffer; final layernorm; the head is tied but has a bias. Activations: memory/blocks_families.py opt_block
  (OPT's sequence, traced), the fp32 pos_encoding buffer memory/inputs.py model_buffer_terms.
- mpt (MptBlock): wte (ALiBi, no positions); norm_1 / norm_2 / norm_f LayerNorms without bias, Wqkv, out_proj,
  up_proj (4h), down_proj without biases; tied head. Activations: memory/blocks_families.py eager_block (traced;
  MptAttention is eager only, so every plan is costed eager).
- gpt_neox_japanese (GPTNeoXJapaneseLayer): embed_in; two biased LayerNorms, query_key_value and dense without
  bias, a dense_bias in the last layer only, dense_h_to_4h (h x intermediate_multiple_size); final_layer_norm;
  embed_out when untied. Activations: memory/blocks_families.py eager_block (traced; eager only).
"""
from __future__ import annotations

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

# parameters checked against transformers (tests/test_architectures.py); activations not traced for these but
# those in TRACED (memory/blocks_families.py's rules, traced in tools/memtrace/families.py, held within 3 % by
# tests/test_family_grid.py)
SUPPORT = ("exact parameter count; activations approximate (costed as the classic block of memory/blocks.py, "
           "not traced)")

# GPT-Neo: memory/blocks.py's classic block (q/k/v, eager fp32 scores or FA2, gelu_new) is what it keeps (traced)
TRACED = ("gptj", "codegen", "gpt_neo", "mpt", "openai-gpt", "gpt_neox_japanese", "ctrl")

GPTLIKE = ("gpt_neo", "gptj", "codegen", "openai-gpt", "ctrl", "mpt", "gpt_neox_japanese")


def gptlike(c: ConfigReader, model_type: str) -> ModelArch:
    h = c.int("hidden_size", "n_embd", "d_model")
    n = c.int("num_layers", "n_layer", "n_layers", "num_hidden_layers")
    heads = c.int("num_heads", "n_head", "n_heads", "num_attention_heads")
    vocab = c.int("vocab_size")
    b = TensorList()
    tied = c.bool("tie_word_embeddings", model_type not in ("gptj", "codegen"))
    head_bias = model_type in ("gptj", "codegen", "ctrl")
    t, blk = "transformer", []
    if model_type == "gpt_neo":
        inter = c.int("intermediate_size", default=4 * h)
        b.matrix(f"{t}.wte", "weight", (vocab, h), "embedding")
        b.matrix(f"{t}.wpe", "weight", (c.int("max_position_embeddings", default=2048), h), "embedding")
        for i in range(n):
            p = f"{t}.h.{i}"
            b.norm(f"{p}.ln_1", h, bias=True)
            for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
                b.linear(f"{p}.attn.attention.{name}", h, h, "attention", bias=name == "out_proj")
            b.norm(f"{p}.ln_2", h, bias=True)
            b.linear(f"{p}.mlp.c_fc", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.c_proj", inter, h, "mlp", bias=True)
        blk = [Linear(x, h, h) for x in ("k_proj", "v_proj", "q_proj", "out_proj")]
        b.norm(f"{t}.ln_f", h, bias=True)
    elif model_type in ("gptj", "codegen"):
        inter = c.int("n_inner", default=4 * h)
        b.matrix(f"{t}.wte", "weight", (vocab, h), "embedding")
        for i in range(n):
            p = f"{t}.h.{i}"
            b.norm(f"{p}.ln_1", h, bias=True)
            if model_type == "gptj":
                for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
                    b.linear(f"{p}.attn.{name}", h, h, "attention")
                blk = [Linear(x, h, h) for x in ("k_proj", "v_proj", "q_proj", "out_proj")]
            else:
                b.linear(f"{p}.attn.qkv_proj", h, 3 * h, "attention")
                b.linear(f"{p}.attn.out_proj", h, h, "attention")
                blk = [Linear("qkv_proj", h, 3 * h), Linear("out_proj", h, h)]
            b.linear(f"{p}.mlp.fc_in", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.fc_out", inter, h, "mlp", bias=True)
        b.norm(f"{t}.ln_f", h, bias=True)
    elif model_type == "openai-gpt":
        inter = 4 * h
        b.matrix(f"{t}.tokens_embed", "weight", (vocab, h), "embedding")
        b.matrix(f"{t}.positions_embed", "weight", (c.int("n_positions", default=512), h), "embedding")
        for i in range(n):
            p = f"{t}.h.{i}"
            b.linear(f"{p}.attn.c_attn", h, 3 * h, "attention", bias=True)
            b.linear(f"{p}.attn.c_proj", h, h, "attention", bias=True)
            b.norm(f"{p}.ln_1", h, bias=True)
            b.linear(f"{p}.mlp.c_fc", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.c_proj", inter, h, "mlp", bias=True)
            b.norm(f"{p}.ln_2", h, bias=True)
        blk = [Linear("c_attn", h, 3 * h), Linear("c_proj", h, h)]
    elif model_type == "ctrl":
        inter = c.int("dff", default=8192)
        b.matrix(f"{t}.w", "weight", (vocab, h), "embedding")
        for i in range(n):
            p = f"{t}.h.{i}"
            for name in ("Wq", "Wk", "Wv", "dense"):
                b.linear(f"{p}.multi_head_attention.{name}", h, h, "attention", bias=True)
            b.linear(f"{p}.ffn.0", h, inter, "mlp", bias=True)
            b.linear(f"{p}.ffn.2", inter, h, "mlp", bias=True)
            b.norm(f"{p}.layernorm1", h, bias=True)
            b.norm(f"{p}.layernorm2", h, bias=True)
        blk = [Linear(x, h, h) for x in ("Wq", "Wk", "Wv", "dense")]
        b.norm(f"{t}.layernorm", h, bias=True)
    elif model_type == "mpt":
        inter = 4 * h
        b.matrix(f"{t}.wte", "weight", (vocab, h), "embedding")
        for i in range(n):
            p = f"{t}.blocks.{i}"
            b.norm(f"{p}.norm_1", h)
            b.linear(f"{p}.attn.Wqkv", h, 3 * h, "attention")
            b.linear(f"{p}.attn.out_proj", h, h, "attention")
            b.norm(f"{p}.norm_2", h)
            b.linear(f"{p}.ffn.up_proj", h, inter, "mlp")
            b.linear(f"{p}.ffn.down_proj", inter, h, "mlp")
        blk = [Linear("Wqkv", h, 3 * h), Linear("out_proj", h, h)]
        b.norm(f"{t}.norm_f", h)
    else:   # gpt_neox_japanese
        t = "gpt_neox_japanese"
        inter = int(h * c.cfg.get("intermediate_multiple_size", 4))
        b.matrix(f"{t}.embed_in", "weight", (vocab, h), "embedding")
        for i in range(n):
            p = f"{t}.layers.{i}"
            b.norm(f"{p}.input_layernorm", h, bias=True)
            b.norm(f"{p}.post_attention_layernorm", h, bias=True)
            b.linear(f"{p}.attention.query_key_value", h, 3 * h, "attention")
            b.linear(f"{p}.attention.dense", h, h, "attention")
            if i == n - 1:
                b.param(f"{p}.attention", "dense_bias", h, "attention")
            b.linear(f"{p}.mlp.dense_h_to_4h", h, inter, "mlp")
            b.linear(f"{p}.mlp.dense_4h_to_h", inter, h, "mlp")
        blk = [Linear("query_key_value", h, 3 * h), Linear("dense", h, h)]
        b.norm(f"{t}.final_layer_norm", h, bias=True)
    up, down = {"gpt_neo": ("c_fc", "c_proj"), "gptj": ("fc_in", "fc_out"), "codegen": ("fc_in", "fc_out"),
                "openai-gpt": ("c_fc", "c_proj"), "ctrl": ("0", "2"), "mpt": ("up_proj", "down_proj"),
                "gpt_neox_japanese": ("dense_h_to_4h", "dense_4h_to_h")}[model_type]
    blk += [Linear(up, h, inter), Linear(down, inter, h)]
    head = "embed_out" if model_type == "gpt_neox_japanese" else "lm_head"
    if not tied:
        b.matrix(head, "weight", (vocab, h), "lm_head", head)
    if head_bias:
        b.param(head, "bias", vocab, "lm_head")
    drop = c.cfg.get("resid_pdrop", c.cfg.get("resid_dropout", 0.0))
    if model_type == "gpt_neox_japanese":
        # its attention dropout (configuration_gpt_neox_japanese.py default 0.1): memory/blocks_families.py
        # eager_block reads ModelArch.dropout as that
        drop = c.cfg.get("attention_dropout", 0.1)
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="gpt2", hidden_size=h, num_layers=n,
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads, intermediate_size=inter, vocab_size=vocab,
        tied_embeddings=tied, max_positions=c.cfg.get("max_position_embeddings", c.cfg.get("n_positions")),
        gated_mlp=False, norm="layernorm", norms_per_layer=1 if model_type in ("gptj", "codegen") else 2,
        qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=float(drop) if isinstance(drop, (int, float)) and not isinstance(drop, bool) else 0.0,
        tensors=tuple(b.tensors), block_linears=tuple(blk), dense_block_linears=tuple(blk),
        support="exact" if model_type in TRACED else SUPPORT)
