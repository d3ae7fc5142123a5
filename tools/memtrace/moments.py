"""The layer-by-layer backward moments of a traced step: the live bytes at each op, folded into the moments
the engine's phases name (py/zerocalc/memory/terms.py).

    python -m tools.memtrace.moments [--only ID,...]     trace MOMENTS, write golden/moments/<id>.json

trace.py reports one peak per tracker phase (forward, backward, recompute, step), so the top layer's
recompute, the bottom layer's and the end of backward share one number. This traces the same step and
records the live total after every op of the last traced step's backward, then splits it where the tracker's
phase changes: with full checkpointing backward alternates recompute / backward segments, one pair per
layer, the first pair being the top layer's and the last the bottom layer's (HF's checkpointed decoder
layers, use_reentrant=False). The moments, each the largest live total in its segments:
  recompute_top      the top layer's recompute and its backward (engine: recompute_top)
  recompute_last     the bottom layer's recompute (engine: recompute)
  end_of_backward    the bottom layer's backward and the embedding's (engine: bwd_end)
Without checkpointing there is one backward segment; end_of_backward is then its last 5 % of ops.
"""
from __future__ import annotations

import json
import os
import sys

from .grid import _p, plan_of

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "moments")

# gradient accumulation 2: every micro-step after the first finds the earlier ones' gradients in .grad
MOMENTS = [
    _p("l1b-full-mixed-gc-ga2", "llama-3.2-1b", ckpt="full", ga=2),
    _p("l1b-lora-mixed-gc-ga2", "llama-3.2-1b", "lora", ckpt="full", ga=2),
    _p("l1b-full-mixed-ga2", "llama-3.2-1b", ga=2),
]


def _segments(log: list) -> list:
    """[(phase, [live total after each op])], a new segment wherever the phase changes."""
    segs: list = []
    for phase, total in log:
        if not segs or segs[-1][0] != phase:
            segs.append((phase, []))
        segs[-1][1].append(total)
    return segs


def fold(log: list) -> dict:
    """The moments (bytes) of one backward's op log [(phase, live total)]."""
    segs = _segments(log)
    rec = [i for i, (ph, _) in enumerate(segs) if ph == "recompute"]
    if not rec:
        tail = segs[-1][1]
        return {"end_of_backward": max(tail[int(len(tail) * 0.95):])}
    return {"recompute_top": max(max(segs[rec[0]][1]), max(segs[rec[0] + 1][1], default=0)),
            "recompute_last": max(segs[rec[-1]][1]),
            "end_of_backward": max(v for _, s in segs[rec[-1] + 1:] for v in s)}


def trace_moments(plan: dict) -> dict:
    """Trace `plan` (trace.py, two steps) and fold its last step's backward into moments."""
    from . import tracker as T  # noqa: PLC0415
    from .trace import trace  # noqa: PLC0415
    log: list = []
    dispatch, begin = T.StorageTracker.__torch_dispatch__, T.StorageTracker.begin_step

    def logged(self, func, types, args=(), kwargs=None):
        out = dispatch(self, func, types, args, kwargs)
        if self.phase in ("backward", "recompute"):
            log.append((self.phase, self.total))
        return out

    def fresh(self):
        log.clear()       # only the last step's backward is kept
        return begin(self)

    T.StorageTracker.__torch_dispatch__, T.StorageTracker.begin_step = logged, fresh
    try:
        res = trace(plan)
    finally:
        T.StorageTracker.__torch_dispatch__, T.StorageTracker.begin_step = dispatch, begin
    return {"peak_bytes": res["peak_bytes"], "phase_peaks": {k: v["bytes"] for k, v in res["phase_peaks"].items()},
            "moments": fold(log)}


def main(argv: list) -> int:
    import warnings  # noqa: PLC0415
    warnings.filterwarnings("ignore")
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    os.makedirs(OUT, exist_ok=True)
    for entry in MOMENTS:
        if only and entry["id"] not in only:
            continue
        import torch, transformers, peft  # noqa: E401, PLC0415
        row = {"id": entry["id"], "plan": plan_of(entry),
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "peft": peft.__version__}, **trace_moments(plan_of(entry))}
        with open(os.path.join(OUT, entry["id"] + ".json"), "w") as f:
            json.dump(row, f, indent=1)
        print(entry["id"], {k: round(v / 2**30, 3) for k, v in row["moments"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
