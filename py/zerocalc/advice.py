"""Warnings and the checklist: what a DeepSpeed, FSDP or LoRA user would want to hear about a plan.

A reader of results: ``warnings(est)`` takes an Estimate (result.py) and returns typed Warnings
{id, severity (error | warning | info), message, fix}; ids are stable so the page, tests and users can
refer to them. Counterfactuals (what ZeRO-2 would need) come computed in the Estimate; nothing here
calls back into estimate.
"""
from __future__ import annotations

from .advice_post import post_warnings
from .exports import export_warnings
from .knobs import knobs
from .memory.lora import ADAPTED_EXPERTS, matched_targets
from .memory.optimizers import is_paged
from .model.class_flags import (CHECKPOINTING_RAISES, NO_CHECKPOINTING, NO_FLASH, PEFT_CHECKPOINTING_RAISES,
                                STEP_RAISES, unsupported_attention)
from .result import Estimate, Warning
from .run import LABELS
from .stack import OWN_MODEL_CODE
from .units import gib_text as _gib


def _w(wid: str, severity: str, message: str, fix: str = "") -> Warning:
    return Warning(wid, severity, message, fix)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def warnings(est: Estimate) -> list[Warning]:
    plan, arch, gpu, pg = est.plan, est.arch, est.gpu, est.per_gpu
    out: list[dict] = []
    first = est.run.first_over() if est.run is not None else None
    if first is not None and pg.device_used <= est.capacity_bytes:
        out.append(_w("out-of-memory", "error",
                      f"Fits the step, runs out at {LABELS[first.name]}: {_gib(first.device_used)} needed per GPU, "
                      f"{_gib(est.capacity_bytes)} available ({first.note}).", _cap(est.run_fix) + "."))
    elif not est.fits:
        over = pg.device_used - est.capacity_bytes
        fix = (f"at ZeRO-{plan.zero_stage} the plan fits on {est.min_gpus} GPUs of this kind"
               if est.min_gpus else "no number of these GPUs fits it at this stage")
        out.append(_w("out-of-memory", "error",
                      f"Out of memory by {_gib(over)}: {_gib(pg.device_used)} needed per GPU, "
                      f"{_gib(est.capacity_bytes)} available; the largest part is {est.primary_driver}.", fix + "."))
    if plan.precision.startswith("bf16") and not gpu.bf16_supported:
        out.append(_w("bf16-unsupported", "error", f"{gpu.name} has no bf16 support.",
                      "Use fp16-mixed (with loss scaling) or fp32."))
    if plan.precision == "fp16-mixed" and gpu.bf16_supported:
        out.append(_w("fp16-on-bf16-gpu", "info", "fp16 needs loss scaling and can overflow; this GPU supports bf16.",
                      "Prefer bf16-mixed: same memory, no loss scaling."))
    if plan.framework == "deepspeed":
        out += _deepspeed_warnings(est)
    if plan.framework == "fsdp" and plan.zero_stage == 3 and plan.world_size > 1 and _pcie_only(gpu.interconnect):
        out.append(_w("fsdp-full-shard-pcie", "warning",
                      "FULL_SHARD all-gathers every layer twice per step; over PCIe this is slow.",
                      "Consider SHARD_GRAD_OP (zero_stage 2) or hybrid sharding within a node."))
    step = est.step
    if step is not None and getattr(step, "warnings", ()):
        # no silent fallbacks (issue 23): a GPU without rates is priced at another part's, and says so
        out.append(_w("step-rates-assumed", "warning", "Step time assumes: " + "; ".join(step.warnings) + ".",
                      "Give the GPU object bf16_dense_tflops, memory_bandwidth_gb_s and compute_capability."))
    if step is not None and getattr(step, "model_warnings", ()):
        out.append(_w("step-model-assumed", "warning", "Step time assumes: " + "; ".join(step.model_warnings) + ".",
                      "Read the step time as an estimate from a similar traced architecture."))
    # a trained tower without a tower_spec (composite.tower_spec: the CLIP / SigLIP towers of LLaVA, Video-LLaVA, VipLLaVA, Gemma 3,
    # PaliGemma, Cohere2 Vision, Aya Vision, DeepSeek-VL, Idefics2/3 and SmolVLM, the Qwen-VL and GLM-4V towers, InternViT, Pixtral (Mistral 3, Mistral Large 4), BLIP-2's
    # Q-Former, GOT-OCR 2.0's SAM ViT, Florence-2's DaViT and Fuyu's patch linear are traced) is placed and counted,
    # but what it saves for its backward is left out: the estimate's model_support says so (memory/vision.py
    # plan_support), and so does this warning
    support = est.model_support or arch.support
    if support != "exact":
        # Extension 8: an exact parameter count with approximate activations is said where users read, not only in
        # the JSON's model_support (an untraced block can be far off: docs/architectures, issue 20)
        out.append(_w("model-approximate", "warning", f"{arch.name}: {support}.",
                      "Read weights, gradients and optimizer states as exact and the activations as an estimate."))
    maxpos = arch.max_positions
    if isinstance(maxpos, int) and plan.seq_len > maxpos:
        out.append(_w("seq-exceeds-positions", "warning",
                      f"seq_len {plan.seq_len} is longer than the model's {maxpos} positions.",
                      "Shorten the sequence or extend the context (RoPE scaling) deliberately."))
    if plan.method != "full":
        missing = [t for t in plan.lora.targets if t not in matched_targets(arch, plan)]
        if missing:
            out.append(_w("lora-targets-missing", "warning",
                          f"No module named {', '.join(missing)} in {arch.name}; those targets add nothing.",
                          f"Modules of this model: {', '.join(arch.linear_names())}."))
        if arch.moe and arch.model_type in ADAPTED_EXPERTS:
            out.append(_w("moe-experts-adapted", "warning",
                          "PEFT adapts the fused expert weights of this model through gate_proj/up_proj/down_proj "
                          "and keeps a merged 16-bit copy of every expert per layer for the backward.",
                          "Leave gate_proj, up_proj and down_proj out of the targets to adapt attention only."))
        elif arch.moe:
            out.append(_w("moe-experts-not-adapted", "info",
                          "transformers 5 stores MoE experts as fused 3-D parameters: LoRA target_modules "
                          "cannot adapt them and bitsandbytes leaves them 16-bit.",
                          "Target attention (and shared experts), or use PEFT target_parameters."))
    if is_paged(plan.optimizer):
        evicted = est.per_gpu.host_detail.get("paged_evicted", 0)
        tail = (f" {_gib(evicted)} of them will not fit and are paged out to host RAM, which slows "
                "every step." if evicted else "")
        out.append(_w("paged-optimizer", "info",
                      "Paged optimizer states live in CUDA unified memory: torch.cuda.max_memory_allocated "
                      "does not show them, nvidia-smi does, and the driver pages them out to host RAM "
                      "instead of running out of memory." + tail, ""))
    if plan.optimizer_in_backward and plan.gradient_accumulation_steps > 1:
        out.append(_w("optimizer-in-backward-accumulation", "error",
                      "Stepping the optimizer inside backward cannot accumulate gradients.",
                      "Set gradient_accumulation_steps to 1."))
    comps = pg.components
    total = max(1, pg.device_used)
    if comps["logits"] > total // 5 and plan.loss == "standard":
        out.append(_w("logits-dominate", "warning",
                      f"The loss over a {arch.vocab_size:,}-token vocabulary holds {_gib(comps['logits'])} "
                      f"(fp32 log-softmax and its gradients).",
                      "Use a chunked or fused cross-entropy (loss: chunked), or a smaller micro-batch."))
    if plan.activation_checkpointing == "none" and comps["activations"] > total // 3:
        out.append(_w("checkpointing-off", "info",
                      f"Activations take {_gib(comps['activations'])}.",
                      "Full activation checkpointing keeps one input per layer at the cost of ~1/3 more compute."))
    out += _attention_warnings(est) + _checkpointing_warnings(est) + _step_raises(est)
    if plan.attention == "eager" and plan.seq_len >= 1024:
        out.append(_w("eager-attention", "info", "Eager attention keeps the s x s softmax per layer.",
                      "Use flash or sdpa attention."))
    if plan.framework == "ddp" and plan.method == "full":
        out.append(_w("ddp-replicates", "info",
                      "DDP keeps the full weights, gradients, optimizer states and a gradient bucket copy on "
                      "every GPU.", "ZeRO-1/2 or FSDP shard the optimizer states and gradients."))
    return out + post_warnings(est)


def _attention_warnings(est: Estimate) -> list[Warning]:
    """transformers 5 raises at load for an attention the model's class has no path for (model/class_flags.py);
    the estimate still costs the plan's attention, so the plan as given is one that cannot run."""
    plan, arch = est.plan, est.arch
    if plan.stack.trainer in OWN_MODEL_CODE or plan.stack.transformers != "5":
        return []
    missing = unsupported_attention(arch.model_type, plan.attention)
    if missing == "flash":
        return [_w("attention-unsupported", "error",
                   f"transformers' {arch.model_type} class does not support FlashAttention: loading it with "
                   "attn_implementation=\"flash_attention_2\" raises ValueError.",
                   "Use attention sdpa." if unsupported_attention(arch.model_type, "sdpa") == "" else
                   "Use attention eager (this class has no SDPA path either).")]
    if missing == "sdpa":
        fix = ("Use attention flash, or eager for what it runs with attn_implementation unset."
               if arch.model_type not in NO_FLASH else "Use attention eager (this class has no FlashAttention either).")
        return [_w("attention-unsupported", "error",
                   f"transformers' {arch.model_type} class has no SDPA attention: attn_implementation=\"sdpa\" "
                   "raises ValueError, and left unset it runs eager, which keeps the s x s scores.", fix)]
    return []


def _checkpointing_warnings(est: Estimate) -> list[Warning]:
    """transformers' activation_checkpointing_enable raises for a class without supports_gradient_checkpointing
    (model/class_flags.py); the estimate still costs the checkpointed step."""
    plan, arch = est.plan, est.arch
    if plan.stack.trainer in OWN_MODEL_CODE or plan.stack.transformers != "5" or plan.activation_checkpointing == "none":
        return []
    if plan.method != "full" and arch.model_type in PEFT_CHECKPOINTING_RAISES:
        return [_w("checkpointing-unsupported", "error",
                   f"{arch.model_type} under PEFT with checkpointing raises in transformers 5.24: "
                   "enable_input_require_grads makes the embeddings' output a leaf that requires grad, and "
                   f"{PEFT_CHECKPOINTING_RAISES[arch.model_type].split(' (')[0]} writes into it in place.",
                   "Set activation_checkpointing none, or train the full model.")]
    if arch.model_type in CHECKPOINTING_RAISES:
        return [_w("checkpointing-unsupported", "error",
                   f"{arch.model_type} with checkpointing raises in transformers 5.24: "
                   f"{CHECKPOINTING_RAISES[arch.model_type].split(' (')[0]}.", "Set activation_checkpointing none.")]
    if arch.model_type not in NO_CHECKPOINTING:
        return []
    return [_w("checkpointing-unsupported", "error",
               f"transformers' {arch.model_type} class has no gradient checkpointing: gradient_checkpointing_enable "
               "raises ValueError.", "Set activation_checkpointing none (and a smaller micro-batch if it then "
               "does not fit).")]


def _step_raises(est: Estimate) -> list[Warning]:
    """A precision or method whose step fails in transformers 5.24 for this model (model/class_flags.py STEP_RAISES)."""
    plan, arch = est.plan, est.arch
    if plan.stack.trainer in OWN_MODEL_CODE or plan.stack.transformers != "5":
        return []
    return [_w(f"{field}-unsupported", "error",
               f"{arch.model_type} with {field} {getattr(plan, field)} fails in transformers 5.24: {why}.",
               "Use bf16-mixed or fp32." if field == "precision" else "Train the full model.")
            for field, values, why in STEP_RAISES.get(arch.model_type, ()) if getattr(plan, field) in values]


def _pcie_only(interconnect: str) -> bool:
    s = interconnect.lower()
    return "pcie" in s or "none" in s


def _deepspeed_warnings(est: Estimate) -> list[Warning]:
    plan, gpu, pg = est.plan, est.gpu, est.per_gpu
    out: list[Warning] = []
    k = knobs(plan)
    if plan.offload_params != "none" and plan.zero_stage < 3:
        out.append(_w("offload-params-ignored", "warning",
                      f"DeepSpeed accepts offload_param at ZeRO-{plan.zero_stage} and silently ignores it: "
                      "parameters stay on the GPU.", "Use ZeRO-3 to offload parameters, or drop offload_param."))
    if plan.offload_optimizer == "nvme" and plan.zero_stage in (1, 2):
        out.append(_w("nvme-is-cpu-below-stage3", "info",
                      "At ZeRO-1/2 an nvme optimizer offload behaves as cpu offload (no swapping).", ""))
    if "nvme" in (plan.offload_optimizer, plan.offload_params):
        out.append(_w("nvme-path-required", "info",
                      "NVMe offload needs nvme_path; DeepSpeed's config parser does not check it, "
                      "deepspeed.initialize fails without it.", "Set nvme_path in the generated ds_config."))
    if plan.precision == "bf16-pure":
        out.append(_w("deepspeed-bf16-master", "info",
                      "bf16-pure in DeepSpeed is bf16_master_weights_and_grads + bf16_optimizer_states: master "
                      "copy, gradients and Adam moments in bf16 (stages 1-3; with optimizer offload it needs "
                      "DeepSpeed's CPU Adam).", "Keep bf16-mixed if the run needs fp32 master weights."))
        if plan.zero_stage == 0:
            out.append(_w("deepspeed-bf16-pure-stage0", "error",
                          "DeepSpeed supports bf16 master weights only at ZeRO stages 1-3.", "Use ZeRO-1 or higher."))
    seen = {w.id for w in out}
    out += [_w(w["id"], w["severity"], w["message"], w.get("fix", "")) for w in export_warnings(plan)
            if w["id"] not in seen]
    if plan.zero_stage == 3 and plan.world_size > 1 and _pcie_only(gpu.interconnect):
        out.append(_w("zero3-pcie", "warning",
                      "ZeRO-3 all-gathers the parameters in forward and backward and reduce-scatters the "
                      "gradients: over PCIe-only GPUs this is often slower than ZeRO-2 with offload.",
                      "Prefer ZeRO-2 (with optimizer offload if needed) on PCIe machines."))
    if plan.zero_stage == 3:
        z2 = est.zero2_device_used
        if z2 is not None and z2 < pg.device_used:
            out.append(_w("zero3-costs-more", "warning",
                          f"ZeRO-3 needs {_gib(pg.device_used)} per GPU here, ZeRO-2 {_gib(z2)}: "
                          "on this model the stage-3 buffers (bucket, prefetch, gathered layers, step sub-group) "
                          "outweigh what sharding the weights saves.",
                          "Use ZeRO-2, or shrink reduce_bucket_size / stage3_prefetch_bucket_size / sub_group_size."))
        step = pg.detail.get("step_transient", 0)
        if pg.phase == "step" and step > est.capacity_bytes // 10:
            out.append(_w("zero3-sub-group", "info",
                          f"The optimizer step's sub-group transient is {_gib(step)}.",
                          "Lower sub_group_size (e.g. 1e8) to shrink it."))
    ipg = pg.deepspeed_buffers.get("ipg_bucket", 0)
    if plan.method != "full" and plan.zero_stage in (1, 2) and ipg > 4 * 2 * est.trainable_params:
        out.append(_w("bucket-larger-than-adapters", "info",
                      f"The reduce bucket ({_gib(ipg)}) is allocated at full size even though the adapters "
                      f"have only {est.trainable_params:,} parameters.",
                      "Set reduce_bucket_size to 'auto' or a few times the adapter size."))
    if k.overlap_comm and plan.zero_stage in (1, 2):
        out.append(_w("overlap-comm-doubles-bucket", "info",
                      "overlap_comm doubles the reduce bucket at ZeRO-1/2.", ""))
    if plan.offload_optimizer != "none" or plan.offload_params != "none":
        out.append(_w("host-memory", "info",
                      f"Each node needs about {_gib(est.host_per_node_bytes)} of host RAM "
                      "(pinned buffers are rounded up to powers of two by PyTorch).", ""))
    return out
