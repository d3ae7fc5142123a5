"""Model and GPU presets (ids as in data/reference/{models,gpus}.json).

Data is a slim copy made by scripts/build_presets.py; loading is plain JSON so it works the same
in CPython and Pyodide.
"""
from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

_HERE = pathlib.Path(__file__).resolve().parent
from ..units import MIB


@dataclass(frozen=True)
class ModelPreset:
    id: str
    name: str
    family: str
    hf_repo: str
    model_type: str
    architecture: str
    config: Mapping
    params_total: int
    params_breakdown: Mapping

    @property
    def hf_config(self) -> dict:
        """The Hugging Face config.json fields of this model, `model_type` included."""
        return {"model_type": self.model_type, **self.config}


@dataclass(frozen=True)
class GpuPreset:
    id: str
    name: str
    vendor: str
    memory_bytes: int          # what the device reports (nvidia-smi total), before the CUDA context
    memory_measured: bool      # False: no nvidia-smi reading in the reference; marketed GB taken as GiB
    bf16_supported: bool
    interconnect: str
    link_gb_s: float | None    # per-GPU unidirectional scale-up bandwidth, decimal GB/s
    pcie_gb_s: float | None
    typical_gpus_per_node: int | None
    compute_capability: str | None
    memory_gb_marketed: float | None
    bf16_dense_tflops: float | None = None     # peak dense tensor-core rates (the step-time model)
    fp16_dense_tflops: float | None = None
    memory_bandwidth_gb_s: float | None = None
    fp8_dense_tflops: float | None = None      # fp8 tensor-core peak (None: no fp8 tensor cores)


def _load(name: str) -> list:
    return json.loads((_HERE / name).read_text())


def _model(rec: dict) -> ModelPreset:
    return ModelPreset(
        id=rec["id"], name=rec["name"], family=rec["family"], hf_repo=rec["hf_repo"],
        model_type=rec["model_type"], architecture=rec["architecture"],
        config=MappingProxyType(dict(rec["config"])), params_total=rec["params_total"],
        params_breakdown=MappingProxyType(dict(rec["params_breakdown"])))


def _capacity_bytes(rec: dict) -> int:
    """nvidia-smi's total where the reference has it; else the marketed size read as GiB (the
    vendors' labels are binary for HBM parts: an A100 80GB reports 81920 MiB)."""
    if rec.get("memory_mib_reported") is not None:
        return int(rec["memory_mib_reported"]) * MIB
    return int(round(float(rec["memory_gb_marketed"]) * 1024)) * MIB


def _gpu(rec: dict) -> GpuPreset:
    link = rec.get("interconnect") or {}
    pcie = rec.get("pcie") or {}
    return GpuPreset(
        id=rec["id"], name=rec["name"], vendor=rec.get("vendor") or "",
        memory_bytes=_capacity_bytes(rec),
        memory_measured=rec.get("memory_mib_reported") is not None,
        bf16_supported=bool(rec.get("bf16_supported")),
        interconnect=link.get("type") or "PCIe",
        link_gb_s=link.get("per_gpu_unidirectional_gb_s"),
        pcie_gb_s=pcie.get("per_direction_gb_s"),
        typical_gpus_per_node=rec.get("typical_gpus_per_node"),
        compute_capability=rec.get("compute_capability"),
        memory_gb_marketed=rec.get("memory_gb_marketed"),
        bf16_dense_tflops=rec.get("bf16_dense_tflops"), fp16_dense_tflops=rec.get("fp16_dense_tflops"),
        memory_bandwidth_gb_s=rec.get("memory_bandwidth_gb_s"),
        fp8_dense_tflops=rec.get("fp8_dense_tflops") if rec.get("fp8_supported") else None)


MODELS: Mapping[str, ModelPreset] = MappingProxyType({r["id"]: _model(r) for r in _load("models.json")})
GPUS: Mapping[str, GpuPreset] = MappingProxyType({r["id"]: _gpu(r) for r in _load("gpus.json")})
