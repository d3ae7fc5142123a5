"""torchtune's own training step on FakeTensors (plan-v1 `stack.trainer: torchtune`; run in .venv-torchtune).

What runs (torchtune 0.6.1, recipes/full_finetune_single_device.py and lora_finetune_single_device.py,
`train` loop): the model is torchtune's own `llama3_2_1b()` / `lora_llama3_2_1b(...)`, built under
`training.set_default_dtype(bf16)`, so base weights **and LoRA adapters are bf16**, no autocast; LoRA
trainables are set by `set_trainable_params(model, get_adapter_params(model))`; checkpointing is
`training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})` (non-reentrant
checkpoint_wrapper). The loss is `CEWithChunkedOutputLoss` (8 chunks; the model returns 8 bf16 logits chunks
via `set_num_output_chunks`, each upcast to fp32 inside the loss) with plan `loss: chunked`, or
`torch.nn.CrossEntropyLoss` on the model's fp32 `output(h).float()` with `loss: standard`. The step:
  logits = model(tokens); labels = hstack(labels[..., 1:], ignore); loss = loss_fn(logits, labels) * n
  del logits; loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)
with torch.optim.AdamW(fused=True), the 0.6.1 configs' optimizer. Two consecutive steps, as trace.trace.
"""
from __future__ import annotations

import contextlib
import time

import torch

from .build import cuda_like_dropout, fakeify
from .optim import adamw_impl, label_grads, make_optimizer, warm_up
from .plan import from_dict
from .trace import steps_result
from .tracker import Snapshot, StorageTracker

CHUNKS = 8       # CEWithChunkedOutputLoss(num_output_chunks=8), the recipes' default
MODELS = ("llama-3.2-1b",)


def build(plan):
    from torchtune import training  # noqa: PLC0415
    from torchtune.models.llama3_2 import llama3_2_1b, lora_llama3_2_1b  # noqa: PLC0415
    from torchtune.modules import TransformerSelfAttentionLayer  # noqa: PLC0415
    from torchtune.modules.peft import get_adapter_params, set_trainable_params  # noqa: PLC0415
    if plan.model not in MODELS:
        raise ValueError(f"model={plan.model!r}: the torchtune tracer builds {', '.join(MODELS)} only")
    if plan.precision != "bf16-pure":
        raise ValueError("precision: torchtune's recipes train in bf16 without autocast (use bf16-pure)")
    with training.set_default_dtype(torch.bfloat16), torch.device("meta"):
        if plan.method == "lora":
            attn = [t.replace("o_proj", "output_proj") for t in plan.lora_targets if t in
                    ("q_proj", "k_proj", "v_proj", "o_proj")]
            mlp = any(t in plan.lora_targets for t in ("gate_proj", "up_proj", "down_proj"))
            model = lora_llama3_2_1b(lora_attn_modules=attn, apply_lora_to_mlp=mlp, apply_lora_to_output=False,
                                     lora_rank=plan.lora_rank, lora_alpha=plan.lora_alpha,
                                     lora_dropout=plan.lora_dropout)
        elif plan.method == "full":
            model = llama3_2_1b()
        else:
            raise ValueError("method: the torchtune tracer runs full and lora (its QLoRA is torchao NF4, not traced)")
    if plan.method == "lora":
        set_trainable_params(model, get_adapter_params(model))
    if plan.activation_checkpointing == "full":
        training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})
    model.train()
    return model


def trace_tune(plan_d: dict, steps: int = 2, dump_saved: bool = False) -> dict:
    """Trace `steps` steps of torchtune's loop; `dump_saved` adds every tensor autograd saved in the last
    step's forward (module path, producing op, shape, dtype, bytes: tools/memtrace/dump.py SavedRecorder)."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    from torchtune.modules.loss import CEWithChunkedOutputLoss  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict(plan_d, trainers=("torchtune",))
    model = build(plan)
    chunked = plan.loss == "chunked"
    loss_fn = CEWithChunkedOutputLoss(num_output_chunks=CHUNKS) if chunked else torch.nn.CrossEntropyLoss()
    if chunked:
        model.set_num_output_chunks(CHUNKS)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    fakeify(model, fm, torch.bfloat16)
    with fm:
        for m in model.modules():
            # rope_init returns early on meta and its Llama 3.1 frequency scaling is data-dependent: build the
            # same buffers (theta (dim/2) fp32, cache (max_seq_len, dim/2, 2) fp32) with build_rope_cache
            if hasattr(m, "rope_init") and not getattr(m, "is_cache_built", True):
                m.register_buffer("theta", torch.empty(m.dim // 2, dtype=torch.float32), persistent=False)
                m.build_rope_cache(m.max_seq_len)
                m.is_cache_built = True
    b, s = plan.micro_batch_size, plan.seq_len
    V = model.output.weight.shape[0] if hasattr(model.output, "weight") else model.tok_embeddings.weight.shape[0]
    tr = StorageTracker(logits_numel=b * s * V // CHUNKS, vocab=V)
    impl = adamw_impl(plan.optimizer_impl, "torchtune", "5")
    with cuda_like_dropout(), fm:
        lora_ids = {id(p) for p in model.parameters() if p.requires_grad} if plan.method == "lora" else set()
        for p in model.parameters():
            tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        for bf in model.buffers():
            tr.register(bf, "weight", "buffer")
        tokens = torch.zeros(b, s, dtype=torch.long)
        labels = torch.zeros(b, s, dtype=torch.long)
        ignore = torch.full((b, 1), -100, dtype=torch.long)
        for t in (tokens, labels, ignore):
            tr.register(t, "act", "input")
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(plan.optimizer, params, impl)
        label_grads(params, tr)
        per_step = []
        saved = None
        if dump_saved:
            from .dump import SavedRecorder  # noqa: PLC0415
            from .trace import _ACTIVE  # noqa: PLC0415
            _ACTIVE["tracker"] = tr
            saved = SavedRecorder(model)
        with tr:
            warm_up(opt, params, tr)
            t1 = time.perf_counter()
            for i in range(steps):
                tr.set_phase("setup")
                tr.peak, tr.phase_peak, tr.marks = Snapshot(), {}, {}
                tr.mark("start")
                tr.set_phase("forward")
                rec = saved.hooks() if (saved and i == steps - 1) else contextlib.nullcontext()
                with rec:
                    logits = model(tokens)
                tr.mark("forward_return")
                lab = torch.hstack((labels[..., 1:], ignore))
                if not isinstance(logits, list):
                    lab = lab.reshape(-1)
                    logits = logits.reshape(-1, logits.size(-1))
                loss = loss_fn(logits, lab) * (b * s)
                del logits, lab
                tr.mark("forward_end")
                if saved and i == steps - 1:
                    saved.finish(tr)
                tr.set_phase("backward")
                tr.mark("backward_start")
                loss.backward()
                del loss
                tr.mark("backward_end")
                tr.set_phase("step")
                opt.step()
                opt.zero_grad(set_to_none=True)
                tr.mark("step_end")
                per_step.append({"peak": tr.peak, "phase_peak": dict(tr.phase_peak), "marks": dict(tr.marks)})
            t2 = time.perf_counter()
    res = steps_result(per_step, plan_d, "torchtune llama3_2", impl, sum(p.numel() for p in params),
                       {"build": round(t1 - t0, 2), "step": round(t2 - t1, 2)})
    if saved:
        from .trace import _ACTIVE  # noqa: PLC0415
        _ACTIVE.clear()
        res["saved_tensors"] = saved.table
    return res

