"""Whole runs of torchtune's and LitGPT's single-device recipes on FakeTensors: load, init, two training steps,
the validation, a checkpoint save; per run phase the peak of live storages, the allocator replay's peaks, and the
host bytes of the copies a GPU run makes to the CPU (docs/tracer.md §10e). Run in `.venv-torchtune` /
`.venv-litgpt` (`python -m tools.memtrace.rungrid --recipes`).

The model, loss and training step are those of the stack grid (tools/memtrace/tune.py, lit.py: the real modules
of torchtune 0.6.1 / litgpt 0.5.13 on fake tensors, the recipe's loop transcribed); around them:

torchtune (recipes/full_finetune_single_device.py, lora_finetune_single_device.py, 0.6.1):
  load  `_setup_model`: the model built on the device in bf16 (`set_default_dtype`, `self._device`), then
        `load_state_dict` copies the host state dict in place (nothing new on the device);
  init  `_setup_optimizer` (torch AdamW fused: states lazily in the first step), `ignore_labels_cache`;
  step  `train`'s loop (`_loss_step`, `backward`, `optimizer.step`, `zero_grad(set_to_none=True)`);
  eval  torchtune 0.6.1 has no validation; its later recipes do (torchtune @bd2a0fc recipes/
        full_finetune_distributed.py / lora_finetune_distributed.py `validate`, every `run_val_every_n_steps`, at
        `batch_size_val` = `batch_size`): `model.eval()`, under `torch.no_grad()` each batch's
        `self._loss_step(batch) * current_num_tokens`, then `model.train()`. That code is run here on 0.6.1's
        model and CEWithChunkedOutputLoss (the same `_loss_step` the step runs);
  save  the 0.6.1 recipe's `save_checkpoint(epoch=0)` of a 2-epoch run (intermediate: the optimizer's
        state_dict too), into the real `FullModelHFCheckpointer.save_checkpoint` (tune_to_hf, safetensors
        `save_file`, `torch.save` of the recipe state). Full: `self._model.state_dict()` is the device tensors;
        LoRA: `get_adapter_state_dict` (`v.to("cpu")`) and `{k: v.cpu() ...}` then `get_merged_lora_ckpt`.
LitGPT (litgpt/finetune/lora.py, full.py, 0.5.13, `fit`):
  load  `fabric.init_module()` builds GPT on the device in bf16 ("bf16-true"); `load_checkpoint` copies in place;
  init  `instantiate_torch_optimizer` (torch AdamW, foreach on CUDA: states lazily);
  eval  the sanity `validate(..., max_iters=2)` before training and `validate(fabric, model, val_dataloader, eval)`
        after step `eval.interval` (here 2): under `@torch.no_grad()`, `model.eval()`, per batch
        `logits = model(input_ids)` (no lm_head chunking) and `chunked_cross_entropy(logits[..., :-1, :],
        targets[..., 1:], chunk_size=0)`; the training loop's `logits` / `loss` stay bound meanwhile;
  save  after step `train.save_interval` (here 2): LoRA `save_lora_checkpoint` (each `lora_` parameter
        `.cpu()`, `torch.save`); full `fabric.save(checkpoint_file, state)` (model and optimizer state dicts,
        lightning `_atomic_save`: `torch.save` into a BytesIO, then `f.write(bytesbuffer.getvalue())`).
  generate  with `run.eval.generate`: `generate_example` after the validation (KV cache at batch 1 over
        `max_seq_length`, `eval.max_new_tokens` new tokens).

Host memory: on a CPU rank `.cpu()` / `.to("cpu")` return the tensor itself, so inside a save they make a copy
that is not a device storage and is counted as host bytes until it dies; what an op makes from a host copy is
host too (torchtune's merge and tune_to_hf on the host state dict). safetensors `save_file` holds the shard's
bytes (`_tobytes` of every tensor before writing); `torch.save` of device storages the largest storage while it
is written (serialization.py `_save`: `.cpu()` per storage), into a BytesIO the whole serialized object (and
`getvalue()` copies it).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
import weakref

import torch
from torch.utils._pytree import tree_leaves

from .allocator import replay
from .optim import label_grads, traced_step
from .run import RunTracker, phase_reports, tensors_in

VAL_BATCHES = 2


class HostRunTracker(RunTracker):
    """RunTracker that also knows which fake storages are host copies (module docstring)."""

    def __init__(self, logits_numel: int = 0, vocab: int = 0):
        super().__init__(logits_numel=logits_numel, vocab=vocab)
        self.host_keys: dict[int, int] = {}
        self.suspended = False
        self.host_what: dict = {}

    def hold(self, n: int, what: str) -> None:
        """host_hold with the notes summed per kind (a state dict has hundreds of tensors)."""
        self.host += n
        ph = self.run_phase
        self.host_peak[ph] = max(self.host_peak.get(ph, 0), self.host)
        self.host_what.setdefault(ph, {}).setdefault(what, 0)
        self.host_what[ph][what] += n

    def host_tensor(self, t: torch.Tensor, what: str) -> None:
        st = t.untyped_storage()
        key, n = id(st), st.nbytes()
        if not n or key in self.host_keys or key in self.live:
            return
        self.host_keys[key] = n
        self.hold(n, what)
        weakref.finalize(st, self._host_gone, key)

    def _host_gone(self, key: int) -> None:
        self.host_release(self.host_keys.pop(key, 0))

    def is_host(self, t: torch.Tensor) -> bool:
        return id(t.untyped_storage()) in self.host_keys

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.suspended:
            return func(*args, **(kwargs or {}))
        if func is torch.ops.aten.item.default:
            # `.item()` decomposes inside the fake mode (litgpt generate_fn's `token.item()`): the value RunTracker
            # gives a data-dependent scalar
            return super().__torch_dispatch__(torch.ops.aten._local_scalar_dense.default, types, args, kwargs)
        if self.host_keys and func is not torch.ops.aten._local_scalar_dense.default:
            ins = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            if any(self.is_host(a) for a in ins):
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        self.host_tensor(t, "ops on host copies")
                return out
        return super().__torch_dispatch__(func, types, args, kwargs)


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor  # noqa: PLC0415
    return isinstance(t, FakeTensor)


@contextlib.contextmanager
def host_side(tr: HostRunTracker, save_file_owners=()):
    """`.cpu()` / `.to("cpu")` make host copies; safetensors `save_file` (patched in each module of
    `save_file_owners` that imported it) and `torch.save` count their host bytes and write empty files."""
    orig_cpu, orig_to, orig_save = torch.Tensor.cpu, torch.Tensor.to, torch.save

    def host_copy(t):
        if tr.is_host(t):
            return t
        tr.suspended = True
        try:
            out = orig_to(t.detach(), copy=True)
        finally:
            tr.suspended = False
        tr.host_tensor(out, "Tensor.cpu()")
        return out

    def cpu(self, *a, **k):
        return host_copy(self) if _is_fake(self) else orig_cpu(self, *a, **k)

    def to(self, *a, **k):
        if _is_fake(self):
            dev, dtype, _, _ = torch._C._nn._parse_to(*a, **k)
            if dev is not None and dev.type == "cpu" and dtype in (None, self.dtype):
                return host_copy(self)
        return orig_to(self, *a, **k)

    def save_file(tensors, filename, metadata=None):
        n = sum(t.numel() * t.element_size() for t in tensors.values())
        tr.hold(n, "safetensors save_file: the shard's bytes")
        tr.host_release(n)
        open(filename, "wb").close()

    def save(obj, f, *a, **k):
        fakes = [t for t in tensors_in(obj) if _is_fake(t)]
        if not fakes:
            return orig_save(obj, f, *a, **k)
        dev = [t.untyped_storage().nbytes() for t in fakes if not tr.is_host(t)]
        if isinstance(f, io.BytesIO):
            # the whole serialized object in the buffer: every storage once
            seen, n = set(), 0
            for t in fakes:
                if id(t.untyped_storage()) not in seen:
                    seen.add(id(t.untyped_storage()))
                    n += t.untyped_storage().nbytes()
            tr.hold(n, "torch.save into a BytesIO")
            f.fake_bytes = getattr(f, "fake_bytes", 0) + n
            return None
        n = max(dev, default=0)
        tr.hold(n, "torch.save: the largest device storage")
        tr.host_release(n)
        if isinstance(f, (str, os.PathLike)):
            open(f, "wb").close()
        return None

    saved_sf = [(m, m.save_file) for m in save_file_owners]
    torch.Tensor.cpu, torch.Tensor.to, torch.save = cpu, to, save
    for m, _ in saved_sf:
        m.save_file = save_file
    try:
        yield
    finally:
        torch.Tensor.cpu, torch.Tensor.to, torch.save = orig_cpu, orig_to, orig_save
        for m, f in saved_sf:
            m.save_file = f


def _register_model(tr, model, lora: bool) -> None:
    lora_ids = {id(p) for p in model.parameters() if p.requires_grad} if lora else set()
    for p in model.parameters():
        tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
    for bf in model.buffers():
        tr.register(bf, "weight", "buffer")


# -- torchtune -----------------------------------------------------------------------------------------------------
def trace_tune_run(plan_d: dict, out_dir: str | None = None) -> dict:
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415

    from .build import cuda_like_dropout, fakeify  # noqa: PLC0415
    from .optim import adamw_impl, make_optimizer  # noqa: PLC0415
    from .plan import from_dict  # noqa: PLC0415
    from .tune import CHUNKS, build, recipe_loss  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict({k: v for k, v in plan_d.items() if k != "run"}, trainers=("torchtune",))
    if plan.method not in ("full", "lora") or plan.optimizer_in_backward:
        raise ValueError("the torchtune run tracer runs full and lora, optimizer_in_backward off")
    lora = plan.method == "lora"
    model = build(plan)
    loss_fn = recipe_loss(plan, model)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    b, s = plan.micro_batch_size, plan.seq_len
    V = model.tok_embeddings.weight.shape[0]
    tr = HostRunTracker(logits_numel=b * s * V // CHUNKS, vocab=V)
    impl = adamw_impl(plan.optimizer_impl, "torchtune", "5")
    tmp = out_dir or tempfile.mkdtemp(prefix="memtrace-tune-run-")
    fakeify(model, fm, torch.bfloat16)
    with fm:
        for m in model.modules():       # as tune.trace_tune: the RoPE buffers built on the device
            if hasattr(m, "rope_init") and not getattr(m, "is_cache_built", True):
                m.register_buffer("theta", torch.empty(m.dim // 2, dtype=torch.float32), persistent=False)
                m.build_rope_cache(m.max_seq_len)
                m.is_cache_built = True
    with cuda_like_dropout():
        with tr:
            tr.enter("load")
            _register_model(tr, model, lora)
            tr.leave("load")
        with fm, tr:
            tr.enter("init")
            tr.set_phase("setup")
            params = [p for p in model.parameters() if p.requires_grad]
            opt = traced_step(make_optimizer(plan.optimizer, params, impl), tr)
            label_grads(params, tr)
            ignore_labels_cache = torch.full((b, 1), -100, dtype=torch.long)

            def loss_step(batch):
                """recipes/full_finetune_single_device.py `_loss_step` (0.6.1)."""
                labels = batch.pop("labels")
                logits = model(**batch)
                labels = torch.hstack((labels[..., 1:], ignore_labels_cache[: labels.shape[0]]))
                if not isinstance(logits, list):
                    labels = labels.reshape(-1)
                    logits = logits.reshape(-1, logits.size(-1))
                loss = loss_fn(logits, labels)
                del logits
                return loss

            def batch_of(n):
                ids = torch.zeros(n, s, dtype=torch.long)
                return {"tokens": ids, "labels": torch.zeros(n, s, dtype=torch.long)}
            t1 = time.perf_counter()
            opt.zero_grad()
            for _ in range(2):
                tr.enter("step")
                tr.set_phase("forward")
                batch = batch_of(b)
                current_num_tokens = (batch["labels"] != loss_fn.ignore_index).sum()
                current_loss = loss_step(batch) * current_num_tokens
                tr.set_phase("backward")
                current_loss.backward()
                del current_loss, batch
                tr.set_phase("step")
                opt.step()
                opt.zero_grad(set_to_none=True)
            with tr.phase_of_run("eval", "forward"):
                _tune_validate(model, loss_fn, loss_step, batch_of, b)
            with tr.phase_of_run("save", "setup"):
                _tune_save(plan, model, opt, tmp, tr)
            _end(tr)
    return _report(plan_d, tr, params, [b], "torchtune llama3_2", t0, t1)


def _tune_validate(model, loss_fn, loss_step, batch_of, b_val):
    """torchtune @bd2a0fc recipes/full_finetune_distributed.py `validate` (one process: the all_reduce is the
    identity), VAL_BATCHES batches of `batch_size_val`."""
    model.eval()
    total_val_loss = torch.tensor(0.0)
    total_val_tokens = torch.tensor(0.0)
    with torch.no_grad():
        for _ in range(VAL_BATCHES):
            batch = batch_of(b_val)
            current_num_tokens = (batch["labels"] != loss_fn.ignore_index).sum()
            val_loss = loss_step(batch) * current_num_tokens
            total_val_loss += val_loss
            total_val_tokens += current_num_tokens
            del batch, val_loss
    model.train()
    return total_val_loss / total_val_tokens


def _tune_checkpointer(tmp: str):
    from torchtune.training import FullModelHFCheckpointer  # noqa: PLC0415
    ckpt_dir = os.path.join(tmp, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)
    # meta-llama/Llama-3.2-1B config.json, the keys tune_to_hf reads
    with open(os.path.join(ckpt_dir, "config.json"), "w") as f:
        json.dump({"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 2048, "head_dim": 64}, f)
    open(os.path.join(ckpt_dir, "model.safetensors"), "wb").close()
    ck = FullModelHFCheckpointer(checkpoint_dir=ckpt_dir, checkpoint_files=["model.safetensors"],
                                 model_type="LLAMA3_2", output_dir=os.path.join(tmp, "out"))
    import collections  # noqa: PLC0415
    ck._weight_map = collections.defaultdict(lambda: "1")     # load_checkpoint fills it: one shard
    return ck


def _tune_save(plan, model, opt, tmp, tr):
    """The 0.6.1 recipes' `save_checkpoint(epoch=0)` with total_epochs 2 (an intermediate checkpoint)."""
    import torchtune.training.checkpointing._checkpointer as ckmod  # noqa: PLC0415
    from torchtune import training  # noqa: PLC0415
    ck = _tune_checkpointer(tmp)
    with host_side(tr, (ckmod,)):
        ckpt_dict = {}
        if plan.method == "full":
            # full_finetune_single_device.py save_checkpoint
            ckpt_dict[training.MODEL_KEY] = model.state_dict()
            ckpt_dict.update({training.SEED_KEY: 0, training.EPOCHS_KEY: 0, training.TOTAL_EPOCHS_KEY: 2,
                              training.MAX_STEPS_KEY: 2})
            ckpt_dict[training.OPT_KEY] = opt.state_dict()
            ck.save_checkpoint(ckpt_dict, epoch=0, intermediate_checkpoint=True)
        else:
            from torchtune.modules.peft import get_adapter_state_dict, get_merged_lora_ckpt  # noqa: PLC0415
            # lora_finetune_single_device.py save_checkpoint (save_adapter_weights_only False, the configs')
            ckpt_dict.update({training.OPT_KEY: opt.state_dict(), training.SEED_KEY: 0, training.EPOCHS_KEY: 0,
                              training.TOTAL_EPOCHS_KEY: 2, training.MAX_STEPS_KEY: 2})
            ckpt_dict[training.ADAPTER_KEY] = get_adapter_state_dict(model.state_dict())
            state_dict = {k: v.cpu() for k, v in model.state_dict().items()}
            ckpt_dict[training.MODEL_KEY] = get_merged_lora_ckpt(state_dict, rank=plan.lora_rank,
                                                                 alpha=plan.lora_alpha)
            del state_dict
            ckpt_dict[training.ADAPTER_CONFIG] = {"r": plan.lora_rank, "lora_alpha": plan.lora_alpha,
                                                  "target_modules": ["q_proj", "v_proj"], "peft_type": "LORA"}
            ck.save_checkpoint(ckpt_dict, epoch=0, intermediate_checkpoint=True, adapter_only=False)
        del ckpt_dict


# -- LitGPT --------------------------------------------------------------------------------------------------------
def trace_lit_run(plan_d: dict, out_dir: str | None = None) -> dict:
    from litgpt.utils import chunked_cross_entropy  # noqa: PLC0415
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415

    from .build import fakeify  # noqa: PLC0415
    from .lit import LM_HEAD_CHUNK, build  # noqa: PLC0415
    from .optim import adamw_impl, make_optimizer  # noqa: PLC0415
    from .plan import from_dict  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict({k: v for k, v in plan_d.items() if k != "run"}, trainers=("litgpt",))
    if plan.precision != "bf16-pure" or plan.method not in ("full", "lora"):
        raise ValueError("the LitGPT run tracer runs bf16-true full and lora")
    lora = plan.method == "lora"
    model = build(plan)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    b, s = plan.micro_batch_size, plan.seq_len
    V = model.config.padded_vocab_size
    tr = HostRunTracker(logits_numel=LM_HEAD_CHUNK * V, vocab=V)
    impl = adamw_impl(plan.optimizer_impl, "litgpt", "5")
    tmp = out_dir or tempfile.mkdtemp(prefix="memtrace-lit-run-")
    fakeify(model, fm, torch.bfloat16)
    with fm:
        model.max_seq_length = s           # fit(): rebuilds cos/sin for the longest sequence
    with fm, tr:
        tr.enter("load")
        _register_model(tr, model, lora)
        tr.enter("init")
        tr.set_phase("setup")
        params = [p for p in model.parameters() if p.requires_grad]
        opt = traced_step(make_optimizer(plan.optimizer, params, impl), tr)
        label_grads(params, tr)
        input_ids = torch.zeros(b, s, dtype=torch.long)
        targets = torch.zeros(b, s, dtype=torch.long)
        t1 = time.perf_counter()
        with tr.phase_of_run("eval", "forward"):        # fit(): the sanity check, max_iters=2
            _lit_validate(model, chunked_cross_entropy, input_ids, targets, 2)
        logits = loss = None
        for step_count in (1, 2):
            tr.enter("step")
            tr.set_phase("forward")
            if lora:
                logits = model(input_ids, lm_head_chunk_size=LM_HEAD_CHUNK)
                logits[-1] = logits[-1][..., :-1, :]
                loss = chunked_cross_entropy(logits, targets[..., 1:])
            else:
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
            tr.set_phase("backward")
            loss.backward()
            tr.set_phase("step")
            opt.step()
            opt.zero_grad()
        # step_count % eval.interval == 0 and % train.save_interval == 0: validate, then save (logits, loss bound)
        with tr.phase_of_run("eval", "forward"):
            _lit_validate(model, chunked_cross_entropy, input_ids, targets, VAL_BATCHES)
        gen = ((plan_d.get("run") or {}).get("eval") or {}).get("generate")
        if gen:
            with tr.phase_of_run("generate", "forward"):
                _lit_generate(model, int(gen.get("max_new_tokens", 100)))
        with tr.phase_of_run("save", "setup"), host_side(tr):
            _lit_save(model, opt, lora, tmp, tr)
        del logits, loss
        _end(tr)
    return _report(plan_d, tr, params, [b], "litgpt Llama-3.2-1B", t0, t1)


def _lit_validate(model, chunked_cross_entropy, input_ids, targets, max_iters):
    """litgpt/finetune/lora.py `validate` (0.5.13; full.py's is the same)."""
    with torch.no_grad():
        model.eval()
        losses = torch.zeros(max_iters)
        for k in range(max_iters):
            logits = model(input_ids)
            losses[k] = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:], chunk_size=0)
            del logits
        val_loss = losses.mean()
        model.train()
    return val_loss


PROMPT = 32            # tokens of the example instruction generate_example encodes (an Alpaca-style prompt)


def _lit_generate(model, max_new_tokens: int):
    """finetune/lora.py `generate_example` (full.py's is the same) on rank 0 after each validation: under
    `@torch.no_grad()`, `model.set_kv_cache(batch_size=1)` inside `fabric.init_tensor()` (the device, bf16-true's
    default dtype; the cache spans `model.max_seq_length`), litgpt.generate.base `generate(..., temperature=0.8)`,
    `model.clear_kv_cache()`. A token's value reads 1 on fake tensors (never the eos id): all new tokens run."""
    from litgpt.generate.base import generate  # noqa: PLC0415
    with torch.no_grad():
        model.eval()
        encoded = torch.zeros(PROMPT, dtype=torch.long)
        max_returned_tokens = PROMPT + max_new_tokens
        if max_returned_tokens < model.max_seq_length:
            prev = torch.get_default_dtype()
            torch.set_default_dtype(torch.bfloat16)
            try:
                model.set_kv_cache(batch_size=1)
            finally:
                torch.set_default_dtype(prev)
            generate(model, encoded, max_returned_tokens=max_returned_tokens, temperature=0.8, eos_id=128001)
            model.clear_kv_cache()
        model.train()


def _lit_save(model, opt, lora, tmp, tr):
    path = os.path.join(tmp, "lit_model.pth" + (".lora" if lora else ""))
    if lora:
        # finetune/lora.py save_lora_checkpoint, one device (is_cpu False on a GPU; no DTensor)
        cpu_state_dict = {}
        for name, param in model.state_dict().items():
            if "lora_" not in name:
                continue
            cpu_state_dict[name] = param.cpu()
        torch.save({"model": cpu_state_dict}, path)
        return
    # finetune/full.py: fabric.save(checkpoint_file, state) -> SingleDeviceStrategy.save_checkpoint: stateful
    # objects' state_dict(), TorchCheckpointIO.save_checkpoint -> cloud_io._atomic_save
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 2, "step_count": 2}
    buf = io.BytesIO()
    torch.save(state, buf)
    n = getattr(buf, "fake_bytes", 0)
    tr.hold(n, "BytesIO.getvalue() copy")          # f.write(bytesbuffer.getvalue())
    tr.host_release(n)
    tr.host_release(n)                               # the buffer dies with _atomic_save
    del state


def _end(tr) -> None:
    tr.enter("end")
    tr.leave("end")


def _report(plan_d, tr, params, bes, model_type, t0, t1) -> dict:
    """The report of a run (as run.py's): per run phase the tracker's peak and the replay's figures (bytes)."""
    seconds = {"build": round(t1 - t0, 2), "run": round(time.perf_counter() - t1, 2)}
    alloc = replay(tr.events)
    phases = phase_reports(tr, alloc, {k: sorted([w, n] for w, n in d.items()) for k, d in tr.host_what.items()})
    from .stacks import versions  # noqa: PLC0415
    return {"plan": plan_d, "model_type": model_type, "eval_batch_sizes": bes, "phases": phases,
            "peak_bytes": tr.peak.total, "peak_run_phase": max(phases, key=lambda k: phases[k]["peak_bytes"]),
            "allocator": {k: v for k, v in alloc.items() if k != "phases"},
            "trainable_params": sum(p.numel() for p in params), "seconds": seconds, "versions": versions()}
