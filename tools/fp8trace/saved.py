"""What torchao's Float8Linear keeps for backward, per recipe: the bytes autograd saves for one linear's forward,
counted with torch.autograd.graph.saved_tensors_hooks on CPU (Float8LinearConfig emulate=True: the same casts and
saved tensors, the matmul emulated). The fixture for memory/fp8.py (tests/test_fp8.py reads its JSON).

    PYTHONPATH=/path/to/torchao python tools/fp8trace/saved.py [--out tests/data/fp8_saved.json]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch


def _nbytes(t) -> int:
    """Bytes a saved tensor holds: a Float8 training tensor holds its fp8 data (+ a scalar scale)."""
    data = getattr(t, "_data", None)
    if isinstance(data, torch.Tensor):
        return data.numel() * data.element_size()
    return t.numel() * t.element_size()


def saved_bytes(recipe: str | None, tokens: int, d_in: int, d_out: int) -> dict:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    lin = torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False, dtype=torch.bfloat16))
    if recipe:
        cfg = Float8LinearConfig.from_recipe_name(recipe)
        cfg = Float8LinearConfig(**{**cfg.__dict__, "emulate": True})
        convert_to_float8_training(lin, config=cfg)
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16, requires_grad=True)
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), str(getattr(getattr(t, "_data", t), "dtype", t.dtype)), _nbytes(t)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = lin(x)
    y.sum().backward()
    seen, total = set(), 0
    for shape, dtype, b in saved:
        total += b
        seen.add((shape, dtype, b))
    return {"recipe": recipe or "bf16", "tokens": tokens, "d_in": d_in, "d_out": d_out, "saved_bytes": total,
            "saved": sorted(seen)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import torchao
    rows = [saved_bytes(r, 256, 512, 1024) for r in (None, "tensorwise", "rowwise")]
    out = {"torch": torch.__version__, "torchao": torchao.__version__, "rows": rows}
    text = json.dumps(out, indent=1, default=list)
    if args.out:
        open(args.out, "w").write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
