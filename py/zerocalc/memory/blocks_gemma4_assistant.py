"""Saved tensors of Gemma 4's multi-token-prediction assistant (transformers 5.24
modeling_gemma4_unified_assistant.py Gemma4UnifiedAssistantForCausalLM; model/gemma4_assistant.py) trained as a
drafter behind a frozen backbone. Its layers are Gemma 4's (memory/blocks_gemma4.py gemma4_block, registered in
memory/blocks_more.py): every one reuses the backbone's K/V (num_kv_shared_layers = num_hidden_layers), so
q_proj -> q_norm -> rotary, the attention over the backbone's K/V, o_proj and the gated MLP; under eager,
repeat_kv copies the shared K/V at every query head's width in each layer (gemma_attention's rule).

Around the layers (`assistant_head`, memory/activations.py _head_saved through MORE_HEADS):
- the forward's inputs, made by the backbone each step (in the weights' dtype) and alive as long as the graph
  holds them: ``inputs_embeds`` (b, s, 2 x backbone_hidden_size), which pre_projection keeps when it trains
  (autocast's 16-bit copy under bf16-mixed), and ``shared_kv_states``, one (K, V) pair of (b, kv, s, head_dim)
  a layer type (sliding / full), kept once by every FlashAttention call (one storage whatever the layer count;
  eager keeps repeat_kv's copies instead, in the layers);
- the rotary cos / sin of both layer types' head_dims; model.norm (Gemma4RMSNorm, memory/blocks_gemma4.py
  g4_norm); its output read by lm_head and post_projection (one tensor). No masks: without padding
  create_bidirectional_mask returns none.

Traced: tools/memtrace/odd_composites_trace.py g4a rows (tools/memtrace/golden/odd_composites/g4a-*, held within
3 % by tests/test_odd_composites_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, linear
from .blocks_gemma4 import g4_norm, gemma4_block
from .lora import Adapter

MODEL_TYPE = "gemma4_unified_assistant"


def _stream(c: Ctx) -> Ctx:
    """The residual stream starts at pre_projection's output, a 16-bit tensor under autocast (no fp32 embedding
    output): every layer's and the final norm's input is 16-bit whatever the weights' dtype (traced:
    g4a-full-mixed-eager, each norm's `x.float()` a copy)."""
    return replace(c, res=2) if c.autocast else c


def assistant_block(arch: ModelArch, c: Ctx, linears: tuple, adapters: tuple[Adapter, ...]) -> int:
    """memory/blocks_gemma4.py gemma4_block on the 16-bit stream (_stream). Eager: the shared K/V need no
    gradient, so `matmul(q, k^T)` keeps only k^T (not q) and `matmul(probs, v)` only v (not the 16-bit probs);
    the fp32 softmax and the repeated K/V copies stay (traced: g4a-full-mixed-eager, layer 0 19,562,496 bytes)."""
    total = gemma4_block(arch, _stream(c), linears, adapters)
    if c.attention != "eager":
        return total
    e = 2 if c.autocast else c.e
    q_dim = next(lin.d_out for lin in linears if lin.name == "q_proj")
    scores = arch.num_heads * c.seq * c.seq * c.batch
    return total - e * c.tokens * q_dim - (e * scores if e != 4 else 0)


def _head_dims(arch: ModelArch) -> set[int]:
    """The layers' head_dims (q_proj's width over the heads): one a layer type."""
    return {lin.d_out // arch.num_heads for layer in (arch.layer_linears or ()) for lin in layer
            if lin.name == "q_proj"}


def shared_kv_bytes(arch: ModelArch, e: int, tokens: int) -> int:
    """The backbone's K and V a layer type: 2 x (b·s) x kv x head_dim each, one pair per distinct head_dim (the
    layer types are told apart by it, as memory/blocks_gemma4.py checkpointed_kv does)."""
    return 2 * e * tokens * arch.num_kv_heads * sum(_head_dims(arch))


def assistant_head(ss: SavedSet, c: Ctx, arch: ModelArch, seq: int) -> tuple[str, int]:
    """Around the layers (module docstring). Returns lm_head's input key and its bytes per element."""
    e, c = 2 if c.autocast else c.e, _stream(c)
    h = arch.hidden_size
    wide = next(tt.shape[1] for tt in arch.tensors if tt.name == "pre_projection.weight")    # 2 x backbone h
    if c.attention != "eager":
        # FlashAttention keeps its K/V inputs; eager keeps only repeat_kv's copies (memory/blocks_gemma4.py)
        ss.save("shared_kv_states", shared_kv_bytes(arch, c.res, c.tokens))
    if c.train_base:
        linear(ss, c, "inputs_embeds", e, Linear("pre_projection", wide, h), None)
    ss.save("rope_cos_sin", sum(2 * c.res * seq * hd for hd in _head_dims(arch)))
    y = g4_norm(ss, c, "final_norm", "resid_final", h)
    if c.train_base:
        linear(ss, c, y, c.res, Linear("post_projection", h, wide // 2), None)
    return y, c.res


HEADS = {MODEL_TYPE: assistant_head}
RULES = {MODEL_TYPE: assistant_block}
