"""The plan's optimizer, as HF Trainer builds it (transformers TrainingArguments.optim), on FakeTensors.

adamw             torch.optim.AdamW(fused=True) = HF `adamw_torch_fused`, the Trainer default for
                  torch >= 2.8. States exp_avg/exp_avg_sq in the param dtype; the fused kernel makes
                  no temporaries. stack.optimizer_impl foreach / single-tensor: AdamW(foreach=True) /
                  AdamW(foreach=False, fused=False), traced as torch runs them (adamw_impl).
sgd               torch.optim.SGD(lr) = HF `sgd` (momentum 0): no state.
adafactor         transformers.optimization.Adafactor(scale_parameter=False, relative_step=False)
                  = HF `adafactor`: factored fp32 row/col second moments; fp32 working copies in step.
adamw-8bit, paged-adamw-8bit   EMULATED bnb AdamW8bit (blockwise): two uint8 states of numel bytes
                  + fp32 absmax per 256-element block each; params under 4096 elements keep two fp32
                  states (bnb min_8bit_size). Fused CUDA kernel: no temporaries.
paged-adamw-32bit EMULATED bnb PagedAdamW32bit: two fp32 states (bnb 32-bit optimizers keep fp32
                  states whatever the param dtype). Fused kernel: no temporaries.
lion              EMULATED bnb Lion 32-bit (HF `lion_32bit`): one fp32 state. No temporaries.
Paged states live in CUDA managed memory (cudaMallocManaged), which torch.cuda.max_memory_allocated
does not see; the tracer still counts them as optimizer states and labels them "paged".
"""
from __future__ import annotations

import math

import torch

BNB_BLOCK = 256          # bnb blockwise 8-bit optimizer block size
BNB_MIN_8BIT = 4096      # bnb Optimizer8bit min_8bit_size


class EmulatedBnbOptimizer(torch.optim.Optimizer):
    """Allocates bnb-like states on the first step; the step itself is a fused in-place kernel."""

    def __init__(self, params, n_states: int, bits: int, paged: bool):
        super().__init__(params, {"lr": 1e-5})
        self.n_states, self.bits, self.paged = n_states, bits, paged

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    eight = self.bits == 8 and p.numel() >= BNB_MIN_8BIT
                    for i in range(1, self.n_states + 1):
                        if eight:
                            st[f"state{i}"] = torch.empty(p.shape, dtype=torch.uint8, device=p.device)
                            st[f"absmax{i}"] = torch.empty(math.ceil(p.numel() / BNB_BLOCK), dtype=torch.float32,
                                                           device=p.device)
                        else:
                            st[f"state{i}"] = torch.empty(p.shape, dtype=torch.float32, device=p.device)
                st["step"] += 1
        return None


def adamw_impl(impl: str, trainer: str = "hf-trainer", transformers_era: str = "5") -> str:
    """stack.optimizer_impl -> "fused" | "foreach" | "single-tensor" ("auto" = the trainer's default).

    hf-trainer: `adamw_torch_fused` is TrainingArguments' default optim in transformers 5 (torch >= 2.8);
    in the 4.x eras the default `adamw_torch` builds torch.optim.AdamW without flags, which on CUDA
    picks foreach (torch/optim/optimizer.py _default_to_fused_or_foreach). custom-loop: torch's own
    default on CUDA, foreach.
    """
    if impl != "auto":
        return impl
    if trainer == "hf-trainer" and transformers_era == "5":
        return "fused"
    if trainer == "litgpt":
        return "foreach"     # litgpt 0.5.13 default optimizer "AdamW": torch.optim.AdamW without flags
    if trainer == "torchtune":
        return "fused"       # torchtune 0.6.1 recipes/configs: optimizer torch.optim.AdamW, fused: True
    return "foreach"


def make_optimizer(name: str, params, impl: str = "fused"):
    params = [p for p in params if p.requires_grad]
    if name == "adamw":
        if impl == "foreach":
            return torch.optim.AdamW(params, lr=1e-5, foreach=True)
        if impl == "single-tensor":
            return torch.optim.AdamW(params, lr=1e-5, foreach=False, fused=False)
        return torch.optim.AdamW(params, lr=1e-5, fused=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-5)
    if name == "adafactor":
        from transformers.optimization import Adafactor  # noqa: PLC0415
        return Adafactor(params, lr=1e-5, scale_parameter=False, relative_step=False)
    if name in ("adamw-8bit", "paged-adamw-8bit"):
        return EmulatedBnbOptimizer(params, 2, 8, paged=name.startswith("paged"))
    if name == "paged-adamw-32bit":
        return EmulatedBnbOptimizer(params, 2, 32, paged=True)
    if name == "lion":
        return EmulatedBnbOptimizer(params, 1, 32, paged=False)
    raise ValueError(f"optimizer {name!r} not supported by the tracer")


def state_tensors(opt) -> list:
    out = []
    for st in opt.state.values():
        out.extend(v for v in st.values() if isinstance(v, torch.Tensor))
    return out


def traced_step(opt, tr):
    """Wrap `opt.step` so the tracker is in its step phase while it runs and the states it creates (lazily, in the
    first step) are labelled optimizer states. Returns opt."""
    step = opt.step

    def wrapped(*a, **k):
        tr.set_phase("step")
        out = step(*a, **k)
        for t in state_tensors(opt):
            tr.relabel(t, "opt", "")
        return out
    opt.step = wrapped
    return opt


def label_grads(params, tr) -> None:
    """Each gradient is labelled a gradient once AccumulateGrad has stored it (the tracker's categories)."""
    for p in params:
        p.register_post_accumulate_grad_hook(lambda p: tr.relabel(p.grad, "grad", ""))


def warm_up(opt, params, tr) -> None:
    """One optimizer step on zero gradients inside the tracker, so the optimizer states exist (a steady-state
    step), then label them optimizer states (paged ones apart)."""
    tr.set_phase("warmup")
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    for t in state_tensors(opt):
        tr.relabel(t, "opt", "paged" if getattr(opt, "paged", False) else "")
