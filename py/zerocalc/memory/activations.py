"""Activations of the whole model: every block's saved set (memory/blocks.py), checkpointing, the head,
autocast's weight copies and activation offloading.

Traced on the real HF/PEFT training step on fake tensors (docs/tracer.md §3): per block within 0.1 % for
Llama 3.2 1B and Llama 3.1 8B, and within 3 % per component over the whole CI grid (tools/memtrace).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Linear, ModelArch
from ..plan import Plan
from .blocks import FP32_PRODUCT_NORMS, MASK, Ctx, SavedSet, linear, rmsnorm
from .blocks_bart import checkpointed_inputs as bart_checkpointed_inputs, layer_saved_bytes, never_run, outside_blocks
from .blocks_more import checkpointed_more, no_autocast_copy
from .blocks_bert import BERT, head_width as bert_head_width, outside_saved as bert_outside
from .blocks_bert import checkpointed_inputs as bert_checkpointed_inputs
from .blocks_families import EAGER_ONLY, LAYERNORM_HEADS, final_norm
from .blocks_modernbert import modernbert_outside
from .blocks_moe import RULES as FAMILY_RULES
from .blocks_moe import beam_recompute_moment, longcat_consumed
from .blocks_seq2seq import eager_recompute, encoder_decoder
from .ssm_blocks import checkpointed_inputs, ssm_final_norm
from .logits import LITGPT_CHUNK
from .blocks_gemma3n import checkpointed_streams, gemma3n_outside
from .blocks_gemma4 import GEMMA4, checkpointed_kv, gemma4_outside
from .blocks_hyper import hc_backward_moment, hyper_outside, mix_backward_temps
from .blocks_cross import (GATED, cross_layer, cross_layer_bytes, cross_layers_run, cross_shared_bytes, frozen_layers,
                           gated_saved, gated_shared, idle_tensors, skipped_adapter_params, skipped_layers)
from .expert_backward import EVERY_EXPERT, expert_grad_temp, experts_trained, routed_rows
from .blocks_hrm import ONEOFF_HEADS, checkpointed_final_norms
from .quant_inputs import QUANT_COMPUTE_BYTES, quant_inputs_saved
from .blocks_minimax_m3 import MODEL_TYPES as MINIMAX_M3       # MiniMaxM3VLRMSNorm: Gemma's fp32 product
from .blocks_mistral_large4 import checkpointed_topk
from .ernie_vl import rope_cos_sin
from .lora import Adapter, adapter_params, adapters_per_layer, block_linears_per_layer, layer_adapters
from .precision import Dtypes
from .vision import tower_tensors
from .stack import Stack, effective_stack

# GPT-2-lineage blocks (memory/blocks.py's classic block) whose checkpointed stack keeps no embedding output
# besides the block inputs: GPT-Neo's `inputs_embeds + position_embeds` is layer 0's input itself, its
# embed_dropout 0 in every EleutherAI checkpoint (traced: tools/memtrace/golden/families/gpt_neo-*-gc-*)
NO_EMBEDDING_KEPT = ("gpt_neo",)


@dataclass(frozen=True)
class Activations:
    layers: tuple[int, ...]      # saved bytes per layer without checkpointing
    stack_saved: int             # what the stack keeps until backward (checkpointing applied)
    head_saved: int              # final norm + rotary cos/sin (logits are separate: memory/logits.py)
    recompute_layer: int         # one layer's saved set rebuilt during backward (checkpointing)
    layer_backward_temp: int     # the gradient flowing between layers (2·s·b·h in the compute dtype)
    autocast_weight_copies: int  # 16-bit weight copies autocast caches and the matmuls keep for backward
    autocast_cache_forward: int  # copies cached during forward but not kept (checkpointed layers)
    host_offloaded: int          # bytes moved to host by activation offloading
    quant_inputs: int = 0        # bitsandbytes < 0.43.2: every 4-bit layer's input held as a ctx attribute
    expert_grad_top: int = 0     # the top layer's gate_up weight-gradient moment over the saved stack (MoE)

    @property
    def saved_total(self) -> int:
        return self.stack_saved + self.head_saved + self.autocast_weight_copies




def context(plan: Plan, arch: ModelArch, dt: Dtypes, first: bool, stack: Stack) -> Ctx:
    s, b = plan.seq_len, plan.micro_batch_size
    # FSDP1 with LoRA inside the layer units: the frozen weights are views of a flat parameter that requires
    # grad, so autograd saves what full fine-tuning saves (tools/fsdpprobe lit_s3w2_lora)
    train_base = plan.method == "full" or stack.fsdp_adapters_in_units
    return Ctx(tokens=s * b, seq=s, batch=b, e=dt.compute, res=dt.weight if plan.method == "full" else dt.frozen,
               autocast=dt.autocast, train_base=train_base, adapter_bytes=dt.adapter,
               dropout=plan.lora.dropout if plan.method != "full" else 0.0, attention=plan.attention,
               first_layer=first,
               quant_input=QUANT_COMPUTE_BYTES[plan.quantization.compute_dtype] if stack.bnb_keeps_inputs else 0,
               quant_out_as_input=plan.method == "qlora" and plan.quantization.type in ("nf4", "fp4"),
               compiled=stack.compile != "none", fused_gelu=stack.trainer in ("litgpt", "torchtune"),
               kv_expanded=(plan.attention == "sdpa" and stack.loss_path in ("hf445", "hf446"))
               or stack.trainer in ("litgpt", "torchtune"),
               fp32_norm_out=stack.trainer == "torchtune", fused_norm=stack.trainer == "torchtitan",
               own_model=stack.trainer in ("litgpt", "torchtune", "torchtitan"),
               # compiled, SDPA's output and o_proj's contiguous input are two tensors (tools/memtrace/compiled.py)
               attn_out_copied=(plan.attention == "sdpa" and (stack.loss_path == "hf446" or stack.compile != "none"))
               or stack.trainer == "litgpt")


def _head_saved(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack) -> int:
    """Outside the blocks: the final norm, lm_head's input (when lm_head trains), the rotary cos/sin
    (two (1, s, head_dim) tensors in the residual dtype; none under torchtune) and input ids / labels (int64)."""
    if not arch.causal_lm:
        return 0
    c = context(plan, arch, dt, False, stack)
    t, h = c.tokens, arch.hidden_size
    ss = SavedSet()
    ss.save("ids_labels", 16 * t)
    y_bytes = 4 if c.autocast and arch.family not in ("llama", "gemma", "t5") else c.res
    if arch.hyper is not None:
        y, y_bytes = hyper_outside(ss, c, arch), c.res     # memory/blocks_hyper.py: DeepSeek-V4's hyper head
    elif arch.ssm is not None:
        y, y_bytes = ssm_final_norm(ss, c, h, arch.ssm)
    elif arch.model_type in ONEOFF_HEADS:
        y, y_bytes = ONEOFF_HEADS[arch.model_type](ss, c, arch, plan.seq_len)  # memory/blocks_hrm.py, blocks_dory.py
    elif arch.bart is not None:
        # memory/blocks_bart.py: BART-lineage causal decoders; PEFT with checkpointing makes the embedding output
        # require grad (enable_input_require_grads)
        y, y_bytes = outside_blocks(ss, c, arch, plan.method != "full" and plan.activation_checkpointing == "full")
    elif arch.model_type in BERT:
        # memory/blocks_bert.py: the embeddings' LayerNorm and dropout, the BertLMPredictionHead transform, the decoder
        bert_outside(ss, c, arch, _lm_head_adapter(plan, arch),
                     plan.method != "full" and plan.activation_checkpointing == "full")
        return ss.total
    elif arch.family in ("llama", "gemma", "t5"):
        y = (final_norm(ss, c, arch, "resid_final") if arch.model_type in LAYERNORM_HEADS
             else rmsnorm(ss, c, "final_norm", "resid_final", h,
                          # Qwen3NextRMSNorm / Qwen3_5RMSNorm: Gemma's `output * (1.0 + self.weight.float())`
                          arch.family == "gemma" or arch.deltanet is not None
                          or arch.model_type in FP32_PRODUCT_NORMS
                          or arch.model_type in MINIMAX_M3))
        if stack.trainer != "torchtune":
            # torchtune's RoPE multiplies by slices of its fp32 cache buffer, which is all it saves
            # (models/llama3_1/_position_embeddings.py:181-184 Llama3ScaledRoPE.forward; traced)
            # LlamaRotaryEmbedding returns cos/sin .to(x.dtype), x the embedding output: bf16 after TRL's cast
            emb = 2 if stack.kbit_bf16_ends else c.res
            if arch.model_type in FP32_ROPE:
                # modeling_beam.py BeamRotaryEmbedding returns fp32 cos / sin, and NoPE layers' fp32 query scaling
                emb = 4
                ss.save("attention_scaling", 4 * plan.seq_len)
            ss.save("rope_cos_sin", rope_cos_sin(arch, plan.seq_len, plan.micro_batch_size, emb))
            if arch.model_type in GEMMA4:
                gemma4_outside(ss, c, arch, plan.seq_len, emb,    # memory/blocks_gemma4.py
                               plan.activation_checkpointing == "full")
            elif arch.model_type == "gemma3n_text":
                gemma3n_outside(ss, c, arch, plan.seq_len, emb,    # memory/blocks_gemma3n.py
                                plan.activation_checkpointing == "full")
    elif arch.model_type == "moshi":
        y, y_bytes = rmsnorm(ss, c, "final_norm", "resid_final", h, True), c.res    # MoshiRMSNorm (blocks_moshi.py)
    elif arch.model_type == "modernbert-decoder":
        y, y_bytes = modernbert_outside(ss, c, arch, "resid_final")      # memory/blocks_modernbert.py
    else:
        ss.save("ln_f.in", (4 if c.autocast else c.res) * t * h)
        ss.save("ln_f.stats", 4 * t)
        y = "ln_f.out"
        if arch.dropout > 0:
            ss.save("embed_drop_mask", MASK * t * h)
        if head_width(arch) != h and c.train_base:
            # OPT's project_in (word_embed_proj_dim -> hidden) keeps the embedding output for its weight gradient
            # (its project_out's input takes ln_f's place: opt-350m has no final LayerNorm; traced)
            ss.save("project_in.in", (2 if c.autocast else c.res) * t * head_width(arch))
    head_adapter = _lm_head_adapter(plan, arch)
    linear(ss, c, y, y_bytes, Linear("lm_head", head_width(arch), arch.vocab_size), head_adapter)
    if plan.method != "full" and "lm_head" in plan.lora.modules_to_save:
        ss.save(y, y_bytes * t * h)              # the trainable lm_head copy keeps its input for its gradient
    return ss.total


def _lm_head_adapter(plan: Plan, arch: ModelArch) -> Adapter | None:
    if plan.method != "full" and "lm_head" in plan.lora.targets:
        return Adapter("lm_head", head_width(arch), arch.vocab_size, plan.lora.rank)


def head_width(arch: ModelArch) -> int:
    """lm_head's input width: hidden_size, but OPT's word_embed_proj_dim where project_out narrows the stream
    before the head (modeling_opt.py OPTDecoder: facebook/opt-350m's 512 beside hidden 1024; the tied embedding
    is (vocab, 512); traced: tools/memtrace/golden/families opt350-*); the head transform's in the BERT lineage
    (ELECTRA's embedding_size, RemBERT's output_embedding_size: memory/blocks_bert.py head_width)."""
    if arch.model_type in BERT:
        return bert_head_width(arch)
    if arch.model_type == "opt":
        return next((tt.shape[1] for tt in arch.tensors if tt.name.endswith("embed_tokens.weight")),
                    arch.hidden_size)
    return arch.hidden_size
    return None


def selective_op_layer(plan: Plan, arch: ModelArch, dt: Dtypes) -> int:
    """torchtitan's op-level selective checkpointing (torchtitan 0.3.0 distributed/activation_checkpoint.py
    `SelectiveAC._wrap_block`: the outputs of the save set, `compute_intensive_ops` (aten.mm among them) and
    the attention op, are kept, except every second mm of the block, counted per block forward). 0.3.0's
    Llama 3 fuses wq/wk/wv into one `wqkv` (models/llama3/__init__.py `_build_llama3_layers(fuse_qkv=True)`),
    so the block's mms run wqkv, wo, w1, w3, w2 and wqkv (h + 2kv), w1 (I) and w2 (h) are kept; with the
    attention output (h) and its fp32 logsumexp, and the block input the checkpoint wrapper keeps (h):
    2·t·(4h + 2kv + I) + 4·a·t bytes in 16 bits. Traced on fake tensors (tools/memtrace/titan.py,
    titan-l1b-full-selop: 68 MiB per 1B layer at s 2048)."""
    t, e = plan.seq_len * plan.micro_batch_size, dt.compute
    return e * t * (4 * arch.hidden_size + 2 * arch.kv_dim + arch.intermediate_size) + 4 * arch.num_heads * t


def _selective(plan: Plan) -> Plan:
    """Selective recomputation (Korthikanti et al. 2022 §4): the attention core is recomputed, so the
    s² tensors are never kept; the rest of the block is kept as without checkpointing."""
    return plan.with_changes(attention="flash") if plan.attention == "eager" else plan


def activations(plan: Plan, arch: ModelArch, dt: Dtypes, stack: Stack | None = None) -> Activations:
    """The step's activations; ``stack`` is the plan's resolved stack (memory/inputs.py resolves it once)."""
    if arch.model_type in EAGER_ONLY and plan.attention != "eager":
        plan = plan.with_changes(attention="eager")          # the model's class runs nothing else
    st = stack or effective_stack(plan)
    base = _selective(plan) if plan.activation_checkpointing == "selective" else plan
    per_layer_linears = block_linears_per_layer(arch)
    layers = []
    cache: dict = {}
    per_layer_adapters = adapters_per_layer(arch, plan) if plan.method != "full" else [()] * len(per_layer_linears)
    skipped = skipped_layers(arch, plan)         # memory/blocks_cross.py: Mllama's cross-attention, text only
    cross, cross_ss = cross_layers_run(arch, plan), None     # ... or fed image tokens
    frozen = frozen_layers(arch) if plan.method == "full" else frozenset()
    # IDEFICS' gated cross-attention layers, fed images (memory/blocks_cross.py)
    gated_bytes, gated_ss = gated_saved(arch, plan, context(base, arch, dt, False, st), per_layer_linears,
                                        per_layer_adapters)
    gated = frozenset(gated_bytes)
    for i, (lins, adapters) in enumerate(zip(per_layer_linears, per_layer_adapters)):
        if i in skipped:
            layers.append(0)
            continue
        if i in gated:
            # the decoder layer after a trained gated layer: its input needs a gradient, even in layer 0
            trained = plan.method == "full" or any(ad.name.startswith(GATED) for ad in adapters)
            c = context(base, arch, dt, i == 0 and not trained, st)
            if i in frozen:
                c = replace(context(base, arch, dt, False, st), train_base=False)
            layers.append(gated_bytes[i] + layer_saved_bytes(arch, c, lins, adapters))
            continue
        if i in frozen:
            # a block the modelling code froze (IDEFICS' freeze_text_layers) under full fine-tuning: its weights
            # take no gradient, its input does (a trained gated cross-attention layer runs before it)
            c = replace(context(base, arch, dt, False, st), train_base=False)
            layers.append(layer_saved_bytes(arch, c, lins, adapters))
            continue
        if i in cross:
            cross_ss = cross_layer(arch, context(base, arch, dt, i == 0, st), lins, adapters,
                                   plan.vision.tokens_per_sample)
            layers.append(cross_layer_bytes(cross_ss))
            continue
        k = (id(lins), i == 0)
        if k not in cache:
            cache[k] = layer_saved_bytes(arch, context(base, arch, dt, i == 0, st), lins, adapters)
        layers.append(cache[k])
    t = plan.seq_len * plan.micro_batch_size
    h = arch.hidden_size
    res = dt.weight if plan.method == "full" else dt.frozen
    # T5 / BART-layer encoder-decoders: both stacks' blocks and the tensors between them (memory/blocks_seq2seq.py)
    ed = encoder_decoder(arch, context(base, arch, dt, True, st), context(base, arch, dt, False, st),
                         per_layer_linears[0], per_layer_adapters[0], _lm_head_adapter(plan, arch),
                         plan.method != "full" and plan.activation_checkpointing == "full")
    if ed is not None:
        layers = list(ed.layers)
        cache = {(id(lins), False): max(layers) for lins in per_layer_linears}
    # a layer's whole saved set (the recompute's); the loop above computed it unless selective changed the plan
    full_layer = max(cache[(id(lins), False)] if base is plan and (id(lins), False) in cache
                     else layer_saved_bytes(arch, context(plan, arch, dt, False, st), lins,
                                            layer_adapters(arch, plan, lins) if plan.method != "full" else ())
                     for lins in {id(x): x for x in per_layer_linears}.values())
    shared = 0
    if gated_ss is not None:
        shared = gated_shared(plan, gated_ss, len(gated), res * t * h, 2 if dt.autocast else dt.compute)
        full_layer = max(full_layer, max(layers[i] for i in gated))
    if cross_ss is not None:
        shared = cross_shared_bytes(cross_ss, context(base, arch, dt, False, st), plan.vision.tokens_per_sample, h,
                                    plan.activation_checkpointing == "full")
        full_layer = max(full_layer, max(layers[i] for i in cross))
    if plan.activation_checkpointing == "full":
        # HF gradient_checkpointing (non-reentrant): each decoder layer keeps only its input.
        stack = (arch.num_layers - len(skipped)) * res * t * h + (ed.ckpt_extra if ed else 0) + shared
        if arch.hyper is not None:
            # DeepSeek-V4: each layer's input is its (b, s, hc_mult, h) stream (memory/blocks_hyper.py), which
            # attn_hc's product keeps: in the recompute that is the checkpoint's input, not a new tensor
            stack *= arch.hyper["hc_mult"]
            full_layer -= checkpointed_stream(arch, plan, dt)
        if arch.model_type in GEMMA4:
            stack += checkpointed_kv(arch, 2 if dt.autocast else dt.compute, t)
        elif arch.model_type == "gemma3n_text":
            stack = checkpointed_streams(arch, 4 if dt.autocast else res, 2 if dt.autocast else dt.compute, t)
        stack += checkpointed_final_norms(arch, t) + checkpointed_more(arch, context(plan, arch, dt, False, st))
        stack += checkpointed_topk(arch, plan.micro_batch_size, plan.seq_len, res, plan.method != "full")  # DSA, ...
        if st.kbit_bf16_ends:
            # layer 0's input is the bf16 embedding output (TRL's cast); the fp32 stream starts at layer 0's MLP
            stack -= (res - 2) * t * h
        recompute = full_layer
        if plan.attention == "eager":
            # The recompute's peak is the softmax backward: the fp32 softmax output, its fp32 gradient
            # and the softmax-backward output (12·a·s²·b) - the MLP's tensors are already gone (traced).
            flash = layer_saved_bytes(arch, context(plan.with_changes(attention="flash"), arch, dt, False, st),
                                      per_layer_linears[-1], layer_adapters(arch, plan, per_layer_linears[-1])
                                      if plan.method != "full" else ())
            e_r = 2 if dt.autocast else dt.compute      # over UDOP's text + image patches (blocks_vision_seq2seq.py)
            recompute = max(flash, eager_recompute(arch, plan.seq_len, plan.micro_batch_size, e_r, full_layer))
        if arch.moe:
            # the peak of a recomputed MoE layer is inside the experts' backward: the weighted outputs
            # and the down-projection input are consumed, and the gradients of gate/up/product are in
            # flight (3 x the expert width per routed token; traced, mixtral)
            e_m = 2 if dt.autocast else dt.compute
            routed = routed_rows(arch, t)
            # frozen experts keep no product (memory/blocks.py sparse_moe): none to subtract. Under eager attention the
            # recompute is the softmax backward's (above), not traced with MoE: kept as it was
            trained = plan.attention == "eager" or experts_trained(plan, arch, st, per_layer_linears)
            prod = arch.moe.expert_intermediate if trained else 0
            if arch.model_type in EVERY_EXPERT:
                # Llama 4: the non-reentrant checkpoint recomputes at the layer backward's first unpack, after
                # `sum(dim=0)`'s backward has expanded the MoE output's gradient to every expert's rows (a copy,
                # e·E·t·h); the peak is the recomputed down bmm: its output beside it and, with frozen experts,
                # its input (the product) and the scores-weighted input, not saved but alive as Llama4TextMoe's
                # locals (traced: llama4-text-4l-lora-attn-s512-ckpt, 0.297 GiB at the recompute's bmm)
                no_saved = 0 if trained else e_m * routed * (h + arch.moe.expert_intermediate)
                recompute = max(recompute, full_layer + 2 * e_m * routed * h + no_saved)
            elif not arch.moe.zero_experts:
                # (LongCat's expert loop: the recompute's own end, the whole layer, is its moment; traced:
                # longcat-flash-2l-lora-attn-s512-ckpt)
                recompute = recompute - e_m * routed * (h + prod) + 3 * e_m * routed * arch.moe.expert_intermediate
        if plan.attention == "eager" and ed is None:
            # the 4-D (b, 1, s, s) mask is a checkpoint input of every layer (one tensor): bool in the
            # Llama lineage (masking_utils) and MPT (modeling_mpt.py MptModel:
            # `create_causal_mask(...).to(torch.bool)`), additive 16-bit in GPT-2/BERT
            mask_bytes = 1 if arch.family in ("llama", "gemma", "t5") or arch.model_type == "mpt" else 2
            masks = 2 if arch.family == "gemma" else 1          # Gemma: a sliding-window and a global mask
            stack += masks * mask_bytes * plan.seq_len * plan.seq_len * plan.micro_batch_size
        if (arch.family not in ("llama", "gemma", "t5") and arch.model_type not in FAMILY_RULES and ed is None
                and arch.bart is None and arch.model_type not in BERT
                and arch.model_type not in NO_EMBEDDING_KEPT):
            # GPT-2 lineage: the dropped-out embedding output is kept besides the block inputs (traced); not in
            # OPT, GPT-NeoX, GPT-J, Phi, GPT-Neo (tools/memtrace/golden/families/*-gc-*: the block inputs and the
            # head only)
            stack += res * t * h
        if arch.ssm is not None:
            # ssm_blocks.py: residual_in_fp32 keeps fp32 inputs
            stack = checkpointed_inputs(arch, res, t, 2 if dt.autocast else dt.compute)
        elif arch.model_type in BERT and arch.causal_lm:
            stack = bert_checkpointed_inputs(arch, context(plan, arch, dt, False, st))   # memory/blocks_bert.py
        elif arch.bart is not None and ed is None:
            # the layer inputs, fp32 after a LayerNorm under autocast (blocks_bart.py), beside the mask above
            stack += bart_checkpointed_inputs(arch, res, dt.autocast, t) - arch.num_layers * res * t * h
    elif plan.activation_checkpointing == "selective-op":
        stack = arch.num_layers * selective_op_layer(plan, arch, dt)
        recompute = 0
    else:
        stack = sum(layers) + (ed.extra if ed else 0) + shared
        recompute = 0
    head = ed.head if ed else _head_saved(plan, arch, dt, st)
    e = 2 if dt.autocast else dt.compute
    temp = e * t * h
    top_sparse = any(lin.count > 1 for lin in per_layer_linears[-1])
    expert_grad, expert_top = expert_grad_temp(plan, arch, dt, st, t, top_sparse), 0
    if expert_grad:
        # a moment of its own in a layer's backward, at its gate_up grouped matmul: the layer's gate_up output,
        # activation, product and weighted outputs are consumed by then. With checkpointing, inside the
        # recomputed layer (traced: 58 MiB of mixtral-2l-full-s512-ckpt's activations at its peak = two layer
        # inputs + 170 - 120); without, in the top layer with every other layer's saved set alive (220 MiB of
        # mixtral-2l-full-s512's = 2 x 170 - 120)
        moe, e_m = arch.moe, 2 if dt.autocast else dt.compute
        acts = 4 if arch.model_type == "gpt_oss" else 1          # memory/blocks.py sparse_moe
        # Llama 4's experts weight their input, not their output: no weighted outputs (memory/blocks_families.py
        # _llama4_moe)
        out_w = 0 if arch.model_type in EVERY_EXPERT else h
        tail = e_m * routed_rows(arch, t) * ((3 + acts) * moe.expert_intermediate + out_w)
        if arch.model_type == "dbrx":
            # DBRX's moment comes at the second expert its backward visits: one expert's share of the top layer's
            # expert tensors is consumed (memory/blocks_moe.py dbrx_block: 3h + 4I per routed row)
            tail = e_m * routed_rows(arch, t) // moe.num_experts * (4 * moe.expert_intermediate + 3 * h)
        elif moe.zero_experts:
            tail = longcat_consumed(arch, context(plan, arch, dt, False, st), per_layer_linears[-1])
        elif arch.model_type == "jetmoe":
            # JetMoE's, in the MLP's input_linear backward: its output_linear's loop, silu and the product are done
            # (memory/blocks_moe.py jetmoe_block: gate/up, silu, product, output, gated output per routed row)
            tail = e_m * routed_rows(arch, t) * (4 * moe.expert_intermediate + 2 * h)
        if plan.activation_checkpointing == "full":
            recompute = max(recompute, full_layer - tail + expert_grad)
        elif plan.activation_checkpointing == "none":
            expert_top = max(0, expert_grad - tail)
        else:
            temp += expert_grad                                  # selective: not traced with MoE
    if arch.model_type == "beam" and plan.activation_checkpointing == "full":
        # memory/blocks_moe.py beam_recompute_moment: the recompute's own forward peaks at its MLP's end
        recompute = max(recompute, max(beam_recompute_moment(arch, context(plan, arch, dt, False, st), lins,
                                                             layer_adapters(arch, plan, lins)
                                                             if plan.method != "full" else ())
                                       for lins in {id(x): x for x in per_layer_linears}.values()))
    if arch.hyper is not None and plan.activation_checkpointing in ("full", "none"):
        # DeepSeek-V4 (memory/blocks_hyper.py): two moments of a layer's backward, in the recomputed layer or, without
        # checkpointing, in the top layer over the saved stack: the residual mix's backward beside the whole layer
        # (mix_backward_temps) and ffn_hc's norm backward beside the attention half (hc_backward_moment)
        mix = mix_backward_temps(arch, context(plan, arch, dt, False, st))
        if plan.activation_checkpointing == "full":
            recompute = max(recompute, full_layer + mix,
                            max(hc_backward_moment(arch, context(plan, arch, dt, False, st), lins,
                                                   layer_adapters(arch, plan, lins) if plan.method != "full" else ())
                                for lins in {id(x): x for x in per_layer_linears}.values())
                            - checkpointed_stream(arch, plan, dt))
        else:
            c_top = context(plan, arch, dt, arch.num_layers == 1, st)
            expert_top = max(expert_top, mix, hc_backward_moment(arch, c_top, per_layer_linears[-1],
                                                                 per_layer_adapters[-1]) - layers[-1])
    # Autocast caches a 16-bit copy of every fp32 weight a matmul reads (cache_enabled, until forward
    # ends) and the matmul keeps it for the backward: the whole linear stack under AMP (the tied
    # embedding too, as lm_head), or the fp32 LoRA adapters under HF Trainer bf16=True. Checkpointed
    # layers keep nothing: their copies die at forward end and are cast again in the recompute; only
    # lm_head's copy (outside the checkpointed layers) stays saved (traced). A frozen tower keeps none: neither its
    # weights nor its inputs need a gradient (traced: muse-spark-2l-full-mixed).
    copies, hw = 0, head_width(arch)
    idle = {id(tt) for tt in (*idle_tensors(arch, plan), *(tower_tensors(arch) * (plan.vision.trainable == "frozen")))}
    if dt.autocast and plan.method == "full" and dt.weight == 4:
        copies = 2 * sum(tt.numel for tt in arch.tensors if tt.linear and not never_run(arch, tt.module)
                         and id(tt) not in idle and not no_autocast_copy(arch, tt))
        if arch.tied_embeddings and arch.causal_lm:
            copies += 2 * arch.vocab_size * hw
    elif dt.autocast and plan.method != "full" and dt.adapter == 4:
        copies = 2 * (adapter_params(arch, plan) - skipped_adapter_params(per_layer_adapters, skipped))
        if dt.frozen == 4 and plan.method == "lora":
            # fp32 frozen weights (Fabric bf16-mixed): autocast caches only leaves that require grad, so each
            # call casts a new 16-bit copy and the matmul keeps it for its input's gradient; LitGPT's LoRA loop
            # runs lm_head once per 128-position chunk, each chunk with its own copy (traced: lit-l1b-lora-mixed;
            # layer 0's q/k/v input needs no gradient and keeps none, counted anyway: 2·h·(h + 2·kv) bytes)
            calls = -(-plan.seq_len // LITGPT_CHUNK) if st.trainer == "litgpt" else 1
            copies += 2 * sum(tt.numel for tt in arch.tensors if tt.linear and not never_run(arch, tt.module)
                              and id(tt) not in idle)
            copies += 2 * arch.vocab_size * hw * calls if arch.causal_lm else 0
    cache_forward = 0
    if copies and plan.activation_checkpointing == "full":
        kept = 2 * arch.vocab_size * hw if plan.method == "full" and arch.causal_lm else 0
        cache_forward, copies = copies - kept, kept
    quant_inputs = quant_inputs_saved(plan, arch) if st.bnb_keeps_inputs else 0
    if quant_inputs and plan.activation_checkpointing == "full":
        if st.reentrant_checkpointing:
            # reentrant checkpointing runs the layers' forward under no_grad: MatMul4Bit sees no input needing a
            # gradient and keeps nothing (ctx.tensors = (None, None)); the recompute's graph dies with its backward
            quant_inputs = 0
        else:
            # MatMul4Bit keeps A as ctx.tensors, an attribute the non-reentrant checkpoint's saved-tensor hooks
            # never see: the layers keep every 4-bit input (traced: tools/memtrace/golden/stacks, bnb042 rows)
            stack += quant_inputs
    if plan.method == "qlora" and dt.autocast and dt.frozen == 4 and arch.causal_lm and not st.kbit_bf16_ends:
        # kbit_prepare makes lm_head's weight fp32: autocast caches its 16-bit copy and the matmul keeps it (TRL's
        # bf16 cast gives the head back its 16-bit weight, which autocast reads as is)
        copies += 2 * arch.vocab_size * hw
    offloaded = 0
    if plan.activation_offloading:
        # torchtune OffloadActivations: saved tensors stream to host; about two layers stay resident.
        keep = min(stack, 2 * max(layers) if plan.activation_checkpointing != "full" else 2 * res * t * h)
        offloaded, stack = stack - keep, keep
    return Activations(layers=tuple(layers), stack_saved=stack, head_saved=head, recompute_layer=recompute,
                       layer_backward_temp=temp, autocast_weight_copies=copies, expert_grad_top=expert_top,
                       autocast_cache_forward=cache_forward, host_offloaded=offloaded, quant_inputs=quant_inputs)


def checkpointed_stream(arch: ModelArch, plan: Plan, dt: Dtypes) -> int:
    """DeepSeek-V4: one layer's (b, s, hc_mult, h) input stream in the residual dtype (memory/blocks_hyper.py)."""
    res = dt.weight if plan.method == "full" else dt.frozen       # the residual dtype, as the stack's
    return res * plan.seq_len * plan.micro_batch_size * arch.hyper["hc_mult"] * arch.hidden_size


FP32_ROPE = ("beam",)                            # rotary cos / sin kept in fp32 (memory/blocks_moe.py beam_block)
