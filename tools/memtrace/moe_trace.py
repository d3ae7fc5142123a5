"""Traced steps of small MoE models, for the CI checks that the engine keeps what their blocks save
(memory/blocks.py llama_block):

- ``qwen2_moe``: a shared expert beside the routed ones (Qwen2-MoE's default shapes, two layers;
  tests/test_moe_shared_blocks.py);
- ``deepseek_v3``: multi-head latent attention under FA2 (v padded to the query head dim, the output cropped
  and copied for o_proj) and the fp32 router (DeepSeek-V3's default with h 2048, 16 heads, 2 layers: one dense,
  one sparse of 16 experts of 512, top-8, one shared expert; tests/test_mla_blocks.py).

  python -m tools.memtrace.moe_trace > tests/data/moe_shared_trace.json             (about 1 min on 2 cores)
  python -m tools.memtrace.moe_trace deepseek_v3 > tests/data/mla_trace.json
  python -m tools.memtrace.moe_trace families > tests/data/moe_families_trace.json   (about 8 min)
  python -m tools.memtrace.moe_trace added > tests/data/moe_families_added_trace.json
  python -m tools.memtrace.moe_trace deepseek_v4 > tests/data/deepseek_v4_trace.json     (about 1 min)
  python -m tools.memtrace.moe_trace longcat_flash > tests/data/longcat_flash_trace.json
  python -m tools.memtrace.moe_trace beam > tests/data/beam_trace.json

``deepseek_v4``: DeepSeek-V4's hyper-connected layers (SHRINK; a sliding, a CSA and an HCA layer), full and LoRA on
the attention, with and without checkpointing, bf16 and bf16-mixed (tests/test_deepseek_v4_blocks.py).

``longcat_flash``: LongCat-Flash's two-sublayer layers and shortcut MoE with zero-compute experts (SHRINK; the
balanced router of tools/memtrace/routing.py over routed and identity experts), the four generic rows
(tests/test_longcat_blocks.py).

``beam``: Beam's output-gated, fp32-normed layers (SHRINK), the four generic rows (tests/test_beam_blocks.py).

``families``: Mixtral, Qwen3-MoE, OLMoE, gpt-oss, GraniteMoE, each its default shapes with two layers, full and
LoRA on attention, each with and without checkpointing (tests/test_moe_families.py). ``added``: Llama 4 text
(its own experts code: every expert on every token), in a shape of its own (SHRINK), the same four rows and a
full one with eager attention; DBRX (the same five) and JetMoE (their value-dependent routing with a balanced
router, tools/memtrace/routing.py; JetMoE has no gradient checkpointing: two rows). About 1 min on 2 cores.

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
# LoRA on MLA's projections alone (the experts frozen)
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",
                                                             "o_proj"]}
SHRINK = {"qwen2_moe": {"num_hidden_layers": 2},
          "deepseek_v3": {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
                          "num_hidden_layers": 2, "first_k_dense_replace": 1, "intermediate_size": 4096,
                          "moe_intermediate_size": 512, "n_routed_experts": 16},
          # the families below: their default shapes, two layers (the engine's per-layer rule is what is held)
          "mixtral": {"num_hidden_layers": 2},
          "qwen3_moe": {"num_hidden_layers": 2},
          "olmoe": {"num_hidden_layers": 2},
          "gpt_oss": {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]},
          "granitemoe": {"num_hidden_layers": 2},
          # Llama 4 Scout's layout (16 experts, top-1, a shared expert, the q/k L2 norm on RoPE layers, every 4th
          # layer NoPE with full attention) at h 2048 and 4 layers; MoE on layers 1 and 3 (Maverick's
          # interleave_moe_layer_step 2), so a dense feed_forward of intermediate_size_mlp and a NoPE MoE layer show;
          # a 32k vocabulary, so that the peak is in the layers' backward, not the 202k-wide loss's
          "llama4_text": {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                          "intermediate_size": 2048, "intermediate_size_mlp": 4096, "num_hidden_layers": 4,
                          "interleave_moe_layer_step": 2, "moe_layers": [1, 3], "no_rope_layers": [1, 1, 1, 0],
                          "vocab_size": 32000},
          # databricks/dbrx-base's layout (16 experts, top-4, clip_qkv 8, GQA) at d_model 2048 (16 heads of 128, 4 KV
          # heads), 2 layers, vocab 32k (tools/memtrace/routing.py: a balanced router on fake tensors)
          "dbrx": {"d_model": 2048, "n_heads": 16, "n_layers": 2, "vocab_size": 32000,
                   "attn_config": {"attn_pdrop": 0.0, "clip_qkv": 8.0, "kv_n_heads": 4, "rope_theta": 500000.0},
                   "ffn_config": {"hidden_size": 2048, "ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 3584,
                                  "moe_num_experts": 16, "moe_top_k": 4, "moe_jitter_eps": None,
                                  "moe_loss_weight": 0.05, "moe_normalize_expert_weights": 1.0}},
          # JetMoE-8B's default (h 2048, 8 attention and 8 MLP experts, top-2, 16 KV heads of 128), two layers
          "jetmoe": {"num_hidden_layers": 2},
          # LongCat-Flash's layout (two MLA + MLP sublayers per layer and a shortcut MoE of routed and zero-compute
          # experts, 2:1, top-12 of 768 in the real one) at h 1024, 8 heads (qk 128 + 64, v 128), q_lora_rank 512,
          # kv_lora_rank 512, MLPs of 2048; 16 routed and 8 identity experts of 512, top-4 (the balanced router,
          # tools/memtrace/routing.py); 2 layers, vocab 8k
          "longcat_flash": {"hidden_size": 1024, "num_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
                            "q_lora_rank": 512, "ffn_hidden_size": 2048, "n_routed_experts": 16, "zero_expert_num": 8,
                            "expert_ffn_hidden_size": 512, "moe_topk": 4, "vocab_size": 8192},
          # Beam's layout (output-gated attention with per-head q/k norms, RoPE sliding layers and a NoPE full layer
          # with its query scaling, Gemma's four fp32-product norms, fp32 SwiGLU, a dense first layer, sigmoid-routed
          # experts without a shared one) at h 1024, 8 heads of 128 (4 KV heads), MLP 2048; layers: sliding dense,
          # sliding sparse, full sparse; 8 experts of 512, top-2; vocab 3000 (no other width: the tracer tells logits
          # by it), so that the checkpointed rows' peaks leave the capped loss
          "beam": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4,
                   "intermediate_size": 2048, "moe_intermediate_size": 512, "num_experts": 8, "num_experts_per_tok": 2,
                   "n_group": 1, "topk_group": 1,
                   "vocab_size": 3000, "mlp_layer_types": ["dense", "sparse", "sparse"],
                   "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]},
          # DeepSeek-V4-Flash's layout (4 hyper-connection streams, 20 Sinkhorn iterations, one shared KV head, grouped
          # output projection, clamped SwiGLU experts and a shared expert) at h 1024, 8 heads of 128 (16 rope dims),
          # one layer of each attention kind: sliding, CSA (rate 4, an indexer of 4 heads of 64, top 32), HCA (rate
          # 128); 8 experts of 512, top-2, learned routers (no hash layers); vocab 8k, so that the peak is in the layers
          "deepseek_v4": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "head_dim": 128,
                          "qk_rope_head_dim": 16, "q_lora_rank": 256, "n_routed_experts": 8,
                          "num_experts_per_tok": 2, "moe_intermediate_size": 512, "o_groups": 2, "o_lora_rank": 256,
                          "index_n_heads": 4, "index_head_dim": 64, "index_topk": 32, "vocab_size": 8192,
                          "sliding_window": 128, "mlp_layer_types": ["moe", "moe", "moe"],
                          "layer_types": ["sliding_attention", "compressed_sparse_attention",
                                          "heavily_compressed_attention"]}}
FAMILIES = ("mixtral", "qwen3_moe", "olmoe", "gpt_oss", "granitemoe")
# the families added since (``added``: tests/data/moe_families_added_trace.json, the same tests)
ADDED = ("llama4_text", "dbrx", "jetmoe")
EAGER_ROWS = ("llama4_text", "dbrx")
# no gradient checkpointing (modeling_jetmoe.py JetMoePreTrainedModel.supports_gradient_checkpointing = False)
NO_CKPT = ("jetmoe",)
# LoRA on attention (the experts frozen) for the families of the generic grid
ATTN_LORA = {**LORA, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}
# the attention's nn.Linear modules where they are named otherwise
ATTN_TARGETS = {"dbrx": ["Wqkv", "out_proj"], "jetmoe": ["kv_proj"], "longcat_flash": LORA["targets"]}


def plans(model_type: str = "qwen2_moe") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == f"default:{model_type}")["config"]
    cfg = {k: v for k, v in cfg.items() if k not in ("layer_types", "mlp_layer_types")} | SHRINK[model_type]
    tag = f'{model_type.replace("_", "-")}-{cfg.get("num_hidden_layers", cfg.get("n_layers", cfg.get("num_layers")))}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    if model_type == "deepseek_v3":
        return [("deepseek-v3-2l-full-s512", base),
                ("deepseek-v3-2l-full-b2-s256-ckpt", {**base, "micro_batch_size": 2, "seq_len": 256,
                                                      "activation_checkpointing": "full"}),
                ("deepseek-v3-2l-lora-attn-mixed-s512", {**base, "precision": "bf16-mixed", "method": "lora",
                                                         "lora": LORA})]
    if model_type == "deepseek_v4":
        lora = {**base, "method": "lora", "lora": {**LORA, "targets": ["q_a_proj", "q_b_proj", "kv_proj", "o_b_proj"]},
                "stack": {"peft_adapter_dtype": "fp32"}}
        return [("deepseek-v4-3l-full-s512", base),
                ("deepseek-v4-3l-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256}),
                ("deepseek-v4-3l-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
                ("deepseek-v4-3l-lora-attn-s512", lora),
                ("deepseek-v4-3l-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
                # bf16-mixed: fp32 weights, so an fp32 residual stream, autocast copies, fp32 grouped_mm experts
                ("deepseek-v4-3l-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
                ("deepseek-v4-3l-lora-attn-mixed-s512", {**lora, "precision": "bf16-mixed"})]
    if model_type != "qwen2_moe":
        # fp32 adapters on the bf16 base: PEFT >= 0.12 get_peft_model(autocast_adapter_dtype=True), as the
        # engine's default stack (memory/stack.py)
        attn_lora = {**ATTN_LORA, "targets": ATTN_TARGETS[model_type]} if model_type in ATTN_TARGETS else ATTN_LORA
        lora = {**base, "method": "lora", "lora": attn_lora, "stack": {"peft_adapter_dtype": "fp32"}}
        # the first micro-step of an accumulation (no gradients yet): Mixtral only
        ga1 = [(f"{tag}-full-s512-ga1", {**base, "gradient_accumulation_steps": 1})] if model_type == "mixtral" else []
        # eager attention where a family's own rule has one: Llama 4 (softmax in the query's dtype), DBRX
        ga1 += [(f"{tag}-full-s512-eager", {**base, "attention": "eager"})] if model_type in EAGER_ROWS else []
        out = [(f"{tag}-full-s512", base), *ga1,
               (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
               (f"{tag}-lora-attn-s512", lora),
               (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"})]
        if model_type == "longcat_flash":
            # bf16-mixed: fp32 weights, so autocast copies of every real expert's weight slices
            out.append((f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}))
        return [row for row in out if model_type not in NO_CKPT or "ckpt" not in row[0]]
    return [("qwen2-moe-2l-full-s512", base),
            ("qwen2-moe-2l-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            ("qwen2-moe-2l-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256})]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0] if args else "qwen2_moe"
    cases = []
    types = {"families": FAMILIES, "added": ADDED}.get(model_type, (model_type,))
    for cid, plan in [row for mt in types for row in plans(mt)]:
        r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op", "phase_peaks",
                                                                    "saved_activations_forward_end")}})
    gen = "python -m tools.memtrace.moe_trace" + (f" {model_type}" if args else "")
    json.dump({"generator": gen, "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
