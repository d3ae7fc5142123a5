"""Reading config.json fields (errors name the field as ``model.<field>``) and collecting tensors in
registration order, for the family builders."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import PlanError
from .arch import Tensor

class ConfigReader:
    """Typed reads of config.json fields with errors that name the field."""

    def __init__(self, cfg: Mapping):
        self.cfg = cfg

    def has(self, *keys: str) -> bool:
        return any(self.cfg.get(k) is not None for k in keys)

    def int(self, *keys: str, default: Any = None, lo: int = 1) -> int:
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or int(v) < lo:
                raise PlanError(f"model.{k}", f"must be an integer >= {lo}, got {v!r}")
            if int(v) > 1 << 40:
                raise PlanError(f"model.{k}", f"is implausibly large: {v!r}")
            return int(v)
        if default is None:
            raise PlanError(f"model.{keys[0]}", "is required for a custom model")
        return default

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise PlanError(f"model.{key}", f"must be true or false, got {v!r}")
        return v

    def str(self, key: str, default: str) -> str:
        v = self.cfg.get(key)
        return v if isinstance(v, str) else default


class TensorList:
    """Collects tensors in registration order."""

    def __init__(self):
        self.tensors: list[Tensor] = []

    def param(self, module: str, pname: str, numel: int, component: str, linear: str = "",
              shape: tuple = ()) -> None:
        block, layer = _block_of(module)
        self.tensors.append(Tensor(f"{module}.{pname}", numel, component, module, linear, shape, block, layer))

    def matrix(self, module: str, pname: str, shape: tuple, component: str, linear: str = "") -> None:
        numel = 1
        for d in shape:
            numel *= d
        self.param(module, pname, numel, component, linear, shape)

    def linear(self, module: str, d_in: int, d_out: int, component: str, bias: bool = False) -> None:
        leaf = module.rsplit(".", 1)[-1]
        self.matrix(module, "weight", (d_out, d_in), component, leaf)
        if bias:
            self.param(module, "bias", d_out, component)

    def swiglu(self, module: str, h: int, inter: int, component: str = "mlp", bias: bool = False) -> None:
        """A gated MLP's gate_proj, up_proj and down_proj, in that (parameters()) order."""
        for name, d_in, d_out in (("gate_proj", h, inter), ("up_proj", h, inter), ("down_proj", inter, h)):
            self.linear(f"{module}.{name}", d_in, d_out, component, bias)

    def qkv(self, module: str, h: int, heads: int, kv: int, hd: int, bias: bool = False) -> None:
        """An attention's separate q_proj, k_proj and v_proj (GQA: kv heads for k and v), in that order."""
        for name, d_out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            self.linear(f"{module}.{name}", h, d_out, "attention", bias)

    def norm(self, module: str, dim: int, bias: bool = False, component: str = "norm") -> None:
        self.param(module, "weight", dim, component)
        if bias:
            self.param(module, "bias", dim, component)



def _block_of(module: str) -> tuple[str, int | None]:
    """'model.layers.3.mlp.up_proj' -> ('model.layers.3', 3): the first numbered path segment is the block."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1]), int(part)
    return "", None
