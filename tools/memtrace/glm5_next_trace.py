"""Traced steps of GLM-5.3-Flash (transformers 5.24 modeling_glm5_next.py Glm5NextForConditionalGeneration) fed text
only, as it trains on a GPU, for the CI check that the engine keeps what its language model's layers save
(memory/blocks_glm5_next.py; tests/test_glm5_next_blocks.py).

Glm5NextTextLinearAttention.forward calls `causal_conv1d_fn` and `chunk_kimi_delta_attention` (the hub kernels
"causal_conv1d_fn" and fla's "chunk_kda"), as Kimi Linear does: tools/memtrace/kda_trace.py's stand-ins (KdaStandIn:
fla 0.5.2's ChunkKDAFunction saves) replace both module globals. The model is built whole as the engine counts it
(model/composite.py), its vision tower frozen and never run (build.py WHOLE_COMPOSITES), under HF's own SDPA with the
top-k mask (build.py SDPA_ONLY: Glm5NextTextAttention.build_attention_mask_from_topk hands SDPA a (b, 1, s, s) mask;
_supports_flash_attn is False) or eager. Glm5NextTextIndexer.forward runs under @torch.no_grad() and returns int32
top-k indices: it saves nothing, but its k-pool selection (`pool_keys[:, keep]`, a boolean index) needs values, so
it is stood in by the indices' (b, s, index_topk + index_kpool - 1) int32 tensor (index_kpool_always_select_tail).

  python -m tools.memtrace.glm5_next_trace > tests/data/glm5_next_trace.json   (about 1 min on 2 cores)

Rows: the default config made small (SHRINK); full bf16 with and without checkpointing, LoRA on the attention
projections of both kinds (fp32 adapters) with and without, full bf16-mixed, full bf16 with eager attention.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from .kda_trace import _conv_stand_in, _kda_stand_in
from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
# GLM-5.3-Flash's language model as the Glm5NextTextConfig default (h 4096, hc_mult 4 hyper-connected streams, KDA of
# 64 heads of 128 with the safe lower-bound gate, MLA of 64 heads (q rank 1536, kv rank 512, qk 256 NoPE, v 256) with
# the k-pooled DSA indexer, 288 experts of 2048 top-8 and a shared one, clamped SwiGLU, layers 0-2 dense) at h 1024:
# 8 KDA heads, 8 MLA heads (q rank 512), 8 index heads, 8 experts of 512 top-2, dense MLP 2816, 4 layers KDA KDA KDA
# indexed, layer 0 dense; the vision tower tiny (frozen, never run: text only)
SHRINK = {"text_config": {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                          "linear_num_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                          "n_routed_experts": 8, "num_experts_per_tok": 2, "q_lora_rank": 512, "index_n_heads": 8,
                          "num_hidden_layers": 4,
                          "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                          "indexed_attention"],
                          "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "indexer_types": ["full"] * 4,
                          # build.py sets use_cache False on the config it builds; Glm5NextTextModel reads its text
                          # config's
                          "use_cache": False},
          "vision_config": {"depth": 1, "hidden_size": 128, "num_heads": 2, "out_hidden_size": 128,
                            "intermediate_size": 256, "projection_intermediate_size": 256}}
# KDA's q/k/v/o_proj and the MLA layer's projections
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": TARGETS}


@contextlib.contextmanager
def glm5_next_kernels():
    """The KDA kernels stood in, the tower frozen, SDPA with the mask, the indexer's forward stood in (the module
    docstring)."""
    from transformers.models.glm5_next import modeling_glm5_next as mg  # noqa: PLC0415
    from . import build  # noqa: PLC0415

    @torch.no_grad()
    def indexer_forward(self, hidden_states, q_resid, attention_mask, cache=None, **kwargs):
        width = self.index_topk + (self.index_kpool - 1 if self.index_kpool_always_select_tail else 0)
        return torch.zeros((*hidden_states.shape[:2], width), dtype=torch.int32, device=hidden_states.device)

    prev = mg.causal_conv1d_fn, mg.chunk_kimi_delta_attention, mg.Glm5NextTextIndexer.forward, build.SDPA_ONLY
    mg.causal_conv1d_fn, mg.chunk_kimi_delta_attention = _conv_stand_in, _kda_stand_in
    mg.Glm5NextTextIndexer.forward = indexer_forward
    build.WHOLE_COMPOSITES["glm5_next"] = ("visual",)
    build.SDPA_ONLY = (*prev[3], "glm5_next")
    try:
        yield
    finally:
        mg.causal_conv1d_fn, mg.chunk_kimi_delta_attention, mg.Glm5NextTextIndexer.forward, build.SDPA_ONLY = prev
        del build.WHOLE_COMPOSITES["glm5_next"]


def plans() -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = dict(next(r for r in rows if r["id"] == "default:glm5_next")["config"])
    for k, v in SHRINK.items():                    # the sub-configs' shrink merged into the default's
        cfg[k] = {**cfg[k], **v}
    tag = f'glm5-next-{cfg["text_config"]["num_hidden_layers"]}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "sdpa"}
    lora = {**base, "method": "lora", "lora": LORA, "stack": {"peft_adapter_dtype": "fp32"}}
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            (f"{tag}-full-s512-eager", {**base, "attention": "eager"})]


def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    cases = []
    for cid, plan in plans():
        if args and not cid.startswith(args[0]):
            continue
        with glm5_next_kernels():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.glm5_next_trace", "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
