"""Traced steps of the Kimi Delta Attention hybrids as they train on a GPU: Kimi Linear (transformers 5.24
modeling_kimi_linear.py KimiLinearForCausalLM), Bailing Hybrid / Ling 3 and GLM-5.3-Flash, for the CI checks that the
engine keeps what their layers save (memory/blocks_kimi_linear.py, memory/blocks_glm5_next.py;
tests/test_kimi_linear_blocks.py, test_bailing_hybrid_blocks.py, test_glm5_next_blocks.py).

Kimi Delta Attention (KimiLinearDeltaAttention.forward) calls `causal_conv1d_fn` (the hub kernel "causal_conv1d_fn",
causal-conv1d's CausalConv1dFn on a GPU: tools/memtrace/ssm_trace.py ConvStandIn keeps its input) and
`chunk_kimi_delta_attention`, `use_kernel_func_from_hub_with_fallback("chunk_kda", "fla")`: with
flash-linear-attention installed, fla's `chunk_kda`. On CPU fake tensors both module globals are replaced
(`kda_kernels`): KdaStandIn saves what fla's ChunkKDAFunction saves. Followed: flash-linear-attention 0.5.2
(github.com/fla-org/flash-linear-attention at bc3b101d, 2026-08-22), fla/ops/kda/chunk.py ChunkKDAFunction.forward
and fla/ops/kda/chunk_fwd.py chunk_kda_fwd, called as transformers calls it (use_qk_l2norm_in_kernel=True, g the
forget gate's fp32 output, beta after the sigmoid, no A_log: use_gate_in_kernel False, disable_recompute False):

- input_guard makes q, k, v, g, beta contiguous (q, k, v are strided views of the conv output's split: copies);
- l2norm_fwd (fla/modules/l2norm.py) returns new q and k and their fp32 rstd, one per row (b·s·H);
- chunk_local_cumsum: g_cumsum, fp32 (b, s, H, K);
- chunk_kda_fwd_intra (chunk_intra.py): Aqk and Akk (b, s, H, 64) in k's dtype, the fp32 Akkd (b, s, H, 16)
  scratch; recompute_w_u_fwd (wy_fast.py): w, u, kg (qg None without disable_recompute);
- chunk_gated_delta_rule_fwd_h (common/chunk_delta_h.py): h (b, ceil(s/64), H, K, V) in k's dtype and v_new;
  chunk_gla_fwd_o_gk: o like v;
- ``disable_recompute is False``: w, u, qg, kg, v_new and h are dropped (None) before
  ``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g_cumsum, g_input, beta_raw, beta, A_log, dt_bias, Aqk, Akk,
  w, u, qg, kg, v_new, h, initial_state, cu_seqlens, chunk_indices)``: what stays is q, k (the l2-normed), their
  rstd, v (the contiguous copy), g_cumsum, g_input (the caller's g), beta (twice the same tensor), Aqk, Akk;
- returns ``o.type_as(q)``.
(fla 0.4.0 saved ``(q, q_rstd, k, k_rstd, v, g, beta, Aqk, Akk, ...)`` with g the cumulative one: the caller's g
not kept, 4 bytes per q and token less where nothing else keeps it; 0.4.1 to 0.5.2 keep both; with
disable_recompute=True (not what transformers asks) w, u, qg, kg, v_new and h stay too.)

  python -m tools.memtrace.kda_trace kimi_linear > tests/data/kimi_linear_trace.json   (about 20 s on 2 cores)
  python -m tools.memtrace.kda_trace bailing_hybrid > tests/data/bailing_hybrid_trace.json
  python -m tools.memtrace.kda_trace glm5_next > tests/data/glm5_next_trace.json

Bailing Hybrid / Ling 3 (modeling_bailing_hybrid.py BailingHybridDeltaAttention.forward) calls the same two kernels
(its conv1d weight fp32: _keep_in_fp32_modules_strict), with g the safe sigmoid gate cast to the input's dtype.

GLM-5.3-Flash (modeling_glm5_next.py Glm5NextTextLinearAttention.forward) calls the same two kernels; it is traced as
Glm5NextForConditionalGeneration fed text only, under HF's SDPA with its top-k mask, the no-grad DSA indexer's
forward stood in (`glm5_next_text_only`).

Rows: the default config made small (SHRINK), the generic rows of tools/memtrace/moe_trace.py (full bf16 with and
without checkpointing, LoRA on the attention projections (fp32 adapters) with and without, full bf16-mixed) and a
full bf16 row with eager attention.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from .ssm_trace import _conv_stand_in
from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 64           # fla chunk_kda: chunk_size 64 (Aqk, Akk are (b, s, H, 64))
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0}
SHRINK = {
    # Kimi-Linear-48B-A3B's layout as the KimiLinearConfig default (h 2304, MLA of 32 heads (qk 128 + 64, v 128,
    # kv rank 512, no q rank), KDA of 32 heads of 128, 256 experts of 1024 top-8, one shared expert, layer 0
    # dense of 9216) at h 1024: 8 MLA heads, 8 KDA heads of 128, 8 experts of 512 top-2, dense MLP 2816, 4 layers
    # KDA KDA KDA MLA with layer 0 dense
    "kimi_linear": {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                    "linear_num_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                    "num_experts": 8, "num_experts_per_token": 2, "num_hidden_layers": 4,
                    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                    "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]},
    # Ling 3's layout as the BailingHybridConfig default (h 2560, MLA of 32 heads (qk 128 + 64 interleaved RoPE, v
    # 128, kv rank 512, no q rank) with the head-wise output gate, KDA of 32 heads of 128 with the safe sigmoid gate,
    # 512 experts of 768 top-8 in 8 groups, one shared expert, layers 0-1 dense of 6144) at h 1024: 8 MLA heads, 8
    # KDA heads, 8 experts of 512 top-2 in 2 groups, dense MLP 2816, 4 layers KDA KDA KDA MLA with layer 0 dense
    "bailing_hybrid": {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                       "linear_num_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                       "num_experts": 8, "num_experts_per_token": 2, "num_expert_group": 2, "topk_group": 2,
                       "num_hidden_layers": 4,
                       "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                       "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]},
    # GLM-5.3-Flash's language model as the Glm5NextTextConfig default (h 4096, hc_mult 4 hyper-connected streams, KDA
    # of 64 heads of 128 with the safe lower-bound gate, MLA of 64 heads (q rank 1536, kv rank 512, qk 256 NoPE, v
    # 256) with the k-pooled DSA indexer, 288 experts of 2048 top-8 and a shared one, clamped SwiGLU, layers 0-2
    # dense) at h 1024: 8 KDA heads, 8 MLA heads (q rank 512), 8 index heads, 8 experts of 512 top-2, dense MLP
    # 2816, 4 layers KDA KDA KDA indexed, layer 0 dense; the vision tower tiny (frozen, never run: text only)
    "glm5_next": {"text_config": {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                                  "linear_num_heads": 8, "intermediate_size": 2816, "moe_intermediate_size": 512,
                                  "n_routed_experts": 8, "num_experts_per_tok": 2, "q_lora_rank": 512,
                                  "index_n_heads": 8, "num_hidden_layers": 4,
                                  "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                                  "indexed_attention"],
                                  "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
                                  "indexer_types": ["full"] * 4,
                                  # build.py sets use_cache False on the config it builds; Glm5NextTextModel reads
                                  # its text config's
                                  "use_cache": False},
                  "vision_config": {"depth": 1, "hidden_size": 128, "num_heads": 2, "out_hidden_size": 128,
                                    "intermediate_size": 256, "projection_intermediate_size": 256}},
}
TARGETS = {"glm5_next": ["q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                         "kv_b_proj"],
           "kimi_linear": ["q_proj", "k_proj", "v_proj", "o_proj", "kv_a_proj_with_mqa", "kv_b_proj"],
           "bailing_hybrid": ["q_proj", "k_proj", "v_proj", "o_proj", "kv_a_proj_with_mqa", "kv_b_proj"]}


class KdaStandIn(torch.autograd.Function):
    """fla 0.5.2's ChunkKDAFunction (module docstring): its forward's copies, allocations and save_for_backward,
    no arithmetic."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))    # input_guard
        b, s, hv, dv = v.shape
        dk = k.shape[-1]
        qn, kn = torch.empty_like(q), torch.empty_like(k)                  # l2norm_fwd
        q_rstd = torch.empty(q.numel() // dk, dtype=torch.float32, device=q.device)
        k_rstd = torch.empty(k.numel() // dk, dtype=torch.float32, device=k.device)
        g_cumsum = torch.empty(g.shape, dtype=torch.float32, device=g.device)
        aqk, akk = k.new_empty((b, s, hv, CHUNK)), k.new_zeros((b, s, hv, CHUNK))
        akkd = torch.empty((b, s, hv, 16), dtype=torch.float32, device=k.device)
        w, u, kg = k.new_empty((b, s, hv, dk)), torch.empty_like(v), k.new_empty((b, s, hv, dk))
        h = k.new_empty((b, -(-s // CHUNK), hv, dk, dv))
        v_new, o = torch.empty_like(u), torch.zeros_like(v)
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


@contextlib.contextmanager
def glm5_next_text_only():
    """GLM-5.3-Flash fed text only, traced whole as the engine counts it (model/composite.py): built as
    Glm5NextForConditionalGeneration (build.py model_class, AutoModelForImageTextToText) with model.visual frozen
    (build.py WHOLE_COMPOSITES: PEFT's targets inside language_model only), under HF's own SDPA with the top-k mask
    (build.py SDPA_ONLY: Glm5NextTextAttention.build_attention_mask_from_topk hands SDPA a (b, 1, s, s) bool mask).
    Glm5NextTextIndexer.forward runs under @torch.no_grad() and returns int32 top-k indices: it saves nothing, but
    its k-pool selection (`pool_keys[:, keep]`, a boolean index) needs values, so it is stood in by the indices'
    (b, s, index_topk + index_kpool - 1) int32 tensor (index_kpool_always_select_tail), which is what the layer
    keeps of it."""
    import torch  # noqa: PLC0415
    from transformers.models.glm5_next import modeling_glm5_next as mg  # noqa: PLC0415
    from . import build  # noqa: PLC0415

    @torch.no_grad()
    def indexer_forward(self, hidden_states, q_resid, attention_mask, cache=None, **kwargs):
        width = self.index_topk + (self.index_kpool - 1 if self.index_kpool_always_select_tail else 0)
        return torch.zeros((*hidden_states.shape[:2], width), dtype=torch.int32, device=hidden_states.device)

    prev_sdpa, prev_fwd = build.SDPA_ONLY, mg.Glm5NextTextIndexer.forward
    build.WHOLE_COMPOSITES["glm5_next"] = ("visual",)
    build.SDPA_ONLY = (*prev_sdpa, "glm5_next")
    mg.Glm5NextTextIndexer.forward = indexer_forward
    try:
        yield
    finally:
        del build.WHOLE_COMPOSITES["glm5_next"]
        build.SDPA_ONLY, mg.Glm5NextTextIndexer.forward = prev_sdpa, prev_fwd


@contextlib.contextmanager
def kda_kernels(model_type: str = "kimi_linear"):
    """modeling_<model_type>'s `causal_conv1d_fn` and `chunk_kimi_delta_attention` (module globals) -> the stand-ins
    (modeling_bailing_hybrid.py calls the same two names)."""
    import importlib  # noqa: PLC0415
    mk = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    prev = mk.causal_conv1d_fn, mk.chunk_kimi_delta_attention
    mk.causal_conv1d_fn, mk.chunk_kimi_delta_attention = _conv_stand_in, _kda_stand_in
    try:
        with glm5_next_text_only() if model_type == "glm5_next" else contextlib.nullcontext():
            yield
    finally:
        mk.causal_conv1d_fn, mk.chunk_kimi_delta_attention = prev


def plans(model_type: str = "kimi_linear") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = dict(next(r for r in rows if r["id"] == f"default:{model_type}")["config"])
    for k, v in SHRINK[model_type].items():        # a sub-config's shrink merged into the default's
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    layers = cfg.get("num_hidden_layers") or cfg["text_config"]["num_hidden_layers"]
    tag = f'{model_type.replace("_", "-")}-{layers}l'
    # modeling_glm5_next.py Glm5NextTextAttention.build_attention_mask_from_topk: SDPA and eager only (the top-k mask)
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "sdpa" if model_type == "glm5_next" else "flash"}
    lora = {**base, "method": "lora", "lora": {**LORA, "targets": TARGETS[model_type]},
            "stack": {"peft_adapter_dtype": "fp32"}}
    return [(f"{tag}-full-s512", base),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"}),
            (f"{tag}-full-s512-eager", {**base, "attention": "eager"})]



def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0] if args else "kimi_linear"
    cases = []
    for cid, plan in plans(model_type):
        if len(args) > 1 and not cid.startswith(args[1]):
            continue
        with kda_kernels(model_type):
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": f"python -m tools.memtrace.kda_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
