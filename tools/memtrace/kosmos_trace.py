"""Kosmos-2 and Kosmos-2.5 traced on FakeTensors (issue 20, item 3): transformers 5.24's
Kosmos2ForConditionalGeneration (model_type "kosmos-2": a CLIP-style tower, Kosmos2ImageToTextProjection's
latent_query_num image embeds written over the placeholder positions of the text, a Magneto decoder) and
Kosmos2_5ForConditionalGeneration ("kosmos-2.5", fed text only: its forward runs the tower only with
flattened_patches; and fed images, the k25i rows). The tower and the projection frozen, as zerocalc's
vision.trainable default leaves them. The
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

Kosmos-2.5 fed images (k25i, plan vision {images_per_sample 1, tokens_per_sample 64}): the batch's flattened_patches
((b, max_num_patches 64, 2 + 768) zeros in the weights' dtype, as the model card casts them) and
image_embeds_position_mask (ones at positions 1 .. 64) made once and kept; the frozen tower runs, its 64 latent
queries are written over those positions (`inputs_embeds.clone()[mask == 1] = image_embeds`). Under checkpointing
transformers hooks patch_projection (enable_input_require_grads) and the image embeds need a gradient: the backward
of that write indexes by the bool mask, a data-dependent shape a FakeTensor cannot give, answered here with the
mask's known b·64 rows. Rows: full bf16-pure flash with and without checkpointing, eager checkpointed, LoRA
bf16-mixed flash with and without, full bf16-mixed eager, and flash checkpointed (fp32 weights under autocast).

    python -m tools.memtrace.kosmos_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.kosmos_trace k2-        # only the ids starting with this
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

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
# Kosmos-2.5 fed images: the same layout, the tower's 64 position rows (max_num_patches) the processor's max_patches
# (Kosmos2_5ImageProcessor pads flattened_patches to max_patches rows of 2 + patch_embed_hidden_size: row / column
# ids, then the pixels), 64 latent queries written over positions 1 .. 64 of the 256
CONFIGS["k25i"] = {**CONFIGS["k25"], "vision_config": {**CONFIGS["k25"]["vision_config"], "max_num_patches": 64}}
IMAGES = {"images_per_sample": 1, "tokens_per_sample": 64}
TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj"]
CLASSES = {"kosmos-2": "Kosmos2ForConditionalGeneration", "kosmos-2.5": "Kosmos2_5ForConditionalGeneration"}
# what vision.trainable "frozen" freezes: both models keep them top-level (no `model.` wrapper)
TOWER = ("vision_model", "image_to_text_projection")


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, ckpt: str = "none") -> dict:
    d = _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=256,
           lora={"targets": TARGETS, "dropout": 0.05})
    if fam == "k25i":
        d["vision"] = dict(IMAGES)
    return d


def rows() -> list[dict]:
    out = []
    for fam in ("k2", "k25"):
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
    # Kosmos-2.5 fed images (the tower frozen; under checkpointing transformers hooks its patch_projection)
    out.append(_plan("k25i", "full-pure-flash-s256-b2", "full", "bf16-pure", "flash"))
    out.append(_plan("k25i", "full-pure-flash-gc-s256-b2", "full", "bf16-pure", "flash", "full"))
    out.append(_plan("k25i", "lora-mixed-flash-s256-b2-drop", "lora", "bf16-mixed", "flash"))
    out.append(_plan("k25i", "lora-mixed-flash-gc-s256-b2-drop", "lora", "bf16-mixed", "flash", "full"))
    out.append(_plan("k25i", "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager"))
    # eager under checkpointing: the projection's x_attn keeps eager's tensors
    out.append(_plan("k25i", "full-pure-eager-gc-s256-b2", "full", "bf16-pure", "eager", "full"))
    # fp32 weights under autocast, checkpointed: the tower's stream in fp32, its linears' outputs 16-bit
    out.append(_plan("k25i", "full-mixed-flash-gc-s256-b2", "full", "bf16-mixed", "flash", "full"))
    return out


_PATCHED: list = []


def _patch() -> None:
    """Make the tracer build and feed the two models (in the worker process, once)."""
    import torch  # noqa: PLC0415
    if _PATCHED:
        return
    _PATCHED.append(True)

    from . import build, trace, tracker  # noqa: PLC0415
    orig_class = build.model_class
    orig_dispatch = tracker.StorageTracker.__torch_dispatch__
    masks: list = []                                      # (b, s, ones a row) of the image_embeds_position_mask

    def dispatch(self, func, types, args=(), kwargs=None):
        # `inputs_embeds[mask == 1] = image_embeds`'s backward into the image embeds (they need a gradient under
        # checkpointing: the hooked patch_projection) indexes by the bool mask: aten.nonzero, a data-dependent shape
        # (aten.index.Tensor over aten.nonzero), a data-dependent shape a FakeTensor cannot give; the batch's mask
        # has n_img ones a row: a new (b·n_img, h) tensor
        if func is torch.ops.aten.index.Tensor and masks and len(args[1]) == 1 and args[1][0] is not None \
                and args[1][0].dtype == torch.bool and tuple(args[1][0].shape) == masks[0][:2]:
            (b, _, n), t = masks[0], args[0]
            return orig_dispatch(self, torch.ops.aten.empty.memory_format, types, ((b * n, *t.shape[2:]),),
                                 {"dtype": t.dtype, "device": t.device})
        return orig_dispatch(self, func, types, args, kwargs)
    tracker.StorageTracker.__torch_dispatch__ = dispatch

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
        if cfg.model_type == "kosmos-2.5" and not p.vision_tokens:
            return model, cfg, dt                         # fed text only
        v, n_img = cfg.vision_config, cfg.latent_query_num
        fwd = base.forward
        batch: list = []

        def image_batch(b: int):
            if cfg.model_type == "kosmos-2.5":            # flattened_patches, in the weights' dtype (the model card's)
                return "flattened_patches", torch.zeros(b, v.max_num_patches, 2 + v.patch_embed_hidden_size,
                                                        dtype=dt["base"])
            return "pixel_values", torch.zeros(b, v.num_channels, v.image_size, v.image_size, dtype=dt["base"])

        def forward(input_ids=None, labels=None, **kw):
            # the batch's pixel_values and image_embeds_position_mask, made in the first step's forward (inside the
            # fake mode) and kept, as the batch's input_ids are, for the whole step
            if not batch:
                b, s = input_ids.shape
                mask = torch.zeros(b, s, dtype=torch.long)
                mask[:, 1:1 + n_img] = 1
                masks[:] = [(b, s, n_img)]
                batch.append((image_batch(b), mask))
            (name, pv), mask = batch[0]
            kw = {k: x for k, x in kw.items() if x is not None and k != "inputs_embeds"}
            return fwd(**{name: pv}, input_ids=input_ids, image_embeds_position_mask=mask, labels=labels, **kw)
        base.forward = forward
        return model, cfg, dt
    trace.build_meta_model = build_meta


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
