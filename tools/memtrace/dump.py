"""Which tensors autograd saves, per module, and their sizes as formulas in b, s, h, kv, I, a, V, r.

SavedRecorder installs saved_tensors_hooks during forward and module pre/post hooks that keep the
path of the running module; the tracker records the producing module and op of every storage.
At forward end, the storages that were saved and are still alive are the saved activations.
`symbolic()` turns a shape into a product of named dims by matching values, so traces for the
formula list use a small config with pairwise distinct dims (see `formula_config`).
"""
from __future__ import annotations

import contextlib
import itertools
import re

import torch

from . import running

_LAYER = re.compile(r"\.(layers|h)\.(\d+)\.")


class SavedRecorder:
    def __init__(self, model):
        self.model = model
        self.stack: list[str] = []
        self.saved: dict[int, dict] = {}
        self.table: list[dict] = []
        self._handles = []
        for name, mod in model.named_modules():
            self._handles.append(mod.register_forward_pre_hook(self._pre(name)))
            self._handles.append(mod.register_forward_hook(self._post(name)))

    def _pre(self, name):
        def hook(mod, args):
            self.stack.append(name)
        return hook

    def _post(self, name):
        def hook(mod, args, out):
            if self.stack and self.stack[-1] == name:
                self.stack.pop()
        return hook

    def where(self) -> str:
        return self.stack[-1] if self.stack else ""

    @contextlib.contextmanager
    def hooks(self):
        tr = running.running()
        tr.where = self.where

        def pack(t):
            key = id(t.untyped_storage())
            if key not in self.saved:
                self.saved[key] = {"saved_in": self.where(), "shape": tuple(t.shape), "dtype": str(t.dtype)}
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def finish(self, tr) -> None:
        tr.where = None
        for h in self._handles:
            h.remove()
        for key, info in self.saved.items():
            rec = tr.live.get(key)
            if rec is None or rec.cat != "act" or rec.nbytes == 0:
                continue
            self.table.append({"saved_in": info["saved_in"], "made_in": rec.where, "op": rec.op,
                               "shape": list(rec.shape), "dtype": rec.dtype.replace("torch.", ""),
                               "nbytes": rec.nbytes, "sub": rec.sub})


ESIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "bool": 1, "uint8": 1, "int8": 1, "int64": 8, "int32": 4}
ORDER = ["b", "s", "k", "a", "n_kv", "hd", "h", "q", "kv", "I", "Ie", "E", "V", "r"]


def start_recording(model, tr) -> "SavedRecorder":
    """A SavedRecorder for an own-code tracer (tune.py, titan.py), with `tr` as the running tracker the
    checkpoint recompute context reads (running.py)."""
    running.start(tr)
    return SavedRecorder(model)


def stop_recording(saved: "SavedRecorder", res: dict) -> dict:
    """Clear the running tracker and add the recorded table to the result."""
    running.stop()
    res["saved_tensors"] = saved.table
    return res


def _factor_dim(v: int, dims: dict):
    """One dim value -> (coef, [symbols]) with the fewest symbols (b/s preferred on ties)."""
    if v == 1:
        return 1, []
    names = list(dims)
    for coef in (1, 2, 3, 4):
        if v % coef:
            continue
        best = None
        for n in range(1, 4):
            for combo in itertools.combinations(names, n):
                p = 1
                for c in combo:
                    p *= dims[c]
                if p * coef == v:
                    score = (n, -sum(c in ("b", "s") for c in combo))
                    if best is None or score < best[0]:
                        best = (score, list(combo))
            if best:
                return coef, best[1]
    return v, []


def symbolic(nbytes: int, shape, dtype: str, dims: dict) -> str:
    """Tensor bytes -> 'c·x·y' from its shape, each dim matched to named dims (values pairwise distinct)."""
    esize = ESIZE.get(dtype, 1)
    numel = 1
    for d in shape:
        numel *= d
    if numel * esize != nbytes:       # a view of a bigger storage: fall back to the raw size
        return f"{nbytes} B"
    coef, syms = esize, []
    for d in shape:
        c, ss = _factor_dim(int(d), dims)
        coef *= c
        syms += ss
    for pair, name in ((("n_kv", "hd"), "kv"), (("a", "hd"), "q" if "q" in dims else "h")):
        while all(p in syms for p in pair) and name in dims:
            for p in pair:
                syms.remove(p)
            syms.append(name)
    syms.sort(key=lambda x: ORDER.index(x) if x in ORDER else 99)
    return "·".join([str(coef)] + syms)


def layer_of(path: str):
    m = _LAYER.search("." + path + ".")
    return int(m.group(2)) if m else None


def saved_summary(table: list) -> str:
    """The saved tensors at forward end (SavedRecorder.table) grouped by the module that saved them (layer
    index folded to N), the op that made them, dtype and shape: one line per group with its count and bytes,
    so two traces (e.g. stack.kbit_prepare true / false) can be compared op by op."""
    groups: dict = {}
    for t in table:
        site = _LAYER.sub(".layers.N.", "." + t["saved_in"] + ".").strip(".")
        made = _LAYER.sub(".layers.N.", "." + (t["made_in"] or "") + ".").strip(".")
        k = (site, made, t["op"], t["dtype"], tuple(t["shape"]))
        n, b = groups.get(k, (0, 0))
        groups[k] = (n + 1, b + t["nbytes"])
    lines = [f"{'MiB':>10} {'n':>4}  saved in | made in | op | dtype | shape"]
    for (site, made, op, dtype, shape), (n, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{b / 2**20:10.2f} {n:4d}  {site} | {made} | {op} | {dtype} | {list(shape)}")
    lines.append(f"{sum(b for _, b in groups.values()) / 2**20:10.2f}       total")
    return "\n".join(lines)
