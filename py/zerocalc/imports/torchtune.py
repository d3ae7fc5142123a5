"""torchtune recipe YAML -> plan.

Read from torchtune 0.6.1 (the wheel's ``recipes/*.py`` and ``recipes/configs``): the ``model._component_``
builder names the model and the method (``lora_<model>`` LoRA, ``qlora_<model>`` QLoRA: torchao NF4 with
double-quantized scales, computed in the model dtype); ``lora_attn_modules`` (q_proj, k_proj, v_proj,
``output_proj`` = o_proj), ``apply_lora_to_mlp`` (w1, w3, w2 = gate_proj, up_proj, down_proj),
``apply_lora_to_output`` (the output head); builder defaults lora_rank 8, lora_alpha 16, lora_dropout 0.0.
The whole model is kept in ``dtype`` (bf16 -> bf16-pure: no fp32 master weights; fp32 -> fp32).
``batch_size`` is per device; ``loss: CEWithChunkedOutputLoss`` -> chunked; ``enable_activation_checkpointing``
-> full, ``enable_activation_offloading``, ``optimizer_in_bwd``; attention is torch SDPA (``modules/attention.py``).
The recipe (single device or FSDP2 ``fully_shard`` with ``reshard_after_forward``) is not in the config: it is
read from the config's header comment (``tune run <recipe>``, as every shipped config states it), else from
``fsdp_cpu_offload`` / ``fsdp_reshard_after_forward``, else from the plan's GPU count; ``custom_sharded_layers``
naming ``tok_embeddings`` and ``output`` -> ``stack.fsdp_embedding_units``. The sequence length is
``tokenizer.max_seq_len`` (null: the dataset decides; the plan keeps its seq_len).
"""
from __future__ import annotations

import re

from .builder import (ConfigImportError, NO_EFFECT, NOT_MODELLED, Builder, as_bool, as_int, as_list, as_number, as_obj,
                     describe_model)

# torchtune model builders are named ``<family><version>_<size>[_base|_instruct]`` (torchtune/models/*/__init__.py
# __all__, e.g. qwen3_0_6b_instruct, qwen2_5_1_5b_base, llama3_1_8b, gemma2_9b; lora_ / qlora_ prefixed for the
# adapters): the preset is ``<family>-<version>-<size>`` or ``<family><version>-<size>`` with ``_`` -> ``.``, when
# exactly one reading is a preset (same architecture only). Llama 3.3 builders *are* the 3.1 ones
# (torchtune/models/llama3_3/_model_builders.py: ``llama3_3_70b = llama3_1_70b``); two names carry no size.
BUILDER_ALIASES = {"llama3_3_70b": "llama3_1_70b"}
BUILDER_SPECIAL = {"phi3_mini": "phi-3-mini-4k", "phi4_14b": "phi-4"}
_VARIANT = re.compile(r"_(base|instruct)$")
_FAMILY = re.compile(r"^([a-z]+)(\d*)$")


def preset_for_builder(name: str) -> str | None:
    """A torchtune builder name (no lora_/qlora_ prefix) -> the zerocalc preset of the same architecture."""
    from ..presets import MODELS
    name = BUILDER_ALIASES.get(name, name)
    if name in BUILDER_SPECIAL:
        return BUILDER_SPECIAL[name]
    parts = _VARIANT.sub("", name).split("_")
    m = _FAMILY.match(parts[0]) if parts else None
    if not m or len(parts) < 2 or not parts[-1].endswith("b"):
        return None
    fam, head, rest = m.group(1), m.group(2), parts[1:]
    found = set()
    for cut in range(len(rest)):  # version tokens rest[:cut], size tokens rest[cut:]
        ver = ".".join(([head] if head else []) + rest[:cut])
        size = ".".join(rest[cut:])
        if not all(t.isdigit() for t in rest[:cut]) or not size[:-1].replace(".", "").isdigit():
            continue
        for cand in ((f"{fam}-{ver}-{size}", f"{fam}{ver}-{size}") if ver else (f"{fam}-{size}",)):
            if cand in MODELS:
                found.add(cand)
    return found.pop() if len(found) == 1 else None


# preset -> the torchtune builder the exports write (exports/trainers.py); the import derives names by pattern
# (preset_for_builder), so builders missing here (qwen3, llama3_3, ...) are read too.
BUILDERS = {
    "llama3_1_8b": "llama-3.1-8b", "llama3_1_70b": "llama-3.1-70b", "llama3_1_405b": "llama-3.1-405b",
    "llama3_2_1b": "llama-3.2-1b", "llama3_2_3b": "llama-3.2-3b",
    "llama2_7b": "llama-2-7b", "llama2_13b": "llama-2-13b", "llama2_70b": "llama-2-70b",
    "qwen2_5_0_5b": "qwen2.5-0.5b", "qwen2_5_1_5b_base": "qwen2.5-1.5b", "qwen2_5_1_5b_instruct": "qwen2.5-1.5b",
    "qwen2_5_7b_base": "qwen2.5-7b", "qwen2_5_7b_instruct": "qwen2.5-7b", "qwen2_5_14b_base": "qwen2.5-14b",
    "qwen2_5_14b_instruct": "qwen2.5-14b", "qwen2_5_32b_base": "qwen2.5-32b", "qwen2_5_32b_instruct": "qwen2.5-32b",
    "qwen2_5_72b_base": "qwen2.5-72b", "qwen2_5_72b_instruct": "qwen2.5-72b",
    "gemma2_2b": "gemma-2-2b", "gemma2_9b": "gemma-2-9b", "gemma2_27b": "gemma-2-27b",
    "phi3_mini": "phi-3-mini-4k", "phi4_14b": "phi-4",
}
# torchtune module names -> the HF names the plan's LoRA targets use (torchtune/models/convert_weights.py).
MODULES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
MLP = ["gate_proj", "up_proj", "down_proj"]  # w1, w3, w2 (in the plan's usual order)
OPTIMIZERS = {
    "torch.optim.AdamW": "adamw", "torch.optim.Adam": "adamw", "torch.optim.SGD": "sgd",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw-32bit", "bitsandbytes.optim.PagedAdamW32bit": "paged-adamw-32bit",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit", "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.Adam8bit": "adamw-8bit", "bitsandbytes.optim.Lion": "lion",
}
CHUNKED = ("CEWithChunkedOutputLoss", "LinearCrossEntropyLoss")
_RECIPE = re.compile(r"^#.*?\btune run (?:--\S+ \S+ )*([a-z_]+)", re.M)
_RECIPE_PY = re.compile(r"^#.*?\bin ([a-z_]+)\.py", re.M)
NO_EFFECT_KEYS = ("output_dir", "checkpointer", "tokenizer", "dataset", "seed", "shuffle", "epochs",
                  "max_steps_per_epoch", "lr_scheduler", "metric_logger", "log_every_n_steps", "log_peak_memory_stats",
                  "profiler", "device", "resume_from_checkpoint", "save_adapter_weights_only", "clip_grad_norm",
                  "log_level", "collate_fn", "dataloader", "run_val_every_n_steps", "dataset_val")


_CONFIG_NAME = re.compile(r"^#.*?--config\s+(\S+)", re.M)


def recipe_of(text: str, cfg: dict | None = None) -> str | None:
    """The recipe a shipped config names in its header comment (``tune run lora_finetune_distributed``); else
    ``single_device`` / ``distributed`` from the config's own name (``--config qwen3/0.6B_lora_single_device``
    in a comment, or an ``output_dir`` ending ``.../lora_single_device``, as torchtune's configs name them)."""
    if isinstance(text, str):
        m = _RECIPE.search(text) or _RECIPE_PY.search(text)
        if m:
            return m.group(1)
        m = _CONFIG_NAME.search(text)
        if m and ("single_device" in m.group(1) or "distributed" in m.group(1)):
            return "single_device" if "single_device" in m.group(1) else "distributed"
    out = (cfg or {}).get("output_dir")
    if isinstance(out, str):
        tail = out.rstrip("/").rsplit("/", 1)[-1]
        if "single_device" in tail:
            return "single_device"
    return None


def import_torchtune(cfg: dict, plan, text=None, loader=None):
    b = Builder("torchtune", plan)
    seen = set()

    def take(k):
        seen.add(k)
        return cfg.get(k)

    # --- model and method
    model = as_obj("model", take("model"))
    comp = model.get("_component_", "")
    if not isinstance(comp, str) or not comp:
        b.skip("model", model, "no model._component_; the plan keeps model " + describe_model(b.plan["model"]))
        comp = ""
    name = comp.rsplit(".", 1)[-1]
    method = "full"
    if name.startswith("qlora_"):
        method, name = "qlora", name[len("qlora_"):]
    elif name.startswith("lora_"):
        method, name = "lora", name[len("lora_"):]
    if comp:
        preset = preset_for_builder(name)
        if preset:
            b.set("model._component_", "model", preset)
        else:
            b.skip("model._component_", comp, f"builder {name!r} is not a zerocalc preset; the plan keeps model "
                   f"{describe_model(b.plan['model'])}")
        b.set("model._component_", "method", method)
    dtype = take("dtype") or "bf16"
    if dtype not in ("bf16", "fp32"):
        b.skip("dtype", dtype, "torchtune recipes train only in bf16 or fp32; the plan keeps precision "
                               + b.plan["precision"])
    else:
        b.set("dtype", "precision", "bf16-pure" if dtype == "bf16" else "fp32", default="dtype" not in cfg)
    if method == "qlora":
        b.set("model._component_", "quantization.type", "nf4")
        b.set("model._component_", "quantization.double_quant", True)
        b.set("dtype", "quantization.compute_dtype", "bf16" if dtype == "bf16" else "fp32")
    if method != "full":
        mods = model.get("lora_attn_modules")
        targets = []
        if mods is not None:
            for m in as_list("model.lora_attn_modules", mods):
                if m not in MODULES:
                    b.skip("model.lora_attn_modules", m, f"unknown torchtune attention module {m!r}")
                else:
                    targets.append(MODULES[m])
        if model.get("apply_lora_to_mlp"):
            targets += MLP
        if model.get("apply_lora_to_output"):
            targets.append("lm_head")
        if targets:
            b.set("model.lora_attn_modules", "lora.targets", targets)
        r = model.get("lora_rank")
        b.set("model.lora_rank", "lora.rank", 8 if r is None else as_int("model.lora_rank", r), default=r is None)
        a = model.get("lora_alpha")
        b.set("model.lora_alpha", "lora.alpha", 16 if a is None else as_number("model.lora_alpha", a), default=a is None)
        d = model.get("lora_dropout")
        b.set("model.lora_dropout", "lora.dropout", 0.0 if d is None else as_number("model.lora_dropout", d),
              default=d is None)
        if model.get("use_dora"):
            b.skip("model.use_dora", True, NOT_MODELLED + " (DoRA magnitude vectors and their activations)")
    for k, v in model.items():
        if k not in ("_component_", "lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output", "lora_rank",
                     "lora_alpha", "lora_dropout", "use_dora"):
            b.skip(f"model.{k}", v, "builder argument not modelled")

    # --- recipe -> framework
    recipe = recipe_of(text, cfg)
    world = b.plan["gpus_per_node"] * b.plan["nodes"]
    fsdp_keys = [k for k in ("fsdp_cpu_offload", "fsdp_reshard_after_forward", "custom_sharded_layers") if k in cfg]
    distributed = ("distributed" in recipe) if recipe else (bool(fsdp_keys) or world > 1)
    if not recipe:
        src = fsdp_keys[0] if fsdp_keys else "recipe"
    elif recipe in ("single_device", "distributed"):
        src = f"recipe (the config's name: {recipe})"
    else:
        src = f"recipe (header comment: tune run {recipe})"
    if distributed:
        b.set(src, "framework", "fsdp", default=not recipe and not fsdp_keys)
        reshard = take("fsdp_reshard_after_forward")
        stage = 3 if reshard is None or as_bool("fsdp_reshard_after_forward", reshard) else 2
        b.set("fsdp_reshard_after_forward", "zero_stage", stage, default=reshard is None)
        off = take("fsdp_cpu_offload")
        dev = "cpu" if off is not None and as_bool("fsdp_cpu_offload", off) else "none"
        b.set("fsdp_cpu_offload", "offload_params", dev if stage == 3 else "none", default=off is None)
        b.set("fsdp_cpu_offload", "offload_optimizer", dev, default=off is None)
        # training.shard_model fully_shards each module whose name is listed, before the root
        custom = take("custom_sharded_layers")
        if custom is not None:
            names = set(as_list("custom_sharded_layers", custom))
            both = {"tok_embeddings", "output"} <= names
            b.set("custom_sharded_layers", "stack.fsdp_embedding_units", both)
            if not both or names - {"tok_embeddings", "output"}:
                b.skip("custom_sharded_layers", sorted(names), "modelled when it names both tok_embeddings and "
                                                               "output; other names are not modelled")
    else:
        b.set(src, "framework", "single", default=not recipe)
        b.set(src, "gpus_per_node", 1, default=not recipe)
        b.set(src, "nodes", 1, default=not recipe)
        b.set(src, "offload_optimizer", "none", default=True)
        b.set(src, "offload_params", "none", default=True)

    # --- batch, sequence, memory flags
    bs = take("batch_size")
    if bs is not None:
        b.set("batch_size", "micro_batch_size", as_int("batch_size", bs))
    ga = take("gradient_accumulation_steps")
    b.set("gradient_accumulation_steps", "gradient_accumulation_steps",
          1 if ga is None else as_int("gradient_accumulation_steps", ga), default=ga is None)
    tok = as_obj("tokenizer", cfg.get("tokenizer"))
    if tok.get("max_seq_len") is not None:
        b.set("tokenizer.max_seq_len", "seq_len", as_int("tokenizer.max_seq_len", tok["max_seq_len"]))
    else:
        b.skip("tokenizer.max_seq_len", None, f"null: the samples' own lengths decide; the plan keeps seq_len "
                                              f"{b.plan['seq_len']}")
    for key, pk, on in (("enable_activation_checkpointing", "activation_checkpointing", "full"),
                        ("enable_activation_offloading", "activation_offloading", True),
                        ("optimizer_in_bwd", "optimizer_in_backward", True)):
        v = take(key)
        flag = v is not None and as_bool(key, v)
        b.set(key, pk, on if flag else ("none" if on == "full" else False), default=v is None)
    b.set("model._component_", "attention", "sdpa", default=True)

    opt = as_obj("optimizer", take("optimizer"))
    oc = _component("optimizer", opt)
    if oc:
        if oc in OPTIMIZERS:
            b.set("optimizer._component_", "optimizer", OPTIMIZERS[oc])
        else:
            b.skip("optimizer._component_", oc, f"optimizer {oc!r} is not modelled; the plan keeps "
                                                 f"{b.plan['optimizer']}")
    for k, v in opt.items():
        if k != "_component_":
            if k == "fused" and b.plan["optimizer"] == "adamw":
                b.set(f"optimizer.{k}", "stack.optimizer_impl", "fused" if as_bool(f"optimizer.{k}", v) else "foreach")
            else:
                b.skip(f"optimizer.{k}", v, NO_EFFECT)
    loss = as_obj("loss", take("loss"))
    lc = _component("loss", loss) or ""
    if lc:
        chunked = lc.rsplit(".", 1)[-1] in CHUNKED
        b.set("loss._component_", "loss", "chunked" if chunked else "standard")
        if not chunked and lc.rsplit(".", 1)[-1] != "CrossEntropyLoss":
            b.skip("loss._component_", lc, "a preference/RL loss: memory as cross-entropy fine-tuning")
    comp_flag = take("compile")
    if comp_flag:
        b.set_compile("compile", comp_flag, "model+loss")
    elif comp_flag is not None:
        b.skip("compile", comp_flag, NO_EFFECT)
    for k in ("teacher_model", "ref_checkpointer", "ref_model", "reward_and_value_model", "quantizer"):
        if k in cfg:
            b.skip(k, take(k), NOT_MODELLED + " (a second model or QAT fake-quantization)")
    for k in NO_EFFECT_KEYS:
        if k in cfg:
            b.skip(k, take(k), NO_EFFECT if cfg[k] is not None else "empty: the recipe's default")
    b.rest(cfg, seen | set(NO_EFFECT_KEYS))
    return b.result()


def _component(key: str, section: dict):
    """A section's ``_component_`` (a dotted name), or ConfigImportError naming ``key._component_``."""
    comp = section.get("_component_")
    if comp is not None and not isinstance(comp, str):
        raise ConfigImportError(f"{key}._component_", f"expected a dotted name, got {comp!r}")
    return comp
