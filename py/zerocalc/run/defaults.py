"""Each trainer's defaults for the run's moments (contract plan-v1, Extension 5): what a plan's ``run`` leaves
unsaid is resolved here once, by the trainer and the framework of the resolved stack (memory/stack.py).

Sources (read in the trainers' code):
- HF Trainer / TRL (transformers 5.24 training_args.py): `eval_strategy="no"`, `per_device_eval_batch_size=8`
  whatever the training batch, `save_strategy="steps"` with `save_steps=500` (and a save at the end),
  `load_best_model_at_end=False`, `eval_accumulation_steps=None`.
- torchtune (recipes/full_finetune_distributed.py): validation only with `run_val_every_n_steps`, at
  `batch_size_val = cfg.get("batch_size_val", cfg.batch_size)`; a checkpoint at the end of every epoch.
- LitGPT (finetune/lora.py `fit`): a sanity `validate(..., max_iters=2)` before training and one every
  `eval.interval` (100) at the training micro-batch, each followed by `generate_example` on rank 0 with
  `set_kv_cache(batch_size=1)` and `eval.max_new_tokens` (100); `save_interval` 1000 and the final save.
- torchtitan (config/job_config.py): `validation.enable=False`, `checkpoint.enable=False`.
- a custom loop: no evaluation and no save unless the plan says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..plan import Plan
from ..runplan import DEFAULT, EvalSettings, GenerateSettings, SaveSettings
from ..memory.stack import Stack

HF_EVAL_BATCH = 8                    # transformers TrainingArguments.per_device_eval_batch_size
LITGPT_EVAL_NEW_TOKENS = 100         # litgpt EvalArgs.max_new_tokens
LOAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Eval:
    batch: int
    seq: int
    logits: str                      # loss-only, accumulate, argmax
    samples: int | None
    accumulation_steps: int | None
    unchunked_head: bool             # LitGPT validate(): lm_head over every position at once, bf16 cross-entropy


@dataclass(frozen=True)
class Generate:
    batch: int
    prompt: int
    new_tokens: int


@dataclass(frozen=True)
class Save:
    writer: str                      # module, adapter-only, zero3-16bit, zero3-partitions, fsdp-full, ...
    optimizer: bool


@dataclass(frozen=True)
class Run:
    """The run's moments with every default resolved."""
    eval: Eval | None
    generate: Generate | None
    save: Save | None
    load_bytes: int                  # bytes per element of the model as it is built and loaded
    zero_init: bool
    on_device_build: bool            # the whole model built on each GPU before FSDP wraps it (run/load.py)
    resume: bool
    load_best_at_end: bool
    merge: str                       # none, peft, 16bit-in-process


def _eval_batch(plan: Plan, stack: Stack, given) -> int:
    if given != "auto":
        return given
    return HF_EVAL_BATCH if stack.trainer == "hf-trainer" else plan.micro_batch_size


def _default_eval(stack: Stack):
    return EvalSettings(generate=GenerateSettings(max_new_tokens=LITGPT_EVAL_NEW_TOKENS, batch_size=1)) \
        if stack.trainer == "litgpt" else None


def _default_save(stack: Stack):
    return None if stack.trainer in ("torchtitan", "custom-loop") else SaveSettings()


def save_writer(plan: Plan, stack: Stack, given: str) -> str:
    """The writer a save uses: the plan's, or the framework's and trainer's default: PEFT saves the adapters only
    (HF `save_model` -> `save_pretrained`, LitGPT `save_lora_checkpoint`); HF + ZeRO-3 gathers 16-bit weights
    (`stage3_gather_16bit_weights_on_model_save`, which the exports write); FSDP1 under accelerate and Lightning
    writes a FULL_STATE_DICT offloaded to rank 0's CPU (accelerate's FSDP2 a SHARDED_STATE_DICT); torchtune's
    FSDP2 gathers each parameter (`gather_cpu_state_dict`); torchtitan writes DCP shards; otherwise the module's
    own state dict. torchtune's LoRA recipes save the merged model beside the adapters unless
    `save_adapter_weights_only` (0.6.1 lora_finetune_single_device.py `save_checkpoint`), so their writer is the
    framework's, as for a full fine-tune."""
    if given != "auto":
        return given
    if plan.method != "full" and stack.trainer != "torchtune":
        return "adapter-only"
    if plan.framework == "deepspeed":
        return "zero3-16bit" if plan.zero_stage == 3 else "module"
    if plan.framework == "fsdp":
        if stack.trainer == "torchtitan":
            return "dcp"
        # accelerate's FullyShardedDataParallelPlugin: FULL_STATE_DICT for FSDP1, SHARDED_STATE_DICT for FSDP2
        # (utils/dataclasses.py set_state_dict_type); torchtune gathers a full state dict parameter by parameter
        return "fsdp-sharded" if stack.fsdp_version == 2 and stack.trainer == "hf-trainer" else "fsdp-full"
    return "module"


def resolve(plan: Plan, stack: Stack) -> Run:
    r = plan.run
    ev = _default_eval(stack) if r.eval == DEFAULT else r.eval
    sv = _default_save(stack) if r.save == DEFAULT else r.save
    e = g = None
    if ev is not None:
        seq = ev.seq_len or plan.seq_len
        e = Eval(batch=_eval_batch(plan, stack, ev.batch_size), seq=seq, logits=ev.logits, samples=ev.samples,
                 accumulation_steps=ev.accumulation_steps, unchunked_head=stack.trainer == "litgpt")
        if ev.generate is not None:
            gb = e.batch if ev.generate.batch_size == "auto" else ev.generate.batch_size
            g = Generate(batch=gb, prompt=seq, new_tokens=ev.generate.max_new_tokens)
    s = Save(save_writer(plan, stack, sv.weights), sv.optimizer) if sv is not None else None
    load = r.load
    if load.dtype != "auto":
        load_bytes = LOAD_BYTES[load.dtype]
    elif stack.loss_path in ("hf446", "hf445"):
        load_bytes = 4               # transformers 4: from_pretrained builds fp32 unless torch_dtype is given
    else:
        load_bytes = 4 if plan.precision == "fp32" else 2   # transformers 5 "auto": the checkpoint's (16-bit) dtype
    zero_init = plan.deepspeed.get("zero_init", True) if load.zero_init == "auto" else load.zero_init
    # auto: no trainer modelled today builds the whole model on the GPU before FSDP shards it (accelerate FSDP
    # from the CPU copy; torchtune from cf20eff74, 2024-03-22, rank 0 on the CPU and the others on meta, later
    # FSDP2 load_from_full_model_state_dict);
    # torchtune's Jan-Mar 2024 full_finetune.py did (run/load.py), and a plan for it says so
    on_device_build = load.on_device_build is True
    return Run(eval=e, generate=g, save=s, load_bytes=load_bytes, zero_init=bool(zero_init),
               on_device_build=on_device_build, resume=r.resume,
               load_best_at_end=r.load_best_at_end, merge=r.merge_at_end)
