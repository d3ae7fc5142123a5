"""Emulated bitsandbytes 4-bit (and 8-bit) base layers for QLoRA on FakeTensors.

bitsandbytes needs CUDA, so its storage and its forward/backward allocations are reproduced:
  Linear4bit (bnb.nn.Linear4bit + Params4bit, bitsandbytes/functional.py quantize_4bit):
    packed weight  uint8, ceil(out*in / 2) bytes (two 4-bit codes per byte)
    absmax         fp32, one per 64-element block                      (no double quant)
                   uint8 per 64-block + fp32 absmax2 per 256 absmax blocks + fp32 offset  (double quant)
    code           fp32 16-entry NF4/FP4 map (+ 256-entry map for the nested state)
  forward  (bnb.autograd MatMul4Bit.forward): dequantize the full weight to a compute-dtype
           temporary, F.linear, save only the packed weight (the input is NOT saved).
  backward: dequantize again to a temporary, grad_input = grad_output @ W.
  stack.bitsandbytes 0.42 (bitsandbytes < 0.43.2): MatMul4Bit.forward also keeps `ctx.tensors = (A, B)`,
           a plain ctx attribute (not save_for_backward), so each 4-bit layer's compute-dtype input stays alive
           until the autograd graph itself is freed (after backward, when the loss goes), not when the node
           runs. Emulated as the same ctx attribute (keep_input=True).
  Int8 (LLM.int8 storage only): int8 weight 1 B/param + fp32 row scale per output row; the
  forward/backward are emulated like 4-bit (dequantized temporary), which is an approximation.
"""
from __future__ import annotations

import math

import torch
from torch import nn

BLOCK = 64          # bnb 4-bit quantization block size (quantize_4bit default)
BLOCK2 = 256        # nested (double) quantization block size


TRACKER: dict = {}   # {"tracker": StorageTracker} while an op log is recorded (tools/memtrace/oplog.py)


def _note_dequant(shape, dtype) -> None:
    """bitsandbytes dequantize_4bit (csrc kDequantizeBlockwise): reads the packed codes (0.5 B/element) and one
    absmax per 64-block, writes the compute-dtype weight; logged as one kernel when an op log is recorded."""
    tr = TRACKER.get("tracker")
    if tr is not None:
        n = shape[0] * shape[1]
        tr.note_kernel("bnb.dequantize_4bit", n // 2 + 4 * math.ceil(n / BLOCK), n * torch.empty((), dtype=dtype).element_size())


class _DequantMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, packed, shape, dtype, keep_input=False):
        w = torch.empty(shape, dtype=dtype, device=x.device)        # dequantize_4bit output
        _note_dequant(shape, dtype)
        ctx.save_for_backward(packed)
        if keep_input:
            ctx.tensors = (x, packed)       # bitsandbytes <= 0.43.1 MatMul4Bit.forward
        ctx.shape, ctx.dtype = shape, dtype
        return torch.nn.functional.linear(x, w)

    @staticmethod
    def backward(ctx, grad_out):
        (packed,) = ctx.saved_tensors
        w = torch.empty(ctx.shape, dtype=ctx.dtype, device=grad_out.device)
        _note_dequant(ctx.shape, ctx.dtype)
        return torch.matmul(grad_out, w.to(grad_out.dtype)), None, None, None, None


class FakeQuantLinear(nn.Linear):
    """Stand-in for bnb Linear4bit / Linear8bitLt: packed storage + block stats, dequant temporaries."""

    def __init__(self, in_features, out_features, bias, quant_type="nf4", double_quant=True,
                 compute_dtype=torch.bfloat16, bias_dtype=torch.bfloat16, keep_input=False):
        nn.Module.__init__(self)
        self.keep_input = keep_input
        self.in_features, self.out_features = in_features, out_features
        self.compute_dtype = compute_dtype
        n = in_features * out_features
        if quant_type in ("nf4", "fp4"):
            self.weight = nn.Parameter(torch.empty(math.ceil(n / 2), 1, dtype=torch.uint8), requires_grad=False)
            nblocks = math.ceil(n / BLOCK)
            if double_quant:
                self.register_buffer("absmax", torch.empty(nblocks, dtype=torch.uint8))
                self.register_buffer("absmax2", torch.empty(math.ceil(nblocks / BLOCK2), dtype=torch.float32))
                self.register_buffer("offset", torch.empty((), dtype=torch.float32))
                self.register_buffer("code2", torch.empty(256, dtype=torch.float32))
            else:
                self.register_buffer("absmax", torch.empty(nblocks, dtype=torch.float32))
            self.register_buffer("code", torch.empty(16, dtype=torch.float32))
        elif quant_type == "int8":
            self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=torch.int8), requires_grad=False)
            self.register_buffer("SCB", torch.empty(out_features, dtype=torch.float32))
        else:
            raise ValueError(f"quantization.type {quant_type!r} not supported")
        self.bias = nn.Parameter(torch.empty(out_features, dtype=bias_dtype), requires_grad=False) if bias else None

    def forward(self, x):
        inp_dtype = x.dtype
        x = x.to(self.compute_dtype)
        out = _DequantMatmul.apply(x, self.weight, (self.out_features, self.in_features), self.compute_dtype,
                                   self.keep_input)
        if self.bias is not None:
            out = out + self.bias.to(self.compute_dtype)
        return out.to(inp_dtype)


def quantize_targets(model: nn.Module, targets, quant_type, double_quant, compute_dtype, base_dtype,
                     keep_input=False) -> int:
    """Replace every nn.Linear whose name ends in a target with FakeQuantLinear; returns the count."""
    n = 0
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            if type(child) is nn.Linear and cname in targets:
                setattr(mod, cname, FakeQuantLinear(child.in_features, child.out_features, child.bias is not None,
                                                    quant_type, double_quant, compute_dtype, base_dtype,
                                                    keep_input))
                n += 1
    return n
