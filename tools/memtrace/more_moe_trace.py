"""Traced steps of the language models of three composite MoE models, each traced whole (its towers tiny, frozen
and never run: the rows feed text only; tools/memtrace/build.py WHOLE_COMPOSITES), and of ZAYA1, for
tests/test_<type>_blocks.py:

- ``unlimited_ocr``: Unlimited-OCR's DeepSeek-V2-style text model (Llama attention, a dense first layer, then 64
  routed experts of 896, top-6, two shared ones, the fp32 router) at its default width, 2 layers, vocab 8k;
- ``step3p7``: Step 3.7's step3p5 text model (per-head output-gated attention with q/k norms, a dense first layer
  then routed experts with a shared one), SHRINK below;
- ``muse_spark``: Muse Spark's text model (gated attention, residual gates, a projected MoE), SHRINK below;
- ``zaya``: ZayaForCausalLM (compressed convolutional attention, the router MLP, grouped_mm experts), SHRINK below.

Each: full fine-tuning and LoRA on the attention, with and without full checkpointing, bf16 under FA2, t = 512,
full fine-tuning and LoRA under bf16-mixed.

  python -m tools.memtrace.more_moe_trace unlimited_ocr > tests/data/unlimited_ocr_trace.json
  python -m tools.memtrace.more_moe_trace step3p7 > tests/data/step3p7_trace.json
  python -m tools.memtrace.more_moe_trace muse_spark > tests/data/muse_spark_trace.json
  python -m tools.memtrace.more_moe_trace zaya > tests/data/zaya_trace.json           (each about 10 s on 2 cores)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
# per composite: the text_config's and the vision_config's overrides (towers cut to one layer)
SHRINK = {
    # Unlimited-OCR's text model at its default width (h 1280, 10 heads of 128, MLP 6848, 64 experts of 896, top-6,
    # 2 shared), layers: dense, sparse; vocab 8k so that the peak is in the layers, not the loss
    "unlimited_ocr": {"text_config": {"num_hidden_layers": 2, "mlp_layer_types": ["dense", "sparse"],
                                      "layer_types": ["reference_sliding_attention"] * 2, "vocab_size": 8192},
                      "vision_config": {"sam_config": {"num_hidden_layers": 1, "global_attn_indexes": [0]},
                                        "encoder_config": {"num_hidden_layers": 1}}},
    # Step 3.7's text model (per-head output gate g_proj, Gemma-style q/k norms, a dense first layer, 16 experts of 512,
    # top-4, sigmoid routing, a shared expert of 512) at h 1024, 8 heads of 128 (2 KV heads), MLP 2048, full attention,
    # 2 layers, vocab 8k (a sliding_window set: the model builds its sliding mask always); its experts loop over
    # the experts hit (Step3p7Experts): the balanced router below
    "step3p7": {"text_config": {"num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 8,
                                "num_sliding_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
                                "intermediate_size": 2048, "moe_intermediate_size": 512, "share_expert_dim": 512,
                                "n_routed_experts": 16, "num_experts_per_tok": 4, "vocab_size": 8192,
                                "mlp_layer_types": ["dense", "sparse"], "layer_types": ["full_attention"] * 2,
                                "sliding_window": 128},
                "vision_config": {"num_hidden_layers": 1}},
    # Muse Spark's text model (output-gated attention over weightless q/k and output norms, fp32 residual gates,
    # Gemma-centred and input-scaled norms, the projected MoE: pre_expert_proj to moe_hidden_size, 16 experts of 512
    # with a post-expert norm, top-4, fp32 sigmoid router, post_expert_proj) at h 1024, 16 heads of 64 (4 KV heads),
    # MLP 2048, moe_hidden_size 512; layers: sliding dense, full sparse (window 128); vocab 8k
    "muse_spark": {"text_config": {"num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
                                   "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 2048,
                                   "moe_intermediate_size": 512, "moe_hidden_size": 512, "num_local_experts": 16,
                                   "num_experts_per_tok": 4, "vocab_size": 8192, "sliding_window": 128,
                                   "mlp_layer_types": ["dense", "sparse"],
                                   "layer_types": ["sliding_attention", "full_attention"],
                                   "layer_rope_theta": [500000.0, 500000.0]},
                   "vision_config": {"num_hidden_layers": 1, "layer_types": ["full_attention"]},
                   "audio_config": {"depths": [1, 1, 1, 1], "out_hidden_size": 1024}},
    # ZAYA1's layout (compressed convolutional attention: q/k mixed by two causal convs with residual paths, a
    # delayed value half, L2 q/k norms; residual scalings; the router MLP with its states carried across layers; top-1
    # of the experts and a skip class) at h 1024, 8 heads of 128 (2 KV heads), 8 experts of 1024, 2 layers, vocab 8k
    "zaya": {"num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
             "head_dim": 128, "num_experts": 8, "moe_intermediate_size": 1024, "vocab_size": 8192,
             "layer_types": ["hybrid", "hybrid"]},
}
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base.get(k) or {}, v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def plans(model_type: str) -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = _merge(next(r for r in rows if r["id"] == f"default:{model_type}")["config"], SHRINK[model_type])
    tag = f'{model_type.replace("_", "-")}-{cfg.get("text_config", cfg)["num_hidden_layers"]}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    lora = {**base, "method": "lora", "lora": LORA, "stack": {"peft_adapter_dtype": "fp32"}}
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            (f"{tag}-lora-attn-mixed-s512", {**lora, "precision": "bf16-mixed"})]


def tower_patches(model_type: str) -> None:
    """The towers are built, never run: SAM's attention classes (modeling_unlimited_ocr.py
    UNLIMITED_OCR_SAM_VISION_ATTENTION_CLASSES: eager / sdpa) get the tracer's FA2 name as their SDPA class, which
    the composite's attn_implementation reaches by the sub-configs."""
    if model_type == "unlimited_ocr":
        from transformers.models.unlimited_ocr import modeling_unlimited_ocr as m  # noqa: PLC0415
        from .build import FLASH  # noqa: PLC0415
        classes = m.UNLIMITED_OCR_SAM_VISION_ATTENTION_CLASSES
        classes.setdefault(FLASH, classes["sdpa"])


def _step3p7_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """modeling_step3p7.py Step3p7Experts.forward with `hit` (`nonzero()`) and `torch.where(mask[expert_idx])`
    replaced by the balanced assignment of tools/memtrace/routing.py (slot r to expert r mod E, every expert hit)."""
    final = torch.zeros_like(hidden_states)
    t, k = top_k_index.shape
    for expert_idx in range(self.num_experts):
        slots = torch.arange(expert_idx, t * k, self.num_experts)
        top_k_pos, token_idx = slots % k, slots.div(k, rounding_mode="trunc")
        current = self._apply_gate(F.linear(hidden_states[token_idx], self.gate_up_proj[expert_idx]))
        current = F.linear(current, self.down_proj[expert_idx]) * top_k_weights[token_idx, top_k_pos, None]
        final.index_add_(0, token_idx, current.to(final.dtype))
    return final


def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    from .trace import trace  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type, only = args[0], args[1:]
    tower_patches(model_type)
    if model_type == "step3p7":
        from transformers.models.step3p7 import modeling_step3p7  # noqa: PLC0415
        modeling_step3p7.Step3p7Experts.forward = _step3p7_experts_forward
    cases = []
    for cid, plan in plans(model_type):
        if only and cid not in only:
            continue
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": f"python -m tools.memtrace.more_moe_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
