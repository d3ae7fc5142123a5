"""Text/JSON views of a probe result: per-rank buffers, busiest rank, phase peaks, GPU vs host placement."""
from __future__ import annotations

MiB = 2**20

# Where each buffer lives on a real GPU machine. The CPU run cannot show it (every tensor is on "cpu");
# this is read from DeepSpeed 0.19.8's source: stage_1_and_2.py __init__ (device = 'cpu' if cpu_offload),
# stage3.py _create_fp32_partitions / _setup_for_real_optimizer, parameter_offload.py (offload_param).
def placement(name: str, spec: dict) -> str:
    stage, off_opt, off_par = spec["stage"], spec["offload_optimizer"] == "cpu", spec["offload_params"] == "cpu"
    if name == "offload_temp_grad_buffers":
        return "gpu+host"  # temp_grad_buffer_for_gpu_offload on the GPU, temp_grad_buffer_for_cpu_offload on host
    if off_opt and name in ("fp32_master", "optimizer_states", "fp32_grad_partition", "offload_16bit_staging",
                            "accumulated_grads"):
        return "host"
    if off_opt and stage == 3 and name == "grad_partition":
        return "host"  # grad_partitions_flat_buffer is created on the offload device (stage3.py)
    if off_par and stage == 3 and name in ("param_partition_16bit", "frozen_partition_16bit"):
        return "host"  # persistent params keep their partitions on the GPU (a small difference, modelled)
    return "gpu"


def busiest(result: dict) -> dict:
    """name -> {"bytes": max over ranks, "rank": argmax, "per_rank": [...]} (the rank zerocalc reports)."""
    names = sorted({n for r in result["ranks"] for n in r["buffers"]})
    out = {}
    for n in names:
        per = [r["buffers"].get(n, {}).get("bytes", 0) for r in result["ranks"]]
        out[n] = {"bytes": max(per), "rank": per.index(max(per)), "per_rank": per,
                  "placement": placement(n, result["spec"])}
    return out


def phase_peaks(result: dict) -> dict:
    """phase -> max over ranks of the model-state peak (bytes), and that rank's breakdown."""
    out = {}
    for ph in ("init", "fwd", "bwd", "step"):
        best = None
        for r in result["ranks"]:
            p = r["phases"].get(ph)
            if p and (best is None or p["model_state"] > best["model_state"]):
                best = {**p, "rank": r["rank"]}
        if best:
            out[ph] = best
    return out


def text(result: dict) -> str:
    spec = result["spec"]
    r0 = result["ranks"][0]
    lines = [f"dsprobe: stage {spec['stage']}, world {spec['world']}, {spec['precision']}, {spec['method']}, "
             f"offload_optimizer={spec['offload_optimizer']}, offload_params={spec['offload_params']}, "
             f"zero_init={spec['zero_init']}, wrapper {r0['wrapper']}",
             f"zero_optimization: {spec['ds_config']['zero_optimization']}"]
    lines += [f"note: {n}" for n in spec.get("notes", [])]
    ranks = result["ranks"]
    head = f"{'buffer':28} {'where':8} " + " ".join(f"{'rank ' + str(r['rank']):>14}" for r in ranks) + "  busiest"
    lines += ["", "buffers (bytes, largest live in the steady steps):", head]
    for n, b in busiest(result).items():
        lines.append(f"{n:28} {b['placement']:8} " + " ".join(f"{v:14,d}" for v in b["per_rank"])
                     + f"  {b['bytes']:,} (rank {b['rank']})")
    lines += ["", "model-state peak per phase (bytes; busiest rank; breakdown at that instant):"]
    for ph, p in phase_peaks(result).items():
        parts = ", ".join(f"{k} {v:,}" for k, v in sorted(p["breakdown"].items(), key=lambda kv: -kv[1]))
        lines.append(f"  {ph:5} {p['model_state']:14,d} (rank {p['rank']}): {parts}")
    t = [f"rank {r['rank']}: init {r['timings']['init_s']} s, steps {r['timings']['step_s']}" for r in ranks]
    lines += ["", "timings: " + "; ".join(t) + f"; wall {result['wall_s']} s"]
    if any(r["skipped_steps"] for r in ranks):
        lines.append("WARNING: the loss scaler skipped steps (fp16 overflow); optimizer state may be missing")
    return "\n".join(lines)
