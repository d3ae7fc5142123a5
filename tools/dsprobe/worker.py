"""One CPU rank: build the model, run deepspeed.initialize + steps under the storage tracker, write JSON.

Recipe: docs/deepspeed-cpu.md §1 (DS_ACCELERATOR=cpu, gloo, one thread per rank). Labels are
(re)assigned after init, after each forward, late in each backward (hook on the first trainable param in
module order, whose grad is among the last), just before and after the inner torch optimizer's step
(catches the fp32 grads of the master), and after each step; param grads are named in a tensor hook.
"""
from __future__ import annotations

import gc
import json
import os
import time

from .gloo import release_on_return, watch


def _env(rank: int, world: int, port: int, ext_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=ext_dir, OMP_NUM_THREADS="1",
                      TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error")


def _build_model(spec, torch, deepspeed):
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(spec["model"])
    mtype = fields.pop("model_type")
    cfg = AutoConfig.for_model(mtype, **fields)
    dtype = torch.bfloat16 if spec["precision"] == "bf16-mixed" else torch.float16
    torch.manual_seed(0)

    def make():
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")

    if spec["zero_init"] and spec["stage"] == 3:
        with deepspeed.zero.Init(config_dict_or_path=spec["ds_config"], dtype=dtype):
            model = make()
    else:
        model = make()
    if spec.get("checkpointing"):
        # HF Trainer's gradient_checkpointing=True: PreTrainedModel.gradient_checkpointing_enable (non-reentrant
        # here, so the embedding output needs no requires_grad hook)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if spec["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        lc = spec["lora"]
        model = get_peft_model(model, LoraConfig(r=lc["rank"], lora_alpha=lc["alpha"], lora_dropout=lc["dropout"],
                                                 target_modules=list(lc["targets"]), task_type="CAUSAL_LM"))
        # peft leaves the adapters in fp32; a DeepSpeed run under bf16/fp16 casts the module to the 16-bit dtype
        model.to(dtype)
    return model, cfg


def _save(engine, spec, tr, outdir, rank) -> None:
    """What HF Trainer._save_checkpoint runs under DeepSpeed: save_model -> accelerator.get_state_dict ->
    engine._zero3_consolidated_16bit_state_dict() at ZeRO-3 with stage3_gather_16bit_weights_on_model_save
    (one module gathered at a time, `param.detach().cpu()` on rank 0: host), then
    _save_optimizer_and_scheduler -> engine.save_checkpoint (each rank's partitions through torch.save)."""
    import torch.distributed as dist

    from .host import host_copies, saving

    weights = spec["run"]["save"]
    with host_copies(tr):
        if weights == "zero3-16bit" and spec["stage"] == 3:
            sd = engine._zero3_consolidated_16bit_state_dict()
            del sd
        elif weights == "zero3-16bit" or spec["stage"] < 3:
            sd = {k: v.cpu() for k, v in engine.module.state_dict().items()} if rank == 0 else None
            del sd
    gc.collect()
    with saving(tr):
        engine.save_checkpoint(os.path.join(outdir, "ckpt"))
    dist.barrier()


def run_rank(rank: int, spec: dict, port: int, outdir: str, ext_dir: str) -> None:
    _env(rank, spec["world"], port, ext_dir)
    import torch

    torch.set_num_threads(1)
    release_on_return(torch)
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    from .analysis import analyse
    from .labels import label_all
    from .tracker import StorageTracker

    acc = get_accelerator()
    if spec["precision"] == "fp16-mixed" and not acc.is_fp16_supported():
        # DeepSpeed refuses fp16 when oneDNN lacks fp16 (engine._do_sanity_check); torch runs fp16 on CPU anyway.
        acc.is_fp16_supported = lambda: True
    deepspeed.init_distributed(dist_backend="gloo")
    offload = spec["offload_optimizer"] == "cpu"
    t0 = time.perf_counter()
    tr = StorageTracker()
    watch(tr)
    if os.environ.get("DSPROBE_EVENTS"):
        # where DeepSpeed calls empty_cache (runtime/utils.py empty_cache -> accelerator.empty_cache): on a GPU
        # release_cached_blocks frees every wholly free segment there; the CPU accelerator's is a no-op
        tr.empties = []
        orig_empty = acc.empty_cache

        def empty_cache(*a, **k):
            tr.empties.append(len(tr.events))
            return orig_empty(*a, **k)

        acc.empty_cache = empty_cache
    timings = {}
    run = spec.get("run")
    with tr:
        if run:
            tr.mark("load")      # a whole run (docs/tracer.md §10): the model build is its own phase
        model, cfg = _build_model(spec, torch, deepspeed)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0, fused=True)
        if run:
            tr.mark("init")
        engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=spec["ds_config"])
        dsopt = engine.optimizer

        def relabel():
            label_all(tr, dsopt, engine.module, offload)

        relabel()
        timings["init_s"] = round(time.perf_counter() - t0, 2)

        def grad_hook(g):
            rec = tr.rec_of(g)
            if rec is not None and rec.label is None:
                rec.label = "param_grads_16bit"

        named = [(n, p) for n, p in engine.module.named_parameters() if p.requires_grad]
        for _, p in named:
            p.register_hook(grad_hook)
        named[0][1].register_hook(lambda g: (relabel(), None)[1])

        inner = getattr(dsopt, "optimizer", None)
        if inner is not None and hasattr(inner, "step"):
            orig_step = inner.step

            def step(*a, **k):
                relabel()
                out = orig_step(*a, **k)
                relabel()
                return out

            inner.step = step

        g = torch.Generator().manual_seed(1234 + rank)
        ids = torch.randint(0, cfg.vocab_size, (spec["micro_batch"], spec["seq_len"]), generator=g)
        step_s = []
        for k in range(1, spec["steps"] + 1):
            ts = time.perf_counter()
            for _ in range(spec["gas"]):
                tr.mark(f"fwd{k}")
                loss = engine(input_ids=ids, labels=ids).loss
                relabel()
                tr.mark(f"bwd{k}")
                engine.backward(loss)
                relabel()
                del loss
                tr.mark(f"step{k}")
                engine.step()
                relabel()
            step_s.append(round(time.perf_counter() - ts, 2))
        if run and run.get("save"):
            tr.mark("save")
            _save(engine, spec, tr, outdir, rank)
        tr.mark("end")
        gc.collect()
    timings["step_s"] = step_s
    res = analyse(tr, steady_from=2 if spec["steps"] >= 2 else 1)
    if os.environ.get("DSPROBE_ALLOCATOR"):
        res["allocator_phases"] = allocator_phases(tr)
    if os.environ.get("DSPROBE_EVENTS"):
        res["events"] = event_log(tr)
    if run:
        from .host import run_phases
        res["run_phases"] = run_phases(tr)
    res.update(rank=rank, world=spec["world"], wrapper=type(dsopt).__name__, timings=timings,
               skipped_steps=int(getattr(engine, "skipped_steps", 0)))
    if rank == 0:
        res["params"] = [[n, int(p.ds_numel if hasattr(p, "ds_numel") else p.numel()), bool(p.requires_grad)]
                         for n, p in engine.module.named_parameters()]
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def allocator_phases(tr) -> dict:
    """DSPROBE_ALLOCATOR=1: the rank's event log replayed through the CUDA caching allocator's rules
    (tools/memtrace/allocator.py `replay`): per phase mark (fwd<k>, bwd<k>, step<k>) the highest allocated and
    reserved bytes while it ran, segments kept across phases (no empty_cache inside a step), as a GPU rank's
    `max_memory_reserved` would read them. The CPU tracker sees no cuBLAS workspace and no CUDA context."""
    from tools.memtrace.allocator import PHASE, replay  # noqa: PLC0415
    marks: dict = {}
    for i, name in tr.marks:
        marks.setdefault(i, []).append(name)
    events = []
    for i, (sign, rec) in enumerate(tr.events):
        events += [(PHASE, name) for name in marks.get(i, ())]
        events.append((rec.key, rec.nbytes if sign > 0 else 0))
    events += [(PHASE, name) for name in marks.get(len(tr.events), ())]
    return replay(events).get("phases", {})


def event_log(tr) -> dict:
    """DSPROBE_EVENTS=1: the rank's storage log as it happened, for a block-level allocator replay
    (tools/dsprobe/steptrace.py): events [[+1|-1, key, nbytes, label, site], ...], marks [[index, phase], ...],
    empty_cache [index, ...] (DeepSpeed's empty_cache calls, before the event of that index)."""
    return {"events": [[s, r.key, r.nbytes, r.label, r.site] for s, r in tr.events],
            "marks": [[i, n] for i, n in tr.marks], "empty_cache": list(getattr(tr, "empties", []))}
