"""One CPU rank: build the HF model, wrap it in FSDP the way accelerate does, run steps under the tracker.

The FSDP1 wrapper as accelerate 1.x builds it for the HF Trainer (FullyShardedDataParallelPlugin defaults,
transformers' update_fsdp_plugin_peft for LoRA): transformer-layer auto wrap (peft's
fsdp_auto_wrap_policy with LoRA: adapters as their own units), use_orig_params=True,
limit_all_gathers=True, backward_prefetch=BACKWARD_PRE, forward_prefetch=False; bf16-mixed is
MixedPrecision(param_dtype=reduce_dtype=buffer_dtype=bf16) plus autocast over an fp32 module (LoRA: a
bf16 base with fp32 adapters), bf16-pure a bf16 module without either (LoRA: PEFT's fp32 adapters, or bf16
ones for stack.peft_adapter_dtype "base"). Fused torch AdamW over the trainable parameters, zero_grad(set_to_none).
Phases per step k: fwd{k} (forward and loss), bwd{k}, step{k} (optimizer step and zero_grad).

FSDP2 (spec fsdp_version 2) as torchtune's shard_model and torchtitan's apply_fsdp apply it: fully_shard on
every decoder layer (LoRA adapters inside their layer: FSDP2 shards per parameter, so frozen weights get no
gradient), then on the root, each with reshard_after_forward=True (False for zero_stage 2), over a 1-D CPU
device mesh; bf16-mixed is an fp32 module with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16) as
accelerate 1.15 builds it for FSDP2 (FullyShardedDataParallelPlugin.set_mixed_precision; spec reduce_dtype
"fp32" is torchtitan's default mixed_precision_reduce), with accelerate's autocast kept (no copies: the gathered weights are bf16 already),
bf16-pure a bf16 module with no policy (torchtune). FSDP2 frees and re-allocates unsharded parameters by
resizing storage too (torch/distributed/fsdp/_fully_shard/_fsdp_param.py alloc_storage/free_storage), watched
like FSDP1's; its reduce-scatter runs without gloo's copy of the input (_no_copy_reduce_scatter).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import json
import os


def _env(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
                      TRANSFORMERS_VERBOSITY="error")


def _model(spec, torch):
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(spec["model"])
    cfg = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    mixed = spec["precision"] == "bf16-mixed"
    # bf16-mixed: an fp32 module for full fine-tuning; with LoRA a bf16 base whose adapters PEFT keeps
    # in fp32 (autocast_adapter_dtype), as the engine's precision regimes say (memory/precision.py)
    fp32_module = mixed and not spec["lora"]
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32 if fp32_module else torch.bfloat16,
                                             attn_implementation=spec["attention"])
    if spec["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if spec["lora"]:
        from peft import LoraConfig, get_peft_model

        lc = spec["lora"]
        model = get_peft_model(model, LoraConfig(r=lc["rank"], lora_alpha=lc["alpha"], lora_dropout=lc["dropout"],
                                                 target_modules=list(lc["targets"]), task_type="CAUSAL_LM"))
        if lc.get("adapter_dtype") == "base":
            model.to(torch.bfloat16)            # PEFT < 0.12: adapters in the module dtype too
    return model, cfg


def _fsdp(model, spec, torch):
    from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    if spec["lora"] and spec.get("wrap", "peft") == "peft":
        from peft.utils.other import fsdp_auto_wrap_policy

        policy = fsdp_auto_wrap_policy(model)
    else:
        layer_cls = {type(m) for m in model.modules() if type(m).__name__ in model._no_split_modules}
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=layer_cls)
    mp = None
    if spec["precision"] == "bf16-mixed":
        mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    strategy = ShardingStrategy.FULL_SHARD if spec["zero_stage"] == 3 else ShardingStrategy.SHARD_GRAD_OP
    return FSDP(model, auto_wrap_policy=policy, sharding_strategy=strategy, mixed_precision=mp,
                use_orig_params=True, limit_all_gathers=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
                forward_prefetch=False, device_id=torch.device("cpu"))


def _fully_shard(model, spec, torch):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cpu", (spec["world"],))
    mp = MixedPrecisionPolicy()
    if spec["precision"] == "bf16-mixed":
        reduce = torch.float32 if spec.get("reduce_dtype") == "fp32" else torch.bfloat16
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce)
    reshard = spec["zero_stage"] == 3
    layers = [m for m in model.modules() if type(m).__name__ in _no_split(model)]
    # torchtune's custom_sharded_layers ['tok_embeddings', 'output'] (training.shard_model): the embedding and the
    # output projection as units of their own, the root keeping the final norm only
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    own = [base.get_input_embeddings(), base.get_output_embeddings()] if spec.get("embedding_units") else []
    for m in [*own, *layers]:
        fully_shard(m, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
    comm = _no_copy_reduce_scatter(torch)
    for m in [*own, *layers, model]:
        m.set_custom_reduce_scatter(comm)
    return model


def _no_copy_reduce_scatter(torch):
    """gloo's reduce-scatter copies its whole input into a temporary (traced: one `split` storage the size
    of the input, freed after), which NCCL does not; FSDP2's reduce-scatter input is a whole unit's
    gradient in the reduce dtype, so that copy would read as a GPU's memory. The same collective as an
    in-place all-reduce of the input (gloo allocates nothing for it) and a copy of this rank's chunk into
    FSDP2's output: on every rank FSDP2 holds exactly its input and output buffers, as over NCCL."""
    import torch.distributed as dist
    from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllocMixin

    class NoCopyReduceScatter(DefaultAllocMixin, ReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            dist.all_reduce(input_tensor, op=op, group=group)
            n = output_tensor.numel()
            output_tensor.copy_(input_tensor[dist.get_rank(group) * n:(dist.get_rank(group) + 1) * n])
            return None

    return NoCopyReduceScatter()


def _dump(tr, path):
    """Debug aid (FSDPPROBE_DUMP=1): the live storages by site, largest first."""
    by: dict = {}
    for key, rec in tr.live.items():
        n = tr._size.get(key, rec.nbytes)
        k = (rec.site, str(rec.dtype), rec.op)
        by[k] = (by.get(k, (0, 0))[0] + n, by.get(k, (0, 0))[1] + 1)
    with open(path, "w") as f:
        for k, (n, c) in sorted(by.items(), key=lambda kv: -kv[1][0]):
            f.write(f"{n:>12,} {c:4d} {k}\n")


def _dump_peak(tr, phase, path):
    """Debug aid: the storages live at the peak of one phase (resizes summed per site), by site."""
    live, recs, cur, best, ph, mi = {}, {}, 0, (-1, {}), "init", 0
    for i, (sign, rec) in enumerate(tr.events):
        while mi < len(tr.marks) and tr.marks[mi][0] <= i:
            ph = tr.marks[mi][1]
            mi += 1
        cur += sign * rec.nbytes
        key = id(rec) if rec.key is not None else f"resize {rec.site}"
        live[key] = live.get(key, 0) + sign * rec.nbytes
        recs.setdefault(key, rec)
        if ph == phase and cur > best[0]:
            best = (cur, {k: v for k, v in live.items() if v})
    by: dict = {}
    for k, v in best[1].items():
        r = recs[k]
        g = (r.site, str(r.dtype), r.op if r.key is not None else "resize", r.phase)
        by[g] = by.get(g, 0) + v
    with open(path, "w") as f:
        f.write(f"peak {best[0]:,}\n")
        for g, v in sorted(by.items(), key=lambda kv: -abs(kv[1])):
            f.write(f"{v:>12,} {g}\n")


def _save(wrapped, weights, tr, torch):
    """The model state dict as accelerate's save_fsdp_model takes it (utils/fsdp_utils.py): FULL_STATE_DICT
    with FullStateDictConfig(offload_to_cpu=True, rank0_only=True) (accelerate's default), the same without
    offload (raw FSDP's default config: every rank clones every unsharded parameter), or SHARDED_STATE_DICT
    (each rank's shards as ShardedTensors). Host copies counted by tools/dsprobe/host.py."""
    from torch.distributed.fsdp import FullStateDictConfig, ShardedStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    from tools.dsprobe.host import host_copies

    if weights == "fsdp-sharded":
        kind, cfg = StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig(offload_to_cpu=True)
    elif weights == "fsdp-full":
        kind, cfg = StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
    else:
        kind, cfg = StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=False, rank0_only=False)
    with host_copies(tr), FSDP.state_dict_type(wrapped, kind, cfg):
        sd = wrapped.state_dict()
        tr.resync()
        del sd
    tr.resync()


def _no_split(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return set(base._no_split_modules)


def run_rank(rank: int, spec: dict, port: int, outdir: str) -> None:
    _env(rank, spec["world"], port)
    import torch
    import torch.distributed as dist
    import torch.distributed.fsdp._flat_param as flat_param_mod
    import torch.distributed.fsdp._fully_shard._fsdp_param as fsdp2_param_mod
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as fsdp2_group_mod

    from tools.dsprobe.gloo import release_on_return, watch
    from .tracker import ResizeTracker, phase_stats

    torch.set_num_threads(1)
    release_on_return(torch)
    dist.init_process_group("gloo")
    if os.environ.get("FSDPPROBE_DUMP"):                   # debug: name FSDP's own allocation sites
        import tools.dsprobe.tracker as dst
        dst._SKIP_DIRS = tuple(d for d in dst._SKIP_DIRS if d != "/torch/") + (
            "/torch/_", "/torch/nn/", "/torch/utils/", "/torch/autograd/", "/torch/optim/", "/torch/overrides",
            "/torch/distributed/tensor/", "/torch/distributed/utils", "/torch/distributed/distributed_c10d")
    tr = ResizeTracker()
    watch(tr)

    def watched(fn):
        def wrapper(tensor, *args):
            out = fn(tensor, *args)
            tr.track(tensor, fn.__name__)
            tr.resync()
            return out
        return wrapper

    flat_param_mod._alloc_storage = watched(flat_param_mod._alloc_storage)
    flat_param_mod._free_storage = watched(flat_param_mod._free_storage)
    # FSDP2: _fsdp_param_group imports alloc_storage by name, so both modules' bindings are replaced
    fsdp2_param_mod.alloc_storage = watched(fsdp2_param_mod.alloc_storage)
    fsdp2_param_mod.free_storage = watched(fsdp2_param_mod.free_storage)
    fsdp2_group_mod.alloc_storage = fsdp2_param_mod.alloc_storage
    v2 = spec.get("fsdp_version", 1) == 2
    mixed = spec["precision"] == "bf16-mixed"
    run = spec.get("run")
    with tr:
        if run:
            tr.mark("load")      # a whole run (docs/tracer.md §9): build, then wrap (init), steps, save
        model, cfg = _model(spec, torch)
        if run:
            tr.mark("init")
        wrapped = _fully_shard(model, spec, torch) if v2 else _fsdp(model, spec, torch)
        opt = torch.optim.AdamW([p for p in wrapped.parameters() if p.requires_grad], lr=1e-4, fused=True)
        g = torch.Generator().manual_seed(1234 + rank)
        ids = torch.randint(0, cfg.vocab_size, (spec["micro_batch"], spec["seq_len"]), generator=g)
        gas = spec.get("gas", 1)
        for k in range(1, spec["steps"] + 1):
            for m in range(gas):
                # accumulation micro-steps run under no_sync(), as accelerate's accumulate() (sync_each_batch
                # False, the default) and Lightning's no_backward_sync do
                sync = contextlib.nullcontext() if m == gas - 1 or v2 else wrapped.no_sync()
                # storages caught in reference cycles die at a garbage collection, whose timing would move
                # them between phases from run to run: collect at every phase boundary
                gc.collect()
                tr.mark(f"fwd{k}.{m}")
                with sync:
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                        if spec.get("loss_outside"):
                            # the loss outside the model's forward, as torchtune's and torchtitan's loops run it
                            logits = wrapped(input_ids=ids).logits
                            loss = model.loss_function(logits, ids, vocab_size=cfg.vocab_size)
                            del logits
                        else:
                            loss = wrapped(input_ids=ids, labels=ids).loss
                    tr.mark(f"bwd{k}.{m}")
                    loss.backward()
                    del loss
                gc.collect()
            tr.mark(f"step{k}")
            if os.environ.get("FSDPPROBE_DUMP") and k == spec["steps"] - 1:
                _dump(tr, os.path.join(outdir, f"live{rank}.txt"))
            opt.step()
            opt.zero_grad(set_to_none=True)
        if run and run.get("save"):
            gc.collect()
            tr.mark("save")
            _save(wrapped, run["save"], tr, torch)
            gc.collect()
        tr.mark("end")
    stats = phase_stats(tr)
    if os.environ.get("FSDPPROBE_DUMP"):
        _dump_peak(tr, f"bwd{spec['steps'] - 1}.0", os.path.join(outdir, f"peak{rank}.txt"))
    k = spec["steps"] - 1 if spec["steps"] > 1 else 1          # a steady step: states exist before it
    none = {"peak": 0, "end": 0}
    micro = range(spec.get("gas", 1))
    phases = {ph: {"peak": max(stats.get(f"{ph}{k}.{m}", none)["peak"] for m in micro),
                   "end": stats.get(f"{ph}{k}.{micro[-1]}", none)["end"]} for ph in ("fwd", "bwd")}
    phases["step"] = stats.get(f"step{k}", none)
    if run:
        from tools.dsprobe.host import run_phases
        phases_run = run_phases(tr)
    res = {"rank": rank, "world": spec["world"], "phases": phases, **({"run_phases": phases_run} if run else {}),
           "before": stats.get(f"step{k - 1}", stats.get("init"))["end"] if k > 1 else None}
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()
