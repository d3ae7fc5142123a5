"""Gloo collectives that release their tensors when they return, as NCCL's allocated stat does."""
from __future__ import annotations

import time

# gloo's worker thread drops its reference to a collective's tensors a moment after wait() returns, so on a
# busy machine a flattened bucket could outlive the call and overlap the next allocation (a CI run saw
# s2w4_ov1's backward peak 4 MiB higher, once in ten runs). NCCL's allocated stat counts such a tensor as freed
# at the call's end; so does the probe: a synchronous collective returns only when its tensors are released.
# torch 2.13's FSDP1 calls reduce_scatter_single / all_gather_single (the new names of *_tensor): a name missing
# here goes unwrapped (a CI run saw s3w4_mixed_g2's root gradient, 8 MiB, outlive the backward into the step),
# so tests/test_gloo_release.py checks that every collective torch.distributed exposes is listed or excluded.
_COLLECTIVES = ("all_reduce", "reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor",
                "all_gather", "reduce_scatter", "all_gather_single", "reduce_scatter_single", "_all_gather_base",
                "_reduce_scatter_base", "all_reduce_coalesced", "all_gather_coalesced", "_broadcast_coalesced",
                "all_to_all", "all_to_all_single", "gather", "scatter")
# object collectives pickle into tensors of their own, allocated and released inside the call
NOT_WRAPPED = ("all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list")


# gloo's reduce-scatter also copies its input into a temporary of its own (traced: a `split` storage the size of
# the input), made on the calling thread and released by the worker thread: the tracker sees it, the use counts
# of the call's tensors do not (a CI run saw lit_s3w2_lora's step phase 1.4 MB high: one unit's unsharded
# gradient). With a tracker watched, a call also returns only when every storage it created is released.
_WATCHED = []


def watch(tracker) -> None:
    """Wait, at each synchronous collective, for the storages this tracker saw the call create."""
    _WATCHED[:] = [tracker]


def release_on_return(torch) -> None:
    dist = torch.distributed

    def wrap(fn):
        def call(*a, **k):
            if k.get("async_op"):
                return fn(*a, **k)
            ts = [t for t in list(a) + list(k.values()) if isinstance(t, torch.Tensor)]
            ts += [t for v in list(a) + list(k.values()) if isinstance(v, (list, tuple))
                   for t in v if isinstance(t, torch.Tensor)]
            before = [t._use_count() for t in ts]
            live = _WATCHED[0].live if _WATCHED else {}
            born = set(list(live))      # list(): one C call under the GIL, while the worker thread may free
            out = fn(*a, **k)
            made = [key for key in list(live) if key not in born]
            deadline = time.perf_counter() + 2.0
            while (any(t._use_count() > n for t, n in zip(ts, before)) or any(key in live for key in made)) \
                    and time.perf_counter() < deadline:
                time.sleep(0.0005)
            return out
        call.__wrapped__ = fn
        return call

    for name in _COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, wrap(getattr(dist, name)))


__all__ = ["release_on_return", "watch"]
