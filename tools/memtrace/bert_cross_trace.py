"""The BERT-decoder composites traced on FakeTensors (issue 20, item 3): transformers 5.24's EncoderDecoderModel
(model_type "encoder-decoder": a BertModel encoder and a BertLMHeadModel decoder with cross-attention,
add_cross_attention) and VisionEncoderDecoderModel (model_type "vision-encoder-decoder": a ViTModel encoder, frozen
as zerocalc's vision.trainable default leaves a tower, and the same BERT decoder). The fixtures
(tools/memtrace/golden/bert_cross/<id>.json, the layout of tools/memtrace/bert.py's) are what
tests/test_bert_cross_blocks.py holds the engine to (memory/blocks_bert_cross.py), within 3 %, without torch.

What a training step runs (modeling_encoder_decoder.py EncoderDecoderModel.forward): the encoder over input_ids,
decoder_input_ids = shift_tokens_right(labels), the decoder over them with encoder_hidden_states = the encoder's
last hidden state (every decoder layer's crossattention.self.key / value read it), and the loss computed by the
composite itself: `CrossEntropyLoss()(logits.reshape(-1, V), labels.view(-1))` on the decoder's logits in their
own dtype (no upcast: a bf16 log-softmax in bf16-pure, fp32 under autocast). VisionEncoderDecoderModel.forward
runs the ViT over pixel_values instead (its graph empty: frozen, pixel values need no gradient).

Also BlipForConditionalGeneration ("blip": a frozen BLIP vision model, BlipTextLMHeadModel's decoder with
crossattention and its own eager attention, loss on `prediction_scores[:, :-1].contiguous()`) and GitForCausalLM
("git": a frozen CLIP tower and visual_projection, the image tokens prefixed to the text inside BERT post-LN layers,
GitSelfAttention eager only). The batch's pixel_values (zeros, the weights' dtype) are made once and kept, as
input_ids are.

Rows (2 + 2 layers, h 256, I 1024, 4 heads, dropout 0.1, s 256, b 2): full bf16-pure FA2, full bf16-pure FA2 with
checkpointing, LoRA (query, value: PEFT's default for BERT, which also hits the crossattention's) bf16-mixed FA2,
the same with checkpointing (not BLIP / GIT: PEFT + checkpointing raises there, rows() says why), full bf16-mixed
eager; GIT's rows all eager.

The tracer's trace() calls `model(input_ids=..., labels=...)`; this driver's worker makes the plan an
encoder-decoder one (AutoModelForSeq2SeqLM builds EncoderDecoderModel / VisionEncoderDecoderModel) and, for the
vision rows, feeds zero pixel_values of the plan's image size instead of input_ids (patches below, no edit of
trace.py / plan.py).

    python -m tools.memtrace.bert_cross_trace            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.bert_cross_trace encdec-    # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import _p, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "bert_cross")

_DROP = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu"}
BERT_SMALL = {"model_type": "bert", "hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 4,
              "num_hidden_layers": 2, "vocab_size": 8000, "max_position_embeddings": 512, "type_vocab_size": 2,
              "pad_token_id": 0, **_DROP}
VIT_SMALL = {"model_type": "vit", "hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 4,
             "num_hidden_layers": 2, "image_size": 224, "patch_size": 16, "num_channels": 3,
             "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
# the decoder's config as EncoderDecoderConfig.from_encoder_decoder_configs writes it (a bert2bert config.json)
DEC = {**BERT_SMALL, "is_decoder": True, "add_cross_attention": True}
CONFIGS = {
    # google-bert/bert-base-uncased as both stacks (the EncoderDecoderModel guide's bert2bert), cut to 2 + 2 layers
    "encdec": {"model_type": "encoder-decoder", "encoder": dict(BERT_SMALL), "decoder": DEC,
               "decoder_start_token_id": 101, "pad_token_id": 0, "tie_word_embeddings": False},
    # a ViT encoder (224 px, patch 16: 197 states) and a BERT decoder (the vit-bert captioners' layout)
    "vised": {"model_type": "vision-encoder-decoder", "encoder": dict(VIT_SMALL), "decoder": DEC,
              "decoder_start_token_id": 101, "pad_token_id": 0, "tie_word_embeddings": False},
    # Salesforce/blip-image-captioning-base's layout (BlipForConditionalGeneration: a 384 px, patch 16 ViT of 577
    # states, frozen, and BlipTextLMHeadModel's BERT decoder with crossattention), 2 + 2 layers
    "blip": {"model_type": "blip", "vision_config": {"hidden_size": 256, "intermediate_size": 1024,
                                                     "num_hidden_layers": 2, "num_attention_heads": 4,
                                                     "image_size": 384, "patch_size": 16},
             "text_config": {"vocab_size": 8000, "hidden_size": 256, "encoder_hidden_size": 256,
                             "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
                             "max_position_embeddings": 512, "hidden_dropout_prob": 0.1,
                             "attention_probs_dropout_prob": 0.1, "pad_token_id": 0, "bos_token_id": 1,
                             "sep_token_id": 2, "eos_token_id": 2}},
    # microsoft/git-base's layout (GitForCausalLM: a CLIP tower of 224 px, patch 16: 197 states, frozen with the
    # visual_projection, prefixed to the text inside BERT post-LN layers), 2 layers
    "git": {"model_type": "git", "vision_config": {"hidden_size": 256, "intermediate_size": 1024,
                                                   "num_hidden_layers": 2, "num_attention_heads": 4,
                                                   "image_size": 224, "patch_size": 16},
            "vocab_size": 8000, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
            "num_attention_heads": 4, "max_position_embeddings": 512, "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
            "tie_word_embeddings": False},
}
TARGETS = ["query", "value"]


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, seq: int, ckpt: str = "none") -> dict:
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=seq,
              lora={"targets": TARGETS, "dropout": 0.05})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        if fam == "git":
            # GitSelfAttention is GIT's only attention class (modeling_git.py GIT_SELF_ATTENTION_CLASSES: "eager"):
            # every row eager
            out.append(_plan(fam, "full-pure-eager-s256-b2", "full", "bf16-pure", "eager", 256))
            out.append(_plan(fam, "full-pure-eager-gc-s256-b2", "full", "bf16-pure", "eager", 256, "full"))
            out.append(_plan(fam, "lora-mixed-eager-s256-b2-drop", "lora", "bf16-mixed", "eager", 256))
            out.append(_plan(fam, "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 256))
            continue
        out.append(_plan(fam, "full-pure-flash-s256-b2", "full", "bf16-pure", "flash", 256))
        out.append(_plan(fam, "full-pure-flash-gc-s256-b2", "full", "bf16-pure", "flash", 256, "full"))
        out.append(_plan(fam, "lora-mixed-flash-s256-b2-drop", "lora", "bf16-mixed", "flash", 256))
        if fam != "blip":
            # BLIP and GIT under PEFT with checkpointing fail in transformers 5.24: enable_input_require_grads makes
            # the word embeddings' output a leaf that requires grad, and BlipTextEmbeddings.forward's /
            # GitEmbeddings.forward's `embeddings += position_embeddings` is an in-place op on it (RuntimeError)
            out.append(_plan(fam, "lora-mixed-flash-gc-s256-b2-drop", "lora", "bf16-mixed", "flash", 256, "full"))
        out.append(_plan(fam, "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 256))
    return out


COMPOSITES = ("encoder-decoder", "vision-encoder-decoder")
# the classes a config-built step trains where no auto class maps the config for it
CLASSES = {"vision-encoder-decoder": "VisionEncoderDecoderModel", "blip": "BlipForConditionalGeneration"}
# what vision.trainable "frozen" freezes, and the vision sub-config feeding pixel_values
TOWERS = {"vision-encoder-decoder": (("encoder",), "encoder"), "blip": (("vision_model",), "vision_config"),
          "git": (("git.image_encoder", "git.visual_projection"), "vision_config")}


_PATCHED: list = []


def _patch() -> None:
    """Make the tracer build and feed the composites (in the worker process, once)."""
    import torch  # noqa: PLC0415
    if _PATCHED:
        return
    _PATCHED.append(True)

    from . import build, plan, trace  # noqa: PLC0415
    orig_is = plan.is_encoder_decoder
    plan.is_encoder_decoder = lambda mt: mt in COMPOSITES or orig_is(mt)
    orig_class = build.model_class

    class Direct:
        """The class itself where no auto class maps the config for training from a config."""
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
    orig_build = trace.build_meta_model

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        if cfg.model_type in TOWERS:
            tower, sub = TOWERS[cfg.model_type]
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            for part in tower:                            # vision.trainable "frozen": the tower takes no gradient
                base.get_submodule(part).requires_grad_(False)
            v = getattr(cfg, sub)
            px = dt["base"]
            text = cfg.model_type in ("blip", "git")      # their forward reads input_ids and labels
            # BLIP: its own forward, under PEFT's CAUSAL_LM wrapper (which calls it with input_ids and labels)
            owner = base if text else model
            fwd = owner.forward

            batch: list = []

            def forward(input_ids=None, labels=None, **kw):
                # the batch's pixel_values, made in the first step's forward (inside the fake mode) and kept, as the
                # batch's input_ids are, for the whole step
                if not batch:
                    batch.append(torch.zeros(labels.shape[0], getattr(v, "num_channels", 3), v.image_size,
                                             v.image_size, dtype=px))
                pv = batch[0]
                if text:
                    kw = {k: x for k, x in kw.items() if x is not None and k != "inputs_embeds"}
                    return fwd(pixel_values=pv, input_ids=input_ids, labels=labels, **kw)
                return fwd(pixel_values=pv, labels=labels, **kw)
            owner.forward = forward
        return model, cfg, dt
    trace.build_meta_model = build_meta


def _worker(entry: dict) -> dict:
    _patch()
    from .grid import _worker as grid_worker  # noqa: PLC0415
    return grid_worker(entry)


def run(plans: list, jobs: int = 1) -> list:
    if jobs <= 1:
        return [_worker(p) for p in plans]
    import concurrent.futures as cf  # noqa: PLC0415
    import multiprocessing as mp  # noqa: PLC0415
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        return list(ex.map(_worker, plans))


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run(todo), OUT)
