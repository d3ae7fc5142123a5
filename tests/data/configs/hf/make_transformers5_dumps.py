"""Writes transformers5__*.json: what transformers' own TrainingArguments.to_json_string() writes for the
kwargs below (the file a Trainer user saves or passes to HfArgumentParser.parse_json_file), and beside each
a .expected file: [format, plan keys], written here by hand from what the kwargs mean (not from zerocalc).
Run: /work/main/.venv/bin/python tests/data/configs/hf/make_transformers5_dumps.py (transformers 5.24.0).
TrainingArguments._validate_args is skipped: it refuses bf16/fp16 on a machine without a GPU, and it only
checks; the dump is the dataclass fields as __post_init__ normalises them."""
import json
import os
import tempfile

import transformers
from transformers import TrainingArguments

TrainingArguments._validate_args = lambda self: None
HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {
    "sft_bf16_gc": (dict(per_device_train_batch_size=4, gradient_accumulation_steps=8, bf16=True,
                         gradient_checkpointing=True, optim="adamw_torch_fused"),
                    {"precision": "bf16-mixed", "micro_batch_size": 4, "gradient_accumulation_steps": 8,
                     "activation_checkpointing": "full", "optimizer": "adamw", "framework": "ddp"}),
    "fsdp_full_shard_offload": (dict(per_device_train_batch_size=1, bf16=True, fsdp="full_shard auto_wrap offload",
                                     fsdp_config={"transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]}),
                                {"framework": "fsdp", "zero_stage": 3, "offload_params": "cpu",
                                 "offload_optimizer": "cpu", "micro_batch_size": 1, "precision": "bf16-mixed"}),
    "fsdp_shard_grad_op": (dict(per_device_train_batch_size=2, fp16=True, fsdp="shard_grad_op auto_wrap"),
                           {"framework": "fsdp", "zero_stage": 2, "offload_params": "none",
                            "precision": "fp16-mixed", "micro_batch_size": 2}),
    "fp16_paged8": (dict(per_device_train_batch_size=2, gradient_accumulation_steps=16, fp16=True,
                         optim="paged_adamw_8bit"),
                    {"precision": "fp16-mixed", "optimizer": "paged-adamw-8bit", "micro_batch_size": 2,
                     "gradient_accumulation_steps": 16}),
    "liger_bf16": (dict(per_device_train_batch_size=8, bf16=True, use_liger_kernel=True, optim="adamw_bnb_8bit"),
                   {"loss": "chunked", "optimizer": "adamw-8bit", "micro_batch_size": 8, "precision": "bf16-mixed"}),
    "adafactor_fp32": (dict(per_device_train_batch_size=16, optim="adafactor"),
                       {"optimizer": "adafactor", "precision": "fp32", "micro_batch_size": 16,
                        "activation_checkpointing": "none", "loss": "standard"}),
    "defaults": (dict(),  # transformers 5 defaults: batch 8, accumulation 1, fp32, adamw_torch_fused
                 {"micro_batch_size": 8, "gradient_accumulation_steps": 1, "precision": "fp32", "optimizer": "adamw"}),
}

for name, (kwargs, expected) in CASES.items():
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, report_to="none", **kwargs)
        d = json.loads(args.to_json_string())
    d["output_dir"] = "out"
    d.pop("logging_dir", None)
    with open(os.path.join(HERE, f"transformers5__{name}.json"), "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    with open(os.path.join(HERE, f"transformers5__{name}.expected"), "w") as f:
        json.dump(["hf-training-args", expected], f)
        f.write("\n")
print("transformers", transformers.__version__, len(CASES), "dumps")
