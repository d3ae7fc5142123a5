"""What the software that runs the step implies for memory: the plan's ``stack`` keys resolved per trainer.

Each trainer fixes the ``auto`` values (contract plan-v1, Extension 1) and brings its own loop, loss and
model code. ``effective_stack(plan)`` returns the resolved choices; the memory modules read them. Sources
per rule (read in the libraries' code; docs/stacks.md lists the leads and which are traced):
- adapters: PEFT >= 0.12 `get_peft_model(autocast_adapter_dtype=True)` keeps LoRA weights fp32 on a 16-bit
  base (peft/tuners/tuners_utils.py `_cast_adapter_dtype`); before 0.12 they took the base layer's dtype;
  torchtune's and LitGPT's own LoRA layers are built in the model dtype. DeepSpeed casts the whole module
  (memory/precision.py). Traced: docs/tracer.md §3 (fp32 adapters, no autocast: every adapted input saved
  as an fp32 copy).
- optimizer: HF Trainer's default `optim` is `adamw_torch_fused` in transformers 5 and `adamw_torch`
  (torch's foreach AdamW on CUDA) in 4.x; torch.optim.AdamW defaults to foreach on CUDA (torch/optim/
  optimizer.py `_default_to_fused_or_foreach`), which a plain loop and LitGPT get; torchtune's recipe
  configs and torchtitan set fused. Traced: docs/tracer.md §4 (foreach +1 copy of exp_avg_sq).
- the loss: transformers 5 `ForCausalLMLoss` upcasts and pads the labels; 4.46-4.57 upcasts and shifts a
  `.contiguous()` copy; <= 4.45 the model's forward returns fp32 logits (`logits = logits.float()`) and the
  loss shifts a copy; torchtune's TransformerDecoder returns `self.output(h).float()` and the recipe shifts
  the labels and `del logits` before backward; torchtitan upcasts `pred.float()` in the loss and deletes
  `pred`; LitGPT (Oct 2023 finetune scripts) chunks lm_head by 128 positions and runs `cross_entropy` on
  each bf16 chunk (lit_gpt/utils.py chunked_cross_entropy).
- checkpointing: transformers 4.35-4.57 `gradient_checkpointing_enable` defaults to `use_reentrant=True` (the
  checkpointed forward runs under no_grad, builds no graph); transformers 5's `activation_checkpointing_enable`
  defaults to non-reentrant, as do torchtune's, LitGPT's and torchtitan's checkpoint wrappers.
- zero_grad: torch 2.0 made `set_to_none=True` the default of `Optimizer.zero_grad` and `Module.zero_grad`
  (pytorch issue #92656, PR #92731); torch 1.7-1.13 default to `set_to_none=False` (pytorch PR #42754 added the
  argument; torch 1.13 torch/optim/optimizer.py `Optimizer.zero_grad` and torch/nn/modules/module.py
  `Module.zero_grad` zero each `.grad` in place, `p.grad.zero_()`, unless asked to set it to None). The HF Trainer calls
  `model.zero_grad()` after each optimizer step and before the loop (transformers 4.26.1 and 4.28.1 trainer.py
  `_inner_training_loop`, no argument), a plain loop `optimizer.zero_grad()`: on torch 1.x the gradients are
  zeroed in place and stay allocated through the next forward. DeepSpeed zeroes its own buffers.
- what the loop keeps: a plain loop (`out = model(**batch); out.loss.backward()`) and LitGPT's
  (`logits = model(...)`) keep the model output referenced through backward and the step, until the next
  forward returns; the HF Trainer's `compute_loss` drops it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..plan import Plan
from ..stack import fsdp_version_of

MODEL_CODE = {"hf-trainer": "hf", "custom-loop": "hf", "torchtune": "torchtune", "litgpt": "litgpt",
              "torchtitan": "torchtitan"}


@dataclass(frozen=True)
class Stack:
    trainer: str
    loss_path: str             # hf5, hf446, hf445, torchtune, torchtitan, litgpt
    loop_keeps_output: bool    # the model output (logits) stays referenced through backward and the step
    adapter_dtype: str         # fp32 or base
    kbit_prepare: bool
    bnb_keeps_inputs: bool     # bitsandbytes < 0.43.2 MatMul4Bit: ctx.tensors = (A, B)
    optimizer_impl: str        # fused, foreach, single-tensor, or "own" (DeepSpeed, bitsandbytes, ...)
    compile: str               # none, model, model+loss
    fsdp_version: int
    cuda_context_eager: bool
    separate_lm_head: bool     # LitGPT's convert_hf_checkpoint copies a tied embedding into lm_head
    reentrant_checkpointing: bool   # transformers 4.x gradient_checkpointing_enable defaults to use_reentrant=True
    fsdp_no_sync: bool         # FSDP1 accumulation micro-steps run under no_sync() (unsharded gradients kept)
    fsdp_adapters_in_units: bool    # FSDP1: the LoRA layers share the layer units' flat parameters
    fabric_mixed: bool         # Lightning Fabric "bf16-mixed": an fp32 model, autocast, outputs cast to fp32
    fsdp_embedding_units: bool  # FSDP2: the embedding and lm_head are units of their own (not in the root)
    grads_kept: bool = False   # zero_grad zeroes .grad in place (torch 1.x): gradients resident through forward
    kbit_bf16_ends: bool = False   # TRL's peft_module_casting_to_bf16 after kbit prepare: embeddings / lm_head bf16


def kbit_prepared(plan: Plan) -> bool:
    """Whether the 4-bit model trains as PEFT ``prepare_model_for_kbit_training`` leaves it (every parameter that
    is not a bnb ``Params4bit`` in fp32: embeddings, norms, lm_head; peft utils/other.py). ``auto`` is False for
    every trainer, because none of the modelled ones trains in that state in its current release:
    - the plain HF Trainer never calls it (transformers trainer.py: no call);
    - TRL's SFTTrainer called it for a 4-bit/8-bit model that is not sharded (Params4bit on cpu/meta = FSDP or
      ZeRO-3 QLoRA: skipped) from 0.7 (``prepare_model_for_int8_training``) to 0.24 (sft_trainer.py
      ``__init__``, from 0.15 ``_prepare_peft_model``; 0.22-0.24 trl/models/utils.py ``prepare_peft_model``),
      and from 0.7.6 cast the embeddings and lm_head back to bf16 under ``args.bf16``
      (``peft_module_casting_to_bf16``, the norms stay fp32); 0.25 calls its own copy that upcasts the norms
      only; from 0.26 it calls nothing (``get_peft_model`` alone, the trainable parameters cast to bf16). So
      true fits TRL 0.7-0.24 without bf16, and ``trl-bf16`` TRL 0.9-0.24 with bf16 (``kbit_bf16_ends``); the
      importer sets them where the config says so (imports/hf_args.py);
    - axolotl calls it (loaders/model.py ``_prepare_model_for_quantization``; utils/models.py ``load_model`` up to
      0.6), skipped under FSDP-QLoRA, ZeRO-3 and cpu_ram_efficient_loading, but for any adapter then casts the
      norms and embedding modules back to ``torch_dtype`` (``_configure_embedding_dtypes``: ``needs_fa2_dtype``
      -> ``_convert_embedding_modules_dtype``): its model trains 16-bit, as with false;
    - LLaMA-Factory never calls it (src/llamafactory/model: its own ``prepare_model_for_training``, whose
      ``upcast_layernorm`` is off by default); torchtune, LitGPT and torchtitan do not use PEFT."""
    return plan.method == "qlora" and plan.stack.kbit_prepare in (True, "trl-bf16")


def kbit_bf16_ends(plan: Plan) -> bool:
    """``kbit_prepare: trl-bf16``: TRL 0.9-0.24 SFTTrainer under ``args.bf16`` runs PEFT
    ``prepare_model_for_kbit_training`` (every non-``Params4bit`` parameter to fp32), ``get_peft_model``, then
    ``peft_module_casting_to_bf16`` (trl/trainer/utils.py; called from sft_trainer.py ``_prepare_peft_model``
    0.15-0.21, trl/models/utils.py ``prepare_peft_model`` 0.22-0.24): modules named ``*norm*`` stay fp32 and
    the fp32 ``lm_head`` / ``embed_tokens`` / ``wte`` / ``wpe`` go back to bf16 (0.7.x-0.8.x also cast the LoRA
    layers to bf16: not modelled). The norms' fp32 weights promote their outputs to fp32 (``weight *
    hs.to(input_dtype)``), the 4-bit layers cast their outputs back to that dtype, and layer 0's MLP output
    makes the residual stream fp32 from layer 1 on: the blocks are those of ``true``; the embedding and the head
    weigh 2 B per element and autocast reads the bf16 head as is (no fp32-weight copy). Without bf16 TRL casts
    nothing back (``if args.bf16``): a plan in fp16 or fp32 with this value trains as ``true``. Traced:
    tools/memtrace/golden/stacks/l1b-qlora-mixed-*kbit-trlbf16."""
    return kbit_prepared(plan) and plan.stack.kbit_prepare == "trl-bf16" and plan.precision.startswith("bf16")


def effective_stack(plan: Plan) -> Stack:
    s, trainer = plan.stack, plan.stack.trainer
    code = MODEL_CODE[trainer]
    loss_path = {"5": "hf5", "4.46": "hf446", "4.45": "hf445"}[s.transformers] if code == "hf" else code
    if s.peft_adapter_dtype != "auto":
        adapter = s.peft_adapter_dtype
    else:
        adapter = "base" if trainer in ("torchtune", "litgpt") else "fp32"
    if s.optimizer_impl != "auto":
        impl = s.optimizer_impl
    elif plan.optimizer != "adamw" or plan.framework == "deepspeed":
        impl = "own"
    elif trainer == "hf-trainer":
        impl = "fused" if s.transformers == "5" else "foreach"
    elif trainer in ("torchtune", "torchtitan"):
        impl = "fused"
    else:
        impl = "foreach"
    quant4 = plan.method == "qlora" and plan.quantization.type in ("nf4", "fp4")
    version = fsdp_version_of(s)
    return Stack(
        trainer=trainer, loss_path=loss_path, loop_keeps_output=trainer in ("custom-loop", "litgpt"),
        adapter_dtype=adapter, kbit_prepare=kbit_prepared(plan),
        bnb_keeps_inputs=quant4 and s.bitsandbytes == "0.42" and trainer not in ("torchtune", "torchtitan"),
        optimizer_impl=impl, compile=s.compile,
        fsdp_version=version,
        cuda_context_eager=s.cuda_context == "eager",
        separate_lm_head=trainer == "litgpt" and plan.arch.tied_embeddings,
        reentrant_checkpointing=loss_path in ("hf445", "hf446"),
        # accelerate's Accelerator.accumulate (the HF Trainer; sync_each_batch False by default) and Lightning
        # Fabric's no_backward_sync (LitGPT's finetune scripts) enter FSDP1's no_sync() on accumulation steps
        fsdp_no_sync=plan.framework == "fsdp" and version == 1 and trainer in ("hf-trainer", "litgpt"),
        # Lightning FSDPStrategy(auto_wrap_policy={Block}) with use_orig_params=True (lightning/fabric/strategies/
        # fsdp.py, 2.1): LitGPT's LoRA layers are flattened with the frozen weights of their block
        fsdp_adapters_in_units=plan.framework == "fsdp" and version == 1 and trainer == "litgpt"
        and plan.method != "full",
        # lightning/fabric/plugins/precision/amp.py MixedPrecision: no dtype at init (the model and its LoRA
        # layers stay fp32), forward_context() = torch.autocast, convert_output() casts outputs to fp32
        fabric_mixed=trainer == "litgpt" and plan.precision == "bf16-mixed" and plan.framework != "deepspeed",
        # torchtune's custom_sharded_layers: ['tok_embeddings', 'output'] (training.shard_model fully_shards each
        # module whose name is listed before the root)
        fsdp_embedding_units=s.fsdp_embedding_units and plan.framework == "fsdp" and version == 2,
        # torch 1.x zero_grad(set_to_none=False) by default; FSDP's flat gradients not modelled (counted as freed)
        grads_kept=s.torch == "1" and plan.framework in ("single", "ddp") and not plan.optimizer_in_backward,
        kbit_bf16_ends=kbit_bf16_ends(plan))
