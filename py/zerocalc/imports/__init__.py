"""Configs in: read the trainer configs users already have (plan-v1 Extension 4).

``import_config(text, plan)`` recognises the format from the content (detect.py) and returns an
ImportResult: the new full plan dict (keys the file does not set keep ``plan``'s values; the trainer's own
defaults where its file relies on them), ``applied`` and ``not_represented`` (every file key it cannot map,
with the reason; every top-level key the file sets is named in one of them), ``detection`` (format,
confidence, candidates with their evidence: detect.py) and ``report`` (report.py: the per-key report the CLI
prints and the page shows). Formats: DeepSpeed ds_config (ds_config.py), HF TrainingArguments /
TRL config JSON (hf_args.py), accelerate config YAML (accelerate_config.py), axolotl YAML (axolotl.py),
LLaMA-Factory YAML (llamafactory.py), torchtune recipe YAML (torchtune.py), ms-swift command lines
(swift_cli.py). Pure: no file or network access;
``loader(path) -> text | None`` lets the caller supply a file a config refers to (a DeepSpeed JSON path).
"""
from __future__ import annotations

from .common import ConfigImportError, ImportResult
from .ds_config import import_ds_config
from .model_config import apply_model_config, import_model_config
from .accelerate_config import import_accelerate
from .axolotl import import_axolotl
from .detect import FORMATS, MAX_BYTES, detect, detect_format, is_json, parse_text
from .report import build_report, name_every_key, report_lines
from .hf_args import import_hf_args
from .llamafactory import import_llamafactory
from .torchtune import import_torchtune
from .swift_cli import import_swift, is_swift_command, parse_swift_command


def import_config(text, plan=None, *, loader=None, fmt: str | None = None, what: str = "config") -> ImportResult:
    """Text (JSON or YAML) of a trainer config -> ImportResult; ``result.to_dict()["format"]`` names the
    format. ConfigImportError (``.key`` names the file key) for bad input. A pasted command line: ms-swift's
    (swift_cli.py), or TRL's, OpenRLHF's, verl's (cmdline.py + commands.py), read by the trainer it launches."""
    if fmt in (None, "ms-swift") and is_swift_command(text):
        # a pasted ms-swift command line (`swift rlhf ...`), not a config file
        cfg = parse_swift_command(text)
        res = import_swift(cfg, plan, loader=loader)
        res.format, res.detection = "ms-swift", {"format": "ms-swift", "confidence": 1.0, "ambiguous": False,
                                                 "candidates": [{"format": "ms-swift", "score": 1.0,
                                                                 "evidence": ["a `swift` command line"],
                                                                 "against": []}]}
        name_every_key({k: v for k, v in cfg.items() if not k.startswith("__")}, res)
        res.report = build_report(res)
        return res
    from .cmdline import looks_like_command
    if isinstance(text, str) and len(text.encode("utf-8")) <= MAX_BYTES and looks_like_command(text):
        from .commands import import_command
        res, cfg, fmt, detection = import_command(text, plan, loader=loader, fmt=fmt)
        res.format, res.detection = fmt, detection
        name_every_key(cfg, res)
        res.report = build_report(res)
        return res
    cfg = parse_text(text, what)
    detection = None
    if not fmt:
        detection = detect_format(cfg)
        fmt = detection["format"]
    if fmt not in FORMATS:
        raise ConfigImportError("format", f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if fmt == "ds_config":
        res = import_ds_config(cfg, plan if plan is not None else {})
    elif fmt in ("hf-training-args", "trl"):
        res = import_hf_args(cfg, plan, loader=loader)
    elif fmt == "accelerate":
        res = import_accelerate(cfg, plan, loader=loader)
    elif fmt == "axolotl":
        res = import_axolotl(cfg, plan, loader=loader)
    elif fmt == "llamafactory":
        res = import_llamafactory(cfg, plan, loader=loader)
    elif fmt == "verl":
        from .verl import import_verl
        res = import_verl(cfg, plan, loader=loader)
    elif fmt == "ms-swift":                   # the same keys as a YAML (`swift rlhf --config x.yaml`)
        res = import_swift({"__command__": "rlhf", **cfg}, plan, loader=loader)
    elif fmt == "openrlhf":
        raise ConfigImportError("format", "OpenRLHF is configured on its command line: paste the command")
    else:
        res = import_torchtune(cfg, plan, text=text if isinstance(text, str) else None, loader=loader)
    res.format = fmt
    res.detection = detection
    if detection and detection["ambiguous"]:
        best, other = detection["candidates"][0], detection["candidates"][1]
        why1, why2 = "; ".join(best["evidence"][:2]), "; ".join(other["evidence"][:2])
        res.warnings.append({"id": "import-format-ambiguous", "severity": "warning",
                             "message": f"the file matches both {fmt} ({why1}) and {other['format']} ({why2}); "
                                        f"read as {fmt} (confidence {detection['confidence']:.2f})"})
    name_every_key(cfg, res)
    res.report = build_report(res)
    return res


def result_dict(res: ImportResult) -> dict:
    """ImportResult -> JSON-able dict with the format, the detection and the per-key report."""
    return res.to_dict()


__all__ = ["import_config", "result_dict", "detect", "detect_format", "build_report", "report_lines", "parse_text", "is_json", "FORMATS", "MAX_BYTES",
           "ConfigImportError", "ImportResult", "import_ds_config", "import_model_config", "apply_model_config"]
