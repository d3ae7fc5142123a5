"""Saved tensors of NLLB-MoE's feed-forwards (transformers 5.24 modeling_nllb_moe.py), the rest of its layer being
M2M100's pre-LN BART layer (memory/blocks_seq2seq.py bart_block, which calls nllb_mlp for its feed-forward).

NllbMoeDenseActDense: fc1 -> ReLU -> dropout(activation_dropout) -> `hidden_states.to(self.fc2.weight.dtype)`
(fp32 weights under autocast: an fp32 copy, and autocast's 16-bit one, which fc2 keeps) -> fc2.

NllbMoeSparseMLP (every <side>_sparse_step-th layer): NllbMoeTop2Router, then NllbMoeExperts.forward, which in 5.24
one-hot encodes the router's (tokens, E) 0/1 top-1 dispatch mask again (`one_hot(router_mask, num_classes=E)`), so
the experts named 0 and 1 run and no other: expert_0 over every (expert, token) pair the mask leaves 0 and
expert_1 over the kept top-1 pairs, t·E rows in all whatever expert_capacity drops (the capacity only moves rows
from expert_1 to expert_0). Each runs NllbMoeDenseActDense over its rows, weighted by the gathered combine weight;
the token dropout (moe_token_dropout) follows and index_add_ scatters the rows back. Traced:
tools/memtrace/nllb_moe_trace.py (fixtures tools/memtrace/golden/nllb_moe/, tests/test_nllb_moe_blocks.py).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import ModelArch
from .blocks import MASK, Ctx, SavedSet, linear


def nllb_mlp(arch: ModelArch, layer: int):
    """bart_block's feed-forward rule for layer `layer` of the encoder + decoder (None: BART's own)."""
    nllb = arch.bart.get("nllb") if arch.bart else None
    if nllb is None:
        return None
    if nllb["sparse"][layer]:
        return lambda ss, c, sw, x, xb, lins, ads: sparse_mlp(ss, c, nllb, x, xb, lins, ads)
    return lambda ss, c, sw, x, xb, lins, ads: dense_act_dense(ss, c, sw, x, xb, lins, ads)


def dense_act_dense(ss: SavedSet, c: Ctx, sw: dict, x: str, x_bytes: int, lins: dict, ads: dict,
                    key: str = "") -> None:
    """NllbMoeDenseActDense over c.tokens rows of x: fc1's input, ReLU's output (which fc2 reads, or under autocast
    with fp32 weights the 16-bit copy of its fp32 cast), the activation dropout's mask."""
    e = 2 if c.autocast else c.e
    fc1, fc2 = lins["fc1"], lins["fc2"]
    linear(ss, c, x, x_bytes, fc1, ads.get("fc1"))
    n = c.tokens * fc1.d_out
    ss.save(f"{key}act.out", e * n)
    out, out_bytes = f"{key}act.out", e
    if sw.get("act_dropout", 0) > 0:
        ss.save(f"{key}act.drop_mask", MASK * n)
        out = f"{key}act.drop"
    if c.autocast and c.train_base:                      # `.to(self.fc2.weight.dtype)`: fp32
        out, out_bytes = f"{key}act.fp32", 4
    linear(ss, c, out, out_bytes, fc2, ads.get("fc2"))


def sparse_mlp(ss: SavedSet, c: Ctx, nllb: dict, x: str, x_bytes: int, lins: dict, ads: dict) -> None:
    """NllbMoeSparseMLP over the ff_layer_norm output x (x_bytes: fp32 under autocast). The router:
    `hidden_states.to(float32)` read by the fp32 classifier (a trainable one keeps it, or under autocast its 16-bit
    copy), softmax(dtype=float32), the top-1 / top-2 one-hots after the capacity (int64, t x E, kept by
    normalize_router_probabilities' products), the two gate sums, their sum and clamp (t each, the input dtype).
    The experts, over n = t·E rows: torch.where's int64 idx / top_x, `hidden_states[None, top_x]` read by fc1,
    NllbMoeDenseActDense (dense_act_dense), fc2's output and the gathered weight (input dtype) kept by their
    product, moe_token_dropout's mask and output (the product's dtype: the wider of the two), kept for index_add_.
    Adapters on the experts (LoRA targets fc1 / fc2) are not counted."""
    t, h, E = c.tokens, lins["fc1"].d_in, nllb["experts"]
    e = 2 if c.autocast else c.e
    if c.train_base:
        ss.save("router.in", (2 if c.autocast else 4) * t * h)
    ss.save("router.softmax", 4 * t * E)
    ss.save("router.masks", 2 * 8 * t * E)
    ss.save("router.gates", 4 * x_bytes * t)
    n = t * E
    cn = replace(c, tokens=n)
    ss.save("experts.index", 2 * 8 * n)
    dense_act_dense(ss, cn, {}, "experts.in", x_bytes, lins, {}, "experts.")
    ss.save("experts.out", e * n * h)
    ss.save("experts.weight", x_bytes * n)
    prod = max(e, x_bytes) * n * h
    if nllb["token_dropout"] > 0:
        ss.save("experts.drop_mask", MASK * n * h)
    ss.save("experts.prod", prod)
