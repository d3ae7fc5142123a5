"""TRL's real DPOTrainer and KTOTrainer steps and GRPOTrainer update step on FakeTensors, per post-training phase:
the peak of live storages, the allocator replay's allocated / reserved peaks and what is resident (docs/tracer.md §11).

What runs (TRL pinned in tools/memtrace/requirements-trl.txt, from .venv-trl):
  DPO   `trl.DPOTrainer(model, ref_model, args=DPOConfig(...), train_dataset, processing_class)` built inside the
        fake mode; its optimizer from `Trainer.create_optimizer`; one warm-up step on zero gradients (the
        AdamW states exist, docs/tracer.md §1e); then `DPOTrainer.training_step` on a collated batch of
        `DataCollatorForPreference`'s shape (2·B rows `[chosen..., rejected...]`, right-padded to one length,
        `input_ids` / `attention_mask` / `completion_mask`), the optimizer step and zero_grad(set_to_none=True).
        The reference forward runs inside `_compute_loss` under no_grad (trl/trainer/dpo_trainer.py
        `_compute_loss`: `self.ref_model(...)`, or `use_adapter(model, None)` = `disable_adapter()` with PEFT);
        its window is the `score` phase, nested in `step`.
  KTO   `trl.KTOTrainer(...)` the same way (tools/memtrace/post_kto.py): the reference's KL and matched forwards are
        the `score` window, nested in `step`.
  GRPO  `trl.GRPOTrainer(model, reward_funcs, args=GRPOConfig(use_vllm=False, beta>0, ...))`; generation is not
        traced: vLLM cannot run on CPU, and TRL's HF `generate` path (`_generate_single_turn`) on fake tensors did
        not finish 384 decode steps of a 1B model in 15 min on the shared 2 cores; the completions are a fake batch
        of the shape
        `_generate_and_score_completions` returns (prompt_ids / prompt_mask left-padded to prompt_len,
        completion_ids / completion_mask of completion_len, advantages). `score` is the trainer's own reference
        pass (`_get_per_token_logps_and_entropies(self.ref_model | use_adapter(model, None), ...,
        batch_size=per_device_train_batch_size)` under no_grad, grpo_trainer.py); `step` is
        `Trainer.training_step` with `_prepare_inputs` returning that batch (so the real `GRPOTrainer._compute_loss`
        and the backward run), then the optimizer step.

Resident terms are read between phases: after the trainer is built (`init`: policy + reference weights), after the
warm-up (+ optimizer states) and at the start of `step`.

TRL version hazard (read from the wheels): up to 1.14.x `_compute_loss` takes `outputs.logits` of the full
(rows, s, V) and `selective_log_softmax` (trl/trainer/utils.py, bf16: a per-row log_softmax loop); from 1.15.0
every trainer calls `model(..., fused_lm_head=True)` (`add_fused_lm_head`, trl/kernels/chunked_logprob.py), which
projects the LM head in tiles of TOKEN_CHUNK_SIZE = 4096 tokens x 32768 vocabulary and never holds the logits; it
is traced with the GPU's Triton path emulated (`cuda_fused_head`): the CPU fallback's fp32 tile copies are not a
GPU's.
"""
from __future__ import annotations

import contextlib
import tempfile
import time

import torch

from . import running
from .allocator import PHASE, replay
from .build import build_meta_model, cuda_like_dropout, fakeify, grouped_mm_any_dtype, hf_patches, precision_dtypes
from .cuda_autocast import cuda_autocast_policy
from .optim import label_grads, state_tensors, warm_up
from .plan import from_dict
from .post_kto import build_kto, kto_batch, log_forwards
from .run import RunTracker, fake_storage_ids, one_process_padding
from .trace import snap_dict
from . import trl0
from .trl_cuda import cuda_fused_head, module_to_dtype_in_place, stub_triton_for_trl_before_115

trl0.import_shims()                   # TRL 0.x on transformers 5 (tools/memtrace/trl0.py), before TRL is imported
stub_triton_for_trl_before_115()      # before TRL is imported (see its docstring)
GRPO_BETA = 0.04     # a reference is used when beta != 0 (TRL's default beta 0.0 loads none, grpo_config.py)
VOCAB_WORDS = 64     # the tokenizer's own vocabulary (the model's vocab_size is the plan's)


def tiny_tokenizer():
    """A WordLevel fast tokenizer of 64 words with pad/eos: TRL's trainers need a processing_class; nothing is
    downloaded. The model's embedding keeps its own vocab_size (token ids are all 0 on fake tensors anyway)."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415
    vocab = {"<pad>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, VOCAB_WORDS)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")


class PostTracker(RunTracker):
    """RunTracker with nested windows: `score` inside `step` keeps its own peak while `step`'s covers both."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.windows: dict = {}
        self.open: list = []
        self.half_labels = False

    @contextlib.contextmanager
    def window(self, name: str, replay_phase: bool = False):
        """A window of its own peak; with replay_phase the allocator log marks it as run phase `name` too
        (and hands back to the enclosing run phase at its end)."""
        self.open.append(name)
        self.windows.setdefault(name, {"start": self.snapshot(), "peak": self.snapshot()})
        if replay_phase:
            self.events.append((PHASE, name))
        try:
            yield
        finally:
            self.open.remove(name)
            self.windows[name]["end"] = self.snapshot()
            if replay_phase:
                self.events.append((PHASE, self.run_phase))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        """Boolean-mask indexing has a data-dependent shape a FakeTensor cannot give (aten.nonzero). TRL's
        metrics index by the completion masks after the loss (`chosen_mean_logits[chosen_mask.bool()]`); every
        mask of a traced batch is all ones, so the answer is every position: a leading-dims mask flattens them.
        KTO's 1-D labels alternate desirable / undesirable (kto_batch): with `half_labels`, `nonzero(labels)` and
        `nonzero(~labels)` each select half the rows, as `chosen_idx` / `rejected_idx` do in a real batch."""
        if func is torch.ops.aten.nonzero.default:
            t = args[0]
            n = t.numel() // 2 if self.half_labels and t.dim() == 1 else t.numel()
            return super().__torch_dispatch__(torch.ops.aten.empty.memory_format, types,
                                              ((n, t.dim()),), {"dtype": torch.long, "device": t.device})
        if func is torch.ops.aten.index.Tensor:
            t, idx = args[0], list(args[1])
            if len(idx) == 1 and idx[0] is not None and idx[0].dtype == torch.bool:
                m = idx[0]
                flat = super().__torch_dispatch__(torch.ops.aten.reshape.default, types,
                                                  (t, (m.numel(), *t.shape[m.dim():])), {})
                return super().__torch_dispatch__(torch.ops.aten.clone.default, types, (flat,), {})
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _check_peak(self) -> None:
        super()._check_peak()
        for name in self.open:
            w = self.windows[name]
            if self.total > w["peak"].total:
                w["peak"] = self.snapshot()
                w["logits_at_peak"] = self.logits_live()

    def logits_live(self) -> list:
        """The (rows, s, V)-sized storages alive now: [op, shape, dtype, bytes] (the logits term, spelled out)."""
        return sorted([r.op, list(r.shape), r.dtype.replace("torch.", ""), r.nbytes]
                      for r in self.live.values() if r.sub == "logits")


@contextlib.contextmanager
def _score_windows(tr: PostTracker, trainer, trl_module):
    """Mark the reference forward as the `score` window: the ref model's forward, or TRL's `use_adapter`
    (adapter disabled) as the trainer module imported it."""
    patched = []
    if getattr(trainer, "ref_model", None) is not None:
        ref = trainer.ref_model
        fwd = ref.forward

        def ref_forward(*a, **k):
            with tr.window("score", replay_phase=tr.run_phase == "step"):
                return fwd(*a, **k)
        ref.forward = ref_forward
        patched.append(lambda: setattr(ref, "forward", fwd))
    ua = trl_module.use_adapter

    @contextlib.contextmanager
    def use_adapter(model, adapter_name=None):
        with tr.window("score", replay_phase=tr.run_phase == "step"), ua(model, adapter_name):
            yield
    trl_module.use_adapter = use_adapter
    patched.append(lambda: setattr(trl_module, "use_adapter", ua))
    try:
        yield
    finally:
        for undo in patched:
            undo()


def _trl_version() -> str:
    import trl  # noqa: PLC0415
    return trl.__version__


def _args(cls, plan, pt, tmp, dt, extra):
    ckpt = plan.activation_checkpointing in ("full", "selective")
    ga = extra.pop("gradient_accumulation_steps", 1)
    return cls(output_dir=tmp, per_device_train_batch_size=plan.micro_batch_size, gradient_accumulation_steps=ga,
               learning_rate=1e-5, bf16=dt["autocast"] is not None, use_cpu=True, report_to=[],
               logging_strategy="no", save_strategy="no", eval_strategy="no", disable_tqdm=True,
               dataloader_pin_memory=False, gradient_checkpointing=ckpt,
               gradient_checkpointing_kwargs={"use_reentrant": False, "context_fn": running.gc_context_fn}
               if ckpt else None, **extra)


def _peft_config(plan):
    if plan.method != "lora":
        return None
    from peft import LoraConfig  # noqa: PLC0415
    return LoraConfig(r=plan.lora_rank, lora_alpha=plan.lora_alpha, lora_dropout=plan.lora_dropout,
                      target_modules=list(plan.lora_targets), task_type="CAUSAL_LM")


def _build_trainer(spec, plan, model, ref, tok, tmp, dt):
    from datasets import Dataset  # noqa: PLC0415
    pt = spec["post_training"]
    pc = _peft_config(plan)
    trl0.model_shim(model)
    if pt["method"] == "dpo":
        from trl import DPOConfig, DPOTrainer  # noqa: PLC0415
        args = _args(DPOConfig, plan, pt, tmp, dt, {"max_length": pt["prompt_len"] + pt["completion_len"],
                                                   "beta": 0.1})
        ds = Dataset.from_dict({"prompt": ["w2 w3"] * 4, "chosen": ["w4"] * 4, "rejected": ["w5"] * 4})
        return DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=ds, processing_class=tok,
                          peft_config=pc)
    if pt["method"] == "kto":
        return build_kto(lambda cls, x: _args(cls, plan, pt, tmp, dt, {"max_length": pt["prompt_len"]
                                                                       + pt["completion_len"], **x}),
                         model, ref, tok, pc, pt["prompt_len"], pt["completion_len"])
    from trl import GRPOConfig, GRPOTrainer  # noqa: PLC0415
    import trl.trainer.grpo_trainer as grpo_mod  # noqa: PLC0415
    G = pt["num_generations"]
    ds = Dataset.from_dict({"prompt": ["w2 w3"] * 8})
    kw = {"num_generations": G, "max_completion_length": pt["completion_len"], "use_vllm": False,
          "beta": 0.0 if pt.get("reference", "auto") in ("auto", "none") else GRPO_BETA}
    if trl0.is_trl0():
        # GA: the generation batch is B x steps_per_generation (default GA) rows from 0.18 (GRPOConfig)
        kw["gradient_accumulation_steps"] = plan.gradient_accumulation_steps
        return trl0.build_grpo(GRPOTrainer, lambda **k: _args(GRPOConfig, plan, pt, tmp, dt, k), kw, model, ref,
                               tok, ds, pc)
    args = _args(GRPOConfig, plan, pt, tmp, dt, {
        "num_generations": G, "max_completion_length": pt["completion_len"],
        "beta": 0.0 if pt.get("reference", "auto") in ("auto", "none") else GRPO_BETA,
        "use_vllm": False, "generation_batch_size": plan.micro_batch_size})
    # GRPOTrainer builds its reference itself: create_model_from_path(model id, dtype=self.model.dtype,
    # attn_implementation=...); nothing is downloaded, so the call returns the reference built here on meta and
    # fakeified (the same class and dtype), and the kwargs TRL asked for are kept for the fixture
    made = grpo_mod.create_model_from_path
    asked = {}

    def create_model_from_path(path, **kw):
        asked.update({k: str(v) for k, v in kw.items()})
        return ref
    grpo_mod.create_model_from_path = create_model_from_path
    try:
        tr = GRPOTrainer(model=model, reward_funcs=[lambda completions, **k: [0.0] * len(completions)], args=args,
                         train_dataset=ds, processing_class=tok, peft_config=pc)
    finally:
        grpo_mod.create_model_from_path = made
    tr._traced_ref_kwargs = asked
    return tr


def dpo_batch(rows: int, s: int) -> dict:
    """DataCollatorForPreference's output: 2·B rows right-padded to one length (all tokens real here: the
    longest case, s = prompt_len + completion_len), completion_mask over the completion positions."""
    ids = torch.zeros(rows, s, dtype=torch.long)
    return {"input_ids": ids, "attention_mask": torch.ones(rows, s, dtype=torch.long),
            "completion_mask": torch.ones(rows, s, dtype=torch.long)}


def grpo_batch(b: int, p: int, c: int) -> dict:
    """What `_generate_and_score_completions` hands the update step for B completions (the reference
    log-probs are added by the traced score pass)."""
    return {"prompt_ids": torch.zeros(b, p, dtype=torch.long), "prompt_mask": torch.ones(b, p, dtype=torch.long),
            "completion_ids": torch.zeros(b, c, dtype=torch.long),
            "completion_mask": torch.ones(b, c, dtype=torch.long), "advantages": torch.zeros(b),
            "num_items_in_batch": torch.tensor(b * c)}


def trace_post(spec: dict) -> dict:
    """spec: {"plan": plan-v1 dict with a `post_training` block}. Returns the report (bytes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    t0 = time.perf_counter()
    pt = spec["plan"]["post_training"]
    base_d = {k: v for k, v in spec["plan"].items() if k not in ("run", "post_training")}
    plan = from_dict(base_d)
    # the trainer wraps the model itself (`peft_config=`: TRL's get_peft_model, autocast_adapter_dtype=True, so
    # fp32 adapters); the base is built without LoRA, frozen and in the plan's base dtype
    dt = precision_dtypes(plan)
    load = ((spec["plan"].get("run") or {}).get("load") or {}).get("dtype", "auto")
    built = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dt["base"]]
    if load not in ("auto", built):
        raise ValueError(f"run.load.dtype: the tracer builds the {plan.method} base in {built} for {plan.precision}")
    base_plan = plan
    if plan.method == "lora":     # the same base dtype, no adapters: a pure-precision full build of the base
        pure = {torch.bfloat16: "bf16-pure", torch.float32: "fp32"}[dt["base"]]
        base_plan = from_dict({**base_d, "method": "full", "precision": pure})
    model, cfg, _ = build_meta_model(base_plan, gc_context_fn=running.gc_context_fn)
    if plan.method == "lora":
        model.requires_grad_(False)
    ref = None
    # DPO's reference: TRL's default (auto) is a model for full fine-tuning; GRPO's only when asked (beta != 0)
    ref_kind = pt.get("reference", "auto")
    offline = pt["method"] in ("dpo", "kto")
    needs_ref = plan.method == "full" and (ref_kind == "model" or (ref_kind == "auto" and offline))
    if needs_ref:       # TRL builds the reference with the policy's model_init_kwargs: same class, same dtype
        ref, _, _ = build_meta_model(from_dict({**{k: v for k, v in spec["plan"].items()
                                                   if k not in ("run", "post_training")},
                                                "activation_checkpointing": "none"}))
        ref.eval()
        ref.requires_grad_(False)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    b, V = plan.micro_batch_size, int(cfg.vocab_size)
    P, C = pt["prompt_len"], pt["completion_len"]
    rows = 2 * b if pt["method"] == "dpo" else b
    s = P + C
    tr = PostTracker(logits_numel=rows * s * V, vocab=V)
    tr.half_labels = pt["method"] == "kto"
    tmp = tempfile.mkdtemp(prefix="memtrace-post-")
    import trl.trainer.dpo_trainer as dpo_mod  # noqa: PLC0415
    import trl.trainer.grpo_trainer as grpo_mod  # noqa: PLC0415
    import trl.trainer.kto_trainer as kto_mod  # noqa: PLC0415
    mod = {"dpo": dpo_mod, "kto": kto_mod}.get(pt["method"], grpo_mod)
    with hf_patches(), cuda_like_dropout(), grouped_mm_any_dtype(), \
            cuda_autocast_policy(dt["autocast"] is not None), fake_storage_ids(), module_to_dtype_in_place(), \
            one_process_padding(), cuda_fused_head():
        tr.enter("load")
        tagged = fakeify(model, fm, dt["adapter"])
        lora_ids = {id(p) for p in tagged["lora"]}
        for p in model.parameters():
            tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        for bf in tagged["buffers"]:
            tr.register(bf, "weight", "buffer")
        if ref is not None:
            rt = fakeify(ref, fm, dt["adapter"])
            for p in ref.parameters():
                tr.register(p, "weight", "ref")
            for bf in rt["buffers"]:
                tr.register(bf, "weight", "ref")
        tr.leave("load")
        running.start(tr)
        tok = tiny_tokenizer()
        log_forwards(tr, model, ref)
        with fm, tr:
            tr.enter("init")
            tr.set_phase("setup")
            trainer = _build_trainer(spec["plan"], plan, model, ref, tok, tmp, dt)
            trainer.current_gradient_accumulation_steps = 1     # what train() sets before its inner loop
            for n, p in trainer.model.named_parameters():
                if "lora_" in n:
                    tr.relabel(p, "weight", "lora")
            params = [p for p in trainer.model.parameters() if p.requires_grad]
            label_grads(params, tr)
            opt = trainer.create_optimizer()
            # what Trainer._inner_training_loop does before the first step: accelerator.prepare(model) wraps the
            # forward in autocast and `convert_outputs_to_fp32` (accelerate accelerator.py prepare_model,
            # native_amp): a bf16 run's logits come back as an fp32 copy (TRL < 1.15 reads outputs.logits)
            trainer.model_wrapped = trainer.accelerator.prepare_model(trainer.model)
            warm_up(opt, params, tr)
            tr.set_phase("setup")
            resident = tr.snapshot()
            t1 = time.perf_counter()
            old = trl0.is_trl0()
            with _score_windows(tr, trainer, mod) if not old else trl0.score_window(tr, trainer, pt["method"]):
                if pt["method"] == "dpo":
                    batch = trl0.dpo_batch(b, P, C) if old else dpo_batch(rows, s)
                elif pt["method"] == "kto":
                    batch = kto_batch(b, P, C, dpo_batch)
                else:
                    batch = grpo_batch(b, P, C)
                    if old:     # 0.18+: `_generate_and_score_completions` returns it (None with one iteration)
                        batch["old_per_token_logps"] = None
                    if not (old and trl0.grpo_ref_in_step()):      # TRL 0.18 scores inside _compute_loss
                        # the generation batch (B x GA rows when GA > 1) is scored, the first B update the step
                        gen = grpo_batch(b * plan.gradient_accumulation_steps, P, C) \
                            if plan.gradient_accumulation_steps > 1 else batch
                        batch["ref_per_token_logps"] = _grpo_score(tr, trainer, gen, C, mod, old)[:b]
                        del gen
                    trainer._prepare_inputs = lambda inputs: inputs
                tr.enter("step")
                tr.begin_step()
                _traced_step(trainer, opt, batch, tr, pt["method"], plan.gradient_accumulation_steps)
                tr.enter("end")
                tr.leave("end")
        running.stop()
    t2 = time.perf_counter()
    alloc = replay(tr.events)
    rep = _report(spec, tr, alloc, cfg, params, resident, {"build": round(t1 - t0, 2), "run": round(t2 - t1, 2)})
    rep["ref_model_kwargs"] = getattr(trainer, "_traced_ref_kwargs", None)
    rep["forwards"] = tr.forwards
    return rep


def _grpo_score(tr, trainer, batch, C, mod, old):
    """The reference pass of `_generate_and_score_completions` as the run phase `score`, under no_grad."""
    tr.enter("score")
    tr.set_phase("forward")
    with torch.no_grad():
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        am = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        if old:
            rl = trl0.grpo_score(tr, trainer, ids, am, C)
        elif trainer.ref_model is not None:
            rl, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.ref_model, ids, am, C, batch_size=trainer.args.per_device_train_batch_size)
        else:
            unwrapped = trainer.accelerator.unwrap_model(trainer.model)
            with mod.use_adapter(unwrapped, None):
                rl, _, _ = trainer._get_per_token_logps_and_entropies(
                    trainer.model, ids, am, C, batch_size=trainer.args.per_device_train_batch_size)
    del ids, am
    tr.leave("score")
    return rl


def _traced_step(trainer, opt, batch, tr, method, ga=1):
    """Trainer.training_step (the real compute_loss; accelerator.backward labelled `backward`) once per
    micro-step (GA > 1: the later ones accumulate into the gradients the first left), then the optimizer step
    and zero_grad(set_to_none=True), as Trainer's inner loop does."""
    from transformers import Trainer  # noqa: PLC0415
    backward = trainer.accelerator.backward

    def traced_backward(loss, **kw):
        tr.set_phase("backward")
        backward(loss, **kw)
        tr.set_phase("step")
    trainer.accelerator.backward = traced_backward
    tr.set_phase("forward")
    with tr.window("step"):
        nib = batch.get("num_items_in_batch")
        for _ in range(ga):
            tr.set_phase("forward")
            if method in ("dpo", "kto"):
                trainer.training_step(trainer.model_wrapped, batch)
            else:
                Trainer.training_step(trainer, trainer.model_wrapped, batch, nib)
        tr.set_phase("step")
        opt.step()
        for t in state_tensors(opt):
            tr.relabel(t, "opt", "")
        opt.zero_grad(set_to_none=True)
    trainer.accelerator.backward = backward


def _window(tr, name, alloc_ph) -> dict | None:
    w = tr.windows.get(name)
    if w is None:
        return None
    comps = snap_dict(w["peak"])["components"]
    comps["reference_weights"] = w["peak"].by_key.get(("weight", "ref"), 0)
    return {"peak_bytes": w["peak"].total, "start_bytes": w["start"].total, "end_bytes": w["end"].total,
            "components": comps, "logits_at_peak": w.get("logits_at_peak", []), "at": {"step_phase": w["peak"].phase, "op": w["peak"].op},
            "peak_allocated_bytes": alloc_ph.get("peak_allocated"), "peak_reserved_bytes": alloc_ph.get(
                "peak_reserved"), "end_reserved_bytes": alloc_ph.get("end_reserved")}


def _report(spec, tr, alloc, cfg, params, resident, seconds) -> dict:
    import transformers  # noqa: PLC0415
    import peft  # noqa: PLC0415
    aph = alloc["phases"]
    step_alloc = dict(aph.get("step", {}))
    sc = aph.get("score", {})
    if spec["plan"]["post_training"]["method"] in ("dpo", "kto") or trl0.grpo_ref_in_step():
        # DPO's and KTO's (and TRL 0.18 GRPO's) score window is nested in the step: the step's replay peaks are
        # the larger of the two
        step_alloc = {k: max(step_alloc.get(k) or 0, sc.get(k) or 0) for k in ("peak_allocated", "peak_reserved")} \
            | {"end_reserved": step_alloc.get("end_reserved")}
    phases = {"step": _window(tr, "step", step_alloc), "score": _window(tr, "score", sc)}
    res = snap_dict(resident)["components"]
    res["reference_weights"] = resident.by_key.get(("weight", "ref"), 0)
    return {"plan": spec["plan"], "model_type": cfg.model_type, "phases": {k: v for k, v in phases.items() if v},
            "resident": res, "resident_bytes": resident.total,
            "peak_phase": max((k for k in phases if phases[k]), key=lambda k: phases[k]["peak_bytes"]),
            "allocator": {k: v for k, v in alloc.items() if k != "phases"},
            "trainable_params": sum(p.numel() for p in params), "seconds": seconds,
            "versions": {"trl": _trl_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "peft": peft.__version__}}
