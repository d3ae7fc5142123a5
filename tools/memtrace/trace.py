"""One steady-state training step of a plan on FakeTensors, with live-storage accounting.

Sequence (HF Trainer's training_step, single GPU, docs/tracer.md §1e), run for two consecutive steps
(docs/tracer.md §7) so that what a loop keeps from the previous step shows:
  warm-up: every trainable param gets a zero grad, optimizer.step(), zero_grad(set_to_none=True),
           so the optimizer states exist and the traced step is step >= 2;
  if gradient_accumulation_steps > 1 the grads already exist (zeros) before the traced micro-step,
           as in every micro-step after the first (autograd then accumulates in place);
  forward  under autocast for *-mixed: out = model(input_ids, labels); loss = out.loss; del out
           (Trainer.compute_loss drops the outputs, so the bf16 logits die before backward);
  backward loss.backward(); step optimizer.step(); zero_grad(set_to_none=True).
stack.torch 1 (torch 1.x, whose Optimizer/Module.zero_grad default to set_to_none=False): the warm-up leaves zeroed
  gradients and each step's zero_grad zeroes them in place, so they stay allocated through the next forward.
stack.trainer custom-loop (a plain PyTorch loop over an HF model):
  out = model(input_ids, labels); out.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
  with `out` referenced through backward and the step, and rebound only when the next forward returns.
"""
from __future__ import annotations

import contextlib
import re
import time

import torch

from .cuda_autocast import cuda_autocast_policy
from .build import (build_meta_model, cuda_like_dropout, fakeify, fsmt_no_padding, grouped_mm_any_dtype,
                    hf_patches, no_global_attention, step_labels, unpadded_lengths)
from .optim import adamw_impl, label_grads, make_optimizer, warm_up
from .plan import TracePlan, from_dict
from .allocator import replay
from .routing import balanced_routing
from .tracker import CATS, Snapshot, StorageTracker
from . import running
from zerocalc.memory.indexers import NO_GRAD_INDEXERS


def _vocab(cfg) -> int:
    """The logits' width: the decoder sub-config's vocab_size where there is one (T5GemmaConfig: its lm_head is the
    decoder's, whatever the top-level default), else the text model's of a composite, else the config's."""
    v = getattr(getattr(cfg, "decoder", None), "vocab_size", 0)
    if not v:
        text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg      # a composite: its text model
        v = getattr(text, "vocab_size", 0)
    return int(v or 0)


def components(snap: Snapshot) -> dict:
    """Tracker keys at one moment -> the report's components (bytes). See README in __init__."""
    k = snap.by_key
    def s(pred):
        return sum(v for (c, sub), v in k.items() if pred(c, sub))
    comps = {
        "weights": s(lambda c, sub: c == "weight" and sub in ("", "quant_stats")),
        "lora_adapters": s(lambda c, sub: c == "weight" and sub == "lora"),
        "buffers": s(lambda c, sub: c == "weight" and sub == "buffer"),
        "gradients": s(lambda c, sub: c == "grad"),
        "optimizer_states": s(lambda c, sub: c == "opt"),
        "activations": s(lambda c, sub: c in ("act", "recomp") and sub != "logits"),
        "logits": s(lambda c, sub: sub == "logits" and c in ("act", "recomp", "temp")),
        "temporaries": s(lambda c, sub: c == "temp" and sub != "logits"),
    }
    # a gradient that backward has produced but AccumulateGrad has not yet stored in .grad (e.g. the
    # embedding's, at the end of backward) is a gradient, not a transient: move it there
    pending = sum(n for r, n in snap.temps if r.became_grad and r.sub != "logits")
    comps["gradients"] += pending
    comps["temporaries"] -= pending
    return comps


def _quant_buffer_ids(model) -> set:
    from .qlora import FakeQuantLinear  # noqa: PLC0415
    return {id(b) for m in model.modules() if isinstance(m, FakeQuantLinear) for b in m._buffers.values()}


def snap_dict(snap: Snapshot) -> dict:
    return {"bytes": snap.total, "phase": snap.phase, "op": snap.op, "components": components(snap),
            "by_category": {c: snap.by_cat.get(c, 0) for c in CATS}}


def never_run(cfg, name: str, images: bool = False) -> bool:
    """A parameter a real step leaves without a gradient: the cross-attention (encoder_attn, encoder_attn_layer_norm) of a BART-lineage
    decoder built as a causal LM (BartForCausalLM ... set config.is_decoder and not is_encoder_decoder, and
    BartDecoderLayer runs encoder_attn only `if encoder_hidden_states is not None`). The warm-up step gives these no
    zero gradient, so, as in a real run (torch AdamW skips a parameter whose .grad is None), they get no state.
    WhisperForCausalLM sets `config.is_encoder_decoder = False` without is_decoder (modeling_whisper.py
    WhisperForCausalLM.__init__), and WhisperDecoderLayer runs encoder_attn under the same condition: any causal
    LM whose config is not an encoder-decoder's runs no cross-attention (the step passes no encoder states)."""
    if cfg.model_type == "mllama":
        # modeling_mllama.py MllamaTextModel.forward: a cross-attention layer is skipped (`continue`) when there are
        # no cross_attention_states and nothing cached, as in a text-only step (`images`: the step feeds them)
        if images:
            return False
        m = re.search(r"language_model\.layers\.(\d+)\.", name)
        return m is not None and int(m.group(1)) in cfg.text_config.cross_attention_layers
    if cfg.model_type in NO_GRAD_INDEXERS and ".self_attn.indexer." in name:
        # zerocalc's memory/indexers.py: DSA indexers run under @torch.no_grad() (DeepSeek-V3.2, GLM-MoE-DSA, Mistral
        # Large 4); MiniMaxM3VLIndexer returns top-k indices only: no gradient ever reaches them (nor PEFT's adapters)
        return True
    if cfg.model_type == "ernie4_5_vl_moe":
        # modeling_ernie4_5_vl_moe.py Ernie4_5_VLMoeMoeBlock.forward: without image tokens (moe_mm_token_type_ids
        # None or all text) only text_moe runs; the vision experts and their router take no gradient
        return not images and ".vision_moe." in name
    return not getattr(cfg, "is_encoder_decoder", False) and ".encoder_attn" in name


def image_inputs(plan: TracePlan, cfg, dt: dict) -> dict:
    """Mllama fed images through a frozen tower: what MllamaModel.forward hands its language model, made afresh
    each forward (so only what autograd saves outlives it): the projected vision states (b, tokens_per_sample, h)
    in the compute dtype, no gradient (the tower and projector are frozen), and a cross_attention_mask of ones
    (b, s, images, max_num_tiles), every text token attending to every tile; tokens_per_sample = images x
    max_num_tiles x vision_model.num_patches ((image_size / patch_size)^2 + 1)."""
    if cfg.model_type == "idefics" and plan.vision_tokens:
        return idefics_image_inputs(plan, cfg, dt)
    if cfg.model_type != "mllama" or not plan.vision_tokens:
        return {}
    v = cfg.vision_config
    per_image = v.max_num_tiles * ((v.image_size // v.patch_size) ** 2 + 1)
    images, rest = divmod(plan.vision_tokens, per_image)
    if rest or not images:
        raise ValueError(f"vision.tokens_per_sample must be a multiple of {per_image} (max_num_tiles x patches)")
    b, s = plan.micro_batch_size, plan.seq_len
    e = dt["autocast"] or dt["base"]
    return {"cross_attention_states": torch.zeros(b, plan.vision_tokens, cfg.text_config.hidden_size, dtype=e),
            "cross_attention_mask": torch.ones(b, s, images, v.max_num_tiles, dtype=torch.long)}


def idefics_image_inputs(plan: TracePlan, cfg, dt: dict) -> dict:
    """IDEFICS fed its frozen tower's output (modeling_idefics.py IdeficsModel.forward's image_encoder_embeddings
    branch): (b, images, patches, embed_dim) in the compute dtype, no gradient, patches = (image_size /
    patch_size)^2 + 1 an image, and an image_attention_mask of ones (b, s, images): every text token attends to
    every image; tokens_per_sample = images x patches, or with use_resampler images x resampler_n_latents (the
    frozen perceiver's output, what the gated layers read)."""
    v = cfg.vision_config
    patches = (v.image_size // v.patch_size) ** 2 + 1
    # with use_resampler the frozen perceiver resampler turns an image's patches into resampler_n_latents states
    per_image = cfg.perceiver_config.resampler_n_latents if cfg.use_resampler else patches
    images, rest = divmod(plan.vision_tokens, per_image)
    if rest or not images:
        raise ValueError(f"vision.tokens_per_sample must be a multiple of {per_image} (an image's states)")
    b, s = plan.micro_batch_size, plan.seq_len
    e = dt["autocast"] or dt["base"]
    return {"image_encoder_embeddings": torch.zeros(b, images, patches, v.embed_dim, dtype=e),
            "image_attention_mask": torch.ones(b, s, images, dtype=torch.long)}


def trace(plan_d: dict, dump_saved: bool = False, steps: int = 2, log_ops: bool = False,
          events: list | None = None) -> dict:
    """Trace `steps` consecutive steady-state steps of a plan-v1 dict; returns the report dict (bytes).

    The top-level peak / phase_peaks / marks are those of the step with the highest peak (ties: the last),
    so what a loop keeps from the previous step shows; `steps` has every step's peak and marks.
    `events`, if given, receives the allocation log (allocator.py; STEP marks where each step begins).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    t0 = time.perf_counter()
    plan: TracePlan = from_dict(plan_d)
    model, cfg, dt = build_meta_model(plan, gc_context_fn=running.gc_context_fn)
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    tagged = fakeify(model, fm, dt["adapter"])
    b, s = plan.micro_batch_size, plan.seq_len
    V = _vocab(cfg)
    tr = StorageTracker(logits_numel=b * s * V, vocab=V)
    saved = None
    with hf_patches(), cuda_like_dropout(), grouped_mm_any_dtype(), balanced_routing(), \
            cuda_autocast_policy(dt["autocast"] is not None), no_global_attention(cfg.model_type == "led"), \
            unpadded_lengths(cfg.model_type == "xlm", s), fsmt_no_padding(cfg.model_type == "fsmt"), fm:
        tr.phase = "setup"
        lora_ids = {id(p) for p in tagged["lora"]}
        for p in model.parameters():
            tr.register(p, "weight", "lora" if id(p) in lora_ids else "")
        qbufs = _quant_buffer_ids(model)
        for bf in tagged["buffers"]:
            # QLoRA quantization stats are part of the quantized weights, not model buffers
            tr.register(bf, "weight", "quant_stats" if id(bf) in qbufs else "buffer")
        ids = torch.zeros(b, s, dtype=torch.long)
        tr.register(ids, "act", "input")
        labels = step_labels(plan, ids)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(plan.optimizer, params,
                             adamw_impl(plan.optimizer_impl, plan.trainer, plan.transformers))
        label_grads(params, tr)
        running.start(tr)
        with tr:
            images = plan.vision_tokens > 0
            ran = [p for n, p in model.named_parameters() if p.requires_grad and not never_run(model.config, n, images)]
            warm_up(opt, ran, tr)
            in_place = plan.torch_era == "1"
            if in_place:
                for p in params:      # zero_grad(set_to_none=False) after the warm-up step: zeroed, kept
                    p.grad = torch.zeros_like(p)
                    tr.relabel(p.grad, "grad", "")
            ac = torch.autocast("cpu", dtype=dt["autocast"]) if dt["autocast"] else contextlib.nullcontext()
            if dump_saved:
                from .dump import SavedRecorder  # noqa: PLC0415
                saved = SavedRecorder(model)
            custom = plan.trainer == "custom-loop"
            per_step = []
            out = None
            t1 = time.perf_counter()
            for i in range(steps):
                tr.set_phase("setup")
                if log_ops and i == steps - 1:      # the op log of the last (steady-state) step: oplog.py
                    from . import qlora  # noqa: PLC0415
                    tr.ops, qlora.TRACKER["tracker"] = [], tr
                if plan.gradient_accumulation_steps > 1:
                    for p in ran:         # a later micro-step: the gradients already exist (not a never_run one's)
                        p.grad = torch.zeros_like(p)
                        tr.relabel(p.grad, "grad", "")
                tr.begin_step()
                tr.mark("start")
                tr.set_phase("forward")
                rec = saved.hooks() if (saved and i == steps - 1) else contextlib.nullcontext()
                with ac, rec:
                    new = model(input_ids=ids, labels=labels, **image_inputs(plan, cfg, dt))
                # custom loop: `out = model(**batch)` rebinds `out` only now, so the previous step's output
                # (its logits, its loss and through it the graph's ctx attributes) lived until here
                out = new
                del new
                tr.mark("forward_return")
                if custom:
                    loss = None          # out.loss.backward(): `out` (logits included) stays referenced
                else:
                    loss = out.loss      # Trainer.compute_loss returns the loss and drops the outputs
                    out = None
                tr.mark("forward_end")
                if saved and i == steps - 1:
                    saved.finish(tr)
                tr.set_phase("backward")
                tr.mark("backward_start")
                (out.loss if custom else loss).backward()
                loss = None
                tr.mark("backward_end")
                tr.set_phase("step")
                opt.step()
                opt.zero_grad(set_to_none=not in_place)
                tr.mark("step_end")
                per_step.append({"peak": tr.peak, "phase_peak": dict(tr.phase_peak), "marks": dict(tr.marks)})
            out = None
            tr.mark("after_loop")
            per_step[-1]["marks"]["after_loop"] = tr.marks["after_loop"]
            t2 = time.perf_counter()
        running.stop()
    worst = max(range(len(per_step)), key=lambda j: (per_step[j]["peak"].total, j))
    tr.peak, tr.phase_peak, tr.marks = per_step[worst]["peak"], per_step[worst]["phase_peak"], per_step[worst]["marks"]
    fwd_end = tr.marks["forward_end"]
    res = {
        "plan": plan_d,
        "model_type": cfg.model_type,
        "attn_implementation": "eager" if plan.attention == "eager" else "flash (FA2 profile via CPU SDPA flash)",
        "peak_bytes": tr.peak.total,
        "peak_phase": tr.peak.phase,
        "peak_op": tr.peak.op,
        "peak": snap_dict(tr.peak),
        "saved_activations_forward_end": sum(v for (c, sub), v in fwd_end.by_key.items()
                                             if c == "act" and sub not in ("input",)),
        "forward_end": snap_dict(fwd_end),
        "phase_peaks": {ph: snap_dict(sn) for ph, sn in tr.phase_peak.items()},
        "marks": {m: snap_dict(sn) for m, sn in tr.marks.items()},
        "inplace_accumulations": tr.inplace_hits,
        "peak_step": worst + 1,
        "steps": [{"peak": snap_dict(st["peak"]),
                   "phase_peaks": {ph: snap_dict(sn) for ph, sn in st["phase_peak"].items()},
                   "marks": {m: snap_dict(sn) for m, sn in st["marks"].items()}} for st in per_step],
        "optimizer_impl": adamw_impl(plan.optimizer_impl, plan.trainer, plan.transformers)
                          if plan.optimizer == "adamw" else None,
        "adapter_dtype": str(dt["adapter"]).replace("torch.", ""),
        "trainable_params": sum(p.numel() for p in params),
        "seconds": {"build": round(t1 - t0, 2), "step": round(t2 - t1, 2)},
        "allocator": replay(tr.events),
    }
    if events is not None:
        events.extend(tr.events)
    if saved:
        res["saved_tensors"] = saved.table
    if log_ops:
        from . import qlora  # noqa: PLC0415
        qlora.TRACKER.clear()
        res["ops"] = tr.ops
    return res


def steps_result(per_step: list, plan_d: dict, model_type: str, impl: str, trainable: int, seconds: dict,
                 events: list | None = None) -> dict:
    """The result dict of a traced own-code trainer (tune.py, lit.py, titan.py): the worse of the steps, its
    phase peaks and marks, and every step's, in the fields the stack grid reads; with the tracker's event log,
    its allocator replay."""
    worst = max(range(len(per_step)), key=lambda j: (per_step[j]["peak"].total, j))
    w = per_step[worst]
    fwd_end = w["marks"]["forward_end"]
    return {
        "plan": plan_d, "model_type": model_type, "peak_bytes": w["peak"].total,
        "peak_phase": w["peak"].phase, "peak_op": w["peak"].op, "peak": snap_dict(w["peak"]),
        "saved_activations_forward_end": sum(v for (c, sub), v in fwd_end.by_key.items()
                                             if c == "act" and sub != "input"),
        "forward_end": snap_dict(fwd_end),
        "phase_peaks": {ph: snap_dict(sn) for ph, sn in w["phase_peak"].items()},
        "marks": {m: snap_dict(sn) for m, sn in w["marks"].items()},
        "peak_step": worst + 1,
        "steps": [{"peak": snap_dict(st["peak"]),
                   "phase_peaks": {ph: snap_dict(sn) for ph, sn in st["phase_peak"].items()},
                   "marks": {m: snap_dict(sn) for m, sn in st["marks"].items()}} for st in per_step],
        "optimizer_impl": impl, "adapter_dtype": "bfloat16", "trainable_params": trainable,
        "seconds": seconds, **({"allocator": replay(events)} if events is not None else {}),
    }
