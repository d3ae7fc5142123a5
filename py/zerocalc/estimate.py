"""estimate(plan) -> Estimate: gather the memory terms, find the peak phase, give the verdicts.

The peak is the largest of the phases of a steady-state step (memory/terms.py), never the sum of
every term: gradients and activations, for instance, are never both at full size (research/tracer.md
§3). Everything is computed for the busiest rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from . import advice
from .architecture import ModelArch, resolve_model
from .memory import deepspeed as ds
from .memory.activations import Activations, activations
from .memory.frameworks import ddp_terms, fsdp_terms, single_terms
from .memory.logits import Logits, logits
from .memory.lora import adapter_params, block_linears_per_layer, layer_adapters, largest_quantized_matrix, \
    qlora_base_bytes
from .memory.precision import Dtypes, dtypes_for, module_dtypes
from .memory.runtime import allocator_slack, runtime
from .memory.terms import (BWD_TOP, COMPONENTS, PHASES, RECOMPUTE, RECOMPUTE_TOP, TOP_BWD, Term, gpu,
                           next_pow2)
from .plan import Plan
from .presets import GPUS
from .step import step_estimate

GIB = 1 << 30


@dataclass(frozen=True)
class GpuSpec:
    name: str
    capacity_bytes: int
    bf16_supported: bool
    compute_capability: str | None
    interconnect: str
    link_gb_s: float | None


def gpu_spec(gpu) -> GpuSpec:
    if isinstance(gpu, str):
        g = GPUS[gpu]
        return GpuSpec(g.name, g.memory_bytes, g.bf16_supported, g.compute_capability, g.interconnect, g.link_gb_s)
    return GpuSpec(str(gpu.get("name", "custom GPU")), int(float(gpu["memory_gib"]) * GIB),
                   bool(gpu.get("bf16_supported", True)), gpu.get("compute_capability"),
                   str(gpu.get("interconnect", "unknown")), gpu.get("link_gb_s"))


@dataclass(frozen=True)
class PerGpu:
    phase: str
    phase_allocated: Mapping          # phase -> allocated bytes
    components: Mapping               # component -> bytes at the peak (sums to device_used)
    detail: Mapping                   # term -> bytes at the peak
    peak_allocated: int
    peak_reserved: int
    device_used: int
    host_per_rank: int                # steady-state host bytes of one rank (pinned rounded)
    host_detail: Mapping
    deepspeed_buffers: Mapping        # DeepSpeed buffer -> bytes on this rank (sizes, any phase)


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    arch: ModelArch
    gpu: GpuSpec
    per_gpu: PerGpu
    capacity_bytes: int
    fits: bool
    primary_driver: str
    host_per_node_bytes: int
    tokens_per_step: int
    global_batch_size: int
    trainable_params: int
    total_params: int
    min_gpus: int | None
    warnings: tuple = field(default=())
    static: object = field(default=None, repr=False, compare=False)   # reused by advice
    step: object = field(default=None, repr=False, compare=False)     # step.Step (Extension 2)

    def to_dict(self) -> dict:
        pg = self.per_gpu
        return {
            "schema": 1,
            "model": {"name": self.arch.name, "total_params": self.total_params, "layers": self.arch.num_layers,
                      "hidden_size": self.arch.hidden_size, "vocab_size": self.arch.vocab_size},
            "gpu": {"name": self.gpu.name, "capacity_bytes": self.capacity_bytes,
                    "interconnect": self.gpu.interconnect, "link_gb_s": self.gpu.link_gb_s},
            "per_gpu": {
                "components": dict(pg.components),
                "peak_allocated_bytes": pg.peak_allocated,
                "peak_reserved_bytes": pg.peak_reserved,
                "device_used_bytes": pg.device_used,
                "capacity_bytes": self.capacity_bytes,
                "peak_phase": pg.phase,
                "phases": dict(pg.phase_allocated),
                "detail": dict(pg.detail),
                "deepspeed_buffers": dict(pg.deepspeed_buffers),
                "host_bytes": pg.host_per_rank,
                "host_detail": dict(pg.host_detail),
            },
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "headroom_bytes": self.capacity_bytes - pg.device_used,
            "primary_driver": self.primary_driver,
            "host_per_node_bytes": self.host_per_node_bytes,
            "tokens_per_step": self.tokens_per_step,
            "global_batch_size": self.global_batch_size,
            "trainable_params": self.trainable_params,
            "total_params": self.total_params,
            "min_gpus": self.min_gpus,
            "warnings": [dict(w) for w in self.warnings],
            **(self.step.to_dict() if self.step is not None else {}),
        }


# --- inputs shared by every world size --------------------------------------------------------------


@dataclass(frozen=True)
class _Static:
    """Everything that does not depend on the number of GPUs (reused by the min_gpus search)."""
    arch: ModelArch
    dt: Dtypes
    trainable: ds.Trainable
    shapes: tuple                    # (shape, numel) of trainable tensors (optimizer states)
    frozen_bytes: int                # whole frozen base on one GPU
    frozen_numel: int
    all_sizes: tuple                 # module params for ZeRO-3 partitioning (16-bit element units)
    acts: Activations
    logits: Logits
    dequant: int                     # QLoRA: 16-bit copy of the largest quantized weight


def _static(plan: Plan, arch: ModelArch) -> _Static:
    dt = dtypes_for(plan)
    if plan.method == "full":
        sizes, shapes = arch.tensor_sizes, arch.tensor_shapes
        tr = ds.Trainable(sizes, "weights", "gradients", "optimizer_states")
        frozen_bytes, frozen_numel, frozen_sizes = 0, 0, ()
    else:
        ad_sizes, ad_shapes = [], []
        for lins in block_linears_per_layer(arch):
            for a in layer_adapters(arch, plan, lins):
                ad_sizes += [a.rank * a.d_in, a.d_out * a.rank]
                ad_shapes += [((a.rank, a.d_in), a.rank * a.d_in), ((a.d_out, a.rank), a.d_out * a.rank)]
        if "lm_head" in plan.lora.targets:
            r = plan.lora.rank
            ad_sizes += [r * arch.hidden_size, arch.vocab_size * r]
            ad_shapes += [((r, arch.hidden_size), r * arch.hidden_size), ((arch.vocab_size, r), arch.vocab_size * r)]
        tr = ds.Trainable(tuple(ad_sizes), "lora_adapters", "lora_adapters", "lora_adapters")
        shapes = tuple(ad_shapes)
        frozen_numel = arch.total_params
        if plan.method == "qlora":
            frozen_bytes = qlora_base_bytes(arch, plan, dt.frozen)
        else:
            frozen_bytes = frozen_numel * dt.frozen
        # ZeRO-3 partitions the frozen base too; in 16-bit element units (QLoRA's packed storage is
        # kept in a 16-bit quant_storage dtype so DeepSpeed can shard it)
        scale = frozen_bytes / max(1, frozen_numel * 2)
        frozen_sizes = tuple(max(1, int(t.numel * scale)) for t in arch.tensors)
    all_sizes = tuple(tr.sizes) + frozen_sizes
    acts = activations(plan, arch, module_dtypes(plan, dt))
    lg = logits(plan, arch, 2 if dt.autocast else dt.compute)
    dequant = dt.compute * largest_quantized_matrix(arch) if plan.method == "qlora" else 0
    return _Static(arch, dt, tr, shapes, frozen_bytes, frozen_numel, all_sizes, acts, lg, dequant)


# --- per-GPU computation ------------------------------------------------------------------------------


def _model_state_terms(plan: Plan, st: _Static) -> list[Term]:
    dt, tr = st.dt, st.trainable
    gas = plan.gradient_accumulation_steps
    wbytes = dt.weight if plan.method == "full" else dt.adapter
    gbytes = dt.grad if plan.method == "full" else (dt.adapter if not dt.autocast else 4)
    if plan.framework == "deepspeed":
        frozen = st.frozen_bytes if plan.zero_stage < 3 else 0
        return ds.zero_terms(plan, st.arch, tr, frozen, st.all_sizes, wbytes, gas, dt.master or 4, dt.state)
    sbytes = dt.state if plan.method == "full" else max(dt.state, dt.adapter)
    if plan.framework == "fsdp":
        return fsdp_terms(plan, st.arch, tr, st.frozen_numel, st.frozen_bytes, wbytes, gbytes, sbytes,
                          2 if dt.autocast else dt.compute, gas)
    fn = ddp_terms if plan.framework == "ddp" else single_terms
    return fn(plan, st.arch, tr, st.shapes, st.frozen_bytes, wbytes, gbytes, sbytes, gas)


def _activation_terms(plan: Plan, st: _Static) -> list[Term]:
    a, lg = st.acts, st.logits
    t = [
        gpu("saved_activations", "activations", a.stack_saved, {"fwd", "loss_bwd"} | TOP_BWD),
        gpu("head_activations", "activations", a.head_saved, {"fwd", "loss_bwd"}),
        gpu("logits_forward", "logits", lg.forward_peak, {"fwd"}),
        gpu("logits_backward", "logits", lg.backward_peak, {"loss_bwd"}),
    ]
    # the gradients in flight inside the layer being back-propagated (the last one is layer 0)
    t.append(gpu("layer_backward_temps", "activations", a.layer_backward_temp, {"bwd_end"}))
    if a.autocast_weight_copies:
        t.append(gpu("autocast_weight_copies", "activations", a.autocast_weight_copies, {"fwd", "loss_bwd"}))
    if a.autocast_cache_forward:
        # cached until the autocast context exits at the end of forward, not kept by checkpointed layers
        t.append(gpu("autocast_cache_forward", "activations", a.autocast_cache_forward, {"fwd"}))
    if st.dequant:
        # one 16-bit dequantized weight exists only inside a layer's forward, backward or recompute
        t.append(gpu("qlora_dequant_buffer", "activations", st.dequant, {"bwd_end", RECOMPUTE}))
    return t


def _recompute_terms(plan: Plan, st: _Static) -> list[Term]:
    """Full checkpointing: during backward each layer is recomputed and back-propagated in turn,
    on top of nearly all gradients (the end-of-backward state)."""
    a = st.acts
    if plan.activation_checkpointing != "full":
        return []
    t = [gpu("recomputed_layer", "activations", a.recompute_layer, {RECOMPUTE, RECOMPUTE_TOP})]
    replicated = plan.framework in ("single", "ddp")
    if replicated and plan.method == "full":
        # at the top layer's recompute only the head's gradients exist (lm_head, final norm)
        head = sum(tt.numel for tt in st.arch.tensors if tt.component in ("lm_head", "norm") and
                   not any(seg in tt.name for seg in (".layers.", ".h.", ".layer.", ".block.")))
        if st.arch.tied_embeddings:
            head += st.arch.vocab_size * st.arch.hidden_size
        t.append(gpu("grads_at_top_recompute", "gradients", st.dt.grad * head, {RECOMPUTE_TOP}))
    if replicated and plan.method == "full" and not plan.optimizer_in_backward:
        # the last recompute (layer 0) runs before layer 0's and the embedding's gradients exist
        arch = st.arch
        first = sum(tt.numel for tt in arch.tensors if ".0." in tt.name and tt.component != "embedding"
                    and tt.name.split(".0.")[0].endswith(("layers", "h", "layer", "block")))
        emb = sum(tt.numel for tt in arch.tensors if tt.component == "embedding")
        if arch.tied_embeddings and arch.causal_lm:
            emb -= arch.vocab_size * arch.hidden_size     # lm_head's gradient (the tied weight's) exists
        t.append(gpu("grads_not_yet_produced", "gradients", -st.dt.grad * (first + emb), {RECOMPUTE}))
    return t


def _per_gpu(plan: Plan, st: _Static, spec: GpuSpec) -> PerGpu:
    terms = _model_state_terms(plan, st) + _activation_terms(plan, st) + _recompute_terms(plan, st)
    rt = runtime(spec.compute_capability, plan.world_size)
    terms.append(gpu("cublas_workspace", "runtime", rt.cublas_workspace))
    gpu_terms = [t for t in terms if t.place == "gpu"]
    if plan.activation_checkpointing == "full":
        phases = list(PHASES) + [RECOMPUTE, RECOMPUTE_TOP]
    else:
        phases = list(PHASES) + ([BWD_TOP] if plan.framework == "fsdp" else [])
    replicated = plan.framework in ("single", "ddp")

    def live(t: Term, ph: str) -> int:
        if ph in TOP_BWD:
            if ph in t.phases:
                return t.nbytes
            if t.name in ("head_activations", "tied_embedding_grad", "grads_not_yet_produced",
                          "recomputed_layer", "fsdp_root_grads", "grad_shards_last") or t.component == "logits":
                return 0
            if t.name == "grad_shards" and "fwd" not in t.phases:
                return 0                      # FSDP: nothing reduce-scattered yet at the top layer
            if replicated and t.name == "gradients":
                return 0                      # only the head's exist yet: grads_at_top_recompute
            return t.nbytes if "bwd_end" in t.phases else 0
        if ph == RECOMPUTE:
            # recompute happens inside backward: everything of the end-of-backward state is there
            return t.nbytes if (RECOMPUTE in t.phases or ("bwd_end" in t.phases and t.name not in
                                                         ("saved_activations", "tied_embedding_grad",
                                                          "head_activations", "fsdp_root_grads",
                                                          "grad_shards_last"))) else 0
        return t.live(ph)

    alloc = {ph: sum(live(t, ph) for t in gpu_terms if t.allocator and not t.cached) for ph in phases}
    peak_phase = max(phases, key=lambda ph: alloc[ph])
    peak_alloc = alloc[peak_phase]
    slack = allocator_slack(peak_alloc)
    # blocks another stream keeps cached (FSDP's all-gather stream) raise reserved in the phases where
    # no tensor occupies them
    held = max(alloc[ph] + sum(live(t, ph) for t in gpu_terms if t.cached) for ph in phases)
    stream_cache = held - peak_alloc
    reserved = peak_alloc + stream_cache + slack
    # Paged (CUDA managed) memory sits on the GPU only as far as the rest leaves room; the driver
    # evicts the remainder to host RAM instead of failing, so it never causes an out-of-memory.
    room = max(0, spec.capacity_bytes - reserved - rt.outside_allocator)
    comps = {c: 0 for c in COMPONENTS}
    detail: dict[str, int] = {}
    paged = evicted = 0
    for t in gpu_terms:
        if t.cached:
            continue
        b = live(t, peak_phase)
        if b and not t.allocator:
            resident = min(b, room)
            room -= resident
            paged += resident
            evicted += b - resident
            b = resident
        if b:
            comps[t.component] += b
            detail[t.name] = detail.get(t.name, 0) + b
    used = reserved + rt.outside_allocator + paged
    comps["runtime"] += slack + stream_cache + rt.outside_allocator
    detail["allocator_cache"] = slack
    if stream_cache:
        detail["stream_cache"] = stream_cache
    detail["cuda_context"] = rt.cuda_context
    if rt.nccl:
        detail["nccl"] = rt.nccl
    host_detail: dict[str, int] = {}
    for t in terms:
        if t.place == "host":
            host_detail[t.name] = host_detail.get(t.name, 0) + (next_pow2(t.nbytes) if t.pinned else t.nbytes)
    if st.acts.host_offloaded:
        host_detail["offloaded_activations"] = st.acts.host_offloaded
    if evicted:
        host_detail["paged_evicted"] = evicted
    ds_buffers = {}
    if plan.framework == "deepspeed":
        ds_buffers = {t.name if t.place == "gpu" else f"host.{t.name}": t.nbytes for t in terms
                      if t.component not in ("activations", "logits", "runtime") and t.nbytes}
    return PerGpu(phase=peak_phase, phase_allocated=MappingProxyType(alloc), components=MappingProxyType(comps),
                  detail=MappingProxyType(detail), peak_allocated=peak_alloc, peak_reserved=reserved,
                  device_used=used, host_per_rank=sum(host_detail.values()),
                  host_detail=MappingProxyType(host_detail), deepspeed_buffers=MappingProxyType(ds_buffers))


def _host_per_node(plan: Plan, st: _Static, pg: PerGpu) -> int:
    """Host RAM of one node: every rank's offload buffers (pinned ones rounded to a power of two)
    or, if larger, what loading the model takes (each rank holds its own copy without zero.Init)."""
    ranks = plan.gpus_per_node
    loading = ds.host_loading_bytes(plan, st.arch) if plan.framework == "deepspeed" else 2 * st.arch.total_params
    return ranks * max(pg.host_per_rank, loading)


MAX_NODES_SEARCHED = 4096


def _layout(plan: Plan, i: int) -> tuple[int, int]:
    """The i-th layout in increasing GPU count: 1..gpus_per_node GPUs on one node, then whole nodes."""
    per = plan.gpus_per_node
    return (i + 1, 1) if i < per else (per, i - per + 2)


def _min_gpus(plan: Plan, st: _Static, spec: GpuSpec) -> int | None:
    """Fewest GPUs of this kind that fit the plan at its stage. Per-GPU memory never grows with
    the world size at a fixed stage, so the first fitting layout is the answer."""
    if plan.framework in ("single", "ddp"):
        fits = _per_gpu(plan, st, spec).device_used <= spec.capacity_bytes
        return 1 if fits else None
    last = plan.gpus_per_node + MAX_NODES_SEARCHED - 2

    def fits(i: int) -> bool:
        g, n = _layout(plan, i)
        p = replace(plan, gpus_per_node=g, nodes=n)   # same plan, another world: no re-validation
        return _per_gpu(p, st, spec).device_used <= spec.capacity_bytes

    # bracket by doubling from the plan's own layout, then bisect (per-GPU memory falls with the count)
    here = plan.gpus_per_node - 1 + (plan.nodes - 1)
    if fits(here):
        lo, hi = -1, here
        step = 1
        while hi - step >= 0 and fits(hi - step):
            hi, step = hi - step, step * 2
        lo = max(-1, hi - step)
    else:
        if not fits(last):                           # not even the largest layout fits
            return None
        lo, hi, step = here, here + 1, 1
        while hi <= last and not fits(hi):
            lo, hi, step = hi, hi + step * 2, step * 2
        hi = min(hi, last)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    g, n = _layout(plan, hi)
    return g * n


def estimate(plan: Plan, *, search_min_gpus: bool = True) -> Estimate:
    """The estimate of one plan. ``search_min_gpus=False`` skips the min_gpus search (min_gpus is then
    None): the planner, which asks it once per stage, uses that for its many other candidates."""
    arch = resolve_model(plan.model)
    spec = gpu_spec(plan.gpu)
    st = _static(plan, arch)
    pg = _per_gpu(plan, st, spec)
    comps = {k: v for k, v in pg.components.items() if k != "runtime"}
    driver = max(comps, key=lambda k: comps[k])
    fits = pg.device_used <= spec.capacity_bytes
    tokens = plan.seq_len * plan.micro_batch_size * plan.gradient_accumulation_steps * plan.world_size
    trainable = st.trainable.numel
    est = Estimate(
        plan=plan, arch=arch, gpu=spec, per_gpu=pg, capacity_bytes=spec.capacity_bytes, fits=fits,
        primary_driver=driver, host_per_node_bytes=_host_per_node(plan, st, pg), tokens_per_step=tokens,
        global_batch_size=plan.micro_batch_size * plan.gradient_accumulation_steps * plan.world_size,
        trainable_params=trainable, total_params=arch.total_params + (trainable if plan.method != "full" else 0),
        min_gpus=_min_gpus(plan, st, spec) if search_min_gpus else None, static=st,
        step=step_estimate(plan, arch, plan.gpu,
                           offloaded_activation_bytes=pg.host_detail.get("offloaded_activations", 0)))
    return _with_warnings(est)


def _with_warnings(est: Estimate) -> Estimate:
    return replace(est, warnings=tuple(advice.warnings(est)))


__all__ = ["estimate", "Estimate", "PerGpu", "GpuSpec", "gpu_spec", "adapter_params"]
