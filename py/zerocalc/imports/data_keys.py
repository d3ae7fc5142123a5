"""The data's lengths and the caching allocator's settings (plan-v1 Extension 6: ``data``, ``allocator``) read
from a trainer's config: packing and padding-free collators, HF ``group_by_length`` and
``torch_empty_cache_steps``, and ``PYTORCH_CUDA_ALLOC_CONF`` where the file (or an ``env`` block in it) sets it.

- packing (axolotl ``sample_packing``, TRL ``packing``, LLaMA-Factory ``packing`` / ``neat_packing``) fills every
  row to the sequence length: ``data.lengths: fixed``.
- TRL ``padding_free`` (trl/trainer/sft_config.py; DataCollatorForLanguageModeling concatenates the samples and
  passes position_ids) -> ``data.lengths: padding-free``; without packing it needs the samples' lengths, which a
  trainer config never holds: it is mapped when the plan already has ``data.mean_len`` or ``data.histogram``,
  and named otherwise.
- ``torch_empty_cache_steps`` (transformers training_args.py; Trainer.training_step calls the device's
  empty_cache every that many steps) -> ``allocator.empty_cache_every``.
- ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` (c10/core/AllocatorConfig.cpp parseArgs: comma-separated
  ``key:value``): ``expandable_segments`` and ``max_split_size_mb`` map; the allocator's other options are named
  as not modelled.
"""
from __future__ import annotations

from .builder import NOT_MODELLED, Builder, as_bool, as_int
from .common import ConfigImportError

ENV_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
ENV_BLOCKS = ("env", "envs", "environment", "env_vars")
NEEDS_LENGTHS = ("not mapped: data.lengths {what} needs the samples' lengths (data.mean_len or data.histogram), "
                 "which the file does not give; set them in the plan and import again")


def has_lengths(b: Builder) -> bool:
    d = b.plan.get("data") or {}
    return d.get("mean_len") is not None or d.get("histogram") is not None


def set_packing(b: Builder, key: str, value) -> bool:
    """A packing switch: on -> data.lengths fixed. Returns whether it was on."""
    on = as_bool(key, value)
    if on:
        b.set(key, "data.lengths", "fixed")
    return on


def set_unpacked(b: Builder, key: str, value, lengths: str = "padded-longest") -> None:
    """No packing: the collator pads each batch to its longest sample (or concatenates, padding-free)."""
    if has_lengths(b):
        b.set(key, "data.lengths", lengths)
    else:
        b.skip(key, value, NEEDS_LENGTHS.format(what=lengths))


def trl_collator(b: Builder, cfg: dict, take) -> None:
    """TRL SFTConfig ``packing`` and ``padding_free`` (packing wins: its rows are max_length long)."""
    packing, pf = take("packing"), take("padding_free")
    if packing is not None and set_packing(b, "packing", packing):
        if pf is not None:
            b.skip("padding_free", pf, "read: packed rows are max_length long whether or not they are padding-free")
        return
    if pf is not None and as_bool("padding_free", pf):
        set_unpacked(b, "padding_free", pf, "padding-free")
    elif packing is not None:
        set_unpacked(b, "packing", packing)
        if pf is not None:
            b.skip("padding_free", pf, "read: the collator pads each batch")
    elif pf is not None:
        b.skip("padding_free", pf, "read: the collator pads each batch (TRL's default)")


def hf_data_keys(b: Builder, cfg: dict, take) -> None:
    """HF TrainingArguments ``group_by_length`` and ``torch_empty_cache_steps``."""
    g = take("group_by_length")
    if g is not None:
        b.skip("group_by_length", g, NOT_MODELLED + " (LengthGroupedSampler batches samples of similar length, "
               "so padded-longest batches carry less padding; the plan's data block has no key for the sampler)"
               if as_bool("group_by_length", g) else "read: the sampler's default")
    every = take("torch_empty_cache_steps")
    if every is not None:
        b.set("torch_empty_cache_steps", "allocator.empty_cache_every", as_int("torch_empty_cache_steps", every))


def alloc_env(b: Builder, cfg: dict, seen: set) -> None:
    """``PYTORCH_CUDA_ALLOC_CONF`` at the top of the file or in an env block; the block's other variables are
    listed by name."""
    for var in ENV_VARS:
        if var in cfg:
            seen.add(var)
            alloc_conf(b, var, cfg[var])
    for blk in ENV_BLOCKS:
        env = cfg.get(blk)
        if not isinstance(env, dict) or not any(v in env for v in ENV_VARS):
            continue
        seen.add(blk)
        for k, v in env.items():
            if k in ENV_VARS:
                alloc_conf(b, f"{blk}.{k}", v)
            else:
                b.skip(f"{blk}.{k}", v, "not read: zerocalc knows no memory effect of this variable")


def parse_alloc_conf(key: str, text) -> dict:
    """``expandable_segments:True,max_split_size_mb:128`` -> {option: value string}."""
    if not isinstance(text, str):
        raise ConfigImportError(key, f"expected a string such as expandable_segments:True, got {text!r}")
    out = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, val = part.partition(":")
        if not sep:
            raise ConfigImportError(key, f"expected option:value, got {part!r}")
        out[name.strip()] = val.strip()
    return out


def alloc_conf(b: Builder, key: str, text) -> None:
    for name, val in parse_alloc_conf(key, text).items():
        k = f"{key}:{name}"
        if name == "expandable_segments":
            if val not in ("True", "False"):   # AllocatorConfig.cpp parseExpandableSegments: "True" or "False"
                raise ConfigImportError(k, f"expected True or False, got {val!r}")
            b.set(k, "allocator.expandable_segments", val == "True")
        elif name == "max_split_size_mb":
            if not val.isdigit() or int(val) < 20:
                raise ConfigImportError(k, f"expected an integer >= 20 (MiB), got {val!r}")
            b.set(k, "allocator.max_split_size_mb", int(val))
        else:
            b.skip(k, val, NOT_MODELLED + " (an allocator option outside plan-v1's allocator block)")


def axolotl_lengths(b: Builder, cfg: dict, take) -> None:
    """axolotl ``sample_packing`` (MultipackBatchSampler fills sequence_len) and ``pad_to_sequence_len`` (the
    collator pads to sequence_len): fixed; ``sample_packing: false`` alone pads each batch to its longest
    (axolotl's DataCollatorForSeq2Seq, padding=True). ``group_by_length`` as HF's."""
    sp, pad = take("sample_packing"), take("pad_to_sequence_len")
    if sp is not None and set_packing(b, "sample_packing", sp):
        if pad is not None:
            b.skip("pad_to_sequence_len", pad, "read: packed rows are sequence_len long")
    elif pad is not None and set_packing(b, "pad_to_sequence_len", pad):
        if sp is not None:
            b.skip("sample_packing", sp, "read: pad_to_sequence_len pads every batch to sequence_len")
    elif sp is not None:
        set_unpacked(b, "sample_packing", sp)
        if pad is not None:
            b.skip("pad_to_sequence_len", pad, "read: the collator pads each batch to its longest sample")
    elif pad is not None:
        b.skip("pad_to_sequence_len", pad, "read: the collator pads each batch to its longest sample")
    hf_data_keys(b, cfg, take)


def llamafactory_lengths(b: Builder, cfg: dict, take) -> None:
    """LLaMA-Factory ``packing`` / ``neat_packing`` (data/processor/supervised.py PackedSupervisedDatasetProcessor
    fills cutoff_len; neat_packing keeps the samples apart in attention): fixed. ``packing: false`` pads each
    batch to its longest (SFTDataCollatorWith4DAttentionMask). The HF arguments it passes through as HF's."""
    pk, neat = take("packing"), take("neat_packing")
    if neat is not None and set_packing(b, "neat_packing", neat):
        if pk is not None:
            b.skip("packing", pk, "read: neat_packing packs")
    elif pk is not None and set_packing(b, "packing", pk):
        if neat is not None:
            b.skip("neat_packing", neat, "read: packing packs")
    elif pk is not None:
        set_unpacked(b, "packing", pk)
        if neat is not None:
            b.skip("neat_packing", neat, "read: packing is off")
    elif neat is not None:
        b.skip("neat_packing", neat, "read: packing is off")
    hf_data_keys(b, cfg, take)
