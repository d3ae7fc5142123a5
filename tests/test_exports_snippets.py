"""HF / PEFT / accelerate / launch exports: hand-checked content (the real libraries: test_exports_real_tools)."""
import pytest

from zerocalc.exports import (ExportError, accelerate_config, accelerate_yaml, bnb_config_kwargs, launch_commands,
                              lora_config_kwargs, run_export, training_arguments_kwargs, training_arguments_snippet)
from zerocalc.exports.accelerate import to_yaml


def test_training_arguments_deepspeed():
    kw = training_arguments_kwargs({"micro_batch_size": 3, "gradient_accumulation_steps": 5,
                                    "activation_checkpointing": "full", "activation_offloading": True,
                                    "optimizer": "paged-adamw-8bit", "deepspeed": {"gradient_clipping": 0.7}})
    assert kw == {"output_dir": "out", "per_device_train_batch_size": 3, "gradient_accumulation_steps": 5,
                  "bf16": True, "activation_checkpointing": True,
                  "activation_checkpointing_kwargs": {"offload": True}, "optim": "paged_adamw_8bit",
                  "max_grad_norm": 0.7, "deepspeed": "ds_config.json"}


@pytest.mark.parametrize("prec,flags", [("bf16-mixed", {"bf16": True}), ("fp16-mixed", {"fp16": True}),
                                        ("fp32", {}), ("bf16-pure", {})])
def test_training_arguments_precision_fsdp(prec, flags):
    kw = training_arguments_kwargs({"framework": "fsdp", "zero_stage": 3, "precision": prec})
    assert {k: kw[k] for k in ("bf16", "fp16") if k in kw} == flags
    assert kw["fsdp"] == "full_shard auto_wrap"


def test_fsdp_strings():
    assert training_arguments_kwargs({"framework": "fsdp", "zero_stage": 2})["fsdp"] == "shard_grad_op auto_wrap"
    kw = training_arguments_kwargs({"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu",
                                    "offload_optimizer": "cpu"})
    assert kw["fsdp"] == "full_shard offload auto_wrap"
    with pytest.raises(ExportError) as e:
        training_arguments_kwargs({"framework": "fsdp", "zero_stage": 3, "offload_optimizer": "cpu"})
    assert e.value.key == "offload_optimizer"


def test_snippet_is_python():
    src = training_arguments_snippet({"optimizer": "lion", "method": "lora", "loss": "chunked"})
    compile(src, "snippet", "exec")
    assert "adam_beta2=0.99" in src and 'deepspeed="ds_config.json"' in src


def test_peft_kwargs():
    assert lora_config_kwargs({"method": "lora", "lora": {"rank": 8, "alpha": 16, "dropout": 0.1,
                                                          "targets": ["q_proj", "v_proj"]}}) == \
        {"r": 8, "lora_alpha": 16, "lora_dropout": 0.1, "target_modules": ["q_proj", "v_proj"], "bias": "none",
         "task_type": "CAUSAL_LM"}
    assert bnb_config_kwargs({"method": "lora"}) is None
    assert bnb_config_kwargs({"method": "qlora", "zero_stage": 2}) == {
        "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": "torch.bfloat16"}
    # sharded QLoRA (ZeRO-3 / FSDP) stores the 4-bit weights in a bf16 container
    assert bnb_config_kwargs({"method": "qlora", "zero_stage": 3})["bnb_4bit_quant_storage"] == "torch.bfloat16"
    assert bnb_config_kwargs({"method": "qlora", "quantization": {"type": "int8"}}) == {"load_in_8bit": True}
    with pytest.raises(ExportError) as e:
        run_export({"method": "full"}, "peft")
    assert e.value.key == "method"


def test_accelerate_deepspeed_and_fsdp():
    c = accelerate_config({"zero_stage": 3, "gpus_per_node": 8, "nodes": 2, "deepspeed": {"zero_init": False}})
    assert c["distributed_type"] == "DEEPSPEED" and c["num_processes"] == 16 and c["num_machines"] == 2
    assert c["deepspeed_config"] == {"deepspeed_config_file": "ds_config.json", "zero3_init_flag": False,
                                     "deepspeed_multinode_launcher": "standard"}
    c = accelerate_config({"framework": "fsdp", "zero_stage": 2, "precision": "fp16-mixed",
                           "activation_checkpointing": "full"})
    assert c["fsdp_config"]["fsdp_reshard_after_forward"] is False  # SHARD_GRAD_OP
    assert c["fsdp_config"]["fsdp_activation_checkpointing"] is True
    assert c["mixed_precision"] == "fp16"
    assert accelerate_config({"framework": "single", "gpus_per_node": 1})["distributed_type"] == "NO"


def test_yaml_writer_round_trips_through_pyyaml():
    yaml = pytest.importorskip("yaml")
    d = {"a": "no", "b": True, "c": None, "d": {"e": 1, "f": "x y", "g": 2.5, "h": ["p", "on"]}, "i": "ON",
         "j": "ds_config.json", "k": "1e3", "l": {}}
    assert yaml.safe_load(to_yaml(d)) == d
    for plan in ({"zero_stage": 3, "nodes": 2}, {"framework": "fsdp", "zero_stage": 3}, {"framework": "ddp"}):
        assert yaml.safe_load(accelerate_yaml(plan)) == accelerate_config(plan)


def test_launch_commands():
    c = launch_commands({"gpus_per_node": 8})
    assert c["deepspeed"] == "deepspeed --num_gpus 8 train.py --deepspeed ds_config.json"
    assert c["accelerate"] == "accelerate launch --config_file accelerate.yaml --num_processes 8 --num_machines 1 train.py"
    c = launch_commands({"framework": "fsdp", "gpus_per_node": 4, "nodes": 3})
    assert c["torchrun"].startswith("torchrun --nnodes 3 --nproc_per_node 4 --node_rank $NODE_RANK")
    assert "--num_processes 12" in c["accelerate"]  # 4 x 3
    assert launch_commands({"framework": "single", "gpus_per_node": 1}) == {"python": "python train.py"}
    assert "slots=8" in run_export({"gpus_per_node": 8, "nodes": 2}, "launch")
