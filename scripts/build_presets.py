"""Regenerate py/zerocalc/presets/{models,gpus}.json from ../shared/reference/.

The engine ships a slim copy (only what it computes with, plus the source line) so the page loads
fast; tests/test_presets.py checks the copy against the reference when ../shared is present.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
REF = ROOT.parent / "shared" / "reference"
OUT = ROOT / "py" / "zerocalc" / "presets"

MODEL_KEYS = ("id", "name", "family", "hf_repo", "model_type", "architecture", "config")
GPU_KEYS = ("id", "name", "vendor", "architecture", "compute_capability", "form_factor",
            "memory_gb_marketed", "memory_mib_reported", "memory_gib_usable", "memory_bandwidth_gb_s",
            "bf16_supported", "fp8_supported", "bf16_dense_tflops", "fp16_dense_tflops",
            "interconnect", "pcie", "typical_gpus_per_node")


def slim_models(ref: dict) -> list[dict]:
    out = []
    for m in ref["models"]:
        rec = {k: m[k] for k in MODEL_KEYS}
        rec["params_total"] = m["params"]["computed_total"]
        rec["params_breakdown"] = m["params"]["computed_breakdown"]
        out.append(rec)
    return out


def slim_gpus(ref: dict) -> list[dict]:
    return [{k: g.get(k) for k in GPU_KEYS} for g in ref["gpus"]]


def main() -> int:
    if not REF.is_dir():
        print(f"no reference folder at {REF}", file=sys.stderr)
        return 1
    models = slim_models(json.loads((REF / "models.json").read_text()))
    gpus = slim_gpus(json.loads((REF / "gpus.json").read_text()))
    (OUT / "models.json").write_text(json.dumps(models, indent=1) + "\n")
    (OUT / "gpus.json").write_text(json.dumps(gpus, indent=1) + "\n")
    print(f"{len(models)} models, {len(gpus)} GPUs -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
