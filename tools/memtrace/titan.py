"""torchtitan's own training step on FakeTensors (plan-v1 `stack.trainer: torchtitan`; run in .venv-torchtitan).

What runs (torchtitan 0.3.0, torchtitan/trainer.py `Trainer.train_step` and `_forward_backward_body`): the model
is torchtitan's own `Llama3Model` from `models.llama3.model_registry("1B")` (dim 2048, 16 layers, 32 heads, 8 KV
heads, vocab 128256, ffn `compute_ffn_hidden_dim(2048, multiple_of=1024, ffn_dim_multiplier=1.5)` = 8192, fused
wqkv, tied embeddings), built on meta under `set_default_dtype(bf16)` as `Trainer.__init__` does with
`training.dtype = "bfloat16"` (weights, gradients and AdamW states in bf16, no autocast: plan bf16-pure).
Activation checkpointing goes through torchtitan's own `ActivationCheckpointing.apply(model)`: `FullAC`
(`--activation_checkpoint full`) or `SelectiveAC` (the 0.3.0 default, "selective": the op-level SAC policy). The
step, one gradient-accumulation group, no parallelism:
  optimizers.zero_grad(set_to_none=True)            # training.disable_cuda_graphs=True: the eager path
  pred = model(inputs, attention_masks=mask)
  loss, _ = CrossEntropyLoss(...)(pred, labels, global_valid_tokens)   # cross_entropy(pred.flatten(0,1).float())
  del pred; loss.backward()
  clip_grad_norm_(params, max_norm=1.0, foreach=True); optimizers.step()
with torch.optim.AdamW(fused=True) (OptimizersContainer.Config.implementation = "fused"). Two steps.

Not reproduced (no GPU, no process group): 0.3.0's `parallelize_llama` always calls `apply_fsdp_to_decoder`
(fully_shard even at world size 1, which installs the bf16 MixedPrecisionPolicy); the trace builds the model
without it. The default `disable_cuda_graphs=False` captures forward+backward in a CUDA graph (a private pool)
and zeroes gradients instead of freeing them; the trace runs the eager path torchtitan takes off CUDA. The
attention is FlexAttention compiled by inductor (`models/common/attention.py` FlexAttention, the only backend
0.3.0 accepts for language models besides varlen): on CPU fake tensors it is stood in for by CPU flash SDPA
(causal, GQA), which keeps the same tensors for backward (q, k, v, out, fp32 logsumexp), and SelectiveAC's save
set gets that op in place of `torch._higher_order_ops.flex_attention` / `inductor_compiled_code`. nn.RMSNorm
takes CUDA's fused path (`cuda_fused_rms_norm`: the CPU build would decompose it and save two fp32 tensors).
"""
from __future__ import annotations

import contextlib
import time

import torch

from .build import fakeify
from .optim import label_grads, warm_up
from .plan import from_dict
from .trace import steps_result
from .tracker import StorageTracker

FLAVORS = {"llama-3.2-1b": "1B"}
_CPU_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def _flash_stand_in(q, k, v, *, score_mod, block_mask, scale, enable_gqa, return_aux, kernel_options):
    """FlexAttention.compiled_flex_attn on CPU fake tensors: causal flash SDPA, (out, aux) as flex returns."""
    from torch.nn.attention.flex_attention import AuxOutput  # noqa: PLC0415
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale,
                                                           enable_gqa=enable_gqa)
    return out, AuxOutput()


@contextlib.contextmanager
def flex_on_cpu():
    from torchtitan.models.common.attention import FlexAttention  # noqa: PLC0415
    prev = FlexAttention.__dict__["compiled_flex_attn"]
    FlexAttention.compiled_flex_attn = staticmethod(_flash_stand_in)
    try:
        yield
    finally:
        FlexAttention.compiled_flex_attn = prev


def _rms_norm_math(x, normalized_shape, weight, eps):
    dims = tuple(range(-len(normalized_shape), 0))
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + (torch.finfo(xf.dtype).eps if eps is None else eps))
    out = xf * rstd
    return (out if weight is None else out * weight.float()).to(x.dtype), rstd


@contextlib.contextmanager
def cuda_fused_rms_norm():
    """nn.RMSNorm as it runs on CUDA. torch 2.13's `rms_norm_symint` (aten/src/ATen/native/layer_norm.cpp) calls
    `at::_fused_rms_norm` whenever input and weight dtypes match; a CUDA build registers a CUDA kernel for it,
    so autograd records one `FusedRmsNormBackward0` that saves the input and the fp32 rstd. The CPU build has
    no CPU kernel, only the CompositeImplicitAutograd decomposition, which saves an fp32 copy of the input and
    the fp32 normalised tensor (+6 B per element). Registering a CPU kernel (the same math; FakeTensorMode
    never calls it) makes the CPU dispatcher take CUDA's autograd path."""
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_fused_rms_norm", _rms_norm_math, "CPU")
    try:
        yield
    finally:
        lib._destroy()


def build(plan):
    from torchtitan.models.llama3 import model_registry  # noqa: PLC0415
    from torchtitan.tools import utils  # noqa: PLC0415
    if plan.model not in FLAVORS:
        raise ValueError(f"model={plan.model!r}: the torchtitan tracer builds {', '.join(FLAVORS)} only")
    if plan.precision != "bf16-pure":
        raise ValueError("precision: the trace runs torchtitan's training.dtype=bfloat16 (use bf16-pure); its "
                         "fp32 default takes bf16 compute from fully_shard's MixedPrecisionPolicy, not traced")
    if plan.method != "full":
        raise ValueError("method: torchtitan trains full models only")
    from torchtitan.config import TrainingConfig  # noqa: PLC0415
    from torchtitan.trainer import Trainer  # noqa: PLC0415
    spec = model_registry(FLAVORS[plan.model], attn_backend="flex")
    cfg = Trainer.Config(model_spec=spec, activation_checkpoint=None,
                         training=TrainingConfig(local_batch_size=plan.micro_batch_size, seq_len=plan.seq_len,
                                                 dtype="bfloat16", disable_cuda_graphs=True))
    # Trainer.__init__: update_from_config sets every layer's RoPE max_seq_len to training.seq_len (each
    # attention has its own RoPE cache buffer), then builds on meta under the training dtype
    spec.model.update_from_config(config=cfg)
    with torch.device("meta"), utils.set_default_dtype(torch.bfloat16):
        model = spec.model.build()
    ac = ac_policy(plan.activation_checkpointing)
    if ac is not None:
        ac.apply(model)
    model.train()
    return model


def ac_policy(mode: str):
    """plan activation_checkpointing -> torchtitan's policy object (distributed/activation_checkpoint.py)."""
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC  # noqa: PLC0415
    if mode == "none":
        return None
    if mode == "full":
        return FullAC(FullAC.Config())
    if mode == "selective-op":
        class CpuFlexSAC(SelectiveAC):
            """SelectiveAC's documented extension point: the CPU stand-in of FlexAttention is saved as flex is."""
            def get_save_ops(self) -> set:
                return super().get_save_ops() | {_CPU_FLASH}
        return CpuFlexSAC(SelectiveAC.Config())
    raise ValueError(f"activation_checkpointing={mode!r}: torchtitan has none, full and selective (op)")


def _causal_block_mask(s: int):
    from torch.nn.attention.flex_attention import create_block_mask  # noqa: PLC0415
    return create_block_mask(lambda b, h, q, kv: q >= kv, None, None, s, s, device="cpu")


def trace_titan(plan_d: dict, steps: int = 2, dump_saved: bool = False) -> dict:
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    from torchtitan.components.loss import CrossEntropyLoss  # noqa: PLC0415
    from torchtitan.distributed import utils as dist_utils  # noqa: PLC0415
    t0 = time.perf_counter()
    plan = from_dict(plan_d, trainers=("torchtitan",))
    model = build(plan)
    b, s = plan.micro_batch_size, plan.seq_len
    mask = _causal_block_mask(s)               # real (tiny) BlockMask: the stand-in attention ignores it
    loss_fn = CrossEntropyLoss(CrossEntropyLoss.Config())
    fm = FakeTensorMode(allow_non_fake_inputs=True)
    fakeify(model, fm, torch.bfloat16)
    V = model.lm_head.weight.shape[0]
    tr = StorageTracker(logits_numel=b * s * V, vocab=V)
    with fm:
        for p in model.parameters():
            tr.register(p, "weight", "")
        for bf in model.buffers():
            tr.register(bf, "weight", "buffer")
        inputs = torch.zeros(b, s, dtype=torch.long)
        labels = torch.zeros(b, s, dtype=torch.long)
        gvt = torch.tensor(b * s, dtype=torch.int64)
        for t in (inputs, labels, gvt):
            tr.register(t, "act", "input")
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=8e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
        label_grads(params, tr)
        per_step = []
        saved = None
        if dump_saved:
            from .dump import start_recording  # noqa: PLC0415
            saved = start_recording(model, tr)
        with tr, flex_on_cpu(), cuda_fused_rms_norm():
            warm_up(opt, params, tr)
            t1 = time.perf_counter()
            for i in range(steps):
                tr.set_phase("setup")
                tr.begin_step()
                tr.mark("start")
                opt.zero_grad(set_to_none=True)
                tr.set_phase("forward")
                rec = saved.hooks() if (saved and i == steps - 1) else contextlib.nullcontext()
                with rec:
                    pred = model(inputs, attention_masks=mask)
                tr.mark("forward_return")
                loss, _ = loss_fn(pred, labels, gvt)
                del pred
                tr.mark("forward_end")
                if saved and i == steps - 1:
                    saved.finish(tr)
                tr.set_phase("backward")
                tr.mark("backward_start")
                loss.backward()
                tr.mark("backward_end")
                tr.set_phase("step")
                dist_utils.clip_grad_norm_(params, 1.0, foreach=True, pp_mesh=None, ep_enabled=False)
                opt.step()
                del loss
                tr.mark("step_end")
                per_step.append({"peak": tr.peak, "phase_peak": dict(tr.phase_peak), "marks": dict(tr.marks)})
            t2 = time.perf_counter()
    res = steps_result(per_step, plan_d, "torchtitan llama3 1B", "fused", sum(p.numel() for p in params),
                       {"build": round(t1 - t0, 2), "step": round(t2 - t1, 2)}, tr.events)
    if saved:
        from .dump import stop_recording  # noqa: PLC0415
        return stop_recording(saved, res)
    return res
