"""The software stack (plan-v1 Extension 1): hand-computed differences between stacks, and the combinations
the software cannot run. Every expected figure is written out from the rule's source (memory/stack.py,
memory/logits.py, memory/frameworks.py), not read from the engine."""
import json
from pathlib import Path

import pytest

from zerocalc import Plan, PlanError, estimate
from zerocalc.memory.inputs import step_inputs
from zerocalc.memory.lora import quantized_linear_bytes
from zerocalc.model import model_from_config

# a model_type transformers builds that the engine still refuses (the list may only shrink, so read it)
REFUSALS = Path(__file__).parent / "data" / "architecture_refusals.json"
# a model_type the engine refuses by name: the checked-in refusals (a list that may only shrink, now empty), else
# one that no transformers release has
REFUSED_TYPE = (sorted(json.loads(REFUSALS.read_text())["refused"]) or ["not_a_transformers_type"])[0]

MIB, GIB = 1 << 20, 1 << 30
L1B = {"model": "llama-3.2-1b", "gpu": "h200-sxm-141gb", "framework": "single", "gpus_per_node": 1,
       "gradient_accumulation_steps": 1, "seq_len": 2048, "micro_batch_size": 1}
P_1B = 1_235_814_400                   # Llama 3.2 1B parameters (models.json computed_total)
V, H, I_1B, LAYERS_1B = 128_256, 2048, 8192, 16


def est(**changes):
    d = {**L1B, **changes}
    return estimate(Plan.from_dict(d))


def phase(e, name):
    return e.per_gpu.phase_allocated[name]


def test_eager_cuda_context_is_the_measured_1343_mib():
    lazy = est(gpu="a100-sxm4-80gb")
    eager = est(gpu="a100-sxm4-80gb", stack={"cuda_context": "eager"})
    # sm80 lazy context 512 MiB; the HF guide's bare-process reading 1343 MiB
    assert eager.per_gpu.device_used - lazy.per_gpu.device_used == (1343 - 512) * MIB
    assert eager.per_gpu.peak_allocated == lazy.per_gpu.peak_allocated


@pytest.mark.parametrize("impl, extra", [
    ("fused", 0),
    ("foreach", 2 * P_1B),                       # one bf16 copy of exp_avg_sq for every parameter
    ("single-tensor", 2 * 2 * V * H),            # sqrt and division temporaries of the largest tensor (embedding)
])
def test_adamw_implementation_step_transient(impl, extra):
    fused = est(precision="bf16-pure", stack={"optimizer_impl": "fused"})
    other = est(precision="bf16-pure", stack={"optimizer_impl": impl})
    assert phase(other, "step") - phase(fused, "step") == extra
    assert phase(other, "step_norm") == phase(fused, "step_norm")   # the norm runs before the update


def test_hf_trainer_of_transformers_4_defaults_to_foreach():
    a = est(precision="bf16-pure", stack={"transformers": "4.46"})
    b = est(precision="bf16-pure", stack={"transformers": "4.46", "optimizer_impl": "foreach"})
    assert phase(a, "step") == phase(b, "step")
    assert phase(a, "step") - phase(est(precision="bf16-pure"), "step") == 2 * P_1B


def test_custom_loop_keeps_the_output_logits_through_backward_and_into_the_next_forward():
    hf = est(precision="bf16-pure")
    # a plain loop's torch AdamW is foreach by default; fused here, to see the logits alone
    loop = est(precision="bf16-pure", stack={"trainer": "custom-loop", "optimizer_impl": "fused"})
    kept = 2 * 2048 * V                          # this step's bf16 logits (the previous step's during forward)
    for ph in ("fwd", "loss_bwd", "bwd_end", "step"):
        assert phase(loop, ph) - phase(hf, ph) == kept, ph


def test_transformers_445_returns_fp32_logits_that_a_loop_keeps():
    kw = dict(precision="bf16-pure", micro_batch_size=2)
    hf5 = est(**kw, stack={"trainer": "custom-loop"})
    old = est(**kw, stack={"trainer": "custom-loop", "transformers": "4.45"})
    n, shifted = 2 * 2048 * V, 2 * 2047 * V
    # transformers 5: fwd bf16 2n + upcast 4n + log_softmax 4n, the loop keeps 2n (previous step);
    # 4.45: max(2n + 4n, 4n + shifted copy 4n' + log_softmax 4n'), the loop keeps the fp32 4n
    assert phase(old, "fwd") - phase(hf5, "fwd") == (4 * n + 4 * n + 4 * shifted + 4 * shifted) - (2 * n + 10 * n)
    # backward: saved 4n' + two fp32 gradients 8n' against 12n; kept 4n against 2n
    assert phase(old, "loss_bwd") - phase(hf5, "loss_bwd") == (12 * shifted + 4 * n) - (12 * n + 2 * n)


def test_transformers_446_shifts_an_fp32_copy_of_more_than_one_sequence():
    for b in (1, 2):
        hf5 = est(precision="bf16-pure", micro_batch_size=b)
        t446 = est(precision="bf16-pure", micro_batch_size=b, stack={"transformers": "4.46"})
        n, shifted = b * 2048 * V, b * 2047 * V
        copy = 4 * shifted if b > 1 else 0        # logits[..., :-1, :] of one sequence is already contiguous
        assert phase(t446, "fwd") - phase(hf5, "fwd") == (2 * n + 4 * n + copy + 4 * shifted) - 10 * n
        assert phase(t446, "loss_bwd") - phase(hf5, "loss_bwd") == 12 * shifted - 12 * n


def test_peft_adapters_fp32_by_default_and_base_dtype_before_peft_012():
    # docs/tracer.md §4: LoRA on Llama 3.2 1B, s2048 b1, bf16 base without autocast: 10.19 GiB with fp32
    # adapters (peft's default) and 8.37 GiB with bf16 adapters (traced peaks)
    lora = {"rank": 16, "alpha": 32, "dropout": 0.0}
    fp32 = est(precision="bf16-pure", method="lora", lora=lora)
    base = est(precision="bf16-pure", method="lora", lora=lora, stack={"peft_adapter_dtype": "base"})
    assert abs(fp32.per_gpu.peak_allocated / GIB - 10.19) / 10.19 < 0.03
    assert abs(base.per_gpu.peak_allocated / GIB - 8.37) / 8.37 < 0.03
    # torchtune builds its LoRA layers in the model dtype
    tt = est(precision="bf16-pure", method="lora", lora=lora, stack={"trainer": "torchtune"})
    assert step_inputs(tt.plan).dt.adapter == 2 and step_inputs(fp32.plan).dt.adapter == 4


def test_old_bitsandbytes_keeps_every_4bit_input():
    kw = dict(precision="bf16-pure", method="qlora", lora={"rank": 16, "alpha": 32, "dropout": 0.0})
    new = step_inputs(est(**kw).plan).acts
    old = step_inputs(est(**kw, stack={"bitsandbytes": "0.42"}).plan).acts
    t = 2048
    # per layer the bf16 inputs the fp32 adapters do not keep already: the two norm outputs (q/k/v and gate/up
    # share theirs) and down_proj's input; o_proj's input is the attention output flash already saves
    assert old.stack_saved - new.stack_saved == LAYERS_1B * (2 * t * H + 2 * t * H + 2 * t * I_1B)


def test_kbit_prepare_keeps_the_unquantized_parameters_in_fp32():
    kw = dict(precision="bf16-pure", method="qlora")
    a = step_inputs(est(**kw).plan)
    b = step_inputs(est(**kw, stack={"kbit_prepare": True}).plan)
    quantized = sum(n for n, _ in a.arch.block_matrices)
    assert b.frozen_bytes - a.frozen_bytes == 2 * (P_1B - quantized)     # 4 instead of 2 bytes each


@pytest.mark.parametrize("trainer", ["hf-trainer", "custom-loop", "torchtune", "litgpt"])
def test_kbit_prepare_auto_is_false_for_every_trainer(trainer):
    # memory/stack.py kbit_prepared: no modelled trainer's current release trains in the prepared state (plain HF
    # Trainer and LLaMA-Factory never call prepare_model_for_kbit_training, TRL >= 0.26 neither, axolotl casts
    # the norms and embeddings back to torch_dtype): auto gives the bytes of false; true adds 2 B for each of
    # the 262,668,288 tied embedding + 33 x 2048 norm parameters = 525,471,744 B (hf-trainer, bf16-mixed)
    kw = dict(precision="bf16-mixed", method="qlora", stack={"trainer": trainer})
    auto = est(**kw).per_gpu.peak_allocated
    off = est(**{**kw, "stack": {"trainer": trainer, "kbit_prepare": False}}).per_gpu.peak_allocated
    assert auto == off
    if trainer == "hf-trainer":
        a = step_inputs(est(**kw).plan)
        b = step_inputs(est(**{**kw, "stack": {"trainer": trainer, "kbit_prepare": True}}).plan)
        assert b.frozen_bytes - a.frozen_bytes == 2 * (V * H + (2 * LAYERS_1B + 1) * H) == 525_471_744


@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_trl_bf16_kbit_prepare_is_true_with_a_16bit_embedding(ckpt):
    # TRL 0.9-0.24 SFTTrainer, bf16: prepare_model_for_kbit_training (all non-4-bit params fp32), get_peft_model,
    # then peft_module_casting_to_bf16 (norms fp32, lm_head / embed_tokens back to bf16). Against kbit true on
    # Llama 3.2 1B (tied: one V x h tensor), bf16-mixed, s 2048 b 1:
    # - resident: the embedding 2 B instead of 4: 2 * 128256 * 2048 = 525,336,576 B less
    # - autocast keeps no 16-bit copy of a bf16 head weight: 2 * V * h = 525,336,576 B less
    # - rotary cos/sin follow the bf16 embedding output: 2 tensors * (4 - 2) B * 2048 * 64 = 524,288 B less
    # - checkpointed: layer 0's saved input is the bf16 embedding output: (4 - 2) * 2048 * 2048 = 8,388,608 B
    # (traced: tools/memtrace/golden/stacks/l1b-qlora-mixed-*kbit-trlbf16, activations exact under checkpointing)
    kw = dict(precision="bf16-mixed", method="qlora", activation_checkpointing=ckpt)
    a = step_inputs(est(**kw, stack={"kbit_prepare": True}).plan)
    b = step_inputs(est(**kw, stack={"kbit_prepare": "trl-bf16"}).plan)
    assert a.frozen_bytes - b.frozen_bytes == 2 * V * H == 525_336_576
    assert a.acts.autocast_weight_copies - b.acts.autocast_weight_copies == 2 * V * H
    assert a.acts.head_saved - b.acts.head_saved == 2 * 2 * 2048 * 64
    assert a.acts.stack_saved - b.acts.stack_saved == (2 * 2048 * H if ckpt == "full" else 0)


def test_trl_bf16_kbit_prepare_is_no_cast_outside_qlora():
    # prepare_model_for_kbit_training is QLoRA's: a LoRA plan with the value estimates as without it
    kw = dict(precision="bf16-mixed", method="lora")
    assert (est(**kw, stack={"kbit_prepare": "trl-bf16"}).per_gpu.peak_allocated
            == est(**kw).per_gpu.peak_allocated)


def _qlora_acts_without_and_with_kbit(precision):
    """Activations of QLoRA on all 7 projections (s 2048, b 1, no checkpointing), without and with
    prepare_model_for_kbit_training."""
    lora = {"rank": 16, "alpha": 32, "dropout": 0.0,
            "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
    kw = dict(precision=precision, method="qlora", lora=lora)
    return (step_inputs(est(**kw).plan).acts,
            step_inputs(est(**kw, stack={"kbit_prepare": True}).plan).acts)


def test_kbit_prepare_without_checkpointing_saves_the_mlp_in_fp32():
    # QLoRA bf16-mixed (autocast), all 7 projections, s 2048 b 1, no checkpointing. prepare_model_for_kbit_training
    # makes the residual stream fp32; bnb Linear4bit.forward returns `... .to(inp_dtype)`, so gate_proj's and
    # up_proj's outputs and silu's output (kept by silu and mul) are fp32: +2 B x 3 x s*I per layer. The norms keep
    # fp32 inputs with or without kbit; SDPA keeps autocast's bf16 q/k/v either way. Outside the layers: RoPE
    # cos/sin (two (1, s, head_dim 64) tensors) +2 B each, and autocast's bf16 copy of the fp32 lm_head (2Vh).
    a, b = _qlora_acts_without_and_with_kbit("bf16-mixed")
    t = 2048
    assert b.stack_saved - a.stack_saved == LAYERS_1B * 3 * 2 * t * I_1B == 1_610_612_736
    assert b.head_saved - a.head_saved == 2 * 2 * t * 64 == 524_288
    assert b.autocast_weight_copies - a.autocast_weight_copies == 2 * V * H == 525_336_576
    # the traced difference (tools/memtrace/golden/stacks/l1b-qlora-mixed-kbit.json against its default twin,
    # activations at forward end: 5_996_380_176 - 3_859_906_576) is the sum of the three, to the byte
    assert b.saved_total - a.saved_total == 1_610_612_736 + 524_288 + 525_336_576 == 2_136_473_600


def test_kbit_prepare_without_autocast_runs_attention_in_fp32():
    # QLoRA bf16-pure (no autocast), fp32 adapters, as above. The 4-bit q/k/v outputs come back in the fp32 norm
    # output's dtype, so RoPE and SDPA run in fp32, and nothing casts the LoRA inputs: per layer
    #   + 3 x 2 x s*I          gate/up/silu outputs fp32 (as under autocast)
    #   + 2 x s x (2q + 2kv)   SDPA's q, k, v and output fp32 instead of bf16 (q = h = 2048, kv = 512)
    #   - 4 x s x q            o_proj's LoRA reads the fp32 attention output itself, no fp32 copy
    #   - 5 x 4 x s*h          q/k/v/gate/up LoRA: no fp32 copy of a bf16 norm output each ...
    #   + 2 x 4 x s*h          ... the two fp32 norm outputs are saved themselves
    a, b = _qlora_acts_without_and_with_kbit("bf16-pure")
    t, q, kv = 2048, 2048, 512
    per_layer = 6 * t * I_1B + 2 * t * (2 * q + 2 * kv) - 4 * t * q - 20 * t * H + 8 * t * H
    assert per_layer == 100_663_296 + 20_971_520 - 16_777_216 - 83_886_080 + 33_554_432 == 54_525_952
    assert b.stack_saved - a.stack_saved == LAYERS_1B * per_layer
    # traced (tools/memtrace, this plan with stack.peft_adapter_dtype fp32, kbit true minus false, saved at forward
    # end): 7_110_672_400 - 6_237_732_880 = 872_939_520 = 16 x 54_525_952 + the fp32 RoPE cos/sin (2 x 2 x s x 64)
    assert b.saved_total - a.saved_total == LAYERS_1B * per_layer + 2 * 2 * t * 64 == 872_939_520


def test_gptq_storage_of_one_matrix():
    plan = Plan.from_dict({"method": "qlora", "quantization": {"type": "gptq", "bits": 4, "group_size": 128}})
    # 4096 x 4096, 32 groups: qweight 4096*4096/2, qzeros 32*4096/2, fp16 scales 2*32*4096, int32 g_idx 4*4096
    assert quantized_linear_bytes(4096 * 4096, 4096, plan) == 8_388_608 + 65_536 + 262_144 + 16_384


def test_modules_to_save_trains_a_copy_of_lm_head():
    lora = {"modules_to_save": ["lm_head"]}
    a = estimate(Plan.from_dict({"method": "lora"}))
    b = estimate(Plan.from_dict({"method": "lora", "lora": lora}))
    assert b.trainable_params - a.trainable_params == 128_256 * 4096     # Llama 3.1 8B's untied lm_head


def test_litgpt_gives_a_tied_model_its_own_lm_head():
    a = estimate(Plan.from_dict({**L1B, "precision": "bf16-pure"}))
    b = estimate(Plan.from_dict({**L1B, "precision": "bf16-pure", "stack": {"trainer": "litgpt"}}))
    assert b.trainable_params - a.trainable_params == V * H


def test_gpt_bigcode_is_a_multi_query_gpt2_block():
    # StarCoder (bigcode/starcoder config.json): wte 49152x6144, wpe 8192x6144; per layer two LayerNorms
    # (weight + bias), c_attn 6144 -> 6144 + 2*128 with bias, c_proj, c_fc 6144 -> 24576, c_proj back; ln_f
    h, inter, kv = 6144, 24576, 2 * 128
    layer = 4 * h + (h * (h + kv) + h + kv) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    expected = 49152 * h + 8192 * h + 40 * layer + 2 * h
    cfg = {"model_type": "gpt_bigcode", "n_embd": h, "n_layer": 40, "n_head": 48, "n_inner": inter,
           "vocab_size": 49152, "n_positions": 8192}
    arch = model_from_config(cfg)
    assert arch.total_params == expected and arch.num_kv_heads == 1


def test_an_unmodelled_model_type_is_refused_by_name():
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"model": {"model_type": REFUSED_TYPE, "hidden_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}})
    assert e.value.key == "model.model_type" and REFUSED_TYPE in str(e.value) and "gpt_bigcode" in str(e.value)


@pytest.mark.parametrize("plan, key", [
    ({"stack": {"trainer": "torchtitan"}, "framework": "fsdp", "zero_stage": 3, "method": "qlora"}, "method"),
    ({"stack": {"trainer": "torchtitan"}}, "framework"),                      # the default plan is DeepSpeed
    ({"stack": {"trainer": "torchtune"}, "framework": "ddp"}, "framework"),
    ({"stack": {"trainer": "litgpt", "transformers": "4.45"}, "framework": "single", "gpus_per_node": 1},
     "stack.transformers"),
    ({"activation_checkpointing": "selective-op"}, "activation_checkpointing"),
    ({"stack": {"trainer": "torchtune", "bitsandbytes": "0.42"}, "framework": "fsdp", "zero_stage": 3},
     "stack.bitsandbytes"),
    ({"stack": {"trainer": "torchtune"}, "framework": "fsdp", "zero_stage": 3, "method": "qlora",
      "quantization": {"type": "gptq"}}, "quantization.type"),
    ({"stack": {"trainer": "deepspeed"}}, "stack.trainer"),
    ({"stack": {"kbit_prepare": "maybe"}}, "stack.kbit_prepare"),
])
def test_software_that_cannot_run_is_refused_naming_the_key(plan, key):
    with pytest.raises(PlanError) as e:
        Plan.from_dict(plan)
    assert e.value.key == key


def test_selective_op_saves_torchtitans_list():
    p = {**L1B, "precision": "bf16-pure", "framework": "fsdp", "zero_stage": 3, "gpus_per_node": 2,
         "stack": {"trainer": "torchtitan"}, "activation_checkpointing": "selective-op"}
    acts = step_inputs(Plan.from_dict(p)).acts
    t, kv, a = 2048, 512, 32
    # per block (torchtitan 0.3.0, fused wqkv): wqkv (h + 2kv), w1 (I), w2 (h), attention out (h) + fp32 lse,
    # block input (h); wo and w3 (every second mm) recomputed
    assert acts.stack_saved == LAYERS_1B * (2 * t * ((H + 2 * kv) + I_1B + H + H + H) + 4 * a * t)


def test_torchtitan_rmsnorm_is_cudas_fused_kernel():
    # nn.RMSNorm with bf16 input and weight runs _fused_rms_norm on CUDA: it keeps the bf16 input (2 B) and the
    # fp32 rstd; HF's LlamaRMSNorm keeps an fp32 copy (4 B), the rsqrt and the bf16 normalised tensor (2 B)
    kw = {**L1B, "precision": "bf16-pure", "zero_stage": 0}
    titan = step_inputs(Plan.from_dict({**kw, "stack": {"trainer": "torchtitan"}})).acts
    hf = step_inputs(Plan.from_dict({**kw, "stack": {"trainer": "custom-loop"}})).acts
    t = 2048
    assert hf.stack_saved - titan.stack_saved == LAYERS_1B * 2 * (4 + 2 - 2) * t * H
    assert hf.head_saved - titan.head_saved == (4 + 2 - 2) * t * H           # the final norm


def test_a_plan_without_stack_is_todays_default_stack():
    assert estimate(Plan.from_dict({})).to_dict() == estimate(Plan.from_dict({"stack": {
        "trainer": "hf-trainer", "transformers": "5", "peft_adapter_dtype": "auto", "kbit_prepare": "auto",
        "bitsandbytes": "current", "optimizer_impl": "auto", "compile": "none", "fsdp_version": 1,
        "cuda_context": "lazy"}})).to_dict()


def test_old_bitsandbytes_inputs_survive_only_non_reentrant_checkpointing():
    kw = dict(precision="bf16-pure", method="qlora", activation_checkpointing="full",
              lora={"rank": 16, "alpha": 32, "dropout": 0.0})
    base5 = step_inputs(est(**kw).plan).acts.stack_saved
    old5 = step_inputs(est(**kw, stack={"bitsandbytes": "0.42"}).plan).acts.stack_saved
    # transformers 5 checkpoints non-reentrantly: every layer keeps its q/k/v, o_proj, gate/up and down inputs
    assert old5 - base5 == LAYERS_1B * 2 * 2048 * (3 * H + I_1B)
    # transformers 4.x's gradient_checkpointing_enable defaults to use_reentrant=True: no graph, nothing kept
    base4 = step_inputs(est(**kw, stack={"transformers": "4.46"}).plan).acts.stack_saved
    old4 = step_inputs(est(**kw, stack={"transformers": "4.46", "bitsandbytes": "0.42"}).plan).acts.stack_saved
    assert old4 == base4


@pytest.mark.parametrize("method", ["full", "lora"])
def test_torchtune_saves_expanded_kv_and_fp32_normalised_tensors(method):
    # torchtune 0.6.1 against HF (bf16 adapters both), Llama 3.2 1B, s 2048, b 1, bf16-pure, no checkpointing.
    # modules/attention.py MultiHeadAttention.forward expands k and v to the 32 query heads before SDPA (a
    # copy that SDPA saves): 2 tensors x 2 bytes x (h - kv) more per token and layer, full and LoRA.
    # modules/rms_norm.py RMSNorm: F.rms_norm(x.float(), weight=bf16 scale) falls back to aten's composite,
    # whose weight mul keeps the fp32 normalised tensor (4 bytes) where HF keeps hs.to(bf16) (2 bytes): only
    # when the scale trains (full), for the 2 norms of each layer and the final norm.
    # Its RoPE multiplies by its fp32 cache buffer: no (1, s, head_dim) bf16 cos/sin saved (HF: 2 of them).
    t, kv, head_dim = 2048, 512, 64
    kw = dict(precision="bf16-pure", method=method, lora={"rank": 16, "alpha": 32, "dropout": 0.0})
    hf = step_inputs(est(**kw, stack={"peft_adapter_dtype": "base"}).plan).acts
    tt = step_inputs(est(**kw, stack={"trainer": "torchtune"}).plan).acts
    kv_expand = 2 * 2 * t * (H - kv)                       # 6,144 B per token and layer
    norms = 2 * (4 - 2) * t * H if method == "full" else 0  # 8,192 B per token and layer (full)
    assert tt.stack_saved - hf.stack_saved == LAYERS_1B * (kv_expand + norms)
    final_norm = (4 - 2) * t * H if method == "full" else 0
    assert tt.head_saved - hf.head_saved == final_norm - 2 * 2 * t * head_dim
    # traced (tools/memtrace/golden/stacks, tt-l1b-*-chunked vs default): +0.445 GiB full, +0.187 GiB LoRA
    traced = {"full": 0.445, "lora": 0.187}[method]
    assert abs((tt.saved_total - hf.saved_total) / GIB - traced) < 0.002


def test_torchtune_checkpointed_layers_keep_only_their_inputs():
    kw = dict(precision="bf16-pure", activation_checkpointing="full")
    hf = step_inputs(est(**kw).plan).acts
    tt = step_inputs(est(**kw, stack={"trainer": "torchtune"}).plan).acts
    assert tt.stack_saved == hf.stack_saved == LAYERS_1B * 2 * 2048 * H


def test_fabric_bf16_mixed_lora_is_an_fp32_model_with_a_16_bit_copy_per_matmul_call():
    """LitGPT under Fabric "bf16-mixed": the model and its LoRA layers are fp32; each frozen linear's 16-bit
    autocast copy is kept by its matmul (autocast caches only leaves that require grad), lm_head's once per
    128-position chunk; the chunks' logits are cast to fp32 (convert_output). Llama 3.2 1B, s 2048, rank 16 on
    every linear (traced: tools/memtrace/golden/stacks/lit-l1b-lora-mixed.json)."""
    h, kv, inter, layers, V, r = 2048, 512, 8192, 16, 128256, 16
    block_linears = layers * (h * h + 2 * h * kv + h * h + 3 * h * inter)           # 973,078,528
    P = block_linears + V * h + layers * 2 * h + h                                 # tied: 1,235,814,400
    adapters = layers * r * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))   # 11,272,192
    plan = Plan.from_dict({"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1, "precision": "bf16-mixed",
                           "method": "lora",
                           "seq_len": 2048,
                           "micro_batch_size": 1, "gradient_accumulation_steps": 1, "stack": {"trainer": "litgpt"},
                           "lora": {"rank": r, "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                            "up_proj", "down_proj"]}})
    d = estimate(plan).per_gpu.detail
    assert d["frozen_params"] == 4 * (P + V * h)           # LitGPT's separate lm_head copy, fp32
    assert d["trainable_params"] == 4 * adapters
    chunks = 2048 // 128
    assert d["autocast_weight_copies"] == 2 * adapters + 2 * block_linears + 2 * V * h * chunks
    n = 2048 * V
    assert d["logits_kept_by_loop"] == 4 * n               # the loop's fp32 `logits`
