"""Saved tensors of Moshi's text model (transformers 5.24 modeling_moshi.py MoshiForCausalLM), read off
fake-tensor traces of the real training step (tools/memtrace/families.py moshi rows, tools/memtrace/golden/
families/moshi-*, held within 3 % by tests/test_family_grid.py).

MoshiDecoderLayer: input_layernorm -> MoshiAttention (q/k/v_proj: MoshiLinear around an nn.Linear; the layer's own
MoshiRotaryEmbedding) -> o_proj -> residual; post_attention_layernorm -> MoshiGatingMLP -> residual.
MoshiRMSNorm computes in fp32 and multiplies by `weight.float()` before `type_as(x)`: the fp32 upcast, rsqrt and
the fp32 normalised tensor are kept (memory/blocks.py rmsnorm's Gemma rule). MoshiGatingMLP: fc1 (h -> ffn_dim),
`view(b, s, 2, -1)`, `act(x[..., 0, :]) * x[..., 1, :]`: both halves are views of fc1's output, which stays whole
(memory/blocks.py gated_mlp's fused gate_up rule), then fc2 (ffn_dim / 2 -> h).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Linear, ModelArch
from .blocks import Ctx, SavedSet, attention_core, gated_mlp, linear, rmsnorm
from .lora import Adapter


def moshi_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """One MoshiDecoderLayer. Traced per layer (full bf16, FA2): 16-bit 6·t·h (norm outputs, q and k after the
    rotary, v, SDPA out) + 4·t·I (I = ffn_dim / 2), fp32 4·t·h (two norms' upcast and normalised tensors), the
    layer's rotary cos/sin (2·s·head_dim) and the fp32 logsumexp."""
    ss = SavedSet()
    lins = {lin.name: lin for lin in linears}
    ads = {ad.name: ad for ad in adapters}
    e, h = 2 if c.autocast else c.e, arch.hidden_size
    y = rmsnorm(ss, c, "ln1", "resid", h, gemma=True)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear(ss, c, y, c.res, lins[name], ads.get(name))
    # layer 0 under LoRA: nothing before it needs a gradient, so its attention keeps nothing unless q/k/v carry
    # adapters, and its second norm nothing unless o_proj does too (traced: the LoRA row on fc1 / fc2 only)
    c2 = _later(c, any(n in ads for n in ("q_proj", "k_proj", "v_proj")))
    view = arch if c.attention != "eager" else replace(arch, family="llama")
    out = "attn.out"
    if not c2.first_layer:
        ss.save("rope_cos_sin", 2 * c.res * c.seq * arch.head_dim)  # each layer's rotary_emb, (1, s, d) twice
        out = attention_core(ss, c2, view, "attn", arch.q_dim, arch.kv_dim)
    linear(ss, c2, out, e, lins["o_proj"], ads.get("o_proj"))
    c2 = _later(c2, "o_proj" in ads)
    y2 = rmsnorm(ss, c2, "ln2", "resid2", h, gemma=True)
    fc1, fc2 = lins["fc1"], lins["fc2"]
    mlp = {"gate_up_proj": Linear("gate_up_proj", fc1.d_in, fc1.d_out), "down_proj": fc2}
    mads = {k: a for k, a in (("gate_up_proj", ads.get("fc1")), ("down_proj", ads.get("fc2"))) if a}
    gated_mlp(ss, c2, "mlp", y2, c.res, mlp, mads, fc2.d_in)
    return ss.total


def _later(c: Ctx, adapted: bool) -> Ctx:
    """The context past a projection: the tensors after it need a gradient when the base trains, an adapter sits
    on it, or they already did (not the first layer under LoRA)."""
    return replace(c, first_layer=False) if c.first_layer and (c.train_base or adapted) else c
