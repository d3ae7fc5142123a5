"""The per-plan inputs of the aggregator and the terms that do not belong to one subject module.

``step_inputs`` computes everything that does not depend on the number of GPUs (dtypes, what trains, the
frozen base, activations, logits), so the min_gpus search reuses it. ``model_state_terms`` dispatches to
the framework's terms (DeepSpeed, FSDP, DDP, single); ``activation_terms`` and ``recompute_terms`` place the
activation and logits figures in the phases where they are alive.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import ModelArch
from ..plan import Plan
from . import deepspeed as ds
from .activations import Activations, activations
from .blocks_bart import never_run
from .blocks_cross import idle_tensors, skipped_layers
from .blocks_doge import cdmoe_forward_locals
from .blocks_hy_v4 import fp32_head_numel, last_hidden_local
from .blocks_reformer import reversible_backward_moment
from .expert_backward import copies_at_expert_moment
from .head_backward import copies_before_head, head_backward_moment, head_copy_freed
from .frameworks import ddp_terms, fsdp2_reduce_bytes, fsdp_terms, single_terms
from .indexers import no_grad_tensors
from .logits import Logits, chunked_head_grads, logits
from .lora import (adapters_per_block, adapters_per_layer, largest_quantized_matrix, modules_to_save_numel,
                   trl_bf16_numel, qlora_base_bytes, quantized_linear_bytes)
from .precision import Dtypes, dtypes_for, module_dtypes
from .recompute_locals import recompute_forward_moment
from .stack import Stack, effective_stack
from .vision import tower_adapters, tower_saved_bytes, tower_tensors
from .terms import (ALL, BWD_END, FWD_BWD, FWD_IN, FWD_TOP, HEAD_BWD, HEAD_ONLY, HOST_PAGEABLE, RECOMPUTE,
                    RECOMPUTE_TOP, TOP_BWD, TOP_ONLY, Term, gpu)


@dataclass(frozen=True)
class StepInputs:
    """Everything that does not depend on the number of GPUs (reused by the min_gpus search)."""
    arch: ModelArch
    dt: Dtypes
    stack: Stack
    trainable: ds.Trainable
    shapes: tuple                    # (shape, numel) of trainable tensors (optimizer states)
    frozen_bytes: int                # whole frozen base on one GPU
    frozen_numel: int
    all_sizes: tuple                 # module params for ZeRO-3 partitioning (16-bit element units;
                                     # a LoRA plan's frozen base only under DeepSpeed, which alone reads it)
    acts: Activations
    logits: Logits
    dequant: int                     # QLoRA: 16-bit copy of the largest quantized weight


def step_inputs(plan: Plan) -> StepInputs:
    arch = plan.arch
    stack = effective_stack(plan)            # resolved once; every module below is handed it
    dt = dtypes_for(plan, stack)
    # LitGPT's convert_hf_checkpoint gives a tied model its own lm_head (a copy of the embedding)
    head_copy = arch.vocab_size * arch.hidden_size if stack.separate_lm_head else 0
    # memory/blocks_hy_v4.py: an lm_head kept fp32 on a 16-bit base, and so its logits
    fp32_head = fp32_head_numel(arch, plan.framework, dt.weight if plan.method == "full" else dt.frozen)
    head_copy += fp32_head
    tower = tower_tensors(arch)
    if plan.method == "full":
        sizes, shapes = arch.tensor_sizes, arch.tensor_shapes
        frozen_bytes, frozen_numel, frozen_sizes = 0, 0, ()
        # freeze_vision_tower / freeze_multi_modal_projector: the tower stays in the weight dtype, untrained; a
        # BART-lineage causal decoder's never-run cross-attention gets no gradient, so no optimizer state either
        # (torch AdamW skips a parameter whose .grad is None; traced: tools/memtrace/golden/bart/*-full-*)
        idle = list(tower) if tower and plan.vision.trainable == "frozen" else []
        if arch.prophetnet is not None or (arch.bart is not None and (arch.bart["decoder_only"] or
                                                                     arch.bart.get("nllb"))):   # NLLB-MoE: experts 2+
            idle += [t for t in arch.tensors if never_run(arch, t.module)]
        idle += idle_tensors(arch, plan)         # memory/blocks_cross.py: Mllama's skipped cross-attention layers
        idle += no_grad_tensors(arch)            # memory/indexers.py: sparse-attention indexers take no gradient
        if arch.config_frozen:                   # frozen by the modelling code itself (IDEFICS' freeze_text_layers)
            names = set(arch.config_frozen)
            idle += [t for t in arch.tensors if t.name in names]
        if idle:
            idle_ids = {id(t) for t in idle}
            kept = [t for t in arch.tensors if id(t) not in idle_ids]
            sizes, shapes = tuple(t.numel for t in kept), tuple((t.shape, t.numel) for t in kept)
            frozen_numel = sum(t.numel for t in idle)
            frozen_bytes = frozen_numel * dt.weight
            frozen_sizes = tuple(max(1, t.numel * dt.weight // 2) for t in idle)
        if head_copy:
            sizes, shapes = sizes + (head_copy,), shapes + (((arch.vocab_size, arch.hidden_size), head_copy),)
        tr = ds.Trainable(sizes, "weights", "gradients", "optimizer_states")
    else:
        ad_sizes, ad_shapes = [], []
        per_block: dict = {}         # the blocks share a few adapter tuples (dense, MoE): each listed once
        # the adapters of a skipped layer (memory/blocks_cross.py) get no gradient and no optimizer state: held
        # beside the frozen base, in the adapters' dtype
        skipped, idle_adapters = skipped_layers(arch, plan), 0
        for i, ads in enumerate(adapters_per_block(arch, plan)):
            if i in skipped:
                idle_adapters += sum(a.numel for a in ads)
                continue
            if id(ads) not in per_block:
                shapes_b = [(s, n) for a in ads for s, n in (((a.rank, a.d_in), a.rank * a.d_in),
                                                            ((a.d_out, a.rank), a.d_out * a.rank))]
                per_block[id(ads)] = ([n for _, n in shapes_b], shapes_b)
            sizes_b, shapes_b = per_block[id(ads)]
            ad_sizes += sizes_b
            ad_shapes += shapes_b
        if "lm_head" in plan.lora.targets:
            r = plan.lora.rank
            ad_sizes += [r * arch.hidden_size, arch.vocab_size * r]
            ad_shapes += [((r, arch.hidden_size), r * arch.hidden_size), ((arch.vocab_size, r), arch.vocab_size * r)]
        for d_in, d_out in tower_adapters(arch, plan):
            r = plan.lora.rank
            ad_sizes += [r * d_in, d_out * r]
            ad_shapes += [((r, d_in), r * d_in), ((d_out, r), d_out * r)]
        saved = modules_to_save_numel(arch, plan)
        if plan.vision.trainable == "full":
            # the tower and projector trained in full in place, in the adapters' group (dtype and optimizer)
            saved += sum(t.numel for t in tower)
        if saved:
            # trained in full beside the adapters, counted in the adapters' group (their dtype and optimizer)
            ad_sizes.append(saved)
            ad_shapes.append(((saved,), saved))
        tr = ds.Trainable(tuple(ad_sizes), "lora_adapters", "lora_adapters", "lora_adapters")
        shapes = tuple(ad_shapes)
        frozen_numel = arch.total_params + head_copy - (sum(t.numel for t in tower)
                                                        if plan.vision.trainable == "full" else 0)
        if plan.method == "qlora" and stack.trainer == "litgpt" and arch.causal_lm:
            # Fabric's BitsandbytesPrecision converts every nn.Linear, lm_head (LitGPT's own copy of a tied
            # embedding, or the untied head among the kept tensors) included (traced: lit-l1b-qlora)
            head = arch.vocab_size * arch.hidden_size
            kept_head = 0 if head_copy else head
            frozen_bytes = (qlora_base_bytes(arch, plan, dt.frozen) - kept_head * dt.frozen
                            + quantized_linear_bytes(head, arch.vocab_size, plan))
        elif plan.method == "qlora":
            frozen_bytes = qlora_base_bytes(arch, plan, dt.frozen) + head_copy * dt.frozen
            if stack.kbit_bf16_ends:
                # TRL peft_module_casting_to_bf16: the embedding and the head back to 2 B (the norms stay fp32)
                frozen_bytes -= (dt.frozen - 2) * trl_bf16_numel(arch)
        else:
            frozen_bytes = frozen_numel * dt.frozen
        frozen_bytes += idle_adapters * dt.adapter
        if plan.method == "qlora" and plan.vision.trainable == "full":
            frozen_bytes -= sum(t.numel for t in tower) * dt.frozen     # kept in 16-bit, now trained
        # ZeRO-3 partitions the frozen base too; in 16-bit element units (QLoRA's packed storage is
        # kept in a 16-bit quant_storage dtype so DeepSpeed can shard it)
        scale = frozen_bytes / max(1, frozen_numel * 2)
        frozen_sizes = (tuple(max(1, int(t.numel * scale)) for t in arch.tensors) if plan.framework == "deepspeed"
                        else ())
    all_sizes = tuple(tr.sizes) + frozen_sizes
    acts = activations(plan, arch, module_dtypes(plan, dt), stack)
    lg = logits(plan, arch, 4 if fp32_head and not dt.autocast else 2 if dt.autocast else dt.compute, stack)
    largest = largest_quantized_matrix(arch)
    if plan.method == "qlora" and stack.trainer == "litgpt" and arch.causal_lm:
        largest = max(largest, arch.vocab_size * arch.hidden_size)      # the 4-bit lm_head
    dequant = dequant_bytes(plan, dt, stack, largest) if plan.method == "qlora" else 0
    return StepInputs(arch, dt, stack, tr, shapes, frozen_bytes, frozen_numel, all_sizes, acts, lg, dequant)


def dequant_bytes(plan: Plan, dt, stack: Stack, n: int) -> int:
    """The transient of dequantizing the largest quantized weight (n elements) for one matmul. bitsandbytes'
    MatMul4Bit: one weight in the compute dtype. torchao 0.10.0's NF4Tensor (torchtune QLoRA)
    `get_original_weight`: two int64 code tensors of n/2 ((data >> 4).to(long), data & 0b1111), the bf16
    dequantized halves and their scaled copies, and torch.stack's output, with the block scalers' dequantization
    (3 B per 64 elements, 2 B per 16,384 for the second-level factors): 14·n + 3·n/64 + n/8192 bytes at the
    stack op (traced: 235,669,504 B for 2048 x 8192, tools/memtrace/golden/stacks tt-l1b-qlora-s128-chunked)."""
    if stack.trainer == "torchtune" and plan.quantization.type == "nf4" and stack.compile == "none":
        # compiled (not traced), inductor fuses the decode's pointwise chain into the kernel that writes the
        # bf16 weight: one bf16 copy is assumed, as for bitsandbytes
        return 14 * n + 3 * n // 64 + n // 8192
    return dt.compute * n


def dequant_phases(plan: Plan, stack: Stack) -> frozenset:
    """When the QLoRA dequantization transient is alive. LitGPT: from the end of forward (the 4-bit lm_head
    per chunk) to the end of backward. torchtune's torchao NF4 (uncompiled): torchao/dtypes/nf4tensor.py
    `linear_nf4` runs `F.linear(input, weight.to(input.dtype))` in LinearNF4's forward and again in its backward;
    NF4Tensor's `_to_copy` dispatch calls `get_original_weight`, whose intermediates (dequant_bytes) all exist at
    its torch.stack: inside the top layer's forward too, beside every layer's saved activations and before the
    logits (traced: the peak at op stack in forward, tools/memtrace/golden/stacks tt-l1b-qlora-s128-chunked).
    Elsewhere (bitsandbytes' MatMul4Bit, not traced in forward as a peak) the backward and the recomputes."""
    if stack.trainer == "litgpt":
        return FWD_BWD
    if stack.trainer == "torchtune" and plan.quantization.type == "nf4" and stack.compile == "none":
        return BWD_END | {FWD_TOP}
    return BWD_END


# model_type -> how many sinusoidal position buffers it registers (one per stack; model_buffer_terms)
# an encoder-decoder's blocks (T5's encoder.block.N, BART's model.decoder.layers.N)
_STACK_BLOCK = re.compile(r"\.(encoder|decoder)\.(?:block|layers)\.([0-9]+)$")
SINUSOIDAL_BUFFERS = {"xglm": 1, "m2m_100": 2, "nllb-moe": 2, "seamless_m4t": 2, "seamless_m4t_v2": 2}
# the (max_positions, max_positions) causal masks a model registers as non-persistent buffers (moved to the GPU with
# the model): (per layer or once, bytes per element; 0: the weights' dtype, `torch.ones` made under the load dtype).
# One bool mask per attention layer in modeling_gpt_neo.py GPTNeoSelfAttention.__init__ (`self.bias =
# nn.Buffer(tril(ones(..., dtype=bool)))`, the local layers' windowed), one per model in modeling_gpt_bigcode.py
# GPTBigCodeModel.__init__, a float one per layer in modeling_openai.py Attention.__init__ (traced: 4 MiB each at 2048
# bool positions, 2 MiB at 1024 bf16 ones, tools/memtrace/golden/families gpt_neo-*, bigcode-*, openai-*)
CAUSAL_MASK_BUFFERS = {"gpt_neo": ("layer", 1), "gpt_bigcode": ("model", 1), "openai-gpt": ("layer", 0)}


def model_buffer_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Model buffers worth counting: torchtune's rotary cache, (max_seq_len, head_dim / 2, 2) fp32 cos/sin built
    for the builder's max_seq_len (the Llama builders pass the HF config's max_position_embeddings) and
    registered once per model (torchtune/models/llama3_1/_position_embeddings.py Llama3ScaledRoPE
    build_rope_cache; traced: 32 MiB for Llama 3.2 1B, tools/memtrace/golden/stacks/tt-l1b-*); torchtitan
    0.3.0's, one per attention layer, (seq_len, head_dim / 2) complex64 sized to `training.seq_len` by
    `update_from_config` (traced: 8 MiB for 1B at s 2048, titan-l1b-*). HF's inv_freq buffers are a few
    hundred bytes. GPT-Neo's and GPT-BigCode's causal-mask buffers (CAUSAL_MASK_BUFFERS). MiniMax's lightning
    attention layers (modeling_minimax.py MiniMaxLightningAttention.__init__)
    each register slope_rate (a), query_decay and key_decay (a·B) and diagonal_decay (a·B²) for a heads and
    block_size B, in the weights' dtype (traced: 3 MiB for the two layers of tools/memtrace/families.py minimax
    in fp32). XGLM's and M2M100's positions (modeling_xglm.py XGLMSinusoidalPositionalEmbedding.make_weights,
    modeling_m2m_100.py M2M100SinusoidalPositionalEmbedding, copied by NLLB-MoE and SeamlessM4T(v2)) are a
    (max_position_embeddings + 2) x d_model `weights` buffer (persistent=False) in each stack, cast with the model
    (traced: 8 MiB at 2048 positions and d_model 1024 in fp32, tools/memtrace/golden/bart/xglm-*; two of 1 MiB in
    bf16, golden/seq2seq/m2m-*, m4t-*)."""
    a = si.arch
    if a.model_type in SINUSOIDAL_BUFFERS and a.bart is not None:
        wbytes = si.dt.weight if plan.method == "full" else si.dt.frozen
        n = SINUSOIDAL_BUFFERS[a.model_type]
        return [gpu("sinusoidal_positions", "buffers", n * wbytes * (a.max_positions + 2) * a.hidden_size, ALL)]
    if a.model_type in CAUSAL_MASK_BUFFERS and a.max_positions:
        where, nbytes = CAUSAL_MASK_BUFFERS[a.model_type]
        n = a.num_layers if where == "layer" else 1
        nbytes = nbytes or (si.dt.weight if plan.method == "full" else si.dt.frozen)
        return [gpu("causal_mask", "buffers", n * nbytes * a.max_positions * a.max_positions, ALL)]
    if a.model_type == "ctrl" and a.max_positions:
        # modeling_ctrl.py CTRLModel.__init__: pos_encoding = positional_encoding(n_positions, n_embd, torch.float),
        # a non-persistent fp32 buffer (forward's `.to(inputs_embeds.dtype)` copy replaces it; traced: 3 MiB at
        # 1024 x 768, tools/memtrace/golden/families ctrl-*)
        return [gpu("pos_encoding", "buffers", 4 * a.max_positions * a.hidden_size, ALL)]
    if a.lightning is not None:
        n = sum(1 for lins in a.layer_linears or () if any(lin.name == "output_gate" for lin in lins))
        blk = a.lightning["block_size"]
        wbytes = si.dt.weight if plan.method == "full" else si.dt.frozen
        return [gpu("lightning_decay", "buffers", n * wbytes * a.num_heads * (1 + 2 * blk + blk * blk), ALL)]
    if a.family != "llama":
        return []
    if si.stack.trainer == "torchtune" and a.max_positions:
        return [gpu("rope_cache", "buffers", 4 * a.max_positions * a.head_dim, ALL)]
    if si.stack.trainer == "torchtitan":
        return [gpu("rope_cache", "buffers", a.num_layers * 4 * plan.seq_len * a.head_dim, ALL)]
    return []


def model_state_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Weights, gradients, optimizer states, the framework's and the model's buffers of the busiest rank."""
    return framework_state_terms(plan, si) + model_buffer_terms(plan, si)


def framework_state_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Weights, gradients, optimizer states and buffers as the framework (DeepSpeed, FSDP, DDP, one process)
    holds them."""
    dt, tr = si.dt, si.trainable
    gas = plan.gradient_accumulation_steps
    wbytes = dt.weight if plan.method == "full" else dt.adapter
    gbytes = dt.grad if plan.method == "full" else dt.adapter     # adapter gradients in the adapters' dtype
    if plan.framework == "deepspeed":
        frozen = si.frozen_bytes if plan.zero_stage < 3 else 0
        return ds.zero_terms(plan, si.arch, tr, frozen, si.all_sizes, wbytes, gas, dt.master or 4, dt.state)
    sbytes = dt.state if plan.method == "full" else max(dt.state, dt.adapter)
    impl = si.stack.optimizer_impl
    if plan.framework == "fsdp":
        return fsdp_terms(plan, si.arch, tr, si.frozen_numel, si.frozen_bytes, wbytes, gbytes, sbytes,
                          2 if dt.autocast else dt.compute, gas, impl, si.stack.fsdp_version,
                          keep_last_block=si.stack.trainer == "torchtitan", no_sync=si.stack.fsdp_no_sync,
                          adapters_in_units=si.stack.fsdp_adapters_in_units,
                          loss_outside=si.stack.trainer in ("torchtune", "torchtitan"),
                          reduce_bytes=fsdp2_reduce_bytes(plan, si.stack.trainer),
                          embedding_units=si.stack.fsdp_embedding_units)
    fn = ddp_terms if plan.framework == "ddp" else single_terms
    return fn(plan, si.arch, tr, si.shapes, si.frozen_bytes, wbytes, gbytes, sbytes, gas, impl, si.stack.grads_kept)


def activation_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Saved activations (kept to their layer's backward), the head's, logits, backward temporaries."""
    a, lg = si.acts, si.logits
    t = [
        gpu("saved_activations", "activations", a.stack_saved, FWD_IN | {"loss_bwd", HEAD_BWD} | TOP_BWD),
        gpu("head_activations", "activations", a.head_saved, {"fwd", "loss_bwd", HEAD_BWD}),
        gpu("logits_forward", "logits", lg.forward_peak, {"fwd"}),
        gpu("logits_backward", "logits", lg.backward_peak, {"loss_bwd"}),
        gpu("head_chunk_grads", "gradients", chunked_head_grads(plan, si.arch, 2 if si.dt.autocast else si.dt.compute,
                                                                si.dt.grad, si.stack), {"loss_bwd"}),
    ]
    if a.quant_inputs and si.stack.loop_keeps_output:
        # the previous step's out.loss keeps its graph, and so bitsandbytes' ctx-held inputs, until the next
        # forward returns (traced: tools/memtrace/golden/stacks l1b-qlora-mixed-bnb042-custom)
        t.append(gpu("previous_step_quant_inputs", "activations", a.quant_inputs, FWD_IN))
    tower = tower_saved_bytes(plan, si.arch, 2 if si.dt.autocast else si.dt.compute)
    if tower:
        # the tower runs first, so its saved tensors live until the very end of backward
        t.append(gpu("vision_activations", "activations", tower, FWD_BWD))
    if lg.kept_by_loop:
        # the model output the loop still references: this step's from the loss on, the previous step's
        # during the next forward (rebound only when that forward returns)
        t.append(gpu("logits_kept_by_loop", "logits", lg.kept_by_loop, ALL))
    if a.expert_grad_top:
        # MoE without checkpointing, gradients accumulated: the top layer's gate_up weight-gradient moment
        # (memory/expert_backward.py expert_grad_temp), beside every saved activation
        t.append(gpu("moe_top_weight_grad", "activations", a.expert_grad_top, TOP_ONLY))
    # the gradients in flight inside the layer being back-propagated (the last one is layer 0)
    t.append(gpu("layer_backward_temps", "activations", a.layer_backward_temp, BWD_END))
    if si.arch.model_type == "reformer":
        # the reversible layers' recompute inside backward (memory/blocks_reformer.py), a moment of its own, of which
        # the gradient between layers above is part
        moment = reversible_backward_moment(si.arch, plan.micro_batch_size, plan.seq_len)
        t.append(gpu("reversible_recompute", "activations", max(0, moment - a.layer_backward_temp), TOP_ONLY))
    e, ckpt = 2 if si.dt.autocast else si.dt.compute, plan.activation_checkpointing == "full"
    full_fp32 = plan.method == "full" and si.dt.autocast and si.dt.weight == 4
    cdmoe = cdmoe_forward_locals(si.arch, full_fp32, e, plan.seq_len * plan.micro_batch_size)
    if cdmoe:              # memory/blocks_doge.py: at a CDMoE layer's forward end (the top one's, or the recomputed)
        t.append(gpu("cdmoe_forward_locals", "activations", cdmoe, {RECOMPUTE, RECOMPUTE_TOP} if ckpt else {FWD_TOP}))
    last = last_hidden_local(si.arch, full_fp32, plan.seq_len * plan.micro_batch_size)    # memory/blocks_hy_v4.py
    if last:
        t.append(gpu("last_hidden_local", "activations", last, {"fwd"}))
    if a.autocast_weight_copies:
        # inside the top layer's forward (a CDMoE's moment) lm_head's copy is not cast yet: it is cast at the head;
        # inside its cast's backward (bf16-mixed Llama-likes, memory/head_backward.py) it is freed
        split = bool(cdmoe) and not ckpt and full_fp32
        freed = head_copy_freed(plan, si.arch, si.dt, si.stack)
        t.append(gpu("autocast_weight_copies", "activations", a.autocast_weight_copies,
                     {"fwd", "loss_bwd"} | (set() if freed else {HEAD_BWD}) | (set() if split else {FWD_TOP})))
        if freed:
            t.append(gpu("autocast_weight_copies_head", "activations",
                         copies_before_head(si.arch, a.autocast_weight_copies), HEAD_ONLY))
        if split:
            t.append(gpu("autocast_weight_copies_fwd_top", "activations",
                         copies_before_head(si.arch, a.autocast_weight_copies), {FWD_TOP}))
    head_logits, head_grads = head_backward_moment(plan, si.arch, si.dt, si.stack)     # memory/head_backward.py
    if head_grads:
        t += [gpu("head_backward_logits", "logits", head_logits, HEAD_ONLY),
              gpu("head_backward_grads", "activations", head_grads, HEAD_ONLY)]
    if a.autocast_weight_copies and a.expert_grad_top:   # at the experts' moment (memory/expert_backward.py)
        top = copies_at_expert_moment(si.arch, a.autocast_weight_copies)
        t.append(gpu("autocast_weight_copies_top", "activations", top, TOP_ONLY))
    if a.autocast_cache_forward:
        # cached until the autocast context exits at the end of forward, not kept by checkpointed layers
        t.append(gpu("autocast_cache_forward", "activations", a.autocast_cache_forward, FWD_IN))
    if si.dequant:
        # one dequantized weight exists only inside a layer's forward, backward or recompute; LitGPT's 4-bit
        # lm_head is dequantized for each 128-position chunk at the very end of forward, and for the loss's backward
        t.append(gpu("qlora_dequant_buffer", "activations", si.dequant, dequant_phases(plan, si.stack)))
    if a.host_offloaded:
        t.append(gpu("offloaded_activations", "activations", a.host_offloaded, where=HOST_PAGEABLE))
    return t


def decoder_bottom_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """An encoder-decoder's decoder layer 0 is recomputed (the encoder's layers run after it) once every later
    decoder layer's gradients exist and their checkpoint inputs are gone: where those gradients outweigh the
    inputs, that moment, not the top layer's, is the decoder stack's highest (traced: a t5-base layout, 12 + 12
    blocks, s 1024, b 4, full bf16 checkpointed: the peak in decoder layer 0's recompute beside layers 1-11's
    gradients; udop-full-pure-eager-gc). Kept in recompute_top, as the gradients and the freed inputs. T5's layer 0
    also recomputes the stack's relative position bias (the int64 (s, s) bucket ids, the (s, s, heads) bias and
    the cross-attention's zero bias, heads x s x s_kv), while the gradients of the two biases handed to every layer
    and of the encoder output accumulate (traced, the t5-base row: 56 + 54 MiB)."""
    blocks = {x.block: m.groups() for x in si.arch.tensors if x.block and (m := _STACK_BLOCK.search("." + x.block))}
    later = {b for b, (side, i) in blocks.items() if side == "decoder" and i != "0"}
    if not later or all(side == "decoder" for side, _ in blocks.values()):
        return []
    grads = si.dt.grad * sum(x.numel for x in si.arch.tensors if x.block in later)
    s, b, h, a = plan.seq_len, plan.micro_batch_size, si.arch.hidden_size, si.arch.num_heads
    inputs = len(later) * si.dt.weight * s * b * h
    bias, e, kv = 0, 2 if si.dt.autocast else si.dt.compute, s + si.arch.image_patches
    if si.arch.family == "t5" and si.arch.model_type != "umt5":   # UMT5: a bias in every layer, none handed on
        bias = 8 * s * s + e * a * s * (s + kv) + e * a * s * (s + kv) + e * kv * b * h
    if grads + bias <= inputs:
        return []
    return [gpu("later_decoder_grads", "gradients", grads, {RECOMPUTE_TOP}),
            gpu("later_decoder_inputs_freed", "activations", bias - inputs, {RECOMPUTE_TOP})]


def recompute_terms(plan: Plan, si: StepInputs) -> list[Term]:
    """Full checkpointing: during backward each layer is recomputed and back-propagated in turn,
    on top of nearly all gradients (the end-of-backward state)."""
    a, arch = si.acts, si.arch
    if plan.activation_checkpointing != "full":
        return []
    t = [gpu("recomputed_layer", "activations", a.recompute_layer, {RECOMPUTE, RECOMPUTE_TOP})]
    adapted = () if plan.method == "full" else tuple(ad.name for ad in adapters_per_layer(arch, plan)[-1])
    fwd = recompute_forward_moment(arch, a.layers[-1], plan.micro_batch_size, plan.seq_len,
                                   2 if si.dt.autocast else si.dt.compute, plan.method == "full", si.dt.adapter,
                                   adapted)
    if fwd > a.recompute_layer:        # memory/recompute_locals.py: the top layer's recompute forward, beyond it
        t.append(gpu("recompute_forward_locals", "activations", fwd - a.recompute_layer, {RECOMPUTE_TOP}))
    # gradients kept from the previous step (torch 1.x zero_grad) or from earlier micro-steps (accumulating)
    # exist whole at every recompute already (single_terms)
    replicated = (plan.framework in ("single", "ddp") and not si.stack.grads_kept
                  and plan.gradient_accumulation_steps == 1)
    if replicated and plan.method == "full":
        # at the top layer's recompute only the head's gradients exist (lm_head, final norm)
        head = arch.numel_where(outside_blocks=True, components=("lm_head", "norm"))
        if arch.tied_embeddings:
            head += arch.vocab_size * arch.hidden_size
        t.append(gpu("grads_at_top_recompute", "gradients", si.dt.grad * head, {RECOMPUTE_TOP}))
        t += decoder_bottom_terms(plan, si)
    if replicated and plan.method == "full" and not plan.optimizer_in_backward:
        # the last recompute (layer 0) runs before layer 0's and the embedding's gradients exist
        first = arch.numel_where(layer=0, exclude=("embedding",))
        emb = arch.numel_where(components=("embedding",))
        if arch.tied_embeddings and arch.causal_lm:
            emb -= arch.vocab_size * arch.hidden_size     # lm_head's gradient (the tied weight's) exists
        t.append(gpu("grads_not_yet_produced", "gradients", -si.dt.grad * (first + emb), {RECOMPUTE}))
    return t
