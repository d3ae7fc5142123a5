"""ds_config.json from a plan: explicit numbers, or Hugging Face "auto" style.

Every key that changes memory is written explicitly (DeepSpeed 0.19.8 defaults where the plan gives no
knob), so the config means the plan whatever DeepSpeed's defaults become. Accepted by
``deepspeed.runtime.config.DeepSpeedConfig`` with the plan's world size (tests/test_exports_real_tools.py).

Sources: DeepSpeed 0.19.8 runtime/config.py (batch arithmetic ``_set_batch_related_parameters``),
runtime/zero/config.py + offload_config.py (zero_optimization keys and defaults), runtime/precision_config.py
(fp16/bf16 blocks), runtime/base_optimizer.py ``_configure_master_weights`` (bf16 master weights and
optimizer states = pure bf16, ZeRO 1-3 only); transformers integrations/deepspeed.py (which keys "auto"
may take); knob defaults and "auto" fills from zerocalc.knobs (shared with the engine); docs/deepspeed.md §3, §5, §6.
"""
from __future__ import annotations

from ..knobs import HF_HIDDEN_SIZE_KEYS, NVME_PLACEHOLDER, fills_auto, resolved
from ..memory.stack import effective_stack
from ..plan import Plan, as_plan
from ..run.defaults import save_writer
from ..runplan import DEFAULT

STYLES = ("explicit", "auto")

# plan optimizer -> DeepSpeed optimizer type (DEEPSPEED_OPTIMIZERS in runtime/config.py). Everything else is
# a client optimizer (torch / bitsandbytes / transformers) handed to deepspeed.initialize or built by the Trainer.
DS_OPTIMIZER_TYPES = {"adamw": "AdamW", "lion": "Lion"}

# Placeholder hyper-parameters for the explicit style: transformers TrainingArguments defaults
# (learning_rate 5e-5, adam betas 0.9/0.999, eps 1e-8, weight_decay 0), so an explicit config agrees with a
# default TrainingArguments. Lion's usual betas are (0.9, 0.99). None of them changes memory.
ADAMW_PARAMS = {"lr": 5e-05, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0}
LION_PARAMS = {"lr": 5e-05, "betas": [0.9, 0.99], "weight_decay": 0.0}

# fp16 dynamic loss scaling, written out (DeepSpeedFP16Config defaults in 0.19.8).
FP16_LOSS_SCALING = {"loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
                     "hysteresis": 2, "consecutive_hysteresis": False, "min_loss_scale": 1}

STAGE12_KNOBS = ("reduce_bucket_size", "overlap_comm", "contiguous_gradients")
STAGE3_KNOBS = ("stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                "stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size")


class ExportError(ValueError):
    """The plan cannot be written in this format; ``key`` names the plan key that prevents it."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


def check_expressible(plan: Plan) -> None:
    """Raise ExportError when a ds_config cannot mean this plan."""
    stage = plan.zero_stage
    if plan.framework != "deepspeed":
        raise ExportError("framework", f"a ds_config describes DeepSpeed; this plan uses {plan.framework} "
                          "(export the accelerate or launch config instead)")
    if plan.precision == "bf16-pure" and stage == 0:
        raise ExportError("precision", "pure bf16 needs ZeRO stage 1-3 in DeepSpeed (bf16_master_weights_and_grads); "
                          "at stage 0 DeepSpeed keeps fp32 master weights")
    if plan.precision == "bf16-pure" and plan.offload_optimizer != "none" and plan.optimizer != "adamw":
        raise ExportError("optimizer", "pure bf16 with optimizer offload needs DeepSpeed's CPU Adam (optimizer adamw): "
                          "ZeRO asserts DeepSpeedCPUAdam for bf16 master weights when offloading "
                          "(stage_1_and_2.py/stage3.py _enforce_cpu_offload)")
    if plan.offload_optimizer != "none" and stage == 0:
        raise ExportError("offload_optimizer", "optimizer offload needs ZeRO stage 1-3; DeepSpeed ignores it at stage 0")
    if plan.offload_params != "none" and stage != 3:
        raise ExportError("offload_params", "parameter offload needs ZeRO stage 3; DeepSpeed silently ignores "
                          "offload_param at lower stages")
    if plan.optimizer_in_backward:
        raise ExportError("optimizer_in_backward", "DeepSpeed has no optimizer-in-backward mode")


def ds_config(plan, style: str = "explicit") -> dict:
    """The ds_config dict for ``plan``. style "explicit": numbers everywhere; "auto": the keys the HF
    Trainer fills itself (batch, clipping, precision switches, optimizer hyper-parameters, and the buffer
    knobs the plan sets to "auto") are left as "auto"."""
    if style not in STYLES:
        raise ExportError("style", f"unknown style {style!r}; one of {', '.join(STYLES)}")
    plan = as_plan(plan)
    check_expressible(plan)
    auto = style == "auto"
    stage = plan.zero_stage
    mbs, gas = plan.micro_batch_size, plan.gradient_accumulation_steps

    cfg = {}
    if auto:
        cfg["train_batch_size"] = "auto"
        cfg["train_micro_batch_size_per_gpu"] = "auto"
        cfg["gradient_accumulation_steps"] = "auto"
        cfg["gradient_clipping"] = "auto"
    else:
        # train_batch_size = micro x accumulation x data-parallel ranks (DeepSpeedConfig._batch_assertion)
        cfg["train_batch_size"] = mbs * gas * plan.world_size
        cfg["train_micro_batch_size_per_gpu"] = mbs
        cfg["gradient_accumulation_steps"] = gas
        cfg["gradient_clipping"] = float(resolved(plan, "gradient_clipping"))

    prec = plan.precision
    fp16 = {"enabled": "auto" if auto else prec == "fp16-mixed"}
    if auto or prec == "fp16-mixed":
        fp16.update(FP16_LOSS_SCALING)
    bf16 = {"enabled": "auto" if auto else prec in ("bf16-mixed", "bf16-pure")}
    if prec == "bf16-pure":
        # master weights, gradients and optimizer states in bf16: no fp32 copy (base_optimizer._configure_master_weights)
        bf16["bf16_master_weights_and_grads"] = True
        bf16["bf16_optimizer_states"] = True
    cfg["fp16"] = fp16
    cfg["bf16"] = bf16

    opt = plan.optimizer
    # At stage 0 no optimizer block: the Trainer's own (fused torch AdamW) is handed to DeepSpeed, which
    # wraps it in FP16_UnfusedOptimizer - per-parameter fp32 grads at the step (4 B/param), where its
    # FusedAdam would get FP16_Optimizer and flatten them twice (8 B/param; docs/deepspeed-cpu.md §3.1).
    if opt in DS_OPTIMIZER_TYPES and stage >= 1:
        params = dict(ADAMW_PARAMS if opt == "adamw" else LION_PARAMS)
        if auto:
            params = {k: "auto" for k in params}
        cfg["optimizer"] = {"type": DS_OPTIMIZER_TYPES[opt], "params": params}
    else:
        # client optimizer: ZeRO refuses untested optimizers unless allowed; with offload DeepSpeed would
        # otherwise insist on its own CPU optimizer (zero_force_ds_cpu_optimizer, default true).
        if stage >= 1:
            cfg["zero_allow_untested_optimizer"] = True
        if plan.offload_optimizer != "none":
            cfg["zero_force_ds_cpu_optimizer"] = False

    zero = {"stage": stage}
    if stage >= 1:
        for k in STAGE12_KNOBS + (STAGE3_KNOBS if stage == 3 else ()):
            zero[k] = _knob_value(plan, k, auto)
        if plan.offload_optimizer != "none":
            zero["offload_optimizer"] = _offload_block(plan.offload_optimizer)
        if stage == 3 and plan.offload_params != "none":
            zero["offload_param"] = _offload_block(plan.offload_params)
        if stage == 3:
            # the checkpoint writer (run.save.weights): HF's save_model gathers 16-bit weights one module at a time
            # only with this flag; without it the Trainer writes the partitions (transformers trainer.py save_model)
            zero["stage3_gather_16bit_weights_on_model_save"] = _save_writer(plan) != "zero3-partitions"
        if stage == 3 and "zero_hpz_partition_size" in plan.deepspeed:
            zero["zero_hpz_partition_size"] = int(resolved(plan, "zero_hpz_partition_size"))
    cfg["zero_optimization"] = zero

    if plan.activation_checkpointing == "full":
        # used by models that call deepspeed.checkpointing (HF models: TrainingArguments.gradient_checkpointing)
        cfg["activation_checkpointing"] = {
            "partition_activations": False,
            "cpu_checkpointing": plan.activation_offloading,
            "contiguous_memory_optimization": False,
            "number_checkpoints": None,
            "synchronize_checkpoint_boundary": False,
            "profile": False,
        }
    return cfg


def _save_writer(plan: Plan) -> str:
    weights = plan.run.save.weights if plan.run.save not in (None, DEFAULT) else "auto"
    return save_writer(plan, effective_stack(plan), weights)


def _knob_value(plan: Plan, key: str, auto: bool):
    if auto and plan.deepspeed.get(key) == "auto" and key in HF_HIDDEN_SIZE_KEYS and fills_auto(key, plan.zero_stage):
        return "auto"
    v = resolved(plan, key)
    return bool(v) if key in ("overlap_comm", "contiguous_gradients") else int(v)


def _offload_block(device: str) -> dict:
    b = {"device": device, "pin_memory": True}  # pin_memory: 0.19.8 default, written so it never depends on it
    if device == "nvme":
        b["nvme_path"] = NVME_PLACEHOLDER
    return b


def placeholders(cfg: dict, prefix: str = "") -> list:
    """Dotted keys whose values the user must fill (the NVMe path), for the page to highlight."""
    out = []
    for k, v in cfg.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out += placeholders(v, path + ".")
        elif v == NVME_PLACEHOLDER:
            out.append(path)
    return out


def ds_warnings(plan) -> list:
    """Warnings for plan settings DeepSpeed accepts silently but ignores, or that need the user's hand.
    Each is {id, severity, message}; the engine merges them into its warnings."""
    plan = as_plan(plan)
    if plan.framework != "deepspeed":
        return []
    stage = plan.zero_stage
    out = []
    if plan.offload_params != "none" and stage != 3:
        out.append({"id": "ds-offload-param-ignored", "severity": "warning",
                    "message": f"offload_param at ZeRO stage {stage} is accepted by DeepSpeed and ignored: "
                               "parameters stay on the GPU; parameter offload needs stage 3"})
    if plan.offload_optimizer != "none" and stage == 0:
        out.append({"id": "ds-offload-optimizer-ignored", "severity": "warning",
                    "message": "offload_optimizer at ZeRO stage 0 is ignored by DeepSpeed; use stage 1-3"})
    if "nvme" in (plan.offload_optimizer, plan.offload_params if stage == 3 else "none"):
        out.append({"id": "ds-nvme-path", "severity": "info",
                    "message": f"NVMe offload: replace the placeholder nvme_path {NVME_PLACEHOLDER!r} with a "
                               "directory on a local NVMe drive; DeepSpeed accepts a config without one and fails "
                               "only in deepspeed.initialize"})
    if plan.optimizer not in DS_OPTIMIZER_TYPES and plan.offload_optimizer != "none":
        out.append({"id": "ds-client-optimizer-offload", "severity": "info",
                    "message": f"{plan.optimizer} is not a DeepSpeed optimizer: with optimizer offload it steps on "
                               "the CPU as a client optimizer (zero_force_ds_cpu_optimizer: false): it must run on CPU "
                               "tensors, and it is slower than DeepSpeed's CPU Adam"})
    if plan.activation_offloading and plan.activation_checkpointing != "full":
        out.append({"id": "ds-activation-offload", "severity": "info",
                    "message": "DeepSpeed offloads activations only for checkpointed layers "
                               "(activation_checkpointing.cpu_checkpointing); the ds_config cannot express "
                               "activation offloading without full checkpointing"})
    return out


# Per key: one line on what it does, and which estimate terms it sizes (summed for "what it costs").
# Term refs: "b:<name>" = per_gpu.deepspeed_buffers[name] (engine term names, memory/deepspeed.py; "host.<name>"
# for host-side ones), "c:<name>" = per_gpu.components[name], "host" = host_per_node_bytes. The engine lists
# only terms with bytes in this plan, so an absent name costs 0 here. An empty list: no memory of its own.
_HOST_OFFLOAD = ["host"]
KEY_NOTES = {
    "train_batch_size": ("global batch per optimizer step = micro x accumulation x data-parallel ranks; "
                         "DeepSpeed refuses a product that does not match", []),
    "train_micro_batch_size_per_gpu": ("samples per GPU per forward/backward: activations and logits scale with it",
                                       ["c:activations", "c:logits"]),
    "gradient_accumulation_steps": ("micro-batches per optimizer step; gradients accumulate in place", []),
    "gradient_clipping": ("clip the global gradient norm; the norm is taken over fp64 copies of the gradients",
                          ["b:fp64_norm_copy"]),
    "fp16": ("fp16 mixed precision with dynamic loss scaling (loss_scale 0 = dynamic)", []),
    "fp16.enabled": ("fp16 weights and gradients, fp32 master weights", ["c:weights", "c:gradients"]),
    "bf16": ("bf16 mixed precision", []),
    "bf16.enabled": ("bf16 weights and gradients (fp32 master weights unless bf16_master_weights_and_grads)",
                     ["c:weights", "c:gradients"]),
    "bf16.bf16_master_weights_and_grads": ("master weights and gradients stay bf16: no fp32 copy", []),
    "bf16.bf16_optimizer_states": ("optimizer moments kept in bf16 (2 B each instead of 4)",
                                   ["c:optimizer_states"]),
    "optimizer": ("DeepSpeed's fused optimizer (CPU Adam/Lion when offloaded); its states are sharded by ZeRO",
                  ["c:optimizer_states"]),
    "zero_allow_untested_optimizer": ("lets ZeRO wrap a client (non-DeepSpeed) optimizer", []),
    "zero_force_ds_cpu_optimizer": ("false: keep the client optimizer when offloading instead of DeepSpeed's CPU Adam",
                                    []),
    "zero_optimization": ("ZeRO sharding and its buffers", []),
    "zero_optimization.stage": ("0 replicate all; 1 shard optimizer states; 2 also gradients; 3 also parameters",
                                ["c:weights", "c:gradients", "c:optimizer_states"]),
    "zero_optimization.reduce_bucket_size": ("elements per gradient reduce bucket (the IPG bucket)",
                                             ["b:ipg_bucket"]),
    "zero_optimization.overlap_comm": ("overlap gradient reduction with backward; stages 1-2 keep a second IPG bucket",
                                       ["b:ipg_bucket"]),
    "zero_optimization.contiguous_gradients": ("copy gradients into one contiguous partition buffer as they are reduced",
                                               ["b:grad_partition", "b:grad_partition_other_rank"]),
    "zero_optimization.stage3_prefetch_bucket_size": ("elements of parameters gathered ahead of use",
                                                      ["b:gathered_params", "b:gathered_params_bwd"]),
    "zero_optimization.stage3_param_persistence_threshold": ("parameters smaller than this stay whole on every GPU",
                                                             ["b:persistent_params"]),
    "zero_optimization.stage3_max_live_parameters": ("cap on gathered parameter elements alive at once",
                                                     ["b:gathered_params", "b:gathered_params_bwd"]),
    "zero_optimization.stage3_max_reuse_distance": ("a parameter reused within this many elements stays gathered",
                                                    ["b:gathered_params", "b:gathered_params_bwd"]),
    "zero_optimization.sub_group_size": ("elements per optimizer-step tile (fp32 transient, NVMe swap buffer)",
                                         ["b:step_transient", "b:host.nvme_swap_buffers"]),
    "zero_optimization.zero_hpz_partition_size": ("ZeRO++ hpZ: a secondary copy of the parameters sharded within "
                                                  "this many ranks (one node)", ["b:hpz_secondary_partition"]),
    "zero_optimization.offload_optimizer": ("fp32 master weights and optimizer states live in host memory; "
                                            "the step runs on the CPU (host RAM per node)", _HOST_OFFLOAD),
    "zero_optimization.offload_optimizer.device": ("cpu: pinned host RAM; nvme: swapped to a local NVMe drive",
                                                   _HOST_OFFLOAD),
    "zero_optimization.offload_optimizer.pin_memory": ("page-locked host buffers (fast copies; PyTorch rounds each "
                                                       "to a power of two)", _HOST_OFFLOAD),
    "zero_optimization.offload_optimizer.nvme_path": ("FILL IN: a directory on a local NVMe drive", []),
    "zero_optimization.offload_param": ("16-bit parameters live in host memory and are fetched per layer "
                                        "(host RAM per node)", _HOST_OFFLOAD),
    "zero_optimization.offload_param.device": ("cpu: pinned host RAM; nvme: swapped to a local NVMe drive",
                                               _HOST_OFFLOAD),
    "zero_optimization.offload_param.pin_memory": ("page-locked host buffers for the parameters", _HOST_OFFLOAD),
    "zero_optimization.offload_param.nvme_path": ("FILL IN: a directory on a local NVMe drive", []),
    "activation_checkpointing": ("DeepSpeed's checkpointing (for models calling deepspeed.checkpointing): keep only "
                                 "layer inputs and recompute in backward", ["c:activations"]),
    "activation_checkpointing.cpu_checkpointing": ("move checkpointed layer inputs to host memory",
                                                   ["c:activations"]),
}


def _flatten(cfg: dict, prefix: str = ""):
    for k, v in cfg.items():
        path = f"{prefix}{k}"
        yield path, v
        if isinstance(v, dict) and k != "optimizer":
            yield from _flatten(v, path + ".")


def _term_bytes(ref: str, est: dict) -> int:
    per_gpu = est.get("per_gpu", {})
    if ref == "host":
        return int(est.get("host_per_node_bytes") or 0)
    kind, name = ref.split(":", 1)
    table = per_gpu.get("deepspeed_buffers" if kind == "b" else "components") or {}
    return int(table.get(name, 0))


def ds_key_notes(plan, estimate, style: str = "explicit") -> list:
    """Per-key lines of the plan's ds_config, in config order: [{key, value, what, bytes, where, terms,
    placeholder}].

    bytes: the terms of ``estimate`` (an Estimate of this plan, or its dict: the caller estimates, the
    exporter never does) that the key sizes, summed (where "gpu": per GPU; "host": host RAM per node); 0 for
    keys with no memory of their own. Sub-keys without memory effect (loss scaling, optimizer
    hyper-parameters, checkpointing switches) are described by their block and not listed."""
    cfg = ds_config(plan, style)
    est = estimate.to_dict() if hasattr(estimate, "to_dict") else estimate
    notes = []
    for key, value in _flatten(cfg):
        what, refs = KEY_NOTES.get(key, (None, None))
        if what is None:
            continue
        notes.append({"key": key, "value": value, "what": what,
                      "bytes": sum(_term_bytes(r, est) for r in refs),
                      "where": "host" if refs == _HOST_OFFLOAD else "gpu",
                      "terms": list(refs), "placeholder": value == NVME_PLACEHOLDER})
    return notes


def note_term_names() -> set:
    """Every engine term name the notes read (for a test that keeps them in step with the engine)."""
    return {r.split(":", 1)[1] for _, refs in KEY_NOTES.values() for r in refs if r.startswith("b:")}
