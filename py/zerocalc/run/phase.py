"""One moment of the run: what is allocated at its peak, by component, and what it frees and requests again
(the transient the caching allocator keeps cached afterwards)."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Phase:
    name: str
    components: Mapping          # component -> bytes allocated at the phase's peak
    transient: int = 0           # bytes requested and freed inside the phase (they leave cached segments)
    host: int = 0                # host bytes the phase needs on the busiest rank
    empties_cache: bool = False  # the software calls torch.cuda.empty_cache() at its end
    largest: int = 0             # the phase's largest transient tensor (bytes): larger than any block cached before,
                                 # its requests cannot reuse the earlier phases' segments
    note: str = ""               # the mechanism, in a few words (the CLI and the page show it)
    outside: int = 0             # bytes of the components held outside PyTorch's cache (a colocated vLLM's
                                 # CuMemAllocator pool, unmapped when it sleeps): never left cached for later phases
    empties_cache_before: bool = False   # torch.cuda.empty_cache() at its start (TRL before waking vLLM's weights)
    stranded: int = 0            # bytes of segments it leaves cached that the steps' requests cannot use, so the
                                 # steps' reserve sits beside them (run/load.py on-device build before FSDP)
    uncounted: int = 0           # bytes of the components another process holds (OpenRLHF's vLLM actors): on the
                                 # device, not in this process's torch counters
    fresh: int | None = None     # bytes of new segments it opens beside the cached ones, where the software's order
                                 # says so (LitGPT's validation: run/evaluate.py); None: the `largest` rule

    @property
    def allocated(self) -> int:
        return sum(self.components.values())


def phase(name: str, base: Mapping, extra: Mapping | None = None, **kw) -> Phase:
    """A phase from the resident components plus the phase's own (both component -> bytes)."""
    comps = dict(base)
    for k, b in (extra or {}).items():
        if b:
            comps[k] = comps.get(k, 0) + int(b)
    return Phase(name, MappingProxyType({k: int(b) for k, b in comps.items() if b}), **kw)
