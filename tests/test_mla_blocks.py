"""DeepSeek-V3's multi-head latent attention and fp32 router (memory/blocks.py llama_block, sparse_moe), held to a trace.

The traced model (tools/memtrace/moe_trace.py deepseek_v3): DeepSeek-V3's default config with h = 2048, 16 heads,
2 layers (layer 0 dense with an MLP of 4096, layer 1 sparse: 16 experts of 512, top-8, one shared expert of 512),
q_lora_rank 1536, kv_lora_rank 512, qk head 128 + 64 = 192, v_head_dim 128; full fine-tuning in bf16 (no
autocast: 2-byte activations), FA2, one sequence of 512 tokens (t = 512).

Two terms the engine lacked (found with a dump of the saved tensors, `python -m tools.memtrace PLAN --dump-saved`,
which gives layers 0 / 1 = 56,664,064 / 96,708,672 bytes):
- FA2 needs one head dim for q and v: transformers 5.24 integrations/flash_attention.py pads v to 192 and returns
  attn_output[..., :128]; DeepseekV3Attention.forward's attn_output.reshape(b, s, -1) copies that strided view,
  and o_proj keeps the copy (2 · t · 16 · 128 bytes) beside FA2's own padded output;
- DeepseekV3TopkRouter.forward runs F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32)):
  the fp32 copy of the router's input (4 · t · h bytes) is kept for the router weight's gradient.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tools.memtrace.compare import compare, engine_breakdown, format_rows
from zerocalc.memory.blocks import Ctx, block_saved_bytes
from zerocalc.memory.lora import block_linears_per_layer
from zerocalc.model import model_from_config

DATA = Path(__file__).parent / "data"
TRACE = json.loads((DATA / "mla_trace.json").read_text())
T, H = 512, 2048


def ctx(autocast: bool = False) -> Ctx:
    res = 4 if autocast else 2      # bf16-mixed full fine-tuning: fp32 weights, so an fp32 residual stream
    return Ctx(tokens=T, seq=T, batch=1, e=2, res=res, autocast=autocast, train_base=True, adapter_bytes=2,
               dropout=0.0, attention="flash", first_layer=False)


def traced_arch():
    return model_from_config(TRACE["cases"][0]["plan"]["model"])


def saved(arch, layer: int, c: Ctx | None = None) -> int:
    return block_saved_bytes(arch, c or ctx(), block_linears_per_layer(arch)[layer], ())


def norm(d: int) -> int:
    """HF RMSNorm over d with a trained weight in bf16: fp32 upcast, fp32 rsqrt per token, the normalised
    16-bit tensor, and its 16-bit output read by the next linear."""
    return 4 * T * d + 4 * T + 2 * T * d + 2 * T * d


# attention part, shared by both layers:
#   input norm (2048)                      4*512*2048 + 4*512 + 2*512*2048 + 2*512*2048 =  8,390,656
#   q_a norm (1536)                        4*512*1536 + 4*512 + 2*512*1536 + 2*512*1536 =  6,293,504
#   kv_a norm (512)                        4*512*512 + 4*512 + 2*512*512 + 2*512*512    =  2,099,200
#   FA2 q, k, v (v padded to 192), output  4 * 2*512*16*192                              = 12,582,912
#   FA2 logsumexp                          4*16*512                                      =     32,768
#   o_proj's copy of the cropped output    2*512*16*128                                  =  2,097,152
#   post-attention norm (2048), its output read by the MLP                               =  8,390,656
ATTENTION = norm(H) + norm(1536) + norm(512) + 4 * 2 * T * 16 * 192 + 4 * 16 * T + 2 * T * 16 * 128 + norm(H)


def test_dense_mla_layer_by_hand():
    """Layer 0: the attention part and a SwiGLU MLP of 4096 (gate, up, act, product: 4 * 2*512*4096 =
    16,777,216 B): 56,664,064 B, the trace's layer 0 to the byte."""
    assert ATTENTION == 39_886_848
    assert saved(traced_arch(), 0) == ATTENTION + 4 * 2 * T * 4096 == 56_664_064


def test_sparse_mla_layer_by_hand():
    """Layer 1: the attention part and the MoE block:
      router's fp32 copy of its input   4*512*2048                     =  4,194,304
      router probabilities (fp32)       4*512*16                       =     32,768
      gathered expert inputs            2*512*8*2048                   = 16,777,216
      gate_up output                    2*2*512*8*512                  =  8,388,608
      activation, product               2*512*8*512 each               =  8,388,608
      weighted expert outputs           2*512*8*2048                   = 16,777,216
      top-k / sort indices, weights     40*512*8 + 4*512               =    165,888
      shared expert (512): gate, up, act, product  4 * 2*512*512       =  2,097,152
    """
    moe = 4 * T * H + 4 * T * 16 + 2 * T * 8 * H + 2 * 2 * T * 8 * 512 + 2 * (2 * T * 8 * 512) + 2 * T * 8 * H \
        + 40 * T * 8 + 4 * T + 4 * 2 * T * 512
    assert moe == 56_821_760
    # the trace's layer 1 is 64 B more: the experts' int32 cumsum of the 16 group sizes
    assert saved(traced_arch(), 1) == ATTENTION + moe == 96_708_608


def test_router_upcast_by_kind():
    """The same sparse layer with the router read three ways. Mistral 4's F.linear(x, w) keeps its input, the norm
    output the shared expert keeps too (bf16, nothing of its own), or under autocast (fp32 stream) autocast's bf16
    copy, 2*512*2048 = 2,097,152 B. DeepSeek's F.linear(x.type(float32), ...) keeps an fp32 copy in bf16,
    4*512*2048 = 4,194,304 B more; under autocast .type(float32) is a no-op and autocast's bf16 copy is kept, as
    for Mistral 4. ERNIE 4.5's, with autocast off, keeps the fp32 stream itself: 4*512*2048 B."""
    arch = traced_arch()
    plain = replace(arch, moe=replace(arch.moe, router_fp32=""))
    forced = replace(arch, moe=replace(arch.moe, router_fp32="forced"))
    assert arch.moe.router_fp32 == "cast"
    assert saved(arch, 1) - saved(plain, 1) == 4 * T * H
    assert saved(arch, 1, ctx(autocast=True)) == saved(plain, 1, ctx(autocast=True))
    assert saved(forced, 1, ctx(autocast=True)) - saved(plain, 1, ctx(autocast=True)) == 4 * T * H - 2 * T * H
    assert saved(forced, 1) - saved(plain, 1) == 4 * T * H


@pytest.mark.parametrize("model_type,kind", [("deepseek_v3", "cast"), ("glm4_moe", "cast"), ("dots1", "cast"),
                                             ("ernie4_5_moe", "forced"), ("flint", "forced"), ("mistral4", ""),
                                             ("exaone_moe", "cast"), ("qwen2_moe", ""), ("mixtral", "")])
def test_router_upcast_read_from_the_family(model_type, kind):
    """Each type's router as its transformers 5.24 modelling file writes it (moe.py ROUTER_FP32 and the family
    rows' overrides): modeling_glm4_moe.py / modeling_dots1.py Glm4MoeTopkRouter / Dots1TopkRouter cast like
    DeepSeek-V3; modeling_ernie4_5_moe.py / modeling_flint.py under maybe_autocast(enabled=False);
    modeling_exaone_moe.py ExaoneMoeTopkRouter like DeepSeek-V3;
    Mistral4TopkRouter, Qwen2MoeTopKRouter and MixtralTopKRouter F.linear(x, w)."""
    rows = {r["id"]: r for r in json.loads((DATA / "architectures.json").read_text())["rows"]}
    assert model_from_config(rows[f"default:{model_type}"]["config"]).moe.router_fp32 == kind


@pytest.mark.parametrize("case", TRACE["cases"], ids=[c["id"] for c in TRACE["cases"]])
def test_deepseek_v3_step_within_3_percent_of_the_trace(case):
    """tools/memtrace/moe_trace.py deepseek_v3 on fake tensors: every component at the peak and the peak itself
    within 3 % (tools/memtrace/compare.py). Before the two terms the full step's activations were -5.2 %; LoRA
    on the attention alone was +18.8 % until the frozen experts stopped keeping the gathered tokens and the
    product (memory/blocks.py sparse_moe)."""
    rows = compare(case, engine_breakdown(case["plan"]))
    assert all(r["ok"] for r in rows), "\n" + format_rows(case["id"], case, engine_breakdown(case["plan"]), rows)
