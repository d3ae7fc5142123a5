"""The plan (zerocalc's one input, contract plan-v1): parse, validate, serialise.

Every key is optional; a missing key takes the contract's default. Unknown keys, wrong types and
impossible values raise PlanError naming the key, e.g. ``micro_batch_size: must be an integer from 1
to 65536, got 0``. Nothing here knows about memory. The model and the GPU are resolved once per plan
(``plan.arch``, ``plan.gpu_spec``): every layer above reads those, never ``plan.model`` again.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

from .datasettings import AllocatorSettings, DataSettings, allocator_dict, data_dict, parse_allocator, parse_data
from .errors import PlanError
from .hardware import GpuSpec, gpu_spec
from .postplan import check_post_training, parse_post_training, post_training_to_dict
from .runplan import RunSettings, parse_run, run_to_dict
from .stack import LATE_KEYS, StackSettings, check_stack, parse_stack
from .visionsettings import VisionSettings, parse_vision, vision_dict
from .values import (check_bool, check_choice, check_int, check_mapping, check_number, reject_unknown,
                     show)
from .values import freeze as _freeze, thaw as _thaw
from .model import ModelArch, resolve_model
from .presets import GPUS, MODELS

SCHEMA = 1


# Allowed values, in the order the UI lists them.
FRAMEWORKS = ("deepspeed", "fsdp", "ddp", "single")
OFFLOAD_DEVICES = ("none", "cpu", "nvme")
PRECISIONS = ("bf16-mixed", "fp16-mixed", "bf16-pure", "fp32")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit", "adafactor", "sgd", "lion")
CHECKPOINTING = ("none", "full", "selective", "selective-op")
ATTENTIONS = ("flash", "sdpa", "eager")
LOSSES = ("standard", "chunked")
METHODS = ("full", "lora", "qlora")
QUANT_TYPES = ("nf4", "fp4", "int8", "gptq")
GPTQ_BITS = (4, 8)
COMPUTE_DTYPES = ("bf16", "fp16", "fp32")
FP8_RECIPES = ("none", "tensorwise", "rowwise")     # Extension 9: torchao Float8LinearConfig recipes
LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Upper bounds: far beyond any real run, low enough that arithmetic stays meaningful.
MAX_GPUS_PER_NODE = 64
MAX_NODES = 8192
MAX_MICRO_BATCH = 65536
MAX_ACCUMULATION = 1 << 20
MAX_SEQ_LEN = 1 << 24
MAX_LORA_RANK = 65536
MAX_BUFFER_ELEMENTS = 1 << 40

# DeepSpeed `zero_optimization` knobs that change memory; value kinds for validation.
DEEPSPEED_INT_KNOBS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_max_live_parameters",
                       "stage3_max_reuse_distance", "stage3_param_persistence_threshold", "sub_group_size",
                       "zero_hpz_partition_size")
DEEPSPEED_BOOL_KNOBS = ("overlap_comm", "contiguous_gradients", "zero_init")
DEEPSPEED_AUTO_OK = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                     "gradient_clipping")
DEEPSPEED_KNOBS = DEEPSPEED_INT_KNOBS + DEEPSPEED_BOOL_KNOBS + ("gradient_clipping",)
NETWORK_KINDS = ("infiniband", "roce", "ethernet", "efa")    # plan-v1 Extension 2: `network`
GPU_RATES = ("bf16_dense_tflops", "fp16_dense_tflops", "memory_bandwidth_gb_s", "link_gb_s", "pcie_gb_s",
             "fp8_dense_tflops")


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 16
    alpha: float = 32
    dropout: float = 0.05
    targets: tuple[str, ...] = LLAMA_TARGETS
    modules_to_save: tuple[str, ...] = ()     # PEFT modules_to_save: trained in full beside the adapters


@dataclass(frozen=True)
class QuantSettings:
    type: str = "nf4"
    double_quant: bool = True
    compute_dtype: str = "bf16"
    bits: int = 4                             # gptq only
    group_size: int = 128                     # gptq only; -1 = one group per column


@dataclass(frozen=True)
class Plan:
    """One training setup. Attribute names are the plan-v1 keys."""
    model: Any = "llama-3.1-8b"                # preset id (str) or a read-only mapping of config.json fields
    gpu: Any = "a100-sxm4-80gb"                # preset id (str) or a read-only mapping {name, memory_gib, ...}
    gpus_per_node: int = 4
    nodes: int = 1
    framework: str = "deepspeed"
    zero_stage: int = 2
    offload_optimizer: str = "none"
    offload_params: str = "none"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    micro_batch_size: int = 2
    gradient_accumulation_steps: int = 4
    seq_len: int = 4096
    activation_checkpointing: str = "none"
    activation_offloading: bool = False
    attention: str = "flash"
    loss: str = "standard"
    optimizer_in_backward: bool = False
    method: str = "full"
    deepspeed: Mapping = field(default_factory=lambda: MappingProxyType({}))
    lora: LoraSettings = LoraSettings()
    quantization: QuantSettings = QuantSettings()
    stack: StackSettings = StackSettings()
    network: Mapping = field(default_factory=lambda: MappingProxyType({}))   # Extension 2; {} = the stated default
    data: DataSettings = DataSettings()                # Extension 6 (datasettings.py)
    allocator: AllocatorSettings = AllocatorSettings()  # Extension 6
    run: RunSettings = RunSettings()           # Extension 5; omitted keys take the trainer's defaults
    vision: VisionSettings = VisionSettings()  # Extension 8 (visionsettings.py)
    post_training: Any = None                  # Extension 7 (postplan.py): PostTraining, or None (SFT / pre-training)
    fp8: str = "none"                          # Extension 9: the block linears' GEMMs in fp8 (torchao Float8Linear)

    @cached_property
    def arch(self) -> ModelArch:
        """The model's tensor inventory (zerocalc.model), built once per plan (and memoised across plans)."""
        return resolve_model(self.model)

    @cached_property
    def gpu_spec(self) -> GpuSpec:
        """The accelerator: capacity, bf16 support, link (zerocalc.hardware)."""
        return gpu_spec(self.gpu)

    @property
    def world_size(self) -> int:
        """Data-parallel ranks: every GPU holds one (no tensor or pipeline parallelism in plan-v1)."""
        return self.gpus_per_node * self.nodes

    @classmethod
    def from_dict(cls, data: Mapping) -> "Plan":
        return parse_plan(data)

    def to_dict(self) -> dict:
        return plan_to_dict(self)

    def with_changes(self, **changes) -> "Plan":
        """A copy with some keys replaced, validated like a fresh plan."""
        merged = self.to_dict()
        merged.update(changes)
        return parse_plan(merged)


DEFAULT_PLAN = Plan()

# --- sections ------------------------------------------------------------------------------------


def _parse_model(value: Any) -> Any:
    if isinstance(value, str):
        if value not in MODELS:
            raise PlanError("model", f"unknown preset {show(value)}; see `zerocalc presets models`")
        return value
    obj = _freeze(check_mapping("model", value))
    resolve_model(obj)   # raises PlanError("model.<field>", ...): a bad model is caught at parse time
    return obj


def _parse_gpu(value: Any) -> Any:
    if isinstance(value, str):
        if value not in GPUS:
            raise PlanError("gpu", f"unknown preset {show(value)}; see `zerocalc presets gpus`")
        return value
    obj = check_mapping("gpu", value)
    if "memory_gib" not in obj:
        raise PlanError("gpu.memory_gib", "a custom GPU needs memory_gib (its capacity in GiB)")
    check_number("gpu.memory_gib", obj["memory_gib"], 1, 65536)
    if "name" in obj and not isinstance(obj["name"], str):
        raise PlanError("gpu.name", f"must be a string, got {show(obj['name'])}")
    if "bf16_supported" in obj:
        check_bool("gpu.bf16_supported", obj["bf16_supported"])
    for rate in GPU_RATES:                     # Extension 2: optional rates of a custom GPU
        if obj.get(rate) is not None:
            check_number(f"gpu.{rate}", obj[rate], 1e-3, 1e7)
    return _freeze(obj)


def _parse_deepspeed(value: Any) -> Mapping:
    obj = check_mapping("deepspeed", value)
    reject_unknown("deepspeed", obj, DEEPSPEED_KNOBS)
    out = {}
    for k, v in obj.items():
        key = f"deepspeed.{k}"
        if v == "auto" and isinstance(v, str):
            if k not in DEEPSPEED_AUTO_OK:
                raise PlanError(key, "\"auto\" is filled by the Hugging Face integration only for "
                                     + ", ".join(DEEPSPEED_AUTO_OK))
            out[k] = "auto"
        elif k in DEEPSPEED_BOOL_KNOBS:
            out[k] = check_bool(key, v)
        elif k == "gradient_clipping":
            out[k] = check_number(key, v, 0, 1e9)
        elif k == "zero_hpz_partition_size":
            out[k] = check_int(key, v, 1, MAX_GPUS_PER_NODE)
        else:
            lo = 1 if k in ("reduce_bucket_size", "sub_group_size") else 0
            out[k] = check_int(key, v, lo, MAX_BUFFER_ELEMENTS)
    return MappingProxyType(out)


def _module_names(key: str, names: Any, allow_empty: bool) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or (not names and not allow_empty):
        raise PlanError(key, f"must be a {'' if allow_empty else 'non-empty '}list of module names, got {show(names)}")
    for t in names:
        if not isinstance(t, str) or not t or not t.replace("_", "").replace(".", "").isalnum():
            raise PlanError(key, f"module names are words like q_proj, got {show(t)}")
    return tuple(dict.fromkeys(names))


def _parse_network(value: Any) -> Mapping:
    """Extension 2: inter-node bandwidth per GPU, per direction (Gb/s), and the fabric's kind."""
    obj = check_mapping("network", value)
    reject_unknown("network", obj, ("gbps_per_gpu", "kind"))
    out = {}
    if "gbps_per_gpu" in obj:
        out["gbps_per_gpu"] = check_number("network.gbps_per_gpu", obj["gbps_per_gpu"], 1e-3, 1e6)
    if "kind" in obj:
        out["kind"] = check_choice("network.kind", obj["kind"], NETWORK_KINDS)
    return MappingProxyType(out)


def _parse_lora(value: Any) -> LoraSettings:
    obj = check_mapping("lora", value)
    reject_unknown("lora", obj, ("rank", "alpha", "dropout", "targets", "modules_to_save"))
    d = LoraSettings()
    rank = check_int("lora.rank", obj.get("rank", d.rank), 1, MAX_LORA_RANK)
    alpha = check_number("lora.alpha", obj.get("alpha", d.alpha), 0, 1e6)
    dropout = check_number("lora.dropout", obj.get("dropout", d.dropout), 0, 0.999)
    targets = _module_names("lora.targets", obj.get("targets", d.targets), False)
    to_save = _module_names("lora.modules_to_save", obj.get("modules_to_save", d.modules_to_save), True)
    return LoraSettings(rank=rank, alpha=alpha, dropout=dropout, targets=targets, modules_to_save=to_save)


def _parse_quant(value: Any) -> QuantSettings:
    obj = check_mapping("quantization", value)
    reject_unknown("quantization", obj, ("type", "double_quant", "compute_dtype", "bits", "group_size"))
    d = QuantSettings()
    group = obj.get("group_size", d.group_size)
    if group != -1:
        group = check_int("quantization.group_size", group, 1, 1 << 20)
    return QuantSettings(
        type=check_choice("quantization.type", obj.get("type", d.type), QUANT_TYPES),
        double_quant=check_bool("quantization.double_quant", obj.get("double_quant", d.double_quant)),
        compute_dtype=check_choice("quantization.compute_dtype", obj.get("compute_dtype", d.compute_dtype),
                              COMPUTE_DTYPES),
        bits=check_choice("quantization.bits", check_int("quantization.bits", obj.get("bits", d.bits), 1, 64), GPTQ_BITS),
        group_size=group)


_TOP_KEYS = ("schema",) + tuple(f.name for f in fields(Plan))


def parse_plan(data: Any) -> Plan:
    """plan-v1 mapping -> Plan. Raises PlanError naming the first bad key."""
    if not isinstance(data, Mapping):
        raise PlanError("plan", f"must be a JSON object, got {show(data)}")
    reject_unknown("", data, _TOP_KEYS)
    if "schema" in data and (isinstance(data["schema"], bool) or data["schema"] != SCHEMA):
        raise PlanError("schema", f"this zerocalc reads plan schema {SCHEMA}, got {show(data['schema'])}")
    d = DEFAULT_PLAN
    get = data.get
    plan = Plan(
        model=_parse_model(get("model", d.model)),
        gpu=_parse_gpu(get("gpu", d.gpu)),
        gpus_per_node=check_int("gpus_per_node", get("gpus_per_node", d.gpus_per_node), 1, MAX_GPUS_PER_NODE),
        nodes=check_int("nodes", get("nodes", d.nodes), 1, MAX_NODES),
        framework=check_choice("framework", get("framework", d.framework), FRAMEWORKS),
        zero_stage=check_choice("zero_stage", check_int("zero_stage", get("zero_stage", d.zero_stage), 0, 3), (0, 1, 2, 3)),
        offload_optimizer=check_choice("offload_optimizer", get("offload_optimizer", d.offload_optimizer),
                                  OFFLOAD_DEVICES),
        offload_params=check_choice("offload_params", get("offload_params", d.offload_params), OFFLOAD_DEVICES),
        precision=check_choice("precision", get("precision", d.precision), PRECISIONS),
        optimizer=check_choice("optimizer", get("optimizer", d.optimizer), OPTIMIZERS),
        micro_batch_size=check_int("micro_batch_size", get("micro_batch_size", d.micro_batch_size), 1, MAX_MICRO_BATCH),
        gradient_accumulation_steps=check_int("gradient_accumulation_steps",
                                         get("gradient_accumulation_steps", d.gradient_accumulation_steps),
                                         1, MAX_ACCUMULATION),
        seq_len=check_int("seq_len", get("seq_len", d.seq_len), 1, MAX_SEQ_LEN),
        activation_checkpointing=check_choice("activation_checkpointing",
                                         get("activation_checkpointing", d.activation_checkpointing),
                                         CHECKPOINTING),
        activation_offloading=check_bool("activation_offloading", get("activation_offloading", d.activation_offloading)),
        attention=check_choice("attention", get("attention", d.attention), ATTENTIONS),
        loss=check_choice("loss", get("loss", d.loss), LOSSES),
        optimizer_in_backward=check_bool("optimizer_in_backward", get("optimizer_in_backward", d.optimizer_in_backward)),
        method=check_choice("method", get("method", d.method), METHODS),
        deepspeed=_parse_deepspeed(get("deepspeed", {})),
        lora=_parse_lora(get("lora", {})),
        quantization=_parse_quant(get("quantization", {})),
        stack=parse_stack(get("stack", {})),
        network=_parse_network(get("network", {})),
        allocator=parse_allocator(get("allocator", {})),
        run=parse_run(get("run", {})),
        post_training=parse_post_training(get("post_training")),
        fp8=check_choice("fp8", get("fp8", d.fp8), FP8_RECIPES),
    )
    if "data" in data:
        plan = replace(plan, data=parse_data(data["data"], plan.seq_len))
    if "vision" in data:
        plan = replace(plan, vision=parse_vision(data["vision"], plan.seq_len))
    _check_consistency(plan)
    return plan


def as_plan(plan: Any) -> Plan:
    """A Plan as is, or a plan-v1 mapping parsed (PlanError names the key): what the exporters accept."""
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, Mapping):
        return parse_plan(plan)
    raise TypeError(f"expected a Plan or a plan-v1 mapping, got {type(plan).__name__}")


def _check_consistency(plan: Plan) -> None:
    """Combinations no real run can have (the ones that are merely unwise become warnings)."""
    if plan.framework == "single" and plan.world_size != 1:
        raise PlanError("framework", f"single means one process on one GPU, but the cluster has "
                                     f"{plan.world_size} GPUs; use ddp, fsdp or deepspeed")
    if plan.run.load.on_device_build is True and plan.framework != "fsdp":
        raise PlanError("run.load.on_device_build", "a build on the GPU before FSDP wraps the model needs framework "
                                                    f"fsdp (single and ddp train the built model itself; DeepSpeed: "
                                                    f"run.load.zero_init), not {plan.framework}")
    if plan.framework == "fsdp" and plan.zero_stage not in (2, 3):
        raise PlanError("zero_stage", "with fsdp, 2 means SHARD_GRAD_OP and 3 FULL_SHARD; got "
                                      f"{plan.zero_stage}")
    if plan.framework in ("ddp", "single") and (plan.offload_optimizer != "none" or plan.offload_params != "none"):
        key = "offload_optimizer" if plan.offload_optimizer != "none" else "offload_params"
        raise PlanError(key, f"offload needs deepspeed or fsdp, not {plan.framework}")
    if plan.framework == "fsdp" and "nvme" in (plan.offload_optimizer, plan.offload_params):
        key = "offload_optimizer" if plan.offload_optimizer == "nvme" else "offload_params"
        raise PlanError(key, "fsdp offloads to cpu only; nvme is DeepSpeed ZeRO-Infinity")
    if plan.framework == "deepspeed" and plan.zero_stage == 0 and plan.offload_optimizer != "none":
        raise PlanError("offload_optimizer", "DeepSpeed offloads the optimizer only at ZeRO stage 1-3")
    if plan.method == "full" and plan.run.merge_at_end != "none":
        raise PlanError("run.merge_at_end", "a merge needs LoRA adapters (method lora or qlora), not method full")
    check_stack(plan)
    check_post_training(plan)
    _check_vision(plan)
    _check_fp8(plan)


def _check_fp8(plan: Plan) -> None:
    """Extension 9: torchao's Float8Linear swaps the trained nn.Linear modules and casts their bf16 inputs and
    weights for torch._scaled_mm, which runs on fp8 tensor cores only (compute capability 8.9 and up)."""
    if plan.fp8 == "none":
        return
    if plan.method != "full":
        raise PlanError("fp8", f"fp8 linears train the base weights (torchao convert_to_float8_training): method "
                               f"full, not {plan.method}")
    if plan.precision not in ("bf16-mixed", "bf16-pure"):
        raise PlanError("fp8", f"fp8 linears cast from bf16 (precision bf16-mixed or bf16-pure), not {plan.precision}")
    g = plan.gpu
    rate = GPUS[g].fp8_dense_tflops if isinstance(g, str) else g.get("fp8_dense_tflops")
    if not rate:
        raise PlanError("fp8", f"{plan.gpu_spec.name} has no fp8 tensor cores (Ada, Hopper, Blackwell, MI300 do)"
                        + ("" if isinstance(g, str) else "; a custom GPU gives fp8_dense_tflops"))


def _check_vision(plan: Plan) -> None:
    """Extension 8: the vision keys need a model with a tower; LoRA in the tower needs a LoRA method."""
    v = plan.vision
    if v == VisionSettings():
        return
    if plan.vision.trainable == "lora" and plan.method == "full":
        raise PlanError("vision.trainable", "lora puts adapters in the tower: it needs method lora or qlora")
    arch = plan.arch
    if not any(t.component in ("vision", "projector", "audio") for t in arch.tensors):
        key = next(k for k in ("trainable", "images_per_sample", "tokens_per_sample", "instruction_tokens")
                   if getattr(v, k) != getattr(VisionSettings(), k))
        raise PlanError(f"vision.{key}", f"model {arch.name!r} ({arch.model_type}) has no vision or audio tower")
    if v.instruction_tokens and not (arch.tower or {}).get("instruct"):
        raise PlanError("vision.instruction_tokens", f"model_type {arch.model_type!r} has no Q-Former reading "
                        "instruction tokens (InstructBLIP's)")
    if v.tokens_per_sample > plan.seq_len and not (arch.image_cross_layers or arch.gated_cross_layers):
        # Mllama's cross-attention layers and IDEFICS' gated ones read the vision states beside the text
        # (memory/blocks_cross.py)
        raise PlanError("vision.tokens_per_sample", f"image tokens count inside seq_len ({plan.seq_len}), "
                        f"got {v.tokens_per_sample}")
    if v.images_per_sample and arch.tower is None:
        raise PlanError("vision.images_per_sample", f"the tower activations of model_type {arch.model_type!r} "
                        "are not modelled (modelled: the CLIP and SigLIP towers of LLaVA, LLaVA-NeXT, "
                        "LLaVA-OneVision, Video-LLaVA, VipLLaVA, Gemma 3, ShieldGemma 2, PaliGemma, Cohere2 Vision, "
                        "Aya Vision, DeepSeek-VL, Idefics2, Idefics3 and SmolVLM; the Qwen2-VL, "
                        "Qwen2.5-VL, Qwen3-VL, Qwen3.5, HyperCLOVA X Vision V2, EXAONE 4.5 and GLM-4.1V / 4.6V towers; "
                        "InternVL's InternViT; the Pixtral towers of Mistral 3, Mistral Large 4 and LightOnOCR; BLIP-2's ViT and "
                        "Q-Former, InstructBLIP's with its instruction tokens; Fuyu's patch linear; "
                        "GOT-OCR 2.0's SAM ViT; Florence-2's DaViT; LFM2-VL's SigLIP 2; Gemma 4's tower; the audio encoders of Qwen2-Audio and Voxtral, "
                        "a 30 s clip an image); set 0 to leave them out")
    if (v.images_per_sample and arch.tower["kind"] in ("qwen", "glm4v", "pixtral", "fuyu", "lfm2_vl")
            and not v.tokens_per_sample):
        # dynamic resolution: a Qwen-VL, Pixtral or Fuyu image's patches are read from its tokens
        raise PlanError("vision.tokens_per_sample", f"model_type {arch.model_type!r} sizes each image by its "
                        "pixels: give the image tokens per sample (tokens_per_sample) for the tower's activations")



def plan_to_dict(plan: Plan) -> dict:
    """Plan -> plan-v1 dict with every key present; ``parse_plan(plan_to_dict(p)) == p``."""
    out: dict = {"schema": SCHEMA}
    for f in fields(Plan):
        v = getattr(plan, f.name)
        if isinstance(v, LoraSettings):
            v = {"rank": v.rank, "alpha": v.alpha, "dropout": v.dropout, "targets": list(v.targets),
                 "modules_to_save": list(v.modules_to_save)}
        elif isinstance(v, QuantSettings):
            v = {"type": v.type, "double_quant": v.double_quant, "compute_dtype": v.compute_dtype, "bits": v.bits,
                 "group_size": v.group_size}
        elif isinstance(v, StackSettings):
            # keys added to Extension 1 later (LATE_KEYS): omitted at their default, as `network` is
            v = {f.name: getattr(v, f.name) for f in fields(StackSettings)
                 if f.name not in LATE_KEYS or getattr(v, f.name) != getattr(StackSettings(), f.name)}
        elif f.name == "network" and not v:
            continue                  # Extension 2 key: omitted while it takes the stated default
        elif isinstance(v, (DataSettings, AllocatorSettings)):
            if v == type(v)():
                continue              # Extension 6 keys: omitted at their defaults, as `network` is
            v = data_dict(v) if isinstance(v, DataSettings) else allocator_dict(v)
        elif f.name == "fp8" and v == "none":
            continue                  # Extension 9: omitted at its default
        elif f.name == "post_training":
            if v is None:
                continue              # Extension 7: omitted for a plan without post-training
            v = post_training_to_dict(v)
        elif isinstance(v, VisionSettings):
            if v == VisionSettings():
                continue              # Extension 8 keys: omitted at their defaults
            v = vision_dict(v)
        elif isinstance(v, RunSettings):
            v = run_to_dict(v)
            if not v:
                continue              # Extension 5: omitted while every key takes the trainer's default
        else:
            v = _thaw(v)
        out[f.name] = v
    return out


__all__ = ["Plan", "PlanError", "parse_plan", "plan_to_dict", "as_plan", "DEFAULT_PLAN"]
