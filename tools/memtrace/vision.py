"""What a vision-language model's step saves in its vision tower and projector, traced on FakeTensors.

A small LLaVA-1.5-shaped model (modeling_llava.py LlavaForConditionalGeneration: a CLIP ViT tower,
LlavaMultiModalProjector, a Llama language model; transformers 5.24) runs one forward with `images` images
per sample (pixel_values (b * images, 3, H, W), their image tokens inside `seq` input ids) under
saved_tensors_hooks (dump.py SavedRecorder). At forward end the storages autograd saved are summed by the
module that saved them (after the outputs are dropped, as Trainer.compute_loss does): the tower (``model.vision_tower``), the projector (``model.multi_modal_projector``) and
the rest. Three ways of training the tower, as LLaMA-Factory sets them (finetuning_args.py
freeze_vision_tower / freeze_multi_modal_projector, both True by default): ``frozen`` (tower and projector
requires_grad False, the language model trains in full), ``full`` (all train).
Also the forward's peak of live activations inside the tower (CLIP's output_hidden_states keeps every
layer's hidden state until the tower returns; LLaVA selects vision_feature_layer -2).

  python -m tools.memtrace.vision > tests/data/vision_trace.json      (about 20 s on 2 cores)

saved_bytes_forward_end: every activation storage alive once the outputs are dropped (the input ids, pixels and
labels left out); the language model's share is the same in a frozen and a full case, so a full case minus
its frozen twin is what the tower and projector keep. (SavedRecorder's per-module table is off by default:
its pack hook returns the tensor itself, which makes each op that saves its own output a reference cycle
autograd never frees, so the unreachable layers after the feature layer would look alive.)
"""
from __future__ import annotations

import contextlib
import json
import sys

import torch

from .build import fakeify, hf_patches
from .dump import SavedRecorder
from . import running
from .tracker import StorageTracker

TOWER = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4,
         "image_size": 112, "patch_size": 14, "model_type": "clip_vision_model"}
TEXT = {"hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_key_value_heads": 8, "vocab_size": 1000, "model_type": "llama"}
CASES = [{"id": "llava-tiny-frozen-i1", "trainable": "frozen", "images": 1, "batch": 1, "seq": 256},
         {"id": "llava-tiny-full-i1", "trainable": "full", "images": 1, "batch": 1, "seq": 256},
         {"id": "llava-tiny-frozen-i1-last", "trainable": "frozen", "images": 1, "batch": 1, "seq": 256,
          "feature_layer": -1},
         {"id": "llava-tiny-full-i1-last", "trainable": "full", "images": 1, "batch": 1, "seq": 256,
          "feature_layer": -1},
         {"id": "llava-tiny-frozen-i2-b2", "trainable": "frozen", "images": 2, "batch": 2, "seq": 384},
         {"id": "llava-tiny-full-i2-b2", "trainable": "full", "images": 2, "batch": 2, "seq": 384}]
IMAGE_TOKEN = 999


def config(feature_layer: int = -2) -> dict:
    return {"model_type": "llava", "text_config": dict(TEXT), "vision_config": dict(TOWER),
            "image_token_id": IMAGE_TOKEN, "vision_feature_layer": feature_layer, "vision_feature_select_strategy": "default",
            "projector_hidden_act": "gelu", "tie_word_embeddings": False}


def trace_case(case: dict) -> dict:
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    from transformers import AutoConfig, LlavaForConditionalGeneration  # noqa: PLC0415
    raw = config(case.get("feature_layer", -2))
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "model_type"}, model_type="llava")
    with torch.device("meta"):
        model = LlavaForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.train()
    if case["trainable"] == "frozen":
        for p in list(model.model.vision_tower.parameters()) + list(model.model.multi_modal_projector.parameters()):
            p.requires_grad_(False)
    # the placeholder check counts image tokens with .sum() (data-dependent on fake tensors): the ids are built
    # to match, so the mask alone is returned
    model.model.get_placeholder_mask = lambda input_ids, inputs_embeds, image_features: (
        (input_ids == IMAGE_TOKEN).unsqueeze(-1))
    fm = FakeTensorMode(allow_non_fake_inputs=False)
    fakeify(model, fm, torch.bfloat16)
    b, s, n_img = case["batch"], case["seq"], case["images"]
    patches = (TOWER["image_size"] // TOWER["patch_size"]) ** 2          # default strategy drops the CLS token
    tr = StorageTracker()
    with hf_patches(), fm:
        for p in model.parameters():
            tr.register(p, "weight", "")
        for bf in model.buffers():
            tr.register(bf, "weight", "buffer")
        ids = torch.zeros(b, s, dtype=torch.long)
        ids[:, : n_img * patches] = IMAGE_TOKEN
        pix = torch.zeros(b * n_img, 3, TOWER["image_size"], TOWER["image_size"], dtype=torch.bfloat16)
        labels = torch.zeros(b, s, dtype=torch.long)
        for t in (ids, pix, labels):
            tr.register(t, "act", "input")
        rec = SavedRecorder(model) if case.get("table") else None
        running.start(tr)
        with tr:
            tr.set_phase("forward")
            with rec.hooks() if rec else contextlib.nullcontext():
                out = model(input_ids=ids, pixel_values=pix, labels=labels)
            loss = out.loss        # Trainer.compute_loss keeps the loss and drops the outputs
            del out
            snap = tr.snapshot()
            if rec:
                rec.finish(tr)
        running.stop()
    saved = sum(v for (c, sub), v in snap.by_key.items() if c == "act" and sub != "input")
    del loss
    out = {**case, "patches": patches, "saved_bytes_forward_end": saved,
           "params": sum(p.numel() for p in model.parameters()),
           "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    if rec:
        out["saved_table"] = rec.table
    return out


def main() -> int:
    import transformers  # noqa: PLC0415
    out = {"generator": "python -m tools.memtrace.vision", "transformers": transformers.__version__,
           "torch": torch.__version__.split("+")[0], "config": config(), "cases": [trace_case(c) for c in CASES]}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
