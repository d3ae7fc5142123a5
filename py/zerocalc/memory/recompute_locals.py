"""Moments inside a checkpointed layer's recompute forward that exceed memory/activations.py's recompute_layer (the
recomputed saved set or a backward moment inside it): the forward's locals still alive beside the saved tensors
rebuilt so far, and the gradients the layer's backward made before its first unpack started the recompute. Booked by
memory/inputs.py recompute_terms as the excess over recompute_layer at the top layer's recompute (RECOMPUTE_TOP).

- Inkling (modeling_inkling.py InklingDecoderLayer / InklingMoE / InklingSharedExperts, transformers 5.24): the
  top (sparse) layer's backward first runs mlp_sconv's `out.to(hidden_states.dtype)` and `[:, :, :seq_len]`
  backwards, which need nothing saved: an fp32 (t, h) gradient and slice_backward's fp32 (b, h, s + k - 1), k the
  conv kernel, both alive when the conv's backward unpacks its input and the recompute starts. The recompute then
  peaks at the shared experts' `down.float().sum(dim=0)`: mlp_sconv's fp32 input is not made yet (4·t·h less than
  the saved set); alive as locals are the decoder layer's `residual` (the post-attention stream), InklingMoE's
  input (the norm's output, saved only when the shared experts train), the routed experts' output, down's bmm
  output (e·t·h each), `* gammas` (down's input, e·t·S·I, saved only when down trains), `down.float()` (4·S·t·h)
  and the sum's fp32 output (4·t·h). Traced (tools/memtrace/inkling_trace.py):
  inkling-text-3l-lora-attn-s512-eager-ckpt peaks there (6.8 MB of locals and 4.2 MB of gradients beside the
  50.4 MB recomputed set: activations -17.7 % before); under full fine-tuning the experts' backward moment
  (67.7 MB) stays above it.
- LongCat-Flash (modeling_longcat_flash.py LongcatFlashDecoderLayer / LongcatFlashMLA), LoRA on the MLAs (the MLPs
  and experts frozen): the recompute peaks at the second MLA's o_proj, in PEFT's `lora_B(lora_A(x)) * scaling`
  (lora/layer.py Linear.forward). post_attention_layernorm[1] (fp32 upcast, rsqrt) and mlps[1] (gate, up, SiLU:
  3·e·t·I) are not rebuilt yet; alive as locals are the shortcut MoE's output, the second sublayer's residual and
  input_layernorm[1]'s output (e·t·h each), the MLA's compressed_kv and its scaled / rotated k halves
  (2·e·t·(kv_lora + rope)), q_states and its scaled / rotated halves (2·e·t·a·(nope + rope)), kv_b_proj's output
  (e·t·a·(nope + v), value_states a view of it), the attention output's contiguous copy (o_proj's input) and
  o_proj's base output, lora_B's output and its scaled copy (the adapter dtype, t·h each). Traced
  (tools/memtrace/moe_trace.py longcat_flash): longcat-flash-2l-lora-attn-s512-ckpt, 15,859,712 bytes of unsaved
  locals beside 59.3 MB recomputed there (activations -9.7 % before).
- Inkling 2 (modeling_inkling2.py Inkling2DecoderLayer, integrations/moe.py's grouped_mm experts): the top layer's
  backward first runs the model's final_input backward, a 16-bit gradient for each of the final block states
  (e·t·final_states·h, the layer output's among them), its fp32 (t, h) `div` gradient, and post_mlp_convolution's
  `.to` / slice backwards (as Inkling's); the recompute then peaks at the experts' `weighted_out[inv_perm]`:
  post_mlp_convolution's fp32 input is not made yet; alive as locals are the fp32 `residual`, at a block boundary
  the new block_states (`torch.cat`, e·t·(mlp_states - 1)·h), post_attention_layernorm's 16-bit cast, the router's
  fp32 logits (4·t·E), the gathered rows when the experts are frozen (e·t·k·h; saved when they train), the fp32
  routing-weighted rows and their un-permuted copy (2·4·t·k·h). Under full fine-tuning embed_norm's saved set
  (memory/blocks_inkling2.py inkling2_head: fp32 input, rsqrt, fp32 product), which memory/inputs.py's head term
  books only until lm_head's backward, is alive too: the embedding's gradient comes last. Traced
  (tools/memtrace/inkling_trace.py inkling2_text): both checkpointed rows peak there (13.6 / 15.7 MB of unsaved
  locals, 8.4 MB of gradients; with memory/ckpt_inputs.py's relative_distance, -10.4 % / -20.8 % before, -0.6 %
  each after). Not Inkling 2 Loop, whose rows peak in a loop layer (tests/test_inkling_blocks.py pins them).
"""
from __future__ import annotations

from ..model import ModelArch
from .lora import block_linears_per_layer

INKLING = ("inkling_text", "inkling_mm_model")
LONGCAT = ("longcat_flash",)


def _shape(arch: ModelArch, suffix: str) -> tuple[int, ...] | None:
    top = f"layers.{arch.num_layers - 1}."
    return next((tt.shape for tt in arch.tensors if top in tt.name and tt.name.endswith(suffix)), None)


def recompute_forward_moment(arch: ModelArch, top_saved: int, batch: int, seq: int, e: int, train_base: bool,
                             adapter: int = 4, adapted: tuple[str, ...] = ()) -> int:
    """The top layer's recompute-forward moment (module docstring), 0 where none is modelled; `top_saved`: the top
    layer's saved set (memory/activations.py Activations.layers[-1]), `e`: the 16-bit compute dtype's bytes,
    `adapter`: the LoRA adapters' bytes, `adapted`: the top layer's adapted linears (memory/lora.py Adapter.name)."""
    if arch.model_type in LONGCAT:
        mlp = any(n.startswith(("mlps.", "mlp.")) or n in ("gate_up_proj", "down_proj") for n in adapted)
        return 0 if train_base or mlp else _longcat(arch, top_saved, batch * seq, e, adapter)
    if arch.inkling2 is not None:
        return _inkling2(arch, top_saved, batch, seq, e, train_base)
    if arch.model_type not in INKLING:
        return 0
    shared, conv = _shape(arch, "mlp.shared_experts.gate_proj"), _shape(arch, "mlp_sconv.conv1d.weight")
    if shared is None or conv is None:
        return 0                                   # a dense top layer: not traced at its recompute
    t, h, (s_exp, inter) = batch * seq, arch.hidden_size, shared[:2]
    grads = 4 * t * h + 4 * batch * h * (seq + conv[-1] - 1)
    locals_ = (3 + (0 if train_base else 1)) * e * t * h + (0 if train_base else e * t * s_exp * inter) \
        + 4 * s_exp * t * h + 4 * t * h
    return top_saved - 4 * t * h + locals_ + grads


def _longcat(arch: ModelArch, top_saved: int, t: int, e: int, adapter: int) -> int:
    """LongCat-Flash's moment at the second MLA's o_proj LoRA (module docstring), frozen MLPs and experts."""
    lin = {x.name: x for x in block_linears_per_layer(arch)[-1] if x.name.startswith(("self_attn.1.", "mlps.1."))}
    if "self_attn.1.o_proj" not in lin or "mlps.1.gate_proj" not in lin:
        return 0
    h = arch.hidden_size
    not_yet = 4 * t * h + 4 * t + 3 * e * t * lin["mlps.1.gate_proj"].d_out
    mla = (2 * lin["self_attn.1.kv_a_proj_with_mqa"].d_out + 2 * lin["self_attn.1.q_b_proj"].d_out
           + lin["self_attn.1.kv_b_proj"].d_out + lin["self_attn.1.o_proj"].d_in)
    return top_saved - not_yet + 3 * e * t * h + e * t * mla + e * t * h + 2 * adapter * t * h


def _inkling2(arch: ModelArch, top_saved: int, batch: int, seq: int, e: int, train_base: bool) -> int:
    """Inkling 2's moment at the top layer's experts' un-permute (module docstring); 0 for a dense top layer."""
    top, moe = arch.inkling2["layers"][-1], arch.moe
    if moe is None or "loop" in arch.model_type:
        return 0           # Inkling 2 Loop peaks in a loop layer's backward or recompute (not modelled here)
    t, h, k = batch * seq, arch.hidden_size, moe.experts_per_token
    grads = e * t * arch.inkling2["final_states"] * h - e * t * h + 2 * 4 * t * h \
        + 4 * batch * h * (seq + top["kernel"] - 1)
    block = e * t * (top["mlp_states"] - 1) * h if top["boundary"] else 0
    locals_ = 4 * t * h + block + e * t * h + 4 * t * moe.num_experts + (0 if train_base else e * t * k * h) \
        + 2 * 4 * t * k * h
    embed_norm = 8 * t * h + 4 * t if train_base else 0
    return top_saved - 4 * t * h + locals_ + grads + embed_norm
