"""Pre-Llama blocks (GPT-2, BERT, Falcon, BLOOM, GPT-NeoX, Phi-1/2) and T5, as transformers registers
their modules (`modeling_gpt2.py`, `modeling_bert.py`, `modeling_t5.py`, ...)."""
from __future__ import annotations

from ..errors import PlanError
from .arch import Linear, ModelArch
from .config import ConfigReader, TensorList

def classic(c: ConfigReader, model_type: str) -> ModelArch:
    """Pre-Llama blocks: LayerNorm with bias, plain (non-gated) GeLU MLP, biases on the linears."""
    h = c.int("hidden_size", "n_embd", "d_model")
    n_layers = c.int("num_hidden_layers", "n_layer", "num_layers")
    heads = c.int("num_attention_heads", "n_head", "num_heads")
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * h)
    hd = c.int("head_dim", default=h // heads)
    kv = heads
    b = TensorList()
    blk: list[Linear] = []
    tied = c.bool("tie_word_embeddings", model_type in ("gpt2", "bert", "bloom", "falcon", "gpt_bigcode"))
    family = {"gpt2": "gpt2", "bert": "bert", "falcon": "falcon", "bloom": "bloom", "gpt_neox": "neox",
              "phi": "phi", "gpt_bigcode": "bigcode"}.get(model_type, "gpt2")
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
    elif model_type == "gpt_bigcode":
        # modeling_gpt_bigcode.py: a GPT-2 block (LayerNorm, biased nn.Linear, tanh GELU) whose attention is
        # multi-query by default (multi_query=True: c_attn projects to h + 2·head_dim, one K/V head)
        kv = 1 if c.bool("multi_query", True) else heads
        n_pos = c.int("n_positions", "max_position_embeddings", default=2048)
        qkv = h + 2 * kv * hd
        b.matrix("transformer.wte", "weight", (vocab, h), "embedding")
        b.matrix("transformer.wpe", "weight", (n_pos, h), "embedding")
        for i in range(n_layers):
            p = f"transformer.h.{i}"
            b.norm(f"{p}.ln_1", h, bias=True)
            b.linear(f"{p}.attn.c_attn", h, qkv, "attention", bias=True)
            b.linear(f"{p}.attn.c_proj", h, h, "attention", bias=True)
            b.norm(f"{p}.ln_2", h, bias=True)
            b.linear(f"{p}.mlp.c_fc", h, inter, "mlp", bias=True)
            b.linear(f"{p}.mlp.c_proj", inter, h, "mlp", bias=True)
        blk = [Linear("c_attn", h, qkv), Linear("c_proj", h, h), Linear("c_fc", h, inter), Linear("c_proj", inter, h)]
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
        new_arch = c.bool("new_decoder_architecture", False)
        kv = c.int("num_kv_heads", default=kv) if new_arch else kv
        bias = c.bool("bias", False)
        # FalconDecoderLayer.__init__ (modeling_falcon.py): the new decoder architecture (Falcon-40B / 180B) has
        # ln_attn and ln_mlp (num_ln_in_parallel_attn None means 2), a sequential block (parallel_attn false)
        # post_attention_layernorm and input_layernorm, a parallel one input_layernorm alone
        if new_arch and c.int("num_ln_in_parallel_attn", default=2) == 2:
            falcon_norms = ("ln_attn", "ln_mlp")
        elif not new_arch and not c.bool("parallel_attn", True):
            falcon_norms = ("post_attention_layernorm", "input_layernorm")
        else:
            falcon_norms = ("input_layernorm",)
        b.matrix("transformer.word_embeddings", "weight", (vocab, h), "embedding")
        qkv = (heads + 2 * kv) * hd
        for i in range(n_layers):
            p = f"transformer.h.{i}"
            b.linear(f"{p}.self_attention.query_key_value", h, qkv, "attention", bias=bias)
            b.linear(f"{p}.self_attention.dense", h, h, "attention", bias=bias)
            b.linear(f"{p}.mlp.dense_h_to_4h", h, inter, "mlp", bias=bias)
            b.linear(f"{p}.mlp.dense_4h_to_h", inter, h, "mlp", bias=bias)
            for name in falcon_norms:
                b.norm(f"{p}.{name}", h, bias=True)
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
    gpt2_like_norms = len(falcon_norms) if model_type == "falcon" else 1 if model_type == "phi" else 2
    return ModelArch(
        name=c.str("name", model_type), model_type=model_type, family=family, hidden_size=h,
        num_layers=n_layers, num_heads=heads, num_kv_heads=kv, head_dim=hd, intermediate_size=inter,
        vocab_size=vocab,
        tied_embeddings=c.bool("tie_word_embeddings", model_type in ("gpt2", "bert", "bloom", "gpt_bigcode")),
        max_positions=max_pos, gated_mlp=False, norm="layernorm", norms_per_layer=gpt2_like_norms, qk_norm="",
        causal_lm=causal, moe=None, mla=None, attn_softcap=False, final_softcap=False,
        dropout=_classic_dropout(c, model_type), tensors=tuple(b.tensors), block_linears=tuple(blk),
        dense_block_linears=tuple(blk))


def _classic_dropout(c: ConfigReader, model_type: str) -> float:
    for key in ("resid_pdrop", "hidden_dropout_prob", "hidden_dropout", "resid_dropout", "dropout_rate"):
        v = c.cfg.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return 0.1 if model_type in ("gpt2", "bert") else 0.0


SWITCH_SUPPORT = ("exact parameter count; activations traced (memory/blocks_seq2seq.py switch_sparse_mlp: top-1 "
                  "routing under expert_capacity with a balanced router, tools/memtrace/golden/seq2seq/switch-*; "
                  "bf16-mixed and LoRA traced, not a trainable 16-bit router); LoRA adapters counted on the dense "
                  "wi/wo only")


def _sparse_step(c: ConfigReader, side: str, n: int) -> int:
    """SwitchTransformersConfig.__post_init__: the step between sparse blocks, n // num_sparse_<side>_layers,
    and n when that is 0 (its "HACK: this will create 0 sparse layers"; the stack's i % n == 1 still makes
    block 1 sparse, which the meta build confirms)."""
    k = c.int(f"num_sparse_{side}_layers", default=3, lo=0)
    return n // k if k > 0 else n


def t5(c: ConfigReader, model_type: str) -> ModelArch:
    """T5 / mT5 / UMT5 / LongT5 encoder-decoder (modeling_t5.py, modeling_umt5.py, modeling_longt5.py with its
    default local attention, whose LocalSelfAttention has T5's tensors): no biases, RMS-style LayerNorm,
    gated-gelu for v1.1/mT5/T0. num_layers counts encoder + decoder blocks. Switch Transformers
    (modeling_switch_transformers.py): T5's blocks, some of whose feed-forwards are sparse: a router
    (mlp.router.classifier, d_model x num_experts) and num_experts wi/wo experts; their activations by
    memory/blocks_seq2seq.py switch_sparse_mlp (ModelArch.switch: experts, expert_capacity, router_jitter_noise,
    which blocks are sparse)."""
    if model_type == "longt5" and c.str("encoder_attention_type", "local") != "local":
        raise PlanError("model.encoder_attention_type", "LongT5's transient-global attention (global relative bias "
                                                        "and layer norm) is not modelled; local is")
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
    experts = c.int("num_experts", default=8)
    b = TensorList()
    b.matrix("shared", "weight", (vocab, d), "embedding")
    mlp_names = ("wi_0", "wi_1") if gated else ("wi",)

    def block(p: str, cross: bool, first: bool, sparse: bool) -> None:
        for att in ("SelfAttention",) + (("EncDecAttention",) if cross else ()):
            for name in ("q", "k", "v"):
                b.linear(f"{p}.{att}.{name}", d, inner, "attention")
            b.linear(f"{p}.{att}.o", inner, d, "attention")
            # UMT5Attention: a relative_attention_bias in every self-attention, not only the first block's
            if (first or model_type == "umt5") and att == "SelfAttention":
                b.param(f"{p}.{att}.relative_attention_bias", "weight",
                        c.int("relative_attention_num_buckets", default=32) * heads, "attention")
            b.norm(f"{p}.{att}.layer_norm", d)
        if sparse:
            b.linear(f"{p}.mlp.router.classifier", d, experts, "router", bias=c.bool("router_bias", False))
            for e in range(experts):
                b.linear(f"{p}.mlp.experts.expert_{e}.wi", d, d_ff, "routed_experts")
                b.linear(f"{p}.mlp.experts.expert_{e}.wo", d_ff, d, "routed_experts")
        else:
            for name in mlp_names:
                b.linear(f"{p}.DenseReluDense.{name}", d, d_ff, "mlp")
            b.linear(f"{p}.DenseReluDense.wo", d_ff, d, "mlp")
        b.norm(f"{p}.DenseReluDense.layer_norm", d)

    sparse_blocks = []
    for side, n in (("encoder", n_enc), ("decoder", n_dec)):
        step = _sparse_step(c, side, n) if model_type == "switch_transformers" else 0
        if model_type == "switch_transformers" and not tied:   # T5Config forces the tie; SwitchTransformers keeps it
            b.matrix(f"{side}.embed_tokens", "weight", (vocab, d), "embedding")
        for i in range(n):
            # SwitchTransformersStack: block i is sparse when i % sparse_step == 1 (every block when the step is 1)
            sparse_blocks.append(bool(step) and (i % step == 1 or step == 1))
            block(f"{side}.block.{i}", side == "decoder", i == 0, sparse_blocks[-1])
        b.norm(f"{side}.final_layer_norm", d)
    switch = None
    if model_type == "switch_transformers":
        # configuration_switch_transformers.py: expert_capacity (64), router_jitter_noise (0.01)
        jitter = c.cfg.get("router_jitter_noise", 0.01)
        switch = {"experts": experts, "capacity": c.int("expert_capacity", default=64, lo=0),
                  "jitter": float(jitter) if isinstance(jitter, (int, float)) else 0.0, "sparse": tuple(sparse_blocks)}
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
        block_linears=tuple(blk), dense_block_linears=tuple(blk), switch=switch,
        support="exact" if model_type != "switch_transformers" else SWITCH_SUPPORT)
