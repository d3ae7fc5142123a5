"""Decoder-only models in the Llama lineage, as transformers 5.x registers their modules
(`modeling_llama.py`, `modeling_qwen3.py`, `modeling_gemma2.py`, `modeling_cohere.py`, `modeling_starcoder2.py`,
`modeling_mixtral.py`, `modeling_deepseek_v3.py`, ...): one builder, the per-model_type switches in
`families.py` (read from each config.json by its own field names), the sparse MLPs and MLA in `moe.py`.
Module registration order is parameter order."""
from __future__ import annotations

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList
from .families import LLAMA_LIKE, spec_for
from .hybrid import deltanet_dims, gated_deltanet, is_linear_layer, lightning_attention
from .moe import is_sparse, mla_attention, mla_spec, moe_block, moe_spec

# Gated DeltaNet hybrids whose layers memory/deltanet.py holds to traces (tools/memtrace/ssm_trace.py qwen3_next,
# qwen3_5_text; Qwen3.5-MoE: Qwen3.5's layers with Qwen3-Next's sparse block)
DELTANET_TRACED = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "lara_mini")
# modeling_lara_mini.py LaraMiniRMSNormGated multiplies its weight in fp32 ("Strict FP32 norm"): memory/deltanet.py
FP32_GATED_NORM = ("lara_mini",)


def switch(c: ConfigReader, value) -> bool:
    """A family switch: a constant, or (field, default) with ``a|b`` naming alternative field names."""
    if isinstance(value, bool):
        return value
    fields, default = value
    for f in fields.split("|"):
        if c.cfg.get(f) is not None:
            return c.bool(f, default)
    return default


def sliding(c: ConfigReader, i: int, every: int) -> bool:
    """Layer ``i`` is a sliding-window layer: its ``layer_types`` entry, or, when the config has none and the
    configuration class fills them in, the class's pattern (full at 0 and every ``every``-th layer,
    MiMoV2FlashConfig.__post_init__); without either, full attention."""
    kinds = c.cfg.get("layer_types")
    if isinstance(kinds, list) and i < len(kinds):
        return kinds[i] == "sliding_attention"
    return bool(every) and not (i == 0 or (i + 1) % every == 0)


def llama_like(c: ConfigReader, model_type: str) -> ModelArch:
    s = spec_for(model_type)
    per_layer = c.cfg.get("num_attention_heads_per_layer")
    if isinstance(per_layer, list) and len(set(per_layer)) > 1:
        raise PlanError("model.num_attention_heads_per_layer", f"model_type {model_type!r} with heads varying by "
                                                               "layer is not modelled")
    if s["refuse_if"] and c.cfg.get(s["refuse_if"]):
        raise PlanError(f"model.{s['refuse_if']}", f"model_type {model_type!r} with {s['refuse_if']} on is not modelled")
    h = c.int("hidden_size")
    n_layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", default=heads)
    hd = c.int("head_dim", default=s["head_dim"] or h // heads)
    vd = c.int(s["v_head_dim"][0], default=s["v_head_dim"][1] or hd) if s["v_head_dim"] else hd
    inter = c.int("intermediate_size", default=4 * h)
    vocab = c.int("vocab_size")
    tied = switch(c, s["tie"])
    qkv_bias, o_bias, mlp_bias = switch(c, s["qkv_bias"]), switch(c, s["o_bias"]), switch(c, s["mlp_bias"])
    qk_norm = s["qk_norm"] if switch(c, s["qk_norm_on"]) else ""
    moe = moe_spec(c, s["moe"], inter, s["first_dense"], s["shared_experts"], s["router_fp32"])
    mla = mla_spec(c, s["attn"] == "mla_dsa") if s["attn"] in ("mla", "mla_dsa") else None
    norm_bias = s["norm"] == "ln"

    def norm(module: str, dim: int) -> None:
        if s["norm"] != "none":
            b.norm(module, dim, bias=norm_bias)

    def qk_norms(p: str) -> None:
        qn, kn = s["qk_norm_names"]
        if qk_norm == "head":
            b.norm(f"{p}.self_attn.{qn}", hd, bias=s["qk_norm_bias"])
            b.norm(f"{p}.self_attn.{kn}", hd, bias=s["qk_norm_bias"])
        elif qk_norm == "full":
            b.norm(f"{p}.self_attn.{qn}", heads * hd)
            b.norm(f"{p}.self_attn.{kn}", kv * hd)

    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    block_linears: list[Linear] = []
    dense_linears: list[Linear] = []
    kinds: dict[tuple, tuple] = {}            # linear-attention hybrids: each layer's linears, one tuple per kind
    per_layer: list[tuple] = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        att: list[Linear] = []
        if s["linear_attn"] == "lightning" and is_linear_layer(c, i, "alternate"):
            lightning_attention(b, p, h, heads, hd, att)
        elif s["linear_attn"] in ("fused", "split") and is_linear_layer(c, i):
            gated_deltanet(b, p, h, c, s["linear_attn"] == "fused", att)
        elif mla:
            kinds = c.cfg.get("indexer_types")
            layer_mla = mla if not (isinstance(kinds, list) and i < len(kinds) and kinds[i] != "full") else \
                {**mla, "indexer": None}
            mla_attention(b, p, h, heads, layer_mla, att, bias=qkv_bias)
        elif s["attn"] == "fused":
            b.linear(f"{p}.self_attn.qkv_proj", h, heads * hd + 2 * kv * hd, "attention", bias=qkv_bias)
            b.linear(f"{p}.self_attn.o_proj", heads * hd, h, "attention", bias=o_bias)
            att += [Linear("qkv_proj", h, heads * hd + 2 * kv * hd), Linear("o_proj", heads * hd, h)]
            qk_norms(p)
        else:
            q_out = heads * hd * (2 if s["q_gate"] else 1)     # gated attention: query and its gate
            swa = sliding(c, i, s["swa_every"])
            lkv = kv * (s["swa_kv"] if swa else 1)
            for name, d_out in (("q_proj", q_out), ("k_proj", lkv * hd), ("v_proj", lkv * vd)):
                b.linear(f"{p}.self_attn.{name}", h, d_out, "attention", bias=qkv_bias)
                att.append(Linear(name, h, d_out))
            b.linear(f"{p}.self_attn.o_proj", heads * vd, h, "attention", bias=o_bias)
            att.append(Linear("o_proj", heads * vd, h))
            if s["diff_lambdas"]:
                for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                    b.param(f"{p}.self_attn", name, hd, "attention")
            if s["sub_norms"]:
                b.norm(f"{p}.self_attn.attn_sub_norm", h)
            if s["o_gate"]:
                # "g_proj" (modeling_laguna.py): one gate per head when gating is per-head (True), else per channel
                per_head = s["o_gate"] == "g_proj" and c.cfg.get("gating", True) in (True, "per-head")
                name, d_out = ("g_proj" if s["o_gate"] == "g_proj" else "gate_proj"), heads if per_head else heads * hd
                b.linear(f"{p}.self_attn.{name}", h, d_out, "attention")
                att.append(Linear(name, h, d_out))
            qk_norms(p)
            if s["sinks"] is True or (s["sinks"] == "swa" and swa):
                b.param(f"{p}.self_attn", "sinks", heads, "attention")
        mlp: list[Linear] = []
        sparse = bool(moe) and is_sparse(c, i, s["first_dense"])
        if sparse:
            moe_block(b, p, h, moe, s["moe"], mlp, s["mlp_module"])
        elif s["mlp"] == "fused":
            up, down = s["mlp_names"]
            b.linear(f"{p}.mlp.{up}", h, 2 * inter, "mlp", bias=mlp_bias)
            b.linear(f"{p}.mlp.{down}", inter, h, "mlp", bias=mlp_bias)
            mlp += [Linear(up, h, 2 * inter), Linear(down, inter, h)]
        else:
            *ups, down = s["mlp_names"]
            f = f"{p}.{s['mlp_module']}"
            d_inter = c.int(s["dense_inter"], default=inter) if s["dense_inter"] else inter
            for name in ups:
                b.linear(f"{f}.{name}", h, d_inter, "mlp", bias=mlp_bias)
                mlp.append(Linear(name, h, d_inter))
            if s["sub_norms"]:
                b.norm(f"{f}.ffn_sub_norm", d_inter)
            b.linear(f"{f}.{down}", d_inter, h, "mlp", bias=mlp_bias)
            mlp.append(Linear(down, d_inter, h))
            for extra in s["mlp_extra"]:
                mod, pname = extra.rsplit(".", 1)
                b.param(f"{p}.mlp.{mod}", pname, 1, "mlp")
        extra, on = s["extra_norms"]
        for name in s["block_norms"] + (extra if switch(c, on) else ()):
            norm(f"{p}.{name}", h)
        if sparse:
            block_linears = att + mlp
        else:
            dense_linears = att + mlp
        if s["linear_attn"]:
            lins = tuple(att + mlp)
            per_layer.append(kinds.setdefault(lins, lins))
    norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    if switch(c, s["lm_head_bias"]):
        b.param("lm_head", "bias", vocab, "lm_head")
    if not block_linears:
        block_linears = dense_linears
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family=s["family"],
        hidden_size=h, num_layers=n_layers, num_heads=heads, num_kv_heads=kv, head_dim=hd,
        intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=c.cfg.get("max_position_embeddings"), gated_mlp=s["mlp"] != "plain",
        norm="layernorm" if s["norm"] == "ln" else "rmsnorm",
        norms_per_layer=len(s["block_norms"]), qk_norm=qk_norm, causal_lm=True, moe=moe, mla=mla,
        attn_softcap=bool(c.cfg.get("attn_logit_softcapping")), final_softcap=bool(c.cfg.get("final_logit_softcapping")),
        dropout=0.0, tensors=tuple(b.tensors), block_linears=tuple(block_linears),
        dense_block_linears=tuple(dense_linears), layer_linears=tuple(per_layer) if per_layer else None,
        deltanet=deltanet_dims(c) | ({"gnorm_fp32": True} if model_type in FP32_GATED_NORM else {})
        if s["linear_attn"] in ("fused", "split") else None,
        lightning={"block_size": c.int("block_size", default=256)} if s["linear_attn"] == "lightning" else None,
        support="exact parameter count; activations approximate (the Gated DeltaNet layers by Qwen3.5's traced rule, "
                "memory/deltanet.py; this model's other layers not traced)"
                if s["linear_attn"] in ("fused", "split") and model_type not in DELTANET_TRACED else "exact")


__all__ = ["LLAMA_LIKE", "llama_like", "switch"]
