"""The page's view model: form values in, every figure the page shows out, as plain text + integers.

One pure function, ``compute(request)``, used twice with the same code: by scripts/build_site.py under
CPython (the default plan is pre-rendered into index.html) and by py/app/worker.py under Pyodide (every
input). assets/app.js only copies the result into the DOM (textContent, attributes, widths).

Bad values: ``Plan.from_dict`` names the first bad key (PlanError.key); that key is put back to its
last good value and the plan parsed again, so every bad field gets its own message and the other
settings still apply.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from zerocalc import DEFAULT_PLAN, Plan, PlanError
from zerocalc.estimate import estimate  # the package attribute is shadowed by this module once imported
from zerocalc.presets import GPUS, MODELS

from zerocalc.units import GIB

from .data_view import lengths_summary, normalise_lengths, reserved_chart

# Component order and labels of the breakdown (estimate key per_gpu.components.<name>).
COMPONENTS = (
    ("weights", "Weights"),
    ("gradients", "Gradients"),
    ("optimizer_states", "Optimizer states"),
    ("activations", "Activations"),
    ("logits", "Logits"),
    ("lora_adapters", "LoRA adapters"),
    ("buffers", "Buffers"),
    ("runtime", "Runtime"),
    ("generator", "Generator (vLLM)"),     # post-training's colocated vLLM (present only where there is one)
)
LABELS = dict(COMPONENTS)
# Whose buffers they are: DeepSpeed's buckets and gathered parameters, FSDP's gathered units, DDP's buckets.
BUFFER_LABELS = {"deepspeed": "DeepSpeed buffers", "fsdp": "FSDP buffers", "ddp": "DDP gradient buckets",
                 "single": "Buffers"}

FAMILY_LABELS = {
    "llama3": "Llama 3", "llama2": "Llama 2", "mistral": "Mistral", "mixtral": "Mixtral (MoE)",
    "qwen2.5": "Qwen 2.5", "qwen3": "Qwen 3", "qwen3_moe": "Qwen 3 MoE", "gemma2": "Gemma 2",
    "gemma3": "Gemma 3", "phi3": "Phi", "deepseek_v3": "DeepSeek (MoE)", "gpt_oss": "gpt-oss (MoE)",
    "olmo2": "OLMo 2", "falcon": "Falcon", "gpt2": "GPT-2", "bert": "BERT",
}

# Custom-model dimensions the form offers (config.json field names; more come from a pasted config).
CUSTOM_DIMS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "intermediate_size", "vocab_size")

# The run's phases (plan-v1 Extension 5, estimate key run.phases.<name>), in run order, and how the verdict names them.
PHASE_LABELS = {"load": "Load", "init": "Set-up", "step": "Step", "eval": "Eval", "generate": "Generate",
                "save": "Save", "resume": "Reload", "merge": "Merge", "sync": "Sync", "score": "Score"}
PHASE_MOMENTS = {"load": "loading the model", "init": "the engine's set-up", "step": "the training step",
                 "eval": "the first evaluation", "generate": "generation", "save": "the first checkpoint save",
                 "resume": "the optimizer-state reload", "merge": "the merge at the end",
                 "sync": "the weight sync to the generator", "score": "the scoring forwards"}
CHART_W, CHART_H, BAR_W, GAP = 480, 150, 40, 16      # the run chart's SVG user units (viewBox)

MAX_ROUNDS = 32   # error-recovery passes; a plan has fewer keys than this
_DEFAULT_DICT = DEFAULT_PLAN.to_dict()


def gib(n: int | float) -> str:
    """Bytes -> '61.23 GiB' (GiB = 2**30 bytes, the unit nvidia-smi and PyTorch report in)."""
    return f"{n / GIB:,.2f} GiB"


def count(n: int) -> str:
    """Parameter/token counts: 8.03 B, 41.9 M, 65,536."""
    for size, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M")):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,}"


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "0.0%"


# --- plan with per-field recovery ------------------------------------------------------------------


def _get(d: Mapping, path: list[str]) -> tuple[bool, Any]:
    cur: Any = d
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return False, None
        cur = cur[p]
    return True, cur


def _put_back(data: dict, good: dict, key: str) -> bool:
    """Replace ``key`` (dotted) in ``data`` by its value in ``good``; drop it when good has none.
    Falls back to the top-level key (a bad ``model.hidden_size`` puts back the whole model)."""
    parts = key.split(".")
    for depth in range(len(parts), 0, -1):
        path = parts[:depth]
        parent_ok, parent = _get(data, path[:-1])
        if not parent_ok or not isinstance(parent, dict) or path[-1] not in parent:
            continue
        found, value = _get(good, path)
        if found:
            if parent[path[-1]] == value:
                continue
            parent[path[-1]] = json.loads(json.dumps(value))
        else:
            del parent[path[-1]]
        return True
    return False


def parse_with_recovery(data: Any, good: dict | None = None) -> tuple[Plan, dict]:
    """-> (plan, {key: message}). Each bad key takes its last good value (``good``, a full plan dict)."""
    good = good or _DEFAULT_DICT
    if not isinstance(data, Mapping):
        return Plan.from_dict(good), {"plan": "the plan must be a JSON object"}
    work = json.loads(json.dumps(data))
    errors: dict[str, str] = {}
    for _ in range(MAX_ROUNDS):
        try:
            return Plan.from_dict(work), errors
        except PlanError as e:
            key = e.key or "plan"
            errors.setdefault(key, str(e))
            if not _put_back(work, good, key):
                break
    return Plan.from_dict(good), errors


def share_fragment(plan: Plan, full: dict | None = None) -> str:
    """'#plan=<url-encoded JSON of the keys that differ from the default plan>' (plan-v1)."""
    full, base = full or plan.to_dict(), _DEFAULT_DICT
    diff = {k: v for k, v in full.items() if k != "schema" and v != base.get(k)}
    text = json.dumps({"schema": 1, **diff}, separators=(",", ":"))
    return "#plan=" + _quote(text)


_URL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:,{}[]")


def _quote(text: str) -> str:
    """Percent-encode for a URL fragment, as encodeURIComponent would (without urllib.parse, whose
    import costs ~0.2 s in Pyodide)."""
    return "".join(c if c in _URL_SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in text)


# --- the view --------------------------------------------------------------------------------------


def _model_info(plan: Plan) -> dict:
    arch = plan.arch
    if isinstance(plan.model, str):
        name = MODELS[plan.model].name
    else:
        name = str(plan.model.get("name") or arch.name or "Custom model")
    moe = f" · MoE {arch.moe.num_experts}×, top-{arch.moe.experts_per_token}" if arch.moe else ""
    return {"name": name, "detail": f"{arch.num_layers} layers · hidden {arch.hidden_size:,}{moe}",
            "targets": list(arch.linear_names()), "arch": arch}


def _gpu_info(plan: Plan, capacity: int) -> dict:
    world = plan.world_size
    if isinstance(plan.gpu, str):
        g = GPUS[plan.gpu]
        name = g.name
        link = g.interconnect
        bw = g.link_gb_s if g.link_gb_s is not None else g.pcie_gb_s
        link_text = f"{link} · {bw:,.0f} GB/s per GPU each way" if bw else link
    else:
        name = str(plan.gpu.get("name") or "Custom GPU")
        link_text = "link not given"
    nodes = f" on {plan.nodes} nodes" if plan.nodes > 1 else ""
    return {"name": name, "topology": f"{world} × {name}{nodes}",
            "total_vram": capacity * world, "link": link_text}


def run_chart(est: Mapping) -> dict:
    """The run's phases as bars (SVG user units: heights against the larger of the capacity and the run's peak),
    with a plain-text summary for the chart's accessible description."""
    run, cap = est["run"], est["capacity_bytes"]
    top = max(cap, run["device_used_bytes"], 1)
    plot = CHART_H - 40                                  # room for the value above and the label below each bar
    bars = []
    for i, (k, p) in enumerate(run["phases"].items()):
        b = p["device_used_bytes"]
        h = round(plot * b / top, 2)
        bars.append({"key": k, "label": PHASE_LABELS.get(k, k), "bytes": b, "text": gib(b).replace(" GiB", ""),
                     "x": 8 + i * (BAR_W + GAP), "y": round(20 + plot - h, 2), "h": h, "w": BAR_W,
                     "over": b > cap, "peak": k == run["peak_phase"], "note": str(p.get("note", ""))})
    cap_y = round(20 + plot - plot * cap / top, 2)
    parts = [f"{PHASE_LABELS.get(b['key'], b['key'])} {gib(b['bytes'])}" + (" (over capacity)" if b["over"] else "")
             for b in bars]
    summary = (f"Memory per GPU (nvidia-smi) at each moment of the run, against the capacity {gib(cap)}: "
               + "; ".join(parts) + f". The peak is {PHASE_MOMENTS.get(run['peak_phase'], run['peak_phase'])}.")
    peak = next((b for b in bars if b["peak"]), None)
    peak_text = (f"Peak: {PHASE_LABELS.get(peak['key'], peak['key'])} ({PHASE_MOMENTS.get(peak['key'], peak['key'])}), "
                 f"{gib(peak['bytes'])} per GPU" if peak else "")
    return {"bars": bars, "cap_y": cap_y, "width": max(CHART_W, 16 + len(bars) * (BAR_W + GAP)), "height": CHART_H,
            "summary": summary, "peak_text": peak_text}


FRAGMENTATION_FIX = "set expandable_segments or pack"   # plan-v1 Extension 6: allocator / data.lengths fixed


def verdict_text(est: Mapping) -> str:
    """"Fits with ... headroom" over the whole run; "Fits for ~N steps, then fragmentation: ..." when the caching
    allocator's growth over a variable-length run runs the device out by step N although that step's tensors fit
    (run.fragmentation_oom_step: the run's first failure, before a later, longer batch's own shortfall);
    "Fits the step, runs out at the first evaluation: set ..." when only a later phase does not fit; else the
    step's shortfall."""
    cap, run, pg = est["capacity_bytes"], est["run"], est["per_gpu"]
    if run.get("fragmentation_oom_step"):       # the run's first failure: the tensors still fit at that step
        return f"Fits for ~{run['fragmentation_oom_step']} steps, then fragmentation: {FRAGMENTATION_FIX}"
    if est["fits"]:
        return f"Fits with {gib(cap - run['device_used_bytes'])} headroom"
    if pg["device_used_bytes"] <= cap:
        over = next(k for k, p in run["phases"].items() if p["device_used_bytes"] > cap)
        fix = f": {run['fix']}" if run.get("fix") else ""
        return f"Fits the step, runs out at {PHASE_MOMENTS.get(over, over)}{fix}"
    return f"Out of memory by {gib(pg['device_used_bytes'] - cap)}"
STEP_PARTS = (("gemm_s", "GEMMs"), ("attention_s", "attention"), ("memory_bound_s", "memory-bound ops"),
              ("launch_s", "kernel launches"), ("optimizer_s", "optimizer"), ("exposed_comm_s", "exposed communication"),
              ("offload_s", "offload"))


def step_parts(step: Mapping) -> tuple[list[dict], str]:
    """The step block's breakdown as bar segments (plain text; widths in % of the step) and one sentence that
    reads the whole bar out (the bar's accessible name)."""
    bd = step.get("breakdown") or {}
    total = sum(bd.get(k, 0.0) for k, _ in STEP_PARTS) or 1.0
    parts = [{"key": k.removesuffix("_s"), "label": label, "seconds": float(bd.get(k, 0.0)),
              "text": f"{bd.get(k, 0.0):.3g} s", "share": pct(bd.get(k, 0.0), total),
              "width": round(100 * bd.get(k, 0.0) / total, 3)} for k, label in STEP_PARTS if bd.get(k, 0.0) > 0]
    said = "; ".join(f"{p['label']} {p['text']} ({p['share']})" for p in parts)
    return parts, f"Step time {step.get('time_s', 0.0):.3g} s: {said}."


def view(plan: Plan, errors: Mapping[str, str] | None = None) -> dict:
    """Plan -> everything the page shows. Text is plain (the page sets textContent, never HTML)."""
    est = estimate(plan).to_dict()
    pg = est["per_gpu"]
    cap, used = pg["capacity_bytes"], pg["device_used_bytes"]
    model, gpu = _model_info(plan), None
    gpu = _gpu_info(plan, cap)
    comps = pg["components"]
    names = [k for k, _ in COMPONENTS if k in comps] + [k for k in comps if k not in LABELS]
    comp_total = sum(comps.values()) or 1
    scale = max(cap, used, 1)   # the stacked bar's full width: the capacity, or the demand when over
    labels = {**LABELS, "buffers": BUFFER_LABELS[plan.framework]}
    components = [{"key": k, "label": labels.get(k, k.replace("_", " ").capitalize()), "bytes": comps[k],
                   "text": gib(comps[k]), "share": pct(comps[k], comp_total),
                   "width": round(100 * comps[k] / scale, 3)} for k in names]
    fits = bool(est["fits"])
    verdict = verdict_text(est)
    needed = max(used, est["run"]["device_used_bytes"]) if used <= cap else used
    driver = est.get("primary_driver")
    min_gpus = est.get("min_gpus")
    stage = f"ZeRO stage {plan.zero_stage}" if plan.framework == "deepspeed" else plan.framework.upper()
    if min_gpus is None:
        min_text = f"No number of {gpu['name']} GPUs fits this plan at {stage}."
    else:
        min_text = f"At least {min_gpus} × {gpu['name']} fit this plan at {stage}."
    host = est.get("host_per_node_bytes") or 0
    offloaded = plan.offload_optimizer != "none" or plan.offload_params != "none" or plan.activation_offloading
    trainable, total = est["trainable_params"], est["total_params"]

    out = {   # data-out="<estimate key>" -> {text, bytes?}
        "total_params": {"text": count(total)},
        "trainable_params": {"text": count(trainable)},
        "per_gpu.device_used_bytes": {"text": gib(used), "bytes": used},
        "per_gpu.capacity_bytes": {"text": gib(cap), "bytes": cap},
        "per_gpu.peak_allocated_bytes": {"text": gib(pg["peak_allocated_bytes"]),
                                         "bytes": pg["peak_allocated_bytes"]},
        "per_gpu.peak_reserved_bytes": {"text": gib(pg["peak_reserved_bytes"]), "bytes": pg["peak_reserved_bytes"]},
        "fits": {"text": verdict},
        "primary_driver": {"text": LABELS.get(driver, str(driver or "—"))},
        "min_gpus": {"text": "none" if min_gpus is None else str(min_gpus)},
        "host_per_node_bytes": {"text": gib(host), "bytes": host},
        "tokens_per_step": {"text": f"{est['tokens_per_step']:,}"},
        "global_batch_size": {"text": f"{est['global_batch_size']:,}"},
    }
    for c in components:
        out[f"per_gpu.components.{c['key']}"] = {"text": c["text"], "bytes": c["bytes"]}
    views = {   # data-view="<name>" -> {text, bytes?}: derived figures that are not estimate keys
        "model.name": {"text": model["name"]},
        "model.detail": {"text": model["detail"]},
        "cluster.topology": {"text": gpu["topology"]},
        "cluster.total_vram": {"text": gib(gpu["total_vram"]), "bytes": gpu["total_vram"]},
        "cluster.link": {"text": gpu["link"]},
        "trainable.share": {"text": pct(trainable, total)},
        "usage.share": {"text": pct(used, cap)},
        "oom.needed": {"text": gib(needed), "bytes": needed},
        "oom.driver_bytes": {"text": gib(comps.get(driver, 0)), "bytes": comps.get(driver, 0)},
        "oom.min_gpus": {"text": min_text},
        "batch.detail": {"text": f"{plan.micro_batch_size} micro × {plan.gradient_accumulation_steps} accum × "
                                 f"{plan.world_size} GPUs, {plan.seq_len:,} tokens each"},
    }
    parts, said = step_parts(est.get("step") or {})
    views["step.time"] = {"text": f"{(est.get('step') or {}).get('time_s', 0.0):.3g}"}
    views["step.breakdown"] = {"text": said}
    views["data.summary"] = {"text": lengths_summary(plan)}
    warnings = [{"id": str(w.get("id", "")), "severity": str(w.get("severity", "info")),
                 "message": str(w.get("message", "")), "fix": str(w.get("fix") or "")}
                for w in est.get("warnings", [])]
    full = plan.to_dict()
    return {
        "plan": full,
        "errors": dict(errors or {}),
        "share": share_fragment(plan, full),
        "out": out,
        "view": views,
        "components": components,
        "run": run_chart(est),
        "reserved": reserved_chart(est, plan.data.lengths),
        "step_parts": parts,
        "capacity_pct": round(100 * cap / scale, 3),
        "usage_pct": round(100 * used / scale, 3),
        "fits": fits,
        "offloaded": bool(offloaded),
        "warnings": warnings,
        "targets": model["targets"],
        "ds_config": ds_config_text(plan),
        "estimate": est,
    }


def ds_config_text(plan: Plan) -> dict:
    """{'text': pretty JSON, 'note': why there is none} from zerocalc.exports.ds_config."""
    from zerocalc.exports.ds_config import ds_config
    try:
        return {"text": json.dumps(ds_config(plan), indent=2), "note": ""}
    except ValueError as e:   # ExportError: e.g. the plan uses FSDP, not DeepSpeed
        return {"text": "", "note": str(e)}


def fit_targets(plan: Plan) -> Plan:
    """LoRA targets the model does not have at all (a Llama list on GPT-2 after a model switch) become
    every linear of the new model's blocks, which is what the page's checkboxes then show."""
    names = plan.arch.linear_names()
    if not names or any(t in names for t in plan.lora.targets):
        return plan
    lora = plan.to_dict()["lora"]
    return plan.with_changes(lora={**lora, "targets": list(names)})


def compute(request: Mapping) -> dict:
    """{'plan': plan-v1 dict from the form, 'good': last good full plan dict or None} -> view."""
    data, good = request.get("plan", {}), request.get("good") or _DEFAULT_DICT
    pasted = {}
    if isinstance(data, Mapping):   # the data box's pasted lengths -> data.histogram (app/data_view.py)
        data = json.loads(json.dumps(data))
        pasted = normalise_lengths(data, good)
    plan, errors = parse_with_recovery(data, good)
    return view(fit_targets(plan), {**pasted, **errors})
