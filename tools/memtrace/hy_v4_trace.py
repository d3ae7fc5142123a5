"""Traced steps of HY-V4 (transformers 5.24 modeling_hy_v4.py), for the CI check that the engine keeps what its
layers save (memory/blocks_hy_v4.py, tests/test_hy_v4_blocks.py):

  python -m tools.memtrace.hy_v4_trace > tests/data/hy_v4_trace.json                (about 20 s on 2 cores)
  python -m tools.memtrace.hy_v4_trace hy_v4_vl > tests/data/hy_v4_vl_trace.json
  python -m tools.memtrace.hy_v4_trace hy_v4_narrow > tests/data/hy_v4_narrow_trace.json   (about 1 min)

``hy_v4``: HY-V4's layout (4 hyper-connection streams without Sinkhorn, MLA with an output gate and a sink per head,
the no-grad DSA indexer on ``full`` layers, the top-k shared by the next ``shared`` ones, a dense first MLP, then
sigmoid-routed clamped SwiGLU experts with a shared expert, an fp32 lm_head) shrunk (SHRINK) to h 1024, 8 heads
(qk 64 nope + 32 rope, v 128), q_lora_rank 256, kv_lora_rank 128, an MLP of 2048, 8 experts of 512, top-2, an
indexer of 4 heads of 64 (top 32); three layers: dense + full indexer, sparse + shared, sparse + full; vocab 8k
(pad id 0: the default's 120002 is past it). The modelling code runs eager attention only (_supports_sdpa and
_supports_flash_attn False), so every row is eager. Rows: full and LoRA on the MLA projections, with and without
gradient checkpointing, bf16 and bf16-mixed, a b2 s256 row.

``hy_v4_narrow``: the same model narrower (h 512, 4 heads of v 64, q_lora_rank 128, kv_lora_rank 64, an MLP of 1024,
experts of 256, top-k 64; layers dense + full, sparse + full, sparse + shared), where the 8k vocabulary's loss
backward is every row's peak (the whole saved stack alive), and two two-layer rows at s 1024 (s != h: the mask and
the embedding-sized tensors differ in size).

Each case keeps what tools/memtrace/compare.py compares (the peak's components, phase peaks, saved activations
at forward end) and the plan; the test re-runs the engine on the plan and requires every component and the
peak within compare.REL_TOL (3 %).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
# LoRA on MLA's projections alone (the experts, the output gate and the indexer frozen)
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0,
        "targets": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]}
SHRINK = {"hy_v4": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 8,
                    "q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                    "v_head_dim": 128, "intermediate_size": 2048, "moe_intermediate_size": 512,
                    "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 4, "index_head_dim": 64,
                    "index_topk": 32, "vocab_size": 8192, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                    "mlp_layer_types": ["dense", "sparse", "sparse"], "indexer_types": ["full", "shared", "full"]}}
SHRINK["hy_v4_narrow"] = {**SHRINK["hy_v4"], "hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
                          "q_lora_rank": 128, "kv_lora_rank": 64, "v_head_dim": 64, "intermediate_size": 1024,
                          "moe_intermediate_size": 256, "index_topk": 64, "indexer_types": ["full", "full", "shared"]}
# fields the config derives (HYV4Config.__post_init__: head_dim = qk_rope_head_dim, qk_head_dim, layer_types)
DERIVED = ("layer_types", "mlp_layer_types", "indexer_types", "head_dim", "qk_head_dim")


# HY-V4-VL fed text only: the language model is SHRINK's (its 3-D rope's mrope_section filling the 32 rope dims), the
# vision tower a tiny one (counted, frozen, never run: build.py WHOLE_COMPOSITES)
VL_VISION = {"model_type": "hy_v4_vl_vision", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
             "num_attention_heads": 2, "num_key_value_heads": 2, "out_hidden_size": 1024, "patch_size": 16,
             "spatial_merge_size": 2}


def _config(model_type: str) -> dict:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == f"default:{model_type.removesuffix('_narrow')}")["config"]
    if model_type == "hy_v4_vl":
        text = {k: v for k, v in cfg["text_config"].items() if k not in DERIVED} | SHRINK["hy_v4"]
        text["rope_parameters"] = {**text["rope_parameters"], "mrope_section": [6, 5, 5]}
        return {**cfg, "text_config": text, "vision_config": VL_VISION, "image_token_id": 8000, "video_token_id": 8001}
    return {k: v for k, v in cfg.items() if k not in DERIVED} | SHRINK[model_type]


def _narrow(base: dict, lora: dict) -> list[tuple[str, dict]]:
    """hy_v4_narrow's rows: the nine of the module docstring."""
    two = {**base["model"], "num_hidden_layers": 2, "mlp_layer_types": ["dense", "sparse"],
           "indexer_types": ["full", "shared"]}
    return [("hy-v4-narrow-3l-full-s512", base),
            ("hy-v4-narrow-3l-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256}),
            ("hy-v4-narrow-3l-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            ("hy-v4-narrow-3l-lora-attn-s512", lora),
            ("hy-v4-narrow-3l-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            ("hy-v4-narrow-3l-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            ("hy-v4-narrow-3l-lora-attn-mixed-s512", {**lora, "precision": "bf16-mixed"}),
            ("hy-v4-narrow-2l-full-s1024", {**base, "model": two, "seq_len": 1024}),
            ("hy-v4-narrow-2l-lora-attn-s1024-ckpt", {**lora, "model": two, "seq_len": 1024,
                                                      "activation_checkpointing": "full"})]


def plans(model_type: str = "hy_v4") -> list[tuple[str, dict]]:
    cfg = _config(model_type)
    tag = f'{model_type.replace("_", "-")}-{cfg.get("text_config", cfg)["num_hidden_layers"]}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "eager"}
    lora = {**base, "method": "lora", "lora": LORA, "stack": {"peft_adapter_dtype": "fp32"}}
    if model_type == "hy_v4_vl":
        return [(f"{tag}-full-s512", base), (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
                (f"{tag}-lora-attn-s512", lora)]
    if model_type == "hy_v4_narrow":
        return _narrow(base, lora)
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256}),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            # bf16-mixed: fp32 weights, so an fp32 residual stream, autocast copies, fp32 grouped_mm experts
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            (f"{tag}-full-mixed-s512-ckpt", {**base, "precision": "bf16-mixed", "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-mixed-s512", {**lora, "precision": "bf16-mixed"}),
            (f"{tag}-lora-attn-mixed-s512-ckpt", {**lora, "precision": "bf16-mixed",
                                                  "activation_checkpointing": "full"})]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0] if args else "hy_v4"
    only = set(args[1:])
    cases = []
    for cid, plan in plans(model_type):
        if only and cid not in only:
            continue
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    gen = "python -m tools.memtrace.hy_v4_trace" + (f" {model_type}" if args else "")
    json.dump({"generator": gen, "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
