"""Sparse MLPs and multi-head latent attention of the Llama lineage, as transformers 5.24 registers them:
experts are one module with fused 3-D ``gate_up_proj`` (E, 2I, h) and ``down_proj`` (E, h, I) tensors
(gpt-oss stores them transposed, with biases). Layouts (``families.FAMILIES[...]["moe"]``):

- ``mixtral``: ``mlp.gate`` (E x h) then ``mlp.experts`` (modeling_mixtral.py, qwen3_moe, minimax_m2);
- ``deepseek``: experts, ``mlp.gate`` (its e_score_correction_bias is a buffer), ``mlp.shared_experts``
  of n_shared_experts x moe_intermediate_size (modeling_deepseek_v3.py DeepseekV3MoE, glm4_moe);
- ``laguna``: kolibri's with a learned-buffer ``e_score_correction_bias`` Parameter (modeling_laguna.py);
- ``axk1``: DeepSeek's, with a ``post_mlp_layernorm`` after the shared experts (modeling_axk1.py AXK1MoE);
- ``kolibri``: DeepSeek's order with one ``shared_experts`` of shared_expert_intermediate_size
  (modeling_kolibri1.py Kolibri1SparseMoeBlock, modeling_flint.py FlintSparseMoeBlock);
- ``qwen2_moe``: gate, experts, one ``shared_expert`` of shared_expert_intermediate_size and its sigmoid
  ``shared_expert_gate`` (1 x h) (modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock);
- ``granitemoe``: ``block_sparse_moe.router.layer`` (E x h) then experts (modeling_granitemoe.py);
  ``granitemoeshared`` adds ``shared_mlp`` input_linear (h -> 2 x shared_intermediate_size) and
  output_linear when shared_intermediate_size > 0 (modeling_granitemoeshared.py);
- ``gpt_oss``: ``mlp.router`` with bias, experts with biases (modeling_gpt_oss.py);
- ``hy``: gate, experts, ``shared_experts`` of num_shared_experts x moe_intermediate_size (modeling_hy_v3.py);
- ``llama4``: ``feed_forward.experts`` stored (E, h, 2I) / (E, I, h), ``router``, one ``shared_expert`` of
  intermediate_size; MoE in ``moe_layers`` (default every interleave_moe_layer_step-th) (modeling_llama4.py);
- ``cohere2_moe``: Mixtral's gate and experts of ``intermediate_size``, num_shared_experts x intermediate_size
  ``shared_experts`` (modeling_cohere2_moe.py Cohere2MoeSparseMoeBlock);
- ``router_first``: ``mlp.router`` (E x h) then experts (modeling_phimoe.py); ``aria``: the same with
  moe_num_shared_experts x intermediate_size ``shared_experts`` (modeling_aria.py AriaTextMoELayer);
- ``hunyuan``: ``mlp.gate.wg`` (E x h), experts of ``intermediate_size`` and an always-on ``shared_mlp`` of
  the same width, even with one expert (modeling_hunyuan_v1_moe.py HunYuanMoEV1Moe);
- ``ernie``: ``mlp.gate`` (E x h) with a learned ``moe_statics.e_score_correction_bias``, experts,
  ``shared_experts`` of moe_num_shared_experts x moe_intermediate_size, MoE in the layers
  moe_layer_start_index..moe_layer_end_index every moe_layer_interval (modeling_ernie4_5_moe.py).

Which layers are sparse: all but the first ``first_k_dense_replace``, those in ``mlp_only_layers`` and,
with ``decoder_sparse_step`` > 1, all but every step-th (Qwen2MoeDecoderLayer's rule).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .arch import Linear, MoE
from .config import ConfigReader, TensorList


# The router's input upcast, by layout (a family row's "router_fp32" overrides it): the TopkRouter of
# modeling_deepseek_v3.py (and deepseek_v2/v32, glm4_moe(_lite), glm4v_moe, glm_moe_dsa, dots1, solar_open, mimo_v2_flash,
# axk1, kolibri1, exaone_moe, hy_v3) runs F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32));
# Ernie4_5_MoeTopKRouter and FlintTopKRouter the same under maybe_autocast(enabled=False)
ROUTER_FP32 = {"deepseek": "cast", "axk1": "cast", "kolibri": "cast", "hy": "cast", "ernie": "forced"}


def moe_spec(c: ConfigReader, layout: str, inter: int, first_dense: int = 0, n_shared: int = 0,
             router_fp32: str | None = None) -> MoE | None:
    """``n_shared``: the configuration class's shared-expert count when the config omits it; ``router_fp32``:
    the row's router upcast when it differs from its layout's (``ROUTER_FP32``)."""
    experts = c.int("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", default=0, lo=0)
    # HunYuan builds its MoE block whatever num_experts is (the default config has one expert)
    if not layout or experts < 1 or (experts == 1 and layout != "hunyuan"):
        return None
    ei = inter if layout in ("hunyuan", "llama4", "cohere2_moe") else c.int("moe_intermediate_size", default=inter)
    if layout in ("hunyuan", "llama4"):
        shared = inter
    elif layout == "cohere2_moe":
        shared = c.int("num_shared_experts", default=0, lo=0) * inter
    elif layout == "ernie":
        shared = c.int("moe_num_shared_experts", default=0, lo=0) * ei
    elif layout == "aria":
        shared = c.int("moe_num_shared_experts", default=2, lo=0) * ei
    elif layout == "qwen2_moe":
        shared = c.int("shared_expert_intermediate_size", default=0, lo=0)
    elif layout in ("kolibri", "laguna"):
        shared = c.int("shared_expert_intermediate_size", default=0, lo=0)
    elif layout == "granitemoeshared":
        shared = c.int("shared_intermediate_size", default=0, lo=0)
    elif layout == "hy":
        shared = c.int("num_shared_experts", default=n_shared, lo=0) * ei
    elif layout in ("deepseek", "axk1"):
        shared = c.int("n_shared_experts", default=0, lo=0) * ei
    elif layout == "afmoe":
        shared = c.int("num_shared_experts", default=2, lo=0) * ei
    else:
        shared = 0
    n_layers = c.int("num_hidden_layers")
    dense = sum(1 for i in range(n_layers) if not is_sparse(c, i, first_dense))
    return MoE(num_experts=experts, experts_per_token=c.int("num_experts_per_tok", "num_experts_per_token", "moe_topk",
                                                            "moe_k", default=2),
               expert_intermediate=ei, shared_intermediate=shared, dense_layers=dense,
               router_fp32=ROUTER_FP32.get(layout, "") if router_fp32 is None else router_fp32)


def is_sparse(c: ConfigReader, i: int, first_dense: int = 0) -> bool:
    """``first_dense``: the leading dense layers when the config names none (Glm4MoeLite and HY-V3's
    mlp_layer_types default: one dense layer, then sparse)."""
    kinds = c.cfg.get("mlp_layer_types")          # Glm4MoeLite: "dense" / "sparse" per layer
    if isinstance(kinds, list) and i < len(kinds):
        return kinds[i] == "sparse"
    if isinstance(c.cfg.get("moe_layers"), list):  # Llama4TextDecoderLayer: layer_idx in config.moe_layers
        return i in c.cfg["moe_layers"]
    if c.has("interleave_moe_layer_step"):         # Llama4TextConfig: range(step - 1, layers, step)
        return (i + 1) % c.int("interleave_moe_layer_step") == 0
    if c.has("moe_layer_start_index"):             # Ernie4_5_MoeDecoderLayer
        return ((i + 1) % c.int("moe_layer_interval", default=1) == 0
                and c.int("moe_layer_start_index", lo=0) <= i <= c.int("moe_layer_end_index", default=1 << 30, lo=0))
    if c.has("num_dense_layers"):                  # AfmoeDecoderLayer: moe_enabled = layer_idx >= num_dense_layers
        return i >= c.int("num_dense_layers", lo=0)
    only = c.cfg.get("mlp_only_layers")
    # a class's leading dense layers stand for its mlp_only_layers default: a config naming them decides
    if i < c.int("first_k_dense_replace", default=0 if isinstance(only, list) else first_dense, lo=0):
        return False
    only = only or ()
    if i in only:
        return False
    step = c.int("decoder_sparse_step", default=1)
    return (i + 1) % step == 0


def deepseek_ffn(b: TensorList, p: str, h: int, moe: MoE, inter: int, sparse: bool, layout: str = "deepseek",
                 bias: bool = False) -> None:
    """The rest of a DeepSeek-style decoder layer after its attention, in registration order: the routed MoE
    of ``layout`` (DeepSeek's: experts, then the fp32 gate; another: the gate first) and its SwiGLU
    shared_experts where the layer is sparse, else a SwiGLU ``mlp`` of ``inter`` (``bias``: the MLPs' mlp_bias,
    never the experts'); then input_layernorm and post_attention_layernorm (RMSNorms over h)."""
    if sparse:
        moe_block(b, p, h, replace(moe, shared_intermediate=0), layout, [])
        if moe.shared_intermediate:
            b.swiglu(f"{p}.mlp.shared_experts", h, moe.shared_intermediate, "shared_experts", bias)
    else:
        b.swiglu(f"{p}.mlp", h, inter, bias=bias)
    b.norm(f"{p}.input_layernorm", h)
    b.norm(f"{p}.post_attention_layernorm", h)


def moe_block(b: TensorList, p: str, h: int, moe: MoE, layout: str, out: list[Linear], module: str = "mlp") -> None:
    """Router + fused experts (+ shared expert) of block ``p``, in registration order."""
    e, ei = moe.num_experts, moe.expert_intermediate
    m = f"{p}.{module}"
    if layout == "afmoe":
        # modeling_afmoe.py AfmoeSparseMoeBlock: router.gate, shared_experts (num_shared_experts x
        # moe_intermediate_size), experts, and expert_bias (a frozen nn.Parameter)
        b.linear(f"{m}.router.gate", h, e, "router")
        si = moe.shared_intermediate
        b.swiglu(f"{m}.shared_experts", h, si, "shared_experts")
        b.matrix(f"{m}.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{m}.experts", "down_proj", (e, h, ei), "routed_experts")
        b.param(m, "expert_bias", e, "router")
        out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e), Linear("gate_proj", h, si),
                Linear("up_proj", h, si), Linear("down_proj", si, h)]
        return
    if layout == "llama4":
        b.matrix(f"{m}.experts", "gate_up_proj", (e, h, 2 * ei), "routed_experts")
        b.matrix(f"{m}.experts", "down_proj", (e, ei, h), "routed_experts")
        b.matrix(f"{m}.router", "weight", (e, h), "router")
        out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
        for name, d_in, d_out in (("gate_proj", h, ei), ("up_proj", h, ei), ("down_proj", ei, h)):
            b.linear(f"{m}.shared_expert.{name}", d_in, d_out, "shared_experts")
            out.append(Linear(name, d_in, d_out))
        return
    if layout == "gpt_oss":
        b.matrix(f"{m}.router", "weight", (e, h), "router")
        b.param(f"{m}.router", "bias", e, "router")
        b.matrix(f"{m}.experts", "gate_up_proj", (e, h, 2 * ei), "routed_experts")
        b.param(f"{m}.experts", "gate_up_proj_bias", e * 2 * ei, "routed_experts")
        b.matrix(f"{m}.experts", "down_proj", (e, ei, h), "routed_experts")
        b.param(f"{m}.experts", "down_proj_bias", e * h, "routed_experts")
        out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
        return
    if layout in ("granitemoe", "granitemoeshared"):
        m = f"{p}.block_sparse_moe"
        b.matrix(f"{m}.router.layer", "weight", (e, h), "router")
    elif layout == "hunyuan":
        b.matrix(f"{m}.gate.wg", "weight", (e, h), "router")
    elif layout == "ernie":
        b.matrix(f"{m}.gate", "weight", (e, h), "router")
        b.param(f"{m}.gate.moe_statics", "e_score_correction_bias", e, "router")   # a parameter here
    elif layout in ("router_first", "aria"):
        b.matrix(f"{m}.router", "weight", (e, h), "router")
    elif layout not in ("deepseek", "kolibri", "axk1", "laguna"):
        b.matrix(f"{m}.gate", "weight", (e, h), "router")
    b.matrix(f"{m}.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
    b.matrix(f"{m}.experts", "down_proj", (e, h, ei), "routed_experts")
    if layout in ("deepseek", "kolibri", "axk1", "laguna"):
        b.matrix(f"{m}.gate", "weight", (e, h), "router")  # e_score_correction_bias is a buffer
        if layout == "laguna":        # modeling_laguna.py LagunaTopKRouter: a (frozen) nn.Parameter there
            b.param(f"{m}.gate", "e_score_correction_bias", e, "router")
    out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
    if layout == "granitemoeshared" and moe.shared_intermediate:
        si, sm = moe.shared_intermediate, f"{p}.shared_mlp"
        b.linear(f"{sm}.input_linear", h, 2 * si, "shared_experts")
        b.linear(f"{sm}.output_linear", si, h, "shared_experts")
        out += [Linear("input_linear", h, 2 * si), Linear("output_linear", si, h)]
    elif moe.shared_intermediate:
        si = moe.shared_intermediate
        s = {"qwen2_moe": f"{m}.shared_expert", "hunyuan": f"{m}.shared_mlp"}.get(layout, f"{m}.shared_experts")
        for name in ("gate_proj", "up_proj"):
            b.linear(f"{s}.{name}", h, si, "shared_experts")
            out.append(Linear(name, h, si))
        b.linear(f"{s}.down_proj", si, h, "shared_experts")
        out.append(Linear("down_proj", si, h))
        if layout == "qwen2_moe":
            b.linear(f"{m}.shared_expert_gate", h, 1, "router")
    if layout == "axk1":
        b.norm(f"{m}.post_mlp_layernorm", h)      # modeling_axk1.py AXK1MoE: DeepSeek-V3's MoE + this norm


def mla_spec(c: ConfigReader, indexer: bool = False) -> Mapping | None:
    if not c.has("kv_lora_rank"):
        return None
    return {"indexer": (c.int("index_n_heads", default=64), c.int("index_head_dim", default=128)) if indexer else None,"q_lora_rank": c.int("q_lora_rank", default=0, lo=0), "kv_lora_rank": c.int("kv_lora_rank"),
            "qk_nope": c.int("qk_nope_head_dim"), "qk_rope": c.int("qk_rope_head_dim"),
            "v_head": c.int("v_head_dim")}


def mla_attention(b: TensorList, p: str, h: int, heads: int, mla: Mapping, out: list[Linear],
                  bias: bool = False) -> None:
    """DeepSeek multi-head latent attention (modeling_deepseek_v3.DeepseekV3Attention)."""
    qk_head = mla["qk_nope"] + mla["qk_rope"]
    a = f"{p}.self_attn"
    if mla["q_lora_rank"]:
        b.linear(f"{a}.q_a_proj", h, mla["q_lora_rank"], "attention", bias=bias)
        b.norm(f"{a}.q_a_layernorm", mla["q_lora_rank"])
        b.linear(f"{a}.q_b_proj", mla["q_lora_rank"], heads * qk_head, "attention")
        out += [Linear("q_a_proj", h, mla["q_lora_rank"]), Linear("q_b_proj", mla["q_lora_rank"], heads * qk_head)]
    else:
        b.linear(f"{a}.q_proj", h, heads * qk_head, "attention")
        out.append(Linear("q_proj", h, heads * qk_head))
    kv_a = mla["kv_lora_rank"] + mla["qk_rope"]
    b.linear(f"{a}.kv_a_proj_with_mqa", h, kv_a, "attention", bias=bias)
    b.norm(f"{a}.kv_a_layernorm", mla["kv_lora_rank"])
    kv_b = heads * (mla["qk_nope"] + mla["v_head"])
    b.linear(f"{a}.kv_b_proj", mla["kv_lora_rank"], kv_b, "attention")
    b.linear(f"{a}.o_proj", heads * mla["v_head"], h, "attention", bias=bias)
    out += [Linear("kv_a_proj_with_mqa", h, kv_a), Linear("kv_b_proj", mla["kv_lora_rank"], kv_b),
            Linear("o_proj", heads * mla["v_head"], h)]
    if mla.get("indexer"):
        # DeepSeek sparse attention's lightning indexer (modeling_deepseek_v32.py DeepseekV32Indexer,
        # glm_moe_dsa): wq_b from the q latent, wk, a biased LayerNorm k_norm, weights_proj per index head
        ih, idim = mla["indexer"]
        i = f"{a}.indexer"
        b.linear(f"{i}.wq_b", mla["q_lora_rank"], ih * idim, "attention")
        b.linear(f"{i}.wk", h, idim, "attention")
        b.norm(f"{i}.k_norm", idim, bias=True)
        b.linear(f"{i}.weights_proj", h, ih, "attention")
