"""The exports, accepted by the real tools (CPU only): DeepSpeed 0.19.8 DeepSpeedConfig with the plan's world
size, transformers' TrainingArguments + HfTrainerDeepSpeedConfig "auto" filling, peft LoraConfig,
BitsAndBytesConfig, accelerate's config loader and launch parser, the deepspeed / torchrun launch parsers.

World size: DeepSpeedConfig asks deepspeed.comm.get_rank/get_world_size and silently falls back to 1 without
a process group, so both are replaced for the duration of one parse (docs/deepspeed.md §6).
"""
import itertools
import json
import os
import shlex
import types

import pytest

from zerocalc import Plan, PlanError
from zerocalc.imports import import_ds_config
from zerocalc.exports import (ExportError, accelerate_config, accelerate_yaml, ds_config,
                              launch_commands, peft_snippet, training_arguments_snippet)

pytestmark = pytest.mark.tools

STAGES = (0, 1, 2, 3)
DEVICES = ("none", "cpu", "nvme")
PRECISIONS = ("bf16-mixed", "fp16-mixed", "bf16-pure", "fp32")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw-32bit", "adafactor", "sgd", "lion")
WORLDS = ((1, 1), (2, 1), (8, 1), (3, 2), (64, 1), (8, 8))  # (gpus_per_node, nodes): 1..64 GPUs
HF_AUTO = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


@pytest.fixture(scope="session")
def ds():
    pytest.importorskip("torch")
    deepspeed = pytest.importorskip("deepspeed")
    import deepspeed.comm as dist
    from deepspeed.runtime import constants
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    def parse(cfg, world):
        saved = dist.get_rank, dist.get_world_size
        dist.get_rank, dist.get_world_size = (lambda *a, **k: 0), (lambda *a, **k: world)
        try:
            return DeepSpeedConfig(cfg)
        finally:
            dist.get_rank, dist.get_world_size = saved

    return types.SimpleNamespace(parse=parse, Zero=DeepSpeedZeroConfig, constants=constants,
                                 version=deepspeed.__version__)


def _hidden(model):
    from zerocalc.model import resolve_model
    return resolve_model(model).hidden_size


def _dev(block):
    if block is None:
        return "none"
    return getattr(block.device, "value", block.device)


def check_parsed(ds, d, plan: dict):
    """DeepSpeed's parsed values equal the plan's meaning. Missing knobs: DeepSpeed's own defaults
    (DeepSpeedZeroConfig(stage=...) built by DeepSpeed); "auto": the HF formulas for the model's hidden size."""
    p = Plan.from_dict(plan)
    n = p.gpus_per_node * p.nodes
    assert d.world_size == n
    assert (d.train_batch_size, d.train_micro_batch_size_per_gpu, d.gradient_accumulation_steps) == \
        (p.micro_batch_size * p.gradient_accumulation_steps * n, p.micro_batch_size, p.gradient_accumulation_steps)
    assert d.zero_optimization_stage == p.zero_stage
    z = d.zero_config
    if p.zero_stage >= 1:
        got = _dev(z.offload_optimizer)
        assert got == p.offload_optimizer
        if z.offload_optimizer:
            assert z.offload_optimizer.pin_memory is True
    got = _dev(z.offload_param)
    assert got == (p.offload_params if p.zero_stage == 3 else "none")
    assert d.float16_config.enabled == (p.precision == "fp16-mixed")
    assert d.bfloat16_config.enabled == (p.precision in ("bf16-mixed", "bf16-pure"))
    assert d.bfloat16_config.bf16_master_weights_and_grads == (p.precision == "bf16-pure")
    assert d.bfloat16_config.bf16_optimizer_states == (p.precision == "bf16-pure")
    # stage 0: no optimizer block (the Trainer hands its own to DeepSpeed: FP16_UnfusedOptimizer)
    assert d.optimizer_name == ({"adamw": "adamw", "lion": "lion"}.get(p.optimizer) if p.zero_stage >= 1 else None)
    if p.optimizer not in ("adamw", "lion") and p.zero_stage >= 1:
        assert d.zero_allow_untested_optimizer is True
        assert d.zero_force_ds_cpu_optimizer is (p.offload_optimizer == "none")
    knobs = dict(p.deepspeed)
    gc = knobs.get("gradient_clipping", ds.constants.GRADIENT_CLIPPING_DEFAULT)
    assert d.gradient_clipping == gc
    default = ds.Zero(stage=p.zero_stage)
    h = _hidden(p.model) if "auto" in knobs.values() else None
    hf = {"reduce_bucket_size": lambda: h * h, "stage3_prefetch_bucket_size": lambda: int(0.9 * h * h),
          "stage3_param_persistence_threshold": lambda: 10 * h}
    fields = {"reduce_bucket_size": "reduce_bucket_size", "overlap_comm": "overlap_comm",
              "contiguous_gradients": "contiguous_gradients",
              "stage3_prefetch_bucket_size": "prefetch_bucket_size",
              "stage3_param_persistence_threshold": "param_persistence_threshold",
              "stage3_max_live_parameters": "max_live_parameters",
              "stage3_max_reuse_distance": "max_reuse_distance", "sub_group_size": "sub_group_size",
              "zero_hpz_partition_size": "zero_hpz_partition_size"}
    for knob, attr in fields.items():
        if p.zero_stage == 0 or (p.zero_stage < 3 and knob not in ("reduce_bucket_size", "overlap_comm",
                                                                   "contiguous_gradients")):
            continue
        v = knobs.get(knob)
        if v == "auto" and (knob == "reduce_bucket_size" or p.zero_stage == 3):
            expected = hf[knob]()
        elif v is None or v == "auto":
            expected = getattr(default, attr)
        else:
            expected = v
        assert getattr(z, attr) == expected, knob
    ac = d.activation_checkpointing_config
    assert ac.cpu_checkpointing == (p.activation_checkpointing == "full" and p.activation_offloading)


def _plans(extra_knobs=({},)):
    for st, oo, op, pr, opt, (gpn, nodes), knobs in itertools.product(
            STAGES, DEVICES, DEVICES, PRECISIONS, OPTIMIZERS, WORLDS, extra_knobs):
        yield {"model": "llama-3.1-8b", "zero_stage": st, "offload_optimizer": oo, "offload_params": op,
               "precision": pr, "optimizer": opt, "gpus_per_node": gpn, "nodes": nodes,
               "micro_batch_size": 1 + (gpn % 3), "gradient_accumulation_steps": 1 + nodes % 4,
               "deepspeed": knobs}


def _expressible_or_skip(plan):
    """The plan, or None where the Plan or the exporter refuses it for a documented reason."""
    try:
        Plan.from_dict(plan)
    except PlanError as e:
        assert e.key == "offload_optimizer" and plan["zero_stage"] == 0
        return None
    try:
        ds_config(plan)
    except ExportError as e:
        assert (e.key == "offload_params" and plan["zero_stage"] < 3) or \
               (e.key == "precision" and plan["zero_stage"] == 0 and plan["precision"] == "bf16-pure") or \
               (e.key == "optimizer" and plan["precision"] == "bf16-pure" and plan["offload_optimizer"] != "none"
                and plan["optimizer"] != "adamw"), e
        return None
    return plan


def test_every_explicit_ds_config_is_accepted_and_means_the_plan(ds):
    n = 0
    for plan in _plans():
        if _expressible_or_skip(plan) is None:
            continue
        cfg = ds_config(plan)
        assert "auto" not in json.dumps(cfg)
        ds.Zero(**cfg["zero_optimization"], strict=True)
        check_parsed(ds, ds.parse(cfg, plan["gpus_per_node"] * plan["nodes"]), plan)
        n += 1
    # 4 stages x 9 offload pairs x 4 precisions x 7 optimizers x 6 worlds, less the refused ones:
    # stage 0: only (none, none), not bf16-pure: 3 precisions x 7 optimizers = 21;
    # stages 1-2 (offload_params none): 3 offload_optimizer x 4 precisions x 7 = 84, less bf16-pure with an
    #   optimizer offload and one of the 6 non-adamw optimizers (2 x 6 = 12) -> 72 each;
    # stage 3: 9 offload pairs x 4 x 7 = 252, less bf16-pure x (6 pairs with optimizer offload) x 6 = 36 -> 216;
    # (21 + 72 + 72 + 216) x 6 worlds = 381 x 6 = 2286
    assert n == 2286


KNOB_SETS = (
    {k: "auto" for k in HF_AUTO},
    {"reduce_bucket_size": 123_456_789, "overlap_comm": True, "contiguous_gradients": False,
     "stage3_prefetch_bucket_size": 7, "stage3_param_persistence_threshold": 0, "stage3_max_live_parameters": 3,
     "stage3_max_reuse_distance": 0, "sub_group_size": 42, "gradient_clipping": 0.25},
    {"overlap_comm": False, "zero_hpz_partition_size": 1, "gradient_clipping": 0.0, "reduce_bucket_size": "auto"},
)


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=["hf-auto", "custom", "mixed"])
def test_buffer_knobs_reach_deepspeed(ds, knobs):
    for st, pr, (gpn, nodes), model in itertools.product(STAGES, ("bf16-mixed", "fp16-mixed"), WORLDS,
                                                         ("llama-3.1-8b", "gpt2", "deepseek-v3")):
        plan = {"model": model, "zero_stage": st, "precision": pr, "gpus_per_node": gpn, "nodes": nodes,
                "deepspeed": dict(knobs)}
        if st == 3 and gpn > 1:
            plan["deepspeed"]["zero_hpz_partition_size"] = gpn
        cfg = ds_config(plan)
        check_parsed(ds, ds.parse(cfg, gpn * nodes), plan)


def test_offload_param_below_stage3_is_what_deepspeed_ignores(ds):
    # The warning is true: DeepSpeed parses the block at stage 2 without complaint ...
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}
    ds.parse(cfg, 4)
    r = import_ds_config(cfg, {"zero_stage": 2})
    assert r.plan["offload_params"] == "none" and r.warnings[0]["id"] == "ds-offload-param-ignored"
    # ... and nvme without a path as well
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}
    assert ds.parse(cfg, 4).zero_config.offload_param.nvme_path is None
    assert [w["id"] for w in import_ds_config(cfg, {}).warnings] == ["ds-nvme-path"]


def test_importer_knows_every_zero_key_of_deepspeed(ds):
    """Every zero_optimization field of DeepSpeed 0.19.8 (by its ds_config name) is classified by the
    importer: applied, or listed with a reason other than 'unknown'."""
    zero, deprecated = {}, set()
    for name, f in ds.Zero.model_fields.items():
        key = f.alias or name
        if key in ("stage", "offload_param", "offload_optimizer"):
            continue
        zero[key] = f.default if f.default is None or isinstance(f.default, (bool, int, float)) else {}
        if (f.json_schema_extra or {}).get("deprecated"):
            deprecated.add(key)
    assert len(zero) > 30
    zero["stage"] = 3
    r = import_ds_config({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}, {})
    unknown = [n["key"] for n in r.not_represented if "unknown" in n["reason"]]
    assert unknown == []
    # the same keys with DeepSpeed's own defaults are accepted by DeepSpeed (deprecated ones clash, left out)
    ok = {k: v for k, v in zero.items() if k not in deprecated and v != {}}
    ds.parse({"train_micro_batch_size_per_gpu": 1, "zero_optimization": ok}, 1)


# ---------------------------------------------------------------- transformers: TrainingArguments + auto fill
@pytest.fixture(scope="session")
def hf_tools():
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import transformers
    import transformers.training_args as ta
    return types.SimpleNamespace(transformers=transformers, ta=ta)


def _fake_model(model_id):
    from transformers import AutoConfig
    from zerocalc.presets import MODELS
    hf = dict(MODELS[model_id].hf_config)
    model_type = hf.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **{k: v for k, v in hf.items() if not k.startswith("_")})
    return types.SimpleNamespace(config=cfg)


def _contained(small, big, path=""):
    """Every key of ``small`` is in ``big`` with the same value (recursively)."""
    for k, v in small.items():
        assert k in big, path + k
        if isinstance(v, dict):
            _contained(v, big[k], path + k + ".")
        else:
            assert big[k] == v, (path + k, big[k], v)


HF_PLANS = [
    {"zero_stage": st, "precision": pr, "optimizer": opt, "gpus_per_node": gpn, "nodes": nodes, "model": model,
     "offload_optimizer": "cpu" if st else "none", "activation_checkpointing": "full",
     "deepspeed": {k: "auto" for k in HF_AUTO} if auto else {"gradient_clipping": 0.5}}
    for st, pr, opt, (gpn, nodes), model, auto in itertools.product(
        STAGES, PRECISIONS, ("adamw", "lion", "paged-adamw-8bit"), ((1, 1), (8, 1), (8, 8)),
        ("llama-3.1-8b", "gpt2"), (True, False))
    if not (st == 0 and pr == "bf16-pure") and not (st and pr == "bf16-pure" and opt != "adamw")
]


def test_hf_snippet_with_auto_config_fills_to_the_plan(ds, hf_tools, tmp_path, monkeypatch):
    """exec the TrainingArguments snippet with deepspeed=<auto ds_config>; the HF integration fills every
    "auto" (trainer_config_process, then trainer_config_finalize with the model's real transformers config);
    the filled config equals the explicit export on every key and DeepSpeed parses it to the plan."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hf_tools.ta, "is_torch_bf16_gpu_available", lambda *a, **k: True)  # CPU machine
    models = {m: _fake_model(m) for m in ("llama-3.1-8b", "gpt2")}
    for plan in HF_PLANS:
        world = plan["gpus_per_node"] * plan["nodes"]
        monkeypatch.setattr(hf_tools.transformers.TrainingArguments, "world_size", property(lambda self: world))
        with open("ds_config.json", "w") as f:
            json.dump(ds_config(plan, "auto"), f)
        ns = {}
        exec(training_arguments_snippet(plan), ns)
        args = ns["args"]
        hf = args.hf_deepspeed_config
        hf.trainer_config_finalize(args, models[plan["model"]], num_training_steps=100)
        filled = hf.config
        assert "auto" not in json.dumps(filled), plan
        _contained(ds_config(plan, "explicit"), filled)
        check_parsed(ds, ds.parse(filled, world), plan)


# ---------------------------------------------------------------- peft + bitsandbytes config
@pytest.mark.parametrize("plan", [
    {"method": "lora", "lora": {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["q_proj", "v_proj"]}},
    {"method": "qlora", "zero_stage": 3},
    {"method": "qlora", "framework": "fsdp", "zero_stage": 3,
     "quantization": {"type": "fp4", "double_quant": False, "compute_dtype": "fp16"}},
    {"method": "qlora", "quantization": {"type": "int8"}},
])
def test_peft_snippets_construct(plan):
    peft = pytest.importorskip("peft")
    torch = pytest.importorskip("torch")
    ns = {}
    exec(peft_snippet(plan), ns)
    p = Plan.from_dict(plan)
    lc = ns["lora_config"]
    assert isinstance(lc, peft.LoraConfig)
    assert (lc.r, lc.lora_alpha, lc.lora_dropout, set(lc.target_modules)) == \
        (p.lora.rank, p.lora.alpha, p.lora.dropout, set(p.lora.targets))
    if p.method == "qlora":
        from transformers import BitsAndBytesConfig
        bnb = ns["bnb_config"]
        assert isinstance(bnb, BitsAndBytesConfig)
        q = p.quantization
        if q.type == "int8":
            assert bnb.load_in_8bit and not bnb.load_in_4bit
        else:
            assert bnb.load_in_4bit and bnb.bnb_4bit_quant_type == q.type
            assert bnb.bnb_4bit_use_double_quant == q.double_quant
            assert bnb.bnb_4bit_compute_dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[q.compute_dtype]
            sharded = p.framework == "fsdp" or p.zero_stage == 3
            assert bnb.bnb_4bit_quant_storage == (torch.bfloat16 if sharded else torch.uint8)


# ---------------------------------------------------------------- accelerate config + launch commands
ACC_PLANS = [
    {"zero_stage": 3, "gpus_per_node": 8, "nodes": 2},
    {"zero_stage": 2, "precision": "fp16-mixed"},
    {"zero_stage": 1, "precision": "bf16-pure"},
    {"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu", "offload_optimizer": "cpu",
     "activation_checkpointing": "full"},
    {"framework": "fsdp", "zero_stage": 2, "precision": "fp32", "nodes": 4},
    {"framework": "ddp", "gpus_per_node": 8},
    {"framework": "single", "gpus_per_node": 1},
]


@pytest.mark.parametrize("plan", ACC_PLANS)
def test_accelerate_yaml_loads_with_valid_keys(plan, tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser
    path = tmp_path / "accelerate.yaml"
    path.write_text(accelerate_yaml(plan))
    cc = ClusterConfig.from_yaml_file(str(path))
    want = accelerate_config(plan)
    assert cc.distributed_type.value == want["distributed_type"]
    assert (cc.num_processes, cc.num_machines, cc.mixed_precision) == \
        (want["num_processes"], want["num_machines"], want["mixed_precision"])
    args = launch_command_parser().parse_args(["train.py"])
    for section in ("deepspeed_config", "fsdp_config"):
        for key in (getattr(cc, section) or {}):
            assert hasattr(args, key), f"{section}.{key} is not an accelerate launch option"


@pytest.mark.parametrize("plan", ACC_PLANS)
def test_launch_commands_parse(plan, monkeypatch):
    pytest.importorskip("accelerate")
    pytest.importorskip("deepspeed")
    from accelerate.commands.launch import launch_command_parser
    from deepspeed.launcher.runner import parse_args as ds_parse
    from torch.distributed.run import get_args_parser
    monkeypatch.setenv("NODE_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    p = Plan.from_dict(plan)
    for name, cmd in launch_commands(plan).items():
        argv = shlex.split(os.path.expandvars(cmd))
        if name == "deepspeed":
            a = ds_parse(argv[1:])
            assert (a.num_gpus, a.user_script, a.user_args) == (p.gpus_per_node, "train.py",
                                                              ["--deepspeed", "ds_config.json"])
            assert a.num_nodes == (p.nodes if p.nodes > 1 else -1)
        elif name == "accelerate":
            a = launch_command_parser().parse_args(argv[2:])
            assert (a.num_processes, a.num_machines, a.training_script) == (p.world_size, p.nodes, "train.py")
        elif name == "torchrun":
            a = get_args_parser().parse_args(argv[1:])
            assert (int(a.nnodes), a.nproc_per_node, a.training_script) == (p.nodes, str(p.gpus_per_node),
                                                                            "train.py")
        else:
            assert cmd == "python train.py"
