"""Each post-training trainer's defaults (contract plan-v1, Extension 7), resolved once per plan: the rows and
lengths of the update step, where the reference comes from and where it sits, in which dtype the models are
built, the generator and its budget. Every default names its code site (lead: ../shared/research/
post-training.md; the TRL ones read at trl@f2cd577).

- Lengths. TRL `DPOConfig.max_length` 1024 (prompt and completion together; taken as 512 + 512) and
  `GRPOConfig` / `RLOOConfig.max_completion_length` 512 from 1.10 (286d19fc7, #6264 "Change default
  `max_completion_length` from 256 to 512"), 256 in every release before (grpo_config.py / rloo_config.py at
  v0.14.0 ... v1.9.0; `trainer_version`); LLaMA-Factory `cutoff_len` 2048 (1024 + 1024); verl
  `data.max_prompt_length` / `max_response_length` 512 / 512; OpenRLHF and ms-swift: 512 + 512 (stated).
- Rows. DPO and its family concatenate chosen and rejected into one forward of 2·B rows padded to one length
  (TRL `DataCollatorForPreference`, OpenRLHF / LLaMA-Factory `concatenated_forward`); a reward model stacks the
  pairs the same way (TRL reward_trainer.py: "the first half ... chosen_ids and the second half ...
  rejected_ids"); KTO trains on its B examples: the mismatched "KL" completions (TRL kto_trainer.py
  `KL_input_ids`; LLaMA-Factory, ms-swift alike) run separate no-grad forwards of B rows (post/kto.py), but
  OpenRLHF's (v0.9.5 kto_trainer.py) run with autograd and keep their graph to backward: 2·B rows there.
  GRPO / RLOO / PPO update on ``micro_batch_size`` completions of prompt + completion tokens (TRL
  `per_device_train_batch_size` counts completions).
- Logit positions. TRL's GRPO computes logits for the completion only (`logits_to_keep + 1`,
  grpo_trainer.py `_get_per_token_logps_and_entropies`); everything else over the whole row.
- The reference (``auto``): none for ORPO / SimPO / CPO / RM, none for TRL's GRPO from 0.19 (`beta` 0.0: "the
  reference model is not loaded", grpo_config.py; up to 0.18 `beta` defaulted to 0.04, so a reference was loaded:
  grpo_config.py at v0.18.0 `default=0.04`, v0.19.0 `default=0.0`), verl's (`use_kl_loss` false) ; with LoRA the adapter is disabled
  (TRL `use_adapter`, LLaMA-Factory `disable_adapter`, verl `ref_in_actor = lora_rank > 0`) except in OpenRLHF,
  whose reference is its own Actor (for PPO / GRPO a Ray group on other GPUs, as are its critic and reward
  model: `train_ppo_ray.py`); verl forces the full reference to CPU ("We force reference policy to use
  CPUOffload", fsdp_workers.py); otherwise a model. A model reference is sharded under ZeRO-3 and replicated
  at any other stage (TRL models/utils.py `prepare_deepspeed`: `if stage != 3: ... stage = 0`; OpenRLHF
  `stage=self.stage if self.stage == 3 else 0`), sharded under FSDP (`prepare_fsdp`), replicated under DDP.
- Dtypes. TRL builds every model it loads in fp32 unless `model_init_kwargs` says otherwise
  (trl/trainer/utils.py `create_model_from_path`: "If not explicitly set, `dtype` defaults to `'float32'`"),
  the reference with the same kwargs; DeepSpeed then casts what it wraps to 16 bits (`engine.
  _configure_distributed_model`), so the fp32 default shows without DeepSpeed (a LoRA base, a DDP reference).
  ``run.load.dtype`` overrides it (Extension 5). verl builds its actor in fp32 and every other role (the
  reference, the critic's is its own config) in bf16 (verl/workers/fsdp_workers.py `_build_model_optimizer`:
  `torch_dtype = torch.float32 if self._is_actor else torch.bfloat16` unless `fsdp_config.model_dtype`, v0.4.1 ...
  b178a3c), so a LoRA actor's frozen base is fp32 too. The others load in the 16-bit compute dtype (ms-swift
  `ModelArguments.torch_dtype` None: "read from the 'config.json' file").
- TRL's version (`trainer_version`, default the newest read, 1.16): from 1.15.0 its trainers score through a
  fused, chunked LM head (post/logprobs.py); 1.11-1.14 a Triton log-prob kernel over the full logits; before,
  the full logits and `selective_log_softmax`'s per-row loop.
- Dropout. The offline trainers built on TRL set every `nn.Dropout` to p = 0 before training
  (`disable_dropout_in_model`, trl/trainer/utils.py, when `disable_dropout`, default True in DPOConfig,
  KTOConfig, RewardConfig, experimental ORPOConfig / CPOConfig of TRL 1.14.2 and 1.16.0; LLaMA-Factory's
  CustomDPOTrainer / CustomKTOTrainer `disable_dropout=True`; ms-swift's configs subclass TRL's), PEFT's LoRA
  dropout included, and `F.dropout` with p = 0 returns its input (aten `_dropout`): no mask, no copy. GRPOConfig
  and RLOOConfig default to False, and TRL's PPO has no such switch: those keep the plan's dropout. Traced: the
  DPO LoRA fixtures (lora.dropout 0.05 in the peft config) hold no `native_dropout` mask.
- DPO's NLL term (``rpo_alpha``; LLaMA-Factory ``pref_ftx``): TRL up to 0.28 runs `F.cross_entropy` over the
  chosen rows' logits (trl/trainer/dpo_trainer.py `concatenated_forward`, v0.28.0 lines 1706-1714; v0.12.0
  1291-1300), for the reference too (no `is_ref_model` guard); its DPOConfig dropped the key in 0.29. ms-swift
  (swift/rlhf_trainers/dpo_trainer.py at 3602360, lines 129-131 and 168: `-origin_per_token_logps[:num_examples]
  [loss_mask[:num_examples]].mean()`, policy only, computed whether or not rpo_alpha is set; used at 383-384) and
  LLaMA-Factory (train/dpo/trainer.py `get_batch_loss_metrics`: `sft_loss = -policy_chosen_logps_avg`, added when
  `ftx_gamma > 1e-6`) reuse the per-token log-probabilities they already hold: no buffer of their own.
- verl's ``packing`` (`use_remove_padding`, `use_dynamic_bsz` and the token budgets): the update step's and
  the score pass's micro-batch as one packed row of real tokens, or the rows a budget admits (`packed_shape`).
- The generator. TRL / ms-swift / LLaMA-Factory generate with HF `generate` unless `use_vllm`; colocated vLLM
  `gpu_memory_utilization` defaults: TRL 0.3 (`vllm_gpu_memory_utilization`), verl 0.5 (rollout.yaml),
  OpenRLHF 0.95 (`--vllm.gpu_memory_utilization`), ms-swift 0.9; verl always runs vLLM in its hybrid engine and
  frees it between rollouts (`free_cache_engine`: sleep level 1 up to 0.5, 2 from 0.6: `verl_sleep_level`);
  OpenRLHF's vLLM engines have GPUs of their own unless `--train.colocate_all`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..plan import Plan
from .kto import copies_variant
from ..postplan import (GROUPED, NO_REFERENCE, ONLINE, TRL_NEWEST, VERL_NEWEST, VERL_SLEEP_LEVEL_SINCE, Generator,
                        PostTraining, RoleModel, default_generations, verl_sleep_level, version_tuple)

TRL_LIKE = ("trl", "ms-swift", "llamafactory")       # built on TRL's trainers / the HF Trainer
DEFAULT_LENGTHS = {"llamafactory": (1024, 1024)}     # cutoff_len 2048
VLLM_UTILIZATION = {"trl": 0.3, "verl": 0.5, "openrlhf": 0.95, "ms-swift": 0.9, "llamafactory": 0.9}
LOAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
NEWEST = {"trl": TRL_NEWEST, "ms-swift": (4, 6, 0), "openrlhf": (0, 11, 0),   # the newest release each trainer's
          "verl": VERL_NEWEST}     # rules were read in (ms-swift: 3602360, swift/version.py 4.6.0.dev0; OpenRLHF
#                                  v0.11.0; verl v0.7.0, HEAD b178a3c reads the same)
OPENRLHF_LOGITS = (((0, 5, 6), "16bit"), ((0, 6, 0), "fp32-log-softmax"), ((0, 7, 0), "fp32-logsumexp"))
VERL_ENTROPY_COEFF_ONLY_SINCE = (0, 4, 0)            # verl: the update's entropy only if entropy_coeff != 0 (#1100)
SWIFT_NLL_FROM_LOGPS_SINCE = (3, 6, 0)               # ms-swift DPO: the NLL from the per-token log-probs
GROUPED_COMPLETION_512_SINCE = (1, 10, 0)            # TRL GRPO/RLOO max_completion_length: 256 before, 512 from
GRPO_BETA_ZERO_SINCE = (0, 19, 0)                    # TRL GRPOConfig.beta: 0.04 up to 0.18.x, 0.0 from 0.19.0
FUSED_HEAD_SINCE = (1, 15, 0)                        # TRL: model(..., fused_lm_head=True) in every trainer
LOSS_KERNEL_SINCE = (1, 11, 0)                       # TRL: the Triton log-prob kernel (seen in 1.14.2, not 1.10)
TEMPERATURE_COPY = {"grpo": (0, 16, 0), "rloo": (0, 22, 0)}   # TRL: `logits = logits / self.temperature` from ...
GRPO_REF_IN_LOSS = ((0, 18, 0), (0, 19, 0))          # TRL GRPO: the reference scored inside _compute_loss
GRPO_REF_UNCHUNKED = ((0, 19, 0), (0, 20, 0))        # TRL GRPO: the reference pass without batch_size
DPO_HIDDEN_STATES = ((0, 19, 0), (0, 29, 0))         # TRL DPO: output_hidden_states=True in concatenated_forward
TEMPERATURE_IN_PLACE_SINCE = (1, 0, 0)               # ... up to 0.29.x; `logits.div_(self.temperature)` from 1.0.0


@dataclass(frozen=True)
class Gen:
    """The resolved generator."""
    engine: str                  # vllm | hf
    mode: str                    # colocate | server
    utilization: float           # vLLM's fraction of each GPU's capacity (0 for HF generate)
    tp: int
    sleep: int
    cuda_graphs: bool
    in_process: bool = True      # vLLM's workers in the training process: torch's counters see its pool
    layered_summon: bool = False # verl: the LoRA sync gathers one FSDP unit at a time


@dataclass(frozen=True)
class Post:
    method: str
    trainer: str
    prompt: int
    completion: int
    generations: int
    rows: int                    # rows of the update step's forward (per GPU, per micro-step)
    length: int                  # tokens per row (padded)
    logit_positions: int         # positions whose logits the update computes
    labelled: int                # positions scored per row (the completion's: TRL's fused head scores only these)
    fused_head: bool             # TRL >= 1.15: the chunked log-prob head, no (rows, s, V) logits
    loss_kernel: bool            # TRL 1.11-1.14: the Triton log-prob kernel over the materialised logits
    torch_kernels: bool          # TRL's torch fallbacks instead of its Triton kernels (kernels: torch)
    reference: str               # none | adapter | model | precomputed | cpu | elsewhere (another GPU group)
    ref_sharded: bool            # a model reference sharded over the world (ZeRO-3, FSDP)
    shards_models: bool          # inference-only models on these GPUs are sharded (ZeRO-3, FSDP: prepare_deepspeed)
    ref_bytes: int               # bytes per reference parameter
    policy_load_bytes: int       # bytes per parameter of the model as the trainer builds it
    gen: Gen | None              # None for the offline methods
    gen_rows: int                # sequences one GPU generates per generation round
    critic: object               # RoleModel or None
    reward: object               # RoleModel or None
    no_dropout: bool = False     # the trainer sets every dropout to p = 0 (disable_dropout)
    logits_path: str = ""        # OpenRLHF's log-prob code of its release (openrlhf_logits); "" = the newest
    rpo_nll: bool = False        # TRL <= 0.28 DPO's rpo_alpha: a cross-entropy over the chosen rows' logits
    kto_copies: str = ""         # KTO's logits copies for its metrics, by trainer and release (post/kto.py)
    temperature_copy: bool = False   # TRL 0.16-0.29 GRPO (0.22-0.29 RLOO): logits / temperature out of place
    ref_in_step: bool = False        # TRL 0.18 GRPO: the reference's no-grad pass inside the update step
    hidden_states: bool = False      # TRL 0.19-0.28 DPO: every layer's hidden state returned by the forward
    ref_unchunked: bool = False      # TRL 0.19 GRPO: the reference scores the whole generation batch at once
    score_entropy: bool = False  # verl: the old-log-prob pass computes the entropy beside the logits
    update_entropy: bool = False # verl < 0.4: the update step computes the entropy under autograd
    offload_before_wake: bool = False  # verl >= 0.6: an offloaded actor goes back to the CPU before vLLM wakes
    packed: bool = False         # verl use_remove_padding: rows are one packed row of real tokens (packed_shape)
    score_rows: int = 0          # the score pass's rows and tokens per row where they differ from the update's
    score_length: int = 0        # (verl's log-prob budgets; 0 = rows / length)

    @property
    def online(self) -> bool:
        return self.method in ONLINE


def lengths(pt: PostTraining) -> tuple[int, int]:
    p, c = DEFAULT_LENGTHS.get(pt.trainer, (512, 512))
    if (pt.trainer == "trl" and pt.method in GROUPED
            and version_tuple(pt.trainer_version, NEWEST["trl"]) < GROUPED_COMPLETION_512_SINCE):
        c = 256                   # GRPOConfig / RLOOConfig max_completion_length 256 up to v1.9.x
    return (pt.prompt_len if pt.prompt_len is not None else p,
            pt.completion_len if pt.completion_len is not None else c)


def load_bytes(plan: Plan, pt: PostTraining) -> int:
    """Bytes per parameter as the trainer builds the model (before DeepSpeed casts it)."""
    if plan.run.load.dtype != "auto":
        return LOAD_BYTES[plan.run.load.dtype]
    if plan.precision == "fp32" or pt.trainer in ("trl", "verl"):
        return 4                  # TRL create_model_from_path: dtype defaults to float32; verl's actor: fp32
    return 2                      # ms-swift ModelArguments.torch_dtype None: config.json's; the others 16-bit


def reference_source(plan: Plan, pt: PostTraining) -> str:
    """Where the reference log-probabilities come from: none, adapter, model, precomputed or cpu."""
    r = pt.reference
    if r != "auto":
        return {"adapter-disabled": "adapter"}.get(r, r)
    if pt.method in NO_REFERENCE:
        return "none"
    if pt.trainer == "verl":
        # actor.use_kl_loss and algorithm.use_kl_in_reward both default to false (actor.yaml, ppo_trainer.yaml at
        # v0.4.1-v0.7.0: "Reference model will be enabled when actor.use_kl_loss or/and algorithm.use_kl_in_reward
        # is/are True"), for PPO as for GRPO
        return "none"
    if pt.method in GROUPED and pt.trainer == "trl" and not _trl_grpo_beta_default(pt):
        return "none"             # TRL GRPOConfig.beta 0.0 (from 0.19)
    if pt.method in ONLINE and pt.trainer == "openrlhf":
        return "elsewhere"        # train_ppo_ray.py: the reference is a Ray actor group of its own
    if plan.method != "full" and pt.trainer != "openrlhf":
        return "adapter"
    return "cpu" if pt.trainer == "verl" else "model"


def _trl_grpo_beta_default(pt: PostTraining) -> bool:
    """TRL's GRPO before 0.19 defaults to beta 0.04: the trainer loads a reference."""
    return (pt.trainer == "trl" and pt.method == "grpo"
            and version_tuple(pt.trainer_version, NEWEST["trl"]) < GRPO_BETA_ZERO_SINCE)


def reference_bytes(plan: Plan, pt: PostTraining) -> int:
    """A model reference's bytes per parameter: DeepSpeed's inference engine casts it to the 16-bit dtype
    (prepare_deepspeed -> deepspeed.initialize with the training config's bf16/fp16); otherwise it stays as
    built (TRL: fp32 by default)."""
    if plan.framework == "deepspeed" and plan.precision != "fp32":
        return 2
    if pt.trainer == "verl" and plan.precision != "fp32":
        return 2                  # verl fsdp_workers.py: `torch.float32 if self._is_actor else torch.bfloat16`
    return load_bytes(plan, pt)


def disables_dropout(pt: PostTraining) -> bool:
    """TRL's offline configs' `disable_dropout` True, LLaMA-Factory's DPO / KTO trainers (see above)."""
    if pt.trainer == "llamafactory":
        return pt.method in ("dpo", "ipo", "orpo", "simpo", "kto")
    return pt.trainer in ("trl", "ms-swift") and pt.method not in ONLINE


def _generator(pt: PostTraining) -> Gen | None:
    if pt.method not in ONLINE:
        return None
    g = pt.generator
    if g is None:
        if pt.trainer == "verl":
            g = Generator(engine="vllm", mode="colocate", sleep=verl_sleep_level(pt.trainer_version, False))
        elif pt.trainer == "openrlhf":
            g = Generator(engine="vllm", mode="server", gpus=1)
        else:
            g = Generator(engine="hf")
    util = 0.0 if g.engine == "hf" else (g.gpu_memory_utilization if g.gpu_memory_utilization is not None
                                         else VLLM_UTILIZATION[pt.trainer])
    return Gen(g.engine, g.mode, util, g.tensor_parallel_size, g.sleep, g.engine == "vllm" and not g.enforce_eager,
               generator_in_process(pt.trainer, g.mode), g.layered_summon)


def generator_in_process(trainer: str, mode: str) -> bool:
    """Whether a colocated vLLM's GPU memory belongs to the training process (so torch's counters there see it):
    TRL's and ms-swift's colocate mode build `LLM(..., distributed_executor_backend="external_launcher")` in the
    trainer; verl's hybrid engine runs vLLM's worker in each training worker (up to 0.6 `vllm_rollout_spmd.py`
    `LLM(...)`; from 0.7 `vllm_rollout.py` vLLMAsyncRollout, "a thin wrapper of WorkerWrapperBase, which is engine
    in single worker process", the server process only schedules). OpenRLHF's vLLM engines are Ray actors of their
    own (`LLMRayActor`), colocated or not; a server is another process by definition."""
    return mode == "colocate" and trainer != "openrlhf"


def packed_shape(remove_padding: bool, budget, micro: int, mini: int, length: int) -> tuple[int, int]:
    """(rows, tokens per row) of one verl micro-batch under ``post_training.packing`` (read at v0.4.1, v0.5.0,
    v0.6.0, v0.7.0). Without a budget the micro-batch is ``micro`` rows of prompt + completion
    (`data.split(micro_batch_size)`); with ``use_remove_padding`` dp_actor.py `_forward_micro_batch` unpads them
    (`unpad_input`) to one row of their real tokens, at worst all of them: (1, micro x length). A token budget
    (`use_dynamic_bsz`: `prepare_dynamic_batch` -> seqlen_balancing.py `rearrange_micro_batches`) splits the ``mini``
    rows into k = ceil(real tokens / budget) micro-batches balanced by Karmarkar-Karp
    (`get_seqlen_balanced_partitions(..., equal_size=False)`), which does not cap a partition: its merge keeps
    the spread between the largest and smallest partition at most the largest sequence, so the largest holds at
    most mean + spread <= budget + length - 1 real tokens (all of them, when k = 1: mini x length). Packed: one
    row of that bound. Padded (no remove-padding) every row keeps the full length and the rows it takes depend on
    the real lengths: taken as full-length sequences, bound // length rows (shorter ones put more padded rows in
    a micro-batch: not an upper bound)."""
    if budget is None:
        return (1, micro * length) if remove_padding else (micro, length)
    bound = min(mini * length, budget + length - 1)
    if remove_padding:
        return 1, bound
    return min(mini, max(1, bound // length)), length


def score_shape(pk, micro: int, mini: int, length: int) -> tuple[int, int]:
    """The score pass's (rows, tokens per row): the larger of verl's log-prob passes, the old log-probs'
    (`compute_log_prob`: rollout.log_prob_*) and a full reference's (`compute_ref_log_prob`: ref.log_prob_*), each
    split by its token budget (`use_dynamic_bsz`) or by its micro-batch size (`data.split(micro_batch_size)`)."""
    shapes = [packed_shape(pk.remove_padding, pk.score_max_tokens, micro, mini, length)] \
        if pk.score_max_tokens is not None else []
    if pk.score_micro_batch_size is not None or not shapes:
        shapes.append(packed_shape(pk.remove_padding, None, pk.score_micro_batch_size or micro, mini, length))
    return max(shapes, key=lambda s: s[0] * s[1])


def resolve(plan: Plan) -> Post | None:
    pt = plan.post_training
    if pt is None:
        return None
    prompt, completion = lengths(pt)
    b = plan.micro_batch_size
    offline = pt.method not in ONLINE
    # KTO's KL rows: a no-grad forward of their own, except OpenRLHF's (post/kto.py)
    rows = b if (pt.method == "kto" and pt.trainer != "openrlhf") or not offline else 2 * b
    length = prompt + completion
    positions = completion + 1 if pt.method in GROUPED and pt.trainer in ("trl", "ms-swift") else length
    ref = reference_source(plan, pt)
    shards = plan.framework == "fsdp" or (plan.framework == "deepspeed" and plan.zero_stage == 3)
    steps = pt.steps_per_generation or plan.gradient_accumulation_steps
    pk, score_rows, score_length = pt.packing, 0, 0
    if pk is not None and not offline:
        rows, length = packed_shape(pk.remove_padding, pk.update_max_tokens, b, b * steps, prompt + completion)
        positions = length        # verl's logits cover every (packed) position: logits_rmpad / output.logits
        score_rows, score_length = score_shape(pk, b, b * steps, prompt + completion)
    critic = reward = None
    if pt.method == "ppo":
        # OpenRLHF's critic and reward model are Ray actor groups of their own (train_ppo_ray.py), unless colocated
        own = RoleModel(placement="own-gpus" if pt.trainer == "openrlhf" else "same-gpus")
        critic = pt.value_model or own
        # verl scores with a rule-based reward function unless reward_model.enable (False in reward_model.yaml,
        # v0.4.1-v0.7.0: ray_trainer.py `use_rm = Role.RewardModel in role_worker_mapping`)
        reward = pt.reward_model or (None if pt.trainer == "verl" else own)
        if pt.trainer == "llamafactory":
            # LLaMA-Factory (train/ppo/workflow.py, trainer.py at ff6d4d1): the policy is TRL's
            # AutoModelForCausalLMWithValueHead, whose value head is the critic (`logits, _, values = model(...)`
            # in batched_forward_pass): no critic model; reward_model_type lora (the default, LoRA only) loads the
            # reward as an adapter on the same base (create_reward_model), full a model of its own
            critic = pt.value_model
            reward = pt.reward_model or (own if plan.method == "full" else None)
    elif pt.reward_model is not None:
        reward = pt.reward_model
    version = version_tuple(pt.trainer_version, NEWEST["trl"])
    fused = pt.trainer == "trl" and version >= FUSED_HEAD_SINCE
    kernel = pt.trainer == "trl" and LOSS_KERNEL_SINCE <= version < FUSED_HEAD_SINCE
    return Post(method=pt.method, trainer=pt.trainer, prompt=prompt, completion=completion,
                generations=default_generations(pt), rows=rows, length=length, logit_positions=positions,
                labelled=completion, fused_head=fused and pt.method != "rm",
                loss_kernel=kernel and pt.method != "rm", torch_kernels=pt.kernels == "torch",
                reference=ref, ref_sharded=ref == "model" and shards, shards_models=shards,
                ref_bytes=reference_bytes(plan, pt),
                policy_load_bytes=load_bytes(plan, pt), gen=_generator(pt), gen_rows=b * steps,
                critic=critic, reward=reward, no_dropout=disables_dropout(pt), rpo_nll=rpo_cross_entropy(pt),
                logits_path=openrlhf_logits(pt),
                temperature_copy=temperature_copy(pt),
                ref_in_step=ref in ("model", "adapter") and reference_in_loss(pt),
                hidden_states=returns_hidden_states(pt),
                ref_unchunked=ref in ("model", "adapter") and reference_unchunked(pt),
                kto_copies=kto_copies(pt, version, fused),
                score_entropy=pt.trainer == "verl" and not offline,
                update_entropy=pt.trainer == "verl" and not offline
                and version_tuple(pt.trainer_version, NEWEST["verl"]) < VERL_ENTROPY_COEFF_ONLY_SINCE,
                offload_before_wake=pt.trainer == "verl"
                and version_tuple(pt.trainer_version, NEWEST["verl"]) >= VERL_SLEEP_LEVEL_SINCE,
                packed=pk is not None and pk.remove_padding, score_rows=score_rows, score_length=score_length)


def kto_copies(pt: PostTraining, version: tuple, fused: bool) -> str:
    """Which KTO logits copies the step makes (post/kto.py): TRL's by release, none from 1.15 (the fused head);
    LLaMA-Factory's; none in ms-swift (per-row sums) or OpenRLHF."""
    if pt.method != "kto" or fused:
        return ""
    return copies_variant(pt.trainer, version)



def openrlhf_logits(pt: PostTraining) -> str:
    """Which of OpenRLHF's log-prob codes its release runs (post/logprobs.py): "16bit" up to v0.5.5 (no cast,
    `F.log_softmax` of the 16-bit logits: dpo_trainer.py `_get_batch_logps`, models/utils.py at 6a13d95 /
    v0.5.5), "fp32-log-softmax" in v0.5.6 - v0.5.x (actor.py `output["logits"].to(torch.float32)`, 86827444),
    "fp32-logsumexp" in v0.6.x (models/utils.py `log_probs_from_logits` at v0.6.0), "" from v0.7.0 (flash-attn's
    `cross_entropy_loss`)."""
    if pt.trainer != "openrlhf":
        return ""
    version = version_tuple(pt.trainer_version, NEWEST["openrlhf"])
    return next((path for until, path in OPENRLHF_LOGITS if version < until), "")


def reference_unchunked(pt: PostTraining) -> bool:
    """TRL 0.19.x GRPO's `_generate_and_score_completions` calls `_get_per_token_logps(self.ref_model |
    self.model, prompt_completion_ids, attention_mask, logits_to_keep)` without `batch_size` (grpo_trainer.py
    v0.19.0 lines 1216-1223, v0.19.1 1224-1231; the old log-probs keep `batch_size`), so `batch_size or
    input_ids.size(0)` is the whole generation batch: per_device_train_batch_size x steps_per_generation rows
    (GRPOConfig: `generation_batch_size`, steps_per_generation defaulting to GA) in one forward. 0.17 passes
    `batch_size`, 0.18 scores in `_compute_loss` (`reference_in_loss`), 0.20 passes `batch_size=batch_size`."""
    lo, hi = GRPO_REF_UNCHUNKED
    return pt.trainer == "trl" and pt.method == "grpo" and lo <= version_tuple(pt.trainer_version, NEWEST["trl"]) < hi


def returns_hidden_states(pt: PostTraining) -> bool:
    """TRL's DPOTrainer 0.19.0-0.28.x sets `model_kwargs["output_hidden_states"] = True` in
    `concatenated_forward` (dpo_trainer.py v0.19.0 line 1482, v0.28.0 1641; absent at v0.18.2 and v0.29.0), for the
    policy and the reference alike (post/logprobs.py `hidden_states_bytes`)."""
    lo, hi = DPO_HIDDEN_STATES
    return pt.trainer == "trl" and pt.method in ("dpo", "ipo") and \
        lo <= version_tuple(pt.trainer_version, NEWEST["trl"]) < hi


def reference_in_loss(pt: PostTraining) -> bool:
    """TRL 0.18.x GRPO scores the reference in `_compute_loss`, after the policy's `_get_per_token_logps` and
    under no_grad, on the update's micro-batch (grpo_trainer.py v0.18.0 lines 1332-1345, v0.18.2 1340-1353), like
    DPO's reference (post/step.py); 0.17 and 0.19 score it in `_generate_and_score_completions`, before the step."""
    lo, hi = GRPO_REF_IN_LOSS
    return pt.trainer == "trl" and pt.method == "grpo" and lo <= version_tuple(pt.trainer_version, NEWEST["trl"]) < hi


def temperature_copy(pt: PostTraining) -> bool:
    """TRL's `_get_per_token_logps` dividing the logits by the temperature out of place (post/logprobs.py):
    GRPO v0.16.0-v0.29.x, the GRPO-style RLOO v0.22.0-v0.29.x (grpo_trainer.py / rloo_trainer.py at those tags);
    in place from v1.0.0 (#5254)."""
    if pt.trainer != "trl" or pt.method not in TEMPERATURE_COPY:
        return False
    return TEMPERATURE_COPY[pt.method] <= version_tuple(pt.trainer_version, NEWEST["trl"]) < TEMPERATURE_IN_PLACE_SINCE


def rpo_cross_entropy(pt: PostTraining) -> bool:
    """Whether DPO runs a cross-entropy of its own over the chosen rows' logits (post/logprobs.py `chosen_nll`):
    TRL's DPOTrainer up to 0.28 with ``rpo_alpha`` (`if self.args.rpo_alpha is not None`: 0.0 counts); ms-swift's
    DPOTrainer up to 3.5.x (`trainer_version`), whose `get_nll_loss(all_logits[:num_examples], ...)` is
    `logits[..., :-1, :].contiguous()` into `nn.CrossEntropyLoss` (swift/trainers/rlhf_trainer/dpo_trainer.py:
    under `if self.args.rpo_alpha is not None` in v3.4.1, unconditional in v3.5.0, gone from v3.6.0, where
    `concatenated_forward` takes the NLL from the per-token log-probs it has, as at 3602360); not LLaMA-Factory's
    `pref_ftx` (`sft_loss = -policy_chosen_logps_avg`). ms-swift's ``rpo_alpha`` left out (null) is its own default:
    `rpo_alpha: float = 1.` in RLHFArguments (swift/llm/argument/rlhf_args.py, v3.0.0 to v3.7.x), `Optional[float] =
    None` from v3.8.0 (8ae0ade71, '[dpo] Update rpo alpha'), so the 3.4.1 guard passes whether or not a value is given
    (a float field: the command line cannot give None), and every 3.x release before 3.6 runs the cross-entropy
    (v3.0.x, before ms-swift had a concatenated_forward of its own, through TRL 0.11's, trl>=0.11,<0.12, whose
    `cross_entropy_loss(all_logits[:len_chosen], ...)` is unconditional: trl/trainer/dpo_trainer.py v0.11.4)."""
    if pt.method != "dpo" and pt.method != "ipo":
        return pt.rpo_alpha is not None and pt.trainer == "trl"
    if pt.trainer == "trl":
        return pt.rpo_alpha is not None
    if pt.trainer != "ms-swift":
        return False
    version = version_tuple(pt.trainer_version, NEWEST["ms-swift"])
    if version >= SWIFT_NLL_FROM_LOGPS_SINCE:
        return False
    return True         # 3.5.x unconditionally; up to 3.4.x `rpo_alpha is not None`, which its default 1. passes
