"""python scripts/fragmentation.py [--steps N] [--json OUT]

Reserved memory over a run of varying batch lengths, from the caching allocator's own rules: traces one
small model's step at a few sequence lengths (tools/memtrace, fake tensors: seconds each), synthesizes the
step log at every length (tools/memtrace/runs.py family: each storage's bytes are a polynomial in s, checked
on a held-out length), then replays setup + N steps whose lengths a sampler draws (fixed; padded to the
batch's longest; padding-free: concatenated) through tools/memtrace/allocator.py for the native allocator
(defaults; max_split_size_mb:128) and expandable_segments, with no device limit and on a device
25 % above the fixed-length step's allocated peak. Prints the grid; --json writes the fixture that
tests/test_fragmentation.py holds py/zerocalc/memory/fragmentation.py against. Needs the tools venv.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

GIB = 2**30
MIB = 2**20
MODEL = {"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 4096, "vocab_size": 32000,
         "tie_word_embeddings": False}
B, SEQ = 4, 2048
PADDED_LENS = (256, 512, 1024, 1536)          # b = 4: padded batches up to 2048 (the fit's held-out: 1536)
FREE_LENS = (1024, 2048, 4096, 6144)          # b = 1: a concatenated micro-batch up to 4 x 2048 tokens
DISTS = [("fixed", None, None), ("padded-longest", 700, 1100), ("padded-longest", 700, 2048),
         ("padding-free", 700, 2048)]
SETTINGS = {"native": {}, "max_split_size_mb:128": {"max_split_size": 128 * MIB},
            "expandable_segments": {"expandable_segments": True}}


def plan(b: int, s: int) -> dict:
    return {"model": MODEL, "micro_batch_size": b, "seq_len": s, "precision": "bf16-pure", "attention": "flash",
            "method": "full", "gradient_accumulation_steps": 1, "optimizer": "adamw",
            "activation_checkpointing": "none"}


def families(cache: pathlib.Path) -> dict:
    from tools.memtrace.runs import family  # noqa: PLC0415
    from tools.memtrace.trace import trace  # noqa: PLC0415
    logs = json.loads(cache.read_text()) if cache.exists() else {}
    for b, lens in ((B, PADDED_LENS), (1, FREE_LENS)):
        for s in lens:
            k = f"{b}x{s}"
            if k not in logs:
                ev: list = []
                trace(plan(b, s), steps=2, events=ev)
                logs[k] = ev
    cache.write_text(json.dumps(logs))
    fam = {}
    for b, lens in ((B, PADDED_LENS), (1, FREE_LENS)):
        fam[b] = family({s: [tuple(e) for e in logs[f"{b}x{s}"]] for s in lens})
    return fam


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--only", type=int, nargs="*", help="rows of DISTS to run (default: all)")
    ap.add_argument("--cache", type=pathlib.Path, default=ROOT / ".cache" / "fragmentation_logs.json")
    a = ap.parse_args(argv)
    a.cache.parent.mkdir(exist_ok=True)
    from tools.memtrace.allocator import Config  # noqa: PLC0415
    from tools.memtrace.runs import run, sampler, schedule, step_peak  # noqa: PLC0415
    fam = families(a.cache)
    checkpoints = tuple(c for c in (10, 100, 1000, 10000) if c <= a.steps)
    fixed_alloc = run(fam[B], [SEQ] * 3, Config(), checkpoints=())["peak_allocated"]
    capacity = int(1.25 * fixed_alloc)
    rows = []
    print(f"model: {MODEL['num_hidden_layers']}-layer llama h={MODEL['hidden_size']} V={MODEL['vocab_size']}, "
          f"b={B}, seq_len={SEQ}; fixed step allocated {fixed_alloc / GIB:.3f} GiB; device {capacity / GIB:.3f} GiB")
    print("| lengths | mean/p99 | allocator | longest step GiB | reserved after " + " / ".join(map(str, checkpoints))
          + " GiB | on the device: reserved after, OOM step |")
    print("|---|---|---|---|---|---|")
    for j, (mode, mean, p99) in enumerate(DISTS):
        if a.only is not None and j not in a.only:
            continue
        fb = fam[1] if mode == "padding-free" else fam[B]
        draw = sampler(SEQ, mean=mean, p99=p99, seed=7) if mean else None
        lens = schedule(mode, a.steps, B, SEQ, draw)
        longest = {c: max(lens[:c]) for c in checkpoints}
        for name, kw in SETTINGS.items():
            free = run(fb, lens, Config(**kw), checkpoints=checkpoints)
            dev = run(fb, lens, Config(capacity=capacity, **kw), checkpoints=checkpoints)
            peaks = {c: step_peak(fb, longest[c]) for c in checkpoints}
            row = {"lengths": mode, "mean_len": mean, "p99_len": p99, "allocator": name, "b": B, "seq_len": SEQ,
                   "static": free["setup_requested"], "longest": longest, "step_peak": peaks,
                   "fixed_step_peak": step_peak(fam[B], SEQ),
                   "reserved_after": free["reserved_after"], "allocated_after": free["allocated_after"],
                   "capacity": capacity, "device_reserved_after": dev["reserved_after"],
                   "oom_step": dev["oom_step"]}
            rows.append(row)
            rs = " / ".join(f"{v / GIB:.3f}" for v in free["reserved_after"].values())
            ds = " / ".join(f"{v / GIB:.3f}" for v in dev["reserved_after"].values())
            print(f"| {mode} | {mean}/{p99} | {name} | {peaks[checkpoints[-1]] / GIB:.3f} | {rs} | {ds}, "
                  f"OOM {dev['oom_step']} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps({"model": MODEL, "capacity": capacity, "seed": 7, "rows": rows,
                                      "step_peak_at_0": step_peak(fam[B], 0),
                                      "step_peak_at_seq_len": step_peak(fam[B], SEQ)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
