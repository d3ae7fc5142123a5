"""The dsprobe storage tracker, plus storage resizes, and the replay into per-phase peaks.

FSDP1 keeps one storage object per unsharded flat parameter and frees it with
``storage.resize_(0)``, re-allocating with ``resize_(n)`` at the next all-gather
(torch.distributed.utils._free_storage/_alloc_storage, also at flat-param init). The base tracker
records a storage's size once, at creation, so those would look alive all the time. Here every live
storage's current size is re-read after each FSDP alloc/free and at phase marks, and each change is
logged as a signed delta event.

FSDP2 keeps its sharded parameters, gradients and the optimizer states of them as DTensors: wrapper
subclasses whose own storage reports the global size but holds nothing. The tracker sees the op that
produced the DTensor (a dispatch mode runs before the subclass) and records the local tensors inside it
(__tensor_flatten__) instead.
"""
from __future__ import annotations

import weakref

import torch

from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from tools.dsprobe.tracker import Rec, StorageTracker


class ResizeTracker(StorageTracker):
    def __init__(self):
        super().__init__()
        self._ref: dict[int, weakref.ref] = {}
        self._size: dict[int, int] = {}

    def _add(self, t, op):
        if is_traceable_wrapper_subclass(t):            # a DTensor: its local shard holds the bytes
            for name in t.__tensor_flatten__()[0]:
                inner = getattr(t, name)
                if isinstance(inner, torch.Tensor):
                    self._add(inner, op)
            return
        st = t.untyped_storage()
        key = st._cdata
        if key in self.live or st.nbytes() == 0:
            return
        super()._add(t, op)
        self._ref[key] = weakref.ref(st)
        self._size[key] = st.nbytes()

    def _free(self, key):
        rec = self.live.get(key)
        if rec is not None and self._size.get(key, rec.nbytes) != rec.nbytes:
            # the base record frees its creation size: first undo the resizes logged since
            self.events.append((1, Rec(None, rec.nbytes - self._size[key], rec.dtype, "resize", rec.site,
                                       self.phase)))
        self._ref.pop(key, None)
        self._size.pop(key, None)
        super()._free(key)

    def track(self, t, op: str) -> None:
        """Record a storage that appeared outside dispatch (a resize of an untracked one)."""
        if t.untyped_storage().nbytes():
            self._add(t, op)

    def resync(self) -> None:
        for key, ref in list(self._ref.items()):
            st = ref()
            if st is None or key not in self.live:
                continue
            n = st.nbytes()
            if n != self._size[key]:
                base = self.live[key]
                self.events.append((1, Rec(None, n - self._size[key], base.dtype, "resize", base.site, self.phase)))
                self._size[key] = n

    def mark(self, phase: str) -> None:
        self.resync()
        super().mark(phase)


def phase_stats(tr: StorageTracker) -> dict:
    """{phase: {"peak": bytes, "end": bytes}} from the event log (live bytes of tracked storages)."""
    out: dict[str, dict] = {}
    cur, mi, phase = 0, 0, "init"
    marks = tr.marks
    for i, (sign, rec) in enumerate(tr.events):
        while mi < len(marks) and marks[mi][0] <= i:
            out.setdefault(phase, {"peak": cur, "end": cur})["end"] = cur
            phase = marks[mi][1]
            out.setdefault(phase, {"peak": cur, "end": cur})
            mi += 1
        cur += sign * rec.nbytes
        p = out.setdefault(phase, {"peak": cur, "end": cur})
        p["peak"] = max(p["peak"], cur)
    while mi < len(marks):                    # marks after the last event
        out.setdefault(phase, {"peak": cur, "end": cur})["end"] = cur
        phase = marks[mi][1]
        out.setdefault(phase, {"peak": cur, "end": cur})
        mi += 1
    out.setdefault(phase, {"peak": cur, "end": cur})["end"] = cur
    return out
