"""State-space models: Mamba, Mamba-2 and the Nemotron-H hybrid. Mamba (modeling_mamba.py MambaForCausalLM, transformers 5.24), every block a selective
SSM mixer with no attention: ``backbone.layers.N.norm`` (RMSNorm) and ``mixer`` = A_log (I x N), D (I),
depthwise conv1d (I, 1, conv_kernel) with use_conv_bias, in_proj (h -> 2I, use_bias), x_proj (I -> R + 2N),
dt_proj (R -> I, biased), out_proj (I -> h, use_bias); ``backbone.norm_f``; lm_head tied by default.
I = intermediate_size (expand x h), N = state_size, R = time_step_rank ("auto": ceil(h / 16)).

The parameter count is exact (tests/test_architectures.py). The activations of Mamba, FalconMamba, Mamba-2, Bamba,
Falcon-H1, Nemotron-H and Granite 4 (their MoE layers too) are memory/ssm_blocks.py's (the mamba_ssm kernel's
saves, traced); the other types' blocks are costed as a classic block of the same linears (``support`` says so)."""
from __future__ import annotations

import math
from dataclasses import replace

from ..errors import PlanError
from .arch import Linear, ModelArch, MoE
from .config import ConfigReader, TensorList


def mamba(c: ConfigReader) -> ModelArch:
    h = c.int("hidden_size")
    n_layers = c.int("num_hidden_layers")
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size", default=int(c.cfg.get("expand", 2) * h))
    n = c.int("state_size", default=16)
    k = c.int("conv_kernel", default=4)
    r = c.cfg.get("time_step_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else c.int("time_step_rank")
    bias, conv_bias = c.bool("use_bias", False), c.bool("use_conv_bias", True)
    tied = c.bool("tie_word_embeddings", True)
    b = TensorList()
    b.matrix("backbone.embeddings", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        b.norm(f"{p}.norm", h)
        m = f"{p}.mixer"
        b.matrix(m, "A_log", (inter, n), "mlp")
        b.param(m, "D", inter, "mlp")
        b.matrix(f"{m}.conv1d", "weight", (inter, 1, k), "mlp")
        if conv_bias:
            b.param(f"{m}.conv1d", "bias", inter, "mlp")
        b.linear(f"{m}.in_proj", h, 2 * inter, "mlp", bias=bias)
        b.linear(f"{m}.x_proj", inter, r + 2 * n, "mlp")
        b.linear(f"{m}.dt_proj", r, inter, "mlp", bias=True)
        b.linear(f"{m}.out_proj", inter, h, "mlp", bias=bias)
    b.norm("backbone.norm_f", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("in_proj", h, 2 * inter), Linear("x_proj", inter, r + 2 * n), Linear("dt_proj", r, inter),
            Linear("out_proj", inter, h))
    # activations: memory/ssm_blocks.py mamba1_block (mamba_ssm's MambaInnerFn), held to tests/data/mamba_trace.json;
    # falcon_mamba (model/__init__.py builds it here) calls the same MambaInnerFn with its weightless B / C / dt
    # RMS norms, which normalise inside the kernel's forward and save B and C in the same shapes
    # (tests/data/falcon_mamba_trace.json)
    dims = {"layout": "mamba1", "inner": inter, "state": n, "rank": r,
            "residual_fp32": c.bool("residual_in_fp32", True)}
    return ModelArch(
        name=c.str("name", "mamba"), model_type="mamba", family="mamba", hidden_size=h, num_layers=n_layers,
        num_heads=1, num_kv_heads=1, head_dim=h, intermediate_size=inter, vocab_size=vocab, tied_embeddings=tied,
        max_positions=None, gated_mlp=False, norm="rmsnorm", norms_per_layer=1, qk_norm="", causal_lm=True,
        moe=None, mla=None, attn_softcap=False, final_softcap=False, dropout=0.0, tensors=tuple(b.tensors),
        block_linears=lins, dense_block_linears=lins, ssm=dims)


def mamba2_mixer(b: TensorList, m: str, h: int, inner: int, heads: int, groups: int, state: int, kernel: int,
                 conv_bias: bool, proj_bias: bool) -> list[Linear]:
    """A Mamba-2 mixer (modeling_mamba2.py Mamba2Mixer; nemotron_h, granitemoehybrid): I = ``inner``
    (Mamba-2, Granite: expand x h; Nemotron-H: mamba_num_heads x mamba_head_dim), conv = I + 2 x groups x
    state; dt_bias, A_log, D (heads), conv1d (conv, 1, kernel) [+ bias], in_proj (h -> I + conv + heads)
    [+ bias], a gated RMSNorm over I, out_proj (I -> h) [+ bias]."""
    conv = inner + 2 * groups * state
    for name in ("dt_bias", "A_log", "D"):
        b.param(m, name, heads, "mlp")
    b.matrix(f"{m}.conv1d", "weight", (conv, 1, kernel), "mlp")
    if conv_bias:
        b.param(f"{m}.conv1d", "bias", conv, "mlp")
    b.linear(f"{m}.in_proj", h, inner + conv + heads, "mlp", bias=proj_bias)
    b.norm(f"{m}.norm", inner)
    b.linear(f"{m}.out_proj", inner, h, "mlp", bias=proj_bias)
    return [Linear("in_proj", h, inner + conv + heads), Linear("out_proj", inner, h)]


def _arch(c: ConfigReader, model_type: str, b: TensorList, h: int, n_layers: int, vocab: int, tied: bool,
          lins: tuple, heads: int = 1, kv: int = 1, hd: int = 0, moe=None) -> ModelArch:
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family="mamba", hidden_size=h, num_layers=n_layers,
        num_heads=heads, num_kv_heads=kv, head_dim=hd or h, intermediate_size=c.int("intermediate_size", default=4 * h),
        vocab_size=vocab, tied_embeddings=tied, max_positions=c.cfg.get("max_position_embeddings"),
        gated_mlp=False, norm="rmsnorm", norms_per_layer=1, qk_norm="", causal_lm=True, moe=moe, mla=None,
        attn_softcap=False, final_softcap=False, dropout=0.0, tensors=tuple(b.tensors), block_linears=lins,
        dense_block_linears=lins,
        support="exact parameter count; activations approximate (the state-space layers are costed as a classic "
                "block; not traced)")


def mamba2(c: ConfigReader) -> ModelArch:
    """Mamba-2 (modeling_mamba2.py Mamba2ForCausalLM): backbone.embeddings, layers of norm + mixer, norm_f."""
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("backbone.embeddings", "weight", (vocab, h), "embedding")
    lins: list = []
    for i in range(n_layers):
        b.norm(f"backbone.layers.{i}.norm", h)
        lins = mamba2_mixer(b, f"backbone.layers.{i}.mixer", h, int(c.cfg.get("expand", 2) * h),
                            c.int("num_heads", default=128), c.int("n_groups", default=8), c.int("state_size", default=128),
                            c.int("conv_kernel", default=4), c.bool("use_conv_bias", True), c.bool("use_bias", False))
    b.norm("backbone.norm_f", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    dims = {"inner": int(c.cfg.get("expand", 2) * h), "heads": c.int("num_heads", default=128),
            "groups": c.int("n_groups", default=8), "residual_fp32": c.bool("residual_in_fp32", True)}
    # activations: memory/ssm_blocks.py mamba2_block, held to tests/data/ssm_trace.json (tools/memtrace/ssm_trace.py)
    return replace(_arch(c, "mamba2", b, h, n_layers, vocab, tied, tuple(lins)), ssm=dims, support="exact")


def nemotron_h_config(cfg) -> dict:
    """NemotronHConfig.__post_init__'s backward compatibility (configuration_nemotron_h.py): the published
    checkpoints' mamba_n_groups / mamba_d_conv / mamba_conv_bias / mamba_expand override n_groups, conv_kernel,
    use_conv_bias, expand; hybrid_override_pattern ("M" linear_attention, "E" moe, "*" full_attention, "-" mlp)
    gives layers_block_type when that and layer_types are absent, else the default [linear_attention, moe,
    full_attention, mlp]; num_hidden_layers is ignored."""
    out = dict(cfg)
    for old, new in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel"),
                     ("mamba_conv_bias", "use_conv_bias"), ("mamba_expand", "expand")):
        if old in out:
            out[new] = out.pop(old)
    kinds = out.get("layers_block_type") or out.get("layer_types")
    if not kinds:
        pattern = out.get("hybrid_override_pattern")
        kinds = list(pattern) if isinstance(pattern, str) and pattern else \
            ["linear_attention", "moe", "full_attention", "mlp"]
    out["layers_block_type"] = kinds
    return out


def nemotron_h(c: ConfigReader) -> ModelArch:
    """Nemotron-H (modeling_nemotron_h.py): per ``layers_block_type`` entry a block of norm + mixer, the mixer a
    Mamba-2 mixer (linear_attention / mamba), GQA attention (full_attention / attention: q/k/v/o,
    attention_bias), a ReLU² MLP (mlp: up_proj/down_proj, mlp_bias) or a MoE (moe: experts up_proj (E, I, h)
    / down_proj (E, h, I), gate (E x h), shared_experts up/down of moe_shared_expert_intermediate_size; with
    moe_latent_size L the experts are (E, I, L) / (E, L, I) between fc1_latent_proj h -> L and fc2_latent_proj)."""
    c = ConfigReader(nemotron_h_config(c.cfg))
    h, vocab = c.int("hidden_size"), c.int("vocab_size")
    kinds = c.cfg["layers_block_type"]
    heads, kv = c.int("num_attention_heads", default=32), c.int("num_key_value_heads", default=8)
    hd = c.int("head_dim", default=h // heads)
    att_bias, mlp_bias = c.bool("attention_bias", False), c.bool("mlp_bias", False)
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embeddings", "weight", (vocab, h), "embedding")
    lins: list = []
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        m = f"{p}.mixer"
        b.norm(f"{p}.norm", h)
        if kind in ("linear_attention", "mamba", "M"):
            mh = c.int("mamba_num_heads", default=128)
            lins = mamba2_mixer(b, m, h, mh * c.int("mamba_head_dim", default=64), mh, c.int("n_groups", default=8), c.int("ssm_state_size", default=128),
                                c.int("conv_kernel", default=4), c.bool("use_conv_bias", True),
                                c.bool("mamba_proj_bias", False))
        elif kind in ("full_attention", "attention", "*"):
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{m}.{name}", d_in, d_out, "attention", bias=att_bias)
        elif kind in ("mlp", "-"):
            inter = c.int("intermediate_size")
            b.linear(f"{m}.up_proj", h, inter, "mlp", bias=mlp_bias)
            b.linear(f"{m}.down_proj", inter, h, "mlp", bias=mlp_bias)
        elif kind in ("moe", "E"):
            e, ei = c.int("n_routed_experts"), c.int("moe_intermediate_size")
            # NemotronHExperts: input_dim = moe_latent_size when set (fc1 / fc2_latent_proj around the experts)
            lat = c.int("moe_latent_size") if c.cfg.get("moe_latent_size") is not None else h
            b.matrix(f"{m}.experts", "up_proj", (e, ei, lat), "routed_experts")
            b.matrix(f"{m}.experts", "down_proj", (e, lat, ei), "routed_experts")
            b.matrix(f"{m}.gate", "weight", (e, h), "router")
            si = c.int("moe_shared_expert_intermediate_size", default=0, lo=0) * (c.int("n_shared_experts", default=1, lo=0) > 0)
            if si:
                b.linear(f"{m}.shared_experts.up_proj", h, si, "shared_experts", bias=mlp_bias)
                b.linear(f"{m}.shared_experts.down_proj", si, h, "shared_experts", bias=mlp_bias)
            if c.cfg.get("moe_latent_size") is not None:
                b.linear(f"{m}.fc1_latent_proj", h, lat, "routed_experts", bias=mlp_bias)
                b.linear(f"{m}.fc2_latent_proj", lat, h, "routed_experts", bias=mlp_bias)
        else:
            raise PlanError("model.layers_block_type", f"model_type 'nemotron_h': layer kind {kind!r} is not modelled")
    b.norm("model.norm_f", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = _arch(c, "nemotron_h", b, h, len(kinds), vocab, tied, tuple(lins), heads, kv, hd)
    # activations: memory/ssm_blocks.py single_mixer_layer, each layer one mixer of its kind (its own linears),
    # held to tests/data/nemotron_h_trace.json (tools/memtrace/ssm_trace.py nemotron_h)
    mh = c.int("mamba_num_heads", default=128)
    mixer = (Linear("in_proj", h, mh * c.int("mamba_head_dim", default=64) * 2
                    + 2 * c.int("n_groups", default=8) * c.int("ssm_state_size", default=128) + mh),
             Linear("out_proj", mh * c.int("mamba_head_dim", default=64), h))
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h))
    mlp = (Linear("up_proj", h, c.int("intermediate_size", default=4 * h)),
           Linear("down_proj", c.int("intermediate_size", default=4 * h), h))
    per_kind = {"linear_attention": mixer, "mamba": mixer, "M": mixer, "full_attention": attn, "attention": attn,
                "*": attn, "mlp": mlp, "-": mlp}
    dims = {"inner": mh * c.int("mamba_head_dim", default=64), "heads": mh, "groups": c.int("n_groups", default=8),
            "residual_fp32": False, "fp32_norm": True, "layout": "single"}
    if any(kind in ("moe", "E") for kind in kinds):
        # NemotronHMoE: the fp32 router, the non-gated experts (E, I, h) / (E, h, I) and the shared ReLU² MLP;
        # memory/ssm_blocks.py nemotron_moe, held to tests/data/nemotron_h_moe_trace.json (with the latent
        # projections: nemotron_h_latent_trace.json)
        e, ei = c.int("n_routed_experts"), c.int("moe_intermediate_size")
        si = (c.int("moe_shared_expert_intermediate_size", default=0, lo=0)
              * (c.int("n_shared_experts", default=1, lo=0) > 0))
        lat = c.int("moe_latent_size") if c.cfg.get("moe_latent_size") is not None else h
        moe_lins = (Linear("experts.up_proj", lat, ei, e), Linear("experts.down_proj", ei, lat, e))
        if si:
            moe_lins += (Linear("up_proj", h, si), Linear("down_proj", si, h))
        if c.cfg.get("moe_latent_size") is not None:
            moe_lins += (Linear("fc1_latent_proj", h, lat), Linear("fc2_latent_proj", lat, h))
        per_kind |= {"moe": moe_lins, "E": moe_lins}
        dims["moe"] = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=2),
                          expert_intermediate=ei, shared_intermediate=si, dense_layers=0, router_fp32="cast")
    dims["layers"] = tuple(per_kind[kind] for kind in kinds)
    return replace(arch, block_linears=mixer, dense_block_linears=attn + mlp, ssm=dims, support="exact")


def granitemoehybrid(c: ConfigReader) -> ModelArch:
    """Granite 4 (modeling_granitemoehybrid.py GraniteMoeHybridDecoderLayer): input_layernorm,
    post_attention_layernorm, block_sparse_moe (router E x h, experts (E, 2I, h) / (E, h, I); none with 0
    experts), shared_mlp (input_linear h -> 2 x shared_intermediate_size, output_linear), then a Mamba-2
    mixer (``mamba``, layer_types linear_attention: mamba_n_heads, mamba_n_groups, mamba_d_state,
    mamba_d_conv, mamba_expand x h) or GQA self_attn (attention_bias)."""
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), h // heads
    kinds = c.cfg.get("layer_types") or c.cfg.get("layers_block_type") or ["linear_attention"] * n_layers
    e, inter = c.int("num_local_experts", default=8, lo=0), c.int("intermediate_size")
    si = c.int("shared_intermediate_size", default=1024)
    bias, tied = c.bool("attention_bias", False), c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    lins: list = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        if e > 0:
            b.matrix(f"{p}.block_sparse_moe.router", "weight", (e, h), "router")
            b.matrix(f"{p}.block_sparse_moe.experts", "gate_up_proj", (e, 2 * inter, h), "routed_experts")
            b.matrix(f"{p}.block_sparse_moe.experts", "down_proj", (e, h, inter), "routed_experts")
        b.linear(f"{p}.shared_mlp.input_linear", h, 2 * si, "shared_experts")
        b.linear(f"{p}.shared_mlp.output_linear", si, h, "shared_experts")
        if kinds[i] == "linear_attention":
            lins = mamba2_mixer(b, f"{p}.mamba", h, int(c.cfg.get("mamba_expand", 2) * h),
                                c.int("mamba_n_heads", default=128), c.int("mamba_n_groups", default=1),
                                c.int("mamba_d_state", default=256), c.int("mamba_d_conv", default=4),
                                c.bool("mamba_conv_bias", True), c.bool("mamba_proj_bias", False))
        else:
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention", bias=bias)
    b.norm("model.norm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    arch = _arch(c, "granitemoehybrid", b, h, n_layers, vocab, tied, tuple(lins), heads, kv, hd)
    # activations: memory/ssm_blocks.py hybrid_layer, held to tests/data/granitemoehybrid_trace.json (dense,
    # Granite-4.0-H-Micro's layout) and granitemoehybrid_moe_trace.json (experts, Granite-4.0-H-Tiny's)
    inner = int(c.cfg.get("mamba_expand", 2) * h)
    mh, groups = c.int("mamba_n_heads", default=128), c.int("mamba_n_groups", default=1)
    mlp = (Linear("input_linear", h, 2 * si), Linear("output_linear", si, h))
    if e > 0:
        # GraniteMoeHybridMoE beside shared_mlp: the router and the fused experts (memory/blocks.py sparse_moe)
        mlp += (Linear("experts.gate_up_proj", h, 2 * inter, e), Linear("experts.down_proj", inter, h, e))
    mixer = (Linear("in_proj", h, 2 * inner + 2 * groups * c.int("mamba_d_state", default=256) + mh),
             Linear("out_proj", inner, h)) + mlp
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h)) + mlp
    dims = {"inner": inner, "heads": mh, "groups": groups, "residual_fp32": False,
            "layers": tuple(mixer if kind == "linear_attention" else attn for kind in kinds[:n_layers])}
    if e > 0:
        dims["moe"] = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=2),
                          expert_intermediate=inter, shared_intermediate=0, dense_layers=0)
    if c.cfg.get("position_embedding_type") == "rope":
        dims["rope_dim"] = hd
    return replace(arch, block_linears=mixer, dense_block_linears=attn, gated_mlp=True, ssm=dims, support="exact")


def falcon_h1(c: ConfigReader) -> ModelArch:
    """Falcon-H1 (modeling_falcon_h1.py FalconH1DecoderLayer): every layer runs attention and a Mamba-2 mixer
    side by side: feed_forward (gate/up/down, mlp_bias), mamba (I = mamba_d_ssm or mamba_expand x h;
    mamba_proj_bias on in_proj, projectors_bias on out_proj, a gated norm only with mamba_rms_norm),
    self_attn (q/k/v/o, attention_bias), input_layernorm, pre_ff_layernorm; final_layernorm."""
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), c.int("head_dim", default=h // heads)
    inter, mlp_bias, att_bias = c.int("intermediate_size"), c.bool("mlp_bias", False), c.bool("attention_bias", False)
    inner = c.int("mamba_d_ssm", default=int(c.cfg.get("mamba_expand", 2) * h))
    mh, groups, state = c.int("mamba_n_heads", default=128), c.int("mamba_n_groups", default=1), c.int("mamba_d_state", default=256)
    conv = inner + 2 * groups * state
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{p}.feed_forward.{name}", d_in, d_out, "mlp", bias=mlp_bias)
        m = f"{p}.mamba"
        for name in ("dt_bias", "A_log", "D"):
            b.param(m, name, mh, "attention")
        b.matrix(f"{m}.conv1d", "weight", (conv, 1, c.int("mamba_d_conv", default=4)), "attention")
        if c.bool("mamba_conv_bias", True):
            b.param(f"{m}.conv1d", "bias", conv, "attention")
        b.linear(f"{m}.in_proj", h, inner + conv + mh, "attention", bias=c.bool("mamba_proj_bias", False))
        if c.bool("mamba_rms_norm", False):
            b.norm(f"{m}.norm", inner)
        b.linear(f"{m}.out_proj", inner, h, "attention", bias=c.bool("projectors_bias", False))
        for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                  ("o_proj", heads * hd, h)):
            b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention", bias=att_bias)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.pre_ff_layernorm", h)
    b.norm("model.final_layernorm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("in_proj", h, inner + conv + mh), Linear("out_proj", inner, h), Linear("gate_proj", h, inter),
            Linear("up_proj", h, inter), Linear("down_proj", inter, h), Linear("q_proj", h, heads * hd),
            Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd), Linear("o_proj", heads * hd, h))
    # activations: memory/ssm_blocks.py falcon_h1_layer, held to tests/data/falcon_h1_trace.json
    dims = {"inner": inner, "heads": mh, "groups": groups, "residual_fp32": False, "layout": "falcon_h1", "mup": True,
            "gated_norm": c.bool("mamba_rms_norm", False), "rope_dim": hd}
    return replace(_arch(c, "falcon_h1", b, h, n_layers, vocab, tied, lins, heads, kv, hd), gated_mlp=True, ssm=dims,
                   support="exact")


def jamba(c: ConfigReader) -> ModelArch:
    """Jamba (modeling_jamba.py): attention where layer % attn_layer_period == attn_layer_offset, else a Mamba
    mixer (A_log (I, N), D, conv1d, in_proj h -> 2I, x_proj, dt_proj, out_proj, and the weight-only
    dt_layernorm / b_layernorm / c_layernorm; I = mamba_expand x h, R = mamba_dt_rank); a MoE feed_forward
    (router, experts (E, 2I, h) / (E, h, I)) where layer % expert_layer_period == expert_layer_offset, else
    gate/up/down; input_layernorm, pre_ff_layernorm; final_layernorm."""
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), h // heads
    inter, e = c.int("intermediate_size"), c.int("num_experts", default=16)
    inner, n, k = int(c.cfg.get("mamba_expand", 2) * h), c.int("mamba_d_state", default=16), c.int("mamba_d_conv", default=4)
    r = c.cfg.get("mamba_dt_rank", "auto")
    r = math.ceil(h / 16) if r == "auto" else c.int("mamba_dt_rank")
    pb = c.bool("mamba_proj_bias", False)
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if i % c.int("attn_layer_period", default=8) == c.int("attn_layer_offset", default=4, lo=0):
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention")
        else:
            m = f"{p}.mamba"
            b.matrix(m, "A_log", (inner, n), "attention")
            b.param(m, "D", inner, "attention")
            b.matrix(f"{m}.conv1d", "weight", (inner, 1, k), "attention")
            if c.bool("mamba_conv_bias", True):
                b.param(f"{m}.conv1d", "bias", inner, "attention")
            b.linear(f"{m}.in_proj", h, 2 * inner, "attention", bias=pb)
            b.linear(f"{m}.x_proj", inner, r + 2 * n, "attention")
            b.linear(f"{m}.dt_proj", r, inner, "attention", bias=True)
            b.linear(f"{m}.out_proj", inner, h, "attention", bias=pb)
            for name, d in (("dt_layernorm", r), ("b_layernorm", n), ("c_layernorm", n)):
                b.norm(f"{m}.{name}", d)
        f = f"{p}.feed_forward"
        if e > 1 and i % c.int("expert_layer_period", default=2) == c.int("expert_layer_offset", default=1, lo=0):
            b.matrix(f"{f}.router", "weight", (e, h), "router")
            b.matrix(f"{f}.experts", "gate_up_proj", (e, 2 * inter, h), "routed_experts")
            b.matrix(f"{f}.experts", "down_proj", (e, h, inter), "routed_experts")
        else:
            b.swiglu(f"{f}", h, inter)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.pre_ff_layernorm", h)
    b.norm("model.final_layernorm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    lins = (Linear("in_proj", h, 2 * inner), Linear("x_proj", inner, r + 2 * n), Linear("dt_proj", r, inner),
            Linear("out_proj", inner, h), Linear("gate_proj", h, inter), Linear("up_proj", h, inter),
            Linear("down_proj", inter, h))
    # activations: memory/ssm_blocks.py jamba_layer, per layer its kind's linears (held to tests/data/jamba_trace.json)
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h))
    dense, sparse = lins[4:], (Linear("gate_up_proj", h, 2 * inter, e), Linear("down_proj", inter, h, e))
    kinds = {}
    for mixer in (False, True):
        for moe_layer in (False, True):
            kinds[mixer, moe_layer] = (lins[:4] if mixer else attn) + (sparse if moe_layer else dense)
    layers = tuple(kinds[i % c.int("attn_layer_period", default=8) != c.int("attn_layer_offset", default=4, lo=0),
                         e > 1 and i % c.int("expert_layer_period", default=2)
                         == c.int("expert_layer_offset", default=1, lo=0)] for i in range(n_layers))
    moe = MoE(num_experts=e, experts_per_token=c.int("num_experts_per_tok", default=2), expert_intermediate=inter,
              shared_intermediate=0, dense_layers=0)
    dims = {"layout": "jamba", "inner": inner, "state": n, "rank": r, "residual_fp32": False, "moe": moe,
            "layers": layers}
    return replace(_arch(c, "jamba", b, h, n_layers, vocab, tied, lins, heads, kv, hd), gated_mlp=True, ssm=dims,
                   dense_block_linears=kinds[False, False], support="exact")


def bamba(c: ConfigReader) -> ModelArch:
    """Bamba (modeling_bamba.py BambaDecoderLayer): feed_forward (gate/up/down, mlp_bias), input_layernorm,
    pre_ff_layernorm, then a Mamba-2 mixer (``mamba``: mamba_n_heads, mamba_n_groups, mamba_d_state, mamba_d_conv,
    I = mamba_expand x h, mamba_conv_bias, mamba_proj_bias; its gated norm always) or, at the layers in
    attn_layer_indices (BambaConfig.layers_block_type), GQA self_attn (head_dim, attention_bias);
    final_layernorm."""
    h, n_layers, vocab = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kv, hd = c.int("num_key_value_heads", default=heads), c.int("head_dim", default=h // heads)
    inter, mlp_bias, att_bias = c.int("intermediate_size"), c.bool("mlp_bias", False), c.bool("attention_bias", False)
    attn_layers = set(c.cfg.get("attn_layer_indices") or ())
    tied = c.bool("tie_word_embeddings", False)
    b = TensorList()
    b.matrix("model.embed_tokens", "weight", (vocab, h), "embedding")
    lins: list = []
    for i in range(n_layers):
        p = f"model.layers.{i}"
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            b.linear(f"{p}.feed_forward.{name}", d_in, d_out, "mlp", bias=mlp_bias)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.pre_ff_layernorm", h)
        if i in attn_layers:
            for name, d_in, d_out in (("q_proj", h, heads * hd), ("k_proj", h, kv * hd), ("v_proj", h, kv * hd),
                                      ("o_proj", heads * hd, h)):
                b.linear(f"{p}.self_attn.{name}", d_in, d_out, "attention", bias=att_bias)
        else:
            lins = mamba2_mixer(b, f"{p}.mamba", h, int(c.cfg.get("mamba_expand", 2) * h),
                                c.int("mamba_n_heads", default=128), c.int("mamba_n_groups", default=1),
                                c.int("mamba_d_state", default=256), c.int("mamba_d_conv", default=4),
                                c.bool("mamba_conv_bias", True), c.bool("mamba_proj_bias", False))
    b.norm("model.final_layernorm", h)
    if not tied:
        b.matrix("lm_head", "weight", (vocab, h), "lm_head", "lm_head")
    mlp = (Linear("gate_proj", h, inter), Linear("up_proj", h, inter), Linear("down_proj", inter, h))
    lins += list(mlp)
    attn = (Linear("q_proj", h, heads * hd), Linear("k_proj", h, kv * hd), Linear("v_proj", h, kv * hd),
            Linear("o_proj", heads * hd, h)) + mlp
    mixer = tuple(lins) if len(attn_layers) < n_layers else attn
    # per layer its own linears (an attention layer's q/k/v/o, a mixer layer's in_proj/out_proj), each kind one tuple
    dims = {"inner": int(c.cfg.get("mamba_expand", 2) * h), "heads": c.int("mamba_n_heads", default=128),
            "groups": c.int("mamba_n_groups", default=1), "residual_fp32": False,
            "rope_dim": int(hd * (c.cfg.get("rope_parameters") or {}).get("partial_rotary_factor", 0.5)),
            "layers": tuple(attn if i in attn_layers else mixer for i in range(n_layers))}
    # activations: memory/ssm_blocks.py, held to tests/data/ssm_trace.json (tools/memtrace/ssm_trace.py bamba)
    return replace(_arch(c, "bamba", b, h, n_layers, vocab, tied, mixer, heads, kv, hd), dense_block_linears=attn,
                   gated_mlp=True, ssm=dims, support="exact")
