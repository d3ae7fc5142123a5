"""Launch one FSDP probe run on N CPU ranks (torch.multiprocessing.spawn) and collect each rank's JSON."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tools.dsprobe.runner import free_port


def _entry(rank, spec, port, outdir):
    fd = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from tools.fsdpprobe.worker import run_rank

    run_rank(rank, spec, port, outdir)


def run_spec(spec: dict) -> dict:
    """{"spec", "ranks": [per-rank dict], "wall_s"} for a spec (spec.build_spec)."""
    import torch.multiprocessing as mp

    t0 = time.perf_counter()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="fsdpprobe-") as out:
        try:
            mp.spawn(_entry, args=(spec, port, out), nprocs=spec["world"], join=True)
        except Exception:
            for r in range(spec["world"]):
                log = Path(out, f"rank{r}.log")
                if log.exists():
                    tail = log.read_text(errors="replace").splitlines()[-25:]
                    print(f"--- rank {r} log (tail) ---", *tail, sep="\n", file=sys.stderr)
            raise
        ranks = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(spec["world"])]
    return {"spec": spec, "ranks": ranks, "wall_s": round(time.perf_counter() - t0, 1)}
