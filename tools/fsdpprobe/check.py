"""python -m tools.fsdpprobe.check [--only NAME ...] [--json OUT]

Runs the grid on CPU ranks with real FSDP and compares, per plan, zerocalc's allocated bytes (minus the
cuBLAS workspace, which a CPU run has not) with the busiest rank:
- the optimizer step (engine phase `step` vs the probe's peak during step): the sharded parameters,
  gradients and optimizer states, which must agree within STEP_TOL;
- the step's peak (engine: max over its phases; probe: max over forward, backward, step), which may
  exceed the probe by at most two units in 16 bits plus PEAK_TOL, and never fall short by more than
  PEAK_TOL. The two units: a second unsharded unit gradient waiting for its asynchronous reduce-scatter
  (a GPU holds it, a synchronous CPU rank does not), and the bottom layer counted with a prefetched unit
  it does not have (the engine's conservative choice, memory/frameworks.py).
Ends with ONE line: grid size and the largest deviation.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from tools.dsprobe.spec import SMALL_LLAMA  # the DeepSpeed probe's model: P = 6,965,504

BASE = {"schema": 1, "model": {"name": "small-llama", **SMALL_LLAMA}, "gpu": "a100-sxm4-80gb",
        "framework": "fsdp", "nodes": 1, "micro_batch_size": 2, "gradient_accumulation_steps": 1,
        "seq_len": 128, "optimizer": "adamw", "attention": "eager"}
# a small vocabulary and wider layers: the layer-by-layer backward, not the loss, is the peak
WIDE = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1024, "tie_word_embeddings": False}
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0,
        "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
GRID: list[tuple[str, dict]] = [
    ("s3w2_pure", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="full")),
    ("s3w2_mixed", dict(zero_stage=3, gpus_per_node=2, precision="bf16-mixed", method="full")),
    ("s3w4_mixed_ac", dict(zero_stage=3, gpus_per_node=4, precision="bf16-mixed", method="full",
                           activation_checkpointing="full")),
    ("s2w2_mixed", dict(zero_stage=2, gpus_per_node=2, precision="bf16-mixed", method="full")),
    ("s3w2_pure_lora_ac", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="lora", lora=LORA,
                               activation_checkpointing="full")),
    ("s3w2_mixed_lora", dict(zero_stage=3, gpus_per_node=2, precision="bf16-mixed", method="lora", lora=LORA)),
    ("wide_s3w2_pure", dict(model={"name": "fsdpprobe-wide", **WIDE}, zero_stage=3, gpus_per_node=2,
                            precision="bf16-pure", method="full")),
    ("wide_s3w2_mixed_ac", dict(model={"name": "fsdpprobe-wide", **WIDE}, zero_stage=3, gpus_per_node=2,
                                precision="bf16-mixed", method="full", activation_checkpointing="full")),
    ("wide_s2w2_mixed_ac", dict(model={"name": "fsdpprobe-wide", **WIDE}, zero_stage=2, gpus_per_node=2,
                                precision="bf16-mixed", method="full", activation_checkpointing="full")),
    # accumulation: the first micro-step runs under no_sync(), as accelerate's accumulate() does
    ("s3w2_mixed_g2", dict(zero_stage=3, gpus_per_node=2, precision="bf16-mixed", method="full",
                           gradient_accumulation_steps=2)),
    ("s3w4_mixed_g2", dict(zero_stage=3, gpus_per_node=4, precision="bf16-mixed", method="full",
                           gradient_accumulation_steps=2)),
    ("s3w2_mixed_lora_g2", dict(zero_stage=3, gpus_per_node=2, precision="bf16-mixed", method="lora", lora=LORA,
                                gradient_accumulation_steps=2)),
    ("s3w2_pure_lora_base", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="lora", lora=LORA,
                                 stack={"peft_adapter_dtype": "base"})),
]
# FSDP2 (stack.fsdp_version 2): fully_shard per decoder layer, then the root (tools/fsdpprobe/worker.py);
# bf16-mixed reduces in bf16 as accelerate's FSDP2 policy does (the fp32 reduce of torchtitan: tests/test_fsdpprobe.py)
V2 = {"fsdp_version": 2}
GRID += [
    ("v2_s3w2_pure", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="full", stack=V2)),
    ("v2_s3w4_mixed_ac", dict(zero_stage=3, gpus_per_node=4, precision="bf16-mixed", method="full",
                              activation_checkpointing="full", stack=V2)),
    ("v2_s3w2_pure_lora_ac", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="lora", lora=LORA,
                                  activation_checkpointing="full", stack=V2)),
    ("v2_wide_s3w2_mixed", dict(model={"name": "fsdpprobe-wide", **WIDE}, zero_stage=3, gpus_per_node=2,
                                precision="bf16-mixed", method="full", stack=V2)),
    # torchtune's custom_sharded_layers ['tok_embeddings', 'output']: the embedding and lm_head as units of their
    # own; the loss is the peak (s 128), and with the vocabulary of small-llama on wider layers, checkpointed at s 64,
    # the end of backward
    ("v2_s3w2_pure_emb", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="full",
                              stack={**V2, "fsdp_embedding_units": True})),
    # the same model with the root held: FSDP2's end of backward (post_backward reshards, then reduces) is the peak
    ("v2_mid_s3w2_pure_ac", dict(model={"name": "fsdpprobe-mid", **WIDE, "vocab_size": 8192}, zero_stage=3,
                                 gpus_per_node=2, precision="bf16-pure", method="full", seq_len=64,
                                 micro_batch_size=1, activation_checkpointing="full", stack=V2)),
    ("v2_mid_s3w2_pure_ac_emb", dict(model={"name": "fsdpprobe-mid", **WIDE, "vocab_size": 8192}, zero_stage=3,
                                     gpus_per_node=2, precision="bf16-pure", method="full", seq_len=64,
                                     micro_batch_size=1, activation_checkpointing="full",
                                     stack={**V2, "fsdp_embedding_units": True})),
]
# Lightning's wrapping (LitGPT: auto_wrap_policy={Block}, LoRA inside the layer units) on the HF model: the
# probe runs HF's loss and loop, not LitGPT's, so these rows are compared by differences (the wrap's and the
# accumulation's), not whole (tests/test_fsdpprobe.py)
# FSDP2 with the loss outside the model (torchtune's and torchtitan's loops; the HF loss function, called
# outside): compared by difference with v2_s3w2_pure (tests/test_fsdpprobe.py)
V2_LOSS_OUTSIDE = ("v2_s3w2_pure_loss_outside", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure",
                                                     method="full", stack={"fsdp_version": 2, "trainer": "torchtitan"}))
LIT: list[tuple[str, dict]] = [
    ("lit_s3w2_lora", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="lora", lora=LORA,
                           stack={"trainer": "litgpt"})),
    ("lit_s3w2_lora_g2", dict(zero_stage=3, gpus_per_node=2, precision="bf16-pure", method="lora", lora=LORA,
                              gradient_accumulation_steps=2, stack={"trainer": "litgpt"})),
]
STEP_TOL = 0.01
PEAK_TOL = 0.05


def plans(names=None, grid=GRID) -> list[tuple[str, dict]]:
    return [(n, {**BASE, **o}) for n, o in grid if names is None or n in names]


def busiest(res: dict) -> dict:
    """Per phase, the largest peak over ranks."""
    return {ph: max(r["phases"][ph]["peak"] for r in res["ranks"]) for ph in ("fwd", "bwd", "step")}


def engine_view(plan: dict) -> dict:
    """zerocalc's allocated bytes per phase (minus the cuBLAS workspace) and one layer unit in 16 bits."""
    from zerocalc import Plan, estimate
    from zerocalc.model import resolve_model

    pg = estimate(Plan.from_dict(plan)).per_gpu
    ws = pg.detail.get("cublas_workspace", 0)
    phases = {k: v - ws for k, v in pg.phase_allocated.items()}
    return {"phases": phases, "peak": max(phases.values()),
            "unit16": 2 * max(resolve_model(plan["model"]).layer_sizes)}


def compare(plan: dict, res: dict) -> dict:
    """Deviations as fractions of the probe's figure; `ok` when within the tolerances above."""
    e, p = engine_view(plan), busiest(res)
    step_dev = (e["phases"]["step"] - p["step"]) / p["step"]
    probe_peak = max(p.values())
    over = e["peak"] - probe_peak
    allowance = 2 * e["unit16"] + PEAK_TOL * probe_peak
    peak_dev = over / probe_peak
    ok = abs(step_dev) <= STEP_TOL and -PEAK_TOL * probe_peak <= over <= allowance
    return {"probe": p, "engine": e["phases"], "step_dev": step_dev, "peak_dev": peak_dev,
            "allowance": allowance / probe_peak, "ok": ok}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fsdpprobe.check")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from .runner import run_spec
    from .spec import build_spec

    t0 = time.perf_counter()
    rows, worst = [], (0.0, "")
    for name, plan in plans(a.only):
        res = run_spec(build_spec(plan))
        c = compare(plan, res)
        rows.append({"name": name, **c, "wall_s": res["wall_s"]})
        mb = 1e6
        print(f"{name:20s} {res['wall_s']:5.1f} s  step {c['step_dev']:+6.2%}  peak {c['peak_dev']:+6.2%} "
              f"(allowed {-PEAK_TOL:+.0%}..{c['allowance']:+.1%})  probe fwd/bwd/step "
              + "/".join(f"{c['probe'][k] / mb:.1f}" for k in ("fwd", "bwd", "step"))
              + "  engine " + " ".join(f"{k} {v / mb:.1f}" for k, v in c["engine"].items())
              + ("" if c["ok"] else "  OUT OF TOLERANCE"))
        for dev in (c["step_dev"], c["peak_dev"]):
            if abs(dev) > abs(worst[0]):
                worst = (dev, name)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    bad = [r["name"] for r in rows if not r["ok"]]
    print(f"fsdpprobe-check: grid {len(rows)} plans ({time.perf_counter() - t0:.0f} s); largest deviation "
          f"{worst[0]:+.2%} ({worst[1]}); " + (f"out of tolerance: {', '.join(bad)}" if bad else "all within tolerance"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
