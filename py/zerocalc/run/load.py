"""Loading the model and the engine's set-up: the ``load`` and ``init`` phases.

- single / DDP (HF Trainer `_move_model_to_device`, torchtune's and LitGPT's on-device build): the whole model
  on the GPU in the dtype it is built in (transformers 5 `from_pretrained` turns an unset dtype into "auto",
  the checkpoint's; transformers 4 builds fp32 unless `torch_dtype` is given), then cast to the training dtype
  parameter by parameter (`nn.Module.to`): the larger of the two models plus one tensor.
- QLoRA (transformers 5 core_model_loading `_materialize_copy` on a thread pool of `GLOBAL_WORKERS =
  min(4, cpu)`, then integrations/bitsandbytes.py `Bnb4bitQuantize.convert`): the quantized base plus up to four
  16-bit weights in flight.
- DeepSpeed, stages 0-2 and ZeRO-3 without `zero.Init` (runtime/engine.py `_configure_distributed_model`:
  `self.module.bfloat16()` then `if not (self.dont_change_device or is_zero_init_model):
  self.module.to(self.device)`): the whole 16-bit model on every GPU before ZeRO flattens or partitions it.
- ZeRO-3 with `zero.Init` (transformers integrations/deepspeed.py `_load_state_dict_into_zero3_model`:
  `GatheredParameters(params, recurse=False, modifier_rank=0)` per module): the 16-bit partition plus the
  largest module gathered whole; rank 0 reads the checkpoint into host memory.
- FSDP with the whole model built on each GPU first (`run.load.on_device_build`; torchtune's full_finetune.py of
  Jan-Mar 2024, a3fc7ac65 `_setup_model`: `models.get_model(model, device=self._device)`, whose
  torchtune/models/__init__.py `get_model` builds under `with get_device(device)`, then `utils.wrap_fsdp`, FSDP1
  with `device_id`, unit by unit; no `torch.cuda.empty_cache` anywhere in recipes/ or torchtune/ at that commit):
  the whole model in its build dtype plus one unit flattened (`FlatParamHandle` concatenates the unit's tensors,
  then keeps 1/N of it). Every built tensor is its own block, freed when its unit is flattened, so the build's
  segments stay cached: each is one tensor's size, smaller than the units' flat parameters, gathers and
  gradients the steps request, and only the steps' activations and logits fit in them (`stranded`).
- FSDP1 (accelerate, `sync_module_states` / device_id wrapping, torch/distributed/fsdp/_init_utils.py): the
  shards built so far plus one unit moved to the GPU and flattened (2 x the largest unit) [not traced];
  FSDP2 (accelerate `fsdp2_load_full_state_dict`, torchtune `load_from_full_model_state_dict`): the shards plus
  one full parameter (`full_param.detach().to(device)`, then `distribute_tensor`).
- ``init``: DeepSpeed (stage_1_and_2.py / stage3.py `initialize_optimizer_states`) runs the optimizer once on a zero
  fp32 gradient of the largest partition (stage 3: `torch.zeros(largest_numel)` of the largest sub-group) to create
  its states; a torch optimizer creates none before its first step, so the set-up holds the model alone.
"""
from __future__ import annotations

from ..memory.lora import largest_quantized_matrix
from ..units import ceil_div
from .phase import Phase, phase
from .view import RunView

BNB_LOAD_WORKERS = 4          # transformers core_model_loading GLOBAL_WORKERS = min(4, os.cpu_count())


def _whole_model_numel(v: RunView) -> int:
    si = v.si
    return si.trainable.numel + (si.frozen_numel if v.plan.method != "full" else 0)


def _optimizer_state(t) -> bool:
    return t.component == "optimizer_states" or any(w in t.name for w in ("optimizer", "master"))


def resident_weights(v: RunView) -> int:
    """The parameters the step keeps (frozen base, trainable weights or their shards), without optimizer state."""
    return sum(t.nbytes for t in v.state if t.component in ("weights", "lora_adapters")
               and not any(w in t.name for w in ("optimizer", "master", "grad")))


def load_phase(v: RunView) -> Phase:
    plan, si, r = v.plan, v.si, v.run
    arch, n = si.arch, plan.world_size
    weights = resident_weights(v)
    whole = _whole_model_numel(v)
    if plan.framework == "deepspeed" and (plan.zero_stage < 3 or not r.zero_init):
        note = "whole 16-bit model on every GPU before ZeRO partitions it" if plan.zero_stage == 3 else \
            "whole 16-bit model on every GPU (engine module.to(device))"
        big = 2 * whole if plan.method != "qlora" else si.frozen_bytes + 2 * si.trainable.numel
        return phase("load", {"weights": big}, note=note, host=2 * whole)
    if plan.framework == "deepspeed":
        return phase("load", {"weights": weights}, {"buffers": 2 * arch.largest_module}, transient=2 * arch.largest_module,
                     host=2 * whole, note="zero.Init: one module gathered at a time")
    if plan.framework == "fsdp" and r.on_device_build:
        unit = max(max(arch.layer_sizes or (arch.total_params,)), arch.total_params - sum(arch.layer_sizes))
        built = r.load_bytes * whole
        return phase("load", {"weights": built}, {"buffers": r.load_bytes * unit}, stranded=built,
                     host=r.load_bytes * whole, note="whole model built on the GPU, then FSDP wraps it unit by unit")
    if plan.framework == "fsdp":
        if si.stack.fsdp_version == 1:
            unit = max(arch.layer_sizes or (arch.total_params,))
            root = arch.total_params - sum(arch.layer_sizes)
            extra = 2 * r.load_bytes * max(unit, root)
            note = "FSDP1 wraps unit by unit: one unit moved and flattened"
        else:
            extra = r.load_bytes * arch.largest_tensor
            note = "FSDP2 full state dict: one parameter at a time"
        return phase("load", {"weights": weights}, {"buffers": extra}, transient=extra, note=note,
                     host=r.load_bytes * whole)
    if plan.method == "qlora":
        workers = 1 if si.stack.trainer in ("torchtune", "litgpt", "torchtitan") else BNB_LOAD_WORKERS
        inflight = workers * 2 * largest_quantized_matrix(arch)
        # peft prepare_model_for_kbit_training ends with torch.cuda.empty_cache() (utils/other.py)
        return phase("load", {"weights": weights}, {"buffers": inflight}, transient=inflight,
                     empties_cache=si.stack.kbit_prepare, note="4-bit quantization: 16-bit weights in flight")
    built = r.load_bytes * whole
    if built > weights:
        # built in a wider dtype than it trains in, then cast tensor by tensor
        return phase("load", {"weights": built}, {"buffers": weights * arch.largest_tensor // max(1, whole)},
                     note="model built in a wider dtype, then cast")
    return phase("load", {"weights": weights}, note="the model moved to the GPU")


def _before_first_step(t) -> bool:
    """A resident term that exists before the first step: not the model output a loop keeps bound between steps
    (LitGPT `fit` binds `logits` / `loss` in its first iteration; traced: tools/memtrace/golden/run lit-l1b-*-val,
    init = the loaded weights)."""
    return t.name != "logits_kept_by_loop"


def init_phase(v: RunView) -> Phase | None:
    plan = v.plan
    if plan.framework != "deepspeed":
        # the trainer's set-up (HF Trainer create_optimizer / accelerator.prepare, a recipe's _setup_optimizer): torch
        # optimizers create their states lazily in the first step (torch/optim/adamw.py _init_group), so only what
        # the model holds is there (traced: tools/memtrace/golden/run, init = the loaded weights)
        resident = {k: b for k, b in v.by_component(t for t in v.state if not _optimizer_state(t)
                                                    and _before_first_step(t)).items() if k != "gradients"}
        return phase("init", resident, note="the optimizer built; its states come with the first step")
    if plan.offload_optimizer != "none":
        return None
    resident = {k: b for k, b in v.by_component(t for t in v.state if _before_first_step(t)).items()
                if k != "gradients"}
    p = ceil_div(v.si.trainable.numel, plan.world_size)
    part = min(p, int(plan.deepspeed.get("sub_group_size", 1_000_000_000) or p)) if plan.zero_stage == 3 else p
    return phase("init", resident, {"buffers": 4 * part}, transient=4 * part,
                 note="optimizer states created on a zero fp32 gradient")
