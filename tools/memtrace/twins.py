"""The stack grid's default-stack twins: the same plan traced without `stack` (HF Trainer, transformers 5,
fused AdamW), which golden/stacks/README.md compares each stack entry with.

Its own module so that stacks.py (which traces the twins) and stacks_readme.py (which reads their files)
both import it and not each other (issue 19 item 4 opened the stacks.py <-> stacks_readme.py circle).
"""
from __future__ import annotations


def default_twin(entry: dict) -> dict:
    d = {k: v for k, v in entry.items() if k != "stack"}
    d["loss"] = "standard"            # the default stack (HF) has no chunked loss
    d.pop("optimizer_in_backward", None)   # nor an optimizer in backward
    d["id"] = entry["id"] + "@default"
    return d


def twin_name(t: dict) -> str:
    """A default-stack twin's file name: what distinguishes the plans of the grid."""
    return "-".join([t["method"], t["precision"], "gc" if t["activation_checkpointing"] == "full" else "nogc",
                     f"s{t['seq_len']}", f"b{t['micro_batch_size']}"])


def twin_of(entry: dict) -> str:
    return "default-" + twin_name(entry)
