"""HTML for the page, rendered at build time under CPython (scripts/build_site.py).

The form controls come from the engine's own lists of allowed values (zerocalc.plan), so a new
optimizer or preset appears without touching the page. Figures come from view.view(); the markup of
the lists (component rows, checklist, LoRA targets) is the same that assets/app.js builds at run time.
Every user-visible string goes through html.escape.
"""
from __future__ import annotations

import json
from html import escape

from zerocalc import plan as P
from zerocalc import postplan as PT
from zerocalc import stack as S
from zerocalc.model import SUPPORTED_MODEL_TYPES
from zerocalc.presets import GPUS, MODELS

from .view import CUSTOM_DIMS, FAMILY_LABELS

LABELS = {
    "framework": {"deepspeed": "DeepSpeed ZeRO", "fsdp": "PyTorch FSDP", "ddp": "PyTorch DDP",
                  "single": "Single GPU, no wrapper"},
    "offload": {"none": "none (all on GPU)", "cpu": "CPU RAM", "nvme": "NVMe (ZeRO-Infinity)"},
    "precision": {"bf16-mixed": "bf16 mixed (fp32 master weights)", "fp16-mixed": "fp16 mixed (fp32 master weights)",
                  "bf16-pure": "bf16 pure (no fp32 copy)", "fp32": "fp32"},
    "optimizer": {"adamw": "AdamW", "adamw-8bit": "AdamW 8-bit (bitsandbytes)",
                  "paged-adamw-8bit": "Paged AdamW 8-bit", "paged-adamw-32bit": "Paged AdamW 32-bit",
                  "adafactor": "Adafactor", "sgd": "SGD (momentum)", "lion": "Lion"},
    "activation_checkpointing": {"none": "none (keep all activations)", "full": "full (recompute each layer)",
                                 "selective": "selective (Megatron: attention core recomputed)",
                                 "selective-op": "selective-op (torchtitan's op-level policy)"},
    "attention": {"flash": "FlashAttention (no s×s scores)", "sdpa": "PyTorch SDPA", "eager": "eager (s×s scores)"},
    "loss": {"standard": "standard cross-entropy", "chunked": "chunked / fused cross-entropy"},
    "method": {"full": "Full fine-tuning", "lora": "LoRA", "qlora": "QLoRA (4/8-bit base)"},
    "fp8": {"none": "none (bf16 GEMMs)", "tensorwise": "tensorwise (torchao Float8Linear)",
            "rowwise": "rowwise (torchao Float8Linear)"},
}
STAGES = (
    (0, "Stage 0", "nothing sharded: every GPU holds weights, gradients and optimizer states (DDP)"),
    (1, "Stage 1", "optimizer states sharded across GPUs"),
    (2, "Stage 2", "optimizer states and gradients sharded"),
    (3, "Stage 3", "optimizer states, gradients and weights sharded; layers gathered on use"),
)
DS_INT_KNOBS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_max_live_parameters",
                "stage3_max_reuse_distance", "stage3_param_persistence_threshold", "sub_group_size")
DS_BOOL_KNOBS = ("overlap_comm", "contiguous_gradients", "zero_init")


def e(x) -> str:
    return escape(str(x), quote=True)


# --- form controls ---------------------------------------------------------------------------------


def _field(name: str, label: str, control: str, hint: str = "", cls: str = "") -> str:
    hint_html = f'<small class="hint">{e(hint)}</small>' if hint else ""
    return (f'<div class="field {cls}" data-field="{e(name)}"><label for="f-{e(name)}">{e(label)}</label>'
            f'{control}{hint_html}<p class="err" data-error-for="{e(name)}" role="alert" hidden></p></div>')


def _select(name: str, options, value, kind: str = "str") -> str:
    opts = "".join(f'<option value="{e(v)}"{" selected" if v == value else ""}>{e(t)}</option>'
                   for v, t in options)
    return f'<select id="f-{e(name)}" name="{e(name)}" data-type="{kind}">{opts}</select>'


def _number(name: str, value, kind: str = "int", placeholder: str = "") -> str:
    mode = "numeric" if kind == "int" else "decimal"
    val = "" if value is None else e(value)
    ph = f' placeholder="{e(placeholder)}"' if placeholder else ""
    return (f'<input id="f-{e(name)}" name="{e(name)}" type="text" inputmode="{mode}" autocomplete="off" '
            f'spellcheck="false" data-type="{kind}" value="{val}"{ph}>')


def _check(name: str, label: str, checked: bool, hint: str = "") -> str:
    hint_html = f'<small class="hint">{e(hint)}</small>' if hint else ""
    return (f'<div class="field check" data-field="{e(name)}"><label><input type="checkbox" id="f-{e(name)}" '
            f'name="{e(name)}" data-type="bool"{" checked" if checked else ""}> {e(label)}</label>{hint_html}'
            f'<p class="err" data-error-for="{e(name)}" role="alert" hidden></p></div>')


def _choices(name: str, values, value, labels=None, kind="str") -> str:
    labels = labels or {}
    return _select(name, [(v, labels.get(v, v)) for v in values], value, kind)


def model_select(value: str) -> str:
    groups: dict[str, list] = {}
    for m in MODELS.values():
        groups.setdefault(m.family, []).append(m)
    parts = []
    for fam, models in groups.items():
        opts = "".join(f'<option value="{e(m.id)}"{" selected" if m.id == value else ""}>{e(m.name)}</option>'
                       for m in models)
        parts.append(f'<optgroup label="{e(FAMILY_LABELS.get(fam, fam))}">{opts}</optgroup>')
    parts.append('<optgroup label="Your own"><option value="custom">Custom dimensions / pasted config.json'
                 '</option></optgroup>')
    return f'<select id="f-model" name="model" data-type="model">{"".join(parts)}</select>'


def _gib_label(n: int) -> str:
    gib = n / 2**30
    return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def gpu_select(value: str) -> str:
    groups: dict[str, list] = {}
    for g in GPUS.values():
        groups.setdefault(g.vendor or "Other", []).append(g)
    parts = []
    for vendor, gpus in groups.items():
        opts = "".join(f'<option value="{e(g.id)}"{" selected" if g.id == value else ""}>'
                       f'{e(g.name)} · {_gib_label(g.memory_bytes)}</option>' for g in gpus)
        parts.append(f'<optgroup label="{e(vendor)}">{opts}</optgroup>')
    parts.append('<optgroup label="Your own"><option value="custom">Custom GPU</option></optgroup>')
    return f'<select id="f-gpu" name="gpu" data-type="gpu">{"".join(parts)}</select>'


def section_model(p: dict) -> str:
    dims = "".join(_field(f"model.{d}", d, _number(f"model.{d}", None)) for d in CUSTOM_DIMS)
    types = _select("model.model_type", [(t, t) for t in SUPPORTED_MODEL_TYPES], "llama")
    custom = (
        '<fieldset class="custom" id="custom-model" hidden><legend>Custom model (config.json fields)</legend>'
        + _field("model.model_type", "model_type", types)
        + f'<div class="grid">{dims}</div>'
        + _check("model.tie_word_embeddings", "tie_word_embeddings (lm_head shares the embedding)", False)
        + '</fieldset>')
    gpu_custom = ('<fieldset class="custom" id="custom-gpu" hidden><legend>Custom GPU</legend><div class="grid">'
                  + _field("gpu.name", "name", '<input id="f-gpu.name" name="gpu.name" type="text" '
                           'data-type="str" value="My GPU" autocomplete="off">')
                  + _field("gpu.memory_gib", "memory (GiB)", _number("gpu.memory_gib", 80, "num"),
                           "what nvidia-smi reports as total, in GiB")
                  + '</div></fieldset>')
    paste = ('<details class="paste" id="paste-config"><summary>Your own model: paste a Hugging Face '
             'config.json</summary>'
             '<div class="field wide" data-field="model_config_json"><label for="f-model_config_json" class="sr">'
             'config.json</label>'
             '<textarea id="f-model_config_json" name="model_config_json" rows="6" spellcheck="false" '
             'placeholder="{&quot;model_type&quot;: &quot;llama&quot;, &quot;hidden_size&quot;: 4096, …}"></textarea>'
             '<small class="hint">Its fields become a custom model (the dimensions below); MoE fields '
             '(num_local_experts, num_experts_per_tok, moe_intermediate_size, …) are read from it too. '
             'Nothing leaves your browser.</small>'
             '<p class="err" data-error-for="model_config_json" role="alert" hidden></p></div></details>')
    return (_field("model", "Model", model_select(p["model"] if isinstance(p["model"], str) else "custom"),
                   "All presets, grouped by family. Parameter counts are exact for each config.", "wide")
            + paste
            + custom
            + _field("gpu", "GPU", gpu_select(p["gpu"] if isinstance(p["gpu"], str) else "custom"), "", "wide")
            + gpu_custom
            + '<div class="grid">'
            + _field("gpus_per_node", "GPUs per node", _number("gpus_per_node", p["gpus_per_node"]))
            + _field("nodes", "Nodes", _number("nodes", p["nodes"]))
            + _field("network.gbps_per_gpu", "Network between nodes (Gb/s per GPU)",
                     _number("network.gbps_per_gpu", (p.get("network") or {}).get("gbps_per_gpu"), "num",
                             "default: 400 (8x400 Gb/s class)"))
            + _field("network.kind", "Network kind",
                     _select("network.kind", [("", "default")] + [(k, k) for k in P.NETWORK_KINDS],
                             (p.get("network") or {}).get("kind", "")))
            + '</div>')


def section_zero(p: dict) -> str:
    radios = "".join(
        f'<label class="stage"><input type="radio" name="zero_stage" value="{s}" data-type="int"'
        f'{" checked" if s == p["zero_stage"] else ""}><b>{e(t)}</b><span>{e(why)}</span></label>'
        for s, t, why in STAGES)
    ds = p.get("deepspeed") or {}
    knobs = "".join(_field(f"deepspeed.{k}", k, _number(f"deepspeed.{k}", ds.get(k), "int", "DeepSpeed default"))
                    for k in DS_INT_KNOBS)
    bools = "".join(_field(f"deepspeed.{k}", k, _select(f"deepspeed.{k}", [("", "DeepSpeed default"),
                                                                          ("true", "true"), ("false", "false")],
                                                        {True: "true", False: "false"}.get(ds.get(k), ""),
                                                        "tribool"))
                    for k in DS_BOOL_KNOBS)
    return (_field("framework", "Framework", _choices("framework", P.FRAMEWORKS, p["framework"], LABELS["framework"]),
                   "", "wide")
            + f'<fieldset class="stages" data-field="zero_stage"><legend>ZeRO stage (FSDP: 2 = SHARD_GRAD_OP, '
              f'3 = FULL_SHARD)</legend>{radios}<p class="err" data-error-for="zero_stage" role="alert" hidden>'
              f'</p></fieldset>'
            + '<div class="grid">'
            + _field("offload_optimizer", "Optimizer offload",
                     _choices("offload_optimizer", P.OFFLOAD_DEVICES, p["offload_optimizer"], LABELS["offload"]))
            + _field("offload_params", "Parameter offload (stage 3)",
                     _choices("offload_params", P.OFFLOAD_DEVICES, p["offload_params"], LABELS["offload"]))
            + _field("precision", "Precision", _choices("precision", P.PRECISIONS, p["precision"], LABELS["precision"]))
            + _field("optimizer", "Optimizer", _choices("optimizer", P.OPTIMIZERS, p["optimizer"], LABELS["optimizer"]))
            + _field("fp8", "FP8 linears (bf16 only)", _choices("fp8", P.FP8_RECIPES, p.get("fp8", "none"), LABELS["fp8"]))
            + '</div>'
            + _check("optimizer_in_backward", "Optimizer step in backward (gradients freed per parameter)",
                     p["optimizer_in_backward"])
            + f'<details class="knobs"><summary>DeepSpeed knobs (zero_optimization)</summary>'
              f'<div class="grid">{knobs}{bools}</div><small class="hint">Empty = DeepSpeed 0.19 default. '
              f'Bucket sizes are in elements, not bytes.</small></details>')


def section_batch(p: dict) -> str:
    return ('<div class="grid">'
            + _field("micro_batch_size", "Micro-batch per GPU", _number("micro_batch_size", p["micro_batch_size"]))
            + _field("gradient_accumulation_steps", "Gradient accumulation",
                     _number("gradient_accumulation_steps", p["gradient_accumulation_steps"]))
            + _field("seq_len", "Sequence length (tokens)", _number("seq_len", p["seq_len"]))
            + _field("activation_checkpointing", "Activation checkpointing",
                     _choices("activation_checkpointing", P.CHECKPOINTING, p["activation_checkpointing"],
                              LABELS["activation_checkpointing"]))
            + _field("attention", "Attention", _choices("attention", P.ATTENTIONS, p["attention"], LABELS["attention"]))
            + _field("loss", "Loss", _choices("loss", P.LOSSES, p["loss"], LABELS["loss"]))
            + '</div>'
            + _check("activation_offloading", "Offload saved activations to host RAM", p["activation_offloading"])
            + section_data(p))


LENGTH_LABELS = (("", "fixed: every batch seq_len long (packed, or padded to max_length)"),
                 ("padded-longest", "padded to each batch's longest sample (HF's default collators)"),
                 ("padding-free", "padding-free: the samples concatenated (TRL padding_free, varlen)"))


def section_data(p: dict) -> str:
    """plan-v1 Extension 6 under "data": the collator's batch shapes, the sample lengths (mean / p99, or pasted:
    a histogram or a list of lengths, which app/data_view.py turns into data.histogram), the allocator. Empty
    fields are not sent (the plan's defaults: fixed lengths, the trainer's allocator)."""
    d, a = p.get("data") or {}, p.get("allocator") or {}
    lengths = "" if d.get("lengths", "fixed") == "fixed" else d["lengths"]
    exp = a.get("expandable_segments", "auto")
    hist = json.dumps(d["histogram"], separators=(",", ":")) if d.get("histogram") else ""
    grid = (_field("data.lengths", "Batches (the collator)", _select("data.lengths", LENGTH_LABELS, lengths))
            + _field("data.mean_len", "Mean sample length", _number("data.mean_len", d.get("mean_len"), "int", "tokens"))
            + _field("data.p99_len", "99th percentile length", _number("data.p99_len", d.get("p99_len"), "int", "tokens"),
                     "empty: seq_len")
            + _field("allocator.expandable_segments", "Expandable segments",
                     _select("allocator.expandable_segments", (("", "the trainer's (torchtune: on)"), ("true", "on"),
                                                               ("false", "off")),
                             "" if exp == "auto" else str(exp).lower(), "tribool"),
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
            + _field("allocator.max_split_size_mb", "max_split_size_mb",
                     _number("allocator.max_split_size_mb", a.get("max_split_size_mb"), "int", "none"),
                     "in PYTORCH_CUDA_ALLOC_CONF; at least 20")
            + _field("allocator.empty_cache_every", "empty_cache() every N steps",
                     _number("allocator.empty_cache_every", a.get("empty_cache_every"), "int", "never"),
                     "HF torch_empty_cache_steps"))
    hist_field = _field("data.histogram", "Or paste the lengths: a list, or a histogram",
                        f'<textarea id="f-data.histogram" name="data.histogram" data-type="str" rows="2" '
                        f'spellcheck="false" autocomplete="off" '
                        f'placeholder="512, 730, 2048, … or [[512, 60], [2048, 30], [4096, 10]]">{e(hist)}</textarea>',
                        'One length per sample, separated by commas or newlines, or as JSON: [len(x) for x in '
                        'ds["input_ids"]], a histogram [[length, count], ...] or {length: count}. Lengths over '
                        'seq_len count as seq_len (truncation). Used instead of the mean and p99.', "wide")
    return (f'<details class="knobs" id="data-box"><summary>Data lengths and the allocator over the run</summary>'
            f'<div class="grid">{grid}</div>{hist_field}'
            f'<p class="hint" id="data-summary" aria-live="polite" data-view="data.summary"></p></details>')


SOFTWARE_LABELS = {
    "stack.trainer": {"hf-trainer": "Hugging Face Trainer (TRL, axolotl, LLaMA-Factory)",
                      "custom-loop": "A plain PyTorch loop over HF models", "torchtune": "torchtune",
                      "litgpt": "LitGPT", "torchtitan": "torchtitan"},
    "stack.transformers": {"5": "5.x", "4.46": "4.46 - 4.57", "4.45": "4.45 or older"},
    "stack.peft_adapter_dtype": {"auto": "the trainer's (PEFT >= 0.12: fp32)", "fp32": "fp32", "base": "the base's (PEFT < 0.12)"},
    "stack.kbit_prepare": {"auto": "the trainer's", "true": "yes (prepare_model_for_kbit_training)", "false": "no",
                           "trl-bf16": "yes, then TRL's bf16 cast (TRL <= 0.24 with bf16)"},
    "stack.bitsandbytes": {"current": "current (>= 0.43.2)", "0.42": "< 0.43.2 (keeps 4-bit inputs)"},
    "stack.optimizer_impl": {"auto": "the trainer's", "fused": "fused", "foreach": "foreach", "single-tensor": "single-tensor"},
    "stack.compile": {"none": "none", "model": "the model", "model+loss": "the model and the loss"},
    "stack.fsdp_version": {1: "FSDP1 (FullyShardedDataParallel)", 2: "FSDP2 (fully_shard)"},
    "stack.cuda_context": {"lazy": "lazy (CUDA >= 11.7)", "eager": "eager (CUDA < 11.7, ~1.3 GiB)"},
    "stack.torch": {"2": "2.x", "1": "1.x (zero_grad keeps the gradients)"},
}


def section_software(p: dict) -> str:
    """Which software trains the model (plan-v1 Extension 1): the trainer, and its versions under "advanced"."""
    st = p["stack"]

    def sel(key, values, kind="str"):
        labels = SOFTWARE_LABELS[key]
        cur = st.get(key.split(".", 1)[1], values[0])      # keys added later are omitted at their default
        cur = {True: "true", False: "false"}.get(cur, cur) if kind == "autobool" else cur
        return _select(key, [(str(v).lower() if isinstance(v, bool) else v, labels.get(v, str(v))) for v in values],
                       cur, kind)
    advanced = "".join(_field(k, label, sel(k, vals, kind)) for k, label, vals, kind in (
        ("stack.transformers", "transformers", S.TRANSFORMERS_ERAS, "str"),
        ("stack.peft_adapter_dtype", "PEFT adapter dtype", S.ADAPTER_DTYPES, "str"),
        ("stack.kbit_prepare", "prepare_model_for_kbit_training", ("auto", "true", "false", "trl-bf16"),
         "autobool"),
        ("stack.bitsandbytes", "bitsandbytes", S.BNB_ERAS, "str"),
        ("stack.optimizer_impl", "torch AdamW implementation", S.OPTIMIZER_IMPLS, "str"),
        ("stack.compile", "torch.compile", S.COMPILE_MODES, "str"),
        ("stack.fsdp_version", "FSDP version", S.FSDP_VERSIONS, "int"),
        ("stack.cuda_context", "CUDA context", S.CUDA_CONTEXTS, "str"),
        ("stack.torch", "torch", S.TORCH_ERAS, "str")))
    advanced += _check("stack.fsdp_embedding_units", "FSDP2: embedding and lm_head as units of their own",
                       bool(st.get("fsdp_embedding_units", False)),
                       "torchtune's custom_sharded_layers: ['tok_embeddings', 'output']")
    run = json.dumps(p["run"], separators=(", ", ": ")) if p.get("run") else ""
    run_field = _field("run", "The run besides its steps (plan-v1 run, JSON)",
                       f'<textarea id="f-run" name="run" data-type="json" rows="2" spellcheck="false" '
                       f'placeholder=\'{{"eval": {{}}}}\'>{e(run)}</textarea>',
                       'Empty: the trainer\'s defaults. {"eval": {}} evaluates at HF\'s default batch 8; '
                       '{"eval": {"batch_size": 2}}, {"save": {"weights": "fsdp-full"}}, {"load_best_at_end": true}, '
                       '{"merge_at_end": "16bit-in-process"}.', "wide")
    return (_field("stack.trainer", "Training software", sel("stack.trainer", S.TRAINERS),
                   "Whose loop, loss and model code run: the same plan allocates differently under each.", "wide")
            + run_field
            + f'<details class="knobs" id="software-advanced"><summary>Library versions (advanced)</summary>'
              f'<div class="grid">{advanced}</div></details>')


POST_LABELS = {
    "method": {"": "none (supervised fine-tuning)", "dpo": "DPO", "ipo": "IPO", "orpo": "ORPO (no reference)",
               "simpo": "SimPO (no reference)", "kto": "KTO", "cpo": "CPO (no reference)",
               "rm": "Reward model (pairs, scalar head)", "ppo": "PPO (policy, reference, reward, critic)",
               "grpo": "GRPO (groups of completions)", "rloo": "RLOO"},
    "trainer": {"": "the default (TRL)", "trl": "TRL", "openrlhf": "OpenRLHF", "verl": "verl",
                "llamafactory": "LLaMA-Factory", "ms-swift": "ms-swift"},
    "reference": {"": "the trainer's default", "auto": "the trainer's default (auto)", "none": "none",
                  "model": "a frozen model", "adapter-disabled": "the base with the LoRA adapter disabled",
                  "precomputed": "precomputed log-probabilities", "cpu": "a model offloaded to the CPU"},
    "generator.engine": {"": "the trainer's default", "vllm": "vLLM", "hf": "HF generate"},
    "kernels": {"": "triton (default, a CUDA GPU)", "triton": "triton", "torch": "torch (no Triton)"},
    "generator.mode": {"": "colocate (default)", "colocate": "colocate (shares the training GPUs)",
                       "server": "server (GPUs of its own)"},
    "generator.sleep": {"": "0 (default: vllm_enable_sleep_mode off, stays resident)", "0": "0: stays resident",
                        "1": "1: weights to host, KV cache freed", "2": "2: weights and KV cache freed"},
}
# What the engine takes for an empty sleep level, trainer by trainer (the empty option's text; assets/app.js picks
# one as the trainer, its version and the other generator fields change). TRL `vllm_enable_sleep_mode` False,
# ms-swift `sleep_level` 0, OpenRLHF `--vllm_enable_sleep` off: level 0. verl without a generator block: its
# rollout frees vLLM between rollouts (`free_cache_engine`) at level 1 up to 0.5, 2 from 0.6
# (post/defaults.py `verl_sleep_level`); a generator block that leaves sleep unsaid reads as 0 (postplan.Generator).
SLEEP_DEFAULTS = {
    "trl": POST_LABELS["generator.sleep"][""],
    "ms-swift": "0 (default: sleep_level 0, stays resident)",
    "llamafactory": "0 (default: stays resident)",
    "openrlhf": "0 (default: --vllm_enable_sleep off, stays resident)",
    "verl-1": "1 (verl's default up to 0.5: free_cache_engine, weights to host)",
    "verl-2": "2 (verl's default from 0.6: free_cache_engine, weights and KV cache freed)",
    "verl-layered": "1 (verl's default with layered_summon: weights to host)",
}


def _opt_select(key: str, values, kind: str = "str") -> str:
    """A select whose first option, empty, sends nothing (the trainer's default)."""
    labels = POST_LABELS[key]
    return _select(f"post_training.{key}", [("", labels[""])] + [(str(v), labels.get(str(v), str(v))) for v in values],
                   "", kind)


def section_post(p: dict) -> str:
    """Post-training (plan-v1 Extension 7): the method, whose trainer runs it, the lengths, the group size, where
    the reference comes from and the rollout engine. Every field starts empty: an empty field sends nothing (the
    trainer's default); no method, no post_training block at all."""
    num = lambda k, kind="int", ph="": _number(f"post_training.{k}", None, kind, ph)   # noqa: E731
    return ('<div class="grid">'
            + _field("post_training.method", "Method", _opt_select("method", PT.METHODS))
            + _field("post_training.trainer", "Trainer", _opt_select("trainer", PT.TRAINERS))
            + _field("post_training.prompt_len", "Prompt length (tokens)", num("prompt_len", ph="default"),
                     "empty: the trainer's default (TRL DPO max_length 1024 as 512 + 512)")
            + _field("post_training.completion_len", "Completion length (tokens)", num("completion_len", ph="default"))
            + _field("post_training.num_generations", "Generations per prompt", num("num_generations", ph="default"),
                     "GRPO / RLOO group size (TRL default 8)")
            + _field("post_training.steps_per_generation", "Steps per generation (TRL)",
                     num("steps_per_generation", ph="default"), "empty: gradient_accumulation_steps")
            + _field("post_training.reference", "Reference policy",
                     _opt_select("reference", [r for r in PT.REFERENCES if r != "auto"]))
            + _field("post_training.trainer_version", "Trainer version",
                     '<input id="f-post_training.trainer_version" name="post_training.trainer_version" type="text" '
                     'data-type="str" autocomplete="off" spellcheck="false" value="" placeholder="newest modelled">',
                     "e.g. 1.14 (TRL's log-prob code changed at 1.11 and 1.15)")
            + _field("post_training.kernels", "Log-prob kernels", _opt_select("kernels", PT.KERNELS))
            + _when(_field("post_training.rpo_alpha", "RPO alpha (DPO's NLL term)", num("rpo_alpha", "num", "none"),
                           "the chosen rows' NLL weight: TRL up to 0.28 and ms-swift rpo_alpha, LLaMA-Factory "
                           "pref_ftx (DPO, IPO); empty: no NLL term"), "rpo")
            + _field("post_training.reward_model", "Reward model (JSON)",
                     '<textarea id="f-post_training.reward_model" name="post_training.reward_model" data-type="json" '
                     'rows="1" spellcheck="false" placeholder=\'{"model": null, "placement": "same-gpus"}\'></textarea>',
                     "PPO / GRPO / RLOO: a reward network (model null = the policy's size); empty: none, or PPO's own")
            + _field("post_training.value_model", "Critic (JSON, PPO)",
                     '<textarea id="f-post_training.value_model" name="post_training.value_model" data-type="json" '
                     'rows="1" spellcheck="false" placeholder=\'{"model": null, "placement": "same-gpus"}\'></textarea>',
                     "empty: PPO's critic the policy's size on the same GPUs")
            + '</div><fieldset class="generator" data-field="post_training.generator"><legend>Generator (online '
              'methods: PPO, GRPO, RLOO)</legend><div class="grid">'
            + _field("post_training.generator.engine", "Engine", _opt_select("generator.engine", PT.ENGINES))
            + _field("post_training.generator.mode", "Mode", _opt_select("generator.mode", PT.MODES))
            + _field("post_training.generator.gpu_memory_utilization", "vLLM gpu_memory_utilization",
                     num("generator.gpu_memory_utilization", "num", "default"),
                     "the fraction of each GPU vLLM takes (TRL 0.3, verl 0.5, OpenRLHF 0.95)")
            + _field("post_training.generator.sleep", "vLLM sleep level",
                     _opt_select("generator.sleep", PT.SLEEP_LEVELS, "int").replace(
                         "<select ", f"<select data-defaults=\"{e(json.dumps(SLEEP_DEFAULTS))}\" ", 1))
            + _field("post_training.generator.gpus", "Server GPUs", num("generator.gpus", ph="mode server only"))
            + _field("post_training.generator.tensor_parallel_size", "vLLM tensor parallel",
                     num("generator.tensor_parallel_size", ph="1"))
            + _field("post_training.generator.enforce_eager", "CUDA graphs",
                     _select("post_training.generator.enforce_eager",
                             [("", "captured (default)"), ("false", "captured"), ("true", "none (enforce_eager)")],
                             "", "tribool"))
            + _flag("post_training.generator.layered_summon", "Layered summon (verl rollout.layered_summon)",
                    "a LoRA actor on FSDP syncs vLLM one FSDP layer at a time", "layered")
            + '</div><p class="err" data-error-for="post_training.generator" role="alert" hidden></p></fieldset>'
            + '<fieldset class="generator" data-field="post_training.offload_between_updates" data-when="offload" hidden>'
              '<legend>Offload between updates (verl, ms-swift, OpenRLHF)</legend><div class="grid">'
            + _flag("post_training.offload_between_updates.weights", "Weights to the host",
                    "verl actor param_offload, ms-swift offload_model")
            + _flag("post_training.offload_between_updates.optimizer", "Optimizer states to the host",
                    "verl optimizer_offload, ms-swift offload_optimizer, OpenRLHF deepspeed_enable_sleep")
            + '</div><p class="err" data-error-for="post_training.offload_between_updates" role="alert" hidden></p>'
              '</fieldset><fieldset class="generator" data-field="post_training.packing" data-when="verl" hidden>'
              '<legend>Packing and token budgets (verl)</legend><div class="grid">'
            + _flag("post_training.packing.remove_padding", "Remove padding (use_remove_padding)",
                    "each micro-batch packed into one row of its real tokens (attention flash)")
            + _field("post_training.packing.update_max_tokens", "Update token budget per GPU",
                     num("packing.update_max_tokens", ph="none"),
                     "use_dynamic_bsz + ppo_max_token_len_per_gpu; empty: micro_batch_size rows")
            + _field("post_training.packing.score_max_tokens", "Log-prob token budget per GPU",
                     num("packing.score_max_tokens", ph="none"), "log_prob_max_token_len_per_gpu")
            + _field("post_training.packing.score_micro_batch_size", "Log-prob micro-batch (rows)",
                     num("packing.score_micro_batch_size", ph="none"), "log_prob_micro_batch_size_per_gpu")
            + '</div><p class="err" data-error-for="post_training.packing" role="alert" hidden></p></fieldset>'
            + '<p class="err" data-error-for="post_training" role="alert" hidden></p>')


def _when(field: str, when: str) -> str:
    """A post-training field shown only under ``when`` (data-when, assets/app.js) or while it holds a value."""
    return field.replace('<div class="field ', f'<div data-when="{e(when)}" hidden class="field ', 1)


def _flag(name: str, label: str, hint: str = "", when: str = "") -> str:
    """A post-training checkbox that sends true when ticked and nothing when not (the key's default, false), so
    an unticked box adds no block; ``when`` names the condition assets/app.js shows it under (data-when)."""
    field = _check(name, label, False, hint).replace('data-type="bool"', 'data-type="flag"', 1)
    return field.replace('<div class="field check"', f'<div class="field check" data-when="{e(when)}" hidden', 1) if when else field


def targets_html(available, chosen) -> str:
    chosen = set(chosen)
    return "".join(f'<label class="target"><input type="checkbox" name="lora.targets" value="{e(t)}" '
                   f'data-type="list"{" checked" if t in chosen else ""}> <code>{e(t)}</code></label>'
                   for t in available)


def section_lora(p: dict, available) -> str:
    lo, q = p["lora"], p["quantization"]
    methods = "".join(f'<label class="pill"><input type="radio" name="method" value="{m}" data-type="str"'
                      f'{" checked" if m == p["method"] else ""}> {e(LABELS["method"][m])}</label>'
                      for m in P.METHODS)
    return (f'<fieldset class="pills" data-field="method"><legend>Method</legend>{methods}'
            f'<p class="err" data-error-for="method" role="alert" hidden></p></fieldset>'
            + '<div class="lora-only"><div class="grid">'
            + _field("lora.rank", "Rank r", _number("lora.rank", lo["rank"]))
            + _field("lora.alpha", "Alpha", _number("lora.alpha", lo["alpha"], "num"))
            + _field("lora.dropout", "Dropout", _number("lora.dropout", lo["dropout"], "num"))
            + '</div>'
            + f'<fieldset class="targets" data-field="lora.targets"><legend>Target modules (names as in this model)'
              f'</legend><div id="targets">{targets_html(available, lo["targets"])}</div>'
              f'<p class="err" data-error-for="lora.targets" role="alert" hidden></p></fieldset>'
            + _field("lora.modules_to_save", "Modules trained in full (modules_to_save)",
                     f'<input id="f-lora.modules_to_save" name="lora.modules_to_save" type="text" data-type="csv" '
                     f'autocomplete="off" spellcheck="false" value="{e(", ".join(lo["modules_to_save"]))}" '
                     f'placeholder="e.g. embed_tokens, lm_head">', "comma-separated module names", "wide")
            + '</div>'
            + '<div class="qlora-only"><div class="grid">'
            + _field("quantization.type", "Quantization", _choices("quantization.type", P.QUANT_TYPES, q["type"]))
            + _field("quantization.compute_dtype", "Compute dtype",
                     _choices("quantization.compute_dtype", P.COMPUTE_DTYPES, q["compute_dtype"]))
            + _field("quantization.bits", "GPTQ bits", _choices("quantization.bits", P.GPTQ_BITS, q["bits"], kind="int"))
            + _field("quantization.group_size", "GPTQ group size", _number("quantization.group_size", q["group_size"]),
                     "-1: one group per column")
            + '</div>'
            + _check("quantization.double_quant", "Double quantization (quantize the scales too)", q["double_quant"])
            + '</div>')


# --- figures ---------------------------------------------------------------------------------------


def component_rows(components) -> str:
    """The breakdown table's rows; their bar widths are in prerender_css (no style attributes: CSP)."""
    return "".join(
        f'<tr data-comp="{e(c["key"])}"><th scope="row"><i class="sw seg-{e(c["key"])}"></i>{e(c["label"])}</th>'
        f'<td class="barcell"><span class="bar seg-{e(c["key"])}"></span></td>'
        f'<td class="num" data-out="per_gpu.components.{e(c["key"])}" data-bytes="{c["bytes"]}">{e(c["text"])}</td>'
        f'<td class="num share">{e(c["share"])}</td></tr>' for c in components)


def stack_segments(components) -> str:
    return "".join(f'<span class="seg seg-{e(c["key"])}" data-seg="{e(c["key"])}" '
                   f'title="{e(c["label"])}: {e(c["text"])}"></span>' for c in components)


def prerender_css(components, capacity_pct) -> str:
    """assets/prerender.css of the built page: the default plan's bar widths and capacity line, as CSS rules
    (the Content-Security-Policy forbids style attributes; assets/app.js sets them through the CSSOM later)."""
    rules = [f'#stack [data-seg="{c["key"]}"], #rows [data-comp="{c["key"]}"] .bar {{ width: {float(c["width"])}%; }}'
             for c in components if str(c["key"]).replace("_", "").isalnum()]
    rules.append(f"#over, #cap-line {{ left: {float(capacity_pct)}%; }}")
    return "/* generated by scripts/build_site.py: the default plan's widths */\n" + "\n".join(rules) + "\n"


def run_chart(chart) -> str:
    """The run chart's SVG children for the pre-rendered page (numbers and fixed labels only; assets/app.js
    rebuilds them with createElementNS on every answer)."""
    out = [f'<line class="cap" x1="0" x2="{chart["width"]}" y1="{chart["cap_y"]}" y2="{chart["cap_y"]}"></line>']
    for b in chart["bars"]:
        cls = "ph" + (" ph-over" if b["over"] else "") + (" ph-peak" if b["peak"] else "")
        out.append(f'<g class="{cls}" data-phase="{e(b["key"])}"><title>{e(b["label"])}: {e(b["text"])} GiB. '
                   f'{e(b["note"])}</title><rect x="{b["x"]}" y="{b["y"]}" width="{b["w"]}" height="{b["h"]}"></rect>'
                   f'<text class="val" x="{b["x"] + b["w"] / 2}" y="{b["y"] - 4}">{e(b["text"])}</text>'
                   f'<text class="lab" x="{b["x"] + b["w"] / 2}" y="{chart["height"] - 6}">{e(b["label"])}</text></g>')
    return "".join(out)


SVG_TAGS = ("line", "text", "polyline", "circle")


def svg_marks(marks) -> str:
    """SVG elements given as {tag, attrs, text} (app/data_view.py reserved_chart), escaped; assets/app.js builds
    the same with createElementNS."""
    out = []
    for m in marks:
        tag = m["tag"]
        assert tag in SVG_TAGS, tag
        attrs = "".join(f' {e(k)}="{e(v)}"' for k, v in m["attrs"].items())
        out.append(f'<{tag}{attrs}>{e(m.get("text", ""))}</{tag}>')
    return "".join(out)


def table_html(t) -> str:
    """A chart's hidden table ({caption, header, rows}): the same numbers as the chart, for screen readers."""
    head = "".join(f'<th scope="col">{e(h)}</th>' for h in t["header"])
    rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in t["rows"])
    return f'<caption>{e(t["caption"])}</caption><tr>{head}</tr>{rows}'


def checklist(warnings) -> str:
    if not warnings:
        return '<li class="sev-ok"><span class="sev">ok</span><span class="msg">No warnings for this plan.</span></li>'
    return "".join(f'<li class="sev-{e(w["severity"])}" data-warning="{e(w["id"])}"><span class="sev">'
                   f'{e(w["severity"])}</span><span class="msg">{e(w["message"])}'
                   + (f'<span class="fix">{e(w["fix"])}</span>' if w["fix"] else "")
                   + '</span></li>' for w in warnings)


def presets_json() -> str:
    """Data the page needs before the engine is up: preset dims (to seed the custom-model form)."""
    models = {m.id: {"name": m.name, "model_type": m.model_type,
                     **{k: m.config[k] for k in CUSTOM_DIMS + ("tie_word_embeddings",) if k in m.config}}
              for m in MODELS.values()}
    gpus = {g.id: {"name": g.name, "memory_gib": g.memory_bytes / 2**30} for g in GPUS.values()}
    return json.dumps({"models": models, "gpus": gpus}, separators=(",", ":")).replace("</", "<\\/")
