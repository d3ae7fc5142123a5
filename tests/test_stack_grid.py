"""The engine against the stack grid: the real training step of other trainers and library releases, traced on
fake tensors by tools/memtrace (results in tools/memtrace/golden/stacks/, `make trace-stacks` re-runs them in
pinned venvs). The engine's peak allocated bytes must lie within 3 % of each traced peak. Known deviations are
strict xfails with the mechanism the engine does not reproduce yet (so a fix shows up as XPASS)."""
import json
import pathlib

import pytest

from zerocalc import Plan, estimate

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "stacks"
ROWS = sorted(GRID.glob("*.json"))
KNOWN: dict[str, str] = {     # id -> the mechanism the engine does not reproduce (a strict xfail)
}


def test_the_grid_covers_every_traced_trainer():
    trainers = {json.loads(p.read_text())["plan"].get("stack", {}).get("trainer", "hf-trainer") for p in ROWS}
    assert {"hf-trainer", "custom-loop", "torchtune", "litgpt", "torchtitan"} <= trainers
    assert len(ROWS) >= 25


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_engine_within_3_percent_of_the_traced_peak(path, request):
    row = json.loads(path.read_text())
    if row["id"] in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[row["id"]]))
    traced = row["bytes"]["peak"]["bytes"]
    engine = estimate(Plan.from_dict(row["plan"])).per_gpu.peak_allocated
    assert abs(engine - traced) / traced <= 0.03, (engine / 2**30, traced / 2**30)


def _trace_at_peak(row: dict) -> dict:
    """A stack row in the shape tools.memtrace.compare reads: the components at the traced peak."""
    peak = row["bytes"]["peak"]
    comps = {k: v for k, v in peak.items() if isinstance(v, int) and k not in ("bytes", "step")}
    return {"plan": row["plan"], "peak": {"components": comps}, "peak_bytes": peak["bytes"]}


# per-component deviations where the peak itself is within 3 % (the two peaks fall at different moments)
KNOWN_COMPONENTS: dict[str, str] = {
    "lit-l1b-qlora":
        "LitGPT QLoRA: the traced peak is the end of forward (the 4-bit lm_head dequantized for the last chunk), the "
        "engine's the loss backward, where it counts two 128-position chunk gradients beside that copy: logits "
        "+0.061 GiB at a different moment (the traced backward peak is 7 MB below its forward one)",
}


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_engine_within_3_percent_per_component(path, request):
    """Each component at the peak (weights, adapters, buffers, gradients, optimizer states, activations,
    logits, temporaries) within 3 % of the trace, as the single-GPU tracer grid is held (tools/memtrace/compare.py,
    2 MiB floor for tiny components)."""
    from tools.memtrace.compare import compare, engine_breakdown

    row = json.loads(path.read_text())
    known = KNOWN.get(row["id"]) or KNOWN_COMPONENTS.get(row["id"])
    if known:
        request.applymarker(pytest.mark.xfail(strict=True, reason=known))
    rows = compare(_trace_at_peak(row), engine_breakdown(row["plan"]))
    miss = [f"{r['name']}: trace {r['trace'] / 2**30:.3f} engine {r['engine'] / 2**30:.3f} GiB" for r in rows if not r["ok"]]
    assert not miss, miss
