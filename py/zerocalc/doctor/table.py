"""Text rendering of a doctor result (``zerocalc doctor --format table``); GiB = 2^30 bytes."""
from __future__ import annotations

from .sizes import format_gib

FIELDS = (("GPU total", "gpu_total_bytes"), ("tried to allocate", "tried_to_allocate_bytes"),
          ("allocated by PyTorch", "allocated_bytes"), ("reserved, unallocated", "reserved_unallocated_bytes"),
          ("free", "free_bytes"))


def format_table(d: dict) -> str:
    lines = [f"zerocalc doctor   kind: {d['kind']}   phase: {d['phase']} (run phase {d.get('run_phase', '-')})   "
             f"device: {d['device'] or '-'}"]
    if d.get("phase_evidence"):
        lines.append(f"  phase from: {d['phase_evidence']}")
    shown = [(label, d[key]) for label, key in FIELDS if d.get(key) is not None]
    if shown:
        lines.append("")
        for label, b in shown:
            lines.append(f"  {label:<24}{format_gib(b):>12}   ({b:,} bytes)")
        if d.get("reserved_unallocated_bytes") is not None:
            lines.append(f"  {'fragmentation':<24}{'yes' if d['fragmentation'] else 'no':>12}")
    if d.get("nccl"):
        n = d["nccl"]
        if n["ran_for_ms"] is not None:
            lines += ["", f"  NCCL {n['op']} seq {n['seq']}, timeout {n['timeout_ms']} ms, ran {n['ran_for_ms']} ms"]
        elif n.get("last_enqueued") is not None:
            lines += ["", f"  NCCL last enqueued {n['last_enqueued']}, last completed {n['last_completed']}"]
    if d["findings"]:
        lines.append("")
        lines.append("findings:")
        for f in d["findings"]:
            lines.append(f"  [{f['severity']}] {f['id']}: {f['message']}")
    if d["plan_changes"]:
        lines += ["", "plan changes:"]
        for k, v in _leaves(d["plan_changes"]):
            lines.append(f"  {k} = {v}")
    return "\n".join(lines) + "\n"



def _leaves(v: dict, prefix: str = ""):
    """Nested plan changes (run.eval.batch_size) as dotted keys."""
    for k, x in v.items():
        if isinstance(x, dict):
            yield from _leaves(x, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", x
