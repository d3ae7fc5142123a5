"""Three odd composites of transformers 5.24 traced on FakeTensors (issue 20, item 3), for the CI checks that the
engine keeps what their trainable parts save (tests/test_odd_composites_blocks.py):

- ``gemma4_unified_assistant`` (modeling_gemma4_unified_assistant.py Gemma4UnifiedAssistantForCausalLM): Gemma 4's
  multi-token-prediction drafter. Its forward takes no input_ids: ``inputs_embeds`` (b, s, 2 x
  backbone_hidden_size: the backbone's token embedding and last hidden state) and ``shared_kv_states``, the
  backbone's last full- and sliding-attention layers' K/V ((b, kv, s, head_dim) each, after k_norm / rotary /
  v_norm), which every assistant layer reuses (its config sets num_kv_shared_layers = num_hidden_layers: q_proj,
  q_norm, o_proj and the MLP only). It returns logits and no loss. A step here: the backbone is frozen and ran
  first (its outputs made fresh each forward, no gradient, in the weights' dtype), then the assistant and
  ``self.loss_function(logits, labels, vocab_size)`` (ForCausalLMLoss, upcast) on its logits.

Rows (small configs, s 256, b 2): full bf16-pure FA2 with and without checkpointing, LoRA bf16-mixed with and
without, full bf16-mixed eager.

    python -m tools.memtrace.odd_composites_trace            # trace all rows, (re)write the fixtures
    python -m tools.memtrace.odd_composites_trace g4a-       # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import _p, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "odd_composites")

CONFIGS = {
    # google/gemma-4-e2b-it-assistant's layout (the default Gemma4UnifiedAssistantConfig: a Gemma4UnifiedTextModel
    # reusing the backbone's K/V in every layer), cut to h 512, 4 heads, 2 KV heads of 128 (the full-attention
    # layer's 256), I 1024, 2 layers (sliding, full), backbone h 768, vocabulary 8000
    "g4a": {"model_type": "gemma4_unified_assistant", "backbone_hidden_size": 768, "tie_word_embeddings": True,
            "text_config": {"model_type": "gemma4_unified_text", "vocab_size": 8000, "hidden_size": 512,
                            "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "head_dim": 128,
                            "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 128,
                            "per_layer_config": {"1": {"head_dim": 256}}, "max_position_embeddings": 4096,
                            "tie_word_embeddings": True, "attention_dropout": 0.0}},
}
TARGETS = {"g4a": ["q_proj", "o_proj"]}


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, ckpt: str = "none") -> dict:
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=256,
              lora={"targets": TARGETS[fam]})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        out.append(_plan(fam, "full-pure-flash", "full", "bf16-pure", "flash"))
        out.append(_plan(fam, "full-pure-flash-gc", "full", "bf16-pure", "flash", "full"))
        out.append(_plan(fam, "lora-mixed-flash", "lora", "bf16-mixed", "flash"))
        out.append(_plan(fam, "lora-mixed-flash-gc", "lora", "bf16-mixed", "flash", "full"))
        out.append(_plan(fam, "full-mixed-eager", "full", "bf16-mixed", "eager"))
    return out


_PATCHED: list = []


def _assistant_forward(model, cfg, dt):
    """Gemma4UnifiedAssistantForCausalLM fed as a drafter's training step (module docstring)."""
    import torch  # noqa: PLC0415
    fwd = model.forward
    text = cfg.get_text_config()
    e = dt["base"]            # the backbone's outputs in the weights' dtype (fp32 under a bf16-mixed full row)

    def forward(input_ids=None, labels=None, **kw):
        b, s = labels.shape
        kinds = {}
        for i, kind in enumerate(text.layer_types):
            lc = text.per_layer_config[i]
            kinds.setdefault(kind, (lc.num_key_value_heads, lc.head_dim))
        kv = {k: (torch.zeros(b, n, s, d, dtype=e), torch.zeros(b, n, s, d, dtype=e)) for k, (n, d) in kinds.items()}
        emb = torch.zeros(b, s, 2 * cfg.backbone_hidden_size, dtype=e)
        out = fwd(inputs_embeds=emb, shared_kv_states=kv)
        out.loss = model.loss_function(out.logits, labels, text.vocab_size)
        return out
    return forward


def _patch() -> None:
    """Make the tracer build and feed the composites (in the worker process, once)."""
    if _PATCHED:
        return
    _PATCHED.append(True)
    from . import trace  # noqa: PLC0415
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        if cfg.model_type == "gemma4_unified_assistant":
            base.forward = _assistant_forward(base, cfg, dt)
        return model, cfg, dt
    trace.build_meta_model = build_meta


def _worker(entry: dict) -> dict:
    _patch()
    from .grid import _worker as grid_worker  # noqa: PLC0415
    return grid_worker(entry)


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures([_worker(p) for p in todo], OUT)
