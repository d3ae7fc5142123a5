"""A whole run of the real Hugging Face Trainer on FakeTensors: load, init, two training steps, the
evaluations, a checkpoint save; per run phase the peak of live storages, the allocator replay's peaks and
what stays reserved, and the host bytes of the copies a GPU run makes to the CPU (docs/tracer.md §10).

What runs: `transformers.Trainer` (5.24) itself, subclassed only where a CPU FakeTensor run cannot do what
a GPU run does (each override says why): `train()` with `max_steps=2`, `eval_strategy="steps"`,
`eval_steps=2`, `save_strategy="steps"`, `save_steps=2`, so after the second optimizer step the Trainer's own
`_maybe_log_save_evaluate` runs `evaluate()` (per eval block: `prediction_loss_only` when `run.eval.logits`
is `loss-only`; a `compute_metrics` that makes `evaluation_loop` keep and concatenate the logits when it is
`accumulate`) and then `_save_checkpoint` (save_model -> save_pretrained, the optimizer's, scheduler's and RNG
states through torch.save).

Run phases (plan-v1 Extension 5 names):
  load  the weights materialised one tensor at a time on the device, after HF's `caching_allocator_warmup`
        (modeling_utils.py) reserved one block of the model's bytes; from_pretrained itself does not run
        (nothing is downloaded: the model is built on meta and fakeified, docs/tracer.md §1a);
  init  Trainer(...) and train() up to the first training step (optimizer built, accelerator.prepare);
  step  training_step + the optimizer step, both steps (the first creates the AdamW states lazily);
  eval  Trainer.evaluate, inside train() after step 2 (one entry per eval block: eval, eval#2, ...);
  save  Trainer._save_checkpoint.
Host memory: on a CPU rank `.cpu()` moves nothing, so the copies a GPU run makes to the host are counted
where the code makes them, as host bytes, and not as device storages:
  nested_numpify (trainer_pt_utils.py: `t.cpu()`, bf16 -> fp32, `.numpy()`): numel x 4 B for a 16/32-bit
        tensor, held until evaluate returns;
  safetensors.torch.save_file (`_flatten` -> `_tobytes` per tensor: `.to("cpu")` then `bytes`): the shard's
        bytes at once while it is written;
  torch.save (serialization.py `_save`: each storage `.cpu()` while it is written): the largest storage.
Nothing is written to disk for a fake tensor; the files of plain objects (trainer state, RNG, args) are.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time

import numpy as np
import torch

from . import running
from .allocator import PHASE, replay
from .build import build_meta_model, cuda_like_dropout, fakeify, grouped_mm_any_dtype, hf_patches
from .cuda_autocast import cuda_autocast_policy
from .optim import label_grads, traced_step
from .plan import from_dict
from .trace import snap_dict
from .tracker import Snapshot, StorageTracker

# plan-v1 Extension 5 defaults of the keys the tracer reads
EVAL_DEFAULTS = {"every_steps": 500, "batch_size": "auto", "seq_len": None, "logits": "loss-only",
                 "samples": None, "accumulation_steps": None, "generate": None}
SAVE_DEFAULTS = {"every_steps": 500, "weights": "auto", "optimizer": True}
HF_EVAL_BATCH = 8          # TrainingArguments.per_device_eval_batch_size default


class RunTracker(StorageTracker):
    """StorageTracker with a second axis: the run phase (load, init, step, eval, save), its own peak per run
    phase, the host bytes of intended CPU copies, and phase markers in the allocator event log.

    Data-dependent scalars (`.item()`, `bool(t)`: aten._local_scalar_dense) have no value on a FakeTensor; the
    Trainer reads a few (the loss for logging, `isnan` of the step loss, grad norms, token counts), none of
    which decides an allocation here: unless the fake mode still knows the value (a small constant such as
    accelerate's `torch.tensor(tensor.shape)` in pad_across_processes) they read 1 for integers, False for booleans and 0.0 for floats."""

    def __init__(self, logits_numel: int = 0, vocab: int = 0):
        super().__init__(logits_numel=logits_numel, vocab=vocab)
        self.run_phase = ""
        self.run_peak: dict[str, Snapshot] = {}
        self.run_start: dict[str, Snapshot] = {}
        self.run_end: dict[str, Snapshot] = {}
        self.host = 0
        self.host_peak: dict[str, int] = {}
        self.host_notes: dict[str, list] = {}

    def enter(self, name: str) -> None:
        if self.run_phase:
            self.run_end[self.run_phase] = self.snapshot()
        self.run_phase = name
        self.events.append((PHASE, name))
        self.run_start.setdefault(name, self.snapshot())
        self.host_peak.setdefault(name, self.host)
        self._check_peak()

    def leave(self, name: str) -> None:
        self.run_end[name] = self.snapshot()

    @contextlib.contextmanager
    def phase_of_run(self, name: str, step_phase: str = "forward"):
        """A phase inside train() (eval, save); afterwards the run is `between` phases until the next
        training_step enters `step` again (so a phase's peaks are its own, not what ran after it)."""
        prev_step = self.phase
        self.enter(name)
        self.set_phase(step_phase)
        try:
            yield
        finally:
            self.leave(name)
            self.enter("between")
            self.set_phase(prev_step)

    def _check_peak(self) -> None:
        super()._check_peak()
        rp = self.run_peak.get(self.run_phase)
        if self.run_phase and (rp is None or self.total > rp.total):
            self.run_peak[self.run_phase] = self.snapshot()

    def host_hold(self, nbytes: int, what: str) -> None:
        self.host += nbytes
        ph = self.run_phase
        self.host_peak[ph] = max(self.host_peak.get(ph, 0), self.host)
        self.host_notes.setdefault(ph, []).append([what, nbytes])

    def host_release(self, nbytes: int) -> None:
        self.host -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            from torch._subclasses.fake_tensor import DataDependentOutputException  # noqa: PLC0415
            try:
                return func(*args, **(kwargs or {}))     # a constant the fake mode still knows (torch.tensor(shape))
            except DataDependentOutputException:
                t = args[0]
                return False if t.dtype == torch.bool else (1 if not t.dtype.is_floating_point else 0.0)
        return super().__torch_dispatch__(func, types, args, kwargs)


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor  # noqa: PLC0415
    return isinstance(t, FakeTensor)


def _host_bytes_numpy(t: torch.Tensor) -> int:
    """nested_numpify: `.cpu()`, bf16 -> fp32, `.numpy()`; the fp32 copy is what stays on the host."""
    return t.numel() * (4 if t.dtype in (torch.bfloat16, torch.float16) else t.element_size())


@contextlib.contextmanager
def host_copies(tr: RunTracker):
    """Count the GPU run's copies to the CPU as host bytes (module docstring); write nothing for a fake tensor."""
    import safetensors.torch as st  # noqa: PLC0415
    import transformers.modeling_utils as mu  # noqa: PLC0415
    import transformers.trainer as trm  # noqa: PLC0415
    import transformers.trainer_pt_utils as tpu  # noqa: PLC0415
    from collections.abc import Mapping  # noqa: PLC0415
    try:
        import peft.peft_model as pm  # noqa: PLC0415
    except ImportError:
        pm = None
    saved = (tpu.nested_numpify, mu.safe_save_file, st.save_file, torch.save, trm.safetensors,
             pm.safe_save_file if pm else None)
    held = []

    def nested_numpify(tensors):
        if isinstance(tensors, (list, tuple)):
            return type(tensors)(nested_numpify(t) for t in tensors)
        if isinstance(tensors, Mapping):
            return type(tensors)({k: nested_numpify(t) for k, t in tensors.items()})
        if not _is_fake(tensors):
            return saved[0](tensors)
        n = _host_bytes_numpy(tensors)
        tr.host_hold(n, f"nested_numpify {list(tensors.shape)} {str(tensors.dtype).replace('torch.', '')}")
        held.append(n)
        dt = np.float32 if tensors.is_floating_point() else np.int64
        return np.broadcast_to(np.zeros((), dtype=dt), tuple(tensors.shape))   # no real bytes

    def save_file(tensors, filename, metadata=None):
        if not any(_is_fake(t) for t in tensors.values()):
            return saved[2](tensors, filename, metadata=metadata)
        n = sum(t.numel() * t.element_size() for t in tensors.values())
        tr.host_hold(n, f"safetensors shard {len(tensors)} tensors")
        tr.host_release(n)
        return None

    def save(obj, f, *a, **k):
        fakes = [t for t in tensors_in(obj) if _is_fake(t)]
        if not fakes:
            return saved[3](obj, f, *a, **k)
        n = max(t.untyped_storage().nbytes() for t in fakes)
        tr.host_hold(n, f"torch.save largest storage of {len(fakes)} tensors")
        tr.host_release(n)
        return None

    class _St:        # transformers.trainer's own `safetensors.torch.save_file` (a model that is not a PreTrainedModel)
        torch = type("torch", (), {"save_file": staticmethod(save_file)})

    tpu.nested_numpify = nested_numpify
    mu.safe_save_file = st.save_file = save_file
    torch.save = save
    trm.safetensors = _St
    if pm:
        pm.safe_save_file = save_file           # PeftModel.save_pretrained writes the adapter through it
    try:
        yield held
    finally:
        tpu.nested_numpify, mu.safe_save_file, st.save_file, torch.save, trm.safetensors = saved[:5]
        if pm:
            pm.safe_save_file = saved[5]


def tensors_in(obj):
    """Every tensor in nested dicts, lists and tuples (what torch.save would write)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from tensors_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from tensors_in(v)


@contextlib.contextmanager
def fake_storage_ids():
    """save_pretrained finds tied tensors by their data pointers (modeling_utils `_find_disjoint`,
    `_find_identical`, `_end_ptr`; huggingface_hub's storage id when sharding); a FakeTensor has none. Its
    StorageImpl address (`_cdata`) times 64 plus the byte offset stands in: the same answer for tied and disjoint tensors."""
    orig = torch.Tensor.data_ptr

    def data_ptr(self):
        if _is_fake(self):
            return self.untyped_storage()._cdata * 64 + self.storage_offset() * self.element_size()
        return orig(self)

    sorig = torch.UntypedStorage.data_ptr

    def storage_ptr(self):           # a fake storage's pointer reads 0 (safetensors' storage_ptr, HF id_tensor_storage)
        p = sorig(self)
        return self._cdata * 64 if p == 0 and self.nbytes() else p

    torch.Tensor.data_ptr = data_ptr
    torch.UntypedStorage.data_ptr = storage_ptr
    try:
        yield
    finally:
        torch.Tensor.data_ptr = orig
        torch.UntypedStorage.data_ptr = sorig


@contextlib.contextmanager
def module_to_same_device():
    """accelerate's prepare_model does `model.to(self.device)`: on a GPU the model is already there and
    nothing moves. On FakeTensors Module.to always swaps tensors, which FakeTensorMode's weakrefs refuse
    (docs/tracer.md §1a), so a move to cpu without a dtype returns the module as it is (what it does)."""
    orig = torch.nn.Module.to

    def to(self, *args, **kwargs):
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if dtype is None and (device is None or device.type == "cpu"):
            return self
        return orig(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = orig


@contextlib.contextmanager
def one_process_padding():
    """accelerate's pad_across_processes gathers every rank's shape and pads to the largest; with one process
    the largest is this tensor's own and it is returned as it is (utils/operations.py). On fake tensors the
    gathered shape has no values, so the one-process answer is given directly."""
    import accelerate.accelerator as acc  # noqa: PLC0415
    orig = acc.pad_across_processes
    acc.pad_across_processes = lambda tensor, dim=0, pad_index=0, pad_first=False: tensor
    try:
        yield
    finally:
        acc.pad_across_processes = orig


def run_block(plan_d: dict) -> dict:
    """The plan's `run` block with Extension 5's defaults filled (eval may be a list of eval blocks here: the
    tracer runs one Trainer.evaluate per block, in order)."""
    r = dict(plan_d.get("run") or {})
    evs = r.get("eval")
    evs = [] if evs is None else (evs if isinstance(evs, list) else [evs])
    r["eval"] = [{**EVAL_DEFAULTS, **e} for e in evs]
    r["save"] = None if r.get("save", {}) is None else {**SAVE_DEFAULTS, **(r.get("save") or {})}
    return r


class _Dataset(torch.utils.data.Dataset):
    """n samples of s token ids (zeros) with labels = input_ids, made inside the fake mode (fake tensors)."""

    def __init__(self, n: int, s: int):
        self.n, self.s = n, s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ids = torch.zeros(self.s, dtype=torch.long)
        return {"input_ids": ids, "labels": ids}


def trace_run(plan_d: dict, out_dir: str | None = None) -> dict:
    """Trace a whole HF Trainer run of a plan-v1 dict with a `run` block; returns the report dict (bytes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    from transformers import Trainer, TrainingArguments  # noqa: PLC0415
    t0 = time.perf_counter()
    rb = run_block(plan_d)
    plan = from_dict({k: v for k, v in plan_d.items() if k != "run"})
    if plan.trainer != "hf-trainer":
        raise ValueError("stack.trainer: trace_run runs the HF Trainer (hf-trainer)")
    model, cfg, dt = build_meta_model(plan, gc_context_fn=running.gc_context_fn)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    b, s = plan.micro_batch_size, plan.seq_len
    V = int(getattr(cfg, "vocab_size", 0) or 0)
    tr = RunTracker(logits_numel=b * s * V, vocab=V)
    evals = rb["eval"]
    bes = [HF_EVAL_BATCH if e["batch_size"] == "auto" else int(e["batch_size"]) for e in evals]
    for e in evals:
        if e["accumulation_steps"] is not None or e["generate"] is not None or e["logits"] == "argmax":
            raise ValueError("run.eval: the tracer runs logits loss-only / accumulate, no accumulation_steps, "
                             "no generate")
    tmp = out_dir or tempfile.mkdtemp(prefix="memtrace-run-")
    with hf_patches(), cuda_like_dropout(), grouped_mm_any_dtype(), \
            cuda_autocast_policy(dt["autocast"] is not None), fake_storage_ids(), module_to_same_device(), \
            one_process_padding(), host_copies(tr) as held:
        # load: HF caching_allocator_warmup reserves the model's bytes in one block (torch.empty(byte_count // 2,
        # fp16) on the device), frees it, and the weights are then materialised one by one into that segment
        tr.enter("load")
        tagged = fakeify(model, fm, dt["adapter"])
        lora_ids = {id(p) for p in tagged["lora"]}
        qbufs = {id(x) for m in model.modules() if type(m).__name__ == "FakeQuantLinear"
                 for x in m._buffers.values()}
        seen, total = set(), 0
        for t in list(model.parameters()) + tagged["buffers"]:
            if id(t.untyped_storage()) not in seen:
                seen.add(id(t.untyped_storage()))
                total += t.untyped_storage().nbytes()
        tr.events.append((-10**9, total))         # the warm-up block
        tr.events.append((-10**9, 0))
        for p in model.parameters():
            tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        for bf in tagged["buffers"]:
            tr.register(bf, "weight", "quant_stats" if id(bf) in qbufs else "buffer")
        tr.leave("load")
        params = [p for p in model.parameters() if p.requires_grad]
        label_grads(params, tr)
        running.start(tr)
        with fm, tr:
            tr.enter("init")
            tr.set_phase("setup")
            trainer = _make_trainer(Trainer, TrainingArguments, model, plan, rb, bes, evals, tmp, tr, s, dt, held)
            t1 = time.perf_counter()
            trainer.train()
            tr.enter("end")
            tr.leave("end")
        running.stop()
    t2 = time.perf_counter()
    alloc = replay(tr.events)
    return _report(plan_d, rb, tr, alloc, cfg, params, bes, {"build": round(t1 - t0, 2), "run": round(t2 - t1, 2)})


def _make_trainer(Trainer, TrainingArguments, model, plan, rb, bes, evals, tmp, tr, s, dt, held):
    from torch.utils.data import SequentialSampler  # noqa: PLC0415
    save = rb["save"]
    n_eval = len(evals)

    class TracedTrainer(Trainer):
        def _move_model_to_device(self, model, device):
            """The fake model already is on the only device (cpu); Module.to on FakeTensors takes the
            swap_tensors path, which FakeTensorMode's weakrefs refuse (docs/tracer.md §1a)."""

        def _get_train_sampler(self, *a, **k):
            """RandomSampler draws a permutation with .tolist(): no values on fake tensors; the order does not
            change any allocation."""
            return SequentialSampler(self.train_dataset)

        def create_optimizer(self, *a, **k):
            return traced_step(super().create_optimizer(*a, **k), tr)

        def training_step(self, model, inputs, num_items_in_batch=None):
            tr.enter("step")
            tr.set_phase("forward")
            backward = self.accelerator.backward

            def traced_backward(loss, **kw):
                tr.set_phase("backward")
                backward(loss, **kw)
                tr.set_phase("step")
            self.accelerator.backward = traced_backward
            try:
                return super().training_step(model, inputs, num_items_in_batch)
            finally:
                self.accelerator.backward = backward

        def _maybe_log_save_evaluate(self, *a, **k):
            # after step 2: one Trainer.evaluate per eval block (each its own run phase), then the save
            if self.state.global_step != 2 or getattr(self, "_traced_run", False):
                return            # train() calls it again after the last epoch: the run's eval and save ran
            self._traced_run = True
            if n_eval:
                for i, ev in enumerate(evals):
                    self.args.per_device_eval_batch_size = bes[i]
                    self.compute_metrics = (lambda p: {}) if ev["logits"] == "accumulate" else None
                    self.args.prediction_loss_only = ev["logits"] != "accumulate"
                    self._eval_phase = "eval" if i == 0 else f"eval#{i + 1}"
                    self._eval_set = _Dataset(_eval_samples(ev, bes[i]), ev["seq_len"] or s)
                    self.evaluate(self._eval_set)
            if save is not None:
                with tr.phase_of_run("save", "setup"):
                    self._save_checkpoint(self.model, trial=None)

        def evaluate(self, eval_dataset=None, **k):
            with tr.phase_of_run(getattr(self, "_eval_phase", "eval"), "forward"):
                n = len(held)
                try:
                    return super().evaluate(eval_dataset, **k)
                finally:   # evaluate keeps only the metrics: the numpy arrays of the loop die with it
                    tr.host_release(sum(held[n:]))
                    del held[n:]

    args = TrainingArguments(
        output_dir=tmp, max_steps=2, per_device_train_batch_size=plan.micro_batch_size,
        gradient_accumulation_steps=plan.gradient_accumulation_steps,
        per_device_eval_batch_size=bes[0] if bes else HF_EVAL_BATCH, learning_rate=1e-5,
        logging_strategy="no", eval_strategy="no", save_strategy="no", report_to=[],
        logging_nan_inf_filter=False, dataloader_pin_memory=False, use_cpu=True,
        bf16=dt["autocast"] is not None, save_only_model=not (save or {}).get("optimizer", True),
        remove_unused_columns=False, disable_tqdm=True,
    )
    return TracedTrainer(model=model, args=args, train_dataset=_Dataset(2 * plan.micro_batch_size * plan.gradient_accumulation_steps, s))


def _eval_samples(ev: dict, be: int) -> int:
    """run.eval.samples, or two eval batches (what a per-batch peak needs; accumulate grows with it)."""
    return int(ev["samples"]) if ev["samples"] else 2 * be


def phase_reports(tr: RunTracker, alloc: dict, notes: dict) -> dict:
    """Per run phase (not `end`, `between`): the tracker's peak and its components, start and end, the allocator
    replay's peaks and end, the host bytes and `notes[phase]` (the copies that made them)."""
    phases = {}
    for name, snap in tr.run_peak.items():
        if name in ("end", "between"):
            continue
        ap = alloc["phases"].get(name, {})
        phases[name] = {
            "peak_bytes": snap.total,
            "peak": snap_dict(snap),
            "start_bytes": tr.run_start[name].total,
            "end_bytes": tr.run_end[name].total if name in tr.run_end else None,
            "peak_allocated_bytes": ap.get("peak_allocated"),
            "peak_reserved_bytes": ap.get("peak_reserved"),
            "end_reserved_bytes": ap.get("end_reserved"),
            "host_bytes": tr.host_peak.get(name, 0),
            "host_copies": notes.get(name, []),
        }
    return phases


def _report(plan_d, rb, tr, alloc, cfg, params, bes, seconds) -> dict:
    phases = phase_reports(tr, alloc, tr.host_notes)
    import transformers  # noqa: PLC0415
    return {
        "plan": plan_d, "run": rb, "model_type": cfg.model_type, "eval_batch_sizes": bes,
        "phases": phases, "peak_bytes": tr.peak.total, "peak_run_phase": max(
            phases, key=lambda k: phases[k]["peak_bytes"]),
        "allocator": {k: v for k, v in alloc.items() if k != "phases"},
        "trainable_params": sum(p.numel() for p in params), "seconds": seconds,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
