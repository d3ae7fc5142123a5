"""Which phase of the run a log shows, from the frames it prints (plan-v1 Extension 3 ``phase``, Extension 5 names).

Frames are read in every form a pasted log carries them, each turned into the function names it shows, outermost
first:

* Python tracebacks (``File "x.py", line 12, in evaluate`` and the source line under it), also behind a rank or
  worker prefix (``[rank0]:``, ``(WorkerDict pid=1)``) or wrapped by a terminal (``..., line 170, in step``);
* rich tracebacks (``trainer.py:2830 in save_model`` and the ``❱`` line) and IPython's (``File x.py:1184, in
  DeepSpeedEngine._configure_optimizer(...)``, before IPython 8 ``x/trainer.py in predict(self, ...)``, and the
  ``---->`` line);
* stack dumps of a hang, innermost first: py-spy (``Thread 42 (idle): "MainThread"`` then ``backward
  (torch/autograd/__init__.py:266)``) and faulthandler (``Thread 0x7f.. (most recent call first):`` then ``File
  "x.py", line 2477 in barrier``); the main thread's stack decides.

A source line names the call it makes (``trainer.evaluate(``), so a frame cut off by the excerpt still counts.

Two tiers of names, each from the function names of the code that runs that phase:

* run phases (Extension 5): ``load`` (transformers ``from_pretrained``, ``_load_pretrained_model``,
  ``_load_state_dict_into_meta_model``; accelerate ``set_module_tensor_to_device``; DeepSpeed zero.Init's
  ``_post_init_method``; ``nn.Module.load_state_dict``), ``init`` (``deepspeed.initialize``, DeepSpeedEngine
  ``_configure_distributed_model`` / ``_configure_optimizer`` / ``_configure_zero_optimizer``, ZeRO
  ``initialize_optimizer_states``, accelerate ``prepare``, ``init_process_group``, FSDP2 ``fully_shard``),
  ``eval`` (HF Trainer ``evaluate`` / ``evaluation_loop`` / ``prediction_step`` / ``predict``, Lightning
  ``validation_step``, LitGPT ``validate``, any ``evaluate*``), ``generate`` (``GenerationMixin.generate`` and its
  decoding loops ``_sample`` / ``greedy_search`` / ``beam_search``, TRL ``unwrap_model_for_generation``),
  ``save`` (HF ``save_model`` / ``_save_checkpoint`` / ``_save``, ``save_pretrained``, DeepSpeed
  ``save_checkpoint`` / ``_zero3_consolidated_16bit_state_dict``, Lightning ``dump_checkpoint``,
  ``Module.state_dict``, ``torch.save``), ``resume`` (HF ``_load_from_checkpoint`` /
  ``_load_optimizer_and_scheduler`` / ``_load_best_model``, DeepSpeed ``load_checkpoint``,
  ``Optimizer.load_state_dict``), ``merge`` (PEFT ``merge_and_unload`` / ``_unload_and_optionally_merge`` /
  ``merge_adapter``, ms-swift ``merge_lora``, Unsloth ``save_pretrained_merged``); the innermost one decides;
* the moments of a training step, when no run phase is named: ``step`` (``Optimizer.step``, AdamW's
  ``_multi_tensor_adamw``, GradScaler ``_maybe_opt_step``, ``clip_grad_norm_``), ``backward``
  (``Tensor.backward``, ``_engine_run_backward``, ``run_backward``, ZeRO's gradient reduction hooks), ``loss``
  (``cross_entropy``, ``log_softmax``, HF ``loss_function`` / ``ForCausalLMLoss`` / ``fixed_cross_entropy``, the
  ``forward`` of a loss module: torch/nn/modules/loss.py, a fused ``*cross_entropy*.py``),
  ``forward`` (``forward``, ``Module._call_impl``); the innermost decides, except that a forward or loss frame
  below a backward frame is activation recomputation (torch/utils/checkpoint.py) and stays ``backward``.

DeepSpeed's ``see_memory_usage`` lines name their moment too (runtime/engine.py, zero/stage3.py,
zero/stage_1_and_2.py, zero/parameter_offload.py): a log with no frames takes the phase of the last one.
A log without any frame structure falls back to matching its lines (``classify.legacy_phase``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

RUN_PHASES = ("load", "init", "eval", "generate", "save", "resume", "merge")
STEP_MOMENTS = ("forward", "loss", "backward", "step")


def _names(*names: str) -> re.Pattern:
    return re.compile(r"^(?:" + "|".join(names) + r")$")


# function name -> run phase (checked in this order; names are whole function names)
RUN_RULES = (
    ("merge", _names("merge_and_unload", "_unload_and_optionally_merge", "merge_adapter", r"merge_lora\w*",
                     "save_pretrained_merged", "merge_and_save", "_merge_lora_weights")),
    ("resume", _names("_load_from_checkpoint", "_load_optimizer_and_scheduler", "_load_best_model",
                      "load_checkpoint", "_load_checkpoint", "_load_zero_checkpoint", "restore",
                      "restore_training_state", "_load_rng_state", "load_optimizer_state")),
    ("save", _names("save_model", "_save_checkpoint", "_save", "save_checkpoint", "_save_zero_checkpoint",
                    "_save_checkpoint_files", "save_pretrained", "save_state", "_save_optimizer_and_scheduler",
                    r"_?zero3_consolidated_16bit_state_dict", "dump_checkpoint", "save", "state_dict",
                    "_save_to_state_dict", "get_peft_model_state_dict", "gather_cpu_state_dict",
                    "get_model_state_dict", "get_optimizer_state_dict", "optim_state_dict", "_full_post_state_dict_hook",
                    "save_file", "save_torch_state_dict")),
    # GenerationMixin's decoding loops, transformers 4.x names then the 4.39+ private ones
    ("generate", _names("generate", "_sample", "sample", "greedy_search", "_greedy_search", "beam_search",
                        "_beam_search", "beam_sample", "_beam_sample", "group_beam_search", "_group_beam_search",
                        "constrained_beam_search", "_constrained_beam_search", "contrastive_search",
                        "_contrastive_search", "assisted_decoding", "_assisted_decoding",
                        "unwrap_model_for_generation", "_generate_and_score_completions", "generate_completions",
                        "_prepare_cache_for_generation", "generate_example")),
    ("eval", _names(r"evaluate\w*", "_evaluate", "evaluation_loop", "prediction_loop", "prediction_step", "predict",
                    "validate", "validation_step", "_evaluation_step", "evaluation_step", "test_step",
                    "run_evaluation", "_run_evaluation", "eval_step", "validation_loop")),
    ("load", _names("from_pretrained", "_load_pretrained_model", r"_load_state_dict_into_\w+", "load_state_dict",
                    "_load_from_state_dict", "set_module_tensor_to_device", "load_checkpoint_and_dispatch",
                    "dispatch_model", "caching_allocator_warmup", "_materialize_copy", "load_adapter",
                    "_post_init_method", "load_model", "load_pretrained", "load", "_load")),
    ("init", _names("initialize", "_configure_distributed_model", "_configure_optimizer",
                    "_configure_zero_optimizer", "_configure_basic_optimizer", "initialize_optimizer_states",
                    "_setup_for_real_optimizer", "_create_fp16_partitions", "_create_fp32_partitions",
                    "_broadcast_model", "prepare", "_prepare_deepspeed", "_prepare_fsdp", "prepare_model",
                    "init_process_group", "fully_shard", "_move_model_to_device", "_wrap_model",
                    "create_optimizer", "_setup_model", "_setup_optimizer", "configure_optimizers",
                    "_init_param_and_grad_bufs")),
)
STEP_RULES = (
    ("step", _names("step", "_maybe_opt_step", "optimizer_step", "_optimizer_step", "_take_model_step",
                    r"_multi_tensor_adam\w*", r"_single_tensor_adam\w*", r"_fused_adam\w*", "adam", "adamw",
                    "_init_group", r"clip_grad_norm_?", "_clip_grad_norm", r"unscale_", "_unscale_grads_",
                    "run_optimizer_step")),
    ("backward", _names("backward", "run_backward", "_engine_run_backward", "grad", "_post_backward_hook",
                        "_post_backward", "reduce_ready_partitions_and_remove_grads",
                        "reduce_independent_p_g_buckets_and_remove_grads", "average_tensor",
                        "allreduce_gradients", "reduce_partition_and_remove_grads", "unpack_hook")),
    ("loss", _names("cross_entropy", "log_softmax", "nll_loss", "loss_function", "ForCausalLMLoss",
                    "fixed_cross_entropy", "cross_entropy_loss", "chunked_cross_entropy", "selective_log_softmax",
                    r"Liger\w*CrossEntropy\w*", "loss_fct", "loss_forward")),
    ("forward", _names("forward", "_call_impl", "_wrapped_call_impl", "new_forward", "pre_sub_module_forward",
                       "fetch_sub_module", "_pre_forward")),
)

# frame forms -> the function name they show
_PREFIX = re.compile(r"^(?:\s*(?:worker-\d+:|\[rank\d+\]:|\(\w+ pid=\d+\)|\d\d:\d\d:\d\d\.\d+|[│|>]))+")
_PY_FRAME = re.compile(r"line \d+,? in ([\w<>.]+)\s*[│|]?\s*$")
_NB_FRAME = re.compile(r"^\s*File \S+:\d+, in ([\w<>.]+)\(")
_IPY7_FRAME = re.compile(r"^\s*\S+\.py in ([\w<>]+)\(")          # IPython < 8: "/x/trainer.py in predict(self, ...)"
_RICH_FRAME = re.compile(r"(?:^|[:\s])\d+ in ([\w<>]+)\s*[│|]?\s*$")
_SPY_FRAME = re.compile(r"^\s+([\w<>]+) \(([^()]+):\d+\)\s*$")
_ARROW = re.compile(r"^\s*(?:-+>|❱)\s*\d*\s*[│|\s]*(.*)$")
_LOSS_FILE = re.compile(r"(?:loss|cross_entropy)\w{0,40}\.py", re.IGNORECASE)
_CALL = re.compile(r"(?<!\w)([A-Za-z_]\w*)\s*\(")
MAX_LINE = 2000            # longer lines are no frame (a pasted blob): skipped, which keeps a 200 KiB paste linear
_CODE = re.compile(r"^\s+(?:return |yield |await |raise )?(?:[\w.\[\]'\"]+(?:\s*,\s*[\w.\[\]]+)*\s*[-+*/]?=\s*)?"
                   r"[\w.\[\]]+\(")
# dump headers: innermost first
_SPY_THREAD = re.compile(r"^\s*Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active)[^)]*\)(?::\s*\"([^\"]*)\")?")
_FH_THREAD = re.compile(r"^\s*(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):")
_PY_HEAD = re.compile(r"Traceback \(most recent call last\)")

# DeepSpeed see_memory_usage("<label>") -> step moment or run phase
_SEE = re.compile(r"see_memory_usage\]\s+(?!MA |CPU Virtual)(.+?)\s*$")


@dataclass(frozen=True)
class Block:
    """One stack: function names outermost first, where each came from, and the thread's name if a dump."""
    names: tuple
    start: int                 # line index of the first frame
    end: int                   # line index of the last frame
    thread: str | None = None


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\n"))


@lru_cache(maxsize=8)
def blocks(text: str) -> tuple:
    """Every stack in the log, each outermost first (cached: the kind and the phase both read them)."""
    out, names, start, end, thread, reverse = [], [], None, None, None, False
    prev_frame = False

    def close():
        nonlocal names, start, end
        if names:
            out.append(Block(tuple(reversed(names)) if reverse else tuple(names), start, end, thread))
        names, start, end = [], None, None

    for i, raw in enumerate(text.splitlines()):
        if len(raw) > MAX_LINE:
            prev_frame = False
            continue
        line = _strip(raw)
        spy, fh = _SPY_THREAD.match(line), _FH_THREAD.match(line)
        if spy or fh or _PY_HEAD.search(line):
            close()
            reverse = bool(spy or fh)
            thread = (spy.group(1) or "") if spy else ("MainThread" if fh and fh.group(1) == "Current thread"
                                                      else (fh.group(1) if fh else None))
            prev_frame = False
            continue
        got = []
        m = (_NB_FRAME.match(line) or _PY_FRAME.search(line) or _SPY_FRAME.match(line)
             or _IPY7_FRAME.match(line) or _RICH_FRAME.search(line))
        if m:
            fn = m.group(1).rsplit(".", 1)[-1]
            got.append(fn)
            if fn == "load_state_dict" and "optim" in line:
                got[-1] = "load_optimizer_state"          # Optimizer.load_state_dict: a resume, not a load
            elif fn == "forward" and _LOSS_FILE.search(line):
                got[-1] = "loss_forward"                  # a loss module's forward (torch/nn/modules/loss.py)
            prev_frame = True
        else:
            arrow = _ARROW.match(line)
            src = arrow.group(1) if arrow else (line if prev_frame or _CODE.match(line) else None)
            if src:
                calls = _CALL.findall(src)
                if "optimizer.load_state_dict(" in src.replace(" ", ""):
                    calls = ["load_optimizer_state"]
                got.extend(calls)
            prev_frame = False
        if got:
            names.extend(got)
            start = i if start is None else start
            end = i
    close()
    return tuple(out)


def _tag(name: str, rules) -> str | None:
    for phase, rx in rules:
        if rx.match(name):
            return phase
    return None


@dataclass(frozen=True)
class PhaseReading:
    phase: str                 # a run phase, a step moment, or "unknown"
    evidence: str | None       # the function name (or DeepSpeed label) that decided


def read_block(b: Block) -> PhaseReading:
    """The innermost run phase named; else the innermost step moment (recomputation stays backward)."""
    for name in reversed(b.names):
        tag = _tag(name, RUN_RULES)
        if tag is not None:
            return PhaseReading(tag, name)
    phase, why = "unknown", None
    for name in b.names:
        tag = _tag(name, STEP_RULES)
        if tag is None or (phase == "backward" and tag in ("forward", "loss")):
            continue
        phase, why = tag, name
    return PhaseReading(phase, why)


def see_memory_usage_phase(text: str) -> PhaseReading | None:
    """The moment of the last DeepSpeed ``see_memory_usage`` label in the log (its own words), if any."""
    labels = [m.group(1) for m in (_SEE.search(_strip(raw)) for raw in text.splitlines() if len(raw) <= MAX_LINE)
              if m]
    if not labels:
        return None
    last = labels[-1]
    low = last.lower()
    if "backward" in low or "gradients into partition" in low or "partitioning gradients" in low or "ipg" in low:
        phase = "backward"
    elif "forward" in low:
        phase = "forward"
    elif any(w in low for w in ("step", "norm", "overflow", "optimizer tensors", "optimizer sub group",
                                "optimizer before all-gather")):
        phase = "step"
    elif "get_layer_state_dict" in low or "gatheredparameters" in low:
        phase = "save"
    else:
        phase = "init"            # engine set-up, partitioning, optimizer-state creation, ZeRO-Offload init
    return PhaseReading(phase, f"see_memory_usage: {last}")


def read(text: str, stop: int | None = None) -> PhaseReading | None:
    """The phase the log's frames show, or None when it prints no frame that names one.

    ``stop`` is the line of the error (a CUDA OOM message): the stack printed just before it decides; else a
    dump's main thread; else the last stack that names a phase."""
    bs = [b for b in blocks(text)]
    readings = [(b, read_block(b)) for b in bs]
    named = [(b, r) for b, r in readings if r.phase != "unknown"]
    if not named:
        return see_memory_usage_phase(text)
    if stop is not None:
        before = [(b, r) for b, r in named if b.start <= stop]
        if before:
            return before[-1][1]
    main = [(b, r) for b, r in named if b.thread == "MainThread"]
    return (main or named)[-1][1]


def run_phase(phase: str) -> str:
    """The Extension 5 run phase a doctor phase belongs to: the step's moments are the ``step`` phase."""
    return "step" if phase in STEP_MOMENTS else phase
