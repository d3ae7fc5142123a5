"""Launch one probe run: N CPU ranks with torch.multiprocessing.spawn, collect each rank's JSON.

A fresh MASTER_PORT per run (TIME_WAIT after a previous run, docs/deepspeed-cpu.md §5). JIT-built DeepSpeed ops
(shm_comm, built inside init_distributed) are cached in TORCH_EXTENSIONS_DIR, by default
<repo>/.torch_extensions (git-ignored), so a CI run builds them once.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, spec, port, outdir, ext_dir):
    # DeepSpeed and gloo print to the process's fds: keep them in a per-rank log (shown on failure).
    fd = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from tools.dsprobe.worker import run_rank

    run_rank(rank, spec, port, outdir, ext_dir)


SHM_DIR = Path("/dev/shm")


def remove_shm_buffers(port: int) -> None:
    """DeepSpeed's CPU shm_comm op (built inside init_distributed) leaves a 66 MiB shared-memory file per
    rank, `deepspeed_allreduce_buffer_<i>_<addr>_<port>_<rank>`, that nothing deletes: a grid of runs
    would fill /dev/shm (RAM) until the OOM killer stops the ranks. Remove this run's files."""
    for f in SHM_DIR.glob(f"deepspeed_allreduce_buffer_*_{port}_*"):
        try:
            f.unlink()
        except OSError:
            pass


def run_spec(spec: dict, ext_dir: str | None = None) -> dict:
    """Run the probe for a spec (spec.build_spec) and return {"spec", "ranks": [per-rank dict], "wall_s"}."""
    ext_dir = ext_dir or os.environ.get("TORCH_EXTENSIONS_DIR") or str(REPO / ".torch_extensions")
    os.makedirs(ext_dir, exist_ok=True)
    t0 = time.perf_counter()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dsprobe-") as out:
        try:
            ranks = spawn_ranks(_entry, (spec, port, out, ext_dir), spec["world"], out)
        finally:
            remove_shm_buffers(port)
    return {"spec": spec, "ranks": ranks, "wall_s": round(time.perf_counter() - t0, 1)}


def spawn_ranks(entry, args: tuple, world: int, out: str) -> list[dict]:
    """torch.multiprocessing.spawn `world` ranks of entry(rank, *args); each writes <out>/rank<r>.json and
    logs to rank<r>.log, whose tail is printed when a rank fails."""
    import torch.multiprocessing as mp

    try:
        mp.spawn(entry, args=args, nprocs=world, join=True)
    except Exception:
        for r in range(world):
            log = Path(out, f"rank{r}.log")
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-25:]
                print(f"--- rank {r} log (tail) ---", *tail, sep="\n", file=sys.stderr)
        raise
    return [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(world)]
