"""The plan-v1 fields the tracer needs, with the contract's defaults (docs/plan-v1.md).

The engine's `zerocalc.Plan` validates the plan and fills the contract's defaults. Only single-GPU plans
are traced: sharding is not modelled here.
"""
from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class TracePlan:
    model: object                 # preset id or HF config dict
    precision: str
    optimizer: str
    micro_batch_size: int
    gradient_accumulation_steps: int
    seq_len: int
    activation_checkpointing: str
    attention: str
    loss: str
    method: str
    lora_rank: int
    lora_alpha: int
    lora_dropout: float
    lora_targets: tuple
    quant_type: str
    double_quant: bool
    compute_dtype: str
    # plan-v1 Extension 1 (`stack`): the software whose step is traced (docs/tracer.md §7)
    trainer: str = "hf-trainer"
    transformers: str = "5"
    peft_adapter_dtype: str = "auto"
    kbit_prepare: object = "auto"
    bitsandbytes: str = "current"
    optimizer_impl: str = "auto"
    optimizer_in_backward: bool = False    # torchtune's optimizer_in_bwd (tools/memtrace/tune.py only)
    causal_lm: bool = True                 # false: an encoder trained as a sequence classifier (build.py)
    encoder_decoder: bool = False          # the engine builds a whole encoder-decoder (T5, M2M100 ...): build.py
    torch_era: str = "2"                   # stack.torch: "1" = zero_grad(set_to_none=False), torch 1.x's default
    vision_tokens: int = 0                 # vision.tokens_per_sample: Mllama's cross-attention states (trace.py)


# plan features the tracer does not emulate: refuse instead of tracing something else
_UNSUPPORTED = {
    ("activation_checkpointing", "selective"): "HF has no selective checkpointing to trace",
    ("activation_offloading", True): "activation offloading is not emulated",
    ("loss", "chunked"): "chunked / fused cross-entropy is not emulated",
    ("optimizer_in_backward", True): "optimizer-in-backward is not emulated",
}
# stack values this tracer runs: the HF model code (in whichever transformers this venv has)
_STACK_TRACED = {
    "trainer": ("hf-trainer", "custom-loop"),
    "compile": ("none",),
}


def from_dict(d: dict, trainers: tuple = ("hf-trainer", "custom-loop")) -> TracePlan:
    """plan-v1 dict -> TracePlan (contract defaults for missing keys).

    Raises ValueError naming the key for features the tracer does not emulate. Sharding keys (framework,
    zero_stage, offload_*) are ignored: the trace is always one process, no wrapper (single-GPU view).
    """
    from zerocalc import Plan  # noqa: PLC0415  (validates keys and values, fills the contract's defaults)
    parsed = Plan.from_dict(dict(d))
    d = parsed.to_dict()
    st = d.get("stack") or {}
    own = st.get("trainer") in ("torchtune", "litgpt", "torchtitan")
    for (key, value), why in _UNSUPPORTED.items():
        if own and key == "loss":
            continue                    # torchtune's CEWithChunkedOutputLoss is its own code, traced as is
        if key == "optimizer_in_backward" and trainers == ("torchtune",):
            continue                    # torchtune's own register_optim_in_bwd_hooks, traced as is
        if d.get(key) == value:
            raise ValueError(f"{key}={value!r}: {why}")
    for key, ok in {**_STACK_TRACED, "trainer": trainers}.items():
        if key in st and st[key] not in ok:
            raise ValueError(f"stack.{key}={st[key]!r}: this tracer runs the Hugging Face model code only "
                             f"(traced: {', '.join(map(str, ok))})")
    if not own:
        _check_transformers_era(str(st.get("transformers", "5")))
    lora, q = d["lora"], d["quantization"]
    return TracePlan(
        model=d["model"],
        precision=d["precision"],
        optimizer=d["optimizer"],
        micro_batch_size=int(d["micro_batch_size"]),
        gradient_accumulation_steps=int(d["gradient_accumulation_steps"]),
        seq_len=int(d["seq_len"]),
        activation_checkpointing=d["activation_checkpointing"],
        attention=d["attention"],
        loss=d["loss"],
        method=d["method"],
        lora_rank=int(lora["rank"]),
        lora_alpha=int(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        lora_targets=tuple(lora["targets"]),
        quant_type=q["type"],
        double_quant=bool(q["double_quant"]),
        compute_dtype=q["compute_dtype"],
        trainer=st.get("trainer", "hf-trainer"),
        transformers=str(st.get("transformers", "5")),
        peft_adapter_dtype=st.get("peft_adapter_dtype", "auto"),
        kbit_prepare=st.get("kbit_prepare", "auto"),
        bitsandbytes=st.get("bitsandbytes", "current"),
        optimizer_impl=st.get("optimizer_impl", "auto"),
        optimizer_in_backward=bool(d["optimizer_in_backward"]),
        causal_lm=parsed.arch.causal_lm,
        encoder_decoder=is_encoder_decoder(parsed.arch.model_type),
        torch_era=str(st.get("torch", "2")),
        vision_tokens=int((d.get("vision") or {}).get("tokens_per_sample", 0)),
    )


# stack.transformers era -> the installed transformers versions that are that era (contract Extension 1)
def era_of(version: str) -> str:
    major, minor = (int(x) for x in version.split(".")[:2])
    if major >= 5:
        return "5"
    return "4.46" if minor >= 46 else "4.45"


def _check_transformers_era(era: str) -> None:
    """The traced code is the installed transformers: refuse a plan that names another era."""
    import transformers  # noqa: PLC0415
    have = era_of(transformers.__version__)
    if have != era:
        raise ValueError(f"stack.transformers={era!r}: this venv has transformers {transformers.__version__} "
                         f"(era {have!r}); run the pinned venv (make trace-stacks)")


def is_encoder_decoder(model_type: str) -> bool:
    """The model_types the engine counts as a whole encoder-decoder (model/classic.py t5, model/seq2seq.py); BART,
    mBART, Marian, Pegasus ... are counted as their causal-LM decoder (model/decoders.py: BartForCausalLM), so the
    tracer builds those as AutoModelForCausalLM too."""
    from zerocalc.model import SEQ2SEQ, T5  # noqa: PLC0415
    return model_type in T5 or model_type in SEQ2SEQ or model_type == "t5gemma"
