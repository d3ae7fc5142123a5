"""NLLB-MoE traced on FakeTensors (issue 20, item 3): transformers 5.24's NllbMoeForConditionalGeneration
(modeling_nllb_moe.py), built as AutoModelForSeq2SeqLM (M2M100's pre-LN layer, every encoder_sparse_step-th /
decoder_sparse_step-th layer's feed-forward an NllbMoeSparseMLP). The fixtures (tools/memtrace/golden/nllb_moe/
<id>.json, the layout of tools/memtrace/seq2seq.py's) are what tests/test_nllb_moe_blocks.py holds the engine to
(memory/blocks_nllb_moe.py), within 3 %, without torch. Eager only: NllbMoePreTrainedModel has
`_supports_flash_attn = False`, `_supports_sdpa = False`.

What 5.24's sparse layer runs: NllbMoeTop2Router (the fp32 classifier, an fp32 softmax, top-1 and top-2 one-hots,
the top-2 gates normalised, each expert's first expert_capacity tokens of the flattened batch kept) returns
top_1_mask, the (tokens, E) 0/1 dispatch mask of the top-1 choice, and the (tokens, E) combine weights;
NllbMoeExperts.forward then one-hot encodes that 0/1 mask again (`one_hot(router_mask, num_classes=E)
.permute(2, 1, 0)`), so the experts it runs are those named 0 and 1: expert_0 over every (expert, token) pair the
mask leaves 0 (tokens·E less the kept top-1 ones) and expert_1 over the kept top-1 pairs, each output weighted by
router_probs[token, expert] (zero but for the top-2 gates), the others never. Fake tensors cannot answer that
loop's `nonzero()` / `torch.where`, so inside the trace NllbMoeExperts.forward is the same code over the row lists
a balanced router gives (token i's top-1 is expert i mod E, tools/memtrace/routing.py's convention; capacity over
the flattened batch as route_tokens' cumsum applies it); the router itself runs as written, less its
`self.classifier = self.classifier.to(self.dtype)` (refused on the tracer's fake parameters: the classifier is
applied as F.linear over an fp32 copy of its E x d weight when that is 16-bit, tools/memtrace/routing.py
_switch_router's stand-in).

Rows (2 + 2 layers, d 256, ffn 1024, 4 heads, E 4, sparse step 2: layer 1 of each stack sparse, expert_capacity
128 (every top-1 token kept at s 256, b 2), NLLB's dropouts 0.1 / 0.1, moe_token_dropout 0.2): full bf16-pure with
and without checkpointing, LoRA (q/k/v/out_proj: not the experts) bf16-mixed with and without checkpointing, full
bf16-mixed; and full bf16-mixed at expert_capacity 64 (half the top-1 tokens dropped).

    python -m tools.memtrace.nllb_moe_trace            # trace all rows and (re)write the fixtures
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "nllb_moe")

# facebook/nllb-moe-54b's layout (pre-LN, ReLU, sinusoidal positions, scaled embedding, tied) cut to 2 + 2 layers
CONFIG = {"model_type": "nllb-moe", "d_model": 256, "encoder_layers": 2, "decoder_layers": 2,
          "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 1024,
          "decoder_ffn_dim": 1024, "vocab_size": 32000, "max_position_embeddings": 1024, "dropout": 0.1,
          "attention_dropout": 0.1, "activation_dropout": 0.0, "activation_function": "relu",
          "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "scale_embedding": True, "router_bias": False,
          "router_dtype": "float32", "router_ignore_padding_tokens": False, "num_experts": 4, "expert_capacity": 128,
          "encoder_sparse_step": 2, "decoder_sparse_step": 2, "second_expert_policy": "all",
          "normalize_router_prob_before_dropping": False, "batch_prioritized_routing": False,
          "moe_token_dropout": 0.2, "output_router_logits": False, "pad_token_id": 1, "bos_token_id": 0,
          "eos_token_id": 2, "decoder_start_token_id": 2, "tie_word_embeddings": True}
TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj"]


def _plan(suffix: str, method: str, precision: str, ckpt: str = "none", **over) -> dict:
    return _p(f"nllb-moe-{suffix}", {**CONFIG, **over}, method, precision, "eager", ckpt, mb=2, seq=256,
              lora={"targets": TARGETS})


def rows() -> list[dict]:
    return [_plan("full-pure-eager-s256-b2", "full", "bf16-pure"),
            _plan("full-pure-eager-gc-s256-b2", "full", "bf16-pure", "full"),
            _plan("lora-mixed-eager-s256-b2", "lora", "bf16-mixed"),
            _plan("lora-mixed-eager-gc-s256-b2", "lora", "bf16-mixed", "full"),
            _plan("full-mixed-eager-s256-b2", "full", "bf16-mixed"),
            _plan("full-mixed-eager-cap64-s256-b2", "full", "bf16-mixed", expert_capacity=64)]


def kept_top1(tokens: int, experts: int, capacity: int) -> list[list[int]]:
    """Each expert's kept top-1 tokens of the flattened batch: token i to expert i mod E, then route_tokens'
    `locations1 = cumsum(top_1_mask, dim=0) - 1`, `lt(locations1, expert_capacity)`."""
    return [list(range(j, tokens, experts))[:capacity] for j in range(experts)]


def _router_forward(self, hidden_states, padding_mask=None):
    import torch  # noqa: PLC0415
    self.input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(self.dtype)
    w, bias = self.classifier.weight, self.classifier.bias
    if w.dtype == self.dtype:
        router_logits = self.classifier(hidden_states)
    else:
        router_logits = torch.nn.functional.linear(hidden_states, w.to(self.dtype),
                                                   None if bias is None else bias.to(self.dtype))
    top_1_mask, router_probs = self.route_tokens(router_logits, self.input_dtype, padding_mask)
    return top_1_mask, router_probs, router_logits


def _experts_forward(self, hidden_states, router_mask, router_probs):
    """NllbMoeExperts.forward over the balanced assignment's rows (the module docstring)."""
    import torch  # noqa: PLC0415
    t = hidden_states.shape[0]
    cap = self._capacity
    kept = kept_top1(t, self.num_experts, cap)
    # expert_mask[k] = (one_hot(top_1_mask) == k) as an (E, tokens) grid: torch.where walks it row-major
    rows = {0: [(j, i) for j in range(self.num_experts) for i in range(t) if i not in set(kept[j])],
            1: [(j, i) for j in range(self.num_experts) for i in kept[j]]}
    final_hidden_states = torch.zeros_like(hidden_states)
    for expert_idx in (0, 1):
        if not rows[expert_idx]:
            continue
        idx = torch.tensor([j for j, _ in rows[expert_idx]], dtype=torch.long)
        top_x = torch.tensor([i for _, i in rows[expert_idx]], dtype=torch.long)
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current_hidden_states = self[f"expert_{expert_idx}"](current_state) * router_probs[top_x, idx, None]
        if self.moe_token_dropout > 0:
            if self.training:
                current_hidden_states = self.token_dropout(current_hidden_states)
            else:
                current_hidden_states *= 1 - self.moe_token_dropout
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states


_PATCHED: list = []


def _patch() -> None:
    if _PATCHED:
        return
    _PATCHED.append(True)
    import re  # noqa: PLC0415

    from transformers.models.nllb_moe import modeling_nllb_moe as mn  # noqa: PLC0415

    from . import trace  # noqa: PLC0415
    mn.NllbMoeTop2Router.forward = _router_forward
    mn.NllbMoeExperts.forward = _experts_forward
    orig_never = trace.never_run

    def never_run(cfg, name, images=False):
        # experts 2 ... E - 1 never run in 5.24 (the module docstring): no gradient, so the warm-up step gives them
        # no optimizer state, as torch AdamW in a real run
        m = re.search(r"\.ffn\.experts\.expert_(\d+)\.", name)
        if cfg.model_type == "nllb-moe" and m is not None:
            return int(m.group(1)) >= 2
        return orig_never(cfg, name, images)
    trace.never_run = never_run
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        for m in model.modules():
            if isinstance(m, mn.NllbMoeExperts):
                m._capacity = cfg.expert_capacity
        return model, cfg, dt
    trace.build_meta_model = build_meta


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
