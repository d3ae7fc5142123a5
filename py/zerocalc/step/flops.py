"""FLOPs of one training token: the matmuls of the model, causal attention, adapters, recompute.

Conventions (what is counted):
- a matmul of an (m x k) input with a (k x n) weight costs 2·m·k·n FLOPs (one multiply-add = 2 FLOPs);
- forward = 2·P FLOPs per token, P the weights a token multiplies (block linears, the active experts of an
  MoE layer, the lm_head projection; embedding lookups, norms and biases cost no matmul FLOPs) -
  Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1 (C_forward ≈ 2N);
- backward = 4·P for full fine-tuning (activation gradient 2·P + weight gradient 2·P; Kaplan §2.1,
  C ≈ 6N per token); with LoRA/QLoRA the frozen base needs no weight gradient, only the activation
  gradient: 2·P, plus the adapters' own 2·r·(d_in+d_out) forward and 4·r·(d_in+d_out) backward
  (Hu et al. 2021, LoRA §4: "we do not need to calculate the gradients ... for most parameters");
- attention scores and values: 2 matmuls of 2·s·(H·d_head) per token and layer, the full s×s square
  (PaLM, Chowdhery et al. 2022, App. B: 6N + 12·L·H·Q·T per token for training), backward = 2 x forward.
  Causal kernels skip the masked half, but the published utilisations this model's efficiencies come
  from (torchtitan's and llm-foundry's MFU) count the full square, so the time uses the same accounting;
  ``attention_forward_flops(..., causal_skip=True)`` gives the halved count for reference;
- recompute: full activation checkpointing re-runs every decoder layer's forward once in backward
  (HF `gradient_checkpointing`; Korthikanti et al. 2022 §4: +1 forward, HFU vs MFU), selective
  (Megatron's) re-runs only the attention core (Korthikanti et al. 2022 §5), torchtitan's selective-op
  (`torchtitan/.../activation_checkpoint.py`, every second matmul's output recomputed) half the block matmuls.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flops:
    """FLOPs per token of one micro-step, by part. ``model`` excludes recompute (MFU's numerator)."""
    matmul_params: int          # P: weights a token multiplies (active experts only)
    adapter_params: int         # LoRA adapter weights a token multiplies
    forward: float
    backward: float
    recompute: float
    attention_forward: float    # included in forward

    @property
    def model(self) -> float:
        return self.forward + self.backward

    @property
    def hardware(self) -> float:
        return self.forward + self.backward + self.recompute


def block_matmul_params(arch) -> tuple[int, int]:
    """(decoder-block weights a token multiplies, lm_head weights). MoE: routed experts count only
    ``experts_per_token`` of their ``num_experts`` (a token visits top-k experts)."""
    moe = arch.moe
    dense_layers = moe.dense_layers if moe else arch.num_layers

    def per_block(linears) -> int:
        total = 0
        for lin in linears:
            count = lin.count
            if count > 1 and moe:
                count = moe.experts_per_token
            total += lin.d_in * lin.d_out * count
        return total

    blocks = dense_layers * per_block(arch.dense_block_linears or arch.block_linears)
    blocks += (arch.num_layers - dense_layers) * per_block(arch.block_linears)
    head = arch.vocab_size * arch.hidden_size if arch.causal_lm else 0
    return blocks, head


def adapter_matmul_params(arch, plan) -> int:
    """LoRA weights a token multiplies: r·(d_in + d_out) per targeted linear of every block (PEFT
    `LoraLayer`: x·Aᵀ·Bᵀ), plus lm_head when targeted."""
    if plan.method == "full":
        return 0
    r, targets = plan.lora.rank, plan.lora.targets
    moe = arch.moe
    dense_layers = moe.dense_layers if moe else arch.num_layers

    def per_block(linears) -> int:
        return sum(r * (lin.d_in + lin.d_out) for lin in linears if lin.name in targets and lin.count == 1)

    total = dense_layers * per_block(arch.dense_block_linears or arch.block_linears)
    total += (arch.num_layers - dense_layers) * per_block(arch.block_linears)
    if "lm_head" in targets and arch.causal_lm:
        total += r * (arch.hidden_size + arch.vocab_size)
    return total


def attention_forward_flops(arch, seq_len: int, causal_skip: bool) -> float:
    """Scores (Q·Kᵀ) and weighted values (P·V) of one token over all layers: 2 matmuls x 2·s·(H·d_head)
    FLOPs, halved when the kernel skips the masked upper triangle (PaLM App. B, causal)."""
    width = arch.num_heads * arch.head_dim
    full = 2 * 2 * seq_len * width * arch.num_layers
    return full / 2 if causal_skip else full


def flops_per_token(arch, plan) -> Flops:
    """FLOPs per token of one micro-step of ``plan`` (see the module docstring for every convention)."""
    blocks, head = block_matmul_params(arch)
    p = blocks + head
    adapters = adapter_matmul_params(arch, plan)
    attn = attention_forward_flops(arch, plan.seq_len, causal_skip=False)
    forward = 2.0 * p + attn + 2.0 * adapters
    if plan.method == "full":
        backward = 4.0 * p + 2 * attn
    else:
        backward = 2.0 * p + 2 * attn + 4.0 * adapters
    if plan.activation_checkpointing == "full":
        recompute = 2.0 * blocks + attn + 2.0 * adapters
    elif plan.activation_checkpointing == "selective":
        recompute = attn
    elif plan.activation_checkpointing == "selective-op":
        # torchtitan's op-level policy (Extension 1, once the plan has it): matmul outputs are saved except
        # every second one, so about half the block matmuls run again; the attention outputs are saved
        recompute = 1.0 * blocks
    else:
        recompute = 0.0
    return Flops(p, adapters, forward, backward, recompute, attn)


__all__ = ["Flops", "flops_per_token", "block_matmul_params", "adapter_matmul_params", "attention_forward_flops"]
