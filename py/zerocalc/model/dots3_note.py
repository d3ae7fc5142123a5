"""dots.3 Note's language model (transformers 5.24 modeling_dots3_note.py Dots3NoteForCausalLM,
Dots3NoteTextConfig): per layer

- self_attn (Dots3NoteTextAttention) is DeepSeek-V2 MLA of that layer's shape (moe.mla_attention: q_a_proj /
  q_a_layernorm / q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; attention_bias on q_a, kv_a,
  o), then k_rope_only_layernorm (qk_rope_head_dim) and g_proj (h -> heads), and in ``indexed_attention`` layers
  the DSA indexer (wq_b, wk, a biased LayerNorm k_norm, weights_proj). A layer's num_attention_heads,
  q_lora_rank, kv_lora_rank, qk_nope / qk_rope / v_head_dim come from per_layer_config (a saved config.json holds
  each layer's differences), or for a legacy config Dots3NoteTextConfig.__post_init__'s sliding_config for the
  sliding layers (swa_* fields; defaults 64 heads, q/kv rank 1024, head_dim 256, nope 192, v 128, rope =
  head_dim - nope);
- mlp a SwiGLU MLP (intermediate_size) in ``dense`` layers of mlp_layer_types (legacy default: sparse where
  i >= first_k_dense_replace (1) and moe_layer_freq), else DeepSeek's MoE (experts, the fp32 gate, shared_experts
  of shared_experts_intermediate_size x n_shared_experts);
- input_layernorm, post_attention_layernorm.

layer_types default (legacy): the attention type at i < 2 or i % 4 == 1, sliding elsewhere; "full_attention" is
read as indexed_attention unless use_dsa is false (or, with per_layer_config, unless use_dsa is true, as
__post_init__). ``model.norm``; lm_head untied by default. The composite dots3_note is not modelled here.

The count is exact (tests/test_architectures.py). Activations: memory/blocks_dots3.py over each layer's own
linears (``layer_linears``), traced under eager attention (the only path that runs), which ``support`` says.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList
from .moe import deepseek_ffn, mla_attention
from .recurrent import recurrent_arch

SUPPORT = ("exact parameter count; activations traced (memory/blocks_dots3.py, tools/memtrace/dots3_trace.py) "
           "under eager attention, the only path that runs: no FA2 support (_supports_flash_attn = False) and the "
           "indexer reads attention_mask[:, 0], None under SDPA in transformers 5.24; a flash or sdpa plan is "
           "costed as eager); full, LoRA and checkpointed bf16 steps within 3 %; bf16-mixed not traced")
_SWA = {"num_attention_heads": 64, "q_lora_rank": 1024, "kv_lora_rank": 1024, "head_dim": 256,
        "qk_nope_head_dim": 192, "v_head_dim": 128}
_FIELDS = ("num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
           "v_head_dim")


def _kinds(c: ConfigReader, n: int) -> list:
    saved = isinstance(c.cfg.get("per_layer_config"), Mapping)
    dsa = c.cfg.get("use_dsa", None if saved else True)
    kinds = c.cfg.get("layer_types")
    if not isinstance(kinds, list):
        full = "full_attention" if dsa is False else "indexed_attention"
        sw = c.bool("use_sliding_window", True)
        kinds = [full if not sw or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n)]
    if dsa is not None:
        old, new = ("full_attention", "indexed_attention") if dsa else ("indexed_attention", "full_attention")
        kinds = [new if k == old else k for k in kinds]
    return list(kinds)


def _sparse(c: ConfigReader, n: int) -> list[bool]:
    kinds = c.cfg.get("mlp_layer_types")
    if isinstance(kinds, list):
        return [k == "sparse" for k in kinds[:n]]
    first, freq = c.int("first_k_dense_replace", default=1, lo=0), c.cfg.get("moe_layer_freq", 1)
    return [i >= first and (bool(freq[i]) if isinstance(freq, list) else i % int(freq) == 0) for i in range(n)]


def dots3_note_text(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size", default=5120), c.int("vocab_size", default=152064)
    n_layers, inter = c.int("num_hidden_layers", default=46), c.int("intermediate_size", default=13824)
    ei = c.int("moe_intermediate_size", default=1536)
    si = c.int("moe_shared_expert_intermediate_size", "shared_experts_intermediate_size", default=1536)
    kinds, sparse = _kinds(c, n_layers), _sparse(c, n_layers)
    base = {"num_attention_heads": c.int("num_attention_heads", default=128),
            "q_lora_rank": c.int("q_lora_rank", default=1024), "kv_lora_rank": c.int("kv_lora_rank", default=512),
            "qk_nope_head_dim": c.int("qk_nope_head_dim", default=128),
            "qk_rope_head_dim": c.int("qk_rope_head_dim", default=64), "v_head_dim": c.int("v_head_dim", default=128)}
    saved = c.cfg.get("per_layer_config")
    if isinstance(saved, Mapping):
        over = {int(k): v for k, v in saved.items() if isinstance(v, Mapping)}
    else:
        swa = {k: c.int(f"swa_{k}", default=v) for k, v in _SWA.items()}
        swa["qk_rope_head_dim"] = c.int("swa_qk_rope_head_dim", default=swa["head_dim"] - swa["qk_nope_head_dim"])
        over = {i: swa for i, k in enumerate(kinds) if k == "sliding_attention"}
    ne = c.int("n_routed_experts", default=256)
    moe = MoE(num_experts=ne, experts_per_token=c.int("num_experts_per_tok", default=8), expert_intermediate=ei,
              shared_intermediate=si * c.int("n_shared_experts", default=1), dense_layers=sum(not s for s in sparse),
              router_fp32="cast")
    index = (c.int("index_n_heads", default=64), c.int("index_head_dim", default=128))
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    first: list[Linear] = []
    per_layer: list[tuple[Linear, ...]] = []
    si_all = moe.shared_intermediate
    routed = (Linear("gate_up_proj", h, 2 * ei, ne), Linear("down_proj", ei, h, ne))
    shared = (Linear("gate_proj", h, si_all), Linear("up_proj", h, si_all), Linear("down_proj", si_all, h)) \
        if si_all else ()
    dense_mlp = (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    for i in range(n_layers):
        p = f"model.layers.{i}"
        layer = {k: int(over.get(i, {}).get(k) or base[k]) for k in _FIELDS}
        heads = layer["num_attention_heads"]
        mla = {"q_lora_rank": layer["q_lora_rank"], "kv_lora_rank": layer["kv_lora_rank"],
               "qk_nope": layer["qk_nope_head_dim"], "qk_rope": layer["qk_rope_head_dim"], "v_head": layer["v_head_dim"],
               "indexer": None}
        lins: list[Linear] = []
        mla_attention(b, p, h, heads, mla, lins, bias=bias)
        a = f"{p}.self_attn"
        b.norm(f"{a}.k_rope_only_layernorm", mla["qk_rope"])
        b.linear(f"{a}.g_proj", h, heads, "attention")
        if kinds[i] == "indexed_attention":
            x = f"{a}.indexer"
            b.linear(f"{x}.wq_b", mla["q_lora_rank"], index[0] * index[1], "attention")
            b.linear(f"{x}.wk", h, index[1], "attention")
            b.norm(f"{x}.k_norm", index[1], bias=True)
            b.linear(f"{x}.weights_proj", h, index[0], "attention")
        deepseek_ffn(b, p, h, moe, inter, sparse[i])
        # memory/blocks_dots3.py reads the layer's shape from these: g_proj's outputs are its heads
        per_layer.append(tuple(lins) + (Linear("g_proj", h, heads),) + (routed + shared if sparse[i] else dense_mlp))
        if i == 0:
            first = lins
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = tuple(first) + (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    heads0 = int(over.get(0, {}).get("num_attention_heads") or base["num_attention_heads"])
    arch = recurrent_arch(c, "dots3_note_text", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins,
                          heads=heads0, kv=heads0, hd=base["qk_nope_head_dim"] + base["qk_rope_head_dim"],
                          inter=inter, moe=moe, what="", support=SUPPORT)
    return replace(arch, layer_linears=tuple(per_layer))


DOTS3_NOTE = {"dots3_note_text": dots3_note_text}
