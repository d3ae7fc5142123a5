"""memtrace with a plan-v1 `stack` (Extension 1) on tiny configs: differences checked against hand-computed bytes.

Tiny Llama (as tests/test_tracer_unit.py): h=64, 2 layers, a=4, n_kv=2, hd=16 (kv=32), I=128, V=512, untied;
b=2, s=32, so s*b = 64 tokens. P = 139584 parameters (arithmetic in test_tracer_unit.py's docstring).
LoRA r=16 on all 7 projections, per layer r*(in+out): q 16*(64+64)=2048, k 16*(64+32)=1536, v 1536, o 2048,
gate/up/down 16*(64+128)=3072 each -> 16384 per layer, 32768 in all.

Only what the tools venv (transformers 5, peft 0.21) runs is re-traced here; the pinned venvs of
`make trace-stacks` are checked when present and skipped otherwise.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tools.memtrace.trace import trace  # noqa: E402

pytestmark = pytest.mark.tools

B, S, H, L, I, V, HD, R = 2, 32, 64, 2, 128, 512, 16, 16
SB = S * B
PARAMS = 139584
LORA_PARAMS = 32768
TINY = {"model_type": "llama", "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": HD, "intermediate_size": I, "vocab_size": V,
        "tie_word_embeddings": False}
LORA = {"rank": R, "alpha": 32, "dropout": 0.0,
        "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plan(stack=None, **kw):
    p = {"model": dict(TINY), "micro_batch_size": B, "seq_len": S, "precision": "bf16-pure", "attention": "flash",
         "method": "full", "gradient_accumulation_steps": 1, "optimizer": "adamw", "activation_checkpointing": "none",
         "framework": "single", "zero_stage": 0, "gpus_per_node": 1, "nodes": 1, "stack": dict(stack or {})}
    if kw.get("method") in ("lora", "qlora"):
        p["lora"] = dict(LORA)
    p.update(kw)
    return p


def step_extra(res):
    """Bytes the optimizer step adds on top of the end of backward."""
    return res["phase_peaks"]["step"]["bytes"] - res["marks"]["backward_end"]["bytes"]


@pytest.fixture(scope="module")
def loops():
    return {t: trace(plan({"trainer": t, "optimizer_impl": "fused"})) for t in ("hf-trainer", "custom-loop")}


# -- 1. two steps, custom loop ------------------------------------------------------------------------------
def test_hf_trainer_steps_are_identical(loops):
    hf = loops["hf-trainer"]
    assert len(hf["steps"]) == 2
    assert hf["steps"][0]["peak"]["bytes"] == hf["steps"][1]["peak"]["bytes"]   # warm-up made step 1 steady
    assert hf["steps"][1]["marks"]["start"]["components"]["logits"] == 0


def test_custom_loop_keeps_bf16_logits(loops):
    hf, cl = loops["hf-trainer"], loops["custom-loop"]
    bf16_logits = 2 * SB * V                                   # out.logits, bf16: 2*64*512 = 65536
    assert cl["peak_bytes"] - hf["peak_bytes"] == bf16_logits == 65536
    # at the loss backward: HF holds 3 fp32 (s*b*V) tensors (12sbV), the custom loop also out.logits (14sbV)
    assert hf["peak"]["components"]["logits"] == 12 * SB * V == 393216
    assert cl["peak"]["components"]["logits"] == 14 * SB * V == 458752
    # step 2 starts with step 1's logits still bound to `out`; they go when the new forward returns
    assert cl["steps"][1]["marks"]["start"]["components"]["logits"] == bf16_logits
    assert cl["marks"]["step_end"]["components"]["logits"] == bf16_logits
    assert cl["marks"]["after_loop"]["components"]["logits"] == 0


# -- 2. torch AdamW implementations ---------------------------------------------------------------------------
@pytest.mark.parametrize("precision,itemsize", [("bf16-pure", 2), ("bf16-mixed", 4)])
def test_adamw_step_transients(precision, itemsize):
    r = {impl: trace(plan({"optimizer_impl": impl}, precision=precision, activation_checkpointing="full"))
         for impl in ("fused", "foreach", "single-tensor")}
    assert r["fused"]["optimizer_impl"] == "fused"
    assert step_extra(r["fused"]) == 0
    # foreach: _foreach_sqrt(exp_avg_sqs) is one full copy of the second moments, in the param dtype
    assert step_extra(r["foreach"]) == itemsize * PARAMS
    # single-tensor: sqrt and division temporaries of the largest parameter (embed / lm_head, V*h = 32768),
    # while the previous parameter's `denom` (the final norm, h elements) is still bound
    assert step_extra(r["single-tensor"]) == itemsize * (2 * V * H + H)


def test_custom_loop_auto_is_foreach():
    r = trace(plan({"trainer": "custom-loop"}, activation_checkpointing="full"))
    assert r["optimizer_impl"] == "foreach"
    assert step_extra(r) == 2 * PARAMS


# -- 3. PEFT adapter dtype, prepare_model_for_kbit_training, bitsandbytes 0.42 ------------------------------
def test_adapter_dtype_fp32_vs_base_under_bf16_pure():
    f = trace(plan({"peft_adapter_dtype": "fp32"}, method="lora"))
    b = trace(plan({"peft_adapter_dtype": "base"}, method="lora"))
    assert f["peak"]["components"]["lora_adapters"] == 4 * LORA_PARAMS == 131072
    assert b["peak"]["components"]["lora_adapters"] == 2 * LORA_PARAMS == 65536
    # docs/tracer.md §3: per layer 36sbh + 4sb*kv + 10sbI + 4asb + 28sbr (fp32) vs 16sbh + 4sb*kv + 8sbI + 4asb
    # + 14sbr (bf16): the fp32 casts of every adapted input cost 20sbh + 2sbI + 14sbr more per layer
    per_layer = 20 * SB * H + 2 * SB * I + 14 * SB * R          # 81920 + 16384 + 14336 = 112640
    assert f["saved_activations_forward_end"] - b["saved_activations_forward_end"] == L * per_layer == 225280


@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_kbit_prepare_casts_to_fp32(ckpt):
    q = trace(plan({"kbit_prepare": False}, method="qlora", precision="bf16-mixed", activation_checkpointing=ckpt))
    k = trace(plan({"kbit_prepare": True}, method="qlora", precision="bf16-mixed", activation_checkpointing=ckpt))
    # every 16-bit parameter that is not 4-bit goes bf16 -> fp32 (+2 B): embed + lm_head (V*h each), final norm
    # (h) and two norms per layer (2*L*h) = 2 * (65536 + 64 + 256) = 131712
    assert k["peak"]["components"]["weights"] - q["peak"]["components"]["weights"] == 2 * (2 * V * H + H + 2 * L * H)
    if ckpt == "full":
        # fp32 checkpoint inputs (+2sbh per layer) and autocast's bf16 copy of the fp32 lm_head weight, saved by
        # the matmul (2Vh); the rest (fp32 RoPE cos/sin) is at most 4*s*b*hd
        extra = k["saved_activations_forward_end"] - q["saved_activations_forward_end"]
        low = L * 2 * SB * H + 2 * V * H                        # 16384 + 65536 = 81920
        assert low <= extra <= low + 4 * SB * HD
    else:
        # without checkpointing the residual stream is fp32: bnb Linear4bit.forward casts its output back to the
        # input's dtype (.to(inp_dtype)) and PEFT adds the bf16 LoRA output to it, so gate/up outputs, silu's
        # output (all saved by silu / mul) are fp32 instead of bf16: +2 B x 3 x sbI per layer. Norm inputs
        # (fp32 either way) and SDPA's q/k/v (autocast's bf16 copies instead of bf16 originals) do not change;
        # the two (1, s, hd) RoPE cos/sin go fp32 (+2 B each); lm_head keeps autocast's bf16 weight copy (2Vh)
        extra = k["saved_activations_forward_end"] - q["saved_activations_forward_end"]
        assert extra == L * 3 * 2 * SB * I + 2 * 2 * S * HD + 2 * V * H == 98304 + 2048 + 65536


def test_bnb_042_keeps_each_4bit_input_through_checkpointing():
    cur = trace(plan({}, method="qlora", precision="bf16-mixed", activation_checkpointing="full"))
    old = trace(plan({"bitsandbytes": "0.42"}, method="qlora", precision="bf16-mixed", activation_checkpointing="full"))
    # ctx.tensors = (A, B) keeps every distinct 4-bit input per layer, bf16: the q/k/v input, the o_proj input,
    # the gate/up input (2sbh each) and the down_proj input (2sbI); checkpointing cannot drop a ctx attribute
    per_layer = 3 * 2 * SB * H + 2 * SB * I                     # 24576 + 16384 = 40960
    assert old["saved_activations_forward_end"] - cur["saved_activations_forward_end"] == L * per_layer == 81920


# -- 4. pinned venvs (make trace-stacks): checked only when present ------------------------------------------
@pytest.mark.parametrize("venv,era,kept", [(".venv-tf445", "4.45", 4), (".venv-tf448", "4.46", 2)])
def test_pinned_transformers_custom_loop_logits(venv, era, kept):
    py = os.path.join(ROOT, venv, "bin", "python")
    if not os.path.exists(py):
        pytest.skip(f"{venv} absent (built by `make trace-stacks`)")
    code = ("import json,sys,warnings; warnings.filterwarnings('ignore');"
            "from tools.memtrace.trace import trace;"
            "p=json.loads(sys.argv[1]); r=trace(p);"
            "print(json.dumps(r['marks']['step_end']['components']['logits']))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "py")]))
    p = plan({"trainer": "custom-loop", "transformers": era, "optimizer_impl": "fused"})
    out = subprocess.run([py, "-c", code, json.dumps(p)], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    # 4.45: the model's forward upcasts, out.logits is fp32 (4sbV); 4.46-4.57: bf16 (2sbV), as in 5.x
    assert json.loads(out.stdout.strip().splitlines()[-1]) == kept * SB * V


# -- 6. other trainers' own code (make trace-stacks venvs): checked only when present ------------------------
L1B_P = 1235814400           # Llama 3.2 1B parameters, embedding tied to lm_head
L1B_V, L1B_H = 128256, 2048


def _run_in(venv, module, func, p):
    py = os.path.join(ROOT, venv, "bin", "python")
    if not os.path.exists(py):
        pytest.skip(f"{venv} absent (built by `make trace-stacks`)")
    code = (f"import json,sys,warnings; warnings.filterwarnings('ignore'); from {module} import {func} as t;"
            "r=t(json.loads(sys.argv[1])); print(json.dumps({'peak': r['peak'], 'marks': r['marks'],"
            " 'phase_peaks': r['phase_peaks']}))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "py")]))
    out = subprocess.run([py, "-c", code, json.dumps(p)], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_torchtune_chunked_loss():
    p = plan({"trainer": "torchtune"}, model="llama-3.2-1b", seq_len=64, loss="chunked")
    r = _run_in(".venv-torchtune", "tools.memtrace.tune", "trace_tune", p)
    sbv = 64 * B * L1B_V
    # after `del logits` only the 8 chunks' fp32 log-softmax outputs are saved: 4sbV
    assert r["marks"]["forward_end"]["components"]["logits"] == 4 * sbv
    # the loss backward works chunk by chunk: 3 fp32 tensors of one chunk (12sbV / 8), not 12sbV
    assert r["phase_peaks"]["backward"]["components"]["logits"] <= 12 * sbv // 8
    assert r["peak"]["components"]["weights"] == 2 * L1B_P           # bf16, tied like the HF model


def test_litgpt_untied_lm_head_and_kept_logits():
    p = plan({"trainer": "litgpt"}, model="llama-3.2-1b", seq_len=64)
    r = _run_in(".venv-litgpt", "tools.memtrace.lit", "trace_lit", p)
    # Config "Llama-3.2-1B" has its own lm_head: P + V*h parameters, bf16
    assert r["peak"]["components"]["weights"] == 2 * (L1B_P + L1B_V * L1B_H)
    # `logits` (bf16, b x s x V) is a loop variable: still bound after the step
    assert r["marks"]["step_end"]["components"]["logits"] == 2 * 64 * B * L1B_V
