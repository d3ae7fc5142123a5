"""Op log of a traced training step: every aten op that runs a kernel, with its phase, FLOPs and bytes.

    python -m tools.memtrace.oplog [--ids ID,...] [--out tests/data/step_oplog.json]

The tracer (trace.py) dispatches every aten op of a real step on FakeTensors; with ``log_ops=True`` the
StorageTracker appends (phase, op, FLOPs, bytes read, bytes written, output shape) for each op of the last
traced step that launches a kernel (views, metadata and `empty` left out; the emulated bitsandbytes layers
add their dequantize_4bit kernel). Phases: forward, backward, recompute (a checkpointed layer re-run in
backward), step (the optimizer). ``summarize`` folds a log into per-phase counts: GEMM kernels and FLOPs,
attention kernels and FLOPs, memory-bound kernels and bytes, kernels per op; those summaries, for the
grid plans named in OPLOG_IDS, are the checked-in fixture tests/test_step_ops.py compares the engine's
per-op rules (py/zerocalc/step/ops.py) against.
"""
from __future__ import annotations

import json
import math

import pathlib
import sys

import torch

GEMM = {"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_mm", "addmv", "mv"}
ATTENTION = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
             "_flash_attention_forward", "_flash_attention_backward"}
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_unsafe_view", "detach",
             "lift_fresh", "alias", "set_", "resize_", "_local_scalar_dense", "is_same_size", "sym_size",
             "sym_stride", "sym_numel", "_has_compatible_shallow_copy_type", "device", "dim", "numel", "size", "stride", "storage_offset"}

# the plans of tools/memtrace/grid.py whose op logs are checked in (small ones: each traces in ~30 s)
OPLOG_IDS = ["llama1b-full-pure-flash", "llama1b-full-pure-eager", "llama1b-full-mixed-flash-gc-mb2",
             "llama1b-lora-mixed-flash-s1024-mb2-drop", "llama1b-qlora-mixed-flash-gc-s4096",
             "qwen25-05b-full-mixed-eager-gc-mb4-s1024", "qwen3-06b-qlora-mixed-flash-mb8-s1024",
             "gpt2-full-mixed-flash-mb8-s1024", "llama1b-full-pure-flash-foreach"]
# plans made from a grid plan with changes (id -> (grid id, changes))
OPLOG_EXTRA = {"llama1b-full-pure-flash-foreach": ("llama1b-full-pure-flash", {"stack": {"optimizer_impl": "foreach"}})}


def _nbytes(t) -> int:
    if not isinstance(t, torch.Tensor):
        return 0
    try:
        return min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):      # wrapper subclasses
        return t.numel() * t.element_size()


def _flops(name: str, args, out) -> float:
    """2·m·k·n per matmul (one multiply-add = 2 FLOPs); attention 4·b·h·s_q·s_k·d forward (scores and
    values), 2.5 x that backward (dQ, dK, dV and the recomputed scores: FlashAttention-2 §3.2)."""
    a = [x for x in args if isinstance(x, torch.Tensor)]
    if name in ("mm", "_scaled_mm"):
        (m, k), n = a[0].shape, a[1].shape[1]
        return 2.0 * m * k * n
    if name == "addmm":
        (m, k), n = a[1].shape, a[2].shape[1]
        return 2.0 * m * k * n
    if name == "bmm":
        bt, m, k = a[0].shape
        return 2.0 * bt * m * k * a[1].shape[2]
    if name == "baddbmm":
        bt, m, k = a[1].shape
        return 2.0 * bt * m * k * a[2].shape[2]
    if name == "_grouped_mm":
        return 2.0 * a[0].shape[0] * a[0].shape[-1] * a[1].shape[-1]
    if name in ATTENTION:
        q, k = a[0], a[1]
        if "backward" in name:
            q, k = a[1], a[2]        # (grad_out, q, k, v, ...)
        b, h, sq, d = q.shape
        fwd = 4.0 * b * h * sq * k.shape[2] * d
        return 2.5 * fwd if "backward" in name else fwd
    return 0.0


def op_entry(func, args, kwargs, out, phase: str):
    """(phase, op, FLOPs, bytes read, bytes written, output shape) or None for an op with no kernel."""
    name = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func)
    if name in NO_KERNEL or getattr(func, "is_view", False) or phase in ("setup", "warmup"):
        return None
    from torch.utils._pytree import tree_flatten  # noqa: PLC0415
    ins = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    outs = [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]
    if not ins and not outs:
        return None
    read = sum(_nbytes(x) for x in ins)
    written = sum(_nbytes(x) for x in outs)
    shape = tuple(outs[0].shape) if outs else ()
    return (phase, name, _flops(name, args, out), read, written, shape)


def kind(name: str) -> str:
    return "gemm" if name in GEMM else "attention" if name in ATTENTION else "memory"


def summarize(ops, tokens: int = 0) -> dict:
    """Per phase: kernels; gemm/attention/memory kernels, FLOPs and bytes; kernels per op name; and the
    memory-bound ops' kernels and bytes by the per-token width of their output (numel / tokens: the hidden
    size, the MLP width, the key/value width, the vocabulary...; "other" when it does not divide)."""
    out: dict = {}
    for phase, name, flops, read, written, shape in ops:
        p = out.setdefault(phase, {"kernels": 0, "gemm": {"kernels": 0, "flops": 0.0, "bytes": 0},
                                   "attention": {"kernels": 0, "flops": 0.0, "bytes": 0},
                                   "memory": {"kernels": 0, "flops": 0.0, "bytes": 0}, "by_op": {}})
        k = kind(name)
        p["kernels"] += 1
        p[k]["kernels"] += 1
        p[k]["flops"] += flops
        p[k]["bytes"] += read + written
        p["by_op"][name] = p["by_op"].get(name, 0) + 1
        if k == "memory" and tokens:
            n = math.prod(shape) if shape else 0
            w = str(n // tokens) if n and n % tokens == 0 else "other"
            bw = p.setdefault("memory_by_width", {}).setdefault(w, [0, 0])
            bw[0] += 1
            bw[1] += read + written
    for p in out.values():
        p["by_op"] = dict(sorted(p["by_op"].items(), key=lambda kv: -kv[1]))
    return out


def run(ids=None, out_path=None) -> dict:
    from .grid import GRID  # noqa: PLC0415
    from .trace import trace  # noqa: PLC0415
    ids = ids or OPLOG_IDS
    res = {"versions": {"torch": torch.__version__}, "results": {}}
    if out_path and pathlib.Path(out_path).exists():       # keep the plans not traced this time
        res["results"] = json.loads(pathlib.Path(out_path).read_text())["results"]
    grid = {g["id"]: g for g in GRID}
    for pid in ids:
        if pid in OPLOG_EXTRA:
            base, changes = OPLOG_EXTRA[pid]
            g = {**grid[base], **changes, "id": pid}
        elif pid in grid:
            g = grid[pid]
        else:
            raise ValueError(f"unknown plan id {pid}")
        plan = {k: v for k, v in g.items() if k not in ("id", "quick")}
        r = trace(plan, steps=2, log_ops=True)
        res["results"][g["id"]] = {"plan": plan, "optimizer_impl": r["optimizer_impl"],
                                   "tokens": plan["micro_batch_size"] * plan["seq_len"],
                                   "phases": summarize(r["ops"], plan["micro_batch_size"] * plan["seq_len"])}
        print(g["id"], {ph: v["kernels"] for ph, v in res["results"][g["id"]]["phases"].items()}, flush=True)
        if out_path:
            pathlib.Path(out_path).write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    import argparse
    import warnings
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", default="")
    ap.add_argument("--out", default="tests/data/step_oplog.json")
    a = ap.parse_args()
    run([i for i in a.ids.split(",") if i] or None, a.out)
    sys.exit(0)


