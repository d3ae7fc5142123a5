"""Saved tensors of HRM-Text's decoder layer (model/hrm_text.py), the op sequence of transformers 5.24
modeling_hrm_text.py and what each op keeps for backward, traced on fake tensors (tools/memtrace/oneoff.py, fixtures
in tools/memtrace/golden/oneoff/, held within 3 % by tests/test_oneoff_grid.py).

HrmTextDecoderLayer: input_layernorm -> HrmTextAttention -> residual add -> post_attention_layernorm -> HrmTextMLP
-> residual add. What differs from a Llama block (memory/blocks.py llama_block):
- HrmTextRMSNorm has no weight: `self._norm(x.float()).type_as(x)` keeps the fp32 upcast (pow and the multiply
  read it) and the fp32 rsqrt, but no normalised tensor (there is no weight gradient to take);
- the sigmoid output gate: `torch.sigmoid(gate_states) * attn_output` with gate_states = gate_proj(x): sigmoid
  keeps its output, the multiply that output and the attention output (FA's own `out`; under eager the transposed
  contiguous output), o_proj reads the new product;
- every HrmTextStack call that keeps its graph ends in `final_norm` (the same weightless norm): its fp32 upcast
  and rsqrt, once per num_layers_per_stack layer calls (model/hrm_text.py counts the layer calls that keep their
  graph: HrmTextModel.forward runs the earlier L passes under torch.no_grad), booked here as a share per layer.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear
from .blocks_dory import dory_head, dory_layer, pick_adapters
from .blocks_inkling2 import checkpointed_block_states
from .blocks_more import MORE_HEADS
from .lora import Adapter


def weightless_rmsnorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int) -> tuple[str, int]:
    """HrmTextRMSNorm (modeling_hrm_text.py): `x.float()` (a new fp32 tensor, or x itself when the stream is fp32)
    and rsqrt(mean(x²) + eps) (fp32, one per token) are kept when anything before it needs a gradient; no weight,
    so no normalised copy. The output `.type_as(x)` is in the stream's dtype."""
    if not (c.first_layer and not c.train_base):
        ss.save(x if c.res == 4 else f"{key}.fp32", 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens)
    return f"{key}.out", c.res


def hrm_text_layer(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One HrmTextDecoderLayer call that keeps its graph, plus its share of its stack's final_norm."""
    ss = SavedSet()
    h, t, e = arch.hidden_size, c.tokens, 2 if c.autocast else c.e
    lins, ads = pick_adapters(linears, adapters)
    (q, k, v, o, gate), (aq, ak, av, ao, agate) = lins[:5], ads[:5]
    y, yb = weightless_rmsnorm(ss, c, "ln1", "resid", h)
    for lin, ad in ((q, aq), (k, ak), (v, av), (gate, agate)):
        linear(ss, c, y, yb, lin, ad)
    c2 = replace(c, first_layer=False)
    # the Llama lineage's eager attention (fp32 softmax and its 16-bit copy) or FA2's q, k, v, out and lse
    out = attention_core(ss, c2, replace(arch, family="llama"), "attn", arch.q_dim, arch.kv_dim)
    ss.save("gate.sigmoid", e * t * gate.d_out)               # sigmoid keeps its output
    ss.save(out, e * t * arch.q_dim)                           # the multiply keeps the attention output
    linear(ss, c2, "gate.prod", e, o, ao)
    y2, yb2 = weightless_rmsnorm(ss, c2, "ln2", "resid2", h)
    mlp = {lin.name: lin for lin in lins[5:]}
    mlp_ads = {lin.name: ad for lin, ad in zip(lins[5:], ads[5:]) if ad is not None}
    gated_mlp(ss, c2, "mlp", y2, yb2, mlp, mlp_ads, mlp["down_proj"].d_in)
    # HrmTextStack.final_norm: fp32 upcast + rsqrt once per stack call, spread over its layers
    return ss.total + (4 * t * h + 4 * t) // _stack_layers(arch)


def _stack_layers(arch: ModelArch) -> int:
    """num_layers_per_stack, read off the L stack's tensors (model/hrm_text.py names them)."""
    return max(1, sum(1 for tt in arch.tensors
                      if tt.name.startswith("model.L_module.") and tt.name.endswith("self_attn.q_proj.weight")))


RULES = {"hrm_text": hrm_text_layer}


def checkpointed_final_norms(arch: ModelArch, t: int) -> int:
    """0 but for HRM-Text. Under full checkpointing each HrmTextDecoderLayer (a GradientCheckpointingLayer) keeps
    only its input, but
    HrmTextStack.final_norm runs outside the checkpointed layers: every stack call that keeps its graph keeps its
    fp32 upcast and rsqrt (traced: hrm_text-full-pure-flash-gc-s1024-b2, 4 stack calls of 4.0 MiB beside the
    8 layer inputs of 2 MiB)."""
    if arch.model_type not in RULES:
        return checkpointed_block_states(arch, t)      # memory/blocks_inkling2.py: Inkling 2's block-state stacks
    return arch.num_layers // _stack_layers(arch) * (4 * t * arch.hidden_size + 4 * t)


def hrm_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the stacks (HrmTextModel.forward): no model.norm, lm_head reads the last H stack's final_norm output
    (booked with the layers above) in the stream's dtype; the rotary cos/sin, two (1, s, head_dim) tensors
    `.to(x.dtype)` of the embedding output, kept by the q/k multiplies. Returns lm_head's input and its bytes."""
    ss.save("rope_cos_sin", 2 * c.res * seq * arch.head_dim)
    return "final_norm.out", c.res


# memory/activations.py _head_saved: what these models keep around their layers, by model_type
ONEOFF_HEADS = {"hrm_text": hrm_head, "dory": dory_head, **MORE_HEADS}
# memory/blocks_families.py RULES: the layer rules of the one-off types (this module's and memory/blocks_dory.py's)
ONEOFF_RULES = {"hrm_text": hrm_text_layer, "dory": dory_layer}
