"""TRL's reference model under DeepSpeed on CPU ranks: per rank, the bytes the reference holds once TRL's own
`prepare_deepspeed` has built its inference engine, and the peak of one no-grad forward (the `score` phase).

  .venv-trl/bin/python -m tools.dsprobe.refmodel [--json OUT]          (make probe-ref; about a minute)

What runs: `trl.models.utils.prepare_deepspeed(ref_model, accelerator)` (TRL 1.16.0; the same function DPOTrainer,
GRPOTrainer, RLOO and KTO call for `self.ref_model` when `is_deepspeed_enabled`). It copies the accelerator's
DeepSpeed config, drops optimizer / scheduler / offload_optimizer, keeps stage 3 (with the bucket sizes set from
hidden_size) and turns every other stage into stage 0, then `deepspeed.initialize(model=ref, config=...)`
without an optimizer and `.eval()`. Only `accelerator.state.deepspeed_plugin.deepspeed_config` is read, so the
accelerator is a stand-in holding the config an accelerate ZeRO run would hand it. Recipe of the ranks:
docs/deepspeed-cpu.md §1 (DS_ACCELERATOR=cpu, gloo, one thread per rank); storages are counted by
tools/dsprobe/tracker.py.

Cases (the small Llama of docs/deepspeed-cpu.md, P = 6,965,504, bf16, 2 ranks):
  z3          ZeRO-3, the reference built as from_pretrained does without zero.Init (partitioned by initialize)
  z3-zeroinit ZeRO-3 with the model built under deepspeed.zero.Init (what from_pretrained does when accelerate's
              ZeRO-3 config is active: HfDeepSpeedConfig / is_deepspeed_zero3_enabled)
  z2          ZeRO-2: TRL turns it into stage 0, a full replica on every rank
"""
from __future__ import annotations

import json
import os
import sys
import time
from types import SimpleNamespace

from .spec import SMALL_LLAMA

CASES = {"z3": (3, False), "z3-zeroinit": (3, True), "z2": (2, False)}
WORLD = 2
SEQ, MB = 64, 2


def ds_config(stage: int) -> dict:
    """What accelerate's DeepSpeedPlugin holds for a bf16 ZeRO run after its `auto` values are filled."""
    return {"train_micro_batch_size_per_gpu": MB, "gradient_accumulation_steps": 1,
            "train_batch_size": MB * WORLD, "bf16": {"enabled": True}, "gradient_clipping": 1.0,
            "zero_optimization": {"stage": stage, "offload_optimizer": {"device": "none"}},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}


def _live(tr) -> int:
    return sum(r.nbytes for r in tr.live.values())


def run_rank(rank: int, case: str, port: int, outdir: str, ext_dir: str) -> None:
    from .worker import _env
    _env(rank, WORLD, port, ext_dir)
    import torch
    torch.set_num_threads(1)
    from .gloo import release_on_return, watch
    release_on_return(torch)
    import deepspeed
    from transformers import AutoConfig, AutoModelForCausalLM
    from trl.models.utils import prepare_deepspeed

    from .tracker import StorageTracker
    deepspeed.init_distributed(dist_backend="gloo")
    stage, zero_init = CASES[case]
    cfg_d = ds_config(stage)
    fields = dict(SMALL_LLAMA)
    cfg = AutoConfig.for_model(fields.pop("model_type"), **fields)
    tr = StorageTracker()
    watch(tr)
    out = {"rank": rank, "case": case, "stage": stage, "zero_init": zero_init}
    with tr:
        tr.mark("build")
        torch.manual_seed(0)
        if zero_init:
            with deepspeed.zero.Init(config_dict_or_path=cfg_d, dtype=torch.bfloat16):
                ref = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        else:
            ref = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        ref.requires_grad_(False)
        out["built_bytes"] = _live(tr)
        tr.mark("prepare")
        acc = SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(deepspeed_config=cfg_d)))
        engine = prepare_deepspeed(ref, acc)
        import gc
        gc.collect()
        out["resident_bytes"] = _live(tr)
        out["engine_config_stage"] = int(engine.zero_optimization_stage())
        tr.mark("score")
        ids = torch.zeros(MB, SEQ, dtype=torch.long)
        start = len(tr.events)
        with torch.no_grad():
            logits = engine(input_ids=ids).logits
            del logits
        gc.collect()
        cur = out["resident_bytes"]
        peak = cur
        for sign, rec in tr.events[start:]:
            cur += sign * rec.nbytes
            peak = max(peak, cur)
        out["score_peak_bytes"] = peak
        out["after_score_bytes"] = _live(tr)
        tr.mark("end")
    out["params"] = int(sum(getattr(p, "ds_numel", p.numel()) for p in ref.parameters()))
    import torch.distributed as dist
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


def _entry(rank, case, port, outdir, ext_dir):
    fd = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    run_rank(rank, case, port, outdir, ext_dir)


def run_case(case: str) -> dict:
    import tempfile

    from .runner import REPO, free_port, remove_shm_buffers, spawn_ranks
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR") or str(REPO / ".torch_extensions")
    os.makedirs(ext_dir, exist_ok=True)
    port = free_port()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dsprobe-ref-") as out:
        try:
            ranks = spawn_ranks(_entry, (case, port, out, ext_dir), WORLD, out)
        finally:
            remove_shm_buffers(port)
    return {"ranks": ranks, "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    dest = argv[argv.index("--json") + 1] if "--json" in argv else None
    import deepspeed
    import torch
    import trl
    res = {"model": {"name": "small-llama", **SMALL_LLAMA}, "world": WORLD, "precision": "bf16",
           "seq_len": SEQ, "micro_batch": MB, "cases": {},
           "versions": {"trl": trl.__version__, "deepspeed": deepspeed.__version__, "torch": torch.__version__},
           "command": "python -m tools.dsprobe.refmodel --json tools/memtrace/golden/post/ds-ref-model.json  (from .venv-trl)"}
    for case in CASES:
        r = run_case(case)
        res["cases"][case] = {"stage": CASES[case][0], "zero_init": CASES[case][1], "ds_config": ds_config(
            CASES[case][0]), **r}
        print(case, [(x["resident_bytes"], x["score_peak_bytes"]) for x in r["ranks"]], r["wall_s"], flush=True)
    if dest:
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        with open(dest, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
