"""What each transformers model class refuses to run, from its class flags (modeling_utils.py):
``PreTrainedModel._check_and_adjust_attn_implementation`` reads ``_supports_flash_attn`` for every
``flash_attention_*`` request and ``_supports_sdpa`` for an explicit ``"sdpa"`` (both raise ValueError at
``from_pretrained`` / ``from_config`` when False; an unset attn_implementation falls back from sdpa to eager), and
``activation_checkpointing_enable`` (``gradient_checkpointing_enable``'s target, which the HF Trainer calls for
``gradient_checkpointing=True``) raises ValueError without ``supports_gradient_checkpointing``.

    python -m tools.archgen.class_flags   (needs the tools venv: transformers 5.24.0; writes OUT)

One entry per model_type of tests/data/architectures.json, for the class that row was built as (the whole
model: a composite's image-text-to-text class, whose flags can differ from its text model's: Gemma 3's
conditional-generation class refuses FlashAttention for the bidirectional image-token mask). The engine's
table (py/zerocalc/model/class_flags.py) is held to this file by tests/test_class_flags.py.
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHS = ROOT / "tests" / "data" / "architectures.json"
OUT = ROOT / "tests" / "data" / "class_flags.json"


def flags() -> dict:
    import transformers  # noqa: PLC0415
    out = {}
    for row in json.loads(ARCHS.read_text())["rows"]:
        if "class" not in row or row["model_type"] in out:
            continue
        cls = getattr(transformers, row["class"])
        out[row["model_type"]] = {"class": row["class"], "flash": bool(cls._supports_flash_attn),
                                  "sdpa": bool(cls._supports_sdpa),
                                  "checkpointing": bool(cls.supports_gradient_checkpointing)}
    return {"generator": "tools/archgen/class_flags.py", "transformers": transformers.__version__,
            "model_types": dict(sorted(out.items()))}


if __name__ == "__main__":
    data = flags()
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data.pop("model_types").items())
    OUT.write_text(json.dumps(data)[:-1] + ', "model_types": {\n' + rows + "\n}}\n")   # a line per type
