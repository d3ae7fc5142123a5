"""Launch one FSDP probe run on N CPU ranks (torch.multiprocessing.spawn) and collect each rank's JSON."""
from __future__ import annotations

import os
import tempfile
import time

from tools.dsprobe.runner import free_port, spawn_ranks


def _entry(rank, spec, port, outdir):
    fd = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from tools.fsdpprobe.worker import run_rank

    run_rank(rank, spec, port, outdir)


def run_spec(spec: dict) -> dict:
    """{"spec", "ranks": [per-rank dict], "wall_s"} for a spec (spec.build_spec)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsdpprobe-") as out:
        ranks = spawn_ranks(_entry, (spec, free_port(), out), spec["world"], out)
    return {"spec": spec, "ranks": ranks, "wall_s": round(time.perf_counter() - t0, 1)}
