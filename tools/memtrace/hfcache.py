"""HF `generate`'s KV cache as the HF-Trainer trainers run it (TRL / ms-swift GRPO without vLLM): its dtypes and
its length, read from a real `DynamicCache` (transformers cache_utils.py `DynamicLayer.update`: `torch.cat` of the
new keys / values onto the layer's, so the cache keeps whatever dtype the attention hands it).

What runs: a tiny Llama built in the dtype the trainer loads (TRL: fp32 by default, `create_model_from_path`),
prepared by accelerate as the Trainer prepares it (`Accelerator(mixed_precision=...).prepare_model`: with
`native_amp` the forward is wrapped in autocast and `convert_outputs_to_fp32`), unwrapped as TRL's
`unwrap_model_for_generation` does (`accelerator.unwrap_model(model)`, which keeps the autocast wrapper), and
`generate(...)` under no_grad, as grpo_trainer.py `_generate_single_turn` calls it. The cache is read back from
`return_dict_in_generate=True`.

What it shows (golden/post/hf-generate-cache.json): with an fp32 model under bf16 autocast the keys are fp32 and
the values bf16. `v_proj` returns bf16 under autocast and the cache stores it; `k_proj` also returns bf16, but
RoPE multiplies it by cos / sin in the residual stream's dtype (`LlamaRotaryEmbedding.forward` returns
`cos.to(x.dtype)`, x the fp32 hidden states), and type promotion makes the rotated keys fp32. A 16-bit model
caches 16-bit keys and values; fp32 without autocast caches fp32. The cache holds prompt + new - 1 positions: the
last sampled token is never fed back.

    .venv/bin/python -m tools.memtrace.hfcache [--out tools/memtrace/golden/post/hf-generate-cache.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

OUT = "tools/memtrace/golden/post/hf-generate-cache.json"
CASES = (("fp32", "bf16"), ("fp32", "no"), ("bf16", "no"), ("bf16", "bf16"))
PROMPT, NEW, ROWS = 5, 7, 3


def _one(model_dtype: str, mixed: str) -> dict:
    """One case in this process (accelerate's state is per process: one mixed-precision setting each)."""
    import accelerate
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=128)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to({"fp32": torch.float32, "bf16": torch.bfloat16}[model_dtype])
    acc = accelerate.Accelerator(mixed_precision=mixed, cpu=True)
    unwrapped = acc.unwrap_model(acc.prepare_model(model))
    ids = torch.randint(1, 256, (ROWS, PROMPT))
    with torch.no_grad():
        out = unwrapped.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW,
                                 min_new_tokens=NEW, do_sample=False, return_dict_in_generate=True, pad_token_id=0)
    cache = out.past_key_values
    layer = cache.layers[0]
    k, v = layer.keys, layer.values
    return {"model_dtype": model_dtype, "mixed_precision": mixed, "native_amp": bool(acc.native_amp),
            "cache": type(cache).__name__, "key_bytes": k.element_size(), "value_bytes": v.element_size(),
            "key_shape": list(k.shape), "rows": ROWS, "prompt": PROMPT, "new_tokens": NEW,
            "cached_positions": k.shape[-2]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="HF generate's KV cache dtypes and length")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--case", nargs=2, metavar=("MODEL_DTYPE", "MIXED"))
    a = ap.parse_args(argv)
    if a.case:
        print(json.dumps(_one(*a.case)))
        return 0
    import accelerate
    import torch
    import transformers
    rows = []
    for md, mixed in CASES:
        r = subprocess.run([sys.executable, "-m", "tools.memtrace.hfcache", "--case", md, mixed], check=True,
                           capture_output=True, text=True)
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    doc = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "accelerate": accelerate.__version__}, "cases": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
