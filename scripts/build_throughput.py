"""Build validation/throughput.json: measured training throughput from public tables, each row with its
source URL, the exact quoted text, and the run written as a plan-v1 plan.

Rows are transcribed from the tables named below (read through the repository mirrors); nothing here is
fitted. Run: python scripts/build_throughput.py  (writes validation/throughput.json).
"""
from __future__ import annotations

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# MPT benchmark configs (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml): d_model, n_layers, n_heads;
# vocab 50368, expansion ratio 4, tied embeddings; the benchmark tables' NumParams grow with SeqLen by
# seq_len x d_model, i.e. learned positions: a GPT-2-shaped model (model_type gpt2) with n_positions = seq.
MPT = {"125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12), "1b": (2048, 24, 16),
       "3b": (2560, 32, 20), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 48, 64),
       "70b": (8192, 80, 64)}

FOUNDRY_COMMIT = "8c8dd48f72168c5d51e2f7b151595892a8fba43d"
FOUNDRY_URL = ("https://github.com/mosaicml/llm-foundry/blob/" + FOUNDRY_COMMIT
               + "/scripts/train/benchmarking/README.md")
# every BF16 table of the README at that commit, verbatim (the FP8 table needs fp8 linears: no plan key)
FOUNDRY_TABLES = ROOT / "validation" / "sources" / "llm-foundry-benchmarking-bf16.md"
FOUNDRY_GPU = {"h100_80gb": "h100-sxm-80gb", "a100_80gb": "a100-sxm4-80gb", "a100_40gb": "a100-sxm4-40gb"}


def foundry_tables() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    table = None
    for line in FOUNDRY_TABLES.read_text().splitlines():
        if line.startswith("## "):
            table = line[3:].strip()
        elif table and line.startswith("|") and ("_80gb" in line or "_40gb" in line):
            out.setdefault(table, []).append(line)
    return out


def foundry_rows() -> list[dict]:
    out = []
    seen: dict = {}
    for table, rows in foundry_tables().items():
        for text in rows:
            c = [x.strip() for x in text.strip("|").split("|")]
            size, seq, ngpu, gpu = c[0], int(c[1]), int(c[2]), c[3]
            mbs, gas, tps_gpu = int(c[7]), int(c[8]), int(c[12])
            precision, mp_mode, sharding, ckpt = c[14], c[15], c[16], c[17] == "True"
            h, layers, heads = MPT[size]
            roce = "RoCE" in table
            plan = {"schema": 1,
                    "model": {"name": f"MPT-{size} (llm-foundry benchmark)", "model_type": "gpt2", "n_embd": h,
                              "n_layer": layers, "n_head": heads, "vocab_size": 50368, "n_positions": seq,
                              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
                    "gpu": FOUNDRY_GPU[gpu],
                    "gpus_per_node": min(8, ngpu), "nodes": max(1, ngpu // 8), "framework": "fsdp",
                    "zero_stage": 2 if sharding == "SHARD_GRAD_OP" else 3,
                    "precision": "bf16-pure" if (precision, mp_mode) == ("bf16", "PURE") else "bf16-mixed",
                    "optimizer": "adamw", "micro_batch_size": mbs,
                    "gradient_accumulation_steps": gas, "seq_len": seq,
                    "activation_checkpointing": "full" if ckpt else "none", "attention": "flash"}
            if roce:
                plan["network"] = {"gbps_per_gpu": 200, "kind": "roce"}
            rid = f"foundry_{gpu.split('_')[0]}{'_40gb' if gpu.endswith('40gb') else ''}_{size}_s{seq}_g{ngpu}"
            seen[rid] = seen.get(rid, 0) + 1
            if seen[rid] > 1:
                rid += f"_{seen[rid]}"
            out.append({"id": rid,
                        "source": "llm-foundry", "source_group": f"llm-foundry benchmarking README: {table}",
                        "source_url": FOUNDRY_URL, "quote": text, "plan": plan, "measured_tokens_per_s_per_gpu": tps_gpu,
                        "quality": "measured",
                        "mapping_notes": "columns: Model, SeqLen, #GPUs, GPU, MFU, HFU, Model TFLOP, MicroBatchSize, "
                                         "GradAccum, GlobalBatchSize, S/s, T/s, T/s/GPU, ..., Precision, MP Mode, "
                                         "Sharding Strategy, Activation Checkpointing; Composer FSDP (FULL_SHARD: "
                                         "zero_stage 3, SHARD_GRAD_OP: 2), amp_bf16 / DEFAULT: bf16-mixed, bf16 / "
                                         "PURE: bf16-pure; MPT's flash / triton attention (the tables predate torch "
                                         "2.0 and FlashAttention-2) as flash; MPT as a GPT-2-shaped model (biases and "
                                         "LayerNorm affine differ by <0.1 % of the parameters), no dropout (MPTConfig "
                                         "defaults resid_pdrop 0.0, emb_pdrop 0.0: llmfoundry/models/mpt/"
                                         "configuration_mpt.py); optimizer (Decoupled LionW in the yamls) taken as "
                                         "AdamW: only the GPU optimizer step time differs"
                                         + ("; node-node 1600 Gb/s RoCE = 200 Gb/s per GPU" if roce else
                                            "; network not stated: the default")})
    return out


TITAN_A100 = "https://github.com/pytorch/torchtitan/blob/main/docs/performance.md"
TITAN_H100 = "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md"
TITAN_ROWS = [
    # (quote, model, seq, local batch, ac, url, gpus, group)
    ("| 8B | 1 | selective layer | 2904 | 56.8% |", "llama-3.1-8b", 8192, 1, "selective-op", TITAN_A100, 64, "Llama 3 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 8B | 1 | selective op | 2973 | 58.2% |", "llama-3.1-8b", 8192, 1, "selective-op", TITAN_A100, 64, "Llama 3 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 70B | 1 | full | 331 | 51.7% |", "llama-3.1-70b", 8192, 1, "full", TITAN_A100, 64, "Llama 3 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 13B | 2 | no | 2162 | 61.1%\t|", "llama-2-13b", 4096, 2, "none", TITAN_A100, 64, "Llama 2 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 13B | 2 | selective layer | 1914 | 54.1% |", "llama-2-13b", 4096, 2, "selective-op", TITAN_A100, 64, "Llama 2 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 13B | 2 | selective op | 1904 | 53.8% |", "llama-2-13b", 4096, 2, "selective-op", TITAN_A100, 64, "Llama 2 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 70B | 1[^1] | selective op | 355 | 50.8% |", "llama-2-70b", 4096, 1, "selective-op", TITAN_A100, 64, "Llama 2 performance numbers (64 A100 80GB, FSDP2)"),
    ("| 70B | 2 | full | 353 | 50.5% |", "llama-2-70b", 4096, 2, "full", TITAN_A100, 64, "Llama 2 performance numbers (64 A100 80GB, FSDP2)"),
    ("Table 1 ... Llama 3.1 8B model. 8 GPUs. Local batch size 2, global batch size 16. Selective activation checkpointing. | FSDP | 5,762 | 82.4 |",
     "llama-3.1-8b", 8192, 2, "selective-op", TITAN_H100, 8, "H100 Table 1 (FSDP, 8 GPUs)"),
    ("Table 3 ... Llama 3.1 8B model. 128 GPUs. Local batch size 2, global batch size 256. Selective activation checkpointing. | FSDP | 5,605 | 67.0 |",
     "llama-3.1-8b", 8192, 2, "selective-op", TITAN_H100, 128, "H100 Table 3 (FSDP, 128 GPUs)"),
]
H100_GT = {"name": "H100 96GB HBM2e (Grand Teton, 500 W)", "memory_gib": 96, "compute_capability": "9.0",
           "bf16_dense_tflops": 912.5, "memory_bandwidth_gb_s": 2400, "link_gb_s": 450, "pcie_gb_s": 63.0}


def titan_rows() -> list[dict]:
    out = []
    for i, (quote, model, seq, lbs, ac, url, gpus, group) in enumerate(TITAN_ROWS):
        measured = int(quote.split("|")[-3].strip().replace(",", ""))      # the TPS/GPU (WPS) column
        h100 = url == TITAN_H100
        plan = {"schema": 1, "model": model, "gpu": H100_GT if h100 else "a100-sxm4-80gb",
                "gpus_per_node": 8, "nodes": gpus // 8, "framework": "fsdp", "zero_stage": 3,
                "precision": "bf16-mixed", "optimizer": "adamw", "micro_batch_size": lbs,
                "gradient_accumulation_steps": 1, "seq_len": seq, "activation_checkpointing": ac, "attention": "sdpa",
                "stack": {"trainer": "torchtitan", "fsdp_version": 2}}
        if h100:
            plan["network"] = {"gbps_per_gpu": 400, "kind": "roce"}
        notes = ("torchtitan FSDP2 (fully_shard), bf16 params / fp32 reduce, SDPA flash, no torch.compile; "
                 "seq_len from the train configs (Llama 3: 8192, Llama 2: 4096); "
                 "'selective op' is the plan's selective-op (torchtitan's op policy); 'selective layer' (every 2nd "
                 "layer recomputed, no plan key) is mapped to selective-op too: both recompute about half of the "
                 "forward's matmuls; the H100 rows' 'selective' is train_configs/llama3_8b.toml's default "
                 "(mode selective, selective_ac_option op); stack torchtitan, FSDP2")
        notes += ("; H100 96GB HBM2e at 500 W, 400 Gb/s RDMA per GPU (as the page states); the page's footnote: "
                  "'the actual peak TFLOPs number is between SXM and NVL, and we don't know its exact value': "
                  "the midpoint of SXM's 989.5 and NVL's 835.5 dense bf16 TFLOP/s taken (912.5)"
                  if h100 else "; the 64-A100 cluster's network is not stated: the default")
        out.append({"id": f"titan_{'h100' if h100 else 'a100'}_{i}", "source": "torchtitan", "source_group": group,
                    "source_url": url, "quote": quote, "plan": plan, "measured_tokens_per_s_per_gpu": measured,
                    "quality": "approximate" if ac != "none" and "full" not in quote else "measured",
                    "mapping_notes": notes})
    return out


TUNE = "https://github.com/pytorch/torchtune/blob/main/README.md#memory-and-training-speed"
TUNE_FLAGS = "https://github.com/pytorch/torchtune/blob/main/README.md#optimization-flags"
A6000 = {"name": "RTX A6000", "memory_gib": 47.99, "compute_capability": "8.6", "bf16_dense_tflops": 154.8,
         "memory_bandwidth_gb_s": 768, "pcie_gb_s": 31.5}


def tune_rows() -> list[dict]:
    shared = ROOT.parent / "shared" / "validation" / "public.json"    # the read-only shared/ beside the clone
    public = {r["id"]: r for r in json.loads(shared.read_text())} if shared.exists() else {}
    rows = [
        ("tt_l31_8b_full_4090", "| Llama 3.1 8B | Full finetune | 1x 4090 | 18.9 GiB | 1650 |", 1650, 1),
        ("tt_l31_8b_full_a6000", "| Llama 3.1 8B | Full finetune | 1x A6000 | 37.4 GiB |  2579|", 2579, 1),
        ("tt_l31_8b_lora_4090", "| Llama 3.1 8B | LoRA | 1x 4090 |  16.2 GiB | 3083 |", 3083, 1),
        ("tt_l31_8b_lora_a6000", "| Llama 3.1 8B | LoRA | 1x A6000 | 30.3 GiB  | 4699 |", 4699, 1),
        ("tt_l31_8b_qlora_4090", "| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB | 2413  |", 2413, 1),
        ("tt_l31_70b_full_8xa100", "| Llama 3.1 70B | Full finetune | 8x A100  | 13.9 GiB ** | 1568  |", 1568, 8),
        ("tt_l31_70b_lora_8xa100", "| Llama 3.1 70B | LoRA | 8x A100 | 27.6 GiB  | 3497  |", 3497, 8),
        ("tt_l31_405b_qlora_8xa100", "| Llama 3.1 405B | QLoRA | 8x A100 | 44.8 GB  | 653  |", 653, 8),
    ]
    out = []
    for rid, quote, tps, gpus in rows:
        plan = dict(public[rid]["plan"])
        # the stack the table ran (validation/public-stack.json, group "torchtune README (Llama 3.1 memory table)":
        # "compile on for every row", torchtune/training/_compile.py compiles the model and the loss)
        plan["stack"] = {"trainer": "torchtune", "compile": "model+loss"}
        if isinstance(plan.get("gpu"), dict) and plan["gpu"].get("name") == "RTX A6000":
            plan["gpu"] = A6000
        out.append({"id": rid, "source": "torchtune", "source_group": "torchtune README (Llama 3.1 memory and training speed)",
                    "source_url": TUNE, "quote": quote, "plan": plan, "measured_tokens_per_s_per_gpu": tps / gpus,
                    "quality": "approximate",
                    "mapping_notes": "plan as in ../shared/validation/public.json (same row: batch 2, packed 2048, "
                                     "torch.compile on: stack.compile model+loss); Tokens/sec read as the total over the GPUs "
                                     "(per GPU it would exceed the A100's peak on the 70B/405B rows), so / GPU count; "
                                     "A6000 rates from NVIDIA's datasheet (309.7 TFLOPS sparse bf16 -> 154.8 dense, "
                                     "768 GB/s)"})
    base = {"schema": 1, "model": "llama-3.2-3b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 1, "nodes": 1,
            "framework": "single", "precision": "bf16-pure", "optimizer": "adamw", "micro_batch_size": 2,
            "gradient_accumulation_steps": 1, "seq_len": 4096, "attention": "sdpa", "method": "full"}
    steps = [
        ("| [+ Packed Dataset](https://pytorch.org/torchtune/main/basics/packing.html) | 60.0 | +135.16% | 7075 | +238.40% |", 7075, {}),
        ("| [+ Chunked Cross Entropy](https://pytorch.org/torchtune/main/generated/torchtune.modules.loss.CEWithChunkedOutputLoss.html) | 42.9 | -15.83% | 9174 | +1.96% |", 9174, {"loss": "chunked"}),
        ("| [+ Activation Checkpointing](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#activation-checkpointing) | 24.9 | -41.93% | 7210 | -21.41% |", 7210, {"loss": "chunked", "activation_checkpointing": "full"}),
        ("| [+ Fuse optimizer step into backward](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#fusing-optimizer-step-into-backward-pass) | 23.1 | -7.29% | 7309 | +1.38% |", 7309, {"loss": "chunked", "activation_checkpointing": "full", "optimizer_in_backward": True}),
        ("| [+ Activation Offloading](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#activation-offloading) | 21.8 | -5.48% | 7301 | -0.11% |", 7301, {"loss": "chunked", "activation_checkpointing": "full", "optimizer_in_backward": True, "activation_offloading": True}),
        ("| [+ 8-bit AdamW](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#lower-precision-optimizers) | 17.6 | -19.63% | 6960 | -4.67% |", 6960, {"loss": "chunked", "activation_checkpointing": "full", "optimizer_in_backward": True, "activation_offloading": True, "optimizer": "adamw-8bit"}),
        ("| [LoRA](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#glossary-lora) | 8.5 | -51.61% | 8210 | +17.96% |", 8210, {"loss": "chunked", "activation_checkpointing": "full", "activation_offloading": True, "method": "lora", "lora": {"rank": 64, "alpha": 128, "targets": ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}}),
        ("| [QLoRA](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html#quantized-low-rank-adaptation-qlora) | 4.6 | -45.71% | 8035 | -2.13% |", 8035, {"loss": "chunked", "activation_checkpointing": "full", "activation_offloading": True, "method": "qlora", "lora": {"rank": 64, "alpha": 128, "targets": ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}}),
    ]
    for i, (quote, tps, ch) in enumerate(steps):
        # every row after the table's "+ Compile" row runs compiled (torchtune compiles the model and the loss)
        plan = {**base, **ch, "stack": {"trainer": "torchtune", **({"compile": "model+loss"} if i else {})}}
        out.append({"id": f"tt_l32_3b_flags_{i}", "source": "torchtune", "source_group": "torchtune README (Llama 3.2 3B optimization flags, A100)",
                    "source_url": TUNE_FLAGS, "quote": quote, "plan": plan, "measured_tokens_per_s_per_gpu": tps,
                    "quality": "approximate",
                    "mapping_notes": "baseline: full_finetune_single_device, Llama 3.2 3B, batch 2, max seq 4096, bf16, "
                                     "A100 (80GB assumed); each technique added on top of the previous (LoRA/QLoRA "
                                     "without optimizer_in_bwd and 8-bit AdamW); packed to 4096; rows after '+ Compile' "
                                     "run with torch.compile (stack.compile model+loss); LoRA settings of "
                                     "llama3_2/3B_lora_single_device assumed (rank 64, q/v/output + MLP)"})
    return out


FMS = "https://github.com/foundation-model-stack/fms-acceleration/blob/main/scripts/benchmarks/refs/a100_80gb.csv"
FMS_HEADER = ("acceleration_framework_config_file,epoch,fp16,framework_config,index,learning_rate,lora_alpha,lora_dropout,"
              "model_name_or_path,num_gpus,nvidia_mem_reserved,peak_torch_mem_alloc_in_bytes,peft_method,"
              "per_device_train_batch_size,r,target_modules,torch_mem_alloc_in_bytes,train_loss,train_runtime,"
              "train_samples_per_second,train_steps_per_second,train_tokens_per_second")
FMS_ROWS = [
    ",0.04,,none,0,2e-5,,,mistralai/Mistral-7B-v0.1,1,77705.0,72971724288.0,,4,,,44004763136.0,0.9278398831685384,177.1092,0.678,0.169,2775.237",
    ",0.04,,none,1,2e-5,,,mistralai/Mistral-7B-v0.1,2,44706.0,36762859520.0,,2,,,29521119232.0,0.8970902442932129,91.086,1.317,0.329,2698.11",
    ",0.09,,none,2,2e-5,,,mistralai/Mistral-7B-v0.1,1,74383.0,72972117504.0,,8,,,44005156352.0,0.9879656155904134,322.458,0.744,0.093,3048.583",
    ",0.09,,none,3,2e-5,,,mistralai/Mistral-7B-v0.1,2,53907.0,36763056128.0,,4,,,29521315840.0,0.9259945551554362,167.7727,1.431,0.179,2929.678",
    ",0.04,,none,12,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,1,29731.0,26108963328.0,lora,4,16,q_proj k_proj v_proj o_proj,15119590912.0,0.9096682230631511,136.624,0.878,0.22,3597.611",
    ",0.04,,none,13,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,2,18697.0,15123161088.0,lora,2,16,q_proj k_proj v_proj o_proj,7850391552.0,0.8918854713439941,82.0311,1.463,0.366,2995.936",
    ",0.09,,none,14,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,1,43195.0,37098695168.0,lora,8,16,q_proj k_proj v_proj o_proj,15119984128.0,0.962119706471761,270.6301,0.887,0.111,3632.412",
    ",0.09,,none,15,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,2,26235.0,21433753600.0,lora,4,16,q_proj k_proj v_proj o_proj,7850588160.0,0.9218235015869141,143.8184,1.669,0.209,3417.643",
    ",0.04,,none,17,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,2,62617.0,57540387840.0,lora,2,16,q_proj k_proj v_proj o_proj,47311452160.0,0.9361546834309896,179.3128,0.669,0.167,1370.566",
    ",0.09,,none,19,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,2,69848.0,64347637760.0,lora,4,16,q_proj k_proj v_proj o_proj,47311648768.0,0.9383139928181966,280.8919,0.854,0.107,1749.855",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.04,True,baseline-peft-bnb,24,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,1,27023.0,22825932800.0,lora,4,16,q_proj k_proj v_proj o_proj,5368221184.0,0.9589527130126954,178.8061,0.671,0.168,2748.9",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.04,True,baseline-peft-bnb,25,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,2,13530.0,9974622720.0,lora,2,16,q_proj k_proj v_proj o_proj,2727018496.0,0.9154380798339844,87.3652,1.374,0.343,2813.02",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.09,True,baseline-peft-bnb,26,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,1,47145.0,40278956032.0,lora,8,16,q_proj k_proj v_proj o_proj,5368614400.0,0.9702634493509928,341.2286,0.703,0.088,2880.884",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.09,True,baseline-peft-bnb,27,2e-4,16,0.0,mistralai/Mistral-7B-v0.1,2,21502.0,16587205120.0,lora,4,16,q_proj k_proj v_proj o_proj,2727215104.0,0.914565912882487,149.9341,1.601,0.2,3278.241",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.04,True,baseline-peft-bnb,28,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,1,48313.0,46419968512.0,lora,4,16,q_proj k_proj v_proj o_proj,25726225920.0,0.9744932492574055,351.8623,0.341,0.085,1396.91",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.04,True,baseline-peft-bnb,29,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,2,25549.0,21922782720.0,lora,2,16,q_proj k_proj v_proj o_proj,13219233792.0,0.9303209940592448,171.4299,0.7,0.175,1433.589",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.09,True,baseline-peft-bnb,30,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,1,69931.0,67089150464.0,lora,8,16,q_proj k_proj v_proj o_proj,25726619136.0,0.9745417594909668,629.837,0.381,0.048,1560.785",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.09,True,baseline-peft-bnb,31,2e-4,16,0.0,mistralai/Mixtral-8x7B-Instruct-v0.1,2,32957.0,29384115200.0,lora,4,16,q_proj k_proj v_proj o_proj,13219430400.0,0.9310146331787109,300.5119,0.799,0.1,1635.609",
    "sample-configurations/baseline-peft-bnb-nf4-sample-configuration.yaml,0.04,True,baseline-peft-bnb,33,2e-4,16,0.0,NousResearch/Llama-2-70b-hf,2,52634.0,46524471808.0,lora,2,16,q_proj k_proj v_proj o_proj,19172741120.0,1.0399916648864747,584.3145,0.205,0.051,420.595",
]
FMS_MODELS = {"mistralai/Mistral-7B-v0.1": "mistral-7b-v0.3", "mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
              "NousResearch/Llama-2-70b-hf": "llama-2-70b"}


def fms_rows() -> list[dict]:
    keys = FMS_HEADER.split(",")
    out = []
    for text in FMS_ROWS:
        r = dict(zip(keys, text.split(",")))
        qlora = r["framework_config"] == "baseline-peft-bnb"
        lora = r["peft_method"] == "lora"
        n = int(r["num_gpus"])
        plan = {"schema": 1, "model": FMS_MODELS[r["model_name_or_path"]], "gpu": "a100-sxm4-80gb",
                "gpus_per_node": n, "nodes": 1, "framework": "fsdp", "zero_stage": 3,
                "precision": "fp16-mixed" if qlora else "bf16-pure", "optimizer": "adamw",
                "micro_batch_size": int(r["per_device_train_batch_size"]), "gradient_accumulation_steps": 1,
                "seq_len": 4096, "activation_checkpointing": "full", "attention": "flash",
                "method": "qlora" if qlora else "lora" if lora else "full",
                # refs/requirements.txt at the CSV's commit (0aab2c6): transformers==4.45.2, bitsandbytes==0.43.3
                "stack": {"trainer": "hf-trainer", "transformers": "4.45", "bitsandbytes": "current"}}
        if lora:
            plan["lora"] = {"rank": int(r["r"]), "alpha": int(r["lora_alpha"]), "dropout": 0.0,
                            "targets": r["target_modules"].split()}
        if qlora:
            plan["quantization"] = {"type": "nf4", "double_quant": True, "compute_dtype": "fp16"}
        out.append({"id": f"fms_a100_{r['index']}", "source": "fms-acceleration",
                    "source_group": "fms-acceleration benchmarks refs/a100_80gb.csv (HF Trainer + accelerate FSDP)",
                    "source_url": FMS, "quote": text, "plan": plan,
                    "measured_tokens_per_s_per_gpu": float(r["train_tokens_per_second"]), "quality": "approximate",
                    "mapping_notes": "columns: " + FMS_HEADER + "; HF Trainer train_tokens_per_second is per device "
                                     "(include_tokens_per_second); scripts/benchmarks/defaults.yaml: "
                                     "gradient_checkpointing True, gradient_accumulation_steps 1, use_flash_attn; "
                                     "accelerate.yaml: FSDP FULL_SHARD, mixed_precision 'no'; scenarios.yaml: "
                                     "torch_dtype float16 (fp16 weights: bf16-pure stands in, same sizes and A100 "
                                     "rate; fp16 AMP for the bnb QLoRA rows); sequence 4096 packed, derived: "
                                     "tokens/s / steps/s / batch = ~4100 tokens per sample; Mistral-7B-v0.1 as the "
                                     "v0.3 preset (vocabulary 32000 vs 32768); stack from refs/requirements.txt at the "
                                     "same commit: transformers 4.45.2, bitsandbytes 0.43.3, torch 2.4.1"})
    return out


PEFT_BASE = "https://github.com/huggingface/peft/blob/main/method_comparison/MetaMathQA/results/"


def peft_rows() -> list[dict]:
    rows = [
        ("full-finetuning--llama-3.2-3B-lr_0.00001.json", '"step": 250, ... "tokens / sec": 2331.295535996918', 2331.295535996918,
         {"method": "full"}),
        ("lora--llama-3.2-3B-rank32.json", '"step": 250, ... "tokens / sec": 6743.659644748829', 6743.659644748829,
         {"method": "lora", "lora": {"rank": 32, "alpha": 64, "dropout": 0.0, "targets": ["q_proj", "v_proj"]}}),
    ]
    out = []
    for fname, quote, tps, ch in rows:
        plan = {"schema": 1, "model": "llama-3.2-3b", "gpu": "l40s", "gpus_per_node": 1, "nodes": 1, "framework": "single",
                "precision": "bf16-pure", "optimizer": "adamw", "micro_batch_size": 4, "gradient_accumulation_steps": 1,
                "seq_len": 210, "activation_checkpointing": "none", "attention": "sdpa",
                "stack": {"trainer": "custom-loop"}, **ch}
        out.append({"id": "peft_" + fname.split("--")[0], "source": "peft-method-comparison",
                    "source_group": "HF PEFT method_comparison MetaMathQA (L40S)", "source_url": PEFT_BASE + fname,
                    "quote": quote, "plan": plan, "measured_tokens_per_s_per_gpu": tps, "quality": "approximate",
                    "mapping_notes": "train_config: Llama-3.2-3B bf16, batch_size 4, max_seq_length 768, AdamW, no "
                                     "compile, no AMP, L40S; unpacked MetaMathQA: 'train total tokens' 4198051 over "
                                     "20000 samples = 210 tokens per sample taken as seq_len (padding to the longest "
                                     "in the batch not modelled); first logged interval (step 250); run.py train() is its own "
                                     "loop (torch.optim.AdamW from get_optimizer_and_scheduler, no flags: foreach on "
                                     "CUDA): stack.trainer custom-loop"})
    return out


def main() -> None:
    rows = foundry_rows() + titan_rows() + tune_rows() + fms_rows() + peft_rows()
    path = ROOT / "validation" / "throughput.json"
    path.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{len(rows)} rows -> {path}")


if __name__ == "__main__":
    main()
