"""Traced steps of small Inkling language models (transformers 5.24 modeling_inkling.py InklingForCausalLM), for
tests/test_inkling_blocks.py.

``inkling_text``: Inkling's layout (short-conv-fed k/v and per-head q/k RMS norms, the hidden-state-conditioned
relative logits bias, fp32 residual short convolutions after attention and MLP, sigmoid router over routed and
shared experts, shared experts by bmm, dense SwiGLU with a global scale) at h 1024, 3 layers: sliding dense,
sliding sparse, full sparse; full layers 8 heads of 128 (2 KV heads), sliding 8 heads of 128 (4 KV heads),
window 128, rel_extent 256, d_rel 16; dense MLP 2048; 8 routed experts of 512, top-2, 1 shared expert; vocab 3000
(the tracer tells logits by their width), 512 tokens.

Attention: the modelling code has no FlashAttention path (InklingPreTrainedModel._supports_flash_attn = False: the
bias is a `position_bias` kwarg only eager and SDPA consume; the tracer's FA2 profile would drop it), so the config
resolves to SDPA, which turns the bias into a float (b, heads, q, kv) mask that needs a gradient
(integrations/sdpa_attention.py create_position_bias_mask). Which kernel a GPU runs then is not something a CPU
trace shows (CPU SDPA takes its math kernel); so the rows run eager, the device-independent profile, and one row
runs HF's own sdpa (tools/memtrace/build.py runs it for the model_types of its SDPA_ONLY; use_hf_sdpa adds
Inkling's there at run time).

``inkling2_text`` (modeling_inkling2.py Inkling2ForCausalLM): see SHRINK; eager only (Inkling2PreTrainedModel:
_supports_flash_attn and _supports_sdpa False, the per-token sinks), LoRA on every `linear` (q/k/v/o_proj.linear,
relative_position_bias.linear) and o_proj.gate_proj. ``inkling2_loop_text`` (modeling_inkling2_loop.py): the same
shapes over 4 layers, layers 1-2 looped twice (the second pass with messages), the same rows.

Rows (eager): full fine-tuning, with full checkpointing, LoRA on the attention's projections, with checkpointing,
bf16-mixed; Inkling also one SDPA row. About 10 s each on 2 cores.

  python -m tools.memtrace.inkling_trace > tests/data/inkling_trace.json
  python -m tools.memtrace.inkling_trace inkling2_text > tests/data/inkling2_trace.json
  python -m tools.memtrace.inkling_trace inkling2_loop_text > tests/data/inkling2_loop_trace.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import build
from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
SDPA_TYPES = ("inkling_text",)
SHRINK = {"inkling_text": {
    "hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 128, "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 128,
    "sliding_window_size": 128, "rel_extent": 256, "d_rel": 16, "intermediate_size": 2048,
    "moe_intermediate_size": 512, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "vocab_size": 3000, "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid"],
    "mlp_layer_types": ["dense", "sparse", "sparse"]},
    # Inkling 2's layout (L2-clipped q/k, RMS-normed v, static short convs in sliding layers and dynamic ones in
    # full layers, the sink logit, the output gate, block attention residuals before attention and MLP, softcapped
    # SwiGLU experts, an fp32 sigmoid router) at h 1024, 3 layers: sliding (no attention_input), sliding, full
    # (three input queries); 8 heads of 128, 2 KV heads; window 128, rel_extent 256; a residual block every 2
    # layers (so layer 2 opens one and final_input reads two); 8 experts of 512, top-2; vocab 3000
    "inkling2_text": {
        "hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 128, "swa_num_attention_heads": 8, "swa_num_key_value_heads": 2, "swa_head_dim": 128,
        "sliding_window_size": 128, "rel_extent": 256, "d_rel": 16, "moe_intermediate_size": 512,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "vocab_size": 3000, "unpadded_vocab_size": 3000,
        "n_layers_per_attn_res_block": 2, "eos_token_id": None,
        "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid"]},
    # Inkling 2 Loop: Inkling 2's shapes above over 4 layers, the middle two (sliding, full) looped twice with
    # messages (loop gate rank 64), a residual block per layer: calls L0, L1, L2, L1', L2', L3
    "inkling2_loop_text": {
        "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 128, "swa_num_attention_heads": 8, "swa_num_key_value_heads": 2, "swa_head_dim": 128,
        "sliding_window_size": 128, "rel_extent": 256, "d_rel": 16, "moe_intermediate_size": 512,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "vocab_size": 3000, "unpadded_vocab_size": 3000,
        "n_layers_per_attn_res_block": 1, "eos_token_id": None, "loop_layer_index_start": 1,
        "loop_layer_index_end": 3, "loop_num_passes": 2, "loop_gate_rank": 64,
        "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid", "hybrid_sliding"]}}
LORA_TARGETS = {"inkling_text": ["q_proj", "k_proj", "v_proj", "r_proj", "o_proj"],
                # q/k/v/o_proj.linear, relative_position_bias.linear and o_proj.gate_proj (the experts are
                # parameters; the router is not an nn.Linear)
                "inkling2_text": ["linear", "gate_proj"], "inkling2_loop_text": ["linear", "gate_proj"]}


def use_hf_sdpa() -> None:
    """Inkling's types run HF's own sdpa under an "sdpa" plan (tools/memtrace/build.py attn_impl)."""
    build.SDPA_ONLY = tuple(build.SDPA_ONLY) + tuple(t for t in SDPA_TYPES if t not in build.SDPA_ONLY)


def plans(model_type: str = "inkling_text") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = {k: v for k, v in next(r for r in rows if r["id"] == f"default:{model_type}")["config"].items()
           if k not in ("layer_types", "mlp_layer_types")} | SHRINK[model_type]
    tag = f'{model_type.replace("_", "-")}-{cfg["num_hidden_layers"]}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "eager"}
    lora = {**base, "method": "lora", "stack": {"peft_adapter_dtype": "fp32"},
            "lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": LORA_TARGETS[model_type]}}
    # Inkling 2: eager only (Inkling2PreTrainedModel._supports_sdpa = False: the per-token sinks)
    sdpa = [(f"{tag}-full-s512-sdpa", {**base, "attention": "sdpa"})] if model_type in SDPA_TYPES else []
    return [(f"{tag}-full-s512-eager", base),
            (f"{tag}-full-s512-eager-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512-eager", lora),
            (f"{tag}-lora-attn-s512-eager-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512-eager", {**base, "precision": "bf16-mixed"}), *sdpa]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    use_hf_sdpa()
    cases = []
    for cid, plan in plans(*args[:1]):
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.inkling_trace" + (f" {args[0]}" if args else ""),
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
