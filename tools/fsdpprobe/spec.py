"""plan-v1 dict -> the probe's run spec; plans the probe cannot run are refused with the key to change."""
from __future__ import annotations


class SpecError(ValueError):
    pass


def build_spec(plan: dict, *, steps: int = 3) -> dict:
    def need(key, allowed, default):
        v = plan.get(key, default)
        if v not in allowed:
            raise SpecError(f"{key}={v!r}: the probe runs {', '.join(map(repr, allowed))}")
        return v

    need("framework", ("fsdp",), None)
    need("offload_params", ("none",), "none")
    need("offload_optimizer", ("none",), "none")
    need("optimizer", ("adamw",), "adamw")
    gas = need("gradient_accumulation_steps", (1, 2), 4)
    model = plan.get("model")
    if not isinstance(model, dict) or "model_type" not in model:
        raise SpecError("model: give a small model as an HF config object with model_type (CPU ranks)")
    method = need("method", ("full", "lora"), "full")
    lora = None
    if method == "lora":
        lc = plan.get("lora", {})
        lora = {"rank": lc.get("rank", 16), "alpha": lc.get("alpha", 32), "dropout": lc.get("dropout", 0.05),
                "targets": lc.get("targets", ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"]),
                # PEFT >= 0.12 keeps adapters fp32 (autocast_adapter_dtype); stack.peft_adapter_dtype "base" is the
                # older PEFT that builds them in the base dtype (zerocalc memory/stack.py)
                # older PEFT, and LitGPT's own LoRA layers, build them in the base dtype (zerocalc memory/stack.py)
                "adapter_dtype": "base" if plan.get("stack", {}).get("peft_adapter_dtype") == "base"
                or plan.get("stack", {}).get("trainer") == "litgpt" else "fp32"}
    run = None
    if plan.get("run") is not None:
        save = plan["run"].get("save", {})
        weights = None if save is None else (save or {}).get("weights", "auto")
        if weights == "auto":
            weights = "fsdp-full"     # accelerate FSDP1: FULL_STATE_DICT, offload_to_cpu + rank0_only
        if weights not in (None, "fsdp-full", "fsdp-full-no-offload", "fsdp-sharded"):
            raise SpecError(f"run.save.weights={weights!r}: the probe saves fsdp-full, fsdp-full-no-offload, "
                            "fsdp-sharded")
        if weights and plan.get("stack", {}).get("fsdp_version") == 2:
            raise SpecError("run.save: the probe saves FSDP1 state dicts (stack.fsdp_version 1)")
        run = {"save": weights}
    return {"model": {k: v for k, v in model.items() if k != "name"}, "run": run,
            "world": plan.get("gpus_per_node", 4) * plan.get("nodes", 1),
            "zero_stage": need("zero_stage", (2, 3), 2),
            "precision": need("precision", ("bf16-mixed", "bf16-pure"), "bf16-mixed"),
            "attention": {"flash": "sdpa", "sdpa": "sdpa", "eager": "eager"}[plan.get("attention", "flash")],
            "checkpointing": need("activation_checkpointing", ("none", "full"), "none") == "full",
            "micro_batch": plan.get("micro_batch_size", 2), "seq_len": plan.get("seq_len", 4096),
            "lora": lora, "steps": steps, "gas": gas,
            # LitGPT (Lightning FSDPStrategy(auto_wrap_policy={Block})) keeps its LoRA layers inside the layer
            # units; the HF Trainer path wraps peft's adapters as their own units (fsdp_auto_wrap_policy)
            # FSDP2 (fully_shard per decoder layer, then the root); torchtitan's unresharded last block is not run
            "fsdp_version": 2 if plan.get("stack", {}).get("fsdp_version") == 2 else 1,
            # torchtune's and torchtitan's loops compute the loss outside the model (the same HF loss function here)
            "loss_outside": plan.get("stack", {}).get("trainer") in ("torchtune", "torchtitan"),
            # torchtune's custom_sharded_layers ['tok_embeddings', 'output']: FSDP2 units of their own
            "embedding_units": bool(plan.get("stack", {}).get("fsdp_embedding_units")),
            "wrap": "layers" if plan.get("stack", {}).get("trainer") == "litgpt" else "peft"}
