"""Which attention implementations each transformers model class accepts: the class flags that
``PreTrainedModel._check_and_adjust_attn_implementation`` reads (modeling_utils.py: ``_supports_flash_attn``
gates every ``flash_attention_*`` request, ``_supports_sdpa`` an explicit ``"sdpa"``; both raise ValueError at
``from_pretrained`` / ``from_config`` when False, and an unset attn_implementation falls back from sdpa to eager).

    python -m tools.archgen.attention_support   (needs the tools venv: transformers 5.24.0; writes OUT)

One entry per model_type of tests/data/architectures.json, for the class that row was built as (the whole
model: a composite's image-text-to-text class, whose flags can differ from its text model's: Gemma 3's
conditional-generation class refuses FlashAttention for the bidirectional image-token mask). The engine's
table (py/zerocalc/model/attention_support.py) is held to this file by tests/test_attention_support.py.
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHS = ROOT / "tests" / "data" / "architectures.json"
OUT = ROOT / "tests" / "data" / "attention_support.json"


def flags() -> dict:
    import transformers  # noqa: PLC0415
    out = {}
    for row in json.loads(ARCHS.read_text())["rows"]:
        if "class" not in row or row["model_type"] in out:
            continue
        cls = getattr(transformers, row["class"])
        out[row["model_type"]] = {"class": row["class"], "flash": bool(cls._supports_flash_attn),
                                  "sdpa": bool(cls._supports_sdpa)}
    return {"generator": "tools/archgen/attention_support.py", "transformers": transformers.__version__,
            "model_types": dict(sorted(out.items()))}


if __name__ == "__main__":
    data = flags()
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data.pop("model_types").items())
    OUT.write_text(json.dumps(data)[:-1] + ', "model_types": {\n' + rows + "\n}}\n")   # a line per type
