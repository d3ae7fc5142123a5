"""lm_head's backward in Llama-like models whose vocabulary is large beside the tokens of a micro-batch (short
sequence fine-tunes of Llama 3 / Qwen3 shapes, 128256 / 151936 tokens, a small hidden size), traced to see whether
the step peaks there (memory/head_backward.py, the ``head_bwd`` moment) rather than in the loss's backward.

Rows: 2-layer Llama 3-shaped (V 128256, h 1024, GQA 16/4 of 64, I 4096) and Qwen3-0.6B-shaped (V 151936, h 1024,
GQA 16/8 of 128, I 3072, qk-norm) models, full fine-tuning on one GPU, b 1, s 128 / 512, gradient accumulation 2
(and one without), untied and tied embeddings, bf16-pure and one bf16-mixed (fp32 weights and gradients). The HF
loss is the standard one only: the tracer does not emulate a chunked loss for the transformers Trainer
(tools/memtrace/plan.py).

  python -m tools.memtrace.head_bwd_trace [ID-PREFIX]    # writes tools/memtrace/golden/head_bwd/<id>.json

About 5 s a small row, 10 s a full-size one, on 2 cores (tests/test_head_bwd_llama.py checks the fixtures against
the engine).
"""
from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "golden" / "head_bwd"
LLAMA3 = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 1024, "intermediate_size": 4096,
          "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
          "hidden_act": "silu", "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
          "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}, "attention_bias": False,
          "mlp_bias": False}
QWEN3 = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
         "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
         "hidden_act": "silu", "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
         "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "attention_bias": False,
         "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28,
         "layer_types": ["full_attention"] * 2}


def _row(rid: str, model: dict | str, seq: int, ga: int = 2, precision: str = "bf16-pure", tied: bool = False,
         ckpt: str = "none") -> dict:
    model = model if isinstance(model, str) else {**model, "tie_word_embeddings": tied}     # a preset as it is
    return {"id": rid, "schema": 1, "model": model, "gpu": "h200-sxm-141gb", "framework": "single",
            "gpus_per_node": 1, "nodes": 1, "zero_stage": 0, "precision": precision, "optimizer": "adamw",
            "micro_batch_size": 1, "gradient_accumulation_steps": ga, "seq_len": seq,
            "activation_checkpointing": ckpt, "attention": "flash", "loss": "standard", "method": "full"}


ROWS = [
    _row("llama3-2l-h1024-pure-s128-ga2", LLAMA3, 128),
    _row("llama3-2l-h1024-pure-s512-ga2", LLAMA3, 512),
    _row("llama3-2l-h1024-pure-s128-ga1", LLAMA3, 128, ga=1),
    _row("llama3-2l-h1024-pure-s128-ga2-ckpt", LLAMA3, 128, ckpt="full"),
    _row("llama3-2l-h1024-tied-pure-s128-ga2", LLAMA3, 128, tied=True),
    _row("llama3-2l-h1024-mixed-s128-ga2", LLAMA3, 128, precision="bf16-mixed"),
    _row("qwen3-2l-h1024-pure-s128-ga2", QWEN3, 128),
    _row("qwen3-2l-h1024-pure-s512-ga2", QWEN3, 512),
    _row("qwen3-2l-h1024-tied-pure-s128-ga2", QWEN3, 128, tied=True),
    _row("qwen3-2l-h1024-tied-pure-s512-ga2", QWEN3, 512, tied=True),
    # the presets at full size: Llama 3.1 8B (h 4096, V 128256) at s 256, Qwen2.5 7B (h 3584, V 152064) bf16-mixed
    _row("llama8b-full-pure-s256-ga2", "llama-3.1-8b", 256),
    _row("qwen25-7b-full-mixed-s512-ga2", "qwen2.5-7b", 512, precision="bf16-mixed"),
]


def main(argv: list[str] | None = None) -> int:
    from .grid import run_grid, write_fixtures  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    rows = [r for r in ROWS if not args or r["id"].startswith(args[0])]
    write_fixtures(run_grid(rows, jobs=1), str(OUT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
