"""Host copies on CPU ranks, and the per-run-phase peaks of a probe's event log (docs/tracer.md §9).

On a GPU, `.cpu()` makes a new host tensor and leaves the device tensor to whoever holds it. On a CPU rank it
returns the tensor itself, so a state dict "moved to the CPU" would stay counted as device memory and nothing
would be counted on the host. Inside `host_copies(tr)`, `Tensor.cpu()` of a CPU tensor makes a copy the tracker
does not record as a device storage (`tr.suspended`) and logs its bytes as host memory until the copy dies;
the source is freed when the code drops it, as on a GPU. Sites that copy this way: DeepSpeed
`_zero3_consolidated_16bit_state_dict` (`param.detach().cpu()` on rank 0, engine.py), FSDP1's FULL_STATE_DICT
with offload_to_cpu (`_full_post_state_dict_hook` -> `_offload_to_cpu` / `.cpu()`), SHARDED_STATE_DICT with
offload (`_sharded_post_state_dict_hook`), torch.save (each storage `.cpu()` while written: counted by
`saving(tr)` as the largest storage).
"""
from __future__ import annotations

import contextlib
import weakref

import torch


def _hold(tr, t: torch.Tensor) -> None:
    st = t.untyped_storage()
    n = st.nbytes()
    key = st._cdata
    if not n or key in tr.host_keys:
        return
    tr.host_keys.add(key)
    tr.host_log.append((len(tr.events), len(tr.marks), n))

    def gone():
        tr.host_keys.discard(key)
        tr.host_log.append((len(tr.events), len(tr.marks), -n))
    weakref.finalize(st, gone)


def host_outputs(tr, func, args, kwargs):
    """An op on a host copy (FSDP's `.detach().clone()` of a view into the offloaded flat parameter) makes a
    host tensor on a GPU: its new storages are host bytes, not device storages."""
    from torch.utils._pytree import tree_leaves  # noqa: PLC0415
    tr.suspended = True
    try:
        out = func(*args, **(kwargs or {}))
    finally:
        tr.suspended = False
    for t in tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.device.type == "cpu" and not t.is_meta:
            if t.untyped_storage()._cdata not in tr.live:
                _hold(tr, t)
    return out


@contextlib.contextmanager
def host_copies(tr):
    orig_cpu, orig_to = torch.Tensor.cpu, torch.Tensor.to

    def copy(self):
        tr.suspended = True
        try:
            with torch.no_grad():
                out = orig_to(self.detach(), copy=True)
        finally:
            tr.suspended = False
        _hold(tr, out)
        return out

    def cpu(self, *a, **k):
        if self.device.type == "cpu" and not tr.suspended:
            return copy(self)
        return orig_cpu(self, *a, **k)

    import torch.distributed.fsdp._flat_param as fp  # noqa: PLC0415
    orig_fpt = fp.FlatParamHandle.flat_param_to

    def flat_param_to(self, *args, **kwargs):
        """FlatParamHandle.to_cpu (FULL_STATE_DICT offload_to_cpu): `flat_param.data = flat_param.to(cpu)`
        copies the unsharded flat parameter to the host before the device one is freed; on a CPU rank it
        would stay the device storage that the next line frees, so the copy is made here."""
        dev = torch._C._nn._parse_to(*args, **kwargs)[0]
        if dev is not None and dev.type == "cpu" and self.flat_param.device.type == "cpu" and not tr.suspended:
            self.flat_param.data = copy(self.flat_param)
            if self._use_orig_params:
                self._use_unsharded_views(as_params=True)
            return None
        return orig_fpt(self, *args, **kwargs)

    torch.Tensor.cpu = cpu
    fp.FlatParamHandle.flat_param_to = flat_param_to
    try:
        yield
    finally:
        torch.Tensor.cpu = orig_cpu
        fp.FlatParamHandle.flat_param_to = orig_fpt


@contextlib.contextmanager
def saving(tr):
    """torch.save writes one storage at a time through a host copy (serialization.py `_save`): host bytes =
    the largest storage it writes, for the moment it writes."""
    orig = torch.save

    def save(obj, f, *a, **k):
        sizes = [t.untyped_storage().nbytes() for t in _tensors(obj)]
        if sizes:
            n = max(sizes)
            tr.host_log.append((len(tr.events), len(tr.marks), n))
            tr.host_log.append((len(tr.events), len(tr.marks), -n))
        return orig(obj, f, *a, **k)

    torch.save = save
    try:
        yield
    finally:
        torch.save = orig


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


RUN_PHASE = {"load": "load", "init": "init", "fwd": "step", "bwd": "step", "step": "step", "save": "save",
             "end": None}


def run_phases(tr) -> dict:
    """{run phase: {"peak_bytes", "start_bytes", "end_bytes", "host_bytes"}} over the event log, the marks'
    kinds mapped to Extension 5's run phases (fwd/bwd/step of every step -> step; marks "load", "init", "save").
    Marks, host copies and storage events are merged in the order they happened (a phase that allocates no
    device storage, such as an offloaded save, still gets its host bytes)."""
    import re  # noqa: PLC0415
    marks = list(tr.marks)
    if len(marks) > 1 and marks[0] == (0, "init") and marks[1][0] == 0:
        marks = marks[1:]                       # the tracker's opening mark, superseded by the run's "load"
        off = 1
    else:
        off = 0
    inf = float("inf")
    items = [((i, j + off, 0), ("mark", name)) for j, (i, name) in enumerate(marks)]
    items += [((i, m - 1, 1), ("host", n)) for i, m, n in tr.host_log]
    items += [((i, inf, 2), ("ev", i)) for i in range(len(tr.events))]
    items.sort(key=lambda x: x[0])
    out: dict = {}
    cur = hcur = 0
    phase = None
    for _, (kind, v) in items:
        if kind == "mark":
            if phase is not None:
                out[phase]["end_bytes"] = cur
            k = re.match(r"[a-z]+", v).group(0)
            phase = RUN_PHASE.get(k, k)
            if phase is not None:
                p = out.setdefault(phase, {"peak_bytes": cur, "start_bytes": cur, "end_bytes": cur,
                                           "host_bytes": hcur})
                p["host_bytes"] = max(p["host_bytes"], hcur)
        elif kind == "host":
            hcur += v
            if phase is not None:
                out[phase]["host_bytes"] = max(out[phase]["host_bytes"], hcur)
        else:
            sign, rec = tr.events[v]
            cur += sign * rec.nbytes
            if phase is not None:
                p = out[phase]
                p["peak_bytes"] = max(p["peak_bytes"], cur)
                p["end_bytes"] = cur
    return out
