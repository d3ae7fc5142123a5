"""Traced steps of a small Kimi Linear model as it trains on a GPU, for the CI check that the engine keeps what its
Kimi Delta Attention (KDA), latent-attention and MoE layers save (memory/blocks_kimi_linear.py;
tests/test_kimi_linear_blocks.py).

Which path real training takes: transformers 5.24 modeling_kimi_linear.py KimiLinearDeltaAttention.forward calls
`causal_conv1d_fn` (`use_kernel_func_from_hub_with_fallback("causal_conv1d_fn", "causal_conv1d")`, silu inside)
on the concatenated q/k/v projections and `chunk_kimi_delta_attention`, the hub kernel "chunk_kda" of
flash-linear-attention (fla; kernels-community/fla in training mode) with ``use_qk_l2norm_in_kernel=True``,
no initial state and no final state. Without the kernels the module's PyTorch fallbacks run, which keep far
more (fp32 copies, the (b, h, n, 64, 64, d) decay masks): not what trains on a GPU.

`KdaStandIn` keeps what fla's ChunkKDAFunction keeps (followed: fla 0.5.2, fla-org/flash-linear-attention commit
bc3b101dcb713ddc5bd8924b66754eb68b5ccf89, fla/ops/kda/chunk.py ChunkKDAFunction.forward, chunk_fwd.py
chunk_kda_fwd, chunk_intra.py chunk_kda_fwd_intra, modules/l2norm.py l2norm_fwd, ops/utils/cumsum.py
chunk_local_cumsum). With use_gate_in_kernel / use_beta_sigmoid_in_kernel False (transformers passes a
precomputed fp32 g and the sigmoid's beta) and disable_recompute False, the forward is: input_guard makes q, k,
v, g, beta contiguous; l2norm_fwd gives new q and k (like the inputs) and fp32 rstd (one per row: b·s·H);
chunk_local_cumsum's g_cumsum (fp32, like g); chunk_kda_fwd_intra's Aqk (b, s, H, 64) empty and Akk (b, s, H,
64) zeros, both in k's dtype, and an fp32 (b, s, H, 16) Akkd temporary; recompute_w_u_fwd's w, u, kg (qg None);
chunk_gated_delta_rule_fwd_h's h (b, ceil(s/64), H, K, V) and v_new; chunk_gla_fwd_o_gk's o. chunk_kda_fwd then
drops w, u, qg, kg, v_new and h ("Delete to save memory": recomputed in backward), so

  ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g_cumsum, g_input, beta_raw, beta, A_log, dt_bias, Aqk, Akk,
                        w, u, qg, kg, v_new, h, initial_state, cu_seqlens, chunk_indices)

keeps, besides Nones, q, q_rstd, k, k_rstd, v (the contiguous copy), g_cumsum, g (the input itself), beta (the
input, twice), Aqk and Akk; the output is ``o.type_as(q)``. No arithmetic (FakeTensorMode computes nothing).
The convolution is ssm_trace.py's ConvStandIn (causal-conv1d's CausalConv1dFn keeps x, weight, bias).

  python -m tools.memtrace.kda_trace kimi_linear > tests/data/kimi_linear_trace.json   (about a minute on 2 cores)
  python -m tools.memtrace.kda_trace bailing_hybrid > tests/data/bailing_hybrid_trace.json   (Ling 3: the same calls)

Each case keeps what tools/memtrace/compare.py compares, and the plan.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from .ssm_trace import ConvStandIn
from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 64
# Kimi Linear's default (h 2304, MLA of 32 heads (qk 128 + 64, v 128, kv_lora_rank 512, no q_lora), KDA of 32 heads
# of 128, conv 4, 256 experts of 1024 top-8 with one shared expert, layer 0 dense of 9216) at h 1024: 8 MLA heads,
# 8 KDA heads of 128, 8 experts of 512 top-2, a dense MLP of 2816, 3 layers KDA (dense), MLA (sparse), KDA (sparse)
SHRINK = {"kimi_linear": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8,
                          "num_key_value_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                          "num_experts": 8, "num_experts_per_token": 2, "linear_num_heads": 8,
                          "layer_types": ["linear_attention", "full_attention", "linear_attention"],
                          "mlp_layer_types": ["dense", "sparse", "sparse"]},
          # Ling 3's default (h 2560, MLA of 32 heads with the head-wise sigmoid gate, KDA of 32 heads of 128 with
          # the full-rank f_proj / g_proj and the safe gate, 512 experts of 768 top-8 in 8 groups, 2 dense layers
          # of 6144) in the shapes above: 8 experts in one group, the same 3 layers
          "bailing_hybrid": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8,
                             "num_key_value_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                             "num_experts": 8, "num_experts_per_token": 2, "linear_num_heads": 8,
                             "num_expert_group": 1, "topk_group": 1,
                             "layer_types": ["linear_attention", "full_attention", "linear_attention"],
                             "mlp_layer_types": ["dense", "sparse", "sparse"]}}
MODULES = ("kimi_linear", "bailing_hybrid")   # each KDA modelling module (the same kernel calls)
# PEFT on the attention projections of both kinds: KDA's q/k/v/o_proj, MLA's q_proj, kv_a / kv_b and o_proj
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "kv_a_proj_with_mqa", "kv_b_proj"]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": TARGETS}


class KdaStandIn(torch.autograd.Function):
    """fla's ChunkKDAFunction (the module docstring): its forward's copies, allocations and save_for_backward."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))
        b, s, hh, dk = k.shape
        qn, kn = torch.empty_like(q), torch.empty_like(k)
        q_rstd = torch.empty(b * s * hh, dtype=torch.float32, device=q.device)
        k_rstd = torch.empty(b * s * hh, dtype=torch.float32, device=k.device)
        g_cumsum = torch.empty(g.shape, dtype=torch.float32, device=g.device)
        aqk = k.new_empty((b, s, hh, CHUNK))
        akk = k.new_zeros((b, s, hh, CHUNK))
        akkd = torch.empty((b, s, hh, 16), dtype=torch.float32, device=k.device)
        w, u, kg = k.new_empty(k.shape), torch.empty_like(v), torch.empty_like(k)
        h = k.new_empty((b, -(-s // CHUNK), hh, dk, v.shape[-1]))
        v_new, o = torch.empty_like(v), torch.empty_like(v)
        del akkd, w, u, kg, h, v_new
        ctx.save_for_backward(qn, q_rstd, kn, k_rstd, v, g_cumsum, g, beta, beta, aqk, akk)
        return o.type_as(qn)

    @staticmethod
    def backward(ctx, do):
        q, _, k, _, v, _, g, beta, _, _, _ = ctx.saved_tensors
        return tuple(torch.empty_like(t) for t in (q, k, v, g, beta))


def _kda_stand_in(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, **kwargs):
    return KdaStandIn.apply(query, key, value, g, beta), None


def _conv_stand_in(x, weight, bias=None, activation=None, **kwargs):
    return ConvStandIn.apply(x, weight, bias)


@contextlib.contextmanager
def kda_kernels():
    """modeling_kimi_linear's `causal_conv1d_fn` and `chunk_kimi_delta_attention` (module globals its
    KimiLinearDeltaAttention calls) -> the stand-ins."""
    import importlib  # noqa: PLC0415
    mods = [importlib.import_module(f"transformers.models.{t}.modeling_{t}") for t in MODULES]
    prev = [(m.causal_conv1d_fn, m.chunk_kimi_delta_attention) for m in mods]
    for m in mods:
        m.causal_conv1d_fn, m.chunk_kimi_delta_attention = _conv_stand_in, _kda_stand_in
    try:
        yield
    finally:
        for m, p in zip(mods, prev):
            m.causal_conv1d_fn, m.chunk_kimi_delta_attention = p


def plans(model_type: str = "kimi_linear") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = next(r for r in rows if r["id"] == f"default:{model_type}")["config"] | SHRINK[model_type]
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    tag = f"{model_type.replace('_', '-')}-{cfg['num_hidden_layers']}l"
    lora = {**base, "method": "lora", "lora": LORA, "stack": {"peft_adapter_dtype": "fp32"}}
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-s1024-ckpt", {**base, "seq_len": 1024, "activation_checkpointing": "full"}),
            (f"{tag}-mixed-b2-s512", {**base, "precision": "bf16-mixed", "micro_batch_size": 2}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-mixed-s512", {**lora, "precision": "bf16-mixed"})]


def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0] if args else "kimi_linear"
    cases = []
    for cid, plan in plans(model_type):
        with kda_kernels():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
        print(cid, r["peak_bytes"], file=sys.stderr)
    json.dump({"generator": f"python -m tools.memtrace.kda_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
