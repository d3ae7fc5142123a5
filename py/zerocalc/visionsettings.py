"""plan-v1 Extension 8: what training does to a vision-language model's tower (`vision`), parsed and checked
(PlanError naming the dotted key). What it does to memory is memory/vision.py's business.

- ``trainable``: ``frozen`` (the tower and its projector get no gradients and no optimizer states: LLaMA-Factory's
  defaults, finetuning_args.py freeze_vision_tower = freeze_multi_modal_projector = True), ``full`` (both trained
  in full; HF Trainer's behaviour when nothing is frozen), ``lora`` (LoRA adapters on the tower's and the
  projector's linears whose names are in ``lora.targets``, as PEFT matches target names across the model;
  LLaMA-Factory's freeze_vision_tower = False under LoRA);
- ``tokens_per_sample``: image (or audio) tokens per sample; they count inside ``seq_len`` (plan.py
  _check_vision), except for a model whose language model attends to them by cross-attention layers (Mllama:
  the projected vision states, images x max_num_tiles x patches, beside the text; IDEFICS: its gated
  cross-attention layers' vision states, images x patches, or x resampler_n_latents with the resampler);
- ``images_per_sample``: images each sample carries through the tower (its own activations);
- ``instruction_tokens``: the instruction tokens InstructBLIP's Q-Former reads beside its queries, per image
  (qformer_input_ids); 0 by default, and written only when set (plan.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import PlanError
from .values import check_choice, check_int, check_mapping, reject_unknown

TRAINABLE = ("frozen", "full", "lora")
MAX_IMAGES = 4096


@dataclass(frozen=True)
class VisionSettings:
    trainable: str = "frozen"
    tokens_per_sample: int = 0
    images_per_sample: int = 0
    instruction_tokens: int = 0


def parse_vision(value: Any, seq_len: int) -> VisionSettings:
    obj = check_mapping("vision", value)
    reject_unknown("vision", obj, ("trainable", "tokens_per_sample", "images_per_sample", "instruction_tokens"))
    d = VisionSettings()
    tokens = check_int("vision.tokens_per_sample", obj.get("tokens_per_sample", d.tokens_per_sample), 0, 1 << 24)
    return VisionSettings(trainable=check_choice("vision.trainable", obj.get("trainable", d.trainable), TRAINABLE),
                          tokens_per_sample=tokens,
                          images_per_sample=check_int("vision.images_per_sample",
                                                      obj.get("images_per_sample", d.images_per_sample), 0,
                                                      MAX_IMAGES),
                          instruction_tokens=check_int("vision.instruction_tokens",
                                                       obj.get("instruction_tokens", d.instruction_tokens), 0,
                                                       1 << 16))


def vision_dict(v: VisionSettings) -> dict:
    return {"trainable": v.trainable, "tokens_per_sample": v.tokens_per_sample,
            "images_per_sample": v.images_per_sample,
            **({"instruction_tokens": v.instruction_tokens} if v.instruction_tokens else {})}
