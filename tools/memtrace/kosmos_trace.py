"""Kosmos-2 and Kosmos-2.5 traced on FakeTensors (issue 20, item 3): transformers 5.24's
Kosmos2ForConditionalGeneration (model_type "kosmos-2": a CLIP-style tower, Kosmos2ImageToTextProjection's
latent_query_num image embeds written over the placeholder positions of the text, a Magneto decoder) and
Kosmos2_5ForConditionalGeneration ("kosmos-2.5", fed text only: its forward runs the tower only with
flattened_patches). The tower and the projection frozen, as zerocalc's vision.trainable default leaves them. The
fixtures (tools/memtrace/golden/kosmos/<id>.json, the layout of tools/memtrace/bert.py's) are what
tests/test_kosmos_blocks.py holds the engine to (memory/blocks_kosmos.py), within 3 %, without torch.

What a Kosmos-2 step runs (modeling_kosmos2.py Kosmos2ForConditionalGeneration.forward): get_image_features over
pixel_values (the frozen tower, post_layernorm, normalize, the frozen projection: no graph), then
Kosmos2TextForCausalLM over input_ids with image_embeds and image_embeds_position_mask (the batch's (b, s) int64
mask, ones at positions 1 .. latent_query_num as Kosmos2Processor writes them after <image>):
Kosmos2TextTransformer.forward_embedding's `inputs_embeds[mask.bool()] = image_embeds` overwrites those positions
(the sequence keeps its s positions), the loss is ForCausalLMLoss. The batch's pixel_values (zeros, the weights'
dtype) and the position mask are made once and kept for the step, as input_ids are.

Rows (2 layers, h 256, ffn 1024, 4 heads, dropout 0.1, s 256, b 2): full bf16-pure with and without checkpointing,
LoRA (q/k/v/out_proj) bf16-mixed with and without checkpointing (Kosmos-2: not with checkpointing, rows() says
why), full bf16-mixed. Kosmos-2 has no FlashAttention-2 (Kosmos2PreTrainedModel._supports_flash_attn False): its
rows eager, and one full bf16-pure row under SDPA (the tracer's FA2 profile, what SDPA's memory-efficient kernel
keeps but its attn_bias); Kosmos-2.5's flash, its full bf16-mixed row eager.

    python -m tools.memtrace.kosmos_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.kosmos_trace k2-        # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import _p, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "kosmos")

TEXT = {"vocab_size": 8000, "max_position_embeddings": 512, "embed_dim": 256, "layers": 2, "ffn_dim": 1024,
        "attention_heads": 4, "activation_function": "gelu", "layer_norm_eps": 1e-05, "scale_embedding": True}
CONFIGS = {
    # microsoft/kosmos-2-patch14-224's layout (dropout 0.1, attention_dropout 0.1, 64 latent queries) cut to 2 text
    # layers of h 256 and a 2-layer CLIP tower of 224 px, patch 16
    "k2": {"model_type": "kosmos-2", "latent_query_num": 64, "tie_word_embeddings": True,
           "text_config": {**TEXT, "dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.0,
                           "tie_word_embeddings": True, "add_cross_attention": False},
           "vision_config": {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_channels": 3, "image_size": 224, "patch_size": 16,
                             "hidden_act": "quick_gelu"}},
    # microsoft/kosmos-2.5's layout (dropout 0.1, attention_dropout 0.0) cut the same way, the Pix2Struct tower tiny
    # (never run: text only)
    "k25": {"model_type": "kosmos-2.5", "latent_query_num": 64, "tie_word_embeddings": True,
            "text_config": {**TEXT, "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
                            "tie_word_embeddings": True},
            "vision_config": {"hidden_size": 256, "patch_embed_hidden_size": 768, "intermediate_size": 512,
                              "head_dim": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                              "max_num_patches": 256}},
}
TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj"]
CLASSES = {"kosmos-2": "Kosmos2ForConditionalGeneration", "kosmos-2.5": "Kosmos2_5ForConditionalGeneration"}
# what vision.trainable "frozen" freezes: both models keep them top-level (no `model.` wrapper)
TOWER = ("vision_model", "image_to_text_projection")


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, ckpt: str = "none") -> dict:
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=256,
              lora={"targets": TARGETS, "dropout": 0.05})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        att = "eager" if fam == "k2" else "flash"
        out.append(_plan(fam, f"full-pure-{att}-s256-b2", "full", "bf16-pure", att))
        out.append(_plan(fam, f"full-pure-{att}-gc-s256-b2", "full", "bf16-pure", att, "full"))
        out.append(_plan(fam, f"lora-mixed-{att}-s256-b2-drop", "lora", "bf16-mixed", att))
        if fam != "k2":
            # Kosmos-2 under PEFT with checkpointing fails in transformers 5.24: enable_input_require_grads makes
            # embed_tokens' output a leaf that requires grad, and forward_embedding's `inputs_embeds[mask] =
            # image_embeds` is an in-place op on it (RuntimeError)
            out.append(_plan(fam, f"lora-mixed-{att}-gc-s256-b2-drop", "lora", "bf16-mixed", att, "full"))
        out.append(_plan(fam, "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager"))
        if fam == "k2":
            out.append(_plan(fam, "full-pure-sdpa-s256-b2", "full", "bf16-pure", "sdpa"))
        else:
            # eager under checkpointing: create_causal_mask's 4-D mask, a checkpoint input of every layer
            out.append(_plan(fam, "full-pure-eager-gc-s256-b2", "full", "bf16-pure", "eager", "full"))
    return out


_PATCHED: list = []


def _patch() -> None:
    """Make the tracer build and feed the two models (in the worker process, once)."""
    import torch  # noqa: PLC0415
    if _PATCHED:
        return
    _PATCHED.append(True)

    from . import build, trace  # noqa: PLC0415
    orig_class = build.model_class

    class Direct:
        def __init__(self, name):
            self.name = name

        def from_config(self, cfg, **kw):
            import transformers  # noqa: PLC0415
            return getattr(transformers, self.name)._from_config(cfg, **kw)

    def model_class(p):
        if isinstance(p.model, dict) and p.model.get("model_type") in CLASSES:
            return Direct(CLASSES[p.model["model_type"]])
        return orig_class(p)
    build.model_class = model_class
    orig_targets = build.lora_targets

    def lora_targets(plan, cfg):
        # PEFT's targets inside the text model only (the frozen projection's x_attn has the same names)
        if cfg.model_type in CLASSES:
            return r"text_model\..*\.(" + "|".join(plan.lora_targets) + ")"
        return orig_targets(plan, cfg)
    build.lora_targets = lora_targets
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        if cfg.model_type not in CLASSES:
            return model, cfg, dt
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        for part in TOWER:                                # vision.trainable "frozen"
            base.get_submodule(part).requires_grad_(False)
        if cfg.model_type == "kosmos-2.5":
            return model, cfg, dt                         # fed text only
        v, n_img = cfg.vision_config, cfg.latent_query_num
        fwd = base.forward
        batch: list = []

        def forward(input_ids=None, labels=None, **kw):
            # the batch's pixel_values and image_embeds_position_mask, made in the first step's forward (inside the
            # fake mode) and kept, as the batch's input_ids are, for the whole step
            if not batch:
                b, s = input_ids.shape
                mask = torch.zeros(b, s, dtype=torch.long)
                mask[:, 1:1 + n_img] = 1
                batch.append((torch.zeros(b, v.num_channels, v.image_size, v.image_size, dtype=dt["base"]), mask))
            pv, mask = batch[0]
            kw = {k: x for k, x in kw.items() if x is not None and k != "inputs_embeds"}
            return fwd(pixel_values=pv, input_ids=input_ids, image_embeds_position_mask=mask, labels=labels, **kw)
        base.forward = forward
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
