"""Engine vs tracer, per component at the single-GPU peak.

Mapping (tracer -> engine `per_gpu.components`):
  weights           base params (+ QLoRA packed 4-bit storage and its absmax/quant stats)  -> weights
  lora_adapters     LoRA A/B params; for method lora/qlora also the adapters' gradients and
                    optimizer states (the engine books the whole trainable LoRA state there
                    and reports optimizer_states/gradients 0 for them)                -> lora_adapters
  buffers           model buffers (RoPE inv_freq, ...)                                   -> buffers
  gradients         .grad storages live at the peak                                     -> gradients
  optimizer_states  optimizer state tensors (incl. step counters)                       -> optimizer_states
  activations       saved tensors from forward (excl. logits-sized ones) + tensors
                    created by checkpoint recompute in backward                          -> activations
  temporaries       other backward/step transients (not logits-sized)                    -> activations too,
                    unless the engine reports `detail.temporaries`, then compared on their own
  logits            every (.., V)-last-dim tensor of >= b*s*V/2 elements (bf16 logits, fp32 copy,
                    log-softmax, its gradients)                                          -> logits
  peak              tracer peak bytes -> sum of the engine components except `runtime`
                    (runtime = CUDA context, allocator cache, cuBLAS workspace: invisible to a trace)
Tolerance: |engine - trace| <= 3 % of the trace value, with a 2 MiB floor for tiny components
(an allocator-segment's worth; e.g. buffers of a few KiB).
"""
from __future__ import annotations

REL_TOL = 0.03
ABS_FLOOR = 2 * 2**20
COMPARED = ("weights", "lora_adapters", "buffers", "gradients", "optimizer_states", "activations", "logits")


def engine_breakdown(plan: dict) -> dict:
    from zerocalc import Plan  # noqa: PLC0415
    # `from zerocalc import estimate` yields the submodule once zerocalc.estimate has been imported
    # (the package's function name and its module name collide), so take the function from the module
    from zerocalc.estimate import estimate  # noqa: PLC0415
    pg = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]
    comps = dict(pg["components"])
    return {"components": comps, "detail": dict(pg.get("detail", {})),
            "peak": sum(v for k, v in comps.items() if k != "runtime"), "peak_phase": pg.get("peak_phase")}


def trace_targets(res: dict, engine_has_temporaries: bool) -> dict:
    c = dict(res["peak"]["components"])
    t = {k: c.get(k, 0) for k in COMPARED}
    if res["plan"].get("method", "full") in ("lora", "qlora"):
        # only adapters are trainable: their grads and optimizer states are LoRA state for the engine
        t["lora_adapters"] += t["gradients"] + t["optimizer_states"]
        t["gradients"] = t["optimizer_states"] = 0
    if engine_has_temporaries:
        t["temporaries"] = c.get("temporaries", 0)
    else:
        t["activations"] += c.get("temporaries", 0)
    t["peak"] = res["peak_bytes"]
    return t


def fixture_result(row: dict) -> dict:
    """A checked-in fixture row (grid.slim's fields) as the trace result compare() reads."""
    return {"plan": row["plan"], "peak": {"components": row["components"]}, "peak_bytes": row["peak_bytes"],
            "peak_phase": row["peak_phase"], "peak_op": row["peak_op"],
            "saved_activations_forward_end": row["saved_activations_forward_end"],
            "phase_peaks": {k: {"bytes": v} for k, v in row["phase_peaks"].items()}}


def compare(res: dict, eng: dict) -> list[dict]:
    """Rows {name, trace, engine, diff, rel, ok} for each compared component and the peak. The engine books
    torch AdamW's step transients (`optimizer_step_temps`, e.g. foreach's sqrt copy) under buffers; the trace
    sees them as temporaries: they are compared as temporaries. Likewise a tied embedding's gradient while its
    two contributions (lm_head's and the embedding's) are not yet summed into `.grad` (the engine's
    `tied_embedding_grad` moment): the trace sees both as temporaries, the engine books them as gradients; and
    lm_head's contribution waiting for the embedding's under accumulation (`tied_head_grad_pending`)."""
    step_temps = eng["detail"].get("optimizer_step_temps", 0)
    tied = eng["detail"].get("tied_embedding_grad", 0)
    # lm_head's contribution to a tied weight waiting in its AccumulateGrad's input buffer (gradient accumulation):
    # a temporary for the trace (it is added into `.grad`, never becomes it), compared as one
    pending = eng["detail"].get("tied_head_grad_pending", 0)
    has_tmp = "temporaries" in eng["detail"] or bool(step_temps) or bool(tied)
    # at the end of backward both contributions are temporaries; under accumulation (pending booked) the tied
    # weight's `.grad` exists, so the embedding's contribution and lm_head's pending one are (traced:
    # tools/memtrace/golden/head_bwd/*-tied-pure-s128-ga2, the peak at embedding_dense_backward)
    tied_tmp = tied if pending else 2 * tied
    tt = trace_targets(res, has_tmp)
    ev = {k: eng["components"].get(k, 0) for k in COMPARED}
    if has_tmp:
        layer_temps = eng["detail"].get("layer_backward_temps", 0)    # the gradient flowing between layers
        ev["temporaries"] = eng["detail"].get("temporaries", 0) + step_temps + tied_tmp + pending + layer_temps
        ev["buffers"] -= step_temps
        ev["gradients"] -= tied_tmp
        ev["activations"] -= layer_temps
    ev["gradients"] -= pending
    if not has_tmp:
        ev["activations"] += pending                         # the trace's temporaries are folded in there
    ev["peak"] = eng["peak"]
    rows = []
    for k in tt:
        tr, en = int(tt[k]), int(ev[k])
        diff = en - tr
        rel = diff / tr if tr else (0.0 if diff == 0 else float("inf"))
        rows.append({"name": k, "trace": tr, "engine": en, "diff": diff, "rel": rel,
                     "ok": abs(diff) <= max(REL_TOL * tr, ABS_FLOOR)})
    return rows


def format_rows(pid: str, res: dict, eng: dict, rows: list) -> str:
    g = 2**30
    out = [f"{pid}: trace peak in {res['peak_phase']} ({res['peak_op']}), engine peak phase {eng['peak_phase']}",
           f"  {'component':<18}{'trace GiB':>11}{'engine GiB':>12}{'diff GiB':>10}{'rel':>9}  ok"]
    for r in rows:
        rel = f"{100 * r['rel']:+.1f}%" if r["rel"] != float("inf") else "inf"
        out.append(f"  {r['name']:<18}{r['trace'] / g:>11.3f}{r['engine'] / g:>12.3f}{r['diff'] / g:>+10.3f}"
                   f"{rel:>9}  {'ok' if r['ok'] else 'MISS'}")
    tc = res["peak"]["components"]
    out.append("  trace detail at peak (GiB): " + ", ".join(f"{k}={v / g:.3f}" for k, v in tc.items()))
    out.append("  trace saved activations at forward end: "
               f"{res['saved_activations_forward_end'] / g:.3f} GiB; phase peaks: "
               + ", ".join(f"{ph}={s['bytes'] / g:.3f}" for ph, s in res["phase_peaks"].items()))
    out.append("  engine detail (GiB): " + ", ".join(f"{k}={v / g:.3f}" for k, v in eng["detail"].items()
                                                    if isinstance(v, (int, float))))
    return "\n".join(out)


def check_fixture(row: dict) -> tuple[bool, str]:
    """A checked-in fixture row against the engine on its plan: (every component and the peak within tolerance,
    the table format_rows writes), what the family, seq2seq and BART grid tests assert."""
    res = fixture_result(row)
    eng = engine_breakdown(row["plan"])
    rows = compare(res, eng)
    return all(r["ok"] for r in rows), format_rows(row["id"], res, eng, rows)


def compare_results(results: list) -> list[dict]:
    """run_grid() results -> [{id, rows, ok, error}] (engine evaluated on each result's own plan)."""
    out = []
    for res in results:
        if "error" in res:
            out.append({"id": res.get("id"), "rows": [], "ok": False, "error": res["error"]})
            continue
        eng = engine_breakdown(res["plan"])
        rows = compare(res, eng)
        out.append({"id": res.get("id"), "rows": rows, "ok": all(r["ok"] for r in rows), "error": None,
                    "table": format_rows(res.get("id") or "", res, eng, rows)})
    return out
