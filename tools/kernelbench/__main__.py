"""Measure the rates py/zerocalc/step/kernels.py takes from published benchmarks, on the GPU at hand.

    python -m tools.kernelbench [--out kernel_rates.json] [--seconds 120] [--smoke]

One prepared script for a lent device (the `device` tool: run it once, with a timeout that leaves a rerun):
every figure is timed with CUDA events after a warm-up, each case inside a wall-clock budget, and written to
one JSON file as it goes (a run cut short keeps what it measured). What each part stands for in kernels.py:

- ``gemm``: bf16 torch.matmul TFLOP/s over LLM-linear shapes (tokens x d_in x d_out) and square sizes: the best
  of them over the datasheet peak is ``MAMF`` / ``MAMF_RATIO``; the small-dimension cases check the
  d / (d + GEMM_TILE) tile rule (stas00/ml-engineering mamf-finder.py does the exhaustive search);
- ``attention``: torch.nn.functional.scaled_dot_product_attention (causal, head dim 128) forward and
  forward + backward TFLOP/s by sequence length, counted on the causal half as ops.py counts it
  (4 b h s^2 d / 2 forward, 2.5x that backward): ``ATTENTION_RATES`` and ``ATTN_SEQ_HALF``;
- ``memory``: GB/s of a copy, an add, and an RMSNorm in fp32 upcast (HF LlamaRMSNorm's ops) by tensor size,
  over the datasheet bandwidth: ``MEMORY_EFFICIENCY`` (the RMSNorm's figure counts its 16-bit input and output
  only: its fp32 intermediates are traffic the op logs count op by op, so it is the effective rate of a norm);
- ``launch``: microseconds per tiny eager kernel launched back to back: ``LAUNCH_S``;
- ``adamw``: torch.optim.AdamW fused and foreach step time per parameter: ``ADAMW_PASSES`` at the memory rate.

``--smoke`` runs every part at toy sizes on whatever device is there (the CPU included) to check the script.
"""
from __future__ import annotations

import argparse
import json
import platform
import time


def _timer(torch, dev):
    """Median seconds of fn() over repeats (CUDA events on a GPU, perf_counter elsewhere)."""
    def run(fn, reps: int = 10, warm: int = 3) -> float:
        for _ in range(warm):
            fn()
        ts = []
        for _ in range(reps):
            if dev == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                torch.cuda.synchronize()
                ts.append(a.elapsed_time(b) / 1000)
            else:
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
        ts.sort()
        return ts[len(ts) // 2]
    return run


def gemm_cases(smoke: bool):
    if smoke:
        return [(64, 64, 64), (128, 64, 32)]
    shapes = [(16384, 4096, 4096), (16384, 4096, 14336), (16384, 14336, 4096), (16384, 4096, 1024),
              (16384, 8192, 28672), (8192, 2048, 8192), (4096, 5120, 15360), (16384, 4096, 16),
              (16384, 16, 4096), (16384, 4096, 64), (2048, 4096, 14336), (512, 4096, 4096)]
    return shapes + [(n, n, n) for n in (1024, 2048, 4096, 8192, 16384)]


def bench_gemm(torch, dev, timed, smoke, budget):
    out = []
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    for m, k, n in gemm_cases(smoke):
        if time.monotonic() > budget:
            break
        a, b = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        s = timed(lambda: torch.matmul(a, b))
        out.append({"m": m, "k": k, "n": n, "s": s, "tflops": 2 * m * k * n / s / 1e12})
    return out


def bench_attention(torch, dev, timed, smoke, budget):
    out = []
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    F = torch.nn.functional
    for s in ((64, 128) if smoke else (512, 1024, 2048, 4096, 8192, 16384)):
        if time.monotonic() > budget:
            break
        b, h, d = (1, 2, 32) if smoke else (max(1, 16384 // s), 32, 128)
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        g = torch.randn(b, h, s, d, device=dev, dtype=dt)
        both = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g))
        flops = 4.0 * b * h * s * s * d / 2
        out.append({"seq": s, "batch": b, "heads": h, "head_dim": d, "forward_s": fwd, "fwd_bwd_s": both,
                    "forward_tflops": flops / fwd / 1e12,
                    "backward_tflops": 2.5 * flops / max(both - fwd, 1e-12) / 1e12})
    return out


def bench_memory(torch, dev, timed, smoke, budget):
    out = []
    for n in ((1 << 12, 1 << 16) if smoke else (1 << 20, 1 << 23, 1 << 26, 1 << 28)):
        if time.monotonic() > budget:
            break
        x = torch.randn(n // 4096, 4096, device=dev, dtype=torch.bfloat16)
        y, w = torch.empty_like(x), torch.ones(4096, device=dev, dtype=torch.bfloat16)

        def rms():
            h = x.float()
            return (w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype))
        for name, fn, nbytes in (("copy", lambda: y.copy_(x), 4 * n), ("add", lambda: x + y, 6 * n),
                                 ("rmsnorm_fp32", rms, 4 * n)):        # rmsnorm: its 16-bit input and output
            s = timed(fn)
            out.append({"op": name, "elements": n, "bytes": nbytes, "s": s, "gb_s": nbytes / s / 1e9})
    return out


def bench_launch(torch, dev, smoke):
    x = torch.zeros(16, device=dev)
    n = 200 if smoke else 20000
    for _ in range(100):
        x.add_(1)
    if dev == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    if dev == "cuda":
        torch.cuda.synchronize()
    return {"kernels": n, "us_per_kernel": (time.perf_counter() - t) / n * 1e6}


def bench_adamw(torch, dev, timed, smoke):
    out = []
    numel = 1 << (14 if smoke else 26)
    for impl in (("foreach",) if dev != "cuda" else ("fused", "foreach")):
        ps = [torch.nn.Parameter(torch.randn(numel // 16, device=dev)) for _ in range(16)]
        for p in ps:
            p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW(ps, **{impl: True})
        s = timed(opt.step, reps=5, warm=2)
        out.append({"impl": impl, "params": numel, "s": s, "ns_per_param": s / numel * 1e9})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.kernelbench")
    ap.add_argument("--out", default="kernel_rates.json")
    ap.add_argument("--seconds", type=float, default=120.0, help="wall-clock budget for the GEMM, attention and "
                    "memory sweeps together (each stops where the budget runs out)")
    ap.add_argument("--smoke", action="store_true", help="toy sizes on any device: checks the script")
    args = ap.parse_args(argv)
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and not args.smoke:
        print("no CUDA device: the rates would be the CPU's; run with --smoke to check the script")
        return 2
    timed = _timer(torch, dev)
    budget = time.monotonic() + args.seconds
    res = {"device": torch.cuda.get_device_name(0) if dev == "cuda" else platform.processor() or "cpu",
           "torch": torch.__version__, "cuda": torch.version.cuda, "smoke": args.smoke}
    if dev == "cuda":
        pr = torch.cuda.get_device_properties(0)
        res.update(sm_count=pr.multi_processor_count, compute_capability=f"{pr.major}.{pr.minor}",
                   memory_bytes=pr.total_memory)

    def save():
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    for name, fn in (("launch", lambda: bench_launch(torch, dev, args.smoke)),
                     ("gemm", lambda: bench_gemm(torch, dev, timed, args.smoke, budget)),
                     ("attention", lambda: bench_attention(torch, dev, timed, args.smoke, budget)),
                     ("memory", lambda: bench_memory(torch, dev, timed, args.smoke, budget)),
                     ("adamw", lambda: bench_adamw(torch, dev, timed, args.smoke))):
        try:
            res[name] = fn()
        except Exception as e:                     # a part that fails (no flash kernel, OOM) says so
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        save()
    print(json.dumps({k: (v if not isinstance(v, list) else f"{len(v)} cases") for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
