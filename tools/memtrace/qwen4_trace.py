"""Traced steps of a small Qwen4-Exp language model (transformers 5.24 modeling_qwen4_exp.py Qwen4ExpForCausalLM),
for the CI check that the engine keeps what its layers save (memory/blocks_qwen4_exp.py;
tests/test_qwen4_exp_blocks.py):

  python -m tools.memtrace.qwen4_trace > tests/data/qwen4_exp_trace.json          (about 1 min on 2 cores)

The model: the default Qwen4ExpTextConfig (tests/data/architectures.json default:qwen4_exp_text) made small
(SHRINK): four hyper-connected layers (hc_count 4 streams, hc_lowrank 320), Gated DeltaNet at 0 and 2, QSA-indexed
attention at 1 and 3, Qwen2-MoE experts with a gated shared expert in every layer; no PLE layers (the default's
ple_layer_ids is empty).

What runs in place of the GPU kernels, on CPU fake tensors:
- the Gated DeltaNet's `causal_conv1d_fn` and `torch_chunk_gated_delta_rule` (hub kernels "causal_conv1d_fn" of
  causal-conv1d and "chunk_gated_delta_rule" of fla on a GPU): tools/memtrace/ssm_trace.py ConvStandIn and
  GatedDeltaStandIn, as for Qwen3-Next / Qwen3.5;
- Qwen4ExpTextQSAIndexer.forward (a Python loop over every batch row and query with `torch.nonzero`, which fake
  tensors cannot answer): `indexer_stand_in` runs its differentiable head (index_qk_proj, the split, q_layernorm,
  the query rotation), whose graph dies at return, and returns what the indexer returns when indexer_budget is at
  least seq_len (every visible key selected): a (b, 1, s, kv) boolean selection mask of ones. The real indexer's
  output is a boolean mask built by scatter from top-k indices: nothing it computes gets a gradient, so its
  parameters get none (memory/indexers.py NO_GRAD_INDEXERS; the tracer's warm-up leaves them out, trace.py
  never_run).

Attention: Qwen4ExpPreTrainedModel._supports_flash_attn is False and the indexer needs the 4-D mask, so the rows run
HF's SDPA (build.py SDPA_ONLY) and one eager. Cases: full bf16 (b1 s512, b2 s256, checkpointed), LoRA on the
attention's and the DeltaNet's projections (fp32 adapters) with and without checkpointing, bf16-mixed full and LoRA,
full eager. Each case keeps what tools/memtrace/compare.py compares and the plan.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from .ssm_trace import _conv_stand_in, _delta_stand_in
from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
# Qwen4-Exp's default (h 2048, 16/2 heads of 256, DeltaNet 16 key / 32 value heads of 128, 512 experts of 512 top-10,
# a shared expert of 512, QSA 8 heads of 128, 4 streams of rank 320) at h 1024: 8/2 heads of 128, DeltaNet 8 / 16
# heads of 128, 16 experts of 512 top-4, shared 512; 4 layers; vocab 8k, so that the peak is in the layers
SHRINK = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
          "head_dim": 128, "linear_num_key_heads": 8, "linear_num_value_heads": 16, "num_experts": 16,
          "num_experts_per_tok": 4, "vocab_size": 8192,
          "layer_types": ["linear_attention", "indexed_attention", "linear_attention", "indexed_attention"]}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "out_proj"]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": TARGETS}


def indexer_stand_in(self, hidden_states, position_embeddings, attention_mask, cache):
    """Qwen4ExpTextQSAIndexer.forward's differentiable head, and its result with every visible key selected."""
    from transformers.models.qwen4_exp.modeling_qwen4_exp import apply_rotary_pos_emb  # noqa: PLC0415
    b, s, _ = hidden_states.shape
    cos, sin = (x[:, -s:, :] for x in position_embeddings)
    qk = self.index_qk_proj(hidden_states)
    q, _ = torch.split(qk, [self.index_n_heads * self.index_head_dim, self.index_kv_heads * self.index_head_dim], -1)
    q = self.q_layernorm(q.reshape(b, s, -1, self.index_head_dim))
    apply_rotary_pos_emb(q, cos=cos, sin=sin, unsqueeze_dim=2)
    kv = attention_mask.shape[-1]
    mask = torch.zeros((b, s, kv + 1), dtype=torch.bool, device=hidden_states.device)
    return mask.logical_not()[..., :kv].unsqueeze(1)


@contextlib.contextmanager
def qwen4_kernels():
    import transformers.models.qwen4_exp.modeling_qwen4_exp as m  # noqa: PLC0415
    prev = m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule, m.Qwen4ExpTextQSAIndexer.forward
    m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule = _conv_stand_in, _delta_stand_in
    m.Qwen4ExpTextQSAIndexer.forward = indexer_stand_in
    try:
        yield
    finally:
        m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule, m.Qwen4ExpTextQSAIndexer.forward = prev


def plans(model_type: str = "qwen4_exp_text") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == f"default:{model_type}")["config"] | SHRINK
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "sdpa"}
    lora = {**base, "method": "lora", "lora": LORA, "stack": {"peft_adapter_dtype": "fp32"}}
    tag = "qwen4-exp-4l"
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-b2-s256", {**base, "micro_batch_size": 2, "seq_len": 256}),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-s512", lora),
            (f"{tag}-lora-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            (f"{tag}-lora-mixed-s512", {**lora, "precision": "bf16-mixed"}),
            (f"{tag}-full-s512-eager", {**base, "attention": "eager"})]


def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    cases = []
    for cid, plan in plans():
        if args and not any(cid.endswith(a) for a in args):
            continue
        with qwen4_kernels():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": "python -m tools.memtrace.qwen4_trace", "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
