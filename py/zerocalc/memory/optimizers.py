"""Optimizer state bytes for a set of trainable tensors.

- AdamW (torch.optim.AdamW, DeepSpeed FusedAdam/CPUAdam): exp_avg + exp_avg_sq in the state dtype
  (fp32 next to fp32 master weights; the parameter dtype when there is none): 2 x state bytes.
- bitsandbytes 8-bit Adam (`Optimizer2State` with `optim_bits=8`, block-wise): two uint8 states plus
  one fp32 absmax per 256-element block for each (bitsandbytes/optim/optimizer.py init_state);
  tensors under `min_8bit_size` = 4096 elements keep 32-bit states.
- Paged variants: the same states in CUDA unified memory (`paged=True`), outside PyTorch's caching
  allocator: invisible to max_memory_allocated/reserved, visible to nvidia-smi while resident.
- Adafactor (transformers.optimization.Adafactor, defaults beta1=None, factored): a row and a column
  second-moment vector per matrix (shape[:-1] and shape[:-2]+shape[-1:]), the full second moment for
  vectors; state in the gradient dtype.
- SGD: HF Trainer's `optim="sgd"` builds torch.optim.SGD with momentum 0, which keeps no state
  (traced; torchtune's configs too). Lion: one exp_avg.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..units import ceil_div

BNB_BLOCK = 256
BNB_MIN_8BIT_SIZE = 4096


@dataclass(frozen=True)
class OptimizerStates:
    allocator_bytes: int    # inside PyTorch's caching allocator
    paged_bytes: int        # CUDA unified memory (bitsandbytes paged optimizers)

    @property
    def total(self) -> int:
        return self.allocator_bytes + self.paged_bytes


def _numel(shape: tuple, numel: int) -> int:
    return numel if not shape else _prod(shape)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def adam8bit_bytes(numel: int) -> int:
    """Two uint8 states + an fp32 absmax per 256-block each; small tensors stay 32-bit."""
    if numel < BNB_MIN_8BIT_SIZE:
        return 2 * 4 * numel
    blocks = ceil_div(numel, BNB_BLOCK)
    return 2 * (numel + 4 * blocks)


def adafactor_bytes(shape: tuple, numel: int, state_bytes: int) -> int:
    if len(shape) >= 2:
        rows = _prod(shape[:-1])
        cols = _prod(shape[:-2]) * shape[-1]
        return state_bytes * (rows + cols)
    return state_bytes * numel


def states_per_element(optimizer: str, state_bytes: int) -> float:
    """Average bytes of state per trainable element for large tensors (for sharded formulas)."""
    return {"adamw": 2 * state_bytes, "paged-adamw-32bit": 8, "adamw-8bit": 2 * (1 + 4 / BNB_BLOCK),
            "paged-adamw-8bit": 2 * (1 + 4 / BNB_BLOCK), "sgd": 0, "lion": state_bytes,
            "adafactor": 0.0}[optimizer]


def optimizer_states(optimizer: str, tensors: Iterable[tuple[tuple, int]], state_bytes: int) -> OptimizerStates:
    """tensors: (shape, numel) of every trainable tensor on this rank."""
    total = 0
    for shape, numel in tensors:
        if optimizer == "adamw":
            total += 2 * state_bytes * numel
        elif optimizer == "paged-adamw-32bit":
            total += 8 * numel
        elif optimizer in ("adamw-8bit", "paged-adamw-8bit"):
            total += adam8bit_bytes(numel)
        elif optimizer == "adafactor":
            total += adafactor_bytes(shape, numel, state_bytes)
        elif optimizer == "lion":
            total += state_bytes * numel
        # sgd: no state
    if is_paged(optimizer):
        return OptimizerStates(0, total)
    return OptimizerStates(total, 0)


def is_paged(optimizer: str) -> bool:
    """bitsandbytes paged optimizers keep their states in CUDA managed memory, outside the allocator."""
    return optimizer.startswith("paged")


def sharded_states(optimizer: str, numel: int, state_bytes: int) -> int:
    """States of a flat partition of `numel` elements (ZeRO/FSDP shards one flat fp32 buffer)."""
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return adam8bit_bytes(numel)
    if optimizer == "adafactor":
        return state_bytes * numel  # a flat 1-D partition cannot be factored
    if optimizer == "paged-adamw-32bit":
        return 8 * numel
    return int(states_per_element(optimizer, state_bytes)) * numel
