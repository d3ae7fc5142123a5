"""The tracker of the trace that is running, for code the traced model calls back into.

Two readers need it while a trace runs: the activation-checkpoint recompute context (trace.py hands
`gc_context_fn` to the model's gradient checkpointing, and the recompute labels its storages `recomp`) and
the saved-tensor recorder (dump.py `SavedRecorder.hooks`, which gives the tracker a module-path callback).
Both import this module; neither imports the other (docs/tracer.md §7; issue 19 item 4 opened the circle
dump.py <-> trace.py, which went through trace's private `_ACTIVE`).
"""
from __future__ import annotations

import contextlib

_RUNNING: dict = {}


def running():
    """The tracker of the running trace, or None."""
    return _RUNNING.get("tracker")


def start(tracker) -> None:
    _RUNNING["tracker"] = tracker


def stop() -> None:
    _RUNNING.clear()


@contextlib.contextmanager
def recompute_phase():
    """While a checkpointed layer is recomputed in backward, the running tracker's phase is `recompute`."""
    tr = running()
    prev = tr.phase if tr else None
    if tr:
        tr.set_phase("recompute")
    try:
        yield
    finally:
        if tr:
            tr.set_phase(prev)


def gc_context_fn():
    """torch.utils.checkpoint `context_fn`: nothing around the forward, `recompute_phase` around the recompute."""
    return contextlib.nullcontext(), recompute_phase()
