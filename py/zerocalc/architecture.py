"""Architecture: every parameter tensor of a model, in `model.parameters()` order, from config.json.

From the tensor inventory everything else is derived: the parameter count by component (equal to
`computed_total` of ../shared/reference/models.json for every preset: transformers 5.24 modules on
the meta device, tied lm_head counted once), the largest tensor and module (DeepSpeed's bucket and
ZeRO-3 fetch terms), persistent small parameters (ZeRO-3), and the linears LoRA can target.

Layouts follow the transformers 5.x modelling files (`modeling_llama.py`, `modeling_gemma2.py`, ...):
module registration order is parameter order; MoE experts are one module with fused 3-D
`gate_up_proj` (E, 2I, h) and `down_proj` (E, h, I) tensors, as transformers 5 stores them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from .plan import PlanError
from .presets import MODELS


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor."""
    name: str          # HF-style path, e.g. "layers.3.self_attn.q_proj.weight"
    numel: int
    component: str     # embedding, attention, mlp, routed_experts, shared_experts, router, norm, lm_head, other
    module: str        # owning module path (ZeRO-3 gathers per module)
    linear: str = ""   # leaf linear name LoRA can target ("q_proj"), or "" when not a 2-D linear weight
    shape: tuple = ()  # (rows, cols) for matrices, (E, rows, cols) for fused experts; () for vectors


@dataclass(frozen=True)
class Linear:
    """A linear layer inside one block: LoRA and QLoRA work on these."""
    name: str
    d_in: int
    d_out: int
    count: int = 1     # identical linears in the block (fused MoE experts count E)


@dataclass(frozen=True)
class MoE:
    num_experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_intermediate: int     # 0 when there is no shared expert
    dense_layers: int            # leading layers with a dense MLP (DeepSeek first_k_dense_replace)


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    family: str                   # activation profile: "llama", "gemma", "gpt2", "bert", "neox", "t5", ...
    hidden_size: int
    num_layers: int               # decoder layers (for T5: encoder + decoder blocks)
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    max_positions: int | None
    gated_mlp: bool
    norm: str                     # "rmsnorm" or "layernorm"
    norms_per_layer: int
    qk_norm: str                  # "", "head" (per head_dim) or "full" (OLMo 2: over the projection)
    causal_lm: bool               # has a language-model head and a next-token loss
    moe: MoE | None
    mla: Mapping | None
    attn_softcap: bool            # Gemma 2: tanh soft-capping of the attention scores (eager path)
    final_softcap: bool           # Gemma 2: tanh soft-capping of the logits
    dropout: float                # config dropout on attention/residual (GPT-2, BERT: 0.1)
    tensors: tuple[Tensor, ...]
    block_linears: tuple[Linear, ...]   # the linears of one (MoE, if any) decoder block
    dense_block_linears: tuple[Linear, ...]  # the linears of a dense block (MoE models' first layers)

    @cached_property
    def total_params(self) -> int:
        return sum(t.numel for t in self.tensors)

    def params_by_component(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.component] = out.get(t.component, 0) + t.numel
        return out

    @cached_property
    def largest_tensor(self) -> int:
        return max(t.numel for t in self.tensors)

    def module_sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.module] = out.get(t.module, 0) + t.numel
        return out

    @cached_property
    def largest_module(self) -> int:
        return max(self.module_sizes().values())

    @cached_property
    def tensor_sizes(self) -> tuple[int, ...]:
        return tuple(t.numel for t in self.tensors)

    @cached_property
    def tensor_shapes(self) -> tuple[tuple[tuple, int], ...]:
        return tuple((t.shape, t.numel) for t in self.tensors)

    @cached_property
    def layer_sizes(self) -> tuple[int, ...]:
        """Parameters of each numbered block (decoder layer), in order: FSDP's auto-wrap units."""
        sizes: dict[str, int] = {}
        for t in self.tensors:
            parts = t.name.split(".")
            for i, part in enumerate(parts[:-1]):
                if part.isdigit():
                    key = ".".join(parts[: i + 1])
                    sizes[key] = sizes.get(key, 0) + t.numel
                    break
        return tuple(sizes.values())

    @cached_property
    def block_matrices(self) -> tuple[tuple[int, int], ...]:
        """(numel, d_out) of every 2-D linear weight inside the blocks (what bitsandbytes quantizes)."""
        out = []
        for t in self.tensors:
            in_block = any(seg in t.name for seg in (".layers.", ".h.", ".layer.", ".block."))
            if t.linear and in_block and len(t.shape) == 2:
                out.append((t.numel, t.shape[0]))
        return tuple(out)

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    def linear_names(self) -> tuple[str, ...]:
        names = [lin.name for lin in self.dense_block_linears + self.block_linears]
        return tuple(dict.fromkeys(names))


# --- config access ---------------------------------------------------------------------------------


class _Cfg:
    """Typed reads of config.json fields with errors that name the field."""

    def __init__(self, cfg: Mapping):
        self.cfg = cfg

    def has(self, *keys: str) -> bool:
        return any(self.cfg.get(k) is not None for k in keys)

    def int(self, *keys: str, default: Any = None, lo: int = 1) -> int:
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or int(v) < lo:
                raise PlanError(f"model.{k}", f"must be an integer >= {lo}, got {v!r}")
            if int(v) > 1 << 40:
                raise PlanError(f"model.{k}", f"is implausibly large: {v!r}")
            return int(v)
        if default is None:
            raise PlanError(f"model.{keys[0]}", "is required for a custom model")
        return default

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise PlanError(f"model.{key}", f"must be true or false, got {v!r}")
        return v

    def str(self, key: str, default: str) -> str:
        v = self.cfg.get(key)
        return v if isinstance(v, str) else default


class _Builder:
    """Collects tensors in registration order."""

    def __init__(self):
        self.tensors: list[Tensor] = []

    def param(self, module: str, pname: str, numel: int, component: str, linear: str = "",
              shape: tuple = ()) -> None:
        self.tensors.append(Tensor(f"{module}.{pname}", numel, component, module, linear, shape))

    def matrix(self, module: str, pname: str, shape: tuple, component: str, linear: str = "") -> None:
        numel = 1
        for d in shape:
            numel *= d
        self.param(module, pname, numel, component, linear, shape)

    def linear(self, module: str, d_in: int, d_out: int, component: str, bias: bool = False) -> None:
        leaf = module.rsplit(".", 1)[-1]
        self.matrix(module, "weight", (d_out, d_in), component, leaf)
        if bias:
            self.param(module, "bias", d_out, component)

    def norm(self, module: str, dim: int, bias: bool = False) -> None:
        self.param(module, "weight", dim, "norm")
        if bias:
            self.param(module, "bias", dim, "norm")


# --- decoder-only models in the Llama lineage -----------------------------------------------------

_LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma", "gemma2", "gemma3_text", "gemma3",
               "phi3", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2", "gpt_oss", "olmo",
               "granite", "cohere", "starcoder2"}


def _llama_like(c: _Cfg, model_type: str) -> ModelArch:
    h = c.int("hidden_size")
    n_layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", default=heads)
    hd = c.int("head_dim", default=h // heads)
    inter = c.int("intermediate_size", default=4 * h)
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", model_type in ("gemma", "gemma2", "gemma3_text", "gemma3"))
    gemma = model_type.startswith("gemma")
    fused = model_type == "phi3"
    qkv_bias = model_type == "qwen2" or c.bool("attention_bias", model_type == "gpt_oss")
    o_bias = c.bool("attention_bias", model_type == "gpt_oss") and model_type != "qwen2"
    qk_norm = "head" if model_type in ("qwen3", "qwen3_moe", "gemma3_text", "gemma3") else (
        "full" if model_type == "olmo2" else "")
    norms_per_layer = 4 if model_type in ("gemma2", "gemma3_text", "gemma3") else 2
    moe = _moe_spec(c, model_type, inter)
    mla = _mla_spec(c, model_type)

    b = _Builder()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    block_linears: list[Linear] = []
    dense_linears: list[Linear] = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        att: list[Linear] = []
        if mla:
            _mla_attention(b, p, h, heads, mla, att)
        elif fused:
            b.linear(f"{p}.self_attn.qkv_proj", h, heads * hd + 2 * kv * hd, "attention")
            b.linear(f"{p}.self_attn.o_proj", heads * hd, h, "attention")
            att += [Linear("qkv_proj", h, heads * hd + 2 * kv * hd), Linear("o_proj", heads * hd, h)]
        else:
            for name, d_out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
                b.linear(f"{p}.self_attn.{name}", h, d_out, "attention", bias=qkv_bias)
                att.append(Linear(name, h, d_out))
            b.linear(f"{p}.self_attn.o_proj", heads * hd, h, "attention", bias=o_bias)
            att.append(Linear("o_proj", heads * hd, h))
            if qk_norm == "head":
                b.norm(f"{p}.self_attn.q_norm", hd)
                b.norm(f"{p}.self_attn.k_norm", hd)
            elif qk_norm == "full":
                b.norm(f"{p}.self_attn.q_norm", heads * hd)
                b.norm(f"{p}.self_attn.k_norm", kv * hd)
            if model_type == "gpt_oss":
                b.param(f"{p}.self_attn", "sinks", heads, "attention")
        mlp: list[Linear] = []
        if moe and i >= moe.dense_layers:
            _moe_block(b, p, h, moe, model_type, mlp)
        else:
            d_inter = inter
            if fused:
                b.linear(f"{p}.mlp.gate_up_proj", h, 2 * d_inter, "mlp")
                mlp.append(Linear("gate_up_proj", h, 2 * d_inter))
            else:
                for name in ("gate_proj", "up_proj"):
                    b.linear(f"{p}.mlp.{name}", h, d_inter, "mlp")
                    mlp.append(Linear(name, h, d_inter))
            b.linear(f"{p}.mlp.down_proj", d_inter, h, "mlp")
            mlp.append(Linear("down_proj", d_inter, h))
        if model_type == "olmo2":
            b.norm(f"{p}.post_attention_layernorm", h)
            b.norm(f"{p}.post_feedforward_layernorm", h)
        else:
            b.norm(f"{p}.input_layernorm", h)
            b.norm(f"{p}.post_attention_layernorm", h)
            if norms_per_layer == 4:
                b.norm(f"{p}.pre_feedforward_layernorm", h)
                b.norm(f"{p}.post_feedforward_layernorm", h)
        if moe and i >= moe.dense_layers:
            block_linears = att + mlp
        else:
            dense_linears = att + mlp
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    if not block_linears:
        block_linears = dense_linears
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="gemma" if gemma else "llama",
        hidden_size=h, num_layers=n_layers, num_heads=heads, num_kv_heads=kv, head_dim=hd,
        intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=True, norm="rmsnorm",
        norms_per_layer=norms_per_layer, qk_norm=qk_norm, causal_lm=True, moe=moe, mla=mla,
        attn_softcap=bool(c.cfg.get("attn_logit_softcapping")), final_softcap=bool(c.cfg.get("final_logit_softcapping")),
        dropout=0.0, tensors=tuple(b.tensors), block_linears=tuple(block_linears),
        dense_block_linears=tuple(dense_linears))


def _moe_spec(c: _Cfg, model_type: str, inter: int) -> MoE | None:
    experts = c.int("num_local_experts", "num_experts", "n_routed_experts", default=0, lo=0)
    if experts <= 1:
        return None
    return MoE(
        num_experts=experts,
        experts_per_token=c.int("num_experts_per_tok", "num_experts_per_token", default=2),
        expert_intermediate=c.int("moe_intermediate_size", default=inter),
        shared_intermediate=c.int("n_shared_experts", default=0, lo=0) * c.int("moe_intermediate_size",
                                                                                  default=inter),
        dense_layers=c.int("first_k_dense_replace", default=0, lo=0))


def _moe_block(b: _Builder, p: str, h: int, moe: MoE, model_type: str, out: list[Linear]) -> None:
    """Router + fused experts (+ shared expert) as transformers 5 registers them."""
    e, ei = moe.num_experts, moe.expert_intermediate
    if model_type == "gpt_oss":
        b.matrix(f"{p}.mlp.router", "weight", (e, h), "router")
        b.param(f"{p}.mlp.router", "bias", e, "router")
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, h, 2 * ei), "routed_experts")
        b.param(f"{p}.mlp.experts", "gate_up_proj_bias", e * 2 * ei, "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, ei, h), "routed_experts")
        b.param(f"{p}.mlp.experts", "down_proj_bias", e * h, "routed_experts")
        out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
        return
    if model_type.startswith("deepseek"):
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, ei), "routed_experts")
        b.matrix(f"{p}.mlp.gate", "weight", (e, h), "router")  # e_score_correction_bias is a buffer
    else:
        b.matrix(f"{p}.mlp.gate", "weight", (e, h), "router")
        b.matrix(f"{p}.mlp.experts", "gate_up_proj", (e, 2 * ei, h), "routed_experts")
        b.matrix(f"{p}.mlp.experts", "down_proj", (e, h, ei), "routed_experts")
    out += [Linear("gate_up_proj", h, 2 * ei, e), Linear("down_proj", ei, h, e)]
    if moe.shared_intermediate:
        si = moe.shared_intermediate
        for name in ("gate_proj", "up_proj"):
            b.linear(f"{p}.mlp.shared_experts.{name}", h, si, "shared_experts")
            out.append(Linear(name, h, si))
        b.linear(f"{p}.mlp.shared_experts.down_proj", si, h, "shared_experts")
        out.append(Linear("down_proj", si, h))


def _mla_spec(c: _Cfg, model_type: str) -> Mapping | None:
    if not c.has("kv_lora_rank"):
        return None
    return {"q_lora_rank": c.int("q_lora_rank", default=0, lo=0), "kv_lora_rank": c.int("kv_lora_rank"),
            "qk_nope": c.int("qk_nope_head_dim"), "qk_rope": c.int("qk_rope_head_dim"),
            "v_head": c.int("v_head_dim")}


def _mla_attention(b: _Builder, p: str, h: int, heads: int, mla: Mapping, out: list[Linear]) -> None:
    """DeepSeek multi-head latent attention (modeling_deepseek_v3.DeepseekV3Attention)."""
    qk_head = mla["qk_nope"] + mla["qk_rope"]
    a = f"{p}.self_attn"
    if mla["q_lora_rank"]:
        b.linear(f"{a}.q_a_proj", h, mla["q_lora_rank"], "attention")
        b.norm(f"{a}.q_a_layernorm", mla["q_lora_rank"])
        b.linear(f"{a}.q_b_proj", mla["q_lora_rank"], heads * qk_head, "attention")
        out += [Linear("q_a_proj", h, mla["q_lora_rank"]), Linear("q_b_proj", mla["q_lora_rank"], heads * qk_head)]
    else:
        b.linear(f"{a}.q_proj", h, heads * qk_head, "attention")
        out.append(Linear("q_proj", h, heads * qk_head))
    kv_a = mla["kv_lora_rank"] + mla["qk_rope"]
    b.linear(f"{a}.kv_a_proj_with_mqa", h, kv_a, "attention")
    b.norm(f"{a}.kv_a_layernorm", mla["kv_lora_rank"])
    kv_b = heads * (mla["qk_nope"] + mla["v_head"])
    b.linear(f"{a}.kv_b_proj", mla["kv_lora_rank"], kv_b, "attention")
    b.linear(f"{a}.o_proj", heads * mla["v_head"], h, "attention")
    out += [Linear("kv_a_proj_with_mqa", h, kv_a), Linear("kv_b_proj", mla["kv_lora_rank"], kv_b),
            Linear("o_proj", heads * mla["v_head"], h)]


# --- GPT-2, BERT, Falcon, BLOOM, GPT-NeoX, Phi-1/2, T5 --------------------------------------------


def _classic(c: _Cfg, model_type: str) -> ModelArch:
    """Pre-Llama blocks: LayerNorm with bias, plain (non-gated) GeLU MLP, biases on the linears."""
    h = c.int("hidden_size", "n_embd", "d_model")
    n_layers = c.int("num_hidden_layers", "n_layer", "num_layers")
    heads = c.int("num_attention_heads", "n_head", "num_heads")
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * h)
    hd = c.int("head_dim", default=h // heads)
    kv = heads
    b = _Builder()
    blk: list[Linear] = []
    tied = c.bool("tie_word_embeddings", model_type in ("gpt2", "bert", "bloom", "falcon"))
    family = {"gpt2": "gpt2", "bert": "bert", "falcon": "falcon", "bloom": "bloom", "gpt_neox": "neox",
              "phi": "phi"}.get(model_type, "gpt2")
    causal = model_type != "bert"
    max_pos = c.cfg.get("max_position_embeddings", c.cfg.get("n_positions"))
    if model_type == "gpt2":
        n_pos = c.int("n_positions", "max_position_embeddings", default=1024)
        b.matrix("transformer.wte", "weight", (vocab, h), "embedding")
        b.matrix("transformer.wpe", "weight", (n_pos, h), "embedding")
        for i in range(n_layers):
            p = f"transformer.h.{i}"
            b.norm(f"{p}.ln_1", h, bias=True)
            b.linear(f"{p}.attn.c_attn", h, 3 * h, "attention", bias=True)
            b.linear(f"{p}.attn.c_proj", h, h, "attention", bias=True)
            b.norm(f"{p}.ln_2", h, bias=True)
            b.linear(f"{p}.mlp.c_fc", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.c_proj", inter, h, "mlp", bias=True)
        blk = [Linear("c_attn", h, 3 * h), Linear("c_proj", h, h), Linear("c_fc", h, inter), Linear("c_proj", inter, h)]
        b.norm("transformer.ln_f", h, bias=True)
    elif model_type == "bert":
        n_pos = c.int("max_position_embeddings", default=512)
        b.matrix("embeddings.word_embeddings", "weight", (vocab, h), "embedding")
        b.matrix("embeddings.position_embeddings", "weight", (n_pos, h), "embedding")
        b.param("embeddings.token_type_embeddings", "weight", c.int("type_vocab_size", default=2) * h, "embedding")
        b.norm("embeddings.LayerNorm", h, bias=True)
        for i in range(n_layers):
            p = f"encoder.layer.{i}"
            for name in ("query", "key", "value"):
                b.linear(f"{p}.attention.self.{name}", h, h, "attention", bias=True)
            b.linear(f"{p}.attention.output.dense", h, h, "attention", bias=True)
            b.norm(f"{p}.attention.output.LayerNorm", h, bias=True)
            b.linear(f"{p}.intermediate.dense", h, inter, "mlp", bias=True)
            b.linear(f"{p}.output.dense", inter, h, "mlp", bias=True)
            b.norm(f"{p}.output.LayerNorm", h, bias=True)
        blk = [Linear("query", h, h), Linear("key", h, h), Linear("value", h, h), Linear("dense", h, h),
               Linear("dense", h, inter), Linear("dense", inter, h)]
        b.linear("pooler.dense", h, h, "other", bias=True)
    elif model_type == "falcon":
        kv = 1 if c.bool("multi_query", True) else heads
        kv = c.int("num_kv_heads", default=kv) if c.bool("new_decoder_architecture", False) else kv
        bias = c.bool("bias", False)
        b.matrix("transformer.word_embeddings", "weight", (vocab, h), "embedding")
        qkv = (heads + 2 * kv) * hd
        for i in range(n_layers):
            p = f"transformer.h.{i}"
            b.linear(f"{p}.self_attention.query_key_value", h, qkv, "attention", bias=bias)
            b.linear(f"{p}.self_attention.dense", h, h, "attention", bias=bias)
            b.linear(f"{p}.mlp.dense_h_to_4h", h, inter, "mlp", bias=bias)
            b.linear(f"{p}.mlp.dense_4h_to_h", inter, h, "mlp", bias=bias)
            b.norm(f"{p}.input_layernorm", h, bias=True)
        blk = [Linear("query_key_value", h, qkv), Linear("dense", h, h), Linear("dense_h_to_4h", h, inter),
               Linear("dense_4h_to_h", inter, h)]
        b.norm("transformer.ln_f", h, bias=True)
    elif model_type in ("bloom", "gpt_neox"):
        if model_type == "bloom":
            b.matrix("transformer.word_embeddings", "weight", (vocab, h), "embedding")
            b.norm("transformer.word_embeddings_layernorm", h, bias=True)
        else:
            b.matrix("gpt_neox.embed_in", "weight", (vocab, h), "embedding")
        root = "transformer.h" if model_type == "bloom" else "gpt_neox.layers"
        att = "self_attention" if model_type == "bloom" else "attention"
        for i in range(n_layers):
            p = f"{root}.{i}"
            b.norm(f"{p}.input_layernorm", h, bias=True)
            if model_type == "gpt_neox":
                b.norm(f"{p}.post_attention_layernorm", h, bias=True)
            b.linear(f"{p}.{att}.query_key_value", h, 3 * h, "attention", bias=True)
            b.linear(f"{p}.{att}.dense", h, h, "attention", bias=True)
            if model_type == "bloom":
                b.norm(f"{p}.post_attention_layernorm", h, bias=True)
            b.linear(f"{p}.mlp.dense_h_to_4h", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.dense_4h_to_h", inter, h, "mlp", bias=True)
        blk = [Linear("query_key_value", h, 3 * h), Linear("dense", h, h), Linear("dense_h_to_4h", h, inter),
               Linear("dense_4h_to_h", inter, h)]
        b.norm("transformer.ln_f" if model_type == "bloom" else "gpt_neox.final_layer_norm", h, bias=True)
        if not tied:
            b.matrix("embed_out", "weight", (vocab, h), "lm_head", "embed_out")
        tied = True  # handled above
    elif model_type == "phi":
        b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
        for i in range(n_layers):
            p = f"model.layers.{i}"
            for name in ("q_proj", "k_proj", "v_proj"):
                b.linear(f"{p}.self_attn.{name}", h, h, "attention", bias=True)
            b.linear(f"{p}.self_attn.dense", h, h, "attention", bias=True)
            b.linear(f"{p}.mlp.fc1", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.fc2", inter, h, "mlp", bias=True)
            b.norm(f"{p}.input_layernorm", h, bias=True)
        blk = [Linear("q_proj", h, h), Linear("k_proj", h, h), Linear("v_proj", h, h), Linear("dense", h, h),
               Linear("fc1", h, inter), Linear("fc2", inter, h)]
        b.norm("model.final_layernorm", h, bias=True)
        if not tied:
            b.linear("lm_head", h, vocab, "lm_head", bias=True)
            tied = True
    else:
        raise PlanError("model.model_type", f"unsupported model_type {model_type!r}")
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    gpt2_like_norms = 1 if model_type in ("falcon", "phi") else 2
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family=family, hidden_size=h,
        num_layers=n_layers, num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter,
        vocab_size=vocab, tied_embeddings=c.bool("tie_word_embeddings", model_type in ("gpt2", "bert", "bloom")),
        max_positions=max_pos, gated_mlp=False, norm="layernorm", norms_per_layer=gpt2_like_norms, qk_norm="",
        causal_lm=causal, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=_classic_dropout(c, model_type), tensors=tuple(b.tensors), block_linears=tuple(blk),
        dense_block_linears=tuple(blk))


def _classic_dropout(c: _Cfg, model_type: str) -> float:
    for key in ("resid_pdrop", "hidden_dropout_prob", "hidden_dropout", "resid_dropout", "dropout_rate"):
        v = c.cfg.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return 0.1 if model_type in ("gpt2", "bert") else 0.0


def _t5(c: _Cfg, model_type: str) -> ModelArch:
    """T5 / mT5 encoder-decoder (modeling_t5.py): no biases, RMS-style LayerNorm, gated-gelu for
    v1.1/mT5/T0. num_layers counts encoder + decoder blocks."""
    d = c.int("d_model", "hidden_size")
    n_enc = c.int("num_layers", "num_hidden_layers")
    n_dec = c.int("num_decoder_layers", default=n_enc)
    heads = c.int("num_heads", "num_attention_heads")
    d_kv = c.int("d_kv", "head_dim", default=d // heads)
    d_ff = c.int("d_ff", "intermediate_size")
    vocab = c.int("vocab_size")
    gated = c.str("feed_forward_proj", "relu").startswith("gated")
    tied = c.bool("tie_word_embeddings", True)
    inner = heads * d_kv
    b = _Builder()
    b.matrix("shared", "weight", (vocab, d), "embedding")
    mlp_names = ("wi_0", "wi_1") if gated else ("wi",)

    def block(p: str, cross: bool, first: bool) -> None:
        for att in ("SelfAttention",) + (("EncDecAttention",) if cross else ()):
            for name in ("q", "k", "v"):
                b.linear(f"{p}.{att}.{name}", d, inner, "attention")
            b.linear(f"{p}.{att}.o", inner, d, "attention")
            if first and att == "SelfAttention":
                b.param(f"{p}.{att}.relative_attention_bias", "weight",
                        c.int("relative_attention_num_buckets", default=32) * heads, "attention")
            b.norm(f"{p}.{att}.layer_norm", d)
        for name in mlp_names:
            b.linear(f"{p}.DenseReluDense.{name}", d, d_ff, "mlp")
        b.linear(f"{p}.DenseReluDense.wo", d_ff, d, "mlp")
        b.norm(f"{p}.DenseReluDense.layer_norm", d)

    for i in range(n_enc):
        block(f"encoder.block.{i}", False, i == 0)
    b.norm("encoder.final_layer_norm", d)
    for i in range(n_dec):
        block(f"decoder.block.{i}", True, i == 0)
    b.norm("decoder.final_layer_norm", d)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, d), "lm_head", "lm_head")
    blk = [Linear(n, d, inner) for n in ("q", "k", "v")] + [Linear("o", inner, d)] + \
          [Linear(n, d, d_ff) for n in mlp_names] + [Linear("wo", d_ff, d)]
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="t5", hidden_size=d,
        num_layers=n_enc + n_dec, num_heads=heads, num_kv_heads=heads, head_dim=d_kv, intermediate_size=d_ff,
        vocab_size=vocab, tied_embeddings=tied, max_positions=None, gated_mlp=gated, norm="rmsnorm",
        norms_per_layer=2, qk_norm="", causal_lm=True, moe=None, mla=None, attn_softcap=False,
        final_softcap=False, dropout=float(c.cfg.get("dropout_rate", 0.1) or 0.0), tensors=tuple(b.tensors),
        block_linears=tuple(blk), dense_block_linears=tuple(blk))


_CLASSIC = {"gpt2", "bert", "falcon", "bloom", "gpt_neox", "phi"}
_T5 = {"t5", "mt5"}
SUPPORTED_MODEL_TYPES = tuple(sorted(_LLAMA_LIKE | _CLASSIC | _T5))


def model_from_config(cfg: Mapping) -> ModelArch:
    """A Hugging Face config.json (as a mapping) -> ModelArch. Raises PlanError naming the field.

    A missing ``model_type`` is read as a Llama-style decoder (the most common custom case)."""
    if not isinstance(cfg, Mapping):
        raise PlanError("model", "must be a preset id or a config.json object")
    c = _Cfg(cfg)
    if "text_config" in cfg and isinstance(cfg["text_config"], Mapping) and not c.has("hidden_size"):
        merged = {**cfg["text_config"], "name": cfg.get("name", cfg["text_config"].get("model_type", "model"))}
        return model_from_config(merged)
    model_type = c.str("model_type", "llama")
    if model_type in _CLASSIC:
        return _classic(c, model_type)
    if model_type in _T5:
        return _t5(c, model_type)
    if model_type in _LLAMA_LIKE or model_type not in _CLASSIC:
        # Unknown decoder types are read as Llama-style when they carry the usual fields.
        if model_type not in _LLAMA_LIKE and not c.has("intermediate_size"):
            raise PlanError("model.model_type", f"unsupported model_type {model_type!r}; supported: "
                                                + ", ".join(SUPPORTED_MODEL_TYPES))
        return _llama_like(c, model_type)
    raise PlanError("model.model_type", f"unsupported model_type {model_type!r}")


_PRESET_CACHE: dict[str, ModelArch] = {}


def resolve_model(model: Any) -> ModelArch:
    """plan.model (preset id or config mapping) -> ModelArch. Presets are memoised: the architecture
    of a preset never changes, and building DeepSeek-V3's inventory takes milliseconds."""
    if isinstance(model, str):
        arch = _PRESET_CACHE.get(model)
        if arch is None:
            preset = MODELS[model]
            arch = model_from_config({**preset.hf_config, "name": preset.name})
            _PRESET_CACHE[model] = arch
        return arch
    return model_from_config(model)
