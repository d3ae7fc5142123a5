"""Traced steps of a small dots.3 Note language model (transformers 5.24 modeling_dots3_note.py
Dots3NoteForCausalLM), for tests/test_dots3_note_blocks.py:

dots3_note_text's default config cut to 2 layers of their own shapes (per_layer_config): layer 0 DSA-indexed with
16 heads and a dense MLP of 4096, layer 1 sliding (window 128) with 8 heads of nope 192 and a sparse MLP (16 experts
of 512, top-8, one shared expert of 512); h 2048, q_lora_rank 512, kv_lora_rank 256, 16 index heads, vocab 32000
(pad_token_id 0 inside it), 512 tokens. No FA2 path (_supports_flash_attn = False) and under SDPA the attention's
`attention_mask[:, 0]` raises TypeError (the mask is None), so the rows run eager: full fine-tuning, LoRA on the
attention's projections, and full fine-tuning with full checkpointing.

  python -m tools.memtrace.dots3_trace > tests/data/dots3_note_trace.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
SHRINK = {"num_hidden_layers": 2, "layer_types": ["indexed_attention", "sliding_attention"],
          "mlp_layer_types": ["dense", "sparse"], "hidden_size": 2048, "num_attention_heads": 16,
          "num_key_value_heads": 16, "q_lora_rank": 512, "kv_lora_rank": 256,
          "per_layer_config": {"01": {"num_attention_heads": 8, "num_key_value_heads": 8, "kv_lora_rank": 256,
                                      "qk_nope_head_dim": 192}},
          "n_routed_experts": 16, "vocab_size": 32000, "pad_token_id": 0, "intermediate_size": 4096,
          "moe_intermediate_size": 512, "shared_experts_intermediate_size": 512, "index_n_heads": 16,
          "sliding_window": 128}
LORA_TARGETS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")


def plans() -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == "default:dots3_note_text")["config"] | SHRINK
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "eager"}
    lora = {**base, "method": "lora", "stack": {"peft_adapter_dtype": "fp32"},
            "lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": list(LORA_TARGETS)}}
    return [("dots3-note-text-2l-full-s512-eager", base),
            ("dots3-note-text-2l-lora-attn-s512-eager", lora),
            ("dots3-note-text-2l-full-s512-eager-ckpt", {**base, "activation_checkpointing": "full"})]


def main() -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    cases = []
    for cid, plan in plans():
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.dots3_trace", "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
