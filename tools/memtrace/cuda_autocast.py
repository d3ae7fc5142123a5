"""Make CPU autocast follow CUDA autocast's fp32 op lists while tracing.

The tracer runs CPU autocast (FakeTensors must stay on CPU, docs/tracer.md §1d). CPU and CUDA autocast agree on
the ops that go to bf16 (linear, matmul, bmm, addmm, baddbmm, scaled_dot_product_attention) but not on the
ops CUDA forces to fp32: on CUDA `pow`, `rsqrt`, `exp`, `log`, `layer_norm`, ... run in fp32 (their bf16
inputs are cast up) and `softmax`/`log_softmax`/`sum`/`cumsum` without an explicit dtype produce fp32
(aten/src/ATen/autocast_mode.cpp: KERNEL_CUDA(..., fp32) and fp32_set_opt_dtype). CPU autocast leaves
them in bf16, which changes what is saved (e.g. GPT-2's gelu_new pow/tanh intermediates and its eager
softmax become fp32 on CUDA). We register Python kernels for these ops at the AutocastCPU dispatch key that
apply CUDA's policy; the casts run below the key, so autograd records them as real autocast's casts are.
"""
from __future__ import annotations

import contextlib

import torch
from torch._C import DispatchKey, DispatchKeySet

_LOW = (torch.bfloat16, torch.float16)
_EXCL = DispatchKeySet(DispatchKey.AutocastCPU)

FP32 = ("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "rsqrt", "exp", "expm1", "log", "log1p",
        "log2", "log10", "reciprocal", "layer_norm", "group_norm", "logsumexp", "softplus", "erfinv",
        "acos", "asin", "cosh", "sinh", "tan")
FP32_SET_OPT_DTYPE = ("softmax.int", "log_softmax.int", "sum", "sum.dim_IntList", "cumsum", "prod")


def _op(name):
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _up(x):
    if isinstance(x, torch.Tensor) and x.dtype in _LOW:
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(_up(v) for v in x)
    return x


def _fp32(op):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCL):
            return op(*_up(args), **{k: _up(v) for k, v in kwargs.items()})
    return kernel


def _set_opt_dtype(op, dtype_pos):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCL):
            given = (len(args) > dtype_pos and args[dtype_pos] is not None) or kwargs.get("dtype") is not None
            if not given and isinstance(args[0], torch.Tensor) and args[0].dtype in _LOW:
                args = args[:dtype_pos]
                kwargs = {**kwargs, "dtype": torch.float32}
            return op(*args, **kwargs)
    return kernel


_DTYPE_POS = {"softmax.int": 2, "log_softmax.int": 2, "sum": 1, "sum.dim_IntList": 3, "cumsum": 2, "prod": 1}


@contextlib.contextmanager
def cuda_autocast_policy(enabled: bool = True):
    if not enabled:
        yield
        return
    lib = torch.library.Library("aten", "IMPL")
    try:
        for name in FP32:
            lib.impl(name, _fp32(_op(name)), "AutocastCPU")
        for name in FP32_SET_OPT_DTYPE:
            lib.impl(name, _set_opt_dtype(_op(name), _DTYPE_POS[name]), "AutocastCPU")
        yield
    finally:
        lib._destroy()
