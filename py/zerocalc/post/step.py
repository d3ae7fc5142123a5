"""The post-training update step: the SFT step's terms (memory/) on the rows and length the method trains on,
with the trainer's log-probability buffers instead of the cross-entropy's logits, plus what post-training keeps
besides the policy (the reference, a reward model, PPO's critic, a colocated vLLM that does not sleep, and the pool
of one that sleeps in the training process, which torch's counters keep: post/generator.py `vllm_pool_bytes`).

- Rows and length (post/defaults.py): DPO's 2·B rows of prompt + completion; GRPO's B completions.
- The reference's forward: TRL's DPO runs it inside `compute_loss`, after the policy's forward and its
  `selective_log_softmax` and before backward (trl/trainer/dpo_trainer.py: `outputs = model(...)`, then
  `with torch.no_grad(): ref_outputs = self.ref_model(...)`); LLaMA-Factory's `get_batch_loss_metrics` calls
  `compute_reference_log_probs` after `concatenated_forward` too. So its logits meet the policy's saved
  activations and logits at the end of forward (`reference_logits`, phase ``fwd``). Online methods score in
  a phase of their own (post/phases.py).
- KTO (post/kto.py): B trained rows; TRL < 1.15's copies of the logits for its metrics (`kto_logit_terms`).
- TRL 0.18.x GRPO (post/defaults.py `reference_in_loss`) scores its reference the same way, inside
  `_compute_loss` after the policy's `_get_per_token_logps`, on the completion's positions: the same term.
  Traced: golden/post/grpo-l1b-*-trl018.json (the reference's fp32 copy and quotient beside the policy's
  saved quotient and activations at the step's peak).
- TRL's fp32 default (post/defaults.py `load_bytes`) reaches the step where nothing casts the model: a LoRA base
  without DeepSpeed stays fp32 (and so does the residual stream it computes, as with
  `prepare_model_for_kbit_training`), as does a DDP reference.
"""
from __future__ import annotations

from dataclasses import replace

from ..memory.activations import activations
from ..memory.inputs import StepInputs
from ..memory.logits import Logits
from ..memory.precision import module_dtypes
from ..memory.terms import ALL, ALLOCATOR, BWD, COUNTED, DRIVER, FWD, FWD_BWD, LOSS_BWD, STEP, Term, gpu, host
from ..plan import Plan
from .defaults import Post
from .fp32out import casts_outputs, no_grad_with_copy, with_copy
from .kto import KTO_METRICS, copies_before_reference, metrics_moment
from .generator import cuda_graph_bytes, sleep_host_bytes, vllm_budget_bytes, vllm_pool_bytes
from .logprobs import (CHOSEN_NLL, chosen_nll, fused_head_buffers, fused_head_no_grad, fused_head_torch, kernel_buffers,
                       hidden_states_bytes, policy_logprob_buffers, reference_chosen_nll, reference_forward_bytes,
                       temperature_copy_bytes, upcast_buffers, value_head_logits,
                       verl_packed_buffers, verl_update_entropy)
from .models import critic_terms, reference_weight_terms, reward_weight_terms, scalar_head_arch, value_head_arch


KEPT_OUTPUT = ("16bit", "fp32-log-softmax")     # OpenRLHF releases whose PPO actor step holds its output


def update_plan(plan: Plan, post: Post | None) -> Plan:
    """The plan whose step is the update step: ``micro_batch_size`` rows of ``seq_len`` tokens; a reward model
    trained as such is the sequence-classification model (its ``arch`` set on the copy); dropout off where the
    trainer disables it."""
    if post is None:
        return plan
    sp = replace(plan, micro_batch_size=post.rows, seq_len=post.length)
    if post.no_dropout:           # disable_dropout (post/defaults.py): the LoRA and the model's dropouts at p = 0
        sp = replace(sp, lora=replace(sp.lora, dropout=0.0))
    arch = plan.arch
    if post.method == "rm":       # LLaMA-Factory: TRL's causal LM with a value head (post/models.py)
        arch = value_head_arch(plan.arch) if post.trainer == "llamafactory" else scalar_head_arch(plan.arch)
    if post.no_dropout and arch.dropout:
        arch = replace(arch, dropout=0.0)
    if arch is not plan.arch:
        sp.__dict__["arch"] = arch      # Plan.arch is a cached_property of the copy
    return sp


def logits_bytes(si: StepInputs) -> int:
    return 2 if si.dt.autocast else si.dt.compute


def policy_buffers(sp: Plan, si: StepInputs, post: Post) -> Logits:
    """The policy's log-prob buffers in the dtype the log-prob code reads (accelerate's fp32 copy where it
    applies, post/fp32out.py; without the copy's own moment)."""
    v, h, c = si.arch.vocab_size, si.arch.hidden_size, logits_bytes(si)
    if casts_outputs(post, si, sp.loss == "chunked"):
        c = 4
    if post.packed:               # verl use_remove_padding: one packed row (post/logprobs.py verl_packed_buffers)
        lg = verl_packed_buffers(post.length, v, c, inplace=not post.update_entropy)
        return verl_update_entropy(lg, 1, post.length, v) if post.update_entropy else lg
    if post.fused_head:
        head_trains = sp.method == "full" or "lm_head" in sp.lora.targets
        return (fused_head_torch(post.rows * (post.length - 1), v, h, c, head_trains) if post.torch_kernels
                else fused_head_buffers(post.rows * post.labelled, v, h, c, head_trains))
    if post.loss_kernel and sp.loss != "chunked" and post.torch_kernels:
        lg = (policy_logprob_buffers(post.trainer, post.rows, post.logit_positions, v, c) if post.online
              else upcast_buffers(post.rows, post.logit_positions, v, c))
    elif post.loss_kernel and sp.loss != "chunked":
        lg = kernel_buffers(post.rows, post.logit_positions, v, c)
    else:
        lg = policy_logprob_buffers(post.trainer, post.rows, post.logit_positions, v, c, fused=sp.loss == "chunked",
                                    path=post.logits_path, keeps_output=post.online)
    if (post.method in CHOSEN_NLL or post.rpo_nll) and post.trainer in ("trl", "ms-swift") and sp.loss != "chunked":
        lg = chosen_nll(lg, post.rows // 2, post.logit_positions, v, c)
    if post.update_entropy:
        lg = verl_update_entropy(lg, post.rows, post.completion, v)
    return lg


def kto_logit_terms(si: StepInputs, post: Post, ref_logits: int, ref_own: int | None) -> list[Term]:
    """KTO's copies of the logits for its metrics (post/kto.py), in the logits' dtype as the loss reads them:
    before TRL 1.9 (and LLaMA-Factory's) alive through the reference's forward, in TRL 1.9-1.14 a moment after
    the loss, as what it holds above the end of forward (the policy's and the reference's terms)."""
    v = si.arch.vocab_size
    c = 4 if post.trainer == "llamafactory" or casts_outputs(post, si, False) else logits_bytes(si)
    n_b = c * post.rows * post.length * v
    if post.kto_copies != "after_loss":
        return [gpu("kto_logits_copies", "logits", copies_before_reference(post.kto_copies, n_b, ref_own), {FWD})]
    kept = n_b if ref_own is not None else 0
    moment = metrics_moment(c, post.rows, post.length, post.completion, v, kept, si.logits.saved)
    extra = moment - si.logits.forward_peak - ref_logits
    return [gpu(KTO_METRICS, "logits", extra, {FWD})] if extra > 0 else []


def update_inputs(sp: Plan, si: StepInputs, post: Post | None) -> StepInputs:
    """The step's inputs with the trainer's log-probability buffers, and TRL's fp32 LoRA base."""
    if post is None:
        return si
    if sp.method == "lora" and sp.framework != "deepspeed" and post.policy_load_bytes == 4 and si.dt.frozen != 4:
        dt = replace(si.dt, frozen=4)
        si = replace(si, dt=dt, frozen_bytes=si.frozen_numel * 4,
                     acts=activations(sp, si.arch, module_dtypes(sp, dt), si.stack))
    if not si.arch.causal_lm:
        return si
    if post.method == "rm":       # LLaMA-Factory's value-head model: its logits, already fp32 for accelerate
        return replace(si, logits=value_head_logits(post.rows, post.length, si.arch.vocab_size, logits_bytes(si)))
    lg = policy_buffers(sp, si, post)
    cast = casts_outputs(post, si, sp.loss == "chunked")
    if cast:
        lg = with_copy(lg, post.rows * post.logit_positions * si.arch.vocab_size)
    if post.temperature_copy and sp.loss != "chunked":     # TRL 0.16-0.29 GRPO: logits / temperature (logprobs.py)
        c = 4 if cast else logits_bytes(si)
        lg = replace(lg, forward_peak=max(lg.forward_peak, temperature_copy_bytes(
            post.rows, post.logit_positions, si.arch.vocab_size, c)))
    return replace(si, logits=lg)


def post_step_terms(plan: Plan, sp: Plan, si: StepInputs, post: Post | None, step_terms: list) -> list[Term]:
    """What the update step holds besides the policy's own terms."""
    if post is None:
        return []
    arch, world = plan.arch, plan.world_size
    out = reference_weight_terms(post.reference, post.ref_sharded, post.ref_bytes, arch, world)
    ref_own = None                # the reference's own no-grad logits moment, where it runs inside the step
    if (not post.online or post.ref_in_step) and post.reference in ("model", "adapter", "cpu") and si.arch.causal_lm:
        v, h, c = arch.vocab_size, arch.hidden_size, logits_bytes(si)
        length = post.logit_positions if post.online else post.length    # TRL 0.18 GRPO: logits_to_keep + 1
        cast = casts_outputs(post, si, sp.loss == "chunked")
        if cast:
            c = 4                 # the reference is prepared too: its logits come back as an fp32 copy
        if post.fused_head and post.torch_kernels:
            ref = fused_head_torch(post.rows * (length - 1), v, h, c, False).forward_peak
        elif post.fused_head:
            ref = fused_head_no_grad(post.rows * post.labelled, v, h, c)
        elif post.loss_kernel and sp.loss != "chunked" and post.torch_kernels:
            ref = upcast_buffers(post.rows, length, v, c).forward_peak
        elif post.loss_kernel and sp.loss != "chunked":
            ref = kernel_buffers(post.rows, length, v, c).forward_peak
        else:
            ref = reference_forward_bytes(post.trainer, post.rows, length, v, c, fused=sp.loss == "chunked",
                                          path=post.logits_path)
            if post.rpo_nll and sp.loss != "chunked":
                ref = reference_chosen_nll(ref, post.rows // 2, length, v, c)
            elif post.logits_path and sp.loss != "chunked":
                # OpenRLHF up to v0.6 (dpo_trainer.py `concatenated_forward` at 6a13d95, v0.5.6, v0.6.0): only the
                # log-probs come back, so the policy's logits die before the reference's forward, which meets
                # what the policy saved (post/logprobs.py)
                ref = max(0, si.logits.saved + ref - si.logits.forward_peak)
        if post.temperature_copy and sp.loss != "chunked":    # its own logits / temperature (logprobs.py)
            ref = max(ref, temperature_copy_bytes(post.rows, length, v, c))
        ref_own = no_grad_with_copy(ref, post.rows * length * v) if cast else ref
        if cast:
            # the policy's L16 died at its copy: the reference meets what the policy's forward ends with
            ref = max(0, policy_buffers(sp, si, post).forward_peak + ref_own - si.logits.forward_peak)
        elif post.fused_head:
            # the policy's tile and running statistics are locals of its head's forward, dead when the
            # reference runs (trl/kernels/chunked_logprob.py): it meets what the policy saved
            ref = max(0, si.logits.saved + ref_own - si.logits.forward_peak)
        if post.hidden_states:    # TRL 0.19-0.28 DPO: output_hidden_states=True (post/logprobs.py)
            residual = post.ref_bytes if post.reference == "model" else si.dt.frozen
            ref += hidden_states_bytes(arch.num_layers, post.rows, length, h, residual, cast)
        out.append(gpu("reference_logits", "logits", ref, {FWD}))
    if post.kto_copies and si.arch.causal_lm and sp.loss != "chunked":
        out += kto_logit_terms(si, post, sum(t.nbytes for t in out if t.name == "reference_logits"), ref_own)
    if post.online and post.logits_path in KEPT_OUTPUT and si.arch.causal_lm and sp.loss != "chunked":
        # OpenRLHF up to v0.5.x: training_step_actor holds the actor's `output` (its logits, 16-bit or the fp32
        # copy) through backward and the optimizer step (post/logprobs.py; the loss-backward moment has it in
        # logits_backward)
        c = logits_bytes(si) if post.logits_path == "16bit" else 4
        kept = c * post.rows * post.logit_positions * arch.vocab_size
        out.append(gpu("actor_output_logits", "logits", kept, (BWD - {LOSS_BWD}) | STEP))
    if post.method == "rm" and si.arch.causal_lm:
        # LLaMA-Factory's ValueHead: nn.Dropout(0.1) on the last hidden state, its mask and output saved for
        # backward (the summary Linear's input), beside the hidden state lm_head saves anyway
        t = post.rows * post.length * arch.hidden_size
        out.append(gpu("value_head_dropout", "activations", (1 + logits_bytes(si)) * t, FWD_BWD))
    out += reward_weight_terms(post.reward, arch, post.ref_bytes, post.shards_models, world,
                               value_head=post.trainer == "llamafactory")
    out += critic_terms(post.critic, arch, step_terms, si.acts.stack_saved)
    g = post.gen
    if g is not None and g.engine == "vllm" and g.mode == "colocate":
        if g.sleep == 0:
            # another process's vLLM (OpenRLHF's Ray actors) holds the GPU outside this process's allocator
            out.append(gpu("vllm_budget", "generator", vllm_budget_bytes(g.utilization, plan.gpu_spec.capacity_bytes),
                           ALL, where=ALLOCATOR if g.in_process else DRIVER))
        elif g.in_process:
            out.append(gpu("vllm_sleeping_pool", "generator",
                           vllm_pool_bytes(g.utilization, plan.gpu_spec.capacity_bytes, arch, g.tp), ALL, where=COUNTED))
        if g.cuda_graphs:
            out.append(gpu("vllm_cuda_graphs", "generator", cuda_graph_bytes(True), ALL, where=DRIVER))
        if sleep_host_bytes(g.sleep, arch, g.tp):
            out.append(host("vllm_sleeping_weights", sleep_host_bytes(g.sleep, arch, g.tp), pinned=True))
    return out
