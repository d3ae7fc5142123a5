"""memtrace on tiny configs: storage counts checked against hand-computed bytes.

Tiny Llama: h=64, 2 layers, a=4 heads, n_kv=2, hd=16 (kv=32), I=128, V=512, untied; b=2, s=32.
Parameter count, by hand:
  embed V*h = 512*64 = 32768; lm_head 32768; final norm 64
  per layer: q 64*64=4096, k 64*32=2048, v 2048, o 4096, gate/up/down 3*64*128=24576, 2 norms 128
             = 36992;  x2 layers = 73984
  total 32768 + 73984 + 64 + 32768 = 139584 params -> 279168 bytes in bf16
"""
from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tools.memtrace.trace import trace  # noqa: E402

pytestmark = pytest.mark.tools

B, S, H, A, NKV, HD, I, V, L = 2, 32, 64, 4, 2, 16, 128, 512, 2
KV = NKV * HD
TINY = {"model_type": "llama", "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": A,
        "num_key_value_heads": NKV, "head_dim": HD, "intermediate_size": I, "vocab_size": V,
        "tie_word_embeddings": False}
PARAMS = 139584
N_PARAM_TENSORS = 1 + 9 * L + 1 + 1          # embed, 9 per layer, final norm, lm_head = 21


def plan(**kw):
    p = {"model": dict(TINY), "micro_batch_size": B, "seq_len": S, "precision": "bf16-pure",
         "attention": "flash", "method": "full", "gradient_accumulation_steps": 1, "optimizer": "adamw",
         "activation_checkpointing": "none"}
    p.update(kw)
    return p


@pytest.fixture(scope="module")
def full_pure():
    return trace(plan())


def test_weights_and_adam_states(full_pure):
    c = full_pure["peak"]["components"]
    assert c["weights"] == 2 * PARAMS == 279168
    # fused AdamW: exp_avg + exp_avg_sq in the param dtype (2 x 2 B) + one fp32 `step` per param tensor
    assert c["optimizer_states"] == 2 * 279168 + 4 * N_PARAM_TENSORS == 558420
    assert c["buffers"] == 2 * 4 * HD // 2       # RoPE inv_freq + original_inv_freq: hd/2 fp32 each
    assert c["gradients"] == 0                   # peak at loss backward: no grad accumulated yet


def test_peak_is_loss_backward_with_12sbV_logits(full_pure):
    assert full_pure["peak_phase"] == "backward"
    assert full_pure["peak_op"] == "_log_softmax_backward_data"
    # saved fp32 log-softmax + nll_loss grad + log_softmax backward output: 3 x 4*b*s*V
    assert full_pure["peak"]["components"]["logits"] == 12 * B * S * V == 393216


def test_saved_activations_hf_exact(full_pure):
    bs = B * S
    per_layer = (20 * bs * H        # 2 norms x (fp32 in 4 + bf16 normalised 2 + output 2), q 2, attn out 2
                 + 4 * bs * KV      # k and v (kv heads) for flash
                 + 8 * bs * I       # gate out, up out, silu, silu*up
                 + 4 * A * bs       # fp32 logsumexp (b, a, s)
                 + 8 * bs)          # two fp32 rsqrt (b, s, 1)
    assert per_layer == 157184
    outside = (4 * S * HD           # RoPE cos + sin, bf16 (1, s, hd) each
               + 8 * bs * H + 4 * bs  # final norm (as a layer norm) + lm_head input
               + 4 * bs * V         # fp32 log_softmax output
               + 8 * bs)            # int64 shifted labels copy
    expected = L * per_layer + outside
    got = full_pure["saved_activations_forward_end"]
    assert abs(got - expected) <= 16, (got, expected)   # + loss scalar / nll total_weight (4 B each)


def test_tied_embedding_counted_once():
    r = trace(plan(model={**TINY, "tie_word_embeddings": True}))
    assert r["peak"]["components"]["weights"] == 2 * (PARAMS - V * H)


def test_grad_accumulation_keeps_grads_through_forward():
    r = trace(plan(gradient_accumulation_steps=4))
    assert r["phase_peaks"]["forward"]["components"]["gradients"] == 2 * PARAMS


def test_sgd_has_no_state_and_adamw8bit_blockwise():
    assert trace(plan(optimizer="sgd"))["peak"]["components"]["optimizer_states"] == 0
    # bnb 8-bit: params >= 4096 elements: 2 uint8 states + 2 fp32 absmax per 256; smaller: 2 fp32 states
    def st(n):
        return 2 * n + 2 * 4 * math.ceil(n / 256) if n >= 4096 else 8 * n
    sizes = [V * H, V * H, H] + L * [H * H, H * KV, H * KV, H * H, H * I, H * I, I * H, H, H]
    assert trace(plan(optimizer="adamw-8bit"))["peak"]["components"]["optimizer_states"] == sum(map(st, sizes))


def test_qlora_storage_and_lora_adapters():
    r = trace(plan(method="qlora", precision="bf16-mixed",
                   lora={"rank": 4, "alpha": 8, "dropout": 0.0},
                   quantization={"type": "nf4", "double_quant": True, "compute_dtype": "bf16"}))
    c = r["peak"]["components"]

    def q4(n):  # packed + uint8 absmax/64 + fp32 absmax2 per 256 blocks + fp32 offset + 256 fp32 code2 + 16 fp32 code
        return n // 2 + n // 64 + 4 * math.ceil(n / 64 / 256) + 4 + 1024 + 64
    linears = [H * H, H * KV, H * KV, H * H, H * I, H * I, I * H]
    unquantized = 2 * (V * H + 2 * H * L + H + V * H)          # bf16 embed, norms, final norm, lm_head
    assert c["weights"] == unquantized + L * sum(map(q4, linears)) == 185072
    ins_outs = [(H, H), (H, KV), (H, KV), (H, H), (H, I), (H, I), (I, H)]
    adapters = L * sum(4 * (i + o) * 4 for i, o in ins_outs)   # r=4, fp32
    assert c["lora_adapters"] == adapters == 32768


def test_gc_saves_only_layer_inputs():
    r = trace(plan(activation_checkpointing="full"))
    bs = B * S
    # per layer only the bf16 layer input; outside as in the no-GC case, plus the int64 (1, s)
    # position_ids the checkpointed layers keep as inputs for their recompute (8*s)
    expected = L * 2 * bs * H + 4 * S * HD + 8 * bs * H + 4 * bs + 4 * bs * V + 8 * bs + 8 * S
    assert abs(r["saved_activations_forward_end"] - expected) <= 16


def test_cpu_autocast_follows_cuda_fp32_list():
    """aten autocast_mode.cpp (CUDA): pow/layer_norm run in fp32, softmax/sum without dtype give fp32;
    linear stays bf16. Outside the policy context, CPU autocast leaves pow in bf16."""
    import torch  # noqa: PLC0415

    from tools.memtrace.cuda_autocast import cuda_autocast_policy  # noqa: PLC0415
    x = torch.ones(4, 8, dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(8, 8, dtype=torch.float32)
    with cuda_autocast_policy(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.pow(x, 3.0).dtype == torch.float32
        assert torch.softmax(x, -1).dtype == torch.float32
        assert x.sum().dtype == torch.float32
        assert torch.nn.functional.layer_norm(x, (8,)).dtype == torch.float32
        assert torch.nn.functional.linear(x, w).dtype == torch.bfloat16
        torch.pow(x, 3.0).sum().backward()       # the cast is recorded by autograd
    assert x.grad is not None and x.grad.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.pow(x, 3.0).dtype == torch.bfloat16
