"""golden/stacks/README.md from the stack grid's result files (GiB = 2^30 at this edge; files keep bytes)."""
from __future__ import annotations

import json
import os

from .twins import twin_of

SHORT = {"weights": "w", "gradients": "grad", "optimizer_states": "opt", "activations": "act", "logits": "logits",
         "lora_adapters": "lora", "temporaries": "temp"}

HEADER = """# Stack grid: what other training stacks allocate (measured on fake tensors)

Written by `python -m tools.memtrace.stacks readme` from the `*.json` files beside it (bytes, per component, at
the end of forward, the start of backward, the end of backward, the step's own peak and the overall peak, for
the worse of two consecutive steady-state steps). Every row is Llama 3.2 1B (h 2048, 16 layers, V 128256,
P 1.236e9), s 2048, b 1 (s 1024, b 2 where the id says so; the bert-large and gpt2 rows are those models, eager,
at the id's s and b), FA2 profile (the 4.x eras run HF's own
`sdpa` class, which has no FA2 hook), one GPU, gradient accumulation 1. "default" is the same plan traced
without `stack` (HF Trainer, transformers 5, fused AdamW) in the tools venv (`_default/*.json`). GiB = 2^30. The
per-component Δ compares the two peaks, which may be at different moments (the foreach rows peak in the step,
their defaults at the loss backward); "Δ step" compares the step phases. Mechanisms: docs/tracer.md §7 and below.

"""


def _g(n: int) -> str:
    return f"{n / 2**30:.3f}"


def _d(n: int) -> str:
    return f"{n / 2**30:+.3f}" if n else "0"


def rows(out_dir: str, entries: list) -> list:
    res = []
    for e in entries:
        path = os.path.join(out_dir, e["id"] + ".json")
        if not os.path.exists(path):
            res.append((e, None, None))
            continue
        rec = json.load(open(path))
        dpath = os.path.join(out_dir, "_default", twin_of(e) + ".json")
        base = json.load(open(dpath)) if os.path.exists(dpath) else None
        res.append((e, rec, base))
    return res


def table(out_dir: str, entries: list) -> str:
    lines = ["| plan | stack | versions | peak GiB (phase, op) | at peak: " +
             " / ".join(SHORT[c] for c in SHORT) + " | default peak | Δ peak | Δ at peak per component | "
             "Δ fwd end | Δ step |", "|" + "---|" * 10]
    for e, rec, base in rows(out_dir, entries):
        st = ", ".join(f"{k}={v}" for k, v in e["stack"].items())
        if rec is None:
            lines.append(f"| {e['id']} | {st} | not traced (venv absent) | | | | | | | |")
            continue
        v = rec["versions"]
        ver = ", ".join(f"{k} {v[k]}" for k in ("transformers", "peft", "torchtune", "torchao", "litgpt", "torchtitan", "torch")
                        if k in v)
        b = rec["bytes"]
        pk = b["peak"]
        comp = " / ".join(_g(pk[c]) for c in SHORT)
        if base:
            bb = base["bytes"]
            dpk = pk["bytes"] - bb["peak"]["bytes"]
            dcomp = " / ".join(_d(pk[c] - bb["peak"][c]) for c in SHORT)
            dfe = _d(b["forward_end"]["bytes"] - bb["forward_end"]["bytes"])
            dst = _d(b["step"]["bytes"] - bb["step"]["bytes"])
            dflt = _g(bb["peak"]["bytes"])
        else:
            dpk, dcomp, dfe, dst, dflt = 0, "", "", "", "n/a"
        lines.append(f"| {e['id']} | {st} | {ver} | {_g(pk['bytes'])} ({pk['phase']}, {pk['op']}) | {comp} | "
                     f"{dflt} | {_d(dpk)} | {dcomp} | {dfe} | {dst} |")
    return "\n".join(lines)


def write_readme(out_dir: str, entries: list) -> str:
    from .stacks_notes import NOTES  # noqa: PLC0415
    text = HEADER + table(out_dir, entries) + "\n\n" + NOTES
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(text)
    return text
