"""Traced steps of a small A.X K2 (transformers 5.24 modeling_axk2.py), for tests/test_axk2_blocks.py:

AXK2's default config with 2 layers (layer 0 dense, layer 1 sparse: 16 experts of 512, top-8, one shared expert),
h 2048, 32 heads, vocab 32000 (the default 163,840-wide loss would dwarf the layers), 512 tokens. The model
has no FA2 path (AXK2PreTrainedModel._supports_flash_attn = False) and AXK2Attention.forward reads
attention_mask[:, 0] for its indexer (None under SDPA: a TypeError), so the rows run eager attention (the mask
materialised): full fine-tuning, with full checkpointing, LoRA on the attention's projections, and bf16-mixed.

  python -m tools.memtrace.axk2_trace > tests/data/axk2_trace.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
LORA_TARGETS = ("q_a_proj", "q_gate_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
SHRINK = {"num_hidden_layers": 2, "mlp_layer_types": ["dense", "sparse"], "n_routed_experts": 16, "vocab_size": 32000}


def plans(attention: str = "eager") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = {k: v for k, v in next(r for r in rows if r["id"] == "default:axk2")["config"].items()
           if k != "layer_types"} | SHRINK
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": attention}
    # LoRA on the attention's projections (the experts frozen), fp32 adapters on the bf16 base as the engine's
    # default stack (memory/stack.py)
    lora = {**base, "method": "lora", "stack": {"peft_adapter_dtype": "fp32"},
            "lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": list(LORA_TARGETS)}}
    return [(f"axk2-2l-full-s512-{attention}", base),
            (f"axk2-2l-full-s512-{attention}-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"axk2-2l-lora-attn-s512-{attention}", lora),
            (f"axk2-2l-full-mixed-s512-{attention}", {**base, "precision": "bf16-mixed"})]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    cases = []
    for cid, plan in plans(*args[:1]):
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.axk2_trace" + (f" {args[0]}" if args else ""),
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
