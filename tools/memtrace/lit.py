"""LitGPT's own training step on FakeTensors (plan-v1 `stack.trainer: litgpt`; run in .venv-litgpt).

What runs (litgpt 0.5.13, litgpt/finetune/full.py and finetune/lora.py, `fit`): LitGPT's `GPT` (or
`litgpt.lora.GPT` with `mark_only_lora_as_trainable`) built from `Config.from_name("Llama-3.2-1B")` in bf16
(Fabric precision "bf16-true": weights and LoRA in bf16, no autocast; or "bf16-mixed": an fp32 model, its
forward under autocast and its output cast to fp32, as Fabric's wrapper does), `model.max_seq_length` set to the
sequence length (rebuilds the RoPE cos/sin buffers), no activation checkpointing on one device. The step:
  full: logits = model(input_ids); loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
  lora: logits = model(input_ids, lm_head_chunk_size=128); logits[-1] = logits[-1][..., :-1, :];
        loss = chunked_cross_entropy(logits, targets[..., 1:])
  fabric.backward(loss); optimizer.step(); optimizer.zero_grad()
`logits` and `loss` are loop variables: they stay bound until the next iteration rebinds them (after the next
forward returns). The optimizer is litgpt's default "AdamW" = torch.optim.AdamW without flags (foreach on
CUDA). Two consecutive steps, as trace.trace.
"""
from __future__ import annotations

import time

import torch

from .build import fakeify
from .cuda_autocast import cuda_autocast_policy
from .optim import adamw_impl, label_grads, make_optimizer, warm_up
from .plan import from_dict
from .trace import steps_result
from .tracker import StorageTracker

NAMES = {"llama-3.2-1b": "Llama-3.2-1B"}
LM_HEAD_CHUNK = 128       # finetune/lora.py: model(input_ids, lm_head_chunk_size=128)


def build(plan):
    if plan.model not in NAMES:
        raise ValueError(f"model={plan.model!r}: the LitGPT tracer builds {', '.join(NAMES)} only")
    if plan.precision not in ("bf16-pure", "bf16-mixed"):
        raise ValueError("precision: LitGPT runs bf16-true (bf16-pure) or Fabric's bf16-mixed")
    if plan.activation_checkpointing != "none":
        raise ValueError("activation_checkpointing: LitGPT 0.5.13's single-device finetune scripts do not checkpoint")
    if plan.method == "qlora" and plan.precision != "bf16-pure":
        raise ValueError("precision: LitGPT refuses quantization with mixed precision (use bf16-pure)")
    if plan.method in ("lora", "qlora"):
        from litgpt.lora import GPT, Config, mark_only_lora_as_trainable  # noqa: PLC0415
        t = set(plan.lora_targets)
        cfg = Config.from_name(NAMES[plan.model], lora_r=plan.lora_rank, lora_alpha=plan.lora_alpha,
                               lora_dropout=plan.lora_dropout, lora_query="q_proj" in t, lora_key="k_proj" in t,
                               lora_value="v_proj" in t, lora_projection="o_proj" in t,
                               lora_mlp=bool(t & {"gate_proj", "up_proj", "down_proj"}), lora_head=False)
    elif plan.method == "full":
        from litgpt import Config  # noqa: PLC0415
        from litgpt.model import GPT  # noqa: PLC0415
        cfg = Config.from_name(NAMES[plan.model])
    else:
        raise ValueError("method: the LitGPT tracer runs full, lora and qlora")
    prev = torch.get_default_dtype()
    # Fabric "bf16-true" builds the model under torch.bfloat16 as default dtype; "bf16-mixed" (lightning/fabric/
    # plugins/precision/amp.py MixedPrecision) changes no dtype at init: an fp32 model, autocast in forward
    torch.set_default_dtype(torch.float32 if plan.precision == "bf16-mixed" else torch.bfloat16)
    try:
        with torch.device("meta"):
            model = GPT(cfg)
    finally:
        torch.set_default_dtype(prev)
    if plan.method in ("lora", "qlora"):
        mark_only_lora_as_trainable(model)
    if plan.method == "qlora":
        _bnb_convert(model, plan)
    model.train()
    return model


def _bnb_convert(model, plan) -> None:
    """Fabric's BitsandbytesPrecision (lightning/fabric/plugins/precision/bitsandbytes.py `_convert_layers`)
    replaces every `torch.nn.Linear` child with bnb's Linear4bit, lm_head and the LoRA layers' base `linear`
    included; here with the tracer's stand-in (tools/memtrace/qlora.py FakeQuantLinear: packed storage, block
    statistics, the dequantized temporaries of bnb's MatMul4Bit)."""
    from torch import nn  # noqa: PLC0415

    from .qlora import FakeQuantLinear  # noqa: PLC0415
    compute = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[plan.compute_dtype]
    for mod in list(model.modules()):
        for cname, child in list(mod.named_children()):
            if type(child) is nn.Linear:
                setattr(mod, cname, FakeQuantLinear(child.in_features, child.out_features, child.bias is not None,
                                                    plan.quant_type, plan.double_quant, compute, torch.bfloat16,
                                                    plan.bitsandbytes == "0.42"))


def trace_lit(plan_d: dict, steps: int = 2) -> dict:
    from litgpt.utils import chunked_cross_entropy  # noqa: PLC0415
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict(plan_d, trainers=("litgpt",))
    model = build(plan)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    mixed = plan.precision == "bf16-mixed"
    fakeify(model, fm, torch.float32 if mixed else torch.bfloat16)
    b, s = plan.micro_batch_size, plan.seq_len
    V = model.config.padded_vocab_size
    lora = plan.method in ("lora", "qlora")
    # logits-sized: the lm_head chunks (b, 128, V) and chunked_cross_entropy's 128-row chunks (128, V)
    tr = StorageTracker(logits_numel=LM_HEAD_CHUNK * V, vocab=V)
    impl = adamw_impl(plan.optimizer_impl, "litgpt", "5")
    def forward(*args, **kwargs):
        """Fabric's _FabricModule.forward: MixedPrecision.forward_context() = torch.autocast(bf16) around the
        module's forward, then convert_output casts floating outputs to the default dtype (fp32)."""
        if not mixed:
            return model(*args, **kwargs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(*args, **kwargs)
        if isinstance(out, list):
            return [o.to(torch.float32) for o in out]
        return out.to(torch.float32)

    with cuda_autocast_policy(mixed), fm:
        model.max_seq_length = s           # fit(): rebuilds cos/sin for the longest sequence
        lora_ids = {id(p) for p in model.parameters() if p.requires_grad} if lora else set()
        for p in model.parameters():
            tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        from .qlora import FakeQuantLinear  # noqa: PLC0415
        quant_stats = {id(b) for m in model.modules() if isinstance(m, FakeQuantLinear) for b in m.buffers()}
        for bf in model.buffers():
            # bnb's absmax / code statistics belong to the 4-bit weight, as in the HF tracer (compare.py mapping)
            tr.register(bf, "weight", "" if id(bf) in quant_stats else "buffer")
        input_ids = torch.zeros(b, s, dtype=torch.long)
        targets = torch.zeros(b, s, dtype=torch.long)
        for t in (input_ids, targets):
            tr.register(t, "act", "input")
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(plan.optimizer, params, impl)
        label_grads(params, tr)
        per_step = []
        with tr:
            warm_up(opt, params, tr)
            t1 = time.perf_counter()
            logits = loss = None
            for _ in range(steps):
                tr.set_phase("setup")
                tr.begin_step()
                tr.mark("start")
                tr.set_phase("forward")
                if lora:
                    new = forward(input_ids, lm_head_chunk_size=LM_HEAD_CHUNK)
                    logits = new                # the previous step's logits die only here
                    del new
                    logits[-1] = logits[-1][..., :-1, :]
                    tr.mark("forward_return")
                    loss = chunked_cross_entropy(logits, targets[..., 1:])
                else:
                    new = forward(input_ids)
                    logits = new
                    del new
                    tr.mark("forward_return")
                    loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
                tr.mark("forward_end")
                tr.set_phase("backward")
                tr.mark("backward_start")
                loss.backward()                 # fabric.backward(loss / accumulation) on one device
                tr.mark("backward_end")
                tr.set_phase("step")
                opt.step()
                opt.zero_grad()
                tr.mark("step_end")
                per_step.append({"peak": tr.peak, "phase_peak": dict(tr.phase_peak), "marks": dict(tr.marks)})
            t2 = time.perf_counter()
    return steps_result(per_step, plan_d, "litgpt Llama-3.2-1B", impl, sum(p.numel() for p in params),
                        {"build": round(t1 - t0, 2), "step": round(t2 - t1, 2)}, tr.events)
