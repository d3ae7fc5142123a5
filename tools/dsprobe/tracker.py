"""Storage tracker: every CPU storage created while the mode is active, with size, dtype, site and phase.

Measured, not modelled. A ``TorchDispatchMode`` sees each aten op (forward, autograd backward on the CPU
thread, DeepSpeed's own ``torch.empty``/``zeros``/``cat``/``.to``); a new output storage is recorded once,
and a ``weakref.finalize`` on the storage records its release. The event log (alloc/free in order, with
phase marks) is replayed afterwards, once every record has its final label, to get exact per-label and
per-phase peaks (labels are only known after the engine built its buffers; see labels.py).

Adapted from the spike in docs/deepspeed-cpu.md §1 (tracker B of docs/tracer.md).
"""
from __future__ import annotations

import sys
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_SKIP_DIRS = ("/torch/", "/tools/dsprobe/", "/tools/fsdpprobe/", "/contextlib.py", "/functools.py", "/deepspeed/utils/nvtx.py",
              "/typing_extensions.py")


class Rec:
    """One storage: bytes, dtype, allocating op and source site, phase at allocation, label (set later)."""

    __slots__ = ("key", "nbytes", "dtype", "op", "site", "phase", "label", "freed", "__weakref__")

    def __init__(self, key, nbytes, dtype, op, site, phase):
        self.key, self.nbytes, self.dtype, self.op, self.site, self.phase = key, nbytes, dtype, op, site, phase
        self.label = None
        self.freed = False

    def to_dict(self):
        return {"nbytes": self.nbytes, "dtype": str(self.dtype).replace("torch.", ""), "op": self.op,
                "site": self.site, "phase": self.phase, "label": self.label}


def _site() -> str:
    """Innermost Python frame outside torch and this package: 'pkg/file.py:line:function'."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename.replace("\\", "/")
        if not any(s in fn for s in _SKIP_DIRS):
            for root in ("/deepspeed/", "/transformers/", "/peft/", "/accelerate/"):
                i = fn.rfind(root)
                if i >= 0:
                    fn = fn[i + 1:]
                    break
            else:
                fn = fn.rsplit("/", 1)[-1]
            return f"{fn}:{f.f_lineno}:{f.f_code.co_name}"
        f = f.f_back
    return "?"


class StorageTracker(TorchDispatchMode):
    """Records CPU storages. ``events`` is [(+1|-1, Rec)], ``marks`` is [(event_index, phase)]."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, Rec] = {}
        self.events: list[tuple[int, Rec]] = []
        self.marks: list[tuple[int, str]] = [(0, "init")]
        self.phase = "init"
        self.suspended = False        # host.py: a host copy is being made (not a device storage)
        self.host_log: list = []   # (event index, marks so far, +bytes | -bytes) of host copies (host.py)
        self.host_keys: set = set()   # storages that are host copies: what an op makes from them is host too

    # -- phases -------------------------------------------------------------------------------
    def mark(self, phase: str) -> None:
        self.phase = phase
        self.marks.append((len(self.events), phase))

    # -- recording ----------------------------------------------------------------------------
    def _free(self, key: int) -> None:
        rec = self.live.pop(key, None)
        if rec is not None and not rec.freed:
            rec.freed = True
            self.events.append((-1, rec))

    def _add(self, t: torch.Tensor, op: str) -> None:
        if self.suspended:
            return
        st = t.untyped_storage()
        key = st._cdata
        if key in self.live or st.nbytes() == 0:
            return
        rec = Rec(key, st.nbytes(), t.dtype, op, _site(), self.phase)
        self.live[key] = rec
        self.events.append((1, rec))
        weakref.finalize(st, self._free, key)

    def adopt(self, t: torch.Tensor, op: str = "preexisting") -> None:
        """Record a storage created outside the mode (e.g. before it was entered)."""
        if isinstance(t, torch.Tensor) and t.device.type == "cpu" and not t.is_meta:
            self._add(t, op)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.host_keys and any(isinstance(a, torch.Tensor) and a.device.type == "cpu" and not a.is_meta
                                  and a.untyped_storage()._cdata in self.host_keys for a in tree_leaves(args)):
            from .host import host_outputs  # noqa: PLC0415
            return host_outputs(self, func, args, kwargs)
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                try:
                    self._add(t, func.__name__)
                except (RuntimeError, NotImplementedError):  # sparse / storage-less tensors
                    pass
        return out

    # -- lookup -------------------------------------------------------------------------------
    def rec_of(self, t: torch.Tensor) -> Rec | None:
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return None
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return None
        return self.live.get(st._cdata)
