"""python scripts/fragmentation.py [--steps N] [--json OUT]

Reserved memory over a run of varying batch lengths, from the caching allocator's own rules: traces one
small model's step at a few sequence lengths (tools/memtrace, fake tensors: seconds each), synthesizes the
step log at every length (tools/memtrace/runs.py family: each storage's bytes are a polynomial in s, checked
on a held-out length), then replays setup + N steps whose lengths a sampler draws (fixed; padded to the
batch's longest; padding-free: concatenated) through tools/memtrace/allocator.py for the native allocator
(defaults; max_split_size_mb:128) and expandable_segments, with no device limit and on a device
25 % above the fixed-length step's allocated peak. Prints the grid; --json writes the fixture that
tests/test_fragmentation.py holds py/zerocalc/memory/fragmentation.py against. Needs the tools venv.

--shapes OUT: the native allocator without a limit over other step shapes (LoRA with and without
checkpointing, h 1024 and 4096) under an Alpaca-like tail (TAIL: mean ~160 tokens, longest 1305), 8 seeds,
1000 steps: what the ratchet's growth is a share of (tests/data/fragmentation_shapes.json).

--segments SHAPE SEED: one of those runs (SHAPES index, seed), printing for each record-long batch the segments
the native allocator opened in its step (cudaMalloc'd sizes) beside its logits bytes, and what the other steps
opened: where the ratchet's bytes come from (fragmentation.py, the comment above GROWTH).
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


# Alpaca's 52,002 samples in LLaMA tokens with the Alpaca prompt, BOS and EOS (tloen/alpaca-lora lengths.ipynb:
# a 10-bin histogram from 60 to 1305 tokens, [42516, 8250, 983, 191, 35, 16, 9, 0, 1, 1]); drawn uniformly
# within each 124.5-token bin, so the lengths are continuous as a real dataset's are
TAIL_EDGES = (60.0, 1305.0)
TAIL_COUNTS = (42516, 8250, 983, 191, 35, 16, 9, 0, 1, 1)
TAIL_SEQ = 1305
SHAPES = [  # (hidden, layers, method, checkpointing, micro-batch)
    (1024, 2, "full", "none", 4), (1024, 8, "lora", "none", 2), (1024, 8, "lora", "full", 2),
    (4096, 4, "lora", "none", 2), (4096, 4, "lora", "full", 2)]
SHAPE_LENS = (300, 600, 900, 1305)


def shape_model(h: int, layers: int) -> dict:
    if h == 1024:
        return {**MODEL, "num_hidden_layers": layers}
    return {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": layers, "num_attention_heads": 32,
            "num_key_value_heads": 32, "head_dim": 128, "intermediate_size": 11008, "vocab_size": 32000,
            "tie_word_embeddings": False}


def shape_plan(shape: tuple, s: int) -> dict:
    h, layers, method, ac, b = shape
    p = {**plan(b, s), "model": shape_model(h, layers), "method": method, "activation_checkpointing": ac}
    if method == "lora":
        p["lora"] = {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]}
    return p


def tail_draw(seed: int):
    import random  # noqa: PLC0415
    rng = random.Random(seed)
    lo, hi = TAIL_EDGES
    w = (hi - lo) / len(TAIL_COUNTS)
    bins = list(range(len(TAIL_COUNTS)))
    return lambda: min(TAIL_SEQ, max(1, int(rng.uniform(*(lambda i: (lo + i * w, lo + (i + 1) * w))(
        rng.choices(bins, TAIL_COUNTS)[0])))))


def shapes(out: pathlib.Path, cache: pathlib.Path, seeds=range(1, 9), steps: int = 1000) -> None:
    """The --shapes fixture: per shape the step's allocated at 0 and TAIL_SEQ tokens, the fixed run's cache,
    the largest logits bytes the trace saw at TAIL_SEQ; per seed the mean batch's x over the run and, per
    checkpoint, the longest batch, the record count, the earlier records' summed x and the replayed
    max_memory_reserved."""
    from tools.memtrace.allocator import Config  # noqa: PLC0415
    from tools.memtrace.runs import family, run, schedule, step_peak  # noqa: PLC0415
    from tools.memtrace.trace import trace  # noqa: PLC0415
    logs = json.loads(cache.read_text()) if cache.exists() else {}
    rows = []
    for shape in SHAPES:
        b = shape[4]
        key = ":".join(map(str, shape))
        for s in SHAPE_LENS:
            if f"{key}:{s}" not in logs:
                ev: list = []
                rep = trace(shape_plan(shape, s), steps=2, events=ev)
                snaps = list(rep["phase_peaks"].values()) + list(rep["marks"].values())
                logs[f"{key}:{s}"] = {"events": ev, "logits": max(x["components"]["logits"] for x in snaps)}
                cache.write_text(json.dumps(logs))
        fam = family({s: [tuple(e) for e in logs[f"{key}:{s}"]["events"]] for s in SHAPE_LENS})
        fixed = run(fam, [TAIL_SEQ] * 3, Config(), checkpoints=())
        row = {"shape": dict(zip(("hidden", "layers", "method", "checkpointing", "b"), shape)),
               "step_peak_at_seq_len": step_peak(fam, TAIL_SEQ), "step_peak_at_0": step_peak(fam, 0),
               "cache": fixed["peak_reserved"] - fixed["peak_allocated"],
               "logits": logs[f"{key}:{TAIL_SEQ}"]["logits"], "runs": []}
        for seed in seeds:
            lens = schedule("padded-longest", steps, b, TAIL_SEQ, tail_draw(seed))
            got = run(fam, lens, Config(), checkpoints=(10, 100, 1000))
            pts, best, recs = {}, 0, []
            for i, n in enumerate(lens, 1):
                if n > best:
                    best = n
                    recs.append(n)
                if i in (10, 100, 1000):
                    pts[str(i)] = {"longest": best, "records": len(recs), "earlier": sum(recs[:-1]) / TAIL_SEQ,
                                   "reserved": got["reserved_after"][i], "step_peak": step_peak(fam, best)}
            row["runs"].append({"seed": seed, "mean": sum(lens) / len(lens) / TAIL_SEQ, "after": pts})
            print(key, seed, {k: round(v["reserved"] / GIB, 3) for k, v in pts.items()}, flush=True)
        rows.append(row)
    out.write_text(json.dumps({"seq_len": TAIL_SEQ, "tail_counts": TAIL_COUNTS, "tail_edges": TAIL_EDGES,
                               "steps": steps, "rows": rows}, indent=1) + "\n")


def segments(shape_i: int, seed: int, cache: pathlib.Path, steps: int = 1000) -> None:
    """The --segments reading: the run through tools/memtrace/runs.py run() with every step a checkpoint and
    alloc_block logged; without a limit nothing is released, so each step's rise of reserved is the segments
    it opened, taken from the log in order."""
    from tools.memtrace.allocator import CachingAllocator  # noqa: PLC0415
    from tools.memtrace.runs import family, run, schedule  # noqa: PLC0415
    logs = json.loads(cache.read_text())
    shape = SHAPES[shape_i]
    key = ":".join(map(str, shape))
    fam = family({s: [tuple(e) for e in logs[f"{key}:{s}"]["events"]] for s in SHAPE_LENS})
    logits = logs[f"{key}:{TAIL_SEQ}"]["logits"]
    lens = schedule("padded-longest", steps, shape[4], TAIL_SEQ, tail_draw(seed))
    opened, alloc_block = [], CachingAllocator._alloc_block

    def logged(self, size, small):
        blk = alloc_block(self, size, small)
        if blk is not None:
            opened.append(blk.size)
        return blk
    CachingAllocator._alloc_block = logged
    try:
        run(fam, [], checkpoints=())                                # the setup alone: how many segments
        j = len(opened)
        opened.clear()
        got = run(fam, lens, checkpoints=range(1, steps + 1))
    finally:
        CachingAllocator._alloc_block = alloc_block
    before, best, other = sum(opened[:j]), 0, 0                    # this run's setup segments
    for i, s in enumerate(lens, 1):
        mine = []
        while before < got["reserved_after"][i]:
            mine.append(opened[j])
            before += opened[j]
            j += 1
        if s > best:
            best = s
            print(f"step {i}: record s={s}, opened {len(mine)} segments "
                  f"{' + '.join(f'{v / MIB:.0f}' for v in mine)} MiB; logits x = {logits * s / TAIL_SEQ / MIB:.0f} MiB")
        else:
            other += sum(mine)
    print(f"other steps opened {other / MIB:.0f} MiB; max_memory_reserved {got['peak_reserved'] / MIB:.0f} MiB")


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
    ap.add_argument("--shapes", type=pathlib.Path, help="write the step-shapes fixture instead of the grid")
    ap.add_argument("--segments", type=int, nargs=2, metavar=("SHAPE", "SEED"),
                    help="print the segments one --shapes run opens (needs the --shapes step logs)")
    a = ap.parse_args(argv)
    a.cache.parent.mkdir(exist_ok=True)
    if a.segments:
        segments(*a.segments, a.cache.parent / "fragmentation_shapes_logs.json")
        return 0
    if a.shapes:
        shapes(a.shapes, a.cache.parent / "fragmentation_shapes_logs.json")
        return 0
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
