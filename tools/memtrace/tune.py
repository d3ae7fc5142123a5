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
`optimizer_in_backward` (full_finetune_single_device `optimizer_in_bwd: True`) is the recipe's own setup: one
optimizer per parameter, stepped and zeroed inside backward by `training.register_optim_in_bwd_hooks` as each
gradient is accumulated; the step phase then runs nothing.
QLoRA (`method: qlora`) is `qlora_llama3_2_1b` (lora_llama3_2_1b with quantize_base=True): every decoder linear
holds a torchao NF4Tensor (`to_nf4`, block 64, scaler block 256, double quantization); built on meta, each is
rebuilt around CPU FakeTensor inner tensors (`fake_nf4`), which the tracker counts as weights (the wrapper
itself owns no storage); torchao's own `LinearNF4` and dequantisation run unchanged under FakeTensorMode.
"""
from __future__ import annotations

import contextlib
import time

import torch

from .build import cuda_like_dropout, fakeify
from .optim import adamw_impl, label_grads, make_optimizer, warm_up
from .plan import from_dict
from .trace import steps_result
from .tracker import StorageTracker

CHUNKS = 8       # CEWithChunkedOutputLoss(num_output_chunks=8), the recipes' default
MODELS = ("llama-3.2-1b",)


def build(plan):
    from torchtune import training  # noqa: PLC0415
    from torchtune.models.llama3_2 import llama3_2_1b, lora_llama3_2_1b, qlora_llama3_2_1b  # noqa: PLC0415
    from torchtune.modules import TransformerSelfAttentionLayer  # noqa: PLC0415
    from torchtune.modules.peft import get_adapter_params, set_trainable_params  # noqa: PLC0415
    if plan.model not in MODELS:
        raise ValueError(f"model={plan.model!r}: the torchtune tracer builds {', '.join(MODELS)} only")
    if plan.precision != "bf16-pure":
        raise ValueError("precision: torchtune's recipes train in bf16 without autocast (use bf16-pure)")
    if plan.method == "qlora":
        if (plan.quant_type, plan.double_quant) != ("nf4", True):
            raise ValueError("quantization: torchtune's QLoRA is torchao NF4 with double quantization in bf16")
    with training.set_default_dtype(torch.bfloat16), torch.device("meta"):
        if plan.method in ("lora", "qlora"):
            attn = [t.replace("o_proj", "output_proj") for t in plan.lora_targets if t in
                    ("q_proj", "k_proj", "v_proj", "o_proj")]
            mlp = any(t in plan.lora_targets for t in ("gate_proj", "up_proj", "down_proj"))
            builder = qlora_llama3_2_1b if plan.method == "qlora" else lora_llama3_2_1b
            model = builder(lora_attn_modules=attn, apply_lora_to_mlp=mlp, apply_lora_to_output=False,
                                     lora_rank=plan.lora_rank, lora_alpha=plan.lora_alpha,
                                     lora_dropout=plan.lora_dropout)
        elif plan.method == "full":
            model = llama3_2_1b()
        else:
            raise ValueError(f"method {plan.method!r}: the torchtune tracer runs full, lora and qlora")
    if plan.method in ("lora", "qlora"):
        set_trainable_params(model, get_adapter_params(model))
    if plan.activation_checkpointing == "full":
        training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})
    model.train()
    return model


def recipe_loss(plan, model):
    """The recipe's loss: CEWithChunkedOutputLoss (the model set to return CHUNKS chunks) for `loss: chunked`,
    torch.nn.CrossEntropyLoss otherwise."""
    from torchtune.modules.loss import CEWithChunkedOutputLoss  # noqa: PLC0415
    if plan.loss != "chunked":
        return torch.nn.CrossEntropyLoss()
    model.set_num_output_chunks(CHUNKS)
    return CEWithChunkedOutputLoss(num_output_chunks=CHUNKS)


def _nf4_params(model) -> list:
    """(module, name, NF4Tensor) of every torchao NF4 base weight (LoRALinear / FrozenNF4Linear, quantize_base)."""
    from torchao.dtypes.nf4tensor import NF4Tensor  # noqa: PLC0415
    return [(m, n, p) for m in model.modules() for n, p in m._parameters.items() if isinstance(p, NF4Tensor)]


def fake_nf4(model, fm) -> list:
    """Replace each meta NF4Tensor base weight by an NF4Tensor whose inner tensors are CPU FakeTensors of the same
    shapes and dtypes (torchao 0.10.0 torchao/dtypes/nf4tensor.py NF4Tensor.from_tensor, bf16 input, block 64,
    scaler block 256): quantized_data uint8 numel/2, quantized_scalers int8 numel/64, quantization_factor bf16
    numel/64/256, scaler_mean bf16 scalar, nf4 bf16 16-entry table. The subclass is rebuilt with
    __tensor_unflatten__, as torch.compile does; the ops it runs then are its own. Returns the inner tensors."""
    import dataclasses  # noqa: PLC0415
    from torchao.dtypes.nf4tensor import NF4Tensor  # noqa: PLC0415
    inner_all = []
    with fm:
        for m, n, p in _nf4_params(model):
            names, meta = p.__tensor_flatten__()
            inner = {k: torch.empty_strided(getattr(p, k).shape, getattr(p, k).stride(), dtype=getattr(p, k).dtype,
                                            device="cpu") for k in names}
            meta = dict(meta, tensor_meta=dataclasses.replace(meta["tensor_meta"], device=torch.device("cpu"),
                                                              requires_grad=False))
            w = NF4Tensor.__tensor_unflatten__(inner, meta, p.shape, p.stride())
            m._parameters[n] = torch.nn.Parameter(w, requires_grad=False)
            inner_all += list(inner.values())
    return inner_all


def trace_tune(plan_d: dict, steps: int = 2, dump_saved: bool = False) -> dict:
    """Trace `steps` steps of torchtune's loop; `dump_saved` adds every tensor autograd saved in the last
    step's forward (module path, producing op, shape, dtype, bytes: tools/memtrace/dump.py SavedRecorder)."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict(plan_d, trainers=("torchtune",))
    model = build(plan)
    loss_fn = recipe_loss(plan, model)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    nf4 = []
    if plan.method == "qlora":
        # build.fakeify would make the NF4 weights dense bf16: take them out, fakeify the rest, put fakes back
        held = [(m, n, m._parameters.pop(n)) for m, n, _ in _nf4_params(model)]
        fakeify(model, fm, torch.bfloat16)
        for m, n, p in held:
            m._parameters[n] = p
        nf4 = fake_nf4(model, fm)
    else:
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
        lora_ids = {id(p) for p in model.parameters() if p.requires_grad} if plan.method != "full" else set()
        nf4_ids = {id(p) for _, _, p in _nf4_params(model)}
        for p in model.parameters():
            if id(p) not in nf4_ids:      # a wrapper subclass: no storage of its own, its inner tensors are counted
                tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        for t in nf4:
            tr.register(t, "weight", "quant_stats" if t.dtype != torch.uint8 else "")
        for bf in model.buffers():
            tr.register(bf, "weight", "buffer")
        tokens = torch.zeros(b, s, dtype=torch.long)
        labels = torch.zeros(b, s, dtype=torch.long)
        ignore = torch.full((b, 1), -100, dtype=torch.long)
        for t in (tokens, labels, ignore):
            tr.register(t, "act", "input")
        params = [p for p in model.parameters() if p.requires_grad]
        if plan.optimizer_in_backward:
            if plan.method != "full":
                raise ValueError("optimizer_in_backward: torchtune runs it in full_finetune_* recipes only")
            from torchtune import training  # noqa: PLC0415
            # recipes/full_finetune_single_device.py _setup_optimizer(optimizer_in_bwd=True)
            optims = {p: make_optimizer(plan.optimizer, [p], impl) for p in params}
        else:
            optims = {None: make_optimizer(plan.optimizer, params, impl)}
        label_grads(params, tr)         # registered first: the gradient is labelled before the hook steps
        if plan.optimizer_in_backward:
            training.register_optim_in_bwd_hooks(model=model, optim_dict=optims)
        per_step = []
        saved = None
        if dump_saved:
            from .dump import start_recording  # noqa: PLC0415
            saved = start_recording(model, tr)
        with tr:
            for p, opt in optims.items():
                warm_up(opt, params if p is None else [p], tr)
            t1 = time.perf_counter()
            for i in range(steps):
                tr.set_phase("setup")
                tr.begin_step()
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
                if not plan.optimizer_in_backward:
                    optims[None].step()
                    optims[None].zero_grad(set_to_none=True)
                tr.mark("step_end")
                per_step.append({"peak": tr.peak, "phase_peak": dict(tr.phase_peak), "marks": dict(tr.marks)})
            t2 = time.perf_counter()
    res = steps_result(per_step, plan_d, "torchtune llama3_2", impl, sum(p.numel() for p in params),
                       {"build": round(t1 - t0, 2), "step": round(t2 - t1, 2)}, tr.events)
    if saved:
        from .dump import stop_recording  # noqa: PLC0415
        return stop_recording(saved, res)
    return res

