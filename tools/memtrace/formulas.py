"""Saved-tensor list per decoder layer, as byte formulas, for the engine's activation terms.

    python -m tools.memtrace.formulas [OUT.md]

Each variant is traced on a small config whose dims are pairwise distinct, so every saved tensor's
size can be written as a product of named dims (dump.symbolic). Symbols: b micro-batch, s sequence,
h hidden, a query heads, hd head_dim, q = a·hd (when != h), kv = n_kv·hd, I intermediate, V vocab,
r LoRA rank, E experts, k experts per token, Ie expert intermediate.
"""
from __future__ import annotations

import sys
from collections import defaultdict

from .dump import layer_of, symbolic
from .trace import trace

B, S = 5, 61
BASE = {"hidden_size": 120, "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 2,
        "head_dim": 20, "intermediate_size": 232, "vocab_size": 1009, "tie_word_embeddings": False}
DIMS = {"b": B, "s": S, "h": 120, "a": 6, "n_kv": 2, "hd": 20, "kv": 40, "I": 232, "V": 1009, "r": 7}
Q3 = {"hd": 32, "q": 192, "kv": 64}


def fam(model_type, **kw):
    d = {"model_type": model_type, **BASE}
    d.update(kw)
    return d


QWEN3 = dict(head_dim=32)                      # q = a*hd = 192 != h, kv = 64
MOE = dict(num_experts=11, num_experts_per_tok=3, moe_intermediate_size=104, norm_topk_prob=True,
           decoder_sparse_step=1, mlp_only_layers=[])
VARIANTS = [
    ("llama, flash (sdpa), bf16-pure", fam("llama"), {}, {}),
    ("llama, eager, bf16-pure", fam("llama"), {"attention": "eager"}, {}),
    ("llama, flash, bf16-mixed (fp32 weights + autocast)", fam("llama"), {"precision": "bf16-mixed"}, {}),
    ("llama, eager, bf16-mixed", fam("llama"), {"precision": "bf16-mixed", "attention": "eager"}, {}),
    ("llama, flash, bf16-pure, GC full", fam("llama"), {"activation_checkpointing": "full"}, {}),
    ("llama, LoRA (bf16-mixed: bf16 base, fp32 adapters, autocast), dropout 0", fam("llama"),
     {"method": "lora", "precision": "bf16-mixed"}, {}),
    ("llama, LoRA bf16-mixed, dropout 0.05", fam("llama"),
     {"method": "lora", "precision": "bf16-mixed", "lora": {"rank": 7, "alpha": 14, "dropout": 0.05}}, {}),
    ("llama, LoRA bf16-pure (bf16 adapters), dropout 0", fam("llama"), {"method": "lora", "precision": "bf16-pure"}, {}),
    ("llama, QLoRA nf4 (bf16-mixed), dropout 0", fam("llama"), {"method": "qlora", "precision": "bf16-mixed"}, {}),
    ("qwen2 (q/k/v bias), flash, bf16-pure", fam("qwen2"), {}, {}),
    ("qwen3 (q/k RMSNorm, hd != h/a), flash, bf16-pure", fam("qwen3", **QWEN3), {}, Q3),
    ("qwen3, eager, bf16-pure", fam("qwen3", **QWEN3), {"attention": "eager"}, Q3),
    ("gemma2, flash, bf16-pure", fam("gemma2", **QWEN3, query_pre_attn_scalar=32, sliding_window=4096,
                                     tie_word_embeddings=True), {}, Q3),
    ("gemma2, eager, bf16-pure", fam("gemma2", **QWEN3, query_pre_attn_scalar=32, sliding_window=4096,
                                     tie_word_embeddings=True), {"attention": "eager"}, Q3),
    ("gemma3_text, flash, bf16-pure", fam("gemma3_text", **QWEN3, query_pre_attn_scalar=32, sliding_window=32,
                                          tie_word_embeddings=True), {}, Q3),
    ("mixtral (E=11, k=3, expert I), flash, bf16-pure", fam("mixtral", num_local_experts=11, num_experts_per_tok=3),
     {}, {"E": 11, "k": 3}),
    ("qwen3_moe (E=11, k=3, Ie=104), flash, bf16-pure", fam("qwen3_moe", **QWEN3, **MOE), {},
     {**Q3, "E": 11, "k": 3, "Ie": 104}),
    ("gpt2 (dropout 0.1 as in its config), flash (sdpa), bf16-pure",
     {"model_type": "gpt2", "hidden_size": 120, "num_hidden_layers": 3, "num_attention_heads": 6,
      "intermediate_size": 232, "vocab_size": 1009, "n_positions": 128}, {}, {}),
    ("gpt2, eager, bf16-pure",
     {"model_type": "gpt2", "hidden_size": 120, "num_hidden_layers": 3, "num_attention_heads": 6,
      "intermediate_size": 232, "vocab_size": 1009, "n_positions": 128}, {"attention": "eager"}, {}),
    ("gpt2 bf16-mixed (fp32 weights + autocast with CUDA's fp32 ops), flash",
     {"model_type": "gpt2", "hidden_size": 120, "num_hidden_layers": 3, "num_attention_heads": 6,
      "intermediate_size": 232, "vocab_size": 1009, "n_positions": 128}, {"precision": "bf16-mixed"}, {}),
    ("qwen3_moe LoRA bf16-mixed (peft 0.21 adapts the fused experts too)", fam("qwen3_moe", **QWEN3, **MOE),
     {"method": "lora", "precision": "bf16-mixed"}, {**Q3, "E": 11, "k": 3, "Ie": 104}),
    ("gpt2, flash, dropout off (resid/embd/attn_pdrop 0)",
     {"model_type": "gpt2", "hidden_size": 120, "num_hidden_layers": 3, "num_attention_heads": 6,
      "intermediate_size": 232, "vocab_size": 1009, "n_positions": 128, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
      "attn_pdrop": 0.0}, {}, {}),
]


def plan_for(cfg, extra):
    p = {"model": cfg, "micro_batch_size": B, "seq_len": S, "precision": "bf16-pure", "attention": "flash",
         "method": "full", "gradient_accumulation_steps": 1, "optimizer": "adamw",
         "lora": {"rank": 7, "alpha": 14, "dropout": 0.0}}
    p.update(extra)
    return p


def poly(rows, dims) -> str:
    acc = defaultdict(int)
    for r in rows:
        f = symbolic(r["nbytes"], r["shape"], r["dtype"], dims)
        coef, _, mono = f.partition("·")
        if not coef.isdigit():
            acc[f] += 0
            continue
        acc[mono or "1"] += int(coef)
    return " + ".join(f"{c}·{m}" for m, c in sorted(acc.items(), key=lambda kv: -kv[1]))


def describe(title, cfg, extra, dims_extra) -> str:
    dims = dict(DIMS)
    dims.update(dims_extra)
    res = trace(plan_for(cfg, extra), dump_saved=True)
    rows = res["saved_tensors"]
    per_layer = defaultdict(list)
    outside = []
    for r in rows:
        L = layer_of(r["saved_in"]) if r["saved_in"] else None
        if L is None:
            L = layer_of(r["made_in"]) if r["made_in"] else None
        (per_layer[L] if L is not None else outside).append(r)
    out = [f"### {title}", ""]
    L1 = per_layer.get(1, [])
    out.append("Layer 1 (a middle layer), saved tensors, in forward order:")
    out.append("")
    out.append("| saved by | made by (op) | shape | dtype | bytes |")
    out.append("|---|---|---|---|---|")
    for r in L1:
        f = symbolic(r["nbytes"], r["shape"], r["dtype"], dims)
        short = lambda p: p.split(".layers.1.")[-1].split(".h.1.")[-1]  # noqa: E731
        out.append(f"| {short(r['saved_in'])} | {short(r['made_in'])} ({r['op']}) | {r['shape']} | {r['dtype']} | {f} |")
    out.append("")
    out.append(f"**Per layer total:** {poly(L1, dims)}")
    l0 = poly(per_layer.get(0, []), dims)
    if l0 != poly(L1, dims):
        out.append(f"  (layer 0: {l0})")
    out.append("**Outside the layers:** " + "; ".join(
        f"{symbolic(r['nbytes'], r['shape'], r['dtype'], dims)} {r['dtype']} {r['op']} ({r['saved_in'] or 'loss'})"
        for r in outside if r["nbytes"] > 8))
    out.append(f"**Saved at forward end (whole model, this config):** {res['saved_activations_forward_end']} B; "
               f"peak {res['peak_bytes']} B in {res['peak_phase']} ({res['peak_op']}); "
               f"components at peak {res['peak']['components']}")
    out.append("")
    return "\n".join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    only = argv[1] if len(argv) > 1 else None
    parts = [__doc__.split("\n\n", 2)[2] if False else "", ]
    for title, cfg, extra, de in VARIANTS:
        if only and only not in title:
            continue
        try:
            parts.append(describe(title, cfg, extra, de))
        except Exception as e:  # keep going: one failing family must not hide the others
            parts.append(f"### {title}\n\nFAILED: {type(e).__name__}: {e}\n")
        print(parts[-1], flush=True)
    if argv:
        with open(argv[0], "w") as f:
            f.write("\n".join(parts))


if __name__ == "__main__":
    main()
