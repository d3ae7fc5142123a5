"""torchtune QLoRA: torchao 0.10.0 NF4Tensor storage (memory/lora.py torchao_nf4_bytes), hand-computed.

torchao/dtypes/nf4tensor.py NF4Tensor.from_tensor on a bf16 weight of n elements (block 64, scaler block 256):
quantized_data uint8 n/2, quantized_scalers int8 n/64, quantization_factor bf16 n/64/256, scaler_mean bf16 (one),
nf4 table bf16 x 16. Traced on a 2048 x 8192 gate_proj (tools/memtrace/tune.py fake_nf4): 8,388,608 + 262,144
+ 2,048 + 2 + 32 bytes; Llama 3.2 1B's weights in tools/memtrace/golden/stacks/tt-l1b-qlora-chunked.json.
"""
import json
import pathlib

from zerocalc import Plan
from zerocalc.memory.lora import torchao_nf4_bytes
from tools.memtrace.compare import engine_breakdown

ROW = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "stacks" / "tt-l1b-qlora-chunked.json"


def test_one_nf4_weight():
    n = 2048 * 8192                      # 16,777,216
    assert torchao_nf4_bytes(n, 2) == 8_388_608 + 262_144 + 2 * 1_024 + 2 + 2 * 16


def _plan(trainer):
    plan = json.loads(ROW.read_text())["plan"]
    plan["stack"] = {"trainer": trainer}
    if trainer != "torchtune":
        plan["loss"] = "standard"
    return plan


def test_llama_3_2_1b_base_torchtune_vs_bitsandbytes():
    # per layer: q, o 2048x2048; k, v 512x2048; gate, up, down 8192x2048; 16 layers, 7 NF4 weights each
    n = 16 * (2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048)
    assert n == 973_078_528
    blocks = n // 64                     # 15,204,352
    groups = blocks // 256               # 59,392
    kept = 2 * (128256 * 2048 + 2048 * (2 * 16 + 1))      # bf16 embedding (tied head) and 33 RMSNorm scales
    torchao = n // 2 + blocks + 2 * groups + 112 * (2 + 32) + kept
    bnb = n // 2 + blocks + 4 * groups + kept             # fp32 second-level absmax per 256 blocks
    assert torchao == 1_027_337_952      # the traced weights of tt-l1b-qlora-chunked, to the byte
    assert engine_breakdown(_plan("torchtune"))["components"]["weights"] == torchao
    assert engine_breakdown(_plan("hf-trainer"))["components"]["weights"] == bnb
    assert json.loads(ROW.read_text())["bytes"]["peak"]["weights"] == torchao


def test_torchao_dequantization_transient_by_hand():
    """NF4Tensor.get_original_weight on a 2048 x 8192 gate_proj: two int64 code tensors of n/2 (8 n B), the
    bf16 dequantised halves and their scaled copies (4 n B), torch.stack's bf16 output (2 n B), the block scalers'
    dequantisation (3 n / 64 B) and the second-level factors' (2 B per 16,384 elements): 235,669,504 B as traced
    (tt-l1b-qlora-s128-chunked)."""
    from zerocalc.memory.inputs import dequant_bytes
    from zerocalc.memory.precision import dtypes_for
    from zerocalc.memory.stack import effective_stack

    n = 2048 * 8192
    assert 14 * n + 3 * n // 64 + 2 * (n // 16384) == 235_669_504
    plan = Plan.from_dict({"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1,
                           "precision": "bf16-pure", "method": "qlora", "stack": {"trainer": "torchtune"},
                           "quantization": {"type": "nf4", "double_quant": True, "compute_dtype": "bf16"}})
    assert dequant_bytes(plan, dtypes_for(plan), effective_stack(plan), n) == 235_669_504
    hf = Plan.from_dict({**plan.to_dict(), "stack": {"trainer": "hf-trainer"}})
    assert dequant_bytes(hf, dtypes_for(hf), effective_stack(hf), n) == 2 * n      # bitsandbytes: one bf16 copy


def test_the_dequantised_weight_inside_the_top_layers_forward():
    """torchao's LinearNF4 forward (`F.linear(input, weight.to(input.dtype))`) dequantises as its backward does:
    at s 128 the traced peak is inside the last layer's forward, at op stack, where the activations are every
    layer's saved tensors (218,844,212 B at forward end, head included) plus the 235,669,504 B transient; no logits
    yet. The engine's `fwd_top` moment is that peak; bitsandbytes' plans and compiled torchtune get no such moment."""
    s128 = ROW.parent / "tt-l1b-qlora-s128-chunked.json"
    row = json.loads(s128.read_text())
    peak = row["bytes"]["peak"]
    assert (peak["phase"], peak["op"], peak["logits"]) == ("forward", "stack", 0)
    n = 2048 * 8192
    transient = 14 * n + 3 * n // 64 + 2 * (n // 16384)
    saved = peak["activations"] - transient
    assert abs(saved - row["bytes"]["forward_end"]["activations"]) < 2**20      # within 1 MiB of forward end's
    from zerocalc import estimate
    pg = estimate(Plan.from_dict(row["plan"])).per_gpu
    assert pg.phase == "fwd_top"
    assert abs(pg.peak_allocated - peak["bytes"]) / peak["bytes"] <= 0.03
    # without the transient the moment is below the end of forward (no head activations, no logits yet)
    assert pg.phase_allocated["fwd_top"] - transient < pg.phase_allocated["fwd"]
    for stack in ({"trainer": "hf-trainer"}, {"trainer": "torchtune", "compile": "model"}):
        plan = {**row["plan"], "stack": stack, "loss": "chunked" if stack["trainer"] == "torchtune" else "standard"}
        assert "fwd_top" not in estimate(Plan.from_dict(plan)).per_gpu.phase_allocated
