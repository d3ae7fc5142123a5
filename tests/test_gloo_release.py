"""The probes' gloo wrapper (tools/dsprobe/gloo.py) must cover every collective this torch exposes: FSDP and
DeepSpeed call them by name, and torch renames them (2.13: reduce_scatter_single, all_gather_single), so a name
left out lets gloo's worker thread hold a collective's tensors past the call, into the next phase."""
import re

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from tools.dsprobe.gloo import _COLLECTIVES, NOT_WRAPPED  # noqa: E402

_COLLECTIVE_NAME = re.compile(r"gather|scatter|reduce|broadcast|all_to_all")


@pytest.mark.tools
def test_every_collective_is_wrapped_or_excluded():
    names = {n for n in dir(dist) if _COLLECTIVE_NAME.search(n) and callable(getattr(dist, n))
             and not n[0].isupper() and not n.startswith("__")}
    assert {"all_reduce", "reduce_scatter_single"} <= names or {"all_reduce", "reduce_scatter_tensor"} <= names
    missing = sorted(names - set(_COLLECTIVES) - set(NOT_WRAPPED))
    assert not missing, f"torch.distributed collectives not wrapped by release_on_return: {missing}"


@pytest.mark.tools
@pytest.mark.parametrize("module", ["torch.distributed.fsdp._runtime_utils", "torch.distributed.fsdp._flat_param",
                                    "torch.distributed.fsdp._fully_shard._fsdp_collectives"])
def test_fsdp_calls_only_wrapped_collectives(module):
    import importlib
    import inspect

    called = set(re.findall(r"\bdist\.([a-z_]+)\(", inspect.getsource(importlib.import_module(module))))
    used = {n for n in called if _COLLECTIVE_NAME.search(n)}
    assert used, f"{module} calls no collective by name: the check below would pass vacuously"
    assert used <= set(_COLLECTIVES), sorted(used - set(_COLLECTIVES))
