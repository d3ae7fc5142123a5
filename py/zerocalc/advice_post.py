"""Post-training warnings (plan-v1 Extension 7): what a DPO or GRPO user would want to hear about the plan's
reference, generator and load dtype. A reader of results, like advice.py, which merges these; the figures come
from the engine's own post-training functions (post/)."""
from __future__ import annotations

from .post import resolve
from .post.generator import vllm_budget_bytes, vllm_kv_tokens, vllm_weight_bytes
from .result import Estimate, Warning
from .units import gib_text as _gib


def post_warnings(est: Estimate) -> list[Warning]:
    plan = est.plan
    post = resolve(plan)
    if post is None:
        return []
    out = []
    g = post.gen
    if g is not None and g.engine == "vllm" and g.mode == "colocate":
        tokens = vllm_kv_tokens(g.utilization, est.capacity_bytes, plan.arch, g.tp)
        need = post.gen_rows * (post.prompt + post.completion)
        if tokens <= 0:
            out.append(Warning("vllm-fraction-too-small", "error",
                               f"gpu_memory_utilization {g.utilization:g} gives vLLM "
                               f"{_gib(vllm_budget_bytes(g.utilization, est.capacity_bytes))}, less than its "
                               f"{_gib(vllm_weight_bytes(plan.arch, g.tp))} of 16-bit weights and a profiling "
                               "forward: it stops with \"No available memory for the cache blocks\".",
                               "Raise gpu_memory_utilization or vllm_tensor_parallel_size."))
        elif tokens < need:
            out.append(Warning("vllm-kv-short", "info",
                               f"vLLM's KV cache holds {tokens:,} tokens; one generation round needs {need:,}: "
                               "it preempts and recomputes sequences (slower, not out of memory).",
                               "Raise gpu_memory_utilization if the update step leaves room (zerocalc fit)."))
    counted = est.per_gpu.counted
    if counted:
        out.append(Warning("vllm-pool-counted", "info",
                           f"torch.cuda.memory_allocated / _reserved keep counting the sleeping vLLM's "
                           f"{_gib(counted)} of weights and KV cache (its CuMemAllocator pool is unmapped behind "
                           "PyTorch's allocator), so peak allocated and reserved here are torch's counters and "
                           "exceed what the GPU holds; nvidia-smi (device used) is the figure that must fit.",
                           "Read torch.cuda.mem_get_info() for the device's free memory while vLLM sleeps."))
    if g is not None and g.mode == "server":
        out.append(Warning("generator-elsewhere", "info",
                           "The vLLM server runs on GPUs outside the plan; their memory is not in this estimate.",
                           ""))
    if post.trainer == "trl" and plan.run.load.dtype == "auto" and plan.framework != "deepspeed" \
            and (plan.method == "lora" or post.reference in ("model",)):
        out.append(Warning("trl-fp32-load", "info",
                           "TRL builds the model from a model id in fp32 unless told otherwise "
                           "(create_model_from_path); without DeepSpeed nothing casts it, so the "
                           + ("LoRA base" if plan.method == "lora" else "reference") + " holds 4 bytes per parameter.",
                           "Pass model_init_kwargs={\"dtype\": \"bfloat16\"} (plan: run.load.dtype bf16)."))
    if post.reference == "model" and not post.ref_sharded and plan.world_size > 1:
        out.append(Warning("reference-replicated", "info",
                           f"The reference model is a full replica on every GPU at ZeRO-{plan.zero_stage} "
                           "(TRL's prepare_deepspeed runs it at stage 0 unless the plan is at ZeRO-3).",
                           "ZeRO-3 shards it; LoRA needs no copy (the adapter is disabled); or precompute "
                           "the reference log-probabilities."))
    return out
