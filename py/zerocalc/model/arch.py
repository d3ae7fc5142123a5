"""The model as the engine sees it: every parameter tensor, in `model.parameters()` order, with its
component, owning module and block index, and the linears LoRA can target.

From the tensor inventory everything else is derived: the parameter count by component (equal to
`computed_total` of validation/reference/models.json for every preset: transformers 5.24 modules on the
meta device, tied lm_head counted once), the largest tensor and module (DeepSpeed's bucket and ZeRO-3
fetch terms), FSDP's wrap units (one per block), persistent small parameters (ZeRO-3), and the matrices
bitsandbytes quantizes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

# a decoder block with cross-attention, and an encoder block (T5's block / BART's layers naming)
_DECODER_BLOCK = re.compile(r"(?:^|[._])decoder\.(?:block|layers)\.(\d+)\.(?:EncDecAttention|encoder_attn|cross_attention)")
_ENCODER_BLOCK = re.compile(r"(?:^|[._])encoder\.(?:block|layers)\.(\d+)\.")


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor."""
    name: str          # HF-style path, e.g. "layers.3.self_attn.q_proj.weight"
    numel: int
    component: str     # embedding, attention, mlp, routed_experts, shared_experts, router, norm, lm_head, other
    module: str        # owning module path (ZeRO-3 gathers per module)
    linear: str = ""   # leaf linear name LoRA can target ("q_proj"), or "" when not a 2-D linear weight
    shape: tuple = ()  # (rows, cols) for matrices, (E, rows, cols) for fused experts; () for vectors
    block: str = ""    # the numbered block holding it ("model.layers.3"), "" outside the blocks
    layer: int | None = None   # that block's index in its stack (T5: within the encoder or the decoder)


@dataclass(frozen=True)
class Linear:
    """A linear layer inside one block: LoRA and QLoRA work on these."""
    name: str
    d_in: int
    d_out: int
    count: int = 1     # identical linears in the block (fused MoE experts count E)


@dataclass(frozen=True)
class MoE:
    num_experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_intermediate: int     # 0 when there is no shared expert
    dense_layers: int            # leading layers with a dense MLP (DeepSeek first_k_dense_replace)
    # how the router reads its input: "" as it is; "cast": F.linear(x.type(float32), w.type(float32)) inside
    # autocast's region (DeepSeek-V2/V3, GLM-4.5, dots1 ...); "forced": the same with autocast disabled (ERNIE 4.5)
    router_fp32: str = ""
    # zero-compute (identity) experts beside the routed ones (LongCat-Flash zero_expert_num): routed slots they take
    # run no MLP (memory/blocks_moe.py longcat_block)
    zero_experts: int = 0


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    family: str                   # activation profile: "llama", "gemma", "gpt2", "bert", "neox", "t5", ...
    hidden_size: int
    num_layers: int               # decoder layers (for T5: encoder + decoder blocks)
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    max_positions: int | None
    gated_mlp: bool
    norm: str                     # "rmsnorm" or "layernorm"
    norms_per_layer: int
    qk_norm: str                  # "", "head" (per head_dim) or "full" (OLMo 2: over the projection)
    causal_lm: bool               # has a language-model head and a next-token loss
    moe: MoE | None
    mla: Mapping | None
    attn_softcap: bool            # Gemma 2: tanh soft-capping of the attention scores (eager path)
    final_softcap: bool           # Gemma 2: tanh soft-capping of the logits
    dropout: float                # config dropout on attention/residual (GPT-2, BERT: 0.1)
    tensors: tuple[Tensor, ...]
    block_linears: tuple[Linear, ...]   # the linears of one (MoE, if any) decoder block
    dense_block_linears: tuple[Linear, ...]  # the linears of a dense block (MoE models' first layers)
    # "exact": the parameter count equals transformers' on the meta device (tests/test_architectures.py);
    # otherwise why not (Extension 8 `model_support`)
    support: str = "exact"
    # the vision tower's activation shape (composite.tower_spec) where its activations are modelled, else None
    tower: Mapping | None = None
    # a Mamba-2 mixer's dims (model/ssm.py mamba2_dims) where memory/ssm_blocks.py models its activations
    ssm: Mapping | None = None
    # a BART-lineage causal decoder's layer switches (model/decoders.py layer_switches) where memory/blocks_bart.py
    # models its activations: post_ln, emb_ln, final_ln, act, act_dropout, attn_dropout
    bart: Mapping | None = None
    # each decoder layer's linears, in order, where the layers differ in kind or shape (hybrid linear attention:
    # model/hybrid.py, layers of one kind sharing one tuple; Gemma 4: per-layer head_dim, K/V reused from an earlier
    # layer, double-wide MLPs, per-layer input gates); None: ``block_linears`` (and ``dense_block_linears`` for MoE
    # models' first layers) for every layer (memory/lora.py block_linears_per_layer)
    layer_linears: tuple | None = None
    # a Gated DeltaNet's dims (model/hybrid.py deltanet_dims: key, value, nk, nv) where memory/deltanet.py models it
    deltanet: Mapping | None = None
    # MiniMax's lightning attention layers (model/hybrid.py lightning_attention): {"block_size": ...} where
    # memory/blocks_lightning.py costs them, else None
    lightning: Mapping | None = None
    # Switch Transformers' sparse feed-forwards (model/classic.py t5): {"experts", "capacity", "jitter", "sparse": one
    # bool per block, the encoder's then the decoder's} where memory/blocks_seq2seq.py costs their routing, else None
    switch: Mapping | None = None
    # T5Gemma's stacks (model/t5gemma.py): {"encoder_layers": n} where memory/blocks_seq2seq.py costs the encoder and the
    # decoder (with its cross-attention) as Gemma 2 layers, else None
    t5gemma: Mapping | None = None
    # DeepSeek-V4's block dims (model/deepseek_v4.py hyper_dims: hc_mult, sinkhorn iterations, q / o ranks, rope
    # and indexer dims, compress rates) where memory/blocks_hyper.py costs its hyper-connected layers, else None
    hyper: Mapping | None = None
    # decoder layers that attend to image tokens only (Mllama's cross_attention_layers: model/vision_mllama.py),
    # skipped by a step fed no images (memory/blocks_cross.py)
    image_cross_layers: tuple[int, ...] = ()
    # decoder layers an IDEFICS gated cross-attention layer runs before (model/vision_idefics.py), over the vision
    # states beside the text (vision.tokens_per_sample; memory/blocks_cross.py gated_layer)
    gated_cross_layers: tuple[int, ...] = ()
    # tensors the modelling code itself freezes when it builds the model, whatever the plan's method (IDEFICS:
    # IdeficsModel.freeze_relevant_params, model/vision_idefics.py): no gradient or optimizer state under full
    config_frozen: tuple[str, ...] = ()
    # a looped nGPT stack's shape (model/dory.py: {"loops": n_recurrent_loops}) where memory/blocks_dory.py costs
    # its layers and the model.norm calls between the loops, else None
    looped: Mapping | None = None
    # tokens the model itself prepends to every sequence, run by every layer and dropped before the head (CPM-Ant's
    # prompt_length: model/classic_more.py cpmant; memory/blocks_cpmant.py), else 0
    prompt_tokens: int = 0
    # a composite's second input, its tokens a sample: π0's action chunk (model/pi0.py chunk_size; the action expert
    # runs chunk_size + 1 suffix tokens, memory/blocks_pi0.py), Evolla's protein tokens (model/evolla.py), else 0
    side_tokens: int = 0
    # Inkling 2 / 2 Loop's layer layout (model/inkling2.py: each layer's attention shape and how many block states
    # its attention_input / mlp_input read) where memory/blocks_inkling2.py costs its layers, else None
    inkling2: Mapping | None = None
    # ProphetNet's decoder (model/classic_more.py prophetnet: {"ngram", "buckets", "attn_dropout", "act_dropout"}):
    # its layers run the main and ngram predicting streams (memory/blocks_prophetnet.py), lm_head the ngram ones
    prophetnet: Mapping | None = None
    # Kosmos-2 / 2.5's text decoder switches (model/kosmos.py: inner_ln, attn_dropout, act_dropout, image_tokens,
    # segment) where memory/blocks_kosmos.py costs its layers and what the step keeps around them, else None
    kosmos: Mapping | None = None
    # image patch embeddings an encoder appends to its text tokens, a sample (UDOP: (image_size / patch_size)²,
    # model/udop.py; memory/blocks_vision_seq2seq.py), else 0
    image_patches: int = 0
    # a model's own attention / activation switches, read by its rule (memory/blocks_big_bird.py: BigBird's
    # attention_type, block_size, num_random_blocks, hidden_act), else None
    own: Mapping | None = None

    @cached_property
    def total_params(self) -> int:
        return sum(t.numel for t in self.tensors)

    def params_by_component(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.component] = out.get(t.component, 0) + t.numel
        return out

    @cached_property
    def largest_tensor(self) -> int:
        return max(t.numel for t in self.tensors)

    def module_sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.module] = out.get(t.module, 0) + t.numel
        return out

    @cached_property
    def largest_module(self) -> int:
        return max(self.module_sizes().values())

    @cached_property
    def tensor_sizes(self) -> tuple[int, ...]:
        return tuple(t.numel for t in self.tensors)

    @cached_property
    def tensor_shapes(self) -> tuple[tuple[tuple, int], ...]:
        return tuple((t.shape, t.numel) for t in self.tensors)

    @cached_property
    def encoder_decoder_blocks(self) -> tuple[int, int] | None:
        """(encoder blocks, decoder blocks) read off the parameter names, or None for a model without a
        cross-attending decoder (memory/blocks_seq2seq.py and memory/logits.py ask it on every estimate)."""
        dec = {m.group(1) for t in self.tensors if (m := _DECODER_BLOCK.search(t.module))}
        if not dec:
            return None
        enc = {m.group(1) for t in self.tensors if (m := _ENCODER_BLOCK.search(t.module))}
        return len(enc), len(dec)

    @cached_property
    def tower_tensors(self) -> tuple:
        """The vision / projector / audio parts' tensors (composite.py files a tower under those components)."""
        return tuple(t for t in self.tensors if t.component in ("vision", "projector", "audio"))

    @cached_property
    def layer_sizes(self) -> tuple[int, ...]:
        """Parameters of each numbered block (decoder layer), in order: FSDP's auto-wrap units."""
        sizes: dict[str, int] = {}
        for t in self.tensors:
            if t.block:
                sizes[t.block] = sizes.get(t.block, 0) + t.numel
        return tuple(sizes.values())

    @cached_property
    def block_matrices(self) -> tuple[tuple[int, int], ...]:
        """(numel, d_out) of every 2-D linear weight inside the blocks (what bitsandbytes quantizes)."""
        return tuple((t.numel, t.shape[0]) for t in self.tensors if t.linear and t.block and len(t.shape) == 2)

    @cached_property
    def block_matrix_counts(self) -> tuple[tuple[tuple[int, int], int], ...]:
        """``block_matrices`` as ((numel, d_out), how many), in first-seen order: a model has a few distinct
        shapes repeated per layer, so per-matrix sums run over these."""
        out: dict[tuple[int, int], int] = {}
        for m in self.block_matrices:
            out[m] = out.get(m, 0) + 1
        return tuple(out.items())

    @cached_property
    def block_matrices_numel(self) -> int:
        return sum(n for n, _ in self.block_matrices)

    def numel_where(self, *, layer: int | None = -1, outside_blocks: bool = False, components=None,
                    exclude=()) -> int:
        """Parameters of the tensors in block index ``layer`` (or outside every block), optionally only of
        the given components, without the excluded ones."""
        return sum(t.numel for t in self.tensors
                   if (not t.block if outside_blocks else (layer == -1 or t.layer == layer))
                   and (components is None or t.component in components) and t.component not in exclude)

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    def linear_names(self) -> tuple[str, ...]:
        names = [lin.name for lin in self.dense_block_linears + self.block_linears]
        return tuple(dict.fromkeys(names))
