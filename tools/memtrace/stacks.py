"""The stack grid: plans with a plan-v1 `stack` (Extension 1), traced with the real software of that stack.

Each entry is traced by the venv whose transformers is the entry's era (`VENVS`: the tools venv for
transformers 5, `.venv-tf445` for 4.45.2, `.venv-tf448` for 4.48.x; built by `make trace-stacks`), and its
default-stack twin (the same plan without `stack`) by the tools venv. Results go to
`golden/stacks/<id>.json` (plan, versions, bytes per component at each measured moment, the peak, and the
difference from the default-stack twin); `golden/stacks/README.md` is the summary table.

  python -m tools.memtrace.stacks run [--era 5|4.46|4.45] [--only ID,...]   trace the entries of this venv
  python -m tools.memtrace.stacks defaults [--only ID,...]                   trace the default-stack twins
  python -m tools.memtrace.stacks readme                                     write golden/stacks/README.md
"""
from __future__ import annotations

import json
import os
import sys
import time

from .twins import default_twin, twin_of

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "stacks")
COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters", "buffers",
              "temporaries")
# the moments each file reports: tracker marks, plus the step's own peak and the overall peak
MOMENTS = ("forward_end", "backward_start", "backward_end", "step", "peak")
VENVS = {"5": None, "4.46": ".venv-tf448", "4.45": ".venv-tf445", "torchtune": ".venv-torchtune", "litgpt": ".venv-litgpt",
         "torchtitan": ".venv-torchtitan"}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# google-bert/bert-large-uncased config.json (the HF single-GPU guide's model), trained as a sequence classifier
BERT_LARGE = {"model_type": "bert", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096, "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2,
              "hidden_act": "gelu", "tie_word_embeddings": True}


FP16_NF4 = {"type": "nf4", "double_quant": True, "compute_dtype": "fp16"}


def _p(pid, method="full", precision="bf16-pure", ckpt="none", seq=2048, mb=1, model="llama-3.2-1b", loss="standard",
       in_bwd=False, **stack):
    d = {"id": pid, "schema": 1, "model": model, "gpu": "h200-sxm-141gb", "framework": "single", "gpus_per_node": 1,
         "nodes": 1, "zero_stage": 0, "precision": precision, "optimizer": "adamw", "micro_batch_size": mb,
         "gradient_accumulation_steps": 1, "seq_len": seq, "activation_checkpointing": ckpt,
         # the 4.x eras have no AttentionInterface hook for the FA2 profile: they run HF's own "sdpa" class
         # (tools/memtrace/build.py attention_impl), so their rows say sdpa
         "attention": "sdpa" if stack.get("transformers") in ("4.45", "4.46") else "flash",
         "loss": loss, "method": method, "stack": dict(stack)}
    if in_bwd:
        d["optimizer_in_backward"] = True
    if method in ("lora", "qlora"):
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": list(TARGETS)}
    if method == "qlora":
        d["quantization"] = {"type": "nf4", "double_quant": True, "compute_dtype": "bf16"}
    return d


STACKS = [
    # 1. the custom loop (out referenced through backward and until the next forward returns)
    _p("l1b-full-pure-custom", trainer="custom-loop", optimizer_impl="fused"),
    _p("l1b-lora-mixed-custom", "lora", "bf16-mixed", trainer="custom-loop", optimizer_impl="fused"),
    _p("l1b-qlora-mixed-custom", "qlora", "bf16-mixed", trainer="custom-loop", optimizer_impl="fused"),
    _p("l1b-full-pure-custom-auto", trainer="custom-loop"),
    # 2. torch AdamW implementations (checkpointed, so the step transient is visible next to the gradients)
    _p("l1b-full-pure-gc-foreach", ckpt="full", optimizer_impl="foreach"),
    _p("l1b-full-pure-gc-single", ckpt="full", optimizer_impl="single-tensor"),
    _p("l1b-full-mixed-gc-foreach", precision="bf16-mixed", ckpt="full", optimizer_impl="foreach"),
    _p("l1b-full-mixed-gc-single", precision="bf16-mixed", ckpt="full", optimizer_impl="single-tensor"),
    # 3. PEFT adapter dtype under bf16-pure (no autocast), prepare_model_for_kbit_training
    _p("l1b-lora-pure-fp32", "lora", peft_adapter_dtype="fp32"),
    _p("l1b-lora-pure-base", "lora", peft_adapter_dtype="base"),
    _p("l1b-qlora-mixed-kbit", "qlora", "bf16-mixed", kbit_prepare=True),
    _p("l1b-qlora-mixed-gc-kbit", "qlora", "bf16-mixed", "full", kbit_prepare=True),
    # TRL 0.9-0.24 SFTTrainer with bf16: prepare, then peft_module_casting_to_bf16 (fp32 norms, bf16 embed / head)
    _p("l1b-qlora-mixed-kbit-trlbf16", "qlora", "bf16-mixed", kbit_prepare="trl-bf16"),
    _p("l1b-qlora-mixed-gc-kbit-trlbf16", "qlora", "bf16-mixed", "full", kbit_prepare="trl-bf16"),
    # fp16 AMP (TRL SFTTrainer 0.8-0.25 prepares a 4-bit model and, without bf16, casts nothing back: issue 19)
    {**_p("l1b-qlora-fp16mixed-kbit", "qlora", "fp16-mixed", kbit_prepare=True), "quantization": FP16_NF4},
    {**_p("l1b-qlora-fp16mixed-gc-kbit", "qlora", "fp16-mixed", "full", kbit_prepare=True), "quantization": FP16_NF4},
    # the same under transformers 4.45 (fms-acceleration's QLoRA baselines: fp16 AMP, k-bit prep, reentrant ckpt)
    {**_p("l1b-qlora-fp16mixed-kbit-tf445", "qlora", "fp16-mixed", kbit_prepare=True, transformers="4.45"),
     "quantization": FP16_NF4},
    {**_p("l1b-qlora-fp16mixed-gc-kbit-tf445", "qlora", "fp16-mixed", "full", kbit_prepare=True, transformers="4.45"),
     "quantization": FP16_NF4},
    # without autocast the 4-bit layers' fp32 outputs reach SDPA: fp32 attention (fp32 adapters, PEFT's default)
    _p("l1b-qlora-pure-kbit-fp32", "qlora", kbit_prepare=True, peft_adapter_dtype="fp32"),
    # 5. bitsandbytes < 0.43.2: MatMul4Bit keeps its input (emulated from its source, see qlora.py)
    _p("l1b-qlora-mixed-bnb042", "qlora", "bf16-mixed", bitsandbytes="0.42"),
    _p("l1b-qlora-mixed-gc-bnb042", "qlora", "bf16-mixed", "full", bitsandbytes="0.42"),
    _p("l1b-qlora-mixed-bnb042-custom", "qlora", "bf16-mixed", bitsandbytes="0.42", trainer="custom-loop",
       optimizer_impl="fused"),
    # 4. older transformers (pinned venvs): logits upcast in forward / in ForCausalLMLoss, shifted copies
    _p("l1b-full-pure-tf445", transformers="4.45", optimizer_impl="fused"),
    _p("l1b-full-pure-tf445-custom", transformers="4.45", trainer="custom-loop", optimizer_impl="fused"),
    _p("l1b-full-pure-tf446", transformers="4.46", optimizer_impl="fused"),
    _p("l1b-full-pure-tf446-custom", transformers="4.46", trainer="custom-loop", optimizer_impl="fused"),
    # 6. torchtune 0.6.1 (own Llama, bf16 LoRA, CEWithChunkedOutputLoss; tools/memtrace/tune.py)
    _p("tt-l1b-full-chunked", trainer="torchtune", loss="chunked"),
    _p("tt-l1b-full-standard", trainer="torchtune"),
    _p("tt-l1b-full-gc-chunked", ckpt="full", trainer="torchtune", loss="chunked"),
    _p("tt-l1b-lora-chunked", "lora", trainer="torchtune", loss="chunked"),
    _p("tt-l1b-lora-gc-chunked", "lora", ckpt="full", trainer="torchtune", loss="chunked"),
    # qlora_llama3_2_1b: torchao NF4Tensor base weights (block 64, scalers double-quantized per 256), bf16 adapters
    _p("tt-l1b-qlora-chunked", "qlora", trainer="torchtune", loss="chunked"),
    _p("tt-l1b-qlora-gc-chunked", "qlora", ckpt="full", trainer="torchtune", loss="chunked"),
    # s 128: torchao's dequantisation transient (14 B per element of the largest weight) sets the peak
    _p("tt-l1b-qlora-s128-chunked", "qlora", seq=128, trainer="torchtune", loss="chunked"),
    # optimizer_in_bwd: each parameter stepped as its gradient lands (the torch AdamW implementations' temporaries
    # are those of one parameter), no step phase
    _p("tt-l1b-full-gc-chunked-inbwd", ckpt="full", trainer="torchtune", loss="chunked", in_bwd=True),
    _p("tt-l1b-full-gc-chunked-inbwd-foreach", ckpt="full", trainer="torchtune", loss="chunked", in_bwd=True,
       optimizer_impl="foreach"),
    _p("tt-l1b-full-chunked-inbwd-foreach", trainer="torchtune", loss="chunked", in_bwd=True,
       optimizer_impl="foreach"),
    # 6. LitGPT 0.5.13 (own GPT, bf16-true, chunked bf16 cross-entropy, loop variables kept; tools/memtrace/lit.py)
    _p("lit-l1b-full", trainer="litgpt"),
    _p("lit-l1b-lora", "lora", trainer="litgpt"),
    # Fabric bf16-mixed: an fp32 model under autocast, outputs cast back to fp32 (the Oct-2023 tutorial's default)
    _p("lit-l1b-lora-mixed", "lora", "bf16-mixed", trainer="litgpt"),
    # Fabric's bitsandbytes plugin: every nn.Linear 4-bit, lm_head and the LoRA layers' base included
    _p("lit-l1b-qlora", "qlora", trainer="litgpt"),
    # 6. torchtitan 0.3.0 (own Llama3Model, training.dtype bfloat16, pred.float() loss, its FullAC/SelectiveAC;
    # no fully_shard, eager step; tools/memtrace/titan.py)
    _p("titan-l1b-full-none", trainer="torchtitan", optimizer_impl="fused"),
    _p("titan-l1b-full-full", ckpt="full", trainer="torchtitan", optimizer_impl="fused"),
    _p("titan-l1b-full-selop", ckpt="selective-op", trainer="torchtitan", optimizer_impl="fused"),
    # b = 2: logits[..., :-1, :].contiguous() copies only when b > 1 (for b = 1 the slice is already contiguous)
    _p("l1b-full-pure-s1024-b2-tf445", seq=1024, mb=2, transformers="4.45", optimizer_impl="fused"),
    _p("l1b-full-pure-s1024-b2-tf445-custom", seq=1024, mb=2, transformers="4.45", trainer="custom-loop",
       optimizer_impl="fused"),
    _p("l1b-full-pure-s1024-b2-tf446", seq=1024, mb=2, transformers="4.46", optimizer_impl="fused"),
    _p("l1b-full-pure-s1024-b2-custom", seq=1024, mb=2, trainer="custom-loop", optimizer_impl="fused"),
    # 7. torch 1.x: Optimizer / Module.zero_grad default to set_to_none=False, so the gradients are zeroed in place
    # and stay allocated through the next forward (emulated: zero_grad(set_to_none=False) on torch 2.13)
    _p("l1b-full-pure-torch1", torch="1", optimizer_impl="fused"),
    _p("l1b-full-mixed-gc-torch1", precision="bf16-mixed", ckpt="full", torch="1", optimizer_impl="fused"),
    # 8. eager attention outside the Llama lineage under CUDA autocast (softmax on autocast's fp32 list): the HF
    # guide's bert-large sequence classifier in fp16-mixed, and GPT-2 in bf16-mixed
    {**_p("bert-large-full-fp16mixed-eager-s512-b4", precision="fp16-mixed", seq=512, mb=4, model=BERT_LARGE),
     "attention": "eager"},
    {**_p("gpt2-full-mixed-eager-s1024-b4", precision="bf16-mixed", seq=1024, mb=4, model="gpt2"),
     "attention": "eager"},
]


def era(entry: dict) -> str:
    """Which venv traces the entry: a transformers era, or "torchtune" (.venv-torchtune)."""
    if entry["stack"].get("trainer") in ("torchtune", "litgpt", "torchtitan"):
        return entry["stack"]["trainer"]
    return str(entry["stack"].get("transformers", "5"))


def venv_era() -> str:
    try:
        import transformers  # noqa: PLC0415
    except ImportError:
        import importlib.util  # noqa: PLC0415
        for name in ("litgpt", "torchtitan"):
            if importlib.util.find_spec(name):
                return name
        return "torchtune"
    from .plan import era_of  # noqa: PLC0415
    return era_of(transformers.__version__)


def versions() -> dict:
    from importlib import metadata  # noqa: PLC0415
    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "peft", "torchtune", "torchao", "litgpt", "lightning",
                 "torchtitan"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def summary(res: dict) -> dict:
    """A trace result -> {moment: {"bytes", components...}} (bytes; moments as MOMENTS)."""
    def one(snap):
        return {"bytes": snap["bytes"], **{c: snap["components"][c] for c in COMPONENTS}}
    m = res["marks"]
    out = {k: one(m[k]) for k in ("forward_end", "backward_start", "backward_end")}
    out["step"] = one(res["phase_peaks"]["step"])
    out["peak"] = one(res["peak"])
    out["peak"].update(phase=res["peak_phase"], op=res["peak_op"], step=res["peak_step"])
    out["forward_peak"] = one(res["phase_peaks"]["forward"])
    out["backward_peak"] = one(res["phase_peaks"]["backward"])
    out["steps_peak_bytes"] = [s["peak"]["bytes"] for s in res["steps"]]
    return out


def _write(path: str, obj: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")


def run(entries: list, jobs: int = 2, defaults: bool = False) -> None:
    from .grid import run_grid  # noqa: PLC0415
    t0 = time.perf_counter()
    res = run_grid(entries, jobs=jobs)
    ver = versions()
    for e, r in zip(entries, res):
        pid = e["id"]
        if "error" in r:
            print(pid, "ERROR", r["error"])
            continue
        rec = {"id": pid, "plan": {k: v for k, v in e.items() if k != "id"}, "versions": ver,
               "optimizer_impl": r.get("optimizer_impl"), "adapter_dtype": r.get("adapter_dtype"),
               "trainable_params": r["trainable_params"], "bytes": summary(r), "wall_s": r["wall_s"]}
        path = os.path.join(OUT, "_default", pid + ".json") if defaults else os.path.join(OUT, pid + ".json")
        _write(path, rec)
        print(pid, f"{r['peak_bytes'] / 2**30:.3f} GiB {r['peak_phase']} step {r['peak_step']} {r['wall_s']} s")
    print(f"total {time.perf_counter() - t0:.1f} s")


def _select(argv, pred) -> list:
    only = None
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
    return [e for e in STACKS if pred(e) and (only is None or e["id"] in only)]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import warnings  # noqa: PLC0415
    warnings.filterwarnings("ignore")
    cmd = argv[0] if argv else "run"
    if cmd == "run":
        here = argv[argv.index("--era") + 1] if "--era" in argv else venv_era()
        run(_select(argv, lambda e: era(e) == here))
    elif cmd == "defaults":
        twins, seen = [], set()
        for e in _select(argv, lambda e: True):
            t = default_twin(e)
            key = json.dumps({k: v for k, v in t.items() if k != "id"}, sort_keys=True)
            if key not in seen:
                seen.add(key)
                t["id"] = twin_of(t)
                twins.append(t)
        run(twins, defaults=True)
    elif cmd == "readme":
        from .stacks_readme import write_readme  # noqa: PLC0415
        write_readme(OUT, STACKS)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
