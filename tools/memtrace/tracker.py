"""Storage tracker: live bytes per category over one training step on FakeTensors.

A TorchDispatchMode entered inside the FakeTensorMode. Every storage an op outputs is registered
once, with its nbytes, and a weakref finalizer frees it when the last tensor/saved variable goes
away (Python storage objects are kept alive by the tensors, so the finalizer fires exactly then).
Recipe and pitfalls: docs/tracer.md §1g-§1i.

Categories
  weight  parameters and buffers (incl. LoRA adapters and QLoRA packed storage; see `sub`)
  grad    .grad of a parameter (relabelled by a post-accumulate-grad hook)
  opt     optimizer states (relabelled after the warm-up step)
  act     created in forward (what survives forward end is what autograd saved)
  recomp  created while a checkpointed layer is recomputed in backward (saved for its backward)
  temp    created in backward (outside recompute) or in the optimizer step
Every storage also carries a `logits` flag when its tensor is (b, s, V)-sized with last dim V,
so the logits / loss tensors can be reported apart from the decoder activations.

Event log: every counted storage's allocation and free, in order (`events`), which
tools/memtrace/allocator.py replays through the CUDA caching allocator's rules; `begin_step` marks where
the replay's peaks start.

In-place gradient accumulation (docs/tracer.md §1h): autograd sums two gradients for the same tensor in
place on real dense tensors (InputBuffer::accumulate when it holds the only reference), but always
out of place on FakeTensors. In backward, an aten.add.Tensor whose first operand is a temp made by an
earlier autograd node, whose second operand was made by the current node, and whose output has the
same size, takes over the first operand's bytes (no growth), as the real in-place add would.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten

from .allocator import RESET, STEP

CATS = ("weight", "grad", "opt", "act", "recomp", "temp")
PHASE_CAT = {"setup": "weight", "forward": "act", "backward": "temp", "recompute": "recomp",
             "step": "temp", "warmup": "opt"}


@dataclass
class Rec:
    nbytes: int
    cat: str
    sub: str = ""          # finer label: "lora", "buffer", "qlora_packed", "logits", op name ...
    node: int = 0          # id of the autograd node that produced it (backward only)
    op: str = ""
    shape: tuple = ()
    dtype: str = ""
    where: str = ""        # module path that produced it (only when a `where` callback is set)
    became_grad: bool = False   # a backward temporary that autograd then stored as a param's .grad
    key: int = 0                # its allocation in the event log (0: not logged, or already freed there)


@dataclass
class Snapshot:
    total: int = 0
    by_cat: dict = field(default_factory=dict)       # cat -> bytes
    by_key: dict = field(default_factory=dict)       # (cat, sub) -> bytes
    phase: str = ""
    op: str = ""
    temps: list = field(default_factory=list)        # [(Rec, nbytes)] temps live at this moment


class StorageTracker(TorchDispatchMode):
    """Counts live storages per category; keeps the global and per-phase peaks and named marks."""

    def __init__(self, logits_numel: int = 0, vocab: int = 0, record_saved: bool = False):
        super().__init__()
        self.live: dict[int, Rec] = {}
        self.temps: dict[int, Rec] = {}      # live storages with cat "temp"
        self.cur: dict[tuple, int] = {}
        self.total = 0
        self.phase = "setup"
        self.peak = Snapshot()
        self.phase_peak: dict[str, Snapshot] = {}
        self.marks: dict[str, Snapshot] = {}
        self.logits_numel = logits_numel
        self.vocab = vocab
        self.inplace_accum = True
        self.inplace_hits = 0
        self.last_op = ""
        self.where = None      # optional callable -> current module path
        self.events = []       # every allocation (key, nbytes) and free (key, 0), in order, for allocator.replay
        self._seq = 0
        self._stepped = False
        self._moved = 0        # the key of an in-place accumulation's buffer, which its output takes over
        self.ops = None        # op log (tools/memtrace/oplog.py): set to a list to record every kernel-running op

    # -- registration -------------------------------------------------------------------------
    def register(self, t: torch.Tensor, cat: str, sub: str = "", op: str = "") -> None:
        if is_traceable_wrapper_subclass(t):
            # a wrapper subclass (torchao NF4Tensor) owns no storage: its inner tensors hold the bytes
            for name in t.__tensor_flatten__()[0]:
                self.register(getattr(t, name), cat, sub, op)
            return
        st = t.untyped_storage()
        key = id(st)
        if key in self.live:
            return
        rec = Rec(st.nbytes(), cat, sub or self._sub_for(t), op=op, shape=tuple(t.shape), dtype=str(t.dtype))
        if self.where is not None:
            rec.where = self.where()
        if self.phase in ("backward", "recompute"):
            node = torch._C._current_autograd_node()
            rec.node = id(node) if node is not None else 0
        self.live[key] = rec
        if self.events is not None and rec.nbytes:
            self._seq += 1
            rec.key = self._seq
            self.events.append((rec.key, -self._moved if self._moved else rec.nbytes))
            self._moved = 0
        self._add(rec, rec.nbytes)
        weakref.finalize(st, self._free, key)
        self._check_peak()

    def relabel(self, t: torch.Tensor, cat: str, sub: str | None = None) -> None:
        """Move an already counted storage to another category (registers it if new)."""
        rec = self.live.get(id(t.untyped_storage()))
        if rec is None:
            self.register(t, cat, sub or "")
            return
        self._add(rec, -rec.nbytes)
        if rec.cat == "temp" and cat == "grad":
            rec.became_grad = True
        rec.cat = cat
        if sub is not None:
            rec.sub = sub
        self._add(rec, rec.nbytes)

    def _sub_for(self, t: torch.Tensor) -> str:
        if self.vocab and t.dim() >= 1 and t.shape[-1] == self.vocab and t.numel() >= self.logits_numel // 2 \
                and self.phase not in ("setup", "warmup"):
            return "logits"
        return ""

    def _free(self, key: int) -> None:
        rec = self.live.pop(key, None)
        if rec is not None:
            self._add(rec, -rec.nbytes)
            self._log_free(rec)

    def _log_free(self, rec: Rec) -> None:
        if self.events is not None and rec.key:
            self.events.append((rec.key, 0))
            rec.key = 0

    def _add(self, rec: Rec, n: int) -> None:
        if rec.cat == "temp":
            if n > 0:
                self.temps[id(rec)] = rec
            else:
                self.temps.pop(id(rec), None)
        self.total += n
        k = (rec.cat, rec.sub)
        self.cur[k] = self.cur.get(k, 0) + n

    # -- peaks -----------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        by_cat = dict.fromkeys(CATS, 0)
        by_key = {k: v for k, v in self.cur.items() if v}
        for (c, _), v in by_key.items():
            by_cat[c] = by_cat.get(c, 0) + v
        temps = [(r, r.nbytes) for r in self.temps.values()]
        return Snapshot(self.total, by_cat, by_key, self.phase, self.last_op, temps)

    def _check_peak(self) -> None:
        pp = self.phase_peak.get(self.phase)
        if self.total > self.peak.total or pp is None or self.total > pp.total:
            snap = self.snapshot()
            if self.total > self.peak.total:
                self.peak = snap
            if pp is None or self.total > pp.total:
                self.phase_peak[self.phase] = snap

    def begin_step(self) -> None:
        """A traced step starts: peaks and marks of its own; the allocator log's peaks count from the first."""
        if self.events is not None:
            if not self._stepped:
                self.events.append((RESET, 0))
            self.events.append((STEP, 0))
        self._stepped = True
        self.peak, self.phase_peak, self.marks = Snapshot(), {}, {}

    def mark(self, name: str) -> Snapshot:
        self.marks[name] = self.snapshot()
        return self.marks[name]

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._check_peak()

    # -- dispatch ----------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.__name__ if hasattr(func, "__name__") else str(func)
        self.last_op = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else name
        take_over = None
        if self.inplace_accum and self.phase in ("backward", "recompute") and func is torch.ops.aten.add.Tensor:
            take_over = self._inplace_candidate(args)
        elif self.inplace_accum and self.phase in ("backward", "recompute") \
                and func is torch.ops.aten.scatter_add.default:
            take_over = self._scatter_into_zeros(args)
        out = func(*args, **kwargs)
        if self.ops is not None:
            self._log_op(func, args, kwargs, out)
        if take_over is not None and isinstance(out, torch.Tensor) and out.untyped_storage().nbytes() == take_over.nbytes:
            # the real engine would have done old.add_(new): the old buffer's bytes become the output's
            self._add(take_over, -take_over.nbytes)
            take_over.nbytes = 0
            self._moved, take_over.key = take_over.key, 0    # the log hands its block to the output
            self.inplace_hits += 1
        cat = PHASE_CAT[self.phase]
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.register(t, cat, op=self.last_op)
        self._moved = 0
        return out

    def _log_op(self, func, args, kwargs, out) -> None:
        """Op log entry (phase, op, FLOPs, bytes read, bytes written, output shape) of an op that runs a
        kernel; views, metadata and factory ops without a kernel (empty, detach, ...) are left out."""
        from .oplog import op_entry  # noqa: PLC0415
        e = op_entry(func, args, kwargs, out, self.phase)
        if e is not None:
            self.ops.append(e)

    def note_kernel(self, name: str, bytes_read: int, bytes_written: int, flops: float = 0.0) -> None:
        """A kernel an emulated layer stands for but does not dispatch (bitsandbytes dequantize_4bit)."""
        if self.ops is not None:
            self.ops.append((self.phase, name, float(flops), int(bytes_read), int(bytes_written), ()))

    def _inplace_candidate(self, args):
        if len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
            return None
        a, b = args[0], args[1]
        ra = self.live.get(id(a.untyped_storage()))
        rb = self.live.get(id(b.untyped_storage()))
        node = torch._C._current_autograd_node()
        if ra is None or rb is None or node is None or ra.cat not in ("temp", "recomp"):
            return None
        # autograd's InputBuffer::accumulate adds in place when the buffer is non-overlapping and dense
        # (torch/csrc/autograd/input_buffer.cpp can_accumulate_inplace), transposed weight grads included
        # the new gradient was made by the current node, or reaches it through a view's backward (the weight
        # gradient of F.linear is mm(...) seen through TBackward0)
        fresh = rb.node == id(node) or (node.name() in _VIEW_BACKWARDS and rb.node not in (0, ra.node))
        if ra.node != id(node) and fresh and a.shape == b.shape and a.dtype == b.dtype \
                and _dense(a) and a.untyped_storage().nbytes() == a.numel() * a.element_size():
            return ra
        return None


    def _scatter_into_zeros(self, args):
        """aten `gather_backward` (TensorAdvancedIndexing.cpp): `result = grad.new_zeros(self.sizes())`, then
        `result.scatter_add_(dim, index, grad)` in place, unless `areAnyTensorSubclassLike({index, grad})`, which
        is true for every tensor while a dispatch mode is active (ATen/TensorSubclassLikeUtils.h:
        `c10::impl::dispatch_mode_enabled()`), so under this tracer it takes the out-of-place `scatter_add`, a
        second tensor a real run does not make. The zeros made by the same backward node hand their bytes to
        the output, as the in-place call would (post-training's fp32 `selective_log_softmax`, TRL 0.x)."""
        if not args or not isinstance(args[0], torch.Tensor):
            return None
        rec = self.live.get(id(args[0].untyped_storage()))
        node = torch._C._current_autograd_node()
        if rec is None or node is None or rec.op != "new_zeros" or rec.node != id(node):
            return None
        return rec


_VIEW_BACKWARDS = ("TBackward0", "TransposeBackward0", "PermuteBackward0", "ViewBackward0", "UnsafeViewBackward0",
                   "ReshapeAliasBackward0")


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: some permutation of the dims is contiguous (a transpose counts)."""
    if t.is_contiguous():
        return True
    order = sorted(range(t.dim()), key=lambda d: (t.stride(d), t.size(d)), reverse=True)
    return t.permute(order).is_contiguous()


def gib(n: int) -> float:
    return n / 2**30
