"""The fixed comparison grid: single-GPU plans traced on FakeTensors, compared with the engine.

GRID is a list of plan-v1 dicts (plus "id" and "quick" keys, stripped before use). It spans
architectures (Llama 3.x, Qwen2.5, Qwen3, Mistral, Gemma 2/3, Mixtral, Qwen3-MoE, GPT-2), flash vs eager,
checkpointing none/full, full/LoRA/QLoRA, precisions, optimizers and batch/sequence sizes, all at the
presets' full size. `run_grid(plans, jobs=2)` traces them in a pool of `jobs` worker processes (each
worker imports torch once) and returns the results in order; nothing is cached.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time

GPU = "h200-sxm-141gb"
GPT2_TARGETS = ["c_attn", "c_proj", "c_fc"]


def _p(pid, model, method="full", precision="bf16-mixed", attention="flash", ckpt="none", mb=1, seq=2048,
       optimizer="adamw", ga=1, quick=False, lora=None, quant=None):
    d = {"id": pid, "quick": quick, "schema": 1, "model": model, "gpu": GPU, "framework": "single",
         "gpus_per_node": 1, "nodes": 1, "zero_stage": 0, "precision": precision, "optimizer": optimizer,
         "micro_batch_size": mb, "gradient_accumulation_steps": ga, "seq_len": seq,
         "activation_checkpointing": ckpt, "attention": attention, "loss": "standard", "method": method}
    if method in ("lora", "qlora"):
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.0,
                     "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
        d["lora"].update(lora or {})
    if method == "qlora":
        d["quantization"] = {"type": "nf4", "double_quant": True, "compute_dtype": "bf16"}
        d["quantization"].update(quant or {})
    return d


GRID = [
    _p("llama1b-full-pure-flash", "llama-3.2-1b", precision="bf16-pure", quick=True),
    _p("llama1b-full-pure-eager", "llama-3.2-1b", precision="bf16-pure", attention="eager"),
    _p("llama1b-full-mixed-flash-gc-mb2", "llama-3.2-1b", ckpt="full", mb=2, quick=True),
    _p("llama1b-lora-mixed-flash-s1024-mb2-drop", "llama-3.2-1b", "lora", mb=2, seq=1024,
       lora={"dropout": 0.05}, quick=True),
    _p("llama1b-qlora-mixed-flash-gc-s4096", "llama-3.2-1b", "qlora", ckpt="full", seq=4096),
    _p("llama1b-full-mixed-flash-sgd", "llama-3.2-1b", optimizer="sgd"),
    _p("llama1b-full-pure-flash-gc-adamw8bit", "llama-3.2-1b", precision="bf16-pure", ckpt="full",
       optimizer="adamw-8bit"),
    _p("llama8b-full-pure-flash-gc-s4096", "llama-3.1-8b", precision="bf16-pure", ckpt="full", seq=4096),
    _p("llama8b-full-mixed-flash", "llama-3.1-8b"),
    _p("llama8b-lora-mixed-eager-s1024", "llama-3.1-8b", "lora", attention="eager", seq=1024),
    _p("llama8b-qlora-mixed-flash-gc-mb4", "llama-3.1-8b", "qlora", ckpt="full", mb=4, quick=True),
    _p("llama8b-qlora-nodq-mixed-flash", "llama-3.1-8b", "qlora", quant={"double_quant": False}),
    _p("llama8b-full-pure-flash-ga4", "llama-3.1-8b", precision="bf16-pure", ga=4),
    _p("qwen25-7b-full-pure-flash", "qwen2.5-7b", precision="bf16-pure"),
    _p("qwen25-7b-lora-mixed-flash-gc-mb2-s4096", "qwen2.5-7b", "lora", ckpt="full", mb=2, seq=4096),
    _p("qwen25-05b-full-mixed-eager-gc-mb4-s1024", "qwen2.5-0.5b", attention="eager", ckpt="full", mb=4, seq=1024),
    _p("qwen3-8b-full-pure-flash", "qwen3-8b", precision="bf16-pure", quick=True),
    _p("qwen3-4b-lora-mixed-eager", "qwen3-4b", "lora", attention="eager"),
    _p("qwen3-06b-qlora-mixed-flash-mb8-s1024", "qwen3-0.6b", "qlora", mb=8, seq=1024),
    _p("mistral7b-full-pure-eager-gc-s4096", "mistral-7b-v0.3", precision="bf16-pure", attention="eager",
       ckpt="full", seq=4096),
    _p("mistral7b-lora-mixed-flash-mb2", "mistral-7b-v0.3", "lora", mb=2),
    _p("gemma2-2b-full-pure-flash", "gemma-2-2b", precision="bf16-pure", quick=True),
    _p("gemma2-2b-lora-mixed-eager-gc-mb2", "gemma-2-2b", "lora", attention="eager", ckpt="full", mb=2),
    _p("gemma3-1b-full-mixed-flash-mb2", "gemma-3-1b", mb=2),
    _p("gemma3-1b-qlora-mixed-eager-s1024", "gemma-3-1b", "qlora", attention="eager", seq=1024),
    _p("mixtral-lora-mixed-flash-gc-s4096", "mixtral-8x7b", "lora", ckpt="full", seq=4096, quick=True),
    _p("mixtral-full-pure-flash-s1024", "mixtral-8x7b", precision="bf16-pure", seq=1024),
    _p("qwen3moe-full-pure-flash-gc", "qwen3-30b-a3b", precision="bf16-pure", ckpt="full"),
    _p("qwen3moe-lora-mixed-flash", "qwen3-30b-a3b", "lora"),
    _p("gpt2-full-mixed-flash-mb8-s1024", "gpt2", mb=8, seq=1024, quick=True),
    _p("gpt2-full-fp32-eager-mb4-s1024", "gpt2", precision="fp32", attention="eager", mb=4, seq=1024),
    _p("gpt2-lora-mixed-eager-gc-mb8-s1024", "gpt2", "lora", attention="eager", ckpt="full", mb=8, seq=1024,
       lora={"targets": GPT2_TARGETS}),
]


def plan_of(entry: dict) -> dict:
    """Grid entry -> the plan-v1 dict (without the grid's own keys)."""
    return {k: v for k, v in entry.items() if k not in ("id", "quick")}


def select(quick: bool) -> list:
    return [g for g in GRID if g["quick"]] if quick else list(GRID)


def _worker(entry: dict) -> dict:
    import warnings  # noqa: PLC0415
    warnings.filterwarnings("ignore")
    t = time.perf_counter()
    try:
        trainer = (entry.get("stack") or {}).get("trainer")
        if trainer == "torchtune":
            from .tune import trace_tune as trace  # noqa: PLC0415
        elif trainer == "litgpt":
            from .lit import trace_lit as trace  # noqa: PLC0415
        elif trainer == "torchtitan":
            from .titan import trace_titan as trace  # noqa: PLC0415
        else:
            from .trace import trace  # noqa: PLC0415
        res = trace(plan_of(entry))
    except Exception as e:  # report, don't lose the rest of the grid
        res = {"error": f"{type(e).__name__}: {e}"}
    res["id"] = entry.get("id")
    res["wall_s"] = round(time.perf_counter() - t, 2)
    return res


def run_grid(plans: list, jobs: int = 2) -> list:
    """Trace grid entries (or plain plan dicts) in a pool of `jobs` processes; results in input order."""
    if jobs <= 1:
        return [_worker(p) for p in plans]
    ctx = mp.get_context("spawn")
    env_pp = os.environ.get("PYTHONPATH", "")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in env_pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join([root, os.path.join(root, "py")] + ([env_pp] if env_pp else []))
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
        return list(ex.map(_worker, plans))


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "grid.json")


def slim(res: dict) -> dict:
    """What the golden file keeps of a result (bytes)."""
    return {"peak_bytes": res["peak_bytes"], "peak_phase": res["peak_phase"], "peak_op": res["peak_op"],
            "components": res["peak"]["components"],
            "saved_activations_forward_end": res["saved_activations_forward_end"],
            "phase_peaks": {k: v["bytes"] for k, v in res["phase_peaks"].items()},
            "allocator": {k: res["allocator"][k] for k in ("peak_allocated", "peak_reserved", "peak_pinned")}}


if __name__ == "__main__":
    # python -m tools.memtrace.grid [--quick] [--write-golden] [OUT.json]
    import json
    import sys
    quick = "--quick" in sys.argv
    t0 = time.perf_counter()
    out = run_grid(select(quick), jobs=2)
    for r in out:
        print(r["id"], r.get("error") or f"{r['peak_bytes'] / 2**30:.3f} GiB {r['peak_phase']} {r['wall_s']} s")
    print(f"total {time.perf_counter() - t0:.1f} s")
    if len(sys.argv) > 1 and sys.argv[-1].endswith(".json"):
        with open(sys.argv[-1], "w") as f:
            json.dump(out, f, indent=1)
    if "--write-golden" in sys.argv and not quick:
        import torch
        import transformers
        import peft
        with open(GOLDEN, "w") as f:
            json.dump({"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                    "peft": peft.__version__},
                       "results": {r["id"]: slim(r) for r in out if "error" not in r}}, f, indent=1)


def write_fixtures(results: list[dict], out: str) -> None:
    """Each traced row as <out>/<id>.json (the plan, the library versions, slim's fields): the families' and the
    seq2seq grids' fixtures."""
    import json  # noqa: PLC0415
    import peft  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    os.makedirs(out, exist_ok=True)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    for r in results:
        if "error" in r:
            print(r["id"], "ERROR", r["error"])
            continue
        row = {"id": r["id"], "plan": r["plan"], "versions": versions, **slim(r)}
        with open(os.path.join(out, f"{r['id']}.json"), "w") as f:
            json.dump(row, f, indent=1)
            f.write("\n")
        print(r["id"], f"{r['peak_bytes'] / 2**30:.3f} GiB {r['peak_phase']} {r['wall_s']} s")


def trace_main(rows: list[dict], out: str, patch=None) -> None:
    """The trace tools' command line, ``python -m tools.memtrace.<tool> [PREFIX]``: trace the rows whose id starts
    with PREFIX (every row without one) at full size, one after another in this process after ``patch()`` (the
    tool's stand-ins for what fake tensors cannot run), and write their fixtures to ``out``."""
    import sys  # noqa: PLC0415
    if patch is not None:
        patch()
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    write_fixtures([_worker({**p, "quick": False}) for p in rows if p["id"].startswith(prefix)], out)

