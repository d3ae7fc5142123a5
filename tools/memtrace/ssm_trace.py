"""Traced steps of a small Mamba-2 model as it trains on a GPU, for the CI check that the engine keeps what its
mixer saves (memory/ssm_blocks.py; tests/test_ssm_blocks.py).

Which path real training takes: transformers 5.24 Mamba2Mixer.forward (models/mamba2/modeling_mamba2.py; the
same code in bamba, nemotron_h, granitemoehybrid, falcon_h1, zamba2) calls `mamba2_split_conv1d_scan_combined`
whenever `self.training and cache is None`. That name is `use_kernel_func_from_hub_with_fallback(
"mamba_split_conv1d_scan_combined", "mamba_ssm")`: with mamba_ssm installed it is mamba_ssm's fused
conv1d + chunked scan + gated RMSNorm + out_proj, with in_proj's output zxbcdt as its input; without it the stub
returns None and the mixer runs its PyTorch fallback (conv1d, silu, the fp32 chunk scan, MambaRMSNormGated),
which keeps about 10x more (fp32 chunk tensors, the (b, h, c, l, l) decay masks). Training on a GPU means the
kernel: mamba_ssm/ops/triton/ssd_combined.py MambaSplitConv1dScanCombinedFn.forward ends in
``ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, initial_states, seq_idx,
rmsnorm_weight, rstd, outproj_weight, outproj_bias)``: besides parameters, zxbcdt (the in_proj output, kept
whole), out_x (the scan output before the gate, (b, s, nheads, headdim) in x's dtype) and rstd (the gated norm's
fp32 1/rms, one per group and token: layernorm_gated.py _layer_norm_fwd). The norm output and the out_proj
input are recomputed in backward. Under autocast it casts out and outproj_weight to the autocast dtype and saves
the cast weight.

On CPU fake tensors the stub is replaced by `KernelStandIn`, an autograd.Function that saves exactly those
tensors (same shapes and dtypes; FakeTensorMode computes nothing), so the rest of the step (block norms,
in_proj, residual_in_fp32, the head, the optimizer) is traced as transformers runs it.

  python -m tools.memtrace.ssm_trace > tests/data/ssm_trace.json             (about 30 s on 2 cores)
  python -m tools.memtrace.ssm_trace bamba > tests/data/bamba_trace.json
  python -m tools.memtrace.ssm_trace nemotron_h > tests/data/nemotron_h_trace.json
  python -m tools.memtrace.ssm_trace lfm2 > tests/data/lfm2_trace.json
  python -m tools.memtrace.ssm_trace lfm2_moe > tests/data/lfm2_moe_trace.json
  python -m tools.memtrace.ssm_trace lfm3 > tests/data/lfm3_trace.json
  python -m tools.memtrace.ssm_trace falcon_h1 > tests/data/falcon_h1_trace.json
  python -m tools.memtrace.ssm_trace granitemoehybrid > tests/data/granitemoehybrid_trace.json
  python -m tools.memtrace.ssm_trace granitemoehybrid_moe > tests/data/granitemoehybrid_moe_trace.json
  python -m tools.memtrace.ssm_trace nemotron_h_moe > tests/data/nemotron_h_moe_trace.json
  python -m tools.memtrace.ssm_trace nemotron_h_latent > tests/data/nemotron_h_latent_trace.json
  python -m tools.memtrace.ssm_trace mamba > tests/data/mamba_trace.json
  python -m tools.memtrace.ssm_trace falcon_mamba > tests/data/falcon_mamba_trace.json   (mamba_inner_fn's rms variant)
  python -m tools.memtrace.ssm_trace jamba > tests/data/jamba_trace.json
  python -m tools.memtrace.ssm_trace zamba2 > tests/data/zamba2_trace.json
  python -m tools.memtrace.ssm_trace zamba > tests/data/zamba_trace.json
  python -m tools.memtrace.ssm_trace xlstm > tests/data/xlstm_trace.json   (transformers' native mLSTM, bf16-mixed)
  python -m tools.memtrace.ssm_trace recurrent_gemma > tests/data/recurrent_gemma_trace.json   (PyTorch on GPUs too)
  python -m tools.memtrace.ssm_trace rwkv > tests/data/rwkv_trace.json   (WkvStandIn: the kernels-community/rwkv kernel)
  python -m tools.memtrace.ssm_trace qwen3_next > tests/data/qwen3_next_trace.json   (GatedDeltaStandIn: fla's kernel)
  python -m tools.memtrace.ssm_trace qwen3_5_text > tests/data/qwen3_5_trace.json   (the same kernels, split in_proj)
  python -m tools.memtrace.ssm_trace olmo_hybrid > tests/data/olmo_hybrid_trace.json   (the same kernels)
  python -m tools.memtrace.ssm_trace lara_mini > tests/data/lara_mini_trace.json   (the same kernels, MoE layers)
  python -m tools.memtrace.ssm_trace gemma3n_text > tests/data/gemma3n_text_trace.json

Qwen3-Next's Gated DeltaNet (modeling_qwen3_next.py Qwen3NextGatedDeltaNet.forward) calls `causal_conv1d_fn` (the
hub kernel "causal_conv1d_fn", ConvStandIn) and `torch_chunk_gated_delta_rule`, the hub kernel
"chunk_gated_delta_rule" of fla on a GPU: GatedDeltaStandIn keeps what fla's ChunkGatedDeltaRuleFunction keeps.
Qwen3.5's (modeling_qwen3_5.py Qwen3_5GatedDeltaNet.forward) calls the same two, on in_proj_qkv's output.

Jamba's mixer (modeling_jamba.py JambaMambaMixer.forward) calls `causal_conv1d_fn` and `mamba_selective_scan`, the
hub kernels "causal_conv1d_fn" (causal-conv1d) and "selective_scan_fn" (mamba_ssm) on a GPU: ConvStandIn and
ScanStandIn keep what CausalConv1dFn and SelectiveScanFn keep; Zamba's mixer the same, one scan per head. Zamba2's
mixer is Mamba-2's kernel call.

Each case keeps what tools/memtrace/compare.py compares, and the plan.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
# Mamba-2's default config (mamba-codestral shapes: 128 heads of 64, 8 groups, state 128) at h 1024, 2 layers
SHRINK = {"mamba": {"hidden_size": 1024, "num_hidden_layers": 2},   # Mamba's default (state 16, expand 2) at h 1024
          # FalconMamba's default (state 16, time_step_rank 48, weightless B / C / dt RMS norms) at h 1024, expand 2
          "falcon_mamba": {"hidden_size": 1024, "num_hidden_layers": 2, "intermediate_size": 2048},
          "mamba2": {"hidden_size": 1024, "num_hidden_layers": 2, "num_heads": 32, "head_dim": 64},
          # Bamba's default (128 mixer heads of 64, 1 group, state 256, GQA 32/8) at h 1024: 32 mixer heads of 64,
          # 16/4 attention heads of 64, MLP 2816, 4 layers with attention at layer 2
          "bamba": {"hidden_size": 1024, "num_hidden_layers": 4, "attn_layer_indices": [2], "mamba_n_heads": 32,
                    "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2816},
          # Nemotron-H's default (Mamba-2 of 128 heads of 64, 8 groups, state 128; GQA 32/8 of 128; ReLU² MLP) at
          # h 1024: 32 mixer heads, 8/2 heads of 128, MLP 4096, layers M - * - M (the default's MoE layer left out)
          "nemotron_h": {"hidden_size": 1024, "mamba_num_heads": 32, "num_attention_heads": 8,
                         "num_key_value_heads": 2, "intermediate_size": 4096,
                         "layers_block_type": ["mamba", "mlp", "attention", "mlp", "mamba"]},
          # Nemotron-H's default MoE layer (NemotronHMoE: fp32 sigmoid router, non-gated ReLU² experts through
          # grouped_mm, a ReLU² shared expert) in the h 1024 shapes above: 8 experts of 1024, top-2, shared 1024,
          # layers M E * E M (Nemotron-3-Nano's interleave)
          "nemotron_h_moe": {"hidden_size": 1024, "mamba_num_heads": 32, "num_attention_heads": 8,
                             "num_key_value_heads": 2, "intermediate_size": 4096, "n_routed_experts": 8,
                             "moe_intermediate_size": 1024, "moe_shared_expert_intermediate_size": 1024,
                             "num_experts_per_tok": 2,
                             "layers_block_type": ["mamba", "moe", "attention", "moe", "mamba"]},
          # the same with NemotronHMoE's latent projection (moe_latent_size 512: fc1 / fc2_latent_proj around experts
          # of input width 512)
          "nemotron_h_latent": {"hidden_size": 1024, "mamba_num_heads": 32, "num_attention_heads": 8,
                                "num_key_value_heads": 2, "intermediate_size": 4096, "n_routed_experts": 8,
                                "moe_intermediate_size": 1024, "moe_shared_expert_intermediate_size": 1024,
                                "num_experts_per_tok": 2, "moe_latent_size": 512,
                                "layers_block_type": ["mamba", "moe", "attention", "moe", "mamba"]},
          # LFM2's default (h 2560, 32/8 heads, conv_L_cache 3) at h 1024: 16/4 heads of 64, MLP 4096 (-> 2816 by
          # block_auto_adjust_ff_dim), 4 layers conv conv attention conv
          "lfm2": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                   "intermediate_size": 4096, "layer_types": ["conv", "conv", "full_attention", "conv"]},
          # Gemma 3n's text default (h 2048, 8/2 heads of 256, AltUp of 4 streams, LAuReL rank 64, per-layer inputs of
          # 256, activation sparsity 0.95 in the first 10 layers, the last 15 layers reusing K/V) at h 1024: 8/2 heads
          # of 128, MLP 2816, 4 layers sliding full sliding full, layer 0 sparse, the last 2 reusing K/V
          "gemma3n_text": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                           "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": [2816] * 4,
                           "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                                           "full_attention"],
                           "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "num_kv_shared_layers": 2},
          # Lara-Mini's default (h 1024, 16/4 heads of 128, Qwen3.5's Gated DeltaNet of 8 key / 16 value heads of
          # 128, 128 experts of 512 top-4 and an ungated shared expert of 512 in every layer; linear, sliding and full
          # attention layers) with 8 experts, 4 layers linear sliding linear full
          "lara_mini": {"num_hidden_layers": 4, "num_experts": 8,
                        "layer_types": ["linear_attention", "sliding_attention", "linear_attention",
                                        "full_attention"]},
          # LFM3's default (h 2048, 16/4 heads of 128, conv_L_cache 7, sandwich norms, the attention's sigmoid gate,
          # sliding (window 256) and full attention with their own RoPE) at h 1024: 16/4 heads of 64, MLP 2816, 4
          # layers conv conv full_attention sliding_attention
          "lfm3": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                   "head_dim": 64, "intermediate_size": 2816,
                   "layer_types": ["conv", "conv", "full_attention", "sliding_attention"]},
          # OLMo Hybrid's default (h 3840, 30 heads; Gated DeltaNet of 30 key / value heads of 96 / 192, a dedicated
          # g_proj gate, allow_neg_eigval; OLMo 2's post-norm attention layers every 4th) at h 1024: 8 heads of 128,
          # 8 key / value heads of 64 / 128, MLP 2816, 4 layers linear x3 then full
          "olmo_hybrid": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                          "num_key_value_heads": 8, "intermediate_size": 2816, "linear_num_key_heads": 8,
                          "linear_num_value_heads": 8, "linear_key_head_dim": 64, "linear_value_head_dim": 128,
                          "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                          "full_attention"]},
          # LFM2-MoE's default (h 2048, 32/8 heads, 32 experts of 1792 top-4 with the expert bias, 2 dense layers of
          # 7168) at h 1024: 16/4 heads of 64, 8 experts of 1024 top-2, layer 0 dense (MLP 2816), 4 layers conv conv
          # attention conv
          "lfm2_moe": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
                       "num_key_value_heads": 4, "intermediate_size": 2816, "moe_intermediate_size": 1024,
                       "num_experts": 8, "num_experts_per_tok": 2, "num_dense_layers": 1,
                       "layer_types": ["conv", "conv", "full_attention", "conv"]},
          # Falcon-H1's default (mixer of 128 heads of 8 = mamba_d_ssm 1024, 1 group of state 256; GQA 32/8) at h 1024:
          # 16 mixer heads of 64, 8/2 heads of 128, MLP 2816, 3 layers (mamba_rms_norm on in the mixed case)
          "falcon_h1": {"hidden_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
                        "intermediate_size": 2816, "mamba_n_heads": 16, "mamba_d_head": 64},
          # Granite 4's default (mixer 128 heads of 64, 1 group of state 256) without experts (Granite-4.0-H-Micro's
          # layout) at h 1024: 32 mixer heads of 64, 16/4 heads of 64, shared MLP 2048, 4 layers, attention at 2
          "granitemoehybrid": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
                               "num_key_value_heads": 4, "mamba_n_heads": 32, "num_local_experts": 0,
                               "shared_intermediate_size": 2048, "embedding_multiplier": 12.0,
                               "attention_multiplier": 0.015625, "residual_multiplier": 0.22, "logits_scaling": 8.0,
                               "layer_types": ["linear_attention", "linear_attention", "attention",
                                               "linear_attention"]},
          # Granite 4 with experts (Granite-4.0-H-Tiny's layout: GraniteMoeHybridMoE, the softmax-over-top-k router
          # and gate_up experts through grouped_mm, beside the shared MLP) in the shapes above: 8 experts of 1024,
          # top-2
          "granitemoehybrid_moe": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
                                   "num_key_value_heads": 4, "mamba_n_heads": 32, "num_local_experts": 8,
                                   "num_experts_per_tok": 2, "intermediate_size": 1024,
                                   "shared_intermediate_size": 2048, "embedding_multiplier": 12.0,
                                   "attention_multiplier": 0.015625, "residual_multiplier": 0.22,
                                   "logits_scaling": 8.0,
                                   "layer_types": ["linear_attention", "linear_attention", "attention",
                                                   "linear_attention"]},
          # Jamba's default (Mamba of state 16, expand 2, dt rank 256; GQA 32/8; 16 experts top-2 every other layer
          # from 1) at h 1024: 16/4 heads of 64, MLP 2816, dt rank 64, 4 experts, 4 layers with attention at 2
          "jamba": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                    "intermediate_size": 2816, "mamba_dt_rank": 64, "num_experts": 4, "attn_layer_period": 4,
                    "attn_layer_offset": 2},
          # Zamba2's default (Mamba-2 of 8 heads of 640, 1 group of state 64; one shared block of MHA 32 heads over
          # 2h, GELU-gated MLP 4h, its gate_up adapter of rank 128 per hybrid layer) at h 1024: 32 mixer heads of
          # 64, 16 heads of 128 over 2h = 2048, MLP 2816, 4 layers with the shared block called at 1 and 3
          "zamba2": {"hidden_size": 1024, "num_hidden_layers": 4, "n_mamba_heads": 32, "mamba_headdim": 64,
                     "num_attention_heads": 16, "num_key_value_heads": 16, "attention_hidden_size": 2048,
                     "attention_head_dim": 128, "kv_channels": 64, "num_query_groups": 16, "intermediate_size": 2816,
                     "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"],
                     "hybrid_layer_ids": [1, 3]},
          # RecurrentGemma's default (h 2560, lru_width 2560, 10 heads of 256, MLP 7680 halved into gate/up, blocks
          # recurrent recurrent attention) at h 1024: lru_width 1024, 4 query heads of 256 and 1 kv head (the 2B
          # checkpoint's MQA), MLP 3072, 3 layers
          "recurrent_gemma": {"hidden_size": 1024, "lru_width": 1024, "num_attention_heads": 4,
                              "num_key_value_heads": 1, "intermediate_size": 3072, "num_hidden_layers": 3},
          # RWKV's default (h 4096, 32 layers, attention_hidden_size h, FFN 4h) at h 1024, 2 layers
          "rwkv": {"hidden_size": 1024, "num_hidden_layers": 2, "attention_hidden_size": 1024,
                   "intermediate_size": 4096},
          # Qwen3-Next's default (h 2048, 16/2 heads of 256, Gated DeltaNet 16 key / 32 value heads of 128, 512
          # experts) at h 1024: 8/2 heads of 128, 8 key / 16 value heads of 128, 4 layers linear x3 then full,
          # the dense MLP (2816) in every layer (mlp_only_layers; the MoE layers are traced elsewhere)
          "qwen3_next": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                         "num_key_value_heads": 2, "head_dim": 128, "linear_num_key_heads": 8,
                         "linear_num_value_heads": 16, "intermediate_size": 2816, "num_experts": 4,
                         "mlp_only_layers": [0, 1, 2, 3],
                         "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                         "full_attention"]},
          # Qwen3.5's dense text default (h 4096, 16/4 heads of 256, Gated DeltaNet 16 / 32 heads of 128, MLP 12288)
          # at h 1024: the Qwen3-Next shapes above, split projections
          "qwen3_5_text": {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                           "num_key_value_heads": 2, "head_dim": 128, "linear_num_key_heads": 8,
                           "linear_num_value_heads": 16, "intermediate_size": 2816,
                           "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                           "full_attention"]},
          # Zamba's default (Mamba of 2 heads, state 16, expand 2, dt rank 232; one shared block of MHA 16 heads over
          # 2h, GELU-gated MLP 4h) at h 1024: 2 mixer heads of 1024, dt rank 64, 16 heads of 128 over 2h = 2048,
          # MLP 2816, 4 layers with the shared block called at 1 and 3
          "zamba": {"hidden_size": 1024, "attention_hidden_size": 2048, "attention_head_dim": 128,
                    "intermediate_size": 2816, "mamba_dt_rank": 64, "num_hidden_layers": 4,
                    "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]},
          # xLSTM's default (7B: h 4096, 8 heads, qk 0.5 h, v h, FFN 2.667 h) at h 1024: 4 heads, 2 blocks
          "xlstm": {"hidden_size": 1024, "embedding_dim": 1024, "num_hidden_layers": 2, "num_blocks": 2,
                    "num_heads": 4}}
KERNEL_MODULES = ("mamba2", "bamba", "nemotron_h", "granitemoehybrid", "falcon_h1", "zamba2")


class KernelStandIn(torch.autograd.Function):
    """MambaSplitConv1dScanCombinedFn with its forward's allocations and save_for_backward, no arithmetic."""

    @staticmethod
    def forward(ctx, zxbcdt, conv_w, conv_b, dt_bias, A, D, rms_w, out_w, out_b, headdim, ngroups):
        b, s, _ = zxbcdt.shape
        dim = D.shape[0] * headdim
        # _mamba_chunk_scan_combined_fwd: out_x like x (the conv output, zxbcdt's dtype); _layer_norm_fwd: rstd
        # fp32 (ngroups * M,); the normalised, gated output in x's dtype, then F.linear(out, outproj_weight)
        out_x = zxbcdt.new_empty((b, s, D.shape[0], headdim))
        rstd = torch.empty((ngroups * b * s,), dtype=torch.float32, device=zxbcdt.device)
        out = zxbcdt.new_empty((b, s, dim))
        # the tracer runs CUDA's autocast policy on the CPU device (cuda_autocast.py)
        dev = next((d for d in ("cuda", "cpu") if torch.is_autocast_enabled(d)), None)
        if dev is not None:
            dtype = torch.get_autocast_dtype(dev)
            out, out_w = out.to(dtype), out_w.to(dtype)
            out_b = out_b.to(dtype) if out_b is not None else None
        y = torch.nn.functional.linear(out, out_w, out_b)
        ctx.save_for_backward(zxbcdt, conv_w, conv_b, out_x, A, D, dt_bias, rms_w, rstd, out_w, out_b)
        return y

    @staticmethod
    def backward(ctx, dy):
        zxbcdt, conv_w, conv_b, _, A, D, dt_bias, rms_w, _, out_w, out_b = ctx.saved_tensors
        none = lambda t: None if t is None else torch.empty_like(t)  # noqa: E731
        return (torch.empty_like(zxbcdt), none(conv_w), none(conv_b), none(dt_bias), none(A), none(D), none(rms_w),
                none(out_w), none(out_b), None, None)


class ConvStandIn(torch.autograd.Function):
    """causal-conv1d's CausalConv1dFn (causal_conv1d_interface.py): forward keeps x, weight, bias; returns x's shape
    and dtype (no activation in LFM2)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight, bias)
        return x.new_empty(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(weight), None if bias is None else torch.empty_like(bias)


class InnerStandIn(torch.autograd.Function):
    """mamba_ssm's MambaInnerFn (selective_scan_interface.py, checkpoint_lvl 1): its forward's casts, copies,
    allocations and save_for_backward, no arithmetic."""

    @staticmethod
    def forward(ctx, xz, conv_w, conv_b, x_proj_w, dt_proj_w, out_w, out_b, A, D, delta_bias):
        dev = next((d for d in ("cuda", "cpu") if torch.is_autocast_enabled(d)), None)
        if dev is not None:
            dtype = torch.get_autocast_dtype(dev)
            x_proj_w, dt_proj_w, out_w = x_proj_w.to(dtype), dt_proj_w.to(dtype), out_w.to(dtype)
            out_b = out_b.to(dtype) if out_b is not None else None
        if xz.stride(-1) != 1:
            xz = xz.contiguous()
        b, d2, L = xz.shape
        n = A.shape[-1]
        x_dbl = xz.new_empty((b * L, x_proj_w.shape[0]))
        B = xz.new_empty((b, 1, n, L))
        C = xz.new_empty((b, 1, n, L))
        states = torch.empty((b, d2 // 2, -(-L // 2048), 2 * n), dtype=A.dtype, device=xz.device)
        out = xz.new_empty((b, d2 // 2, L))
        out_z = xz.new_empty((b, d2 // 2, L))
        y = torch.nn.functional.linear(out_z.transpose(1, 2), out_w, out_b)
        ctx.save_for_backward(xz, conv_w, conv_b, x_dbl, x_proj_w, dt_proj_w, out_w, A, B, C, D, delta_bias, states,
                              out)
        return y

    @staticmethod
    def backward(ctx, dy):
        xz, conv_w, conv_b, _, x_proj_w, dt_proj_w, out_w, A, _, _, D, delta_bias, _, _ = ctx.saved_tensors
        none = lambda t: None if t is None else torch.empty_like(t)  # noqa: E731
        return (torch.empty_like(xz), none(conv_w), none(conv_b), none(x_proj_w), none(dt_proj_w), none(out_w),
                None, none(A), none(D), none(delta_bias))


class ScanStandIn(torch.autograd.Function):
    """mamba_ssm's SelectiveScanFn (selective_scan_interface.py) with z: its forward's contiguous copies of delta,
    B, C and z (u is the conv output, already contiguous), selective_scan_cuda.fwd's out (like u), the fp32 chunk
    states x (b, d, ceil(L / 2048), 2N) and out_z; ``ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, x,
    out)``, no arithmetic."""

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias):
        u, delta, B, C, z = (t if t.stride(-1) == 1 else t.contiguous() for t in (u, delta, B, C, z))
        b, d, L = u.shape
        x = torch.empty((b, d, -(-L // 2048), 2 * A.shape[-1]), dtype=torch.float32, device=u.device)
        out, out_z = u.new_empty(u.shape), u.new_empty(u.shape)
        ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, x, out)
        return out_z

    @staticmethod
    def backward(ctx, dy):
        u, delta, A, B, C, D, z, delta_bias, _, _ = ctx.saved_tensors
        none = lambda t: None if t is None else torch.empty_like(t)  # noqa: E731
        return tuple(none(t) for t in (u, delta, A, B, C, D, z, delta_bias))


def _scan_stand_in(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, **kwargs):
    return ScanStandIn.apply(hidden_states, dt, A, B, C, D, z, delta_bias)


class WkvStandIn(torch.autograd.Function):
    """RWKV's RwkvLinearAttention (modeling_rwkv.py) over the kernels-community/rwkv CUDA kernel: its forward's
    `-torch.exp(time_decay.float())`, fp32 copies of time_first / key / value under fp16 only, the output like key;
    ``ctx.save_for_backward(time_decay, time_first, key, value, output)`` and `output.to(input_dtype)` (the same
    tensor unless fp16), no arithmetic."""

    @staticmethod
    def forward(ctx, time_decay, time_first, key, value):
        dtype = key.dtype
        time_decay = -torch.exp(time_decay.float().contiguous())
        if key.dtype == torch.float16:
            time_first, key, value = time_first.float(), key.float(), value.float()
        time_first, key, value = time_first.contiguous(), key.contiguous(), value.contiguous()
        output = torch.empty_like(key, memory_format=torch.contiguous_format)
        ctx.save_for_backward(time_decay, time_first, key, value, output)
        return output.to(dtype)

    @staticmethod
    def backward(ctx, g):
        _, time_first, key, value, _ = ctx.saved_tensors
        return (time_first.new_empty(time_first.shape), torch.empty_like(time_first), torch.empty_like(key),
                torch.empty_like(value))


class GatedDeltaStandIn(torch.autograd.Function):
    """fla's ChunkGatedDeltaRuleFunction (fla/ops/gated_delta_rule/chunk.py) with use_qk_l2norm_in_kernel: input_guard
    makes q, k, v, g, beta contiguous; l2norm_fwd returns new q and k and their fp32 rstd (one per row); the
    forward's chunk_local_cumsum g (fp32), solve_tril's A (b, s, Hv, 64) in k's dtype, the w / u / h / v_new / o
    temporaries; ``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, initial_state, cu_seqlens)``,
    returns ``o.to(q.dtype)`` (like v), no arithmetic."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))
        b, s, hv, dv = v.shape
        qn, kn = torch.empty_like(q), torch.empty_like(k)
        q_rstd = torch.empty(q.numel() // q.shape[-1], dtype=torch.float32, device=q.device)
        k_rstd = torch.empty(k.numel() // k.shape[-1], dtype=torch.float32, device=k.device)
        gc = torch.empty(g.shape, dtype=torch.float32, device=g.device)
        A = k.new_empty((b, s, hv, 64))
        w, u = k.new_empty((b, s, hv, k.shape[-1])), torch.empty_like(v)
        h = k.new_empty((b, -(-s // 64), hv, k.shape[-1], dv))
        v_new, o = torch.empty_like(v), torch.empty_like(v)
        del w, u, h, v_new
        ctx.save_for_backward(qn, q_rstd, kn, k_rstd, v, gc, beta, A)
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, _, k, _, v, g, beta, _ = ctx.saved_tensors
        return tuple(torch.empty_like(t) for t in (q, k, v, g, beta))


def _delta_stand_in(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
                    use_qk_l2norm_in_kernel=False, **kwargs):
    return GatedDeltaStandIn.apply(query, key, value, g, beta), None


def _wkv_stand_in(time_decay, time_first, key, value, state=None, return_state=False):
    return WkvStandIn.apply(time_decay, time_first, key, value), None


def _inner_stand_in(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight,
                    out_proj_bias, A, B=None, C=None, D=None, delta_bias=None, delta_softplus=True, **kwargs):
    return InnerStandIn.apply(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight,
                              out_proj_bias, A, D, delta_bias)


def _conv_stand_in(x, weight, bias=None, activation=None, **kwargs):
    return ConvStandIn.apply(x, weight, bias)


def _stand_in(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, chunk_size, initial_states=None,
              dt_limit=(0.0, float("inf")), return_final_states=False, activation="silu", rmsnorm_weight=None,
              rmsnorm_eps=1e-6, outproj_weight=None, outproj_bias=None, headdim=None, ngroups=1,
              norm_before_gate=True, **kwargs):
    return KernelStandIn.apply(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, rmsnorm_weight, outproj_weight,
                               outproj_bias, headdim, ngroups)


@contextlib.contextmanager
def mamba_ssm_kernel():
    """Each modelling module's `mamba2_split_conv1d_scan_combined` (a module global its mixer calls) -> the stand-in."""
    import importlib  # noqa: PLC0415
    mods = [importlib.import_module(f"transformers.models.{m}.modeling_{m}") for m in KERNEL_MODULES]
    prev = [m.mamba2_split_conv1d_scan_combined for m in mods]
    lfm2 = importlib.import_module("transformers.models.lfm2.modeling_lfm2")
    mamba = importlib.import_module("transformers.models.mamba.modeling_mamba")
    # Jamba's mixer (modeling_jamba.py JambaMambaMixer.forward) calls causal_conv1d_fn and mamba_selective_scan
    # and Zamba's (modeling_zamba.py ZambaMambaMixer.forward: one scan per mixer head)
    scans = [importlib.import_module(f"transformers.models.{m}.modeling_{m}") for m in ("jamba", "zamba")]
    # FalconMamba's mixer (modeling_falcon_mamba.py FalconMambaMixer.forward) calls mamba_ssm's mamba_inner_fn with
    # b_rms_weight / c_rms_weight / dt_rms_weight: MambaInnerFn normalises B, C and delta inside its forward
    # (rms_norm_forward, no graph) and saves the normalised, contiguous B and C in the raw ones' place (the same
    # shapes and dtype; delta is recomputed at checkpoint_lvl 1): InnerStandIn's saves
    falcon = importlib.import_module("transformers.models.falcon_mamba.modeling_falcon_mamba")
    prev_conv, prev_inner, prev_falcon = lfm2.causal_conv1d_fn, mamba.mamba_inner_fn, falcon.mamba_inner_fn
    convs = [importlib.import_module(f"transformers.models.{m}.modeling_{m}") for m in ("lfm2_moe", "lfm3")]
    prev_convs = [m.causal_conv1d_fn for m in convs]
    prev_scans = [(m.causal_conv1d_fn, m.mamba_selective_scan) for m in scans]
    rwkv = importlib.import_module("transformers.models.rwkv.modeling_rwkv")
    prev_rwkv = rwkv.rwkv_linear_attention
    for m in mods:
        m.mamba2_split_conv1d_scan_combined = _stand_in
    lfm2.causal_conv1d_fn, mamba.mamba_inner_fn = _conv_stand_in, _inner_stand_in
    falcon.mamba_inner_fn = _inner_stand_in
    for m in convs:
        m.causal_conv1d_fn = _conv_stand_in
    for m in scans:
        m.causal_conv1d_fn, m.mamba_selective_scan = _conv_stand_in, _scan_stand_in
    rwkv.rwkv_linear_attention = _wkv_stand_in
    # Qwen3-Next's Gated DeltaNet: the causal-conv1d kernel (silu inside it) and fla's chunk rule
    deltas = [importlib.import_module(f"transformers.models.{m}.modeling_{m}")
              for m in ("qwen3_next", "qwen3_5", "olmo_hybrid", "lara_mini")]
    prev_deltas = [(m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule) for m in deltas]
    for m in deltas:
        m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule = _conv_stand_in, _delta_stand_in
    try:
        yield
    finally:
        for m, p in zip(mods, prev):
            m.mamba2_split_conv1d_scan_combined = p
        lfm2.causal_conv1d_fn, mamba.mamba_inner_fn = prev_conv, prev_inner
        falcon.mamba_inner_fn = prev_falcon
        for m, conv in zip(convs, prev_convs):
            m.causal_conv1d_fn = conv
        for m, (conv, scan) in zip(scans, prev_scans):
            m.causal_conv1d_fn, m.mamba_selective_scan = conv, scan
        rwkv.rwkv_linear_attention = prev_rwkv
        for m, (conv, delta) in zip(deltas, prev_deltas):
            m.causal_conv1d_fn, m.torch_chunk_gated_delta_rule = conv, delta


LORA = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": ["in_proj"]}  # PEFT refuses out_proj, conv1d on Mamba


def plans(model_type: str = "mamba2") -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    row = {"nemotron_h_moe": "nemotron_h", "nemotron_h_latent": "nemotron_h",
           "granitemoehybrid_moe": "granitemoehybrid"}.get(model_type, model_type)
    cfg = next(r for r in rows if r["id"] == f"default:{row}")["config"] | SHRINK[model_type]
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": "flash"}
    if model_type in ("nemotron_h", "nemotron_h_moe", "nemotron_h_latent", "granitemoehybrid_moe", "bamba", "lfm2",
                      "lfm2_moe", "lfm3", "falcon_h1", "granitemoehybrid", "olmo_hybrid", "lara_mini", "gemma3n_text",
                      "jamba", "zamba2", "recurrent_gemma", "rwkv", "zamba", "qwen3_next", "qwen3_5_text"):
        # the mixer's in_proj and the attention's projections (and Nemotron-H's ReLU² MLP) under LoRA
        targets = {"nemotron_h": ["in_proj", "q_proj", "v_proj", "up_proj", "down_proj"],
                   "nemotron_h_moe": ["in_proj", "q_proj", "v_proj", "up_proj", "down_proj"],
                   "nemotron_h_latent": ["in_proj", "q_proj", "v_proj", "up_proj", "down_proj"],
                   "granitemoehybrid_moe": ["in_proj", "q_proj", "v_proj", "input_linear", "output_linear"],
                   "lfm2": ["in_proj", "out_proj", "q_proj", "v_proj", "w1", "w2"],
                   "lfm2_moe": ["in_proj", "out_proj", "q_proj", "v_proj", "w1", "w2"],
                   "lfm3": ["in_proj", "out_proj", "q_proj", "v_proj", "w1", "w2"],
                   "granitemoehybrid": ["in_proj", "q_proj", "v_proj", "input_linear", "output_linear"],
                   "recurrent_gemma": ["linear_x", "linear_y", "linear_out", "q_proj", "v_proj"],
                   "rwkv": ["key", "value", "receptance", "output"],
                   "qwen3_next": ["in_proj_qkvz", "in_proj_ba", "out_proj", "q_proj", "k_proj", "v_proj",
                                  "o_proj"],
                   "olmo_hybrid": ["q_proj", "k_proj", "v_proj", "g_proj", "o_proj"],
                   "gemma3n_text": ["q_proj", "k_proj", "v_proj", "o_proj"],
                   "lara_mini": ["in_proj_qkv", "in_proj_z", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj"],
                   "qwen3_5_text": ["in_proj_qkv", "in_proj_z", "out_proj", "q_proj", "k_proj", "v_proj",
                                    "o_proj"]}.get(
            model_type, ["in_proj", "q_proj", "k_proj", "v_proj", "o_proj"])
        name = f"{model_type.replace('_', '-')}-{cfg.get('num_hidden_layers') or len(cfg['layers_block_type'])}l"
        lora = {**base, "precision": "bf16-mixed", "method": "lora", "lora": {**LORA, "targets": targets}}
        extra = [(f"{name}-lora-mixed-s512-ckpt", {**lora, "activation_checkpointing": "full"})] \
            if model_type == "gemma3n_text" else []       # PEFT's input grads make the AltUp projections train
        return [(f"{name}-full-s512", base),
                (f"{name}-mixed-b2-s512", {**base, "precision": "bf16-mixed", "micro_batch_size": 2}
                 | ({"model": cfg | {"mamba_rms_norm": True}} if model_type == "falcon_h1" else {})),
                (f"{name}-full-s1024-ckpt", {**base, "seq_len": 1024, "activation_checkpointing": "full"}),
                (f"{name}-lora-mixed-s512", lora)] + extra
    if model_type == "xlstm":
        # bf16-mixed only: in 16-bit weights without autocast transformers' native chunkwise mLSTM fails
        # (modeling_xlstm.py mlstm_chunkwise_recurrent_fw_C: fp32 gate x bf16 key, then `@` the bf16 value)
        mixed = {**base, "precision": "bf16-mixed"}
        return [("xlstm-2l-mixed-s512", mixed),
                ("xlstm-2l-mixed-b2-s512", {**mixed, "micro_batch_size": 2}),
                ("xlstm-2l-mixed-s1024-ckpt", {**mixed, "seq_len": 1024, "activation_checkpointing": "full"}),
                ("xlstm-2l-lora-mixed-s512", {**mixed, "method": "lora",
                                              "lora": {**LORA, "targets": ["q", "k", "v", "out_proj"]}})]
    if model_type in ("mamba", "falcon_mamba"):
        name = model_type.replace("_", "-")
        return [(f"{name}-2l-full-s512", base),
                (f"{name}-2l-mixed-b2-s2560", {**base, "precision": "bf16-mixed", "micro_batch_size": 2,
                                               "seq_len": 2560}),
                (f"{name}-2l-full-s1024-ckpt", {**base, "seq_len": 1024, "activation_checkpointing": "full"}),
                (f"{name}-2l-lora-mixed-s512", {**base, "precision": "bf16-mixed", "method": "lora",
                                                "lora": {**LORA, "targets": ["in_proj", "x_proj", "dt_proj"]}})]
    return [("mamba2-2l-full-s512", base),
            ("mamba2-2l-full-b2-s1024", {**base, "micro_batch_size": 2, "seq_len": 1024}),
            ("mamba2-2l-mixed-s512", {**base, "precision": "bf16-mixed"}),
            ("mamba2-4l-full-s1024-ckpt", {**base, "model": cfg | {"num_hidden_layers": 4}, "seq_len": 1024,
                                          "activation_checkpointing": "full"}),
            ("mamba2-2l-lora-mixed-s512", {**base, "precision": "bf16-mixed", "method": "lora", "lora": LORA})]


def main(argv: list[str] | None = None) -> int:
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0] if args else "mamba2"
    cases = []
    for cid, plan in plans(model_type):
        with mamba_ssm_kernel():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    gen = "python -m tools.memtrace.ssm_trace" + (f" {model_type}" if args else "")
    json.dump({"generator": gen, "transformers": transformers.__version__,
               "torch": torch.__version__.split("+")[0], "cases": cases}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
