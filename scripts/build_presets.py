"""Regenerate the engine's presets and the repository's reference copy from ../shared/reference/.

    python scripts/build_presets.py [--shared DIR]   (DIR defaults to ../shared beside the checkout)

Writes two things:
- py/zerocalc/presets/{models,gpus}.json: the slim copy the engine ships (only what it computes with,
  plus the source line), so the page loads fast;
- data/reference/{models,gpus}.json: the reference files byte for byte (per record its sources, notes,
  official counts and how they were checked), so a clone with nothing beside it still has them.
  tests/test_presets.py checks the slim copy against this copy; tools/memtrace/hfconfig.py falls back
  to it. See data/README.md.

After the reference's models it appends the repository's own presets, data/presets/checkpoints.json
(current checkpoints whose config.json was cross-checked against a public copy; each with its source,
what was cross-checked, and transformers 5.24's count), so the reference's records stay as they are.
"""
import argparse
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
OUT = ROOT / "py" / "zerocalc" / "presets"
REF_COPY = ROOT / "data" / "reference"
OWN = ROOT / "data" / "presets" / "checkpoints.json"

MODEL_KEYS = ("id", "name", "family", "hf_repo", "model_type", "architecture", "config")
GPU_KEYS = ("id", "name", "vendor", "architecture", "compute_capability", "form_factor",
            "memory_gb_marketed", "memory_mib_reported", "memory_gib_usable", "memory_bandwidth_gb_s",
            "bf16_supported", "fp8_supported", "bf16_dense_tflops", "fp16_dense_tflops", "fp8_dense_tflops",
            "interconnect", "pcie", "typical_gpus_per_node")


def slim_models(ref: dict) -> list[dict]:
    out = []
    for m in ref["models"]:
        rec = {k: m[k] for k in MODEL_KEYS}
        rec["params_total"] = m["params"]["computed_total"]
        rec["params_breakdown"] = m["params"]["computed_breakdown"]
        out.append(rec)
    return out


def slim_own(own: dict, taken: set) -> list[dict]:
    """data/presets/checkpoints.json -> slim records: params_total is transformers 5.24's count."""
    out = []
    for m in own["models"]:
        if m["id"] in taken:
            raise SystemExit(f"{OWN.name}: {m['id']} is already a reference preset")
        if not (m.get("source") and m.get("cross_checked")):
            raise SystemExit(f"{OWN.name}: {m['id']} needs a source and what was cross-checked")
        if sum(m["params"]["breakdown"].values()) != m["params"]["transformers_5_24"]:
            raise SystemExit(f"{OWN.name}: {m['id']}'s breakdown does not add up to its count")
        rec = {k: m[k] for k in MODEL_KEYS}
        rec["params_total"] = m["params"]["transformers_5_24"]
        rec["params_breakdown"] = m["params"]["breakdown"]
        out.append(rec)
        taken.add(m["id"])
    return out


def slim_gpus(ref: dict) -> list[dict]:
    return [{k: g.get(k) for k in GPU_KEYS} for g in ref["gpus"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=pathlib.Path, default=SHARED, help="the shared folder (default ../shared)")
    ref = ap.parse_args(argv).shared / "reference"
    if not ref.is_dir():
        print(f"no reference folder at {ref}", file=sys.stderr)
        return 1
    models = slim_models(json.loads((ref / "models.json").read_text()))
    n_ref = len(models)
    models += slim_own(json.loads(OWN.read_text()), {m["id"] for m in models})
    gpus = slim_gpus(json.loads((ref / "gpus.json").read_text()))
    (OUT / "models.json").write_text(json.dumps(models, indent=1) + "\n")
    (OUT / "gpus.json").write_text(json.dumps(gpus, indent=1) + "\n")
    REF_COPY.mkdir(parents=True, exist_ok=True)
    for name in ("models.json", "gpus.json"):
        shutil.copyfile(ref / name, REF_COPY / name)
    print(f"{len(models)} models ({n_ref} reference + {len(models) - n_ref} {OWN.relative_to(ROOT)}), {len(gpus)} GPUs -> {OUT.relative_to(ROOT)}; "
          f"full copy -> {REF_COPY.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
