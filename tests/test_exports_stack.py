"""Exports follow the plan's trainer: a LitGPT command, a torchtitan TOML, and a clear refusal where the HF
snippets would describe software the plan does not run."""
import pytest

from zerocalc.exports import ExportError, run_export

LITGPT = {"stack": {"trainer": "litgpt"}, "framework": "single", "gpus_per_node": 1, "method": "qlora",
          "micro_batch_size": 4, "gradient_accumulation_steps": 2, "seq_len": 512,
          "lora": {"rank": 8, "alpha": 16, "dropout": 0.05, "targets": ["q_proj", "v_proj"]},
          "quantization": {"type": "nf4", "double_quant": False}}


def test_litgpt_command_carries_the_memory_keys():
    text = run_export(LITGPT, "litgpt")
    assert text.startswith("litgpt finetune_lora meta-llama/Llama-3.1-8B")
    for flag in ("--devices 1", "--precision bf16-mixed", "--quantize bnb.nf4 ", "--train.micro_batch_size 4",
                 "--train.global_batch_size 8",       # 4 micro x 2 accumulation x 1 GPU
                 "--train.max_seq_length 512", "--lora_r 8", "--lora_query true", "--lora_key false",
                 "--lora_value true", "--lora_mlp false"):
        assert flag in text + " ", flag


def test_torchtitan_toml():
    text = run_export({"stack": {"trainer": "torchtitan"}, "framework": "fsdp", "zero_stage": 3,
                       "gradient_accumulation_steps": 1, "activation_checkpointing": "selective-op"}, "torchtitan")
    assert 'mode = "selective"' in text and 'selective_ac_option = "op"' in text
    assert "data_parallel_shard_degree = 4" in text and "batch_size = 2" in text and "seq_len = 4096" in text


@pytest.mark.parametrize("target", ["hf", "peft", "accelerate"])
def test_hf_snippets_refuse_a_torchtune_plan(target):
    with pytest.raises(ExportError) as e:
        run_export({"stack": {"trainer": "torchtune"}, "framework": "single", "gpus_per_node": 1,
                    "method": "lora"}, target)
    assert e.value.key == "stack.trainer" and "--to torchtune" in str(e.value)


def test_torchtitan_refuses_lora_by_its_key():
    with pytest.raises(ExportError) as e:
        run_export({"framework": "fsdp", "zero_stage": 3, "method": "lora"}, "torchtitan")
    assert e.value.key == "method"
