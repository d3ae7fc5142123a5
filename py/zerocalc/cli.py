"""Command line: `zerocalc estimate`, `zerocalc presets`, `zerocalc export`.

Bad input exits 2 with one line naming the key and what is allowed; nothing prints a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .plan import DEFAULT_PLAN, PlanError, parse_plan
from .presets import GPUS, MODELS

from .units import GIB

# Flags that override a key of the plan file: (flag, plan key, kind)
OVERRIDES = (
    ("--model", "model", str), ("--gpu", "gpu", str), ("--gpus-per-node", "gpus_per_node", int),
    ("--nodes", "nodes", int), ("--framework", "framework", str), ("--zero-stage", "zero_stage", int),
    ("--offload-optimizer", "offload_optimizer", str), ("--offload-params", "offload_params", str),
    ("--precision", "precision", str), ("--optimizer", "optimizer", str),
    ("--micro-batch-size", "micro_batch_size", int),
    ("--gradient-accumulation-steps", "gradient_accumulation_steps", int), ("--seq-len", "seq_len", int),
    ("--activation-checkpointing", "activation_checkpointing", str), ("--attention", "attention", str),
    ("--loss", "loss", str), ("--method", "method", str),
    ("--lora-rank", "lora.rank", int), ("--quant-type", "quantization.type", str),
)


class CliError(Exception):
    pass


def _read_plan(path: str | None) -> dict:
    if path is None:
        return {}
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as e:
        raise CliError(f"plan: cannot read {path}: {e.strerror}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"plan: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})")
    if not isinstance(data, dict):
        raise CliError("plan: must be a JSON object")
    return data


def _convert(key: str, raw: str, kind) -> Any:
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise CliError(f"{key}: must be an integer, got {raw!r}")
    return raw


def _set_path(d: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {}) if isinstance(d.get(p, {}), dict) else d
    d[parts[-1]] = value


def build_plan(args) -> Any:
    data = _read_plan(args.plan)
    for flag, key, kind in OVERRIDES:
        raw = getattr(args, flag.lstrip("-").replace("-", "_"))
        if raw is not None:
            _set_path(data, key, _convert(key, raw, kind))
    for item in args.set or ():
        if "=" not in item:
            raise CliError(f"--set: expected key=value, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        _set_path(data, key.strip(), value)
    return parse_plan(data)


RUN_LABELS = {"load": "loading the model", "init": "the engine's set-up", "step": "the training step",
              "eval": "the first evaluation", "generate": "generation", "save": "the first checkpoint save",
              "resume": "the optimizer-state reload", "merge": "the merge at the end",
              "sync": "the weight sync to the generator", "score": "the scoring forwards"}


def _gib(n: int) -> str:
    return f"{n / GIB:8.2f}"


def format_table(est, d: dict | None = None) -> str:
    d = d or est.to_dict()
    pg = d["per_gpu"]
    plan = est.plan
    lines = [
        f"zerocalc  {est.arch.name} on {plan.world_size} x {est.gpu.name} ({plan.framework}"
        + (f" ZeRO-{plan.zero_stage}" if plan.framework == "deepspeed" else "") + f", {plan.precision}, {plan.method})",
        f"peak phase: {pg['peak_phase']}   (GiB = 2^30 bytes)",
        "",
        f"{'per GPU':<28}{'GiB':>8}",
    ]
    total = max(1, pg["device_used_bytes"])
    for name, b in pg["components"].items():
        lines.append(f"  {name:<26}{_gib(b)}  {100 * b / total:5.1f} %")
    lines += [
        f"{'peak allocated':<28}{_gib(pg['peak_allocated_bytes'])}   torch.cuda.max_memory_allocated",
        f"{'peak reserved':<28}{_gib(pg['peak_reserved_bytes'])}   torch.cuda.max_memory_reserved",
        f"{'device used':<28}{_gib(pg['device_used_bytes'])}   nvidia-smi",
        f"{'capacity':<28}{_gib(d['capacity_bytes'])}",
        "",
    ]
    lines += format_run(d)
    lines += format_over_steps(d, plan.data.lengths)
    run = d.get("run")
    head = d["capacity_bytes"] - (run["device_used_bytes"] if run else pg["device_used_bytes"])
    verdict = f"FITS with {head / GIB:.2f} GiB headroom" if d["fits"] else f"OUT OF MEMORY by {-head / GIB:.2f} GiB"
    if run and run.get("fragmentation_oom_step"):   # the first failure: that step's tensors still fit
        verdict = f"FITS for ~{run['fragmentation_oom_step']} steps, then fragmentation: set expandable_segments or pack"
    elif run and not d["fits"] and pg["device_used_bytes"] <= d["capacity_bytes"]:
        over = next(k for k, p in run["phases"].items() if p["device_used_bytes"] > d["capacity_bytes"])
        verdict = f"FITS THE STEP, runs out at {RUN_LABELS[over]}" + (f": {run['fix']}" if run.get("fix") else "")
    lines.append(f"{verdict}; largest part: {d['primary_driver']}; min GPUs at this stage: {d['min_gpus']}")
    lines.append(f"host RAM per node: {d['host_per_node_bytes'] / GIB:.2f} GiB; tokens/step: {d['tokens_per_step']:,}; "
                 f"global batch: {d['global_batch_size']}; trainable: {d['trainable_params']:,} of {d['total_params']:,}")
    if pg["detail"]:
        lines += ["", "detail at the peak:"]
        for name, b in sorted(pg["detail"].items(), key=lambda kv: -kv[1]):
            lines.append(f"  {name:<26}{_gib(b)}")
    lines += format_step(d)
    if d["warnings"]:
        lines += ["", "warnings:"]
        for w in d["warnings"]:
            fix = f" -> {w['fix']}" if w.get("fix") else ""
            lines.append(f"  [{w['severity']}] {w['id']}: {w['message']}{fix}")
    return "\n".join(lines) + "\n"


def format_run(d: dict) -> list[str]:
    """The run block of the estimate table (plan-v1 Extension 5): each phase's peak, and which sets the run's."""
    run = d.get("run")
    if not run:
        return []
    cap = d["capacity_bytes"]
    lines = [f"{'run (whole process)':<28}{'alloc':>8}{'reserved':>10}{'nvidia-smi':>11}{'host':>8}"]
    for name, p in run["phases"].items():
        mark = " <- peak" if name == run["peak_phase"] else ""
        over = "  OVER" if p["device_used_bytes"] > cap else ""
        lines.append(f"  {name:<26}{_gib(p['peak_allocated_bytes'])}{_gib(p['peak_reserved_bytes']):>10}"
                     f"{_gib(p['device_used_bytes']):>11}{_gib(p['host_bytes']):>8}  {p['note']}{mark}{over}")
    return lines + [""]


def format_over_steps(d: dict, lengths: str) -> list[str]:
    """plan-v1 Extension 6, for a plan of variable lengths: max_memory_reserved after 10 / 100 / 1000 / 10000 steps
    (the caching allocator's growth as the batches change shape) and the step by which it runs the device out."""
    run = d.get("run") or {}
    after = run.get("reserved_after_steps")
    if lengths == "fixed" or not after:
        return []
    lines = [f"{'reserved over the run':<28}" + "".join(f"{n + ' st':>10}" for n in after),
             f"  {'data.lengths ' + lengths:<26}" + "".join(f"{_gib(b):>10}" for b in after.values())]
    n = run.get("fragmentation_oom_step")
    lines.append(f"  fragmentation runs the device out by step {n}: set expandable_segments or pack" if n
                 else "  no fragmentation out-of-memory within 10000 steps")
    return lines + [""]


def format_step(d: dict) -> list[str]:
    """The step block of the estimate table (plan-v1 Extension 2)."""
    st, comm = d.get("step"), d.get("communication") or {}
    if not st:
        return []
    lines = ["", f"step: {st['time_s']:.3f} s   {st['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU   "
                 f"MFU {100 * st['mfu']:.1f} % (assumed hardware efficiency {100 * st['hardware_efficiency']:.0f} % "
                 f"of {st['peak_tflops']:.0f} TFLOP/s)",
             f"  compute {st['compute_s']:.3f} s + exposed communication {st['exposed_communication_s']:.3f} s "
             f"(of {st['communication_s']:.3f} s) + offload {st['offload_s']:.3f} s",
             f"  efficiency: {st['efficiency_source']}"]
    for name, c in comm.items():
        lines.append(f"  {name:<15}{c['bytes'] / GIB:9.2f} GiB/step over {c['link']:<8}{c['time_s']:8.3f} s")
    net = st["network"]
    lines.append(f"  network: {net['gbps_per_gpu']:g} Gb/s per GPU {net['kind']}"
                 + (" (default)" if net["defaulted"] else ""))
    tr = st.get("train")
    if tr:
        cost = f", cost {tr['cost']:,.2f}" if tr["cost"] is not None else ""
        lines.append(f"  {tr['tokens']:,.0f} tokens: {tr['time_s'] / 3600:,.2f} h, {tr['gpu_hours']:,.1f} GPU-hours{cost}")
    lines += [f"  note: {n}" for n in st.get("notes", ())]
    return lines


def _with_train(est, args) -> dict:
    """estimate dict, its step recomputed when --train-tokens / --price-per-gpu-hour are given."""
    d = est.to_dict()
    tokens, price = getattr(args, "train_tokens", None), getattr(args, "price_per_gpu_hour", None)
    for key, v in (("train_tokens", tokens), ("price_per_gpu_hour", price)):
        if v is not None and not v >= 0:
            raise CliError(f"{key}: must be a number >= 0, got {v}")
    if price is not None and tokens is None:
        raise CliError("price_per_gpu_hour: needs --train-tokens (the cost is of training that many tokens)")
    if tokens is not None:
        from dataclasses import replace
        d.update(replace(est.step, train_tokens=tokens, price_per_gpu_hour=price).to_dict())
    return d


def format_fit(d: dict) -> str:
    """`zerocalc fit` as a table."""
    def g(n):
        return f"{n / GIB:7.2f}"
    lines = [f"plan: {'fits' if d['fits'] else 'OUT OF MEMORY'} at {g(d['device_used_bytes']).strip()} GiB, "
             f"{d['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU",
             f"max micro-batch: {d['max_micro_batch_size']}   " + (
                 f"max completion length: {d['max_completion_len']}" if "max_completion_len" in d
                 else f"max sequence length: {d['max_seq_len']}")
             + (f"   max vLLM gpu_memory_utilization: {d['max_gpu_memory_utilization']}"
                if "max_gpu_memory_utilization" in d else ""),
             "min GPUs by stage: " + ", ".join(f"{k}: {v}" for k, v in d["min_gpus"].items()), "",
             f"{'#':>2}  {'fits':<4} {'GiB':>7} {'tokens/s/GPU':>13} {'step s':>8}  change"]
    # a plan of variable lengths (Extension 6): its data / allocator options, and every row's reserved after 1000 steps
    runs = any(k in o["changes"] for o in d["options"] for k in ("data", "allocator"))
    if runs:
        lines[0] += (f"; reserved after 1000 steps {g(d['reserved_after_1000_bytes']).strip()} GiB"
                     + (f", fragmentation OOM by step {d['fragmentation_oom_step']}" if d["fragmentation_oom_step"]
                        else ""))
        lines[-1] = lines[-1].replace("  change", f" {'1000 st':>7}  change")
    for i, o in enumerate(d["options"], 1):
        own = "data" in o["changes"] or "allocator" in o["changes"]
        ch = o["label"] if own else ", ".join(f"{k}={v}" for k, v in o["changes"].items())
        r1000 = o.get("reserved_after_1000_bytes")
        after = (f" {g(r1000)}" if r1000 is not None else " " * 8) if runs else ""
        lines.append(f"{i:>2}  {'yes' if o['fits'] else 'no':<4} {g(o['device_used_bytes'])} "
                     f"{o['tokens_per_s_per_gpu']:13,.0f} {o['step_time_s']:8.3f}{after}  {ch}")
    return "\n".join(lines) + "\n"


def _cmd_fit(args) -> int:
    from .fit import fit
    d = fit(build_plan(args)).to_dict()
    sys.stdout.write(json.dumps(d, indent=2) + "\n" if args.format == "json" else format_fit(d))
    return 0


def _cmd_estimate(args) -> int:
    from .estimate import estimate
    est = estimate(build_plan(args))
    if getattr(args, "train_tokens", None) is not None or getattr(args, "price_per_gpu_hour", None) is not None:
        d = _with_train(est, args)
        if args.format == "json":
            sys.stdout.write(json.dumps(d, indent=2) + "\n")
        else:
            sys.stdout.write(format_table(est, d))
        return 0
    if args.format == "json":
        sys.stdout.write(json.dumps(est.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(format_table(est))
    return 0


def _cmd_presets(args) -> int:
    if args.kind == "models":
        for m in MODELS.values():
            print(f"{m.id:<22} {m.params_total / 1e9:8.2f}B  {m.name}")
    else:
        for g in GPUS.values():
            print(f"{g.id:<18} {g.memory_bytes / GIB:7.2f} GiB  {g.name}")
    return 0


def _cmd_export(args) -> int:
    from .exports import ExportError, run_export
    plan = build_plan(args)
    try:
        sys.stdout.write(run_export(plan, args.to, args.style))
    except ExportError as e:
        raise CliError(str(e))
    return 0


def _cmd_import(args) -> int:
    """Read a ds_config.json into the plan: print the new plan, and on stderr what was not represented."""
    from .imports import ConfigImportError, import_ds_config
    plan = build_plan(args)
    if args.config:
        return _cmd_import_config(args, plan)
    try:
        text = open(args.ds, encoding="utf-8").read()
    except OSError as e:
        raise CliError(f"ds: cannot read {args.ds}: {e.strerror}")
    try:
        res = import_ds_config(text, plan)
    except ConfigImportError as e:
        raise CliError(str(e))
    sys.stdout.write(json.dumps(res.plan, indent=2) + "\n")
    for item in res.not_represented:
        print(f"not in the plan: {item['key']} ({item['reason']})", file=sys.stderr)
    for w in res.warnings:
        print(f"[{w['severity']}] {w['id']}: {w['message']}", file=sys.stderr)
    return 0


def _cmd_doctor(args) -> int:
    """Read a crash log (file or - for stdin) and, with --plan, set it against the plan's estimate."""
    from .doctor import diagnose
    from .doctor.table import format_table as doctor_table
    try:
        raw = sys.stdin.buffer.read() if args.log == "-" else open(args.log, "rb").read()
    except OSError as e:
        raise CliError(f"log: cannot read {args.log}: {e.strerror}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"log: not UTF-8 text (byte {e.start})")
    plan = parse_plan(_read_plan(args.plan)) if args.plan else None
    d = diagnose(text, plan).to_dict()
    sys.stdout.write(json.dumps(d, indent=2) + "\n" if args.format == "json" else doctor_table(d))
    return 0


def _cmd_import_config(args, plan) -> int:
    """`zerocalc import --config FILE`: any trainer config (format from the content); a DeepSpeed JSON the
    file names is read from beside it (or as given) when it exists."""
    import os
    from .imports import MAX_BYTES, ConfigImportError, import_config
    path = args.config
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise CliError(f"{path}: is {os.path.getsize(path) // 1024} KB; configs over {MAX_BYTES // 1024} KB "
                           "are refused")
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise CliError(f"config: cannot read {path}: {e.strerror}")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text")

    def loader(ref):
        for cand in (os.path.join(os.path.dirname(os.path.abspath(path)), ref), ref,
                     os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(ref))):
            if os.path.isfile(cand):
                with open(cand, encoding="utf-8") as f:
                    return f.read()
        return None

    try:
        res = import_config(text, plan.to_dict(), loader=loader, what=path)
    except ConfigImportError as e:
        raise CliError(str(e))
    sys.stdout.write(json.dumps(res.plan, indent=2) + "\n")
    from .imports import report_lines  # format + confidence, candidates, counts, one line per unmapped key
    for line in report_lines(res):
        print(line, file=sys.stderr)
    for w in res.warnings:
        print(f"[{w['severity']}] {w['id']}: {w['message']}", file=sys.stderr)
    return 0


def _add_plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", help="plan-v1 JSON file, or - for stdin (every key optional)")
    for flag, key, _ in OVERRIDES:
        p.add_argument(flag, metavar="VALUE", help=f"override plan key {key}")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any plan key (dotted, JSON value), e.g. deepspeed.overlap_comm=true")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2), like every other bad input."""

    def error(self, message):
        self.exit(2, f"zerocalc: {message}\n")


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="zerocalc", description="GPU memory planner for LLM training "
                                 "(DeepSpeed ZeRO, FSDP, DDP, LoRA/QLoRA). All sizes in GiB = 2^30 bytes.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("estimate", help="per-GPU and per-node memory of a plan")
    _add_plan_args(e)
    e.add_argument("--format", choices=("table", "json"), default="table")
    e.add_argument("--train-tokens", type=float, metavar="N", help="tokens to train: time, GPU-hours (and cost)")
    e.add_argument("--price-per-gpu-hour", type=float, metavar="PRICE", help="cost of one GPU-hour (no default)")
    e.set_defaults(fn=_cmd_estimate)
    ft = sub.add_parser("fit", help="what fits: max micro-batch and sequence, min GPUs per stage, ranked options")
    _add_plan_args(ft)
    ft.add_argument("--format", choices=("table", "json"), default="table")
    ft.set_defaults(fn=_cmd_fit)
    pr = sub.add_parser("presets", help="list model or GPU presets")
    pr.add_argument("kind", choices=("models", "gpus"))
    pr.set_defaults(fn=_cmd_presets)
    x = sub.add_parser("export", help="write ds_config / HF / PEFT / accelerate / launch settings for a plan")
    _add_plan_args(x)
    x.add_argument("--to", required=True, choices=("ds", "hf", "peft", "accelerate", "launch", "axolotl",
                                                   "llamafactory", "torchtune", "litgpt", "torchtitan", "trl",
                                                   "verl"))
    x.add_argument("--style", choices=("explicit", "auto"), default="explicit",
                   help="ds_config with numbers, or with the keys the HF integration fills left as auto")
    x.set_defaults(fn=_cmd_export)
    im = sub.add_parser("import", help="read a trainer config or ds_config.json into a plan (prints the plan JSON)")
    _add_plan_args(im)
    src = im.add_mutually_exclusive_group(required=True)
    src.add_argument("--ds", metavar="FILE", help="ds_config.json, explicit or HF auto")
    src.add_argument("--config", metavar="FILE", help="axolotl / LLaMA-Factory / torchtune YAML, accelerate config, "
                     "TrainingArguments / TRL JSON or ds_config (format from the content)")
    im.set_defaults(fn=_cmd_import)
    dr = sub.add_parser("doctor", help="read a CUDA OOM / host-kill / NCCL crash log: cause, numbers, what to change")
    dr.add_argument("--log", required=True, metavar="FILE", help="the pasted log, or - for stdin")
    dr.add_argument("--plan", help="plan-v1 JSON file the run used (findings then compare with its estimate)")
    dr.add_argument("--format", choices=("table", "json"), default="table")
    dr.set_defaults(fn=_cmd_doctor)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:           # argparse already printed its one-line usage error
        return int(e.code or 0)
    try:
        return args.fn(args)
    except (PlanError, CliError) as e:
        print(f"zerocalc: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_plan", "format_table", "DEFAULT_PLAN"]
