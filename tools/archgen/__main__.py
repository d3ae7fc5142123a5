"""Ground truth for the engine's parameter counts: every transformers model_type built on the meta device.

    python -m tools.archgen [--out tests/data/architectures.json] [--only TYPE,...] [--jobs N]
    (make archgen; needs the tools venv: torch CPU wheel + transformers 5.24.0; not part of `make test`)

Rows, one per config:
- ``default:<model_type>`` for every model_type of transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
  MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
  (src/transformers/models/auto/modeling_auto.py), built from ``AutoConfig.for_model(model_type)`` (a few
  defaults leave a size field None and are filled, FILL below, as the research note did);
- ``checkpoint:<id>`` for the real config.json files in tools/archgen/checkpoints.json (written by hand from
  the published files, each with its source), ``variant:<id>`` for the switch variants in
  tools/archgen/variants.json (a default config with named fields changed, so code paths the defaults leave off
  are held too) and ``preset:<id>`` for every engine preset.

Each model is built with ``<AutoClass>.from_config(config)`` under ``torch.device("meta")`` in a forked
child (no weights, no network): the image-text-to-text class when the model_type has one (the whole model:
towers and projector), else the causal-LM class, else the seq2seq one. Recorded: the config as the engine
is given it, the class, ``sum(p.numel() for p in model.parameters())`` (tied weights once), the count per
top-level part (embeddings, blocks, norm, lm_head, vision, projector, audio, other), per module prefix, and
the first decoder block's tensor shapes. tests/test_architectures.py holds the engine to these counts.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "architectures.json"
CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints.json"
VARIANTS = Path(__file__).resolve().parent / "variants.json"

# default configs that leave a size None (the research note's fills, architectures.md "builds on meta?")
FILL = {
    "hunyuan_v1_dense": {"head_dim": 128}, "hunyuan_v1_moe": {"head_dim": 128}, "ministral": {"head_dim": 128},
    "dots1": {"n_routed_experts": 128, "num_experts_per_tok": 6, "n_shared_experts": 2},
    "nemotron": {"num_key_value_heads": 48}, "reformer": {"is_decoder": True},
    "aya_vision": {"vision_config.num_attention_heads": 16}, "hunyuan_vl": {"text_config.head_dim": 128},
    "lfm2_moe": {"layer_types": ["full_attention"] * 32},
    "dbrx": {"attn_config.rope_theta": 500000.0},
    "chameleon": {"vocabulary_map": {"<image>": 8711}, "image_token_id": 8711},
    "cohere_compass": {"text_config.rope_parameters": {"full_attention": {"rope_type": "default",
                                                                         "rope_theta": 10000.0}}},
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "granite4_vision": {"deepstack_layer_map": [], "downsample_rate": "1/4"},
    "qwen4_exp": {"text_config.indexer_n_heads": 8, "text_config.indexer_kv_heads": 1,
                  "text_config.indexer_head_dim": 128, "text_config.indexer_budget": 2048,
                  "text_config.indexer_compress_ratio": 4},
    "qwen4_exp_text": {"indexer_n_heads": 8, "indexer_kv_heads": 1, "indexer_head_dim": 128,
                       "indexer_budget": 2048, "indexer_compress_ratio": 4},
}
# model_types the engine counts as the bare model (no LM head): BERT is an encoder there, BertModel with its
# pooler as data/reference/models.json counts it (the causal-LM mapping's BertLMHeadModel has no pooler)
BARE = {"bert": "BertModel"}
# PretrainedConfig bookkeeping that says nothing about the tensors (dropped from the stored config)
NOISE = {"id2label", "label2id", "output_attentions", "output_hidden_states", "return_dict", "torchscript",
         "dtype", "torch_dtype", "transformers_version", "architectures", "problem_type", "chunk_size_feed_forward",
         "tokenizer_class", "prefix", "task_specific_params", "finetuning_task", "_name_or_path",
         "_attn_implementation_autoset", "pruned_heads", "tf_legacy_loss", "use_bfloat16", "is_encoder_decoder_",
         "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
         "_experts_implementation", "output_router_logits", "use_cache"}

PART_RULES = (   # first match wins, on the parameter's full name
    ("audio", re.compile(r"(^|\.)(audio_tower|audio_encoder|audio_model|audio|speech_encoder|encoder_audio)\.")),
    ("projector", re.compile(r"(^|\.)(multi_modal_projector|mm_projector|projector|connector|embed_vision|"
                             r"embed_audio|audio_projector|vision_projection|visual_projection|mlp1|aligner)\.")),
    ("vision", re.compile(r"(^|\.)(vision_tower|vision_model|visual|vision_encoder|image_encoder|vision|vit|"
                          r"vision_embed_tokens|vqmodel|image_newline)(\.|$)")),
    ("lm_head", re.compile(r"^(lm_head|output|proj_out|cls|lm_heads?)\.|(^|\.)lm_head\.")),
    ("blocks", re.compile(r"\.\d+\.")),
    ("embeddings", re.compile(r"(embed|wte|wpe|shared\.|word_embeddings|position_embeddings|token_type)")),
    ("norm", re.compile(r"(norm|ln_f|ln_out|layer_norm|layernorm)")),
)


def part_of(name: str) -> str:
    for part, rx in PART_RULES:
        if rx.search(name):
            return part
    return "other"


def prefix_of(name: str) -> str:
    """'model.language_model.layers.3.mlp.up_proj.weight' -> 'model.language_model.layers'."""
    out = []
    for seg in name.split(".")[:-1]:
        if seg.isdigit():
            break
        out.append(seg)
    return ".".join(out[:4]) or name


def _set(cfg, dotted: str, value) -> None:
    *path, leaf = dotted.split(".")
    for p in path:
        cfg = getattr(cfg, p)
    setattr(cfg, leaf, value)


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _clean(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if k in NOISE:
            continue
        out[k] = _clean(v) if isinstance(v, dict) and k.endswith("_config") else v
    return _jsonable(out)


def build_one(job: dict) -> dict:
    """In a forked child: config -> meta model -> the row."""
    import torch
    from transformers import AutoConfig
    from transformers.models.auto import modeling_auto as ma
    import transformers

    mt = job["model_type"]
    row = {"id": job["id"], "model_type": mt, "source": job.get("source", "")}
    try:
        if job.get("config") is not None:
            given = dict(job["config"])
            try:
                cfg = AutoConfig.for_model(**given)
            except AttributeError as e:   # a derived field the class computes (FalconConfig.head_dim)
                m = re.search(r"property '(\w+)' of", str(e))
                if not m:
                    raise
                row["dropped"] = m.group(1)
                cfg = AutoConfig.for_model(**{k: v for k, v in given.items() if k != m.group(1)})
        else:
            cfg = AutoConfig.for_model(mt)
            for k, v in FILL.get(mt, {}).items():
                _set(cfg, k, v)
            if FILL.get(mt):
                row["filled"] = FILL[mt]
            given = None
        cls_name = BARE.get(mt)
        row["mapping"] = "base" if cls_name else None
        for mapping in () if cls_name else ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
                                            "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
                                            "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"):
            names = getattr(ma, mapping)
            if mt in names:
                cls_name = names[mt]
                row["mapping"] = mapping.replace("MODEL_FOR_", "").replace("_MAPPING_NAMES", "").lower()
                break
        if cls_name is None:
            raise ValueError(f"{mt} is in none of the three mappings")
        cls = getattr(transformers, cls_name)
        with torch.device("meta"):
            model = cls._from_config(cfg)
        row["class"] = cls_name
        row["config"] = given if given is not None else _clean(cfg.to_dict())
        named = list(model.named_parameters())
        row["hf_params"] = sum(p.numel() for _, p in named)
        parts: dict[str, int] = {}
        prefixes: dict[str, int] = {}
        for n, p in named:
            parts[part_of(n)] = parts.get(part_of(n), 0) + p.numel()
            prefixes[prefix_of(n)] = prefixes.get(prefix_of(n), 0) + p.numel()
        row["parts"] = parts
        row["prefix_params"] = prefixes
        first = None
        for n, _ in named:
            m = re.match(r"(.*?\.(?:layers|h|layer|blocks|block|decoder\.layers)\.0)\.", n)
            if m and part_of(n) == "blocks":
                first = m.group(1)
                break
        row["first_block"] = first
        row["first_block_tensors"] = {n[len(first) + 1:]: list(p.shape) for n, p in named
                                      if first and n.startswith(first + ".")}
    except Exception as e:  # noqa: BLE001 - a model that does not build is a row saying why
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if job.get("config") is not None:
            row["config"] = job["config"]
    return row


def jobs(only: set | None) -> list[dict]:
    from transformers.models.auto import modeling_auto as ma
    types = sorted(set(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
                   | set(ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES))
    out = [{"id": f"default:{t}", "model_type": t} for t in types]
    for rec in json.loads(CHECKPOINTS.read_text())["checkpoints"]:
        out.append({"id": f"checkpoint:{rec['id']}", "model_type": rec["config"]["model_type"],
                    "config": rec["config"], "source": rec["source"]})
    for rec in json.loads(VARIANTS.read_text())["variants"]:
        out.append({"id": f"variant:{rec['id']}", "model_type": rec["config"]["model_type"], "config": rec["config"],
                    "source": "tools/archgen/variants.json: default config with " + ", ".join(rec["switches"])})
    sys.path.insert(0, str(ROOT / "py"))
    from zerocalc.presets import MODELS
    for pid, p in MODELS.items():
        # a None in the reference (falcon-7b's max_position_embeddings) is a field the config.json lacks
        cfg = {k: v for k, v in p.hf_config.items() if k != "head_dim_equals_hidden_over_heads" and v is not None}
        out.append({"id": f"preset:{pid}", "model_type": p.model_type, "config": cfg,
                    "source": "py/zerocalc/presets/models.json (../shared/reference/models.json)"})
    if only:
        out = [j for j in out if j["model_type"] in only or j["id"] in only]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", default="", help="comma-separated model_types or row ids (merged into --out)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    import torch  # noqa: F401 - loaded once, before the forks
    import transformers
    only = set(filter(None, args.only.split(",")))
    todo = jobs(only or None)
    from transformers.models.auto import modeling_auto as ma
    for j in todo:   # import every modelling module once, before the forks (each child would re-import it)
        for mapping in (ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                        ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES):
            if j["model_type"] in mapping:
                try:
                    getattr(transformers, mapping[j["model_type"]])
                except Exception:  # noqa: BLE001 - the child reports it
                    pass
                break
    t0 = time.time()
    rows = []
    with mp.get_context("fork").Pool(args.jobs, maxtasksperchild=1) as pool:
        for row in pool.imap_unordered(build_one, todo):
            rows.append(row)
            print(f"{row['id']}: {row.get('hf_params', row.get('error'))}", file=sys.stderr, flush=True)
    old = {}
    if only and args.out.exists():
        old = {r["id"]: r for r in json.loads(args.out.read_text())["rows"]}
    old.update({r["id"]: r for r in rows})
    out = {"generator": "tools/archgen (python -m tools.archgen)", "transformers": transformers.__version__,
           "torch": torch.__version__, "rows": sorted(old.values(), key=lambda r: r["id"])}
    head = json.dumps({k: v for k, v in out.items() if k != "rows"})[:-1]
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in out["rows"])
    args.out.write_text(f'{head}, "rows": [\n{body}\n]}}\n')   # one row a line: diffs stay readable
    bad = sum(1 for r in rows if "error" in r)
    print(f"{len(rows)} rows ({bad} do not build) in {time.time() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
