"""Zamba and Zamba 2 (transformers 5.24 modeling_zamba.py, modeling_zamba2.py): Mamba layers with one shared
transformer block called from every ``hybrid`` layer of ``layers_block_type``.

- Zamba (ZambaModel): every layer has a Mamba mixer (ZambaMambaDecoderLayer: ``mamba`` with in_proj h -> 2I,
  depthwise conv1d (I, 1, mamba_d_conv) [+ bias], per-head x_proj_weight (heads, R + 2N, I/heads),
  dt_proj_weight (heads, I/heads, R), dt_proj_bias, A_log (heads, I/heads, N), D, out_proj I -> h, and an
  input_layernorm), I = mamba_expand x h, R = mamba_dt_rank ("auto": ceil(h / 16)). A hybrid layer
  (ZambaHybridLayer) adds ``shared_transf``, a ZambaAttentionDecoderLayer (q/k/v from attention_hidden_size = 2h,
  o_proj to h, gate/up/down MLP, input_layernorm over 2h, pre_ff_layernorm), and its own ``linear`` (h x h).
  The shared blocks are tied (ZambaModel._tied_weights_keys): counted once, in the first hybrid layer; with
  tie_word_embeddings off, PreTrainedModel.get_expanded_tied_weights_keys ties nothing and each hybrid layer
  keeps its own copy (both models).
- Zamba 2 (Zamba2Model.get_layers): Mamba-2 mixers (conv bias always, in_proj / out_proj biased with
  add_bias_linear, a gated norm); the j-th hybrid layer calls block j % num_mem_blocks, tied to the first of
  its kind, so num_mem_blocks blocks are counted. A block (Zamba2AttentionDecoderLayer) holds q/k/v/o over
  attention_hidden_size = 2h with head_dim 2h / heads, a fused gate_up_proj (h -> 2I) and down_proj
  (add_bias_linear), per hybrid layer of its kind a LoRA-like gate_up adapter (h -> adapter_rank -> 2I) and,
  with use_shared_attention_adapter, q/k/v adapters (2h -> rank -> 2h); a hybrid layer adds ``linear`` (h x h).

The counts are exact (tests/test_architectures.py). Activations: Zamba, and Zamba 2 without q/k/v adapters and
rotary memory blocks (the default), by memory/ssm_hybrids.py zamba_layer, held to tests/data/zamba_trace.json and
zamba2_trace.json; the other Zamba 2 variants are costed as a classic block of the linears (the "mamba" family),
which ``support`` says.
"""
from __future__ import annotations

import math
from dataclasses import replace

from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .recurrent import recurrent_arch
from .ssm import mamba2_mixer

LEGACY = {"mamba": "linear_attention"}   # configuration_utils.py _LEGACY_LAYER_TYPE_REMAP


def _kinds(c: ConfigReader, default: list[str]) -> list[str]:
    kinds = c.cfg.get("layers_block_type")
    return [LEGACY.get(k, k) for k in kinds] if isinstance(kinds, list) else default


def zamba(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size"), c.int("vocab_size")
    n_layers = c.int("num_hidden_layers", default=76)
    heads, kv = c.int("num_attention_heads", default=16), c.int("num_key_value_heads", default=16)
    a = c.int("attention_hidden_size", default=2 * h)
    hd = c.int("attention_head_dim", default=2 * h // heads)
    inter, mh = c.int("intermediate_size", default=14848), c.int("n_mamba_heads", default=2)
    inner, n, k = c.int("mamba_expand", default=2) * h, c.int("mamba_d_state", default=16), c.int("mamba_d_conv", default=4)
    r = c.cfg.get("mamba_dt_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else c.int("mamba_dt_rank")
    period, offset = c.int("attn_layer_period", default=6), c.int("attn_layer_offset", default=4, lo=0)
    # ZambaConfig.__post_init__: two Mamba layers, a hybrid one, then hybrid where i % period == offset
    kinds = _kinds(c, ["linear_attention"] * 2 + ["hybrid"] + [
        "hybrid" if i % period == offset else "linear_attention" for i in range(n_layers - 3)])
    pb, tied = c.bool("mamba_proj_bias", False), c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    shared = False
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        if kind == "hybrid":
            if not shared or not tied:   # the shared block, tied across the hybrid layers
                s = f"{p}.shared_transf"
                for name, d_in, d_out in (("q_proj", a, heads * hd), ("k_proj", a, kv * hd), ("v_proj", a, kv * hd),
                                          ("o_proj", heads * hd, h)):
                    b.linear(f"{s}.self_attn.{name}", d_in, d_out, "attention")
                b.swiglu(f"{s}.feed_forward", h, inter)
                b.norm(f"{s}.input_layernorm", a)
                b.norm(f"{s}.pre_ff_layernorm", h)
                shared = True
            b.linear(f"{p}.linear", h, h, "attention")
            p = f"{p}.mamba_decoder"
        m = f"{p}.mamba"
        b.matrix(f"{m}.conv1d", "weight", (inner, 1, k), "attention")
        if c.bool("mamba_conv_bias", True):
            b.param(f"{m}.conv1d", "bias", inner, "attention")
        b.linear(f"{m}.in_proj", h, 2 * inner, "attention", bias=pb)
        b.matrix(m, "x_proj_weight", (mh, r + 2 * n, inner // mh), "attention")
        b.matrix(m, "dt_proj_weight", (mh, inner // mh, r), "attention")
        b.matrix(m, "dt_proj_bias", (mh, inner // mh), "attention")
        b.matrix(m, "A_log", (mh, inner // mh, n), "attention")
        b.matrix(m, "D", (mh, inner // mh), "attention")
        b.linear(f"{m}.out_proj", inner, h, "attention", bias=pb)
        b.norm(f"{p}.input_layernorm", h)
    b.norm("model.final_layernorm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("in_proj", h, 2 * inner), Linear("out_proj", inner, h), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    arch = recurrent_arch(c, "zamba", b, h=h, n_layers=n_layers, vocab=vocab, tied=tied, lins=lins, heads=heads,
                          kv=kv, hd=hd, inter=inter, what="Mamba layers and the shared transformer block are")
    # activations: memory/ssm_hybrids.py zamba_layer / zamba_mamba_block (held to tests/data/zamba_trace.json)
    mixer = lins[:2]
    shared = (Linear("q_proj", a, heads * hd), Linear("k_proj", a, kv * hd), Linear("v_proj", a, kv * hd),
              Linear("o_proj", heads * hd, h)) + lins[2:] + (Linear("linear", h, h),) + mixer
    dims = {"layout": "zamba2", "mixer": "mamba1", "inner": inner, "heads": mh, "state": n, "rank": r,
            "residual_fp32": False, "attn_hidden": a,
            "layers": tuple(shared if kind == "hybrid" else mixer for kind in kinds)}
    return replace(arch, ssm=dims, gated_mlp=True, support="exact")


def zamba2(c: ConfigReader) -> ModelArch:
    h, vocab = c.int("hidden_size"), c.int("vocab_size")
    heads = c.int("num_attention_heads", default=32)
    kv = c.int("num_key_value_heads", default=heads)
    a, hd = 2 * h, 2 * h // heads                # Zamba2Config.__post_init__ sets both
    inter = c.int("intermediate_size", default=4 * h)
    rank, blocks = c.int("adapter_rank", default=128), c.int("num_mem_blocks", default=1)
    attn_adapters, bias = c.bool("use_shared_attention_adapter", False), c.bool("add_bias_linear", False)
    mh = c.int("n_mamba_heads", default=8)
    kinds = _kinds(c, ["linear_attention"] + (["linear_attention"] * 5 + ["hybrid"]) * 7 + ["linear_attention"] * 4
                   + ["hybrid"] + ["linear_attention"] * 3 + ["hybrid"] + ["linear_attention"] * 2)
    # the adapter slots: len(hybrid_layer_ids), the config's own list when it has one (PretrainedConfig's
    # __post_init__ sets the config.json fields after Zamba2Config computes it from layers_block_type)
    ids = c.cfg.get("hybrid_layer_ids")
    n_hybrid = len(ids) if isinstance(ids, list) else kinds.count("hybrid")
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    lins: list = []
    j = 0
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        if kind == "hybrid":
            b.linear(f"{p}.linear", h, h, "attention")
            mixer_at = f"{p}.mamba_decoder"
        else:
            mixer_at = p
        lins = mamba2_mixer(b, f"{mixer_at}.mamba", h, int(c.cfg.get("mamba_expand", 2) * h), mh,
                            c.int("mamba_ngroups", default=1), c.int("mamba_d_state", default=64),
                            c.int("mamba_d_conv", default=4), True, bias)
        b.norm(f"{mixer_at}.input_layernorm", h)
        if kind == "hybrid":
            if j < blocks or not tied:   # block j % num_mem_blocks; later calls are tied to it
                _zamba2_block(b, f"{p}.shared_transformer", h, a, heads, kv, hd, inter, rank, bias, attn_adapters,
                              [x for x in range(n_hybrid) if x % blocks == j % blocks])
            j += 1
    b.norm("model.final_layernorm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    mixer = tuple(lins)
    lins += [Linear("gate_up_proj", h, 2 * inter), Linear("down_proj", inter, h)]
    arch = recurrent_arch(c, "zamba2", b, h=h, n_layers=len(kinds), vocab=vocab, tied=tied, lins=tuple(lins),
                          heads=heads, kv=kv, hd=hd, inter=inter,
                          what="Mamba-2 layers and the shared transformer blocks are")
    # activations: memory/ssm_hybrids.py zamba_layer, per layer its kind's linears (a hybrid layer: the shared
    # block's, its gate_up adapter's, its own ``linear``, then the mixer's); held to tests/data/zamba2_trace.json
    shared = (Linear("q_proj", a, heads * hd), Linear("k_proj", a, kv * hd), Linear("v_proj", a, kv * hd),
              Linear("o_proj", heads * hd, h), Linear("gate_up_proj", h, 2 * inter), Linear("down_proj", inter, h),
              Linear("gate_up_proj_adapter.0", h, rank), Linear("gate_up_proj_adapter.1", rank, 2 * inter),
              Linear("linear", h, h)) + mixer
    dims = {"layout": "zamba2", "inner": int(c.cfg.get("mamba_expand", 2) * h), "heads": mh,
            "groups": c.int("mamba_ngroups", default=1), "residual_fp32": False, "attn_hidden": a,
            "layers": tuple(shared if kind == "hybrid" else mixer for kind in kinds)}
    if attn_adapters or c.bool("use_mem_rope", False):
        return arch                  # the q/k/v adapters and rotary q/k: not traced
    return replace(arch, ssm=dims, support="exact")


def _zamba2_block(b: TensorList, s: str, h: int, a: int, heads: int, kv: int, hd: int, inter: int, rank: int,
                  bias: bool, attn_adapters: bool, uses: list[int]) -> None:
    """Zamba2AttentionDecoderLayer: self_attn (q/k/v/o, then q/k/v adapter lists), feed_forward (gate_up_proj,
    down_proj, gate_up adapters), input_layernorm (2h), pre_ff_layernorm; ``uses``: the adapter slots of the hybrid
    layers calling it (each has its own adapters; the other slots are nn.Identity)."""
    for name, d_in, d_out in (("q_proj", a, heads * hd), ("k_proj", a, kv * hd), ("v_proj", a, kv * hd),
                              ("o_proj", heads * hd, h)):
        b.linear(f"{s}.self_attn.{name}", d_in, d_out, "attention")
    if attn_adapters:
        for name in ("linear_q_adapter_list", "linear_k_adapter_list", "linear_v_adapter_list"):
            for u in uses:
                b.linear(f"{s}.self_attn.{name}.{u}.0", a, rank, "attention")
                b.linear(f"{s}.self_attn.{name}.{u}.1", rank, a, "attention")
    b.linear(f"{s}.feed_forward.gate_up_proj", h, 2 * inter, "mlp", bias=bias)
    b.linear(f"{s}.feed_forward.down_proj", inter, h, "mlp", bias=bias)
    for u in uses:
        b.linear(f"{s}.feed_forward.gate_up_proj_adapter_list.{u}.0", h, rank, "mlp")
        b.linear(f"{s}.feed_forward.gate_up_proj_adapter_list.{u}.1", rank, 2 * inter, "mlp")
    b.norm(f"{s}.input_layernorm", a)
    b.norm(f"{s}.pre_ff_layernorm", h)


ZAMBA = {"zamba": zamba, "zamba2": zamba2}
