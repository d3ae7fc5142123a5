"""The planner: what fits, how fast, and what to change (plan-v1 Extension 2, ``zerocalc fit``).

    fit(plan) -> Fit;  Fit.to_dict() -> {"max_micro_batch_size", "max_seq_len", "min_gpus", "options"}

Every figure is a real estimate: the maxima are exact integer searches over ``estimate()`` (memory never
falls when the micro-batch or the sequence grows, so "N fits and N+1 does not" is found by doubling then
bisection), ``min_gpus`` is the estimate's own search at each ZeRO stage (FSDP: SHARD_GRAD_OP and
FULL_SHARD), and every option is ``estimate(plan.with_changes(**changes))``, ranked fitting first, then by
tokens per second per GPU. Estimates of the same plan are computed once per call (memoised by the plan's
JSON), candidates skip the min_gpus search (``search_min_gpus=False``).

    fit_steps(plan) -> a generator: it yields ``(plan, search_min_gpus)`` for each estimate it needs, is sent
    that estimate back, and returns the Fit (StopIteration.value). ``fit()`` is ``drain(fit_steps(plan))``.

The planner asks for its estimates instead of making them, so a shell can spread one fit over several short
slices (the page's planner worker, py/app/fit_view.py: an edit pre-empts the next slice). The generator holds
all of one fit's state; nothing here is global.
"""
from __future__ import annotations

import json
from math import gcd
from dataclasses import dataclass, field

from .datasettings import DataSettings, allocator_dict, data_dict, expandable
from .estimate import estimate
from .plan import MAX_MICRO_BATCH, MAX_SEQ_LEN, Plan, PlanError
from .post.defaults import lengths
from .postplan import GROUPED, default_generations, post_training_to_dict
from .presets import GPUS
from .runplan import DEFAULT, run_to_dict

GIB = 1 << 30


@dataclass(frozen=True)
class Option:
    changes: dict
    label: str
    device_used_bytes: int
    capacity_bytes: int
    fits: bool
    step_time_s: float
    tokens_per_s_per_gpu: float
    reserved_after_1000_bytes: int | None = None   # run.reserved_after_steps["1000"] (Extension 6)
    fragmentation_oom_step: int | None = None

    def to_dict(self) -> dict:
        return {"changes": dict(self.changes), "label": self.label, "device_used_bytes": self.device_used_bytes,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "step_time_s": self.step_time_s,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "reserved_after_1000_bytes": self.reserved_after_1000_bytes,
                "fragmentation_oom_step": self.fragmentation_oom_step}


@dataclass(frozen=True)
class Fit:
    plan: Plan
    fits: bool
    device_used_bytes: int
    tokens_per_s_per_gpu: float
    max_micro_batch_size: int | None
    max_seq_len: int | None
    min_gpus: dict
    options: tuple = field(default=())
    estimates: int = 0                 # estimate() calls made (the budget is 100)
    post: dict = field(default_factory=dict)   # post-training: max_completion_len, max_gpu_memory_utilization
    reserved_after_1000_bytes: int | None = None
    fragmentation_oom_step: int | None = None

    def to_dict(self) -> dict:
        return {"fits": self.fits, "device_used_bytes": self.device_used_bytes,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "reserved_after_1000_bytes": self.reserved_after_1000_bytes,
                "fragmentation_oom_step": self.fragmentation_oom_step,
                "max_micro_batch_size": self.max_micro_batch_size, "max_seq_len": self.max_seq_len,
                "min_gpus": dict(self.min_gpus), "options": [o.to_dict() for o in self.options],
                "estimate_calls": self.estimates, **self.post}


def answer(steps, need):
    """Answer one request ``need = (plan, search_min_gpus)`` of a generator of estimate requests with
    ``estimate()`` and return its next request (StopIteration when it is done). An error of ``estimate`` is raised
    inside the generator, where it asked, as if it had called ``estimate`` itself."""
    try:
        e = estimate(need[0], search_min_gpus=need[1])
    except Exception as err:
        return steps.throw(err)
    return steps.send(e)


def drain(steps):
    """Run a generator of estimate requests (``fit_steps``, or a reader built on it) to its end; returns what the
    generator returns."""
    try:
        need = next(steps)
        while True:
            need = answer(steps, need)
    except StopIteration as done:
        return done.value


class _Memo:
    """estimate() once per distinct plan in one fit: ``yield from memo(plan)`` yields the request on a miss."""

    def __init__(self):
        self.cache: dict = {}
        self.calls = 0

    def __call__(self, plan: Plan, search_min_gpus: bool = False):
        key = (json.dumps(plan.to_dict(), sort_keys=True), search_min_gpus)
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = yield (plan, search_min_gpus)
        return self.cache[key]


def _max_int(fits, start: int, hi_limit: int):
    """Largest n in [1, hi_limit] with fits(n), for a monotone fits (true up to some n, false after):
    double (or halve) from ``start`` to bracket, then bisect. ``fits(n)`` is a generator (``yield from``)."""
    start = max(1, min(start, hi_limit))
    if (yield from fits(start)):
        lo, hi = start, None
        while hi is None:
            nxt = min(lo * 2, hi_limit)
            if nxt == lo:
                return lo
            if (yield from fits(nxt)):
                lo = nxt
            else:
                hi = nxt
    else:
        hi, lo = start, None
        while lo is None:
            if hi == 1:
                return None
            nxt = max(1, hi // 2)
            if (yield from fits(nxt)):
                lo = nxt
            else:
                hi = nxt
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (yield from fits(mid)):
            lo = mid
        else:
            hi = mid
    return lo


def _stage_plan(plan: Plan, stage: int) -> Plan:
    """The plan at another stage, with offloads the stage cannot have turned off."""
    ch: dict = {"zero_stage": stage}
    if stage < 3 and plan.offload_params != "none":
        ch["offload_params"] = "none"
    if stage == 0 and plan.offload_optimizer != "none":
        ch["offload_optimizer"] = "none"
    return plan.with_changes(**ch)


def min_gpus_by_stage(plan: Plan, memo):
    """Fewest GPUs of this kind that fit, per ZeRO stage (deepspeed), per FSDP mode, or DDP's 1/None
    (a generator of estimate requests, like every helper below that takes ``memo`` or ``fits_with``)."""
    if plan.framework == "fsdp":
        stages = (2, 3)
    elif plan.framework == "deepspeed":
        stages = (0, 1, 2, 3)
    else:
        return {"0": (yield from memo(plan, True)).min_gpus}
    out = {}
    for s in stages:
        try:
            out[str(s)] = (yield from memo(_stage_plan(plan, s), True)).min_gpus
        except PlanError:
            out[str(s)] = None
    return out


def _candidates(plan: Plan, max_mbs: int | None, min_gpus: dict) -> list[tuple[dict, str]]:
    """Concrete changes worth estimating for this plan (each a dict of plan keys -> values)."""
    out: list[tuple[dict, str]] = []
    if plan.activation_checkpointing != "full":
        out.append(({"activation_checkpointing": "full"}, "full activation checkpointing"))
    if plan.activation_checkpointing == "none":
        out.append(({"activation_checkpointing": "selective"}, "selective activation checkpointing"))
    total = plan.micro_batch_size * plan.gradient_accumulation_steps
    target = min(plan.micro_batch_size - 1, max_mbs or 1)
    if plan.micro_batch_size > 1:
        mbs = max(d for d in range(1, target + 1) if total % d == 0)
        out.append(({"micro_batch_size": mbs, "gradient_accumulation_steps": total // mbs},
                    f"micro-batch {mbs} x accumulation {total // mbs} (same global batch)"))
    if max_mbs and max_mbs > plan.micro_batch_size:
        mbs = max(d for d in range(1, max_mbs + 1) if total % d == 0)
        if mbs > plan.micro_batch_size:
            out.append(({"micro_batch_size": mbs, "gradient_accumulation_steps": total // mbs},
                        f"micro-batch {mbs} x accumulation {total // mbs} (same global batch)"))
    if plan.framework == "deepspeed":
        for s in (1, 2, 3):
            if s != plan.zero_stage:
                out.append(({"zero_stage": s}, f"ZeRO stage {s}"))
        if plan.offload_optimizer == "none" and plan.zero_stage >= 1:
            out.append(({"offload_optimizer": "cpu"}, "offload the optimizer to CPU (ZeRO-Offload)"))
        if plan.zero_stage < 3 and plan.offload_optimizer == "none":
            out.append(({"zero_stage": 3, "offload_optimizer": "cpu"}, "ZeRO-3 + optimizer offload to CPU"))
        if plan.offload_params == "none":
            out.append(({"zero_stage": 3, "offload_optimizer": "cpu", "offload_params": "cpu"},
                        "ZeRO-3 + optimizer and parameter offload to CPU"))
    elif plan.framework == "fsdp":
        other = 2 if plan.zero_stage == 3 else 3
        out.append(({"zero_stage": other}, "FSDP " + ("SHARD_GRAD_OP" if other == 2 else "FULL_SHARD")))
        if plan.offload_params == "none":
            out.append(({"offload_params": "cpu", "zero_stage": 3}, "FSDP FULL_SHARD with CPU offload"))
    elif plan.framework == "ddp":
        out.append(({"framework": "deepspeed", "zero_stage": 2}, "DeepSpeed ZeRO-2 instead of DDP"))
        out.append(({"framework": "deepspeed", "zero_stage": 3}, "DeepSpeed ZeRO-3 instead of DDP"))
    if plan.loss != "chunked":
        out.append(({"loss": "chunked"}, "chunked cross-entropy (no full fp32 logits)"))
    if plan.activation_checkpointing != "full" and plan.loss != "chunked":
        out.append(({"activation_checkpointing": "full", "loss": "chunked"},
                    "full activation checkpointing + chunked cross-entropy"))
    if plan.optimizer in ("adamw", "paged-adamw-32bit"):
        out.append(({"optimizer": "adamw-8bit"}, "8-bit AdamW (bitsandbytes)"))
        out.append(({"optimizer": "paged-adamw-8bit"}, "paged 8-bit AdamW (bitsandbytes)"))
    if plan.method == "full":
        out.append(({"method": "lora"}, "LoRA instead of full fine-tuning"))
    if plan.method != "qlora":
        out.append(({"method": "qlora"}, "QLoRA (4-bit base + LoRA)"))
    here, per = plan.world_size, plan.gpus_per_node
    if plan.framework in ("deepspeed", "fsdp"):
        for stage, need in min_gpus.items():
            if need and need > here:
                nodes = -(-need // per)
                ch = {"nodes": nodes} if int(stage) == plan.zero_stage else {"zero_stage": int(stage), "nodes": nodes}
                out.append((ch, f"{nodes * per} GPUs ({nodes} nodes of {per})"
                            + ("" if int(stage) == plan.zero_stage else f" at stage {stage}")))
    g = GPUS.get(plan.gpu) if isinstance(plan.gpu, str) else None
    typical = g.typical_gpus_per_node if g else None
    if plan.framework not in ("single",) and typical and typical > per and plan.nodes == 1:
        out.append(({"gpus_per_node": typical}, f"{typical} GPUs on one node"))
    return out


def _run_with(plan: Plan, **parts) -> dict:
    """The plan's run block (Extension 5) with some of its parts replaced, for with_changes(run=...)."""
    run = run_to_dict(plan.run)
    for k, v in parts.items():
        run[k] = {**(run.get(k) or {}), **v} if isinstance(v, dict) else v
    return run


def _run_candidates(plan: Plan, fits_with):
    """The run's knobs (Extension 5) that keep a phase other than the step inside: the eval batch (the largest that
    fits), eval_accumulation_steps and argmax logits for accumulated eval logits, zero.Init at load, a save that
    offloads or writes shards, a merge on the CPU-friendly PEFT path."""
    out: list[tuple[dict, str]] = []
    r = plan.run
    ev = r.eval if r.eval not in (None, DEFAULT) else None
    if ev is not None:
        cur = ev.batch_size if ev.batch_size != "auto" else max(plan.micro_batch_size, 8)
        if cur > 1:
            b = (yield from _max_int(lambda n: fits_with(run=_run_with(plan, eval={"batch_size": n})), 1, cur - 1)) or 1
            out.append(({"run": _run_with(plan, eval={"batch_size": b})}, f"eval batch size {b}"))
        if ev.logits == "accumulate":
            out.append(({"run": _run_with(plan, eval={"accumulation_steps": 1})}, "eval_accumulation_steps 1"))
            out.append(({"run": _run_with(plan, eval={"logits": "argmax"})},
                        "preprocess_logits_for_metrics: keep argmax token ids"))
    if plan.framework == "deepspeed" and plan.zero_stage == 3 and (
            r.load.zero_init is False or (r.load.zero_init == "auto" and not plan.deepspeed.get("zero_init", True))):
        out.append(({"run": _run_with(plan, load={"zero_init": True})}, "build the model under zero.Init"))
    sv = r.save if r.save not in (None, DEFAULT) else None
    if sv is not None and sv.weights == "fsdp-full-no-offload":
        out.append(({"run": _run_with(plan, save={"weights": "fsdp-full"})},
                    "save FULL_STATE_DICT offloaded to rank 0's CPU"))
        out.append(({"run": _run_with(plan, save={"weights": "fsdp-sharded"})}, "save a SHARDED_STATE_DICT"))
    if r.merge_at_end == "16bit-in-process":
        out.append(({"run": _run_with(plan, merge_at_end="peft")}, "merge the adapters layer by layer (PEFT)"))
    return out


def _data_candidates(plan: Plan) -> list[tuple[dict, str]]:
    """Extension 6, for a plan of variable lengths: pack the samples (data.lengths fixed: rows of seq_len, no
    ratchet), padding-free batches instead of padding to the longest, and expandable segments (the segment grows in
    place, memory/fragmentation.py). Their effect shows in each option's reserved after 1000 steps."""
    d, out = plan.data, []
    if d.lengths == "fixed":
        return out
    data = data_dict(d)
    out.append(({"data": {**data, "lengths": "fixed"}}, f"pack the samples into rows of {plan.seq_len} tokens"))
    if d.lengths == "padded-longest":
        out.append(({"data": {**data, "lengths": "padding-free"}},
                    "padding-free batches (TRL padding_free, flash-attention varlen)"))
    if not expandable(plan.allocator, plan.stack.trainer):
        out.append(({"allocator": {**allocator_dict(plan.allocator), "expandable_segments": True}},
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"))
    return out


def _at_seq_len(plan: Plan, n: int) -> dict:
    """Changes for sequence length ``n``: the samples are truncated at it, so the data's lengths are clipped too
    (data.mean_len / p99_len / histogram must stay within seq_len)."""
    if plan.data == DataSettings():
        return {"seq_len": n}
    d = data_dict(plan.data)
    for k in ("mean_len", "p99_len"):
        if d[k] is not None:
            d[k] = min(d[k], n)
    if d["histogram"] is not None:
        d["histogram"] = [[min(length, n), w] for length, w in d["histogram"]]
    return {"seq_len": n, "data": d}


def _over_steps(e) -> tuple[int | None, int | None]:
    rs = e.run_steps or {}
    return (rs.get("reserved_after_steps") or {}).get("1000"), rs.get("fragmentation_oom_step")


def micro_batch_unit(plan: Plan) -> int:
    """The step between valid micro-batches: TRL's GRPO/RLOO need num_generations to divide micro x GPUs x
    steps_per_generation (postplan.check_post_training), so the micro-batch moves in multiples of
    G / gcd(G, GPUs x steps)."""
    pt = plan.post_training
    if pt is None or pt.method not in GROUPED or pt.trainer not in ("trl", "ms-swift"):
        return 1
    g = default_generations(pt)
    return g // gcd(g, plan.world_size * (pt.steps_per_generation or plan.gradient_accumulation_steps))


def _post_with(plan: Plan, **keys) -> dict:
    d = post_training_to_dict(plan.post_training)
    gen = keys.pop("generator", None)
    d.update(keys)
    if gen:
        d["generator"] = {**d["generator"], **gen}
    return {"post_training": d}


def post_maxima(plan: Plan, fits_with):
    """Post-training's questions: the longest completion that fits, and the largest colocated vLLM fraction
    (in hundredths) that leaves every phase room."""
    pt = plan.post_training
    if pt is None:
        return {}
    out = {"max_completion_len": (yield from _max_int(lambda n: fits_with(**_post_with(plan, completion_len=n)),
                                                      lengths(pt)[1], MAX_SEQ_LEN))}
    g = pt.generator
    if g is not None and g.engine == "vllm" and g.mode == "colocate":
        start = round(100 * (g.gpu_memory_utilization or 0.3))
        k = yield from _max_int(lambda k: fits_with(**_post_with(plan, generator={"gpu_memory_utilization": k / 100})),
                                start, 100)
        out["max_gpu_memory_utilization"] = None if k is None else k / 100
    return out


def fit_steps(plan: Plan, *, max_options: int = 16):
    """``fit`` as a generator of its estimate requests (see the module docstring); returns the Fit."""
    memo = _Memo()
    base = yield from memo(plan)

    def fits_with(**ch):
        return (yield from memo(plan.with_changes(**ch))).fits

    unit = micro_batch_unit(plan)
    k = yield from _max_int(lambda k: fits_with(micro_batch_size=k * unit), -(-plan.micro_batch_size // unit),
                            MAX_MICRO_BATCH // unit)
    max_mbs = None if k is None else k * unit
    # post-training trains on prompt + completion, not seq_len: its own maxima instead (post_maxima)
    max_seq = None if plan.post_training is not None else (
        yield from _max_int(lambda n: fits_with(**_at_seq_len(plan, n)), plan.seq_len, MAX_SEQ_LEN))
    mins = yield from min_gpus_by_stage(plan, memo)
    options = []
    seen = set()
    run_candidates = yield from _run_candidates(plan, fits_with)
    for changes, label in _data_candidates(plan) + run_candidates + _candidates(plan, max_mbs, mins):
        try:
            changed = plan.with_changes(**changes)
        except PlanError:
            continue
        key = json.dumps(changed.to_dict(), sort_keys=True)
        if key in seen or changed == plan:
            continue
        seen.add(key)
        e = yield from memo(changed)
        st = e.step
        options.append(Option(changes=changes, label=label, device_used_bytes=e.run.device_used,
                              capacity_bytes=e.capacity_bytes, fits=e.fits, step_time_s=st.time_s,
                              tokens_per_s_per_gpu=st.tokens_per_s_per_gpu, reserved_after_1000_bytes=_over_steps(e)[0],
                              fragmentation_oom_step=_over_steps(e)[1]))
    options.sort(key=lambda o: (not o.fits, -o.tokens_per_s_per_gpu, o.device_used_bytes))
    calls = memo.calls   # the post-training maxima's estimates are not counted (as before the generator)
    post = yield from post_maxima(plan, fits_with)
    return Fit(plan=plan, fits=base.fits, device_used_bytes=base.run.device_used,
               tokens_per_s_per_gpu=base.step.tokens_per_s_per_gpu, max_micro_batch_size=max_mbs,
               max_seq_len=max_seq, min_gpus=mins, options=tuple(options[:max_options]), estimates=calls,
               reserved_after_1000_bytes=_over_steps(base)[0], fragmentation_oom_step=_over_steps(base)[1],
               post=post)


def fit(plan: Plan, *, max_options: int = 16) -> Fit:
    """Maxima, minimum GPUs per stage and ranked options for ``plan`` (see the module docstring)."""
    return drain(fit_steps(plan, max_options=max_options))


__all__ = ["fit", "fit_steps", "answer", "drain", "Fit", "Option"]
