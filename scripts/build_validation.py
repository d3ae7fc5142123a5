"""Regenerate validation/public.json (and docs/plan-v1.md, the plan format it is written in) from ../shared.

    python scripts/build_validation.py [--shared DIR]   (DIR defaults to ../shared beside the checkout)

The repository keeps its own copy of the published measurements that scripts/fidelity.py scores the
engine against, so a clone with nothing beside it can run `make fidelity`. Per record only its facts
are kept (FIELDS below: the plan, the measured value, what it measures, where it was published and how
the run was mapped to a plan); the records, their order and their values are not changed. Format and
sources: validation/README.md. The records' plans are plan-v1 objects; the contract
(../shared/contracts/plan-v1.md) is copied to docs/plan-v1.md so the README's link to it works in a clone;
the only change is its links to `../reference/`, which become `../data/reference/` (the repository's copy).
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
OUT = ROOT / "validation" / "public.json"
CONTRACT = ROOT / "docs" / "plan-v1.md"

FIELDS = ("id", "source_group", "source_url", "plan", "measured_bytes", "metric", "outcome", "quality",
          "mapping_notes")


def slim_record(rec: dict) -> dict:
    """One record with exactly FIELDS, in that order; a missing field is an error naming it."""
    missing = [k for k in FIELDS if k not in rec]
    if missing:
        raise ValueError(f"record {rec.get('id', '?')!r}: missing field {missing[0]!r}")
    return {k: rec[k] for k in FIELDS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=pathlib.Path, default=SHARED, help="the shared folder (default ../shared)")
    src = ap.parse_args(argv).shared / "validation" / "public.json"
    if not src.is_file():
        print(f"no validation set at {src}", file=sys.stderr)
        return 1
    records = [slim_record(r) for r in json.loads(src.read_text())]
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        print("duplicate record ids in the source", file=sys.stderr)
        return 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    contract = src.parent.parent / "contracts" / "plan-v1.md"
    CONTRACT.parent.mkdir(exist_ok=True)
    CONTRACT.write_text(contract.read_text().replace("../reference/", "../data/reference/"))
    print(f"{len(records)} records -> {OUT.relative_to(ROOT)}; {contract.name} -> {CONTRACT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
