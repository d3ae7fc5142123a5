"""Traced steps of three models whose blocks are their own (issue 20, item 3), for the CI checks that the engine
keeps what their layers save:

- ``cpmant``: CPM-Ant (modeling_cpmant.py CpmAntForCausalLM): the prompt_length prompt tokens the model prepends,
  weight-only fp32-variance LayerNorms, its own eager attention with the (b, heads, s, s) segment / relative
  position bias, the GELU-gated w_0 / w_1 / w_out feed-forward (tests/test_cpmant_blocks.py);
- ``voxtral_realtime``: Voxtral Realtime's language model (modeling_voxtral_realtime.py
  VoxtralRealtimeTextForCausalLM): Mistral's layer with the ada_rms_norm time conditioning of its
  post_attention_layernorm (tests/test_voxtral_realtime_blocks.py);
- ``doge``: Doge (modeling_doge.py DogeForCausalLM): the dynamic-mask attention (dt_proj over the values, the
  (b, heads, s, s) mask) and its MLP / CDMoE (tests/test_doge_blocks.py).

  python -m tools.memtrace.own_blocks_trace cpmant > tests/data/cpmant_trace.json
  python -m tools.memtrace.own_blocks_trace voxtral_realtime > tests/data/voxtral_realtime_trace.json
  python -m tools.memtrace.own_blocks_trace doge > tests/data/doge_trace.json

Each model's default config (tests/data/architectures.json), made small (SHRINK), gets the generic rows of
tools/memtrace/moe_trace.py: full bf16 with and without checkpointing, LoRA on the attention with and without,
and a bf16-mixed full row. Each case keeps what tools/memtrace/compare.py compares and the plan.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0}
SHRINK = {
    # openbmb/cpm-ant-10b's layout (h 4096, 32 heads of 128, dim_ff 10240, 48 layers) at h 1024, 8 heads of 128,
    # dim_ff 2560, 2 layers; the 32 x 32 prompt embeddings and segment / position tables as they are
    "cpmant": {"hidden_size": 1024, "num_attention_heads": 8, "dim_head": 128, "dim_ff": 2560,
               "num_hidden_layers": 2},
}
# no gradient checkpointing (modeling_cpmant.py: CpmAntPreTrainedModel has no supports_gradient_checkpointing)
NO_CKPT = ("cpmant",)
TARGETS = {"cpmant": ["project_q", "project_k", "project_v", "attention_out"]}


def plans(model_type: str) -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == f"default:{model_type}")["config"] | SHRINK[model_type]
    tag = f'{model_type.replace("_", "-")}-{cfg["num_hidden_layers"]}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    lora = {**base, "method": "lora", "lora": {**LORA, "targets": TARGETS[model_type]},
            "stack": {"peft_adapter_dtype": "fp32"}}
    out = [(f"{tag}-full-s512", base),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"})]
    return [row for row in out if model_type not in NO_CKPT or "ckpt" not in row[0]]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0]
    cases = []
    for cid, plan in plans(model_type):
        if len(args) > 1 and not cid.startswith(args[1]):
            continue
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": f"python -m tools.memtrace.own_blocks_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
