"""Readable table of a trace result (GiB = 2**30)."""
from __future__ import annotations

COMPONENTS = ("weights", "lora_adapters", "buffers", "gradients", "optimizer_states", "activations", "logits",
              "temporaries")


def _g(n: int) -> str:
    return f"{n / 2**30:8.3f}"


def table(res: dict) -> str:
    p = res["plan"]
    lines = [f"plan: model={p.get('model') if isinstance(p.get('model'), str) else p.get('model', {}).get('model_type')}"
             f" method={p.get('method', 'full')} precision={p.get('precision', 'bf16-mixed')}"
             f" optimizer={p.get('optimizer', 'adamw')} attention={p.get('attention', 'flash')}"
             f" ckpt={p.get('activation_checkpointing', 'none')} mb={p.get('micro_batch_size', 2)}"
             f" seq={p.get('seq_len', 4096)} ga={p.get('gradient_accumulation_steps', 4)}",
             f"peak {_g(res['peak_bytes'])} GiB in {res['peak_phase']} (op {res['peak_op']});"
             f" saved activations at forward end {_g(res['saved_activations_forward_end'])} GiB",
             "",
             f"{'GiB':<18}{'peak':>9}" + "".join(f"{ph:>10}" for ph in res["phase_peaks"])]
    cols = [res["peak"]] + list(res["phase_peaks"].values())
    for c in COMPONENTS:
        lines.append(f"{c:<18}" + "".join(f"{_g(s['components'][c]):>9} " for s in cols))
    lines.append(f"{'total':<18}" + "".join(f"{_g(s['bytes']):>9} " for s in cols))
    lines.append(f"(build {res['seconds']['build']} s, step {res['seconds']['step']} s)")
    return "\n".join(lines)
