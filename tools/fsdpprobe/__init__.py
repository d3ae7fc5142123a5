"""fsdpprobe: run PyTorch FSDP (FSDP1, as accelerate and the HF Trainer configure it, or FSDP2's fully_shard
for stack.fsdp_version 2) on CPU ranks and measure what each rank holds, phase by phase.

Dev-only ground truth for zerocalc's FSDP terms (memory/frameworks.py); never shipped to the browser.
Entry points: ``python -m tools.fsdpprobe PLAN.json`` and ``python -m tools.fsdpprobe.check``
(make fsdpprobe-check). Same method as tools/dsprobe (storage tracker on gloo CPU ranks), plus
storage resizes: FSDP1 frees and re-allocates its unsharded flat parameters by resizing their storage
(torch/distributed/utils.py _free_storage/_alloc_storage), which no aten op reports.
"""
from __future__ import annotations
