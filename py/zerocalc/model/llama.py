"""Decoder-only models in the Llama lineage, as transformers 5.x registers their modules
(`modeling_llama.py`, `modeling_qwen3.py`, `modeling_gemma2.py`, `modeling_mixtral.py`,
`modeling_deepseek_v3.py`, ...): module registration order is parameter order; MoE experts are one
module with fused 3-D `gate_up_proj` (E, 2I, h) and `down_proj` (E, h, I) tensors."""
from __future__ import annotations

from typing import Mapping

from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList

LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma", "gemma2", "gemma3_text", "gemma3",
               "phi3", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2", "gpt_oss", "olmo",
               "granite", "cohere", "starcoder2"}


def llama_like(c: ConfigReader, model_type: str) -> ModelArch:
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

    b = TensorList()
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


def _moe_spec(c: ConfigReader, model_type: str, inter: int) -> MoE | None:
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


def _moe_block(b: TensorList, p: str, h: int, moe: MoE, model_type: str, out: list[Linear]) -> None:
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


def _mla_spec(c: ConfigReader, model_type: str) -> Mapping | None:
    if not c.has("kv_lora_rank"):
        return None
    return {"q_lora_rank": c.int("q_lora_rank", default=0, lo=0), "kv_lora_rank": c.int("kv_lora_rank"),
            "qk_nope": c.int("qk_nope_head_dim"), "qk_rope": c.int("qk_rope_head_dim"),
            "v_head": c.int("v_head_dim")}


def _mla_attention(b: TensorList, p: str, h: int, heads: int, mla: Mapping, out: list[Linear]) -> None:
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
