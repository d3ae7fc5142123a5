"""What TRL does on a GPU that a CPU run of it does not, for the post-training tracer (tools/memtrace/post.py,
docs/tracer.md §11): peft's adapter casts on fake tensors, and TRL's Triton log-prob kernels (1.14's
`_LogProbEntropyFunction`, 1.15+'s chunked LM head) in place of the CPU fallbacks with their fp32 tile copies."""
from __future__ import annotations

import contextlib

import torch


def stub_triton_for_trl_before_115() -> None:
    """TRL < 1.15 scores with a Triton kernel on a GPU (trl/kernels/logprob_entropy.py `_LogProbEntropyFunction`,
    used by `selective_log_softmax_and_entropy` when `_supports_trl_loss_kernel`: CUDA and Triton), not with the
    per-row torch loop a CPU runs. Its module imports triton at import time, which a CPU build lacks, so before
    TRL is imported a stub triton (`jit` returns the function, `language` answers any name) lets the module load
    (the stub is taken out of sys.modules again right after);
    `cuda_fused_head` then launches its kernels as no-ops. Only for TRL 1.11-1.14 (its own version metadata; 0.x
    has no kernels module), and only without a real triton."""
    import importlib.metadata as md  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import types  # noqa: PLC0415
    try:
        major, minor = (int(x) for x in md.version("trl").split(".")[:2])
    except (md.PackageNotFoundError, ValueError):
        return
    if not (1, 11) <= (major, minor) < (1, 15) or importlib.util.find_spec("triton") is not None \
            or "trl" in sys.modules:
        return

    class _Lang(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return object

    # what TRL imports from, loaded before the stub exists (transformers probes for triton while it loads)
    import accelerate  # noqa: F401, PLC0415
    import datasets  # noqa: F401, PLC0415
    import peft  # noqa: F401, PLC0415
    import transformers.modeling_utils  # noqa: F401, PLC0415
    import transformers.trainer  # noqa: F401, PLC0415
    from transformers import AutoModelForCausalLM, PreTrainedModel  # noqa: F401, PLC0415
    tri = types.ModuleType("triton")
    tri.jit = lambda fn=None, **k: fn if fn is not None else (lambda f: f)
    tri.cdiv = lambda a, b: -(-a // b)
    tri.language = _Lang("triton.language")
    sys.modules["triton"], sys.modules["triton.language"] = tri, tri.language
    try:
        import trl.kernels.logprob_entropy  # noqa: F401, PLC0415  (keeps its own references to the stub)
        import trl.trainer.dpo_trainer  # noqa: F401, PLC0415
        import trl.trainer.grpo_trainer  # noqa: F401, PLC0415
    finally:     # nothing else may take the stub for triton (transformers probes for it)
        del sys.modules["triton"], sys.modules["triton.language"]




@contextlib.contextmanager
def module_to_dtype_in_place():
    """peft's `_move_adapter_to_device_of_base_layer` does `adapter.to(device, dtype=...)` on the new LoRA
    layers (TRL calls get_peft_model inside the trainer). On FakeTensors Module.to takes the swap_tensors path,
    which FakeTensorMode's weakrefs refuse (docs/tracer.md §1a): a cast on the same device is done here by
    replacing each parameter and buffer with its converted tensor (what `_apply` does without swapping)."""
    orig = torch.nn.Module.to

    def to(self, *args, **kwargs):
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None and device.type != "cpu":
            return orig(self, *args, **kwargs)
        if dtype is None:
            return self
        for mod in self.modules():
            for n, p in list(mod._parameters.items()):
                if p is not None and p.is_floating_point() and p.dtype != dtype:
                    mod._parameters[n] = torch.nn.Parameter(p.detach().to(dtype), requires_grad=p.requires_grad)
            for n, b in list(mod._buffers.items()):
                if b is not None and b.is_floating_point() and b.dtype != dtype:
                    mod._buffers[n] = b.to(dtype)
        return self

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = orig


@contextlib.contextmanager
def cuda_fused_head():
    """TRL >= 1.15's chunked log-prob head as it runs on a GPU (trl/kernels/chunked_logprob.py). On a device
    without Triton, `ChunkedLogProbFunction` folds each (4096 tokens x 32768 vocabulary) tile in torch
    (`_forward_tile`, `_backward_tile`: several fp32 copies of the tile) and `_addmm_fp32` upcasts both operands;
    on CUDA the Triton kernels work on the tile in registers and in place (the backward overwrites the tile with
    its gradient) and `torch.addmm(..., out_dtype=torch.float32, out=acc)` accumulates without copies. So the
    kernels are launched as no-ops (their outputs are written in place into buffers that exist already: values do
    not matter on fake tensors) and `_addmm_fp32` writes nothing new; `_use_triton` is True, so the trainer's
    head takes the GPU's compact path (only labelled positions; the masks here are all ones, see __torch_dispatch__
    of PostTracker, so a GRPO row's prompt positions are scored too, as on CPU). TRL < 1.15 has no such head."""
    try:
        import trl.kernels.chunked_logprob as ck  # noqa: PLC0415
        import trl.trainer.utils as tu  # noqa: PLC0415
    except ImportError:
        with _cuda_logprob_kernel_before_115():
            yield
        return

    from types import SimpleNamespace  # noqa: PLC0415
    saved = {m: {k: getattr(m, k, None) for k in ("_use_triton", "_forward_kernel", "_backward_kernel",
                                                  "_addmm_fp32", "triton")} for m in (ck, tu)}
    ck._use_triton = tu._use_triton = lambda device: True
    ck._forward_kernel = ck._backward_kernel = _Launch()
    ck._addmm_fp32 = lambda acc, a, b: None
    if getattr(ck, "triton", None) is None:
        ck.triton = SimpleNamespace(cdiv=lambda a, b: -(-a // b))
    try:
        yield
    finally:
        for m, kv in saved.items():
            for k, v in kv.items():
                if v is None and hasattr(m, k) and k == "triton":
                    delattr(m, k)
                elif v is not None:
                    setattr(m, k, v)


class _Launch:
    """`kernel[grid](*args)`, Triton's launch syntax, as a no-op: the kernels write into buffers that exist."""

    def __getitem__(self, grid):
        return lambda *a, **k: None


@contextlib.contextmanager
def _cuda_logprob_kernel_before_115():
    """TRL < 1.15 on a GPU: `_LogProbEntropyFunction` (saves the logits, its backward writes one
    `empty_like(logits)` gradient) instead of the CPU's per-row log_softmax; see stub_triton_for_trl_before_115."""
    try:
        import trl.kernels.logprob_entropy as le  # noqa: PLC0415
        import trl.trainer.utils as tu  # noqa: PLC0415
    except ImportError:
        yield
        return
    saved = (le._forward_kernel, le._backward_kernel, tu._supports_trl_loss_kernel)
    le._forward_kernel = le._backward_kernel = _Launch()
    tu._supports_trl_loss_kernel = lambda logits, index=None, row_mask=None: True
    try:
        yield
    finally:
        le._forward_kernel, le._backward_kernel, tu._supports_trl_loss_kernel = saved
